package apps_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/apps/internal/cli"
)

var (
	ndrOnce sync.Once
	ndrErr  error
)

// xdpndrPath builds xdpndr next to the other programs (TestMain builds
// those), once; a prebuilt XDPKIT_APPS_BIN must hold it already.
func xdpndrPath(t *testing.T) string {
	t.Helper()
	p := path("xdpndr")
	ndrOnce.Do(func() {
		if fileExists(p) {
			return
		}
		if os.Getenv("XDPKIT_APPS_BIN") != "" {
			ndrErr = fmt.Errorf("%s: not built (build ./xdpndr into XDPKIT_APPS_BIN)", p)
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Dir(p)+"/", "./xdpndr").CombinedOutput()
		if err != nil {
			ndrErr = fmt.Errorf("building xdpndr: %v\n%s", err, out)
		}
	})
	if ndrErr != nil {
		t.Fatal(ndrErr)
	}
	return p
}

type ndrTrial struct {
	Type             string
	N                int
	RatePPS, LossPct float64
	Sent, Received   uint64
	AchievedPPS      float64
	Pass             bool
	LoPPS, HiPPS     float64
	Converged        bool
	Trials           int
	Reason           string
}

// TestNDRFindsBottleneck: xdpndr, run against a forwarder capped at a
// known rate (xdpfwd -max-pps), finds that rate: its NDR is within
// [0.5, 1.05] of it (above it by at most what the bucket lets through in
// a trial, -max-burst over -trial, 3% here; below it when a busy machine
// stalls the generator longer than the bucket holds, 120 ms here, or a
// program longer than its rings hold), the search converges within its
// trials, every trial well above the cap fails and the forwarder dropped
// what it policed. A failed trial runs once more (-retries 1): a rate
// above the cap fails both times, one below it fails only when the host
// dropped packets twice. The cap is low, so that the three programs need
// little CPU and their 4096-packet rings hold 400 ms of traffic.
func TestNDRFindsBottleneck(t *testing.T) {
	const (
		capPPS = 10_000
		trial  = 4 * time.Second
		burst  = 1200 // 120 ms at the cap; 3% of it over a 4 s trial
	)
	b := newBedAs(t, nil, "-max-pps", fmt.Sprint(capPPS), "-max-burst", fmt.Sprint(burst))
	ndr := xdpndrPath(t)
	stdout, stderr, code := runIn(t, nil, 10*time.Minute, ndr, "-bin", bin,
		"-gen-ns", b.t.Gen.Name, "-gen-i", b.t.In.A.Name, "-dst", b.t.Out.B.IPv4.Addr().String(),
		"-recv-ns", b.t.Recv.Name, "-recv-i", b.t.Out.B.Name,
		"-min", "1k", "-max", fmt.Sprint(2*capPPS), "-trial", trial.String(), "-resolution", "2%", "-max-trials", "14", "-retries", "1")
	if code != 0 {
		t.Fatalf("xdpndr: exit %d: %s\n%s", code, stderr, stdout)
	}
	var trials []ndrTrial
	var res *ndrTrial
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var x ndrTrial
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		switch x.Type {
		case "trial":
			trials = append(trials, x)
		case "result":
			res = &x
		default:
			t.Fatalf("line of type %q: %s", x.Type, line)
		}
	}
	if res == nil {
		t.Fatalf("no result line:\n%s", stdout)
	}
	t.Logf("NDR %.0f pps against a cap of %d pps after %d trials (%s)", res.RatePPS, capPPS, res.Trials, res.Reason)
	if !res.Converged || res.Trials != len(trials) || res.Trials > 14 {
		t.Errorf("not converged, or %d trials with %d lines: %+v\n%s", res.Trials, len(trials), res, stdout)
	}
	if res.RatePPS < 0.5*capPPS || res.RatePPS > 1.05*capPPS {
		t.Errorf("NDR %.0f pps: want within [0.5, 1.05] x %d\n%s", res.RatePPS, capPPS, stdout)
	}
	for _, tr := range trials {
		if tr.Received > tr.Sent || tr.Pass != (tr.LossPct == 0 && tr.AchievedPPS >= 0.95*tr.RatePPS) {
			t.Errorf("trial %d inconsistent: %+v", tr.N, tr)
		}
		if tr.RatePPS > 1.1*capPPS && tr.Pass {
			t.Errorf("trial %d at %.0f pps passed through a %d pps cap", tr.N, tr.RatePPS, capPPS)
		}
	}
	if err := b.fwd.Stop(10 * time.Second); err != nil {
		t.Fatalf("xdpfwd: %v: %s", err, b.fwd.Stderr())
	}
	var fs struct{ Forwarded, Policed uint64 }
	if err := cli.ParseSummary(b.fwd.Output(), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Policed == 0 {
		t.Errorf("the forwarder policed nothing (forwarded %d): the cap was not what the search found", fs.Forwarded)
	}
}

// TestNDRBadFlags: xdpndr refuses flags it cannot use with one line and
// exit code 2, before it starts anything.
func TestNDRBadFlags(t *testing.T) {
	ndr := xdpndrPath(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-gen-i, -recv-i and -dst are required"},
		{[]string{"-topo", "-gen-i", "x"}, "-topo builds its own"},
		{[]string{"-topo", "-resolution", "0.02"}, "-resolution"},
		{[]string{"-topo", "-resolution", "100%"}, "-resolution"},
		{[]string{"-topo", "-min", "10k", "-max", "5k"}, "bad search config"},
		{[]string{"-topo", "-start", "2M"}, "bad search config"},
		{[]string{"-topo", "-loss", "100"}, "bad search config"},
		{[]string{"-topo", "-max-trials", "0"}, "bad search config"},
		{[]string{"-topo", "-trial", "1ms"}, "-trial"},
		{[]string{"-topo", "-bin", "/nonexistent"}, "no xdpgen there"},
		{[]string{"-gen-i", "a", "-recv-i", "b", "-dst", "198.18.0.1", "-ipv6"}, "go with -topo"},
	} {
		_, stderr, code := runIn(t, nil, 10*time.Second, ndr, append([]string{"-bin", bin}, tc.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("xdpndr %v: exit %d, stderr %q; want exit %d and %q on one line", tc.args, code, stderr, cli.ExitUsage, tc.want)
		}
	}
}
