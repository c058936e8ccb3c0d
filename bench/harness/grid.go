package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

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

const (
	gridTolerance = 0.03
	frameSize     = 4096
	payloadOff    = 42        // Ethernet + IPv4 + UDP headers: where a UDP payload starts in a frame
	hotBytes      = 256 << 10 // a hot destination: this much UMEM, reused (fits the L2)
	// A cold destination cycles through coldBytes: twice the 32 MiB L3, as
	// nt's calibration and txpath's measurement do. (With 128 MiB, the
	// ordinary copy beat NT stores at 64 KiB here, 27 against 23-25
	// GB/s, where with 64 MiB NT won, 36-40 against 27-31: see the
	// report.)
	coldBytes  = 64 << 20
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
	Cells     []GridCell     `json:"cells"`
	Pass      bool           `json:"pass"`
	Rounds    int            `json:"rounds"`
	Tolerance float64        `json:"tolerance"`
	Calib     nt.Calibration `json:"nt_calibration"`
	// Table is txpath.ChooseCopy's own measurement (ns per copy by
	// method: copy, nt, copy+sum, nt+sum, fused) and its choices.
	Table []txpath.TablePoint `json:"choose_copy_table"`
	// ChooseNs is the cost of one txpath.ChooseCopy call, in ns.
	ChooseNs float64 `json:"choose_copy_ns"`
	Took     float64 `json:"seconds"`
}

// GridCell is one cell: the GB/s of each method (best and median of the
// rounds) and the verdict on auto.
type GridCell struct {
	Size    int               `json:"size"`
	Cold    bool              `json:"cold"`
	Offload bool              `json:"offload"`
	Methods map[string]Figure `json:"methods"` // by Method.String(), and "auto"
	Best    string            `json:"best"`    // the best fixed method
	Auto    string            `json:"auto"`    // what ChooseCopy chose
	// Ratio is the median over the rounds of auto / best (paired within
	// each round); BestRatio the ratio of their best-of-rounds GB/s.
	Ratio     float64 `json:"ratio"`
	BestRatio float64 `json:"best_ratio"`
	Pass      bool    `json:"pass"`
}

// Figure is a method's GB/s in a cell.
type Figure struct {
	Best   float64 `json:"best_gbps"`
	Median float64 `json:"median_gbps"`
}

// region is UMEM-like destination memory: frames of frameSize, a payload
// written payloadOff bytes into its first frame.
type region struct {
	mem    []byte
	stride int
	slots  int
	next   int
}

func newRegion(mem []byte, size int) *region {
	stride := (payloadOff + size + frameSize - 1) / frameSize * frameSize
	return &region{mem: mem, stride: stride, slots: max(1, len(mem)/stride)}
}

func (r *region) dst(size int) []byte {
	off := r.next*r.stride + payloadOff
	r.next++
	if r.next == r.slots {
		r.next = 0
	}
	return r.mem[off : off+size]
}

// trial copies about trialBytes of payload of size bytes with m (or with
// txpath.ChooseCopy's choice when auto, asked once per batch of fenceEvery
// copies, as a Sender could per flush: a per-copy call would add its own
// cost, reported apart as Grid.ChooseNs) and returns GB/s.
func trial(r *region, srcBuf []byte, n int, m txpath.Method, auto, cold, offload bool) float64 {
	k := (max(16, trialBytes/n) + srcOffsets - 1) / srcOffsets * srcOffsets
	var sum uint32
	if !cold {
		// One untimed pass over the hot region first: the previous trial
		// may have evicted it with NT stores.
		for i := 0; i < r.slots; i++ {
			mm := m
			if auto {
				mm = txpath.ChooseCopy(n, cold, offload)
			}
			mm.Apply(r.dst(n), srcBuf[:n], 0)
		}
		nt.Fence()
	}
	start := time.Now()
	for i := 0; i < k; {
		// One batch: the method is fixed inside it, so that auto and the
		// fixed methods run the same inner loop.
		if auto {
			m = txpath.ChooseCopy(n, cold, offload)
		}
		end := min(i+fenceEvery, k)
		for ; i < end; i++ {
			off := i % srcOffsets * (srcSpan/srcOffsets + 8)
			sum = m.Apply(r.dst(n), srcBuf[off:off+n], sum)
		}
		if m.NT() {
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
	rounds := 601
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
	logf("grid: %s", def)
	t0 := time.Now()
	txpath.Prepare() // ChooseCopy's own cold-destination measurement
	table := txpath.ChooseTable()
	logf("grid: txpath.Prepare took %v", time.Since(t0).Round(time.Millisecond))

	// Hot: hotBytes, or four payloads of the largest size if that is more
	// (as txpath measures it).
	maxStride := (payloadOff + gridSizes[len(gridSizes)-1] + frameSize - 1) / frameSize * frameSize
	hotMem, err := mapRegion(max(hotBytes, 4*maxStride))
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(hotMem)
	coldMem, err := mapRegion(coldBytes)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(coldMem)

	g := &Grid{Pass: true, Rounds: rounds, Tolerance: gridTolerance, Calib: def, Table: table, ChooseNs: chooseCost()}
	logf("grid: one ChooseCopy call costs %.2f ns", g.ChooseNs)
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
			reg := newRegion(mem, size)
			for _, offload := range []bool{true, false} {
				if err := ctx.Err(); err != nil {
					return g, err
				}
				cell := measureCell(reg, src, size, cold, offload, rounds)
				g.Cells = append(g.Cells, cell)
				g.Pass = g.Pass && cell.Pass
				verdict := "PASS"
				if !cell.Pass {
					verdict = "FAIL"
				}
				logf("grid: %5d B %-4s %-10s best %-8s %6.2f GB/s, auto=%-8s %6.2f GB/s (paired median x%.3f, best-of x%.3f) %s",
					size, temp(cold), offl(offload), cell.Best, cell.Methods[cell.Best].Best,
					cell.Auto, cell.Methods["auto"].Best, cell.Ratio, cell.BestRatio, verdict)
			}
		}
	}
	g.Took = time.Since(start).Seconds()
	return g, nil
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
	fixed := offloadMethods
	if !offload {
		fixed = noOffloadMethods
	}
	type entry struct {
		name string
		m    txpath.Method
		auto bool
		v    []float64
	}
	var es []*entry
	for _, m := range fixed {
		es = append(es, &entry{name: m.String(), m: m})
	}
	es = append(es, &entry{name: "auto", auto: true})
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
	cell := GridCell{Size: size, Cold: cold, Offload: offload, Methods: map[string]Figure{},
		Auto: txpath.ChooseCopy(size, cold, offload).String()}
	bestV := 0.0
	var best, auto *entry
	for _, e := range es {
		f := Figure{Best: slices.Max(e.v), Median: median(e.v)}
		cell.Methods[e.name] = f
		if e.auto {
			auto = e
		} else if f.Best > bestV {
			bestV, cell.Best, best = f.Best, e.name, e
		}
	}
	// The verdict: the median over the rounds of auto's GB/s divided by
	// the best fixed method's in the same round. Trials of one round run
	// within milliseconds of each other and see the same interference, so
	// their ratio varies much less than either figure (two runs of the
	// same method differed by up to 9% in best-of-rounds GB/s here).
	ratios := make([]float64, len(auto.v))
	for r := range auto.v {
		ratios[r] = auto.v[r] / best.v[r]
	}
	cell.Ratio = median(ratios)
	cell.BestRatio = cell.Methods["auto"].Best / bestV
	cell.Pass = cell.Ratio >= 1-gridTolerance
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
