package nt

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"sync"
)

// cpuModel names the processor: the "model name" of /proc/cpuinfo where
// there is one, else GOARCH. It labels calibrations, so that one taken on
// another machine is not used here.
var cpuModel = sync.OnceValue(func() string {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			k, v, ok := strings.Cut(s.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v) + " (" + runtime.GOARCH + ")"
			}
		}
	}
	return runtime.GOARCH
})
