package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/nt"
	"github.com/xdpkit/xdpkit/txpath"
)

// The copy-policy grid: how fast each way of moving a payload into a UMEM
// frame is, for every (size, destination temperature, checksum offload)
// cell, and whether txpath.ChooseCopy ("auto") picks a method within
// gridTolerance of the best fixed one.

var (
	gridSizes = []int{64, 256, 1500, 4096, 65536}
	// Fixed methods per cell: with offload the checksum is done by the
	// device, so the copy need not sum; without, it must.
	offloadMethods   = []txpath.Method{txpath.MethodNT, txpath.MethodCopy, txpath.MethodFused}
	noOffloadMethods = []txpath.Method{txpath.MethodNTSum, txpath.MethodCopySum, txpath.MethodFused}
)

// layout is the UMEM-like memory of a grid: frame stride, where the
// payload starts in its frame, and how much memory a hot and a cold
// destination cycle through.
type layout struct {
	Name      string `json:"name"`
	Frame     int    `json:"frame_stride"`
	Off       int    `json:"payload_offset"`
	HotBytes  int    `json:"hot_bytes"`
	ColdBytes int    `json:"cold_bytes"`
}

// The layouts measured. "seen" is the layout txpath.ChooseCopy measures
// at start-up (4 KiB frames, the payload after Ethernet + IPv4 + UDP
// headers, a cold ring of twice the 32 MiB L3); "unseen" is one it never
// saw: 2 KiB frames, 256 bytes of headroom before the headers, a cold ring
// of 48 MiB and a hot region of 128 KiB. auto must hold in both.
var gridLayouts = []layout{
	{Name: "seen", Frame: 4096, Off: 42, HotBytes: 256 << 10, ColdBytes: 64 << 20},
	{Name: "unseen", Frame: 2048, Off: 256 + 42, HotBytes: 128 << 10, ColdBytes: 48 << 20},
}

const (
	gridTolerance = 0.03
	// gridStarts is how many times the grid takes ChooseCopy's start-up
	// measurement and measures every cell after it (txpath.Remeasure): a
	// start-up choice is a draw, and the verdict is on what most draws do.
	gridStarts = 3
	trialBytes = 1 << 20 // payload bytes copied per timed trial
	fenceEvery = 64      // one nt.Fence per batch, as txpath's Sender
	// Payload sources start at 8 offsets spread over a page, 520 bytes
	// apart, in turn (4 KiB aliasing between source and frame depends on
	// it), as in txpath's own measurement.
	srcSpan    = 4096
	srcOffsets = 8
)

// Grid is the copy-policy grid's result.
type Grid struct {
	Layouts []layout   `json:"layouts"`
	Cells   []GridCell `json:"cells"`
	Pass    bool       `json:"pass"`
	// Rounds is the rounds per cell in each start; Starts the starts.
	Rounds    int            `json:"rounds"`
	Starts    int            `json:"starts"`
	Tolerance float64        `json:"tolerance"`
	Calib     nt.Calibration `json:"nt_calibration"`
	// Tables are txpath.ChooseCopy's own measurements, one per start (ns
	// per copy by method: copy, nt, copy+sum, nt+sum, fused) and its
	// choices.
	Tables [][]txpath.TablePoint `json:"choose_copy_tables"`
	// ChooseNs is the cost of one txpath.ChooseCopy call, in ns.
	ChooseNs float64 `json:"choose_copy_ns"`
	Took     float64 `json:"seconds"`
}

// GridCell is one cell: the GB/s of each method (best and median of the
// rounds) and the verdict on auto. The figures are those of the start whose
// ratio is the median of the starts' (Starts lists every start).
type GridCell struct {
	Layout  string            `json:"layout"`
	Size    int               `json:"size"`
	Cold    bool              `json:"cold"`
	Offload bool              `json:"offload"`
	Methods map[string]Figure `json:"methods"` // by Method.String(), and "auto"
	// Best is the fixed method that auto does worst against by the
	// verdict's statistic (the median over the rounds of the paired ratio
	// auto / method): the same statistic judges every method.
	Best string `json:"best"`
	Auto string `json:"auto"` // what ChooseCopy chose
	// Ratio is the median over the rounds of auto / Best (paired within
	// each round), the smallest over the fixed methods; BestRatio is
	// auto's best-of-rounds GB/s over the highest best-of-rounds GB/s of a
	// fixed method, for information.
	Ratio     float64 `json:"ratio"`
	BestRatio float64 `json:"best_ratio"`
	// Twin is the fixed method measured twice in the cell (auto's choice):
	// Noise is how far the paired median of one copy over the other is
	// from 1, plus twice its standard error (noiseOf); Band is the largest
	// Noise of the cells of the same layout and size, by which the gate
	// is widened (judgeGroup).
	Twin  string  `json:"twin,omitempty"`
	Noise float64 `json:"noise"`
	Band  float64 `json:"band"`
	// Pass: auto passed in most starts (each start judged against its own
	// band).
	Pass   bool        `json:"pass"`
	Starts []GridStart `json:"starts,omitempty"`
}

