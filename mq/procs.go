package mq

import (
	"runtime"
	"sync"
)

// A queue's goroutine is locked to its thread, and a locked goroutine
// runs only while its thread holds one of the runtime's GOMAXPROCS Ps.
// With fewer Ps than busy queue threads, the threads take turns through
// the scheduler (a futex hand-off each time) however many CPUs are idle:
// on a 2-CPU host, 2 queues of receiver and 2 of sender in one process
// (4 busy threads, GOMAXPROCS 2) moved fewer packets than 1 queue each
// (BenchmarkQueues). So while queues run, GOMAXPROCS is kept at least at
// the number of queue threads plus one for the rest of the program, and
// given back when the last queue stops, unless someone changed it since.
var procs struct {
	sync.Mutex
	running int // queue goroutines running, in all Sets
	saved   int // GOMAXPROCS before we raised it; 0 when we did not
	ours    int // the value we set
}

func acquireProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	procs.running += n
	cur := runtime.GOMAXPROCS(0)
	if want := procs.running + 1; cur < want {
		if procs.saved == 0 {
			procs.saved = cur
		}
		runtime.GOMAXPROCS(want)
		procs.ours = want
	}
}

func releaseProcs(n int) {
	procs.Lock()
	defer procs.Unlock()
	procs.running -= n
	if procs.running == 0 && procs.saved != 0 {
		if runtime.GOMAXPROCS(0) == procs.ours {
			runtime.GOMAXPROCS(procs.saved)
		}
		procs.saved, procs.ours = 0, 0
	}
}
