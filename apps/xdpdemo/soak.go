package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/apps/internal/topo"
	"github.com/xdpkit/xdpkit/test/vethns"
)

// soaker flaps the forwarder's links while traffic runs and samples the
// forwarder's memory and descriptors.
type soaker struct {
	t      *topo.Topology
	pid    int
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	flaps       int
	flapErr     error
	start, end  procUsage
	startedWhen time.Time
}

type procUsage struct {
	RSSKiB int
	FDs    int
}

func procUsageOf(pid int) (procUsage, error) {
	var u procUsage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			u.RSSKiB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = len(fds)
	return u, nil
}

func startSoak(ctx context.Context, t *topo.Topology, fwd *topo.Proc, every time.Duration) *soaker {
	ctx, cancel := context.WithCancel(ctx)
	s := &soaker{t: t, pid: fwd.Pid(), cancel: cancel, startedWhen: time.Now()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The first sample once the forwarder has settled.
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
		u, err := procUsageOf(s.pid)
		s.mu.Lock()
		s.start, s.flapErr = u, err
		s.mu.Unlock()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			// Alternate the forwarder's in and out links.
			end := []*vethns.Link{t.In.B, t.Out.A}[i%2]
			if err := flap(end, 200*time.Millisecond); err != nil {
				s.mu.Lock()
				s.flapErr = err
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			s.flaps++
			s.mu.Unlock()
		}
	}()
	return s
}

func flap(l *vethns.Link, down time.Duration) error {
	set := func(up bool) error {
		return l.NS.Do(func() error {
			link, err := netlink.LinkByName(l.Name)
			if err != nil {
				return err
			}
			if up {
				return netlink.LinkSetUp(link)
			}
			return netlink.LinkSetDown(link)
		})
	}
	if err := set(false); err != nil {
		return fmt.Errorf("flap %s down: %w", l.Name, err)
	}
	time.Sleep(down)
	if err := set(true); err != nil {
		return fmt.Errorf("flap %s up: %w", l.Name, err)
	}
	return nil
}

// stop ends the flapping and takes the last sample (the forwarder still
// runs).
func (s *soaker) stop() {
	s.cancel()
	s.wg.Wait()
	u, err := procUsageOf(s.pid)
	s.mu.Lock()
	s.end = u
	if s.flapErr == nil {
		s.flapErr = err
	}
	s.mu.Unlock()
}

// report prints the soak figures and fails when the forwarder's
// descriptors grew, or its memory grew by more than 10% + 4 MiB.
func (s *soaker) report() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Printf("soak: %v, %d link flaps; forwarder VmRSS %d -> %d KiB, open fds %d -> %d\n",
		time.Since(s.startedWhen).Round(time.Second), s.flaps, s.start.RSSKiB, s.end.RSSKiB, s.start.FDs, s.end.FDs)
	var errs []error
	if s.flapErr != nil {
		errs = append(errs, s.flapErr)
	}
	if s.start.FDs == 0 {
		errs = append(errs, errors.New("soak: too short to sample the forwarder (want -duration of a few seconds at least)"))
	}
	if s.end.FDs > s.start.FDs {
		errs = append(errs, fmt.Errorf("soak: the forwarder's open fds grew from %d to %d", s.start.FDs, s.end.FDs))
	}
	if s.end.RSSKiB > s.start.RSSKiB+s.start.RSSKiB/10+4096 {
		errs = append(errs, fmt.Errorf("soak: the forwarder's memory grew from %d to %d KiB", s.start.RSSKiB, s.end.RSSKiB))
	}
	return errors.Join(errs...)
}
