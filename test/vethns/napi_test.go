package vethns

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

	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/internal/seccomp"
	"github.com/xdpkit/xdpkit/xsk"
)

const napiChildEnv = "XK_NAPI_CHILD"

// TestNAPIDeferral sets a veth's NAPI deferral with xsk.SetNAPIDeferral
// and reads it back with napi-get, in three ways:
//   - napi-set: on the NAPI instances that an attached XDP program gives
//     the veth, with irq-suspend-timeout, then restored;
//   - sysfs: in a child under ip netns exec (which mounts the namespace's
//     sysfs) whose generic netlink sockets fail as on a kernel without the
//     netdev family (seccomp); the parent reads the NAPIs' settings
//     while the child holds the change and after it restored it, and the
//     child finds irq-suspend-timeout refused as unsupported;
//   - refused: a thread that entered the namespace with setns sees the
//     host's sysfs, and a device without NAPI instances would need it:
//     ErrNAPISysfs, and nothing changes.
func TestNAPIDeferral(t *testing.T) {
	if arg := os.Getenv(napiChildEnv); arg != "" {
		if err := napiChild(arg); err != nil {
			t.Fatal(err)
		}
		return
	}
	Require(t)
	a, b := NewNS(t), NewNS(t)
	p := NewPair(t, a, b, nil)

	// napis reads the settings of ifname's NAPI instances in ns.
	napis := func(ns *NS, ifname string) []netdev.NAPI {
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
	want := func(what string, got []netdev.NAPI, d uint32, flush, irqs time.Duration) {
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
	var prog *xsk.Program
	if err := b.Do(func() (err error) {
		prog, err = xsk.AttachProgram(p.B.Name, &xsk.ProgramConfig{Mode: xsk.AttachNative})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Do(prog.Close); err != nil {
			t.Error(err)
		}
	}()
	before := napis(b, p.B.Name)
	want("before", before, 0, 0, 0)

	t.Run("napi-set", func(t *testing.T) {
		var c *xsk.NAPIChange
		if err := b.Do(func() (err error) {
			c, err = xsk.SetNAPIDeferral(p.B.Name, xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond,
				IRQSuspendTimeout: time.Millisecond})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("via %s", c.Via())
		if !strings.HasPrefix(c.Via(), "netdev napi-set") {
			t.Errorf("Via %q, want netdev napi-set", c.Via())
		}
		want("set", napis(b, p.B.Name), 2, 200*time.Microsecond, time.Millisecond)
		if err := b.Do(c.Restore); err != nil {
			t.Fatal(err)
		}
		want("restored", napis(b, p.B.Name), 0, 0, 0)
	})

	t.Run("sysfs", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", b.Name, os.Args[0], "-test.run=^TestNAPIDeferral$", "-test.v")
		cmd.Env = append(os.Environ(), napiChildEnv+"="+p.B.Name)
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
			want("set by the child", napis(b, p.B.Name), 3, 300*time.Microsecond, 0)
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
		want("restored by the child", napis(b, p.B.Name), 0, 0, 0)
	})

	t.Run("refused", func(t *testing.T) {
		if n := napis(a, p.A.Name); len(n) != 0 {
			t.Fatalf("%s has %d NAPI instances without XDP: this case needs none", p.A.Name, len(n))
		}
		err := a.Do(func() error {
			c, err := xsk.SetNAPIDeferral(p.A.Name, xsk.NAPIDeferral{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond})
			if err == nil {
				c.Restore()
				return fmt.Errorf("set via %s from a setns thread", c.Via())
			}
			if !errors.Is(err, xsk.ErrNAPISysfs) {
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

// napiChild is the child's side of TestNAPIDeferral's sysfs case, in
// ifname's namespace (ip netns exec): without generic netlink it sets the
// deferral through sysfs, says so, waits for its stdin to close, then
// restores it.
func napiChild(ifname string) error {
	if err := seccomp.Install("genl"); err != nil {
		return err
	}
	_, err := xsk.SetNAPIDeferral(ifname, xsk.NAPIDeferral{DeferHardIRQs: 3, GROFlushTimeout: 300 * time.Microsecond,
		IRQSuspendTimeout: time.Millisecond})
	if !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("irq-suspend-timeout without napi-set: %v, want ErrUnsupported", err)
	}
	fmt.Printf("irq-suspend-timeout: unsupported (%v)\n", err)
	c, err := xsk.SetNAPIDeferral(ifname, xsk.NAPIDeferral{DeferHardIRQs: 3, GROFlushTimeout: 300 * time.Microsecond})
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