// GridStart is a cell's verdict after one start-up measurement.
type GridStart struct {
	Auto  string  `json:"auto"`
	Ratio float64 `json:"ratio"`
	Band  float64 `json:"band"`
	Pass  bool    `json:"pass"`
}

// Spread: the cell passed, but not in every start.
func (c GridCell) Spread() bool {
	if !c.Pass {
		return false
	}
	for _, s := range c.Starts {
		if !s.Pass {
			return true
		}
	}
	return false
}

// Within: the cell passes only because of the noise band (auto/worst is
// below 1 - tolerance, but not by more than the band).
func (c GridCell) Within(tol float64) bool { return c.Pass && c.Ratio < 1-tol }

// Figure is a method's GB/s in a cell.
type Figure struct {
	Best   float64 `json:"best_gbps"`
	Median float64 `json:"median_gbps"`
}

// region is UMEM-like destination memory: frames of frameSize, a payload
// written payloadOff bytes into its first frame.
type region struct {
	mem    []byte
	off    int
	stride int
	slots  int
	next   int
}

// newRegion lays payloads of size bytes into mem, each off bytes into its
// own run of frames of frame bytes.
func newRegion(mem []byte, size, frame, off int) *region {
	stride := (off + size + frame - 1) / frame * frame
	return &region{mem: mem, off: off, stride: stride, slots: max(1, len(mem)/stride)}
}

func (r *region) dst(size int) []byte {
	off := r.next*r.stride + r.off
	r.next++
	if r.next == r.slots {
		r.next = 0
	}
	return r.mem[off : off+size]
}

// method is a way of moving a payload: one of txpath's Methods, or a
// candidate outside ChooseCopy's set.
type method struct {
	name  string
	apply func(dst, src []byte, sum uint32) uint32
	nt    bool // fence once per batch
}

func fixedMethod(m txpath.Method) method {
	return method{name: m.String(), apply: m.Apply, nt: m.NT()}
}

// byMethod is fixedMethod of every txpath.Method, made once: auto looks
// its choice up here, so that it pays nothing the fixed methods do not
// (a method value made per batch would allocate).
var byMethod = func() []method {
	var ms []method
	for _, m := range txpath.Methods {
		for int(m) >= len(ms) {
			ms = append(ms, method{})
		}
		ms[m] = fixedMethod(m)
	}
	return ms
}()

// extraMethods are candidates ChooseCopy does not consider, measured beside
// its own: without offload, copy then sum the destination (which the copy
// has just brought into the cache) instead of the source.
var extraNoOffload = []method{{name: "copy+sum(dst)", apply: func(dst, src []byte, sum uint32) uint32 {
	n := copy(dst, src)
	return csum.Sum(dst[:n], sum)
}}}

// trial copies about trialBytes of payload of size bytes with m (or with
// txpath.ChooseCopy's choice when auto, asked once per batch of fenceEvery
// copies, as a Sender could per flush: a per-copy call would add its own
// cost, reported apart as Grid.ChooseNs) and returns GB/s.
func trial(r *region, srcBuf []byte, n int, m method, auto, cold, offload bool) float64 {
	k := (max(16, trialBytes/n) + srcOffsets - 1) / srcOffsets * srcOffsets
	var sum uint32
	if !cold {
		// One untimed pass over the hot region first: the previous trial
		// may have evicted it with NT stores.
		for i := 0; i < r.slots; i++ {
			mm := m
			if auto {
				mm = byMethod[txpath.ChooseCopy(n, cold, offload)]
			}
			mm.apply(r.dst(n), srcBuf[:n], 0)
		}
		nt.Fence()
	}
	start := time.Now()
	for i := 0; i < k; {
		// One batch: the method is fixed inside it, so that auto and the
		// fixed methods run the same inner loop.
		if auto {
			m = byMethod[txpath.ChooseCopy(n, cold, offload)]
		}
		end := min(i+fenceEvery, k)
		for ; i < end; i++ {
			off := i % srcOffsets * (srcSpan/srcOffsets + 8)
			sum = m.apply(r.dst(n), srcBuf[off:off+n], sum)
		}
		if m.nt {
			nt.Fence()
		}
	}
	d := time.Since(start)
	runtime.KeepAlive(sum)
	return float64(n*k) / float64(d.Nanoseconds())
}

