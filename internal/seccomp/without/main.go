package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/internal/seccomp"
)

func main() {
	deny := flag.String("deny", "", "comma-separated features to take away: "+strings.Join(seccomp.Names(), ", "))
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: without -deny FEATURE[,FEATURE...] -- PROGRAM [ARGS...]\n\n")
		for _, n := range seccomp.Names() {
			fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, seccomp.Rules[n].Doc)
		}
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	path, err := exec.LookPath(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "without:", err)
		os.Exit(2)
	}
	var names []string
	if *deny != "" {
		names = strings.Split(*deny, ",")
	}
	if err := seccomp.Install(names...); err != nil {
		fmt.Fprintln(os.Stderr, "without:", err)
		os.Exit(2)
	}
	err = unix.Exec(path, flag.Args(), os.Environ())
	fmt.Fprintln(os.Stderr, "without: exec:", err)
	os.Exit(2)
}
