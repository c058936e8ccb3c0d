package xsk

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNAPIDeferralArgs: out-of-range settings and unknown devices are
// refused before anything changes (TestNAPIDeferral sets real ones).
func TestNAPIDeferralArgs(t *testing.T) {
	for _, tc := range []struct {
		ifname string
		d      NAPIDeferral
		want   string
	}{
		{"lo", NAPIDeferral{GROFlushTimeout: -1}, "out of range"},
		{"lo", NAPIDeferral{IRQSuspendTimeout: -time.Second}, "out of range"},
		{"lo", NAPIDeferral{DeferHardIRQs: 1 << 31}, "out of range"},
		{"xk-no-such-if", NAPIDeferral{DeferHardIRQs: 2}, "xk-no-such-if"},
	} {
		c, err := SetNAPIDeferral(tc.ifname, tc.d)
		if tc.ifname != "lo" && !errors.Is(err, ErrNoDevice) {
			t.Errorf("SetNAPIDeferral(%q): %v, does not match ErrNoDevice", tc.ifname, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetNAPIDeferral(%q, %+v) = %v, %v; want an error saying %q", tc.ifname, tc.d, c, err, tc.want)
		}
	}
	var c *NAPIChange
	if err := c.Restore(); err != nil {
		t.Errorf("Restore of a nil change: %v", err)
	}
}