func mapRegion(n int) ([]byte, error) {
	// 4 KiB pages, as umem.New maps a UMEM unless asked for huge pages.
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	return b, nil
}

func runGrid(ctx context.Context, c *config) (*Grid, error) {
	start := time.Now()
	rounds := 201 // per start
	budget := 300 * time.Millisecond
	if c.quick {
		rounds, budget = 3, 0
	}
	// Run on one OS thread, pinned to the measured CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if c.pin {
		var set unix.CPUSet
		set.Set(c.measCPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("pin: %w", err)
		}
		defer func() {
			var all unix.CPUSet
			for i := 0; i < runtime.NumCPU(); i++ {
				all.Set(i)
			}
			_ = unix.SchedSetaffinity(0, &all)
		}()
	}

	// nt's calibration, with a longer budget than the default's 20 ms so
	// that noise moves the threshold less; saved and handed to nt.Default
	// (and so to txpath.ChooseCopy) through $XDPKIT_NT_CALIBRATION.
	logf("grid: calibrating nt (budget %v)", budget)
	cal, err := nt.Calibrate(&nt.CalibrateOptions{Budget: budget})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.out, "nt-calibration.json")
	if err := cal.Save(path); err != nil {
		return nil, err
	}
	if err := os.Setenv(nt.EnvCalibration, path); err != nil {
		return nil, err
	}
	def := nt.Default()
	if rel, err := filepath.Rel(c.repo, path); err == nil && def.Source == path && filepath.IsLocal(rel) {
		def.Source = rel // the report names the file as the repository does, not this checkout's place
	}
	logf("grid: %s", def)
	g := &Grid{Pass: true, Rounds: rounds, Starts: gridStarts, Tolerance: gridTolerance, Calib: def, Layouts: gridLayouts}
	// Each start takes ChooseCopy's start-up measurement anew, as a new
	// process would, and measures every cell after it.
	var starts [][]GridCell
	for s := 0; s < gridStarts; s++ {
		t0 := time.Now()
		if s == 0 {
			txpath.Prepare()
		} else {
			txpath.Remeasure()
		}
		g.Tables = append(g.Tables, txpath.ChooseTable())
		logf("grid: start %d: ChooseCopy's measurement took %v", s+1, time.Since(t0).Round(time.Millisecond))
		if s == 0 {
			g.ChooseNs = chooseCost()
			logf("grid: one ChooseCopy call costs %.2f ns", g.ChooseNs)
		}
		var cells []GridCell
		for _, lay := range gridLayouts {
			cs, err := gridLayout(ctx, g, lay, rounds, s)
			if err != nil {
				return g, err
			}
			cells = append(cells, cs...)
		}
		starts = append(starts, cells)
	}
	for i := range starts[0] {
		var per []GridCell
		for _, cells := range starts {
			per = append(per, cells[i])
		}
		cell := combineStarts(per)
		g.Pass = g.Pass && cell.Pass
		g.Cells = append(g.Cells, cell)
		if cell.Spread() || !cell.Pass {
			logf("grid: %s: %s in %d starts: %s", cellName(cell), cellVerdict(cell, g.Tolerance), len(per), startsText(cell))
		}
	}
	g.Took = time.Since(start).Seconds()
	return g, nil
}

// combineStarts makes one cell of its starts (the same cell, measured after
// each start-up measurement): a pass when auto passed in most starts, with
// the figures of the start whose ratio is the median among the starts that
// agree with that verdict (so that the row shown reads as its verdict: each
// start is judged against its own band).
func combineStarts(per []GridCell) GridCell {
	passed := 0
	for _, p := range per {
		if p.Pass {
			passed++
		}
	}
	pass := 2*passed > len(per)
	var agree []GridCell
	for _, p := range per {
		if p.Pass == pass {
			agree = append(agree, p)
		}
	}
	slices.SortStableFunc(agree, func(a, b GridCell) int { return cmp.Compare(a.Ratio, b.Ratio) })
	c := agree[(len(agree)-1)/2]
	c.Pass = pass
	c.Starts = nil
	for _, p := range per {
		c.Starts = append(c.Starts, GridStart{Auto: p.Auto, Ratio: p.Ratio, Band: p.Band, Pass: p.Pass})
	}
	return c
}

