package xsk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/internal/seccomp"
	"github.com/xdpkit/xdpkit/test/vethns"
)

const napiChildEnv = "XK_NAPI_CHILD"

// TestNAPIDeferral sets a veth's NAPI deferral with SetNAPIDeferral and
// reads it back with napi-get, in four ways:
//   - napi-set: on the NAPI instances that an attached XDP program gives
//     the veth, with irq-suspend-timeout, then restored;
//   - sysfs without the netdev family: in a child under ip netns exec
//     (which mounts the namespace's sysfs) whose generic netlink sockets
//     fail as on a kernel before 6.3 (seccomp); the parent reads the
//     NAPIs' settings while the child holds the change and after it
//     restored it, and the child finds irq-suspend-timeout refused as
//     unsupported;
//   - sysfs without napi-set: the same, with napi-get answering and
//     napi-set refused as on Linux 6.8 to 6.12 (napiSet replaced);
//   - refused: a thread that entered the namespace with setns sees the
//     host's sysfs, and a device without NAPI instances would need it:
//     ErrNAPISysfs, and nothing changes.
func TestNAPIDeferral(t *testing.T) {
	if arg := os.Getenv(napiChildEnv); arg != "" {
		mode, ifname, _ := strings.Cut(arg, ",")
		if err := napiChild(mode, ifname); err != nil {
			t.Fatal(err)
		}
		return
	}
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)

	// napis reads the settings of ifname's NAPI instances in ns.
	napis := func(t *testing.T, ns *vethns.NS, ifname string) []netdev.NAPI {
		t.Helper()
		var got []netdev.NAPI
		err := ns.Do(func() error {
			ifi, err := net.InterfaceByName(ifname)
			if err != nil {
				return err
			}
			got, err = netdev.NAPIs(ifi.Index)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := func(t *testing.T, what string, got []netdev.NAPI, d uint32, flush, irqs time.Duration) {
		t.Helper()
		if len(got) == 0 {
			t.Fatalf("%s: no NAPI instances", what)
		}
		for _, n := range got {
			if n.DeferHardIRQs != d || n.GROFlushTimeout != flush || n.IRQSuspendTimeout != irqs {
				t.Errorf("%s: NAPI %d has defer-hard-irqs %d, gro-flush-timeout %v, irq-suspend-timeout %v; want %d, %v, %v",
					what, n.ID, n.DeferHardIRQs, n.GROFlushTimeout, n.IRQSuspendTimeout, d, flush, irqs)
			}
		}
	}

	// The XDP program gives B's veth its NAPI instances.
	var prog *Program
	if err := b.Do(func() (err error) {
		prog, err = AttachProgram(p.B.Name, &ProgramConfig{Mode: AttachNative})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Do(prog.Close); err != nil {
			t.Error(err)
		}
	}()
	// napi-get reports the settings from 6.13, irq-suspend-timeout 6.14.
	// Where the library finds either missing, it refuses
	// irq-suspend-timeout as unsupported, and changes nothing.
	var probe error
	if err := b.Do(func() error {
		ifi, err := net.InterfaceByName(p.B.Name)
		if err != nil {
			return err
		}
		list, err := netdev.NAPIs(ifi.Index)
		switch {
		case err != nil:
			probe = err
		case len(list) > 0 && !list[0].HasIRQSuspendTimeout:
			probe = fmt.Errorf("napi-get reports no irq-suspend-timeout: %w", errors.ErrUnsupported)
		}
		if probe == nil {
			return nil
		}
		c, err := SetNAPIDeferral(p.B.Name, NAPIDeferral{IRQSuspendTimeout: time.Millisecond})
		if err == nil {
			c.Restore()
			return fmt.Errorf("irq-suspend-timeout set via %s, though %v", c.Via(), probe)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("irq-suspend-timeout where %v: %w, want errors.ErrUnsupported", probe, err)
		}
		probe = fmt.Errorf("%v; SetNAPIDeferral: %w", probe, err)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if probe != nil {
		vethns.NotApplicable(t, "NAPI deferral per NAPI instance", probe.Error())
	}
	want(t, "before", napis(t, b, p.B.Name), 0, 0, 0)

	t.Run("napi-set", func(t *testing.T) {
		var c *NAPIChange
		if err := b.Do(func() (err error) {
			c, err = SetNAPIDeferral(p.B.Name, NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond,
				IRQSuspendTimeout: time.Millisecond})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("via %s", c.Via())
		if !strings.HasPrefix(c.Via(), "netdev napi-set") {
			t.Errorf("Via %q, want netdev napi-set", c.Via())
		}
		want(t, "set", napis(t, b, p.B.Name), 2, 200*time.Microsecond, time.Millisecond)
		if err := b.Do(c.Restore); err != nil {
			t.Fatal(err)
		}
		want(t, "restored", napis(t, b, p.B.Name), 0, 0, 0)
	})

	for _, mode := range []string{"no-genl", "no-napi-set"} {
		t.Run("sysfs-"+mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", b.Name, os.Args[0], "-test.run=^TestNAPIDeferral$", "-test.v")
			cmd.Env = append(os.Environ(), napiChildEnv+"="+mode+","+p.B.Name)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			lines := bufio.NewScanner(stdout)
			set := false
			for !set && lines.Scan() {
				out.WriteString(lines.Text() + "\n")
				set = strings.HasPrefix(lines.Text(), "napi child: set")
			}
			if set {
				want(t, "set by the child", napis(t, b, p.B.Name), 3, 300*time.Microsecond, 0)
			}
			stdin.Close() // the child restores and exits
			rest, _ := io.ReadAll(stdout)
			out.Write(rest)
			err = cmd.Wait()
			t.Logf("child:\n%s%s", out.String(), stderr.String())
			if err != nil || !set {
				t.Fatalf("child: %v (set: %v)", err, set)
			}
			for _, s := range []string{"via sysfs", "irq-suspend-timeout: unsupported", "napi child: restored"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("child does not say %q", s)
				}
			}
			want(t, "restored by the child", napis(t, b, p.B.Name), 0, 0, 0)
		})
	}

	t.Run("refused", func(t *testing.T) {
		if n := napis(t, a, p.A.Name); len(n) != 0 {
			t.Fatalf("%s has %d NAPI instances without XDP: this case needs none", p.A.Name, len(n))
		}
		err := a.Do(func() error {
			c, err := SetNAPIDeferral(p.A.Name, NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond})
			if err == nil {
				c.Restore()
				return fmt.Errorf("set via %s from a setns thread", c.Via())
			}
			if !errors.Is(err, ErrNAPISysfs) {
				return fmt.Errorf("%w, want ErrNAPISysfs", err)
			}
			t.Logf("SetNAPIDeferral: %v", err)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := a.Exec(context.Background(), "cat", "/sys/class/net/"+p.A.Name+"/napi_defer_hard_irqs",
			"/sys/class/net/"+p.A.Name+"/gro_flush_timeout")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(out)); len(f) != 2 || f[0] != "0" || f[1] != "0" {
			t.Errorf("%s's sysfs settings changed: %q", p.A.Name, out)
		}
	})
}

// napiChild is the child's side of TestNAPIDeferral's sysfs cases, in
// ifname's namespace (ip netns exec): without generic netlink (mode
// "no-genl") or without napi-set ("no-napi-set") it sets the deferral
// through sysfs, says so, waits for its stdin to close, then restores it.
func napiChild(mode, ifname string) error {
	switch mode {
	case "no-genl":
		if err := seccomp.Install("genl"); err != nil {
			return err
		}
	case "no-napi-set":
		napiSet = func(uint32, netdev.NAPISettings) error {
			return &netdev.UnsupportedError{Feature: "napi-set", Kernel: "6.13", Err: unix.EOPNOTSUPP}
		}
	default:
		return fmt.Errorf("napi child: mode %q", mode)
	}
	_, err := SetNAPIDeferral(ifname, NAPIDeferral{DeferHardIRQs: 3, GROFlushTimeout: 300 * time.Microsecond,
		IRQSuspendTimeout: time.Millisecond})
	if !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("irq-suspend-timeout without napi-set: %v, want ErrUnsupported", err)
	}
	fmt.Printf("irq-suspend-timeout: unsupported (%v)\n", err)
	c, err := SetNAPIDeferral(ifname, NAPIDeferral{DeferHardIRQs: 3, GROFlushTimeout: 300 * time.Microsecond})
	if err != nil {
		return err
	}
	fmt.Printf("via %s\n", c.Via())
	fmt.Println("napi child: set")
	io.Copy(io.Discard, os.Stdin)
	if err := c.Restore(); err != nil {
		return err
	}
	fmt.Println("napi child: restored")
	return nil
}
