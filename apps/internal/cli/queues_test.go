package cli

import (
	"slices"
	"testing"

	"github.com/xdpkit/xdpkit/mq"
)

func TestQueueFlags(t *testing.T) {
	allowed, err := mq.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	first := allowed[0]
	for _, c := range []struct {
		f            QueueFlags
		queues, cpus []int
	}{
		{QueueFlags{Queue: 3}, []int{3}, nil},
		{QueueFlags{Queue: 3, CPUs: "none"}, []int{3}, nil},
		{QueueFlags{Queues: "1"}, []int{0}, []int{first}},
		{QueueFlags{Queues: "0,2", CPUs: "none"}, []int{0, 2}, nil},
		{QueueFlags{Queues: "1-3", CPUs: "0"}, []int{1, 2, 3}, []int{0, 0, 0}},
	} {
		q, cpus, err := c.f.Resolve()
		if err != nil || !slices.Equal(q, c.queues) || !slices.Equal(cpus, c.cpus) {
			t.Errorf("%+v: queues %v cpus %v (%v), want %v %v", c.f, q, cpus, err, c.queues, c.cpus)
		}
	}
	for _, f := range []QueueFlags{
		{Queue: -1}, {Queues: "0"}, {Queues: "x"}, {Queues: "1,1"}, {Queues: "2", CPUs: "100000"},
		{Queues: "2", Exclude: "0-4095"}, {Queues: "2", CPUs: "a"},
	} {
		if q, cpus, err := f.Resolve(); err == nil {
			t.Errorf("%+v: queues %v cpus %v, want an error", f, q, cpus)
		}
	}
	if got := []uint64{QueueRate(10, 0, 3), QueueRate(10, 1, 3), QueueRate(10, 2, 3)}; !slices.Equal(got, []uint64{4, 3, 3}) {
		t.Errorf("QueueRate(10, i, 3) = %v", got)
	}
}