// startsText lists a cell's starts: auto's choice, auto/worst, band and
// verdict of each.
func startsText(c GridCell) string {
	var parts []string
	for _, s := range c.Starts {
		v := "pass"
		if !s.Pass {
			v = "fail"
		}
		parts = append(parts, fmt.Sprintf("%s x%.3f (band %.3f) %s", s.Auto, s.Ratio, s.Band, v))
	}
	return strings.Join(parts, "; ")
}

// gridLayout measures every cell of one layout after start s.
func gridLayout(ctx context.Context, g *Grid, lay layout, rounds, s int) ([]GridCell, error) {
	// Hot: lay.HotBytes, or four payloads of the largest size if that is
	// more (as txpath measures it).
	maxStride := (lay.Off + gridSizes[len(gridSizes)-1] + lay.Frame - 1) / lay.Frame * lay.Frame
	hotMem, err := mapRegion(max(lay.HotBytes, 4*maxStride))
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(hotMem)
	coldMem, err := mapRegion(lay.ColdBytes)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(coldMem)
	var all, group []GridCell
	for _, size := range gridSizes {
		src := make([]byte, size+srcSpan)
		for i := range src {
			src[i] = byte(i*7 + 3)
		}
		for _, cold := range []bool{false, true} {
			mem := hotMem
			if cold {
				mem = coldMem
			}
			reg := newRegion(mem, size, lay.Frame, lay.Off)
			for _, offload := range []bool{true, false} {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				cell := measureCell(reg, src, size, cold, offload, rounds)
				cell.Layout = lay.Name
				group = append(group, cell)
			}
		}
		// One noise band for the layout and size: the cells of a group
		// move the same bytes, and one twin pair per cell is a small
		// sample of the run's noise.
		judgeGroup(group, g.Tolerance)
		for _, cell := range group {
			logf("grid: start %d: %-6s %5d B %-4s %-10s worst-for-auto %-13s %6.2f GB/s (median), auto=%-8s %6.2f GB/s (paired median x%.3f, best-of x%.3f; twin %s noise %.3f, band %.3f) %s",
				s+1, lay.Name, size, temp(cell.Cold), offl(cell.Offload), cell.Best, cell.Methods[cell.Best].Median,
				cell.Auto, cell.Methods["auto"].Median, cell.Ratio, cell.BestRatio, cell.Twin, cell.Noise, cell.Band, startVerdict(cell, g.Tolerance))
		}
		all = append(all, group...)
		group = group[:0]
	}
	return all, nil
}

// cellVerdict is a cell's verdict in words: PASS, PASS within noise
// (behind by more than the tolerance, but not by more than the tolerance
// and the band), PASS within spread (it failed in a start, but passed in
// most), or FAIL beyond noise (in most starts).
func cellVerdict(c GridCell, tol float64) string {
	switch {
	case !c.Pass:
		return "FAIL beyond noise"
	case c.Spread():
		return "PASS within spread"
	case c.Within(tol):
		return "PASS within noise"
	}
	return "PASS"
}

// startVerdict is a cell's verdict in one start, in words that the cell's
// own verdict (cellVerdict, over the starts) does not use.
func startVerdict(c GridCell, tol float64) string {
	switch {
	case !c.Pass:
		return "behind in this start"
	case c.Within(tol):
		return "within noise in this start"
	}
	return "ok in this start"
}

// judgeGroup sets the noise band of every cell of one layout and size to
// the largest noise among them, and each cell's verdict: auto/worst at
// least 1 - tol - band.
func judgeGroup(cells []GridCell, tol float64) {
	band := 0.0
	for _, c := range cells {
		band = max(band, c.Noise)
	}
	for i := range cells {
		cells[i].Band = band
		cells[i].Pass = cells[i].Ratio >= 1-tol-band
	}
}

// noiseOf is the noise that pure chance puts into the verdict's statistic,
// measured on a and b, the per-round GB/s of one method run twice in the
// same rounds: the distance from 1 of the median of a/b over the rounds
// (what the statistic showed for identical methods: it includes any
// effect of a method's place among the entries), plus twice the
// standard error of that median estimated from the ratios' spread
// (1.2533 * 1.4826 * MAD / sqrt(n), the MAD scaled to a standard
// deviation): a second draw of the median may be that much further.
func noiseOf(a, b []float64) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	rs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if b[i] > 0 && a[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	m := median(rs)
	dev := make([]float64, len(rs))
	for i, r := range rs {
		dev[i] = math.Abs(r - m)
	}
	se := 1.2533 * 1.4826 * median(dev) / math.Sqrt(float64(len(rs)))
	return max(math.Abs(1-m), math.Abs(1-1/m)) + 2*se
}

