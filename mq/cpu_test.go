package mq

import (
	"errors"
	"slices"
	"testing"
)

func TestAssign(t *testing.T) {
	for _, c := range []struct {
		n                 int
		allowed, excluded []int
		want              []int
	}{
		{2, []int{0, 1, 2, 3}, nil, []int{0, 1}},
		{4, []int{0, 1, 2, 3}, []int{0}, []int{1, 2, 3, 1}},
		{3, []int{2, 5}, nil, []int{2, 5, 2}},
		{1, []int{0, 1}, []int{0, 7}, []int{1}},
	} {
		got, err := assign(c.n, c.allowed, c.excluded)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("assign(%d, %v, %v) = %v, %v; want %v", c.n, c.allowed, c.excluded, got, err, c.want)
		}
	}
	if _, err := assign(2, []int{0, 1}, []int{0, 1}); !errors.Is(err, ErrNoCPU) {
		t.Errorf("every CPU excluded: %v, want ErrNoCPU", err)
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"":          nil,
		"0":         {0},
		"0-3":       {0, 1, 2, 3},
		"1,3-4,7":   {1, 3, 4, 7},
		"12-12,0-1": {12, 0, 1},
	} {
		got, err := ParseCPUList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1,", "-1", "1-2x", " 1"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}

func TestAllowedCPUs(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("AllowedCPUs = %v, %v", cpus, err)
	}
	got, err := AssignCPUs(len(cpus), nil)
	if err != nil || !slices.Equal(got, cpus) {
		t.Errorf("AssignCPUs(%d) = %v, %v; want %v", len(cpus), got, err, cpus)
	}
}
