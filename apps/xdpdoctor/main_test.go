package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) { os.Exit(vethns.LeakCheck(m)) }

// doctor runs xdpdoctor inside ns and returns its output and status.
func doctor(t *testing.T, ns *vethns.NS, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := 0
	if err := ns.Do(func() error { code = run(args, &out, &errb); return nil }); err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestDoctorOnVeth: on a veth every item is printed, -json gives the same
// as a document, and both say that zero-copy is unavailable and what copy
// mode costs.
func TestDoctorOnVeth(t *testing.T) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), nil)

	text, stderr, code := doctor(t, a, "-i", p.A.Name)
	if code != 0 {
		t.Fatalf("status %d on a veth that the apps can use; stderr %q\n%s", code, stderr, text)
	}
	for _, item := range []string{"interface:", "kernel:", "feature:", "driver:", "xdp features:", "xsk features:", "zero-copy:",
		"copy mode:", "queues:", "channels:", "rings:", "mtu:", "frame size:", "napi:", "privileges:", "umem:", "memlock:",
		"xdp program:", "xdpgen:", "xdprecv:", "xdpfwd:", "check:"} {
		if !strings.Contains(text, "\n"+item) && !strings.HasPrefix(text, item) && !strings.Contains(text, "  "+item) {
			t.Errorf("no %q line in\n%s", item, text)
		}
	}
	t.Logf("xdpdoctor -i %s:\n%s", p.A.Name, text)
	if !strings.Contains(text, "zero-copy:       no") || !strings.Contains(text, "veth") {
		t.Errorf("the text does not say that veth has no zero-copy:\n%s", text)
	}

	js, _, code := doctor(t, a, "-i", p.A.Name, "-json")
	if code != 0 {
		t.Fatalf("-json: status %d", code)
	}
	var r struct {
		Interface string `json:"interface"`
		Driver    string `json:"driver"`
		ZeroCopy  *bool  `json:"zero_copy"`
		CopyCost  string `json:"copy_cost"`
		MTU       int    `json:"mtu"`
		FrameSize int    `json:"frame_size"`
		UMEM      uint64 `json:"umem_bytes"`
		Features  []struct {
			Name    string `json:"name"`
			Present bool   `json:"present"`
		} `json:"kernel_features"`
		Apps []struct {
			App      string `json:"app"`
			BindMode string `json:"bind_mode"`
		} `json:"apps"`
		Checks []struct {
			Name, Status, Detail string
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("-json output is not a document: %v\n%s", err, js)
	}
	if r.Interface != p.A.Name || r.Driver != "veth" || r.ZeroCopy == nil || *r.ZeroCopy || r.CopyCost == "" || r.MTU != 1500 || r.FrameSize != 2048 || r.UMEM != 4096*2048 {
		t.Errorf("document %+v: want veth %s, no zero-copy with its cost, MTU 1500, 2048-byte frames, 8 MiB UMEM", r, p.A.Name)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Features) == 0 {
		t.Error("no kernel features")
	}
	for _, f := range r.Features {
		if !bytes.Contains(readme, []byte("| "+f.Name+" |")) {
			t.Errorf("feature %q is not a row of README's kernel table", f.Name)
		}
		if !strings.Contains(text, f.Name) {
			t.Errorf("feature %q is in the document, not in the text", f.Name)
		}
	}
	apps := map[string]string{}
	for _, a := range r.Apps {
		apps[a.App] = a.BindMode
		if !strings.Contains(text, a.App+":") {
			t.Errorf("app %s is in the document, not in the text", a.App)
		}
	}
	// Before Linux 6.3 the kernel does not say which drivers have
	// zero-copy (no netdev family): the preflight says it cannot tell,
	// and the apps would try zero-copy and fall back to copy mode.
	unknown := false
	for _, c := range r.Checks {
		if c.Name == "zero-copy" && c.Status == "info" && strings.HasPrefix(c.Detail, "unknown") {
			unknown = true
			t.Logf("zero-copy: %s", c.Detail)
		}
	}
	want := "copy"
	if unknown {
		want = "zero-copy, else copy"
	}
	for _, app := range []string{"xdpgen", "xdprecv", "xdpfwd"} {
		if apps[app] != want {
			t.Errorf("%s would bind %q on veth, want %q", app, apps[app], want)
		}
	}
	zc := unknown
	for _, c := range r.Checks {
		if c.Name == "zero-copy" && c.Status == "warn" && strings.Contains(c.Detail, "copies every frame") {
			zc = true
		}
		if c.Status == "fail" {
			t.Errorf("check failed on a usable veth: %+v", c)
		}
		if !strings.Contains(text, c.Name+": ") {
			t.Errorf("check %s is in the document, not in the text", c.Name)
		}
	}
	if !zc {
		t.Errorf("no zero-copy warning with the cost of copy mode: %+v", r.Checks)
	}
}

// TestDoctorFailures: queues beyond those in use and an MTU beyond the
// frame fail with their fixes; bad flags give status 2.
func TestDoctorFailures(t *testing.T) {
	vethns.Require(t)
	a := vethns.NewNS(t)
	p := vethns.NewPair(t, a, vethns.NewNS(t), &vethns.PairConfig{MTU: 3000})
	text, _, code := doctor(t, a, "-i", p.A.Name, "-queues", "4", "-frame-size", "2048")
	if code != 1 {
		t.Errorf("status %d, want 1\n%s", code, text)
	}
	for _, want := range []string{"FAIL queues", "ethtool -L " + p.A.Name + " combined 4", "FAIL MTU", "-frame-size 4096"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	// The default frame size follows the MTU.
	if text, _, code = doctor(t, a, "-i", p.A.Name); code != 0 || !strings.Contains(text, "frame size:      4096") {
		t.Errorf("MTU 3000, default frame size: status %d\n%s", code, text)
	}
	for _, args := range [][]string{{}, {"-i", p.A.Name, "-queues", "0"}, {"-i", "nonexistent0"}, {"-bogus"}} {
		if _, _, code := doctor(t, a, args...); code != 2 {
			t.Errorf("%q: status %d, want 2", args, code)
		}
	}
}
