package caps

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestWrap(t *testing.T) {
	if Wrap("x", NetRaw, nil) != nil {
		t.Fatal("nil error must stay nil")
	}
	err := Wrap("socket(AF_XDP)", NetRaw, syscall.EPERM)
	var ce *Error
	if !errors.As(err, &ce) || ce.Cap != NetRaw {
		t.Fatalf("EPERM not turned into a capability error: %v", err)
	}
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Fatalf("error %q does not match os.ErrPermission or lacks the capability", err)
	}
	err = Wrap("bind", NetAdmin, syscall.EINVAL)
	if errors.As(err, &ce) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("EINVAL wrongly annotated: %v", err)
	}
}
