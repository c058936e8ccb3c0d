package nt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestThreshold(t *testing.T) {
	pts := func(speedups ...float64) []Point {
		var p []Point
		for i, s := range speedups {
			p = append(p, Point{Size: 64 << i, Copy: 100, NT: 100 / s, Speedup: s})
		}
		return p
	}
	for _, c := range []struct {
		p    []Point
		want int
	}{
		{pts(0.5, 0.8, 1.2, 1.3), 256},
		{pts(1.2, 1.2, 1.2), 64},
		{pts(0.5, 1.2, 0.9), Never},       // a loss at the top
		{pts(0.5, 1.2, 0.9, 1.2), 512},    // a win below a loss does not count
		{pts(0.5, 1.2, 1.0, 0.98), 128},   // ties above a win do not stop it
		{pts(0.5, 1.01, 1.2, 1.0), 256},   // a tie is not a win
		{pts(1.01, 1.02), Never},          // less than MinGain
		{pts(0.9, 1.3, 1.3, 0.96), Never}, // 4% slower is a loss
		{nil, Never},
	} {
		if got := threshold(c.p, 0.03); got != c.want {
			t.Errorf("threshold(%v) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestCalibrate(t *testing.T) {
	c, err := Calibrate(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(c)
	for _, p := range c.Points {
		t.Logf("%8d B: copy %9.1f ns (%5.1f GB/s)  nt %9.1f ns (%5.1f GB/s)  x%.2f",
			p.Size, p.Copy, float64(p.Size)/p.Copy, p.NT, float64(p.Size)/p.NT, p.Speedup)
	}
	if c.Impl != implName() || c.CPU == "" || c.Version != calibrationVersion || c.Source != "measured" {
		t.Errorf("labels: %+v", c)
	}
	if c.Took <= 0 || c.Setup < 0 || c.Setup > c.Took {
		t.Errorf("Took %v, Setup %v", c.Took, c.Setup)
	}
	if !Supported {
		if c.Threshold != Never || len(c.Points) != 0 {
			t.Errorf("build without NT: threshold %d, %d points", c.Threshold, len(c.Points))
		}
		return
	}
	if c.Rounds < minRounds {
		t.Errorf("%d rounds, want at least %d", c.Rounds, minRounds)
	}
	if len(c.Points) != len(defaultSizes) {
		t.Fatalf("%d points, want %d", len(c.Points), len(defaultSizes))
	}
	for i, p := range c.Points {
		if p.Size != defaultSizes[i] || p.Copy <= 0 || p.NT <= 0 || p.Speedup <= 0 {
			t.Errorf("point %d: %+v", i, p)
		}
		// From 64 KiB the destination is cold (the ring is twice the
		// L3): no core writes memory at 200 GB/s, so a faster time means
		// the copy did not happen at that size.
		if p.Size >= 64<<10 {
			for _, ns := range []float64{p.Copy, p.NT} {
				if ns < float64(p.Size)/200 {
					t.Errorf("point %d: %.0f ns for %d bytes is over 200 GB/s into cold memory", i, ns, p.Size)
				}
			}
		}
		// Speedup (a median of ratios) and the best times must agree on
		// who won when the times differ by 2x or more: catches swapped
		// labels or an inverted ratio.
		if r := p.Copy / p.NT; r >= 2 && p.Speedup <= 1 || r <= 0.5 && p.Speedup >= 1 {
			t.Errorf("point %d: copy %.1f ns, NT %.1f ns, but speedup x%.2f", i, p.Copy, p.NT, p.Speedup)
		}
	}
	// Times grow with the size: the largest size is 16384 times the
	// smallest; allow per-byte costs to differ 64-fold (small copies are
	// hot in the cache, large ones go to memory), no more. A meter that
	// copied the wrong size, or timed its own overhead, fails here.
	first, last := c.Points[0], c.Points[len(c.Points)-1]
	ratio := float64(last.Size) / float64(first.Size)
	if last.Copy/first.Copy < ratio/64 || last.NT/first.NT < ratio/64 {
		t.Errorf("%d B vs %d B: copy %.1f vs %.1f ns, NT %.1f vs %.1f ns: time does not grow with size",
			last.Size, first.Size, last.Copy, first.Copy, last.NT, first.NT)
	}
	// The threshold, checked against its definition (not against the
	// function that computed it): NT won at Threshold by MinGain, and lost
	// by more than MinGain at no size from there up; with Never, no size
	// qualifies.
	qualifies := func(i int) bool {
		if c.Points[i].Speedup*(1-c.MinGain) < 1 {
			return false
		}
		for _, q := range c.Points[i:] {
			if q.Speedup*(1+c.MinGain) < 1 {
				return false
			}
		}
		return true
	}
	want := Never
	for i := range c.Points {
		if qualifies(i) {
			want = c.Points[i].Size
			break
		}
	}
	if c.Threshold != want {
		t.Errorf("threshold %d; by its definition the points give %d", c.Threshold, want)
	}
	for _, n := range []int{0, 64, 1500, 1 << 20} {
		if got, want := c.UseNT(n), c.Threshold > 0 && n >= c.Threshold; got != want {
			t.Errorf("UseNT(%d) = %v with threshold %d", n, got, c.Threshold)
		}
	}
}

func TestCalibrateOptions(t *testing.T) {
	for _, o := range []CalibrateOptions{
		{Sizes: []int{0, 64}},
		{Sizes: []int{}},
		{Sizes: []int{1 << 20}, RingBytes: 2 << 20},
		{Batch: -1},
		{MinGain: 1},
		{Budget: -time.Second},
	} {
		if _, err := Calibrate(&o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Calibrate(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	c, err := Calibrate(&CalibrateOptions{Sizes: []int{4096, 64, 4096}, RingBytes: 1 << 20, Batch: 4, Budget: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if Supported && (len(c.Points) != 2 || c.Points[0].Size != 64 || c.Points[1].Size != 4096) {
		t.Errorf("sizes not sorted and deduplicated: %+v", c.Points)
	}
	if c.RingBytes != 1<<20 || c.Batch != 4 {
		t.Errorf("options not recorded: %+v", c)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	c := Calibration{
		Version: calibrationVersion, Threshold: 65536, CPU: cpuModel(), Impl: implName(),
		Points: []Point{{64, 2.5, 10, 0.25}, {65536, 1900, 1600, 1.19}}, Took: 25 * time.Millisecond,
		RingBytes: 64 << 20, Batch: 32, MinGain: 0.03, Rounds: 9, When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	path := filepath.Join(dir, "cal.json")
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != path {
		t.Errorf("Source %q, want %q", got.Source, path)
	}
	got.Source = ""
	if !slices.Equal(got.Points, c.Points) || got.Threshold != c.Threshold || got.Took != c.Took || !got.When.Equal(c.When) || got.CPU != c.CPU {
		t.Errorf("round trip: got %+v, want %+v", got, c)
	}

	// A file from this machine is used instead of measuring.
	if d := loadOrCalibrate(path); d.Source != path || d.Threshold != 65536 {
		t.Errorf("loadOrCalibrate(matching file) = %v", d)
	}
	// One from another CPU is not.
	other := c
	other.CPU = "some other CPU"
	otherPath := filepath.Join(dir, "other.json")
	if err := other.Save(otherPath); err != nil {
		t.Fatal(err)
	}
	if d := loadOrCalibrate(otherPath); !strings.HasPrefix(d.Source, "measured") || !strings.Contains(d.Source, "some other CPU") {
		t.Errorf("loadOrCalibrate(other CPU) Source = %q", d.Source)
	}

	for name, content := range map[string]string{
		"garbage.json": "not json",
		"version.json": `{"version": 99, "threshold": 64}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadCalibration(p); !errors.Is(err, ErrBadCalibration) {
			t.Errorf("LoadCalibration(%s) = %v, want ErrBadCalibration", name, err)
		}
	}
	if _, err := LoadCalibration(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadCalibration(missing) = %v, want os.ErrNotExist", err)
	}
	if d := loadOrCalibrate(filepath.Join(dir, "missing.json")); !strings.Contains(d.Source, EnvCalibration+" not used") {
		t.Errorf("loadOrCalibrate(missing) Source = %q", d.Source)
	}
}

func TestDefault(t *testing.T) {
	a := Default()
	b := Default()
	if a.When != b.When || a.Threshold != b.Threshold || a.Source != b.Source {
		t.Errorf("Default changed between calls: %v, %v", a, b)
	}
	t.Log(a)
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.v); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