// cellName names a cell in logs and the history.
func cellName(c GridCell) string {
	return fmt.Sprintf("%s %d %s %s", c.Layout, c.Size, temp(c.Cold), offl(c.Offload))
}

func temp(cold bool) string {
	if cold {
		return "cold"
	}
	return "hot"
}

func offl(offload bool) string {
	if offload {
		return "offload"
	}
	return "no-offload"
}

// measureCell alternates the cell's methods and auto, rounds times, each
// round in a random order.
func measureCell(reg *region, src []byte, size int, cold, offload bool, rounds int) GridCell {
	var fixed []method
	if offload {
		for _, m := range offloadMethods {
			fixed = append(fixed, byMethod[m])
		}
	} else {
		for _, m := range noOffloadMethods {
			fixed = append(fixed, byMethod[m])
		}
		fixed = append(fixed, extraNoOffload...)
	}
	type entry struct {
		name string
		m    method
		auto bool
		v    []float64
	}
	var es []*entry
	for _, m := range fixed {
		es = append(es, &entry{name: m.name, m: m})
	}
	es = append(es, &entry{name: "auto", auto: true})
	// The twin: auto's choice once more as a fixed method, an entry of its
	// own in every round, to measure the noise of the run (noiseOf).
	choice := txpath.ChooseCopy(size, cold, offload).String()
	twinOf := fixed[0]
	for _, m := range fixed {
		if m.name == choice {
			twinOf = m
		}
	}
	es = append(es, &entry{name: twinOf.name + " (twin)", m: twinOf})
	// Warm up every method once (page faults, branch predictors).
	for _, e := range es {
		trial(reg, src, size, e.m, e.auto, cold, offload)
	}
	// Each round in its own random order (fixed seed), so that every method
	// follows every other equally often.
	rng := rand.New(rand.NewPCG(uint64(size), uint64(len(src))))
	order := make([]*entry, len(es))
	copy(order, es)
	for r := 0; r < rounds; r++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, e := range order {
			e.v = append(e.v, trial(reg, src, size, e.m, e.auto, cold, offload))
		}
	}
	rs := map[string][]float64{}
	for _, e := range es {
		rs[e.name] = e.v
	}
	cell := summarizeCell(rs, names(fixed), twinOf.name)
	cell.Size, cell.Cold, cell.Offload, cell.Auto = size, cold, offload, choice
	return cell
}

func names(ms []method) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.name)
	}
	return s
}

// summarizeCell makes a cell of its rounds: rs holds the per-round GB/s
// by name, of the fixed methods, "auto", and twin's second copy under
// twin + " (twin)". The cell's verdict waits for its group (judgeGroup).
func summarizeCell(rs map[string][]float64, fixed []string, twin string) GridCell {
	cell := GridCell{Methods: map[string]Figure{}, Twin: twin}
	auto := rs["auto"]
	bestV := 0.0
	for _, name := range append(slices.Clone(fixed), "auto") {
		v := rs[name]
		f := Figure{Best: slices.Max(v), Median: median(v)}
		cell.Methods[name] = f
		if name != "auto" {
			bestV = max(bestV, f.Best)
		}
	}
	// The verdict: for every fixed method, the median over the rounds of
	// auto's GB/s divided by the method's in the same round (trials of
	// one round run within milliseconds of each other and see the same
	// interference, so their ratio varies much less than either figure);
	// the cell's ratio is the smallest, against the method auto does worst
	// against by this same statistic.
	cell.Ratio = math.Inf(1)
	ratios := make([]float64, len(auto))
	for _, name := range fixed {
		v := rs[name]
		for r := range auto {
			ratios[r] = auto[r] / v[r]
		}
		if m := median(ratios); m < cell.Ratio {
			cell.Ratio, cell.Best = m, name
		}
	}
	cell.BestRatio = cell.Methods["auto"].Best / bestV
	cell.Noise = noiseOf(rs[twin+" (twin)"], rs[twin])
	return cell
}

// chooseCost is the best time of one txpath.ChooseCopy call, in ns.
func chooseCost() float64 {
	const n = 1 << 20
	best := -1.0
	var acc txpath.Method
	for r := 0; r < 5; r++ {
		start := time.Now()
		for i := 0; i < n; i++ {
			acc += txpath.ChooseCopy(64+i&1023, i&2 == 0, i&4 == 0)
		}
		ns := float64(time.Since(start).Nanoseconds()) / n
		if best < 0 || ns < best {
			best = ns
		}
	}
	runtime.KeepAlive(acc)
	return best
}
