package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xdpkit/xdpkit/xsk"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("xdpdoctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	iface := fs.String("i", "", "interface to examine (required)")
	queues := fs.Int("queues", 1, "queues the apps would bind")
	frameSize := fs.Int("frame-size", 0, "UMEM frame size the apps would use (0: the one chosen for the driver and MTU)")
	frames := fs.Int("frames", 4096, "UMEM frames per queue")
	asJSON := fs.Bool("json", false, "print the report as one JSON document")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *iface == "" || fs.NArg() > 0 || *queues < 1 || *frames < 1 || *frameSize < 0 {
		fmt.Fprintln(stderr, "usage: xdpdoctor -i IFACE [-queues N] [-frame-size N] [-frames N] [-json]")
		return 2
	}
	r, err := xsk.Preflight(*iface, &xsk.PreflightConfig{Queues: *queues, FrameSize: *frameSize, FrameCount: *frames})
	if err != nil {
		fmt.Fprintln(stderr, "xdpdoctor:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, "xdpdoctor:", err)
			return 2
		}
	} else {
		printText(stdout, r)
	}
	if r.Failed() {
		return 1
	}
	return 0
}

func printText(w io.Writer, r *xsk.PreflightReport) {
	p := func(k, format string, a ...any) { fmt.Fprintf(w, "%-16s %s\n", k+":", fmt.Sprintf(format, a...)) }
	p("interface", "%s", r.Interface)
	p("kernel", "Linux %s", r.Kernel)
	for _, f := range r.Features {
		mark := "yes"
		if !f.Present {
			mark = "no "
		}
		p("  feature", "%s  %s (Linux %s; %s)", mark, f.Name, f.Linux, f.Probe)
	}
	known := "not in xdpkit's driver table"
	if r.DriverKnown {
		known = r.DriverNotes.Source
		if r.DriverNotes.Note != "" {
			known += "; " + r.DriverNotes.Note
		}
	}
	p("driver", "%s (%s)", r.Driver, known)
	p("xdp features", "%s (from %s)", r.XDPFeatures, r.FeaturesFrom)
	p("xsk features", "%s", r.XSKFeatures)
	zc := "no"
	if r.ZeroCopy {
		zc = fmt.Sprintf("yes, max %d segments", r.ZCMaxSegs)
	}
	p("zero-copy", "%s", zc)
	if r.CopyCost != "" {
		p("copy mode", "%s", r.CopyCost)
	}
	p("queues", "%d rx, %d tx in use", r.RxQueues, r.TxQueues)
	p("channels", "%s", r.Channels)
	p("rings", "%s", r.Rings)
	p("mtu", "%d", r.MTU)
	p("frame size", "%d (%s)", r.FrameSize, r.FrameWhy)
	p("napi", "%s", r.NAPI)
	p("privileges", "%s", r.Privileges)
	p("umem", "%d bytes", r.UMEMBytes)
	p("memlock", "%s", r.Memlock)
	p("xdp program", "%s", r.XDPProgram)
	for _, a := range r.Apps {
		p(a.App, "attach %s, bind %s, copy %s, checksum %s (%s)", a.AttachMode, a.BindMode, a.CopyPolicy, a.Checksum, a.Why)
	}
	for _, c := range r.Checks {
		line := fmt.Sprintf("%-4s %s: %s", strings.ToUpper(c.Status), c.Name, c.Detail)
		if c.Fix != "" {
			line += " -> fix: " + c.Fix
		}
		p("check", "%s", line)
	}
}
