package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// ExitUsage is the exit code for bad flags; ExitError for failures.
const (
	ExitUsage = 2
	ExitError = 1
)

// App is a program's name and flags.
type App struct {
	Name  string
	Usage string // the text -h prints before the flags
	FS    *flag.FlagSet
}

// New returns an App whose FlagSet reports nothing by itself.
func New(name, usage string) *App {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &App{Name: name, Usage: usage, FS: fs}
}

// Parse parses args. -h prints the usage and exits 0; a bad flag prints
// one line on stderr and exits ExitUsage.
func (a *App) Parse(args []string) {
	err := a.FS.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		a.PrintUsage(os.Stdout)
		os.Exit(0)
	}
	if err != nil {
		a.Fail("%v (see -h)", err)
	}
	if a.FS.NArg() > 0 {
		a.Fail("unexpected argument %q (see -h)", a.FS.Arg(0))
	}
}

// PrintUsage writes the usage text and the flags.
func (a *App) PrintUsage(w io.Writer) {
	fmt.Fprintln(w, strings.TrimSpace(a.Usage))
	fmt.Fprintln(w, "\nFlags:")
	a.FS.SetOutput(w)
	a.FS.PrintDefaults()
	a.FS.SetOutput(io.Discard)
}

// Fail prints "name: message" on stderr and exits ExitUsage: for flags
// that parse but cannot be used.
func (a *App) Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", a.Name, oneLine(fmt.Sprintf(format, args...)))
	os.Exit(ExitUsage)
}

// Fatal prints "name: err" on stderr and exits ExitError.
func (a *App) Fatal(err error) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", a.Name, oneLine(err.Error()))
	os.Exit(ExitError)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// SignalContext is cancelled by SIGINT or SIGTERM. A second signal
// restores the default action, so it kills a program stuck in shutdown.
func SignalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
			signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// RunContext is SignalContext bounded by d when d > 0: the context of a
// program's run. Its cancel ends both.
func RunContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := SignalContext()
	if d <= 0 {
		return ctx, cancel
	}
	tctx, tcancel := context.WithTimeout(ctx, d)
	return tctx, func() { tcancel(); cancel() }
}

// Summary prints the final summary as one line "summary {json}" on stdout,
// which the demo and the tests read.
func Summary(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf("{%q:%q}", "error", err.Error()))
	}
	fmt.Printf("summary %s\n", b)
}

// ParseSummary finds the summary line in a program's output and
// unmarshals it into v.
func ParseSummary(out string, v any) error {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "summary "); ok {
			return json.Unmarshal([]byte(rest), v)
		}
	}
	return errors.New("no summary line")
}

// CheckInterface returns an error naming ifname when it does not exist
// in this network namespace.
func CheckInterface(ifname string) (*net.Interface, error) {
	if ifname == "" {
		return nil, errors.New("no interface given")
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("unknown interface %q", ifname)
	}
	return ifi, nil
}

// Duration formats d for the status line.
func Duration(d time.Duration) string { return d.Round(time.Millisecond).String() }
