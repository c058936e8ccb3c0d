package txpath

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/csum"
	"github.com/xdpkit/xdpkit/nt"
	"github.com/xdpkit/xdpkit/xsk"
)

func pt(size int, copyNs, ntNs, copySum, ntSum, fused float64) TablePoint {
	p := TablePoint{Size: size}
	p.Ns[MethodCopy], p.Ns[MethodNT], p.Ns[MethodCopySum], p.Ns[MethodNTSum], p.Ns[MethodFused] = copyNs, ntNs, copySum, ntSum, fused
	var times [5][]float64
	for m, ns := range p.Ns {
		times[m] = []float64{ns, ns * 1.5, ns * 0.9} // paired rounds: the ratios stay the same
	}
	p.Offload = fastest(&times, MethodCopy, MethodNT, MethodFused)
	p.Soft = fastest(&times, MethodFused, MethodNTSum, MethodCopySum)
	return p
}

// chosenPoint is a table point with the given best times, its choice made
// by choose from rounds whose per-method ratios are those of the times.
func chosenPoint(size int, cold, ntStores bool, copyNs, ntNs, copySum, ntSum, fused float64) TablePoint {
	p := TablePoint{Size: size, Cold: cold}
	p.Ns[MethodCopy], p.Ns[MethodNT], p.Ns[MethodCopySum], p.Ns[MethodNTSum], p.Ns[MethodFused] = copyNs, ntNs, copySum, ntSum, fused
	var times [5][]float64
	for m, ns := range p.Ns {
		times[m] = []float64{ns, ns * 1.2, ns * 0.95}
	}
	p.choose(&times, ntStores)
	return p
}

// TestChooseRules checks choose's rules: a near tie goes to the
// incumbent, NT stores into a cold destination from 256 B and the plain
// or the fused copy elsewhere, and a clear win decides; below 256 B, or
// without NT stores in the build, never an NT method.
func TestChooseRules(t *testing.T) {
	point := chosenPoint
	for _, tc := range []struct {
		name          string
		p             TablePoint
		offload, soft Method
	}{
		// NT 1% slower, NT+sum 0.5% slower: ties.
		{"cold 256 B tie", point(256, true, true, 50, 50.5, 60.2, 60.6, 60.3), MethodNT, MethodNTSum},
		{"hot 256 B tie", point(256, false, true, 50, 50.5, 60.2, 60.6, 60.3), MethodCopy, MethodFused},
		{"cold 1500 B tie", point(1500, true, true, 100, 101, 130, 131, 130.5), MethodNT, MethodNTSum},
		{"cold 4096 B, fused 1% less time than NT+sum", point(4096, true, true, 170, 105, 225, 160, 158.4), MethodNT, MethodNTSum},
		// Into a cold destination from 256 B as elsewhere, a clear win
		// decides, with and without offload apart; without offload, where
		// NT beats the ordinary copy, a win over NT + sum is clear from
		// ntSumKeep (10%).
		{"cold 256 B, copy 10% faster", point(256, true, true, 50, 55, 60, 66, 70), MethodCopy, MethodCopySum},
		{"cold 1500 B, NT 40% faster than copy, fused 8% faster than NT+sum", point(1500, true, true, 140, 100, 180, 140, 130), MethodNT, MethodNTSum},
		{"cold 1500 B, NT 40% faster than copy, fused 20% faster than NT+sum", point(1500, true, true, 140, 100, 180, 140, 116), MethodNT, MethodFused},
		{"cold 256 B, copy faster than NT, fused 8% faster than NT+sum", point(256, true, true, 50, 55, 70, 70, 65), MethodCopy, MethodFused},
		{"cold 256 B, fused 18% less time than NT, 27% than NT+sum", point(256, true, true, 14, 16.5, 15.1, 18.4, 13.5), MethodFused, MethodFused},
		{"cold 256 B, copy slower than NT, fused 30% less time than NT+sum", point(256, true, true, 20, 16, 22, 30, 21), MethodNT, MethodFused},
		{"cold 4096 B, fused 5% less time than NT+sum, NT 35% less than fused", point(4096, true, true, 170, 105, 225, 160, 152), MethodNT, MethodNTSum},
		{"cold 4096 B, fused 15% less time than NT+sum", point(4096, true, true, 170, 105, 225, 160, 136), MethodNT, MethodFused},
		// Once NT + sum is out, a challenger to the fused copy needs
		// switchGain only.
		{"cold 4096 B, fused 15% less time than NT+sum, copy+sum 5% less than fused", point(4096, true, true, 170, 105, 129, 160, 136), MethodNT, MethodCopySum},
		{"cold 65536 B, NT+sum 7% less time than fused", point(65536, true, true, 2000, 1700, 2800, 2150, 2300), MethodNT, MethodNTSum},
		// Clear wins decide elsewhere.
		{"hot 256 B, NT 10% faster", point(256, false, true, 55, 50, 66, 60, 70), MethodNT, MethodNTSum},
		{"hot 256 B, fused 10% faster", point(256, false, true, 55, 60, 66, 70, 50), MethodFused, MethodFused},
		// Below 256 B nt.Copy is the ordinary copy: never NT.
		{"cold 64 B, NT 10% faster", point(64, true, true, 55, 50, 66, 60, 70), MethodCopy, MethodCopySum},
		{"cold 64 B, copy+sum 10% faster", point(64, true, true, 50, 55, 60, 66, 66), MethodCopy, MethodCopySum},
		// Without NT stores in the build (nt.Supported false), NT is the
		// ordinary copy plus a fence: never NT, cold or hot.
		{"cold 256 B, no NT stores", point(256, true, false, 50, 45, 60, 55, 70), MethodCopy, MethodCopySum},
		{"hot 1500 B, no NT stores, NT 10% faster", point(1500, false, false, 110, 100, 130, 120, 140), MethodCopy, MethodCopySum},
	} {
		if tc.p.Offload != tc.offload || tc.p.Soft != tc.soft {
			t.Errorf("%s: offload %s, software %s; want %s, %s", tc.name, tc.p.Offload, tc.p.Soft, tc.offload, tc.soft)
		}
	}
}

// TestChooseColdByRounds: into a cold destination the choice follows the
// rounds, not the best times. NT + sum has a few quick trials and is
// behind the fused copy-and-sum in every other; its best time is the
// lowest of all, yet the fused copy is the answer without offload. And
// the other way round: the fused copy's few quick trials do not take the
// answer from an NT + sum that is ahead in the rest.
func TestChooseColdByRounds(t *testing.T) {
	const n = 31
	rounds := func(typical, quick float64, quickRounds ...int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = typical * (1 + 0.01*float64(i%3))
		}
		for _, i := range quickRounds {
			v[i] = quick
		}
		return v
	}
	for _, tc := range []struct {
		name          string
		ntSum, fused  []float64
		offload, soft Method
	}{
		{"NT+sum quick in 3 rounds, fused ahead in the rest", rounds(165, 95, 4, 11, 20), rounds(140, 0), MethodNT, MethodFused},
		{"fused quick in 3 rounds, NT+sum ahead in the rest", rounds(150, 0), rounds(160, 100, 2, 9, 25), MethodNT, MethodNTSum},
	} {
		var times [5][]float64
		times[MethodCopy] = rounds(170, 0)
		times[MethodNT] = rounds(105, 0)
		times[MethodCopySum] = rounds(225, 0)
		times[MethodNTSum], times[MethodFused] = tc.ntSum, tc.fused
		p := TablePoint{Size: 4096, Cold: true}
		for m, v := range times {
			p.Ns[m] = slices.Min(v)
		}
		p.choose(&times, true)
		if p.Offload != tc.offload || p.Soft != tc.soft {
			t.Errorf("%s (best times %v): offload %s, software %s; want %s, %s", tc.name, p.Ns, p.Offload, p.Soft, tc.offload, tc.soft)
		}
	}
}

func TestTable(t *testing.T) {
	// Cold points as choose makes them: copy with offload and fused
	// without at 64 B, NT stores from 256 B (they take the least time).
	cold := func(size int, copyNs, ntNs, copySum, ntSum, fused float64) TablePoint {
		return chosenPoint(size, true, true, copyNs, ntNs, copySum, ntSum, fused)
	}
	pts := []TablePoint{
		cold(64, 10, 20, 14, 24, 12),
		cold(256, 30, 20, 40, 30, 33),
		cold(1500, 150, 60, 200, 90, 100),
		cold(4096, 400, 150, 500, 190, 300),
		cold(65536, 3000, 2000, 4000, 2600, 2900),
	}
	if pts[0].Offload != MethodCopy || pts[0].Soft != MethodFused || pts[1].Offload != MethodNT || pts[2].Soft != MethodNTSum {
		t.Fatalf("choose: %+v", pts)
	}
	hot := []TablePoint{pt(64, 1, 9, 9, 9, 9), pt(65536, 9, 9, 9, 9, 1)}
	for _, ntTh := range []int{nt.Never, 1 << 20} {
		tb := build(hot, pts, ntTh)
		if got := tb.pick(100, false, true); got != MethodCopy {
			t.Errorf("hot pick(100, offload) = %s, want copy", got)
		}
		if got := tb.pick(1<<20, false, true); got != MethodFused {
			t.Errorf("hot pick(1 MiB, offload) = %s, want fused (the 64 KiB answer)", got)
		}
		for _, tc := range []struct {
			size    int
			offload bool
			want    Method
		}{
			{0, true, MethodCopy},
			{64, true, MethodCopy},
			{127, true, MethodCopy}, // nearest measured size: 64 B
			// 128-255 B: the nearest measured size below 256 B (64 B),
			// not 256 B, whose cold answer prefers NT.
			{191, true, MethodCopy},
			{192, false, MethodFused},
			{255, true, MethodCopy},
			{255, false, MethodFused},
			{256, true, MethodNT},
			{256, false, MethodNTSum},
			{1499, true, MethodNT},
			{1499, false, MethodNTSum}, // 1500 B's bucket
			{1500, false, MethodNTSum},
			{2000, false, MethodNTSum}, // nearest: 1500 B
			{4095, false, MethodNTSum}, // 4096 B's bucket
			{4096, false, MethodNTSum},
			{65535, false, MethodNTSum},
			{65536, true, MethodNT},
			{65536, false, MethodNTSum},
			{65537, true, MethodCopy}, // above 64 KiB NT only on nt's word
			{65537, false, MethodFused},
			{1 << 19, true, MethodCopy},
		} {
			if got := tb.pick(tc.size, true, tc.offload); got != tc.want {
				t.Errorf("nt threshold %d: pick(%d, offload %v) = %s, want %s", ntTh, tc.size, tc.offload, got, tc.want)
			}
		}
		if got := tb.pick(1<<20, true, true); (got == MethodNT) != (ntTh > 0) {
			t.Errorf("nt threshold %d: pick(1 MiB, offload) = %s", ntTh, got)
		}
		if got := tb.pick(1<<20, true, false); (got == MethodNTSum) != (ntTh > 0) {
			t.Errorf("nt threshold %d: pick(1 MiB, software) = %s", ntTh, got)
		}
	}
}

func TestFastestPaired(t *testing.T) {
	var times [5][]float64
	times[MethodCopy] = []float64{10, 20, 10, 10, 10}
	// One lucky round would make NT the best-of; paired, it loses.
	times[MethodNT] = []float64{5, 22, 11, 11, 11}
	times[MethodFused] = []float64{9.9, 19.8, 9.9, 9.9, 9.9} // 1% faster: not enough to switch
	if got := fastest(&times, MethodCopy, MethodNT, MethodFused); got != MethodCopy {
		t.Errorf("fastest = %s, want copy", got)
	}
	times[MethodFused] = []float64{9, 18, 9, 9, 9} // 10% faster
	if got := fastest(&times, MethodCopy, MethodNT, MethodFused); got != MethodFused {
		t.Errorf("fastest = %s, want fused", got)
	}
}

// TestFastestConfidence: a challenger ahead at the median of the paired
// ratios but behind in many rounds does not replace the incumbent; one
// ahead in nearly every round does.
func TestFastestConfidence(t *testing.T) {
	// The sign test's exact ranks (binomial(n, 1/2) cumulative <= 5%).
	for _, tc := range []struct{ n, want int }{{0, 0}, {1, 0}, {5, 0}, {7, 0}, {8, 1}, {12, 2}, {22, 6}, {31, 10}, {37, 13}, {100, 41}} {
		if got := medianLow(tc.n); got != tc.want {
			t.Errorf("medianLow(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	const n = 31
	var times [5][]float64
	for i := range n {
		times[MethodNT] = append(times[MethodNT], 100)
		// copy 5% faster in 17 rounds (the median's side), 10% slower in 14.
		c := 95.0
		if i%2 == 1 && i < 28 {
			c = 110
		}
		times[MethodCopy] = append(times[MethodCopy], c)
		times[MethodFused] = append(times[MethodFused], 150)
	}
	if got := fastest(&times, MethodNT, MethodCopy, MethodFused); got != MethodNT {
		t.Errorf("copy ahead at the median only: fastest = %s, want nt (the incumbent)", got)
	}
	for i := range n {
		if i != 3 && i != 17 { // behind in 2 rounds of 31
			times[MethodCopy][i] = 95
		}
	}
	if got := fastest(&times, MethodNT, MethodCopy, MethodFused); got != MethodCopy {
		t.Errorf("copy ahead in 29 of 31 rounds: fastest = %s, want copy", got)
	}
}

func TestMeasureFrames(t *testing.T) {
	sizes := []int{64, 1500, 4096}
	pts := measureFrames(sizes, 4<<20, coldTrialBytes, true, time.Millisecond)
	if len(pts) != len(sizes) {
		t.Fatalf("%d points", len(pts))
	}
	for i, p := range pts {
		if p.Size != sizes[i] {
			t.Errorf("point %d: size %d", i, p.Size)
		}
		for _, m := range Methods {
			if p.Ns[m] <= 0 {
				t.Errorf("size %d: %s not measured", p.Size, m)
			}
		}
		okOffload := p.Offload == MethodCopy || p.Offload == MethodNT || p.Offload == MethodFused
		if !okOffload || !p.Soft.Sums() || p.Size < 256 && (p.Offload.NT() || p.Soft.NT()) {
			t.Errorf("size %d: choices %s/%s from %v", p.Size, p.Offload, p.Soft, p.Ns)
		}
	}
}

// TestMeasureFramesOrder: into a cold destination measureFrames measures one
// size at a time, every method warmed up first; into a hot one the sizes
// take turns in every round.
func TestMeasureFramesOrder(t *testing.T) {
	var sizes []int
	trialHook = func(size int, m Method) { sizes = append(sizes, size) }
	defer func() { trialHook = nil }()
	measureFrames([]int{64, 1500, 4096}, 4<<20, coldTrialBytes, true, time.Millisecond)
	// Cold: 64 B trials, then 1500 B, then 4096 B, each block at least a
	// warm-up and 5 rounds of every method.
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			t.Fatalf("cold: trial %d at %d B after %d B: sizes interleaved", i, sizes[i], sizes[i-1])
		}
	}
	for _, s := range []int{64, 1500, 4096} {
		if n := countOf(sizes, s); n < 6*len(Methods) {
			t.Errorf("cold: %d trials at %d B, want at least %d", n, s, 6*len(Methods))
		}
	}
	sizes = nil
	measureFrames([]int{64, 1500}, 1<<20, hotTrialBytes, false, time.Millisecond)
	// Hot: each round takes every size in turn (the untimed passes over the
	// region are not trials).
	turns := 0
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			turns++
		}
	}
	if turns < 4 {
		t.Errorf("hot: sizes took turns %d times, want one per round (at least 4)", turns)
	}
}

func countOf(v []int, x int) int {
	n := 0
	for _, y := range v {
		if y == x {
			n++
		}
	}
	return n
}

// useTable makes ChooseCopy answer from tb until the test ends.
func useTable(t *testing.T, tb *table) {
	measureMu.Lock()
	old := chosen.Swap(tb)
	measureMu.Unlock()
	t.Cleanup(func() { chosen.Store(old) })
}

// TestChooseCopyFollowsTable gives ChooseCopy a table whose four
// (destination, checksum) columns all differ and checks that its answers
// come from the right column at measured and unmeasured sizes: an
// implementation that ignores coldDest or offload, or reads the wrong
// bucket, fails here.
func TestChooseCopyFollowsTable(t *testing.T) {
	sizes := []int{64, 256, 1500, 4096, 65536}
	var hot, cold []TablePoint
	for _, n := range sizes {
		f := float64(n)
		// hot: copy and fused win; cold: NT and NT+sum win
		hot = append(hot, pt(n, f, 3*f, 3*f, 3*f, 2*f))
		c := pt(n, 3*f, f, 4*f, 2*f, 3*f)
		c.Cold = true
		cold = append(cold, c)
	}
	useTable(t, build(hot, cold, nt.Never))
	for _, n := range []int{64, 100, 256, 1000, 1500, 1501, 4096, 9000, 65536} {
		for _, tc := range []struct {
			cold, offload bool
			want          Method
		}{
			{false, true, MethodCopy},
			{false, false, MethodFused},
			{true, true, MethodNT},
			{true, false, MethodNTSum},
		} {
			want := tc.want
			if n < ntMin {
				want = withoutNT(want) // nt.Copy's plain copy below 256 B
			}
			if got := ChooseCopy(n, tc.cold, tc.offload); got != want {
				t.Errorf("ChooseCopy(%d, cold %v, offload %v) = %s, want %s", n, tc.cold, tc.offload, got, want)
			}
		}
	}
}

// TestChooseCopy checks the real measurement: every answer is a method
// for its case (offload: copy, NT or fused; software: one that sums),
// nothing NT below nt.Copy's 256-byte cut-over, ChooseCopy agrees with
// the table, and a lookup allocates nothing.
func TestChooseCopy(t *testing.T) {
	Prepare()
	pts := ChooseTable()
	if len(pts) != 2*len(tableSizes) {
		t.Fatalf("%d points, want %d", len(pts), 2*len(tableSizes))
	}
	for _, p := range pts {
		off, soft := ChooseCopy(p.Size, p.Cold, true), ChooseCopy(p.Size, p.Cold, false)
		if off != p.Offload || soft != p.Soft {
			t.Errorf("ChooseCopy(%d, cold %v) = %s / %s, table %s / %s", p.Size, p.Cold, off, soft, p.Offload, p.Soft)
		}
		if off.Sums() && off != MethodFused || !soft.Sums() || (p.Size < ntMin || !nt.Supported) && (off.NT() || soft.NT()) {
			t.Errorf("ChooseCopy(%d, cold %v): %s with offload, %s without", p.Size, p.Cold, off, soft)
		}
		for _, m := range Methods {
			if p.Ns[m] <= 0 {
				t.Errorf("size %d cold %v: %s not measured", p.Size, p.Cold, m)
			}
		}
		t.Logf("cold %-5v %6d B: copy %.0f nt %.0f copy+sum %.0f nt+sum %.0f fused %.0f ns -> %s / %s", p.Cold, p.Size,
			p.Ns[MethodCopy], p.Ns[MethodNT], p.Ns[MethodCopySum], p.Ns[MethodNTSum], p.Ns[MethodFused], p.Offload, p.Soft)
	}
	if a := testing.AllocsPerRun(100, func() { ChooseCopy(1500, true, false) }); a != 0 {
		t.Errorf("ChooseCopy allocates %v", a)
	}
}

// TestRemeasure: Remeasure replaces the table with a new measurement,
// which ChooseTable and ChooseCopy then answer from; ChooseCopy answers
// from the old table while the new one is measured, without waiting.
func TestRemeasure(t *testing.T) {
	Prepare()
	old := chosen.Load()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Remeasure()
	}()
	asked := 0
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			ChooseCopy(1500, true, false)
			asked++
		}
	}
	if asked < 100 {
		t.Errorf("ChooseCopy answered %d times during the measurement: it waited for it", asked)
	}
	cur := chosen.Load()
	if cur == old || cur == nil {
		t.Fatalf("Remeasure kept the table (%p, was %p)", cur, old)
	}
	pts := ChooseTable()
	if len(pts) != 2*len(tableSizes) || &pts[0] != &cur.points[0] {
		t.Fatalf("ChooseTable after Remeasure: %d points, not the new table's", len(pts))
	}
	for _, p := range pts {
		if off, soft := ChooseCopy(p.Size, p.Cold, true), ChooseCopy(p.Size, p.Cold, false); off != p.Offload || soft != p.Soft {
			t.Errorf("ChooseCopy(%d, cold %v) = %s / %s, new table %s / %s", p.Size, p.Cold, off, soft, p.Offload, p.Soft)
		}
	}
	t.Logf("ChooseCopy answered %d times during the measurement", asked)
}

// TestCopyModeNoNT: the Auto policy never copies with NT stores in copy
// mode, even when ChooseCopy's table says NT wins everywhere (hot and
// cold); in zero-copy mode the same table gives NT copies, so the table
// is in use. Counted by Stats.NTCopies.
func TestCopyModeNoNT(t *testing.T) {
	var hot, cold []TablePoint
	for _, n := range []int{64, 256, 1500, 4096, 65536} {
		f := float64(n)
		hot = append(hot, pt(n, 3*f, f, 4*f, 2*f, 3*f))
		c := pt(n, 3*f, f, 4*f, 2*f, 3*f)
		c.Cold = true
		cold = append(cold, c)
	}
	useTable(t, build(hot, cold, 1))
	flow4, err := NewUDPFlow(macA, macB, src4, dst4, nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{64, 300, 1000, 1500, 1900}
	for _, tc := range []struct {
		name   string
		zc     bool
		dev    Device
		wantNT bool
	}{
		{"copy/offload", false, Device{TxCsumOffload: true}, false},
		{"copy/software", false, Device{}, false},
		{"copy/veth", false, Device{TxCsumOffload: true, Software: true, Kind: "veth"}, false},
		{"zerocopy/offload", true, Device{XSKTxChecksum: true}, true},
		{"zerocopy/software", true, Device{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(t, fakeCfg{meta: true, zc: tc.zc, frames: 512, cfg: Config{Device: &tc.dev, BatchSize: 8}})
			for range 3 {
				for _, n := range sizes {
					if err := s.SendUDP(flow4, Options{}, make([]byte, n)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if got := st.NTCopies > 0; got != tc.wantNT || !tc.wantNT && (st.NTCopies != 0 || st.Fences != 0) {
				t.Errorf("%d NT copies, %d fences of %d packets (%s)", st.NTCopies, st.Fences, st.Packets, s.Decision())
			}
		})
	}
}

// TestDecideSoftwareDevice: on a software device with tx-checksumming on,
// Auto sums in software, an explicit Offload is obeyed with a warning, NT
// sums in software; with XDP_UMEM_TX_SW_CSUM Auto takes the cheaper of
// the two software sums; a NIC keeps offload.
func TestDecideSoftwareDevice(t *testing.T) {
	veth := Device{TxCsumOffload: true, Software: true, Kind: "veth"}
	never := func() int { return 0 }
	cheapFused := func() (float64, float64) { return 10, 20 }
	cheapKernel := func() (float64, float64) { return 20, 10 }
	for _, tc := range []struct {
		name                string
		want                Policy
		swCsum              bool
		dev                 Device
		costs               func() (float64, float64)
		got                 Policy
		canOffload, warning bool
	}{
		{"veth/auto", Auto, false, veth, nil, Software, false, false},
		{"veth/offload", Offload, false, veth, nil, Offload, false, true},
		{"veth/nt", NT, false, veth, nil, NT, false, false},
		{"veth/software", Software, false, veth, nil, Software, false, false},
		{"veth-tx-off/auto", Auto, false, Device{Software: true, Kind: "veth"}, nil, Software, true, false},
		{"veth-swcsum/auto-fused", Auto, true, veth, cheapFused, Software, true, false},
		{"veth-swcsum/auto-kernel", Auto, true, veth, cheapKernel, Offload, true, false},
		{"veth-swcsum/offload", Offload, true, veth, cheapFused, Offload, true, false},
		{"nic/auto", Auto, false, Device{TxCsumOffload: true, Kind: "mlx5_core"}, nil, Offload, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decideUMEM(tc.want, false, true, tc.swCsum, tc.dev, never, tc.costs)
			if err != nil {
				t.Fatal(err)
			}
			if d.Policy != tc.got || d.CanOffload != tc.canOffload || (d.Warning != "") != tc.warning || d.Reason == "" {
				t.Errorf("%+v", d)
			}
			if tc.warning && !strings.Contains(d.String(), "WARNING") {
				t.Errorf("String() does not warn: %s", d)
			}
			t.Log(d)
		})
	}
}

// TestAutoOnVethSendsFinishedChecksums: the datagrams the Auto policy
// sends on a software device with tx-checksumming on carry no offload
// request and a finished UDP checksum, over IPv4 and IPv6.
func TestAutoOnVethSendsFinishedChecksums(t *testing.T) {
	veth := Device{TxCsumOffload: true, Software: true, Kind: "veth"}
	for _, dst := range []netip.AddrPort{dst4, dst6} {
		src := src4
		if dst.Addr().Is6() {
			src = src6
		}
		flow, err := NewUDPFlow(macA, macB, src, dst, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, p := newFake(t, fakeCfg{meta: true, cfg: Config{Device: &veth, BatchSize: 8}})
		bad := 0
		p.onPacket = func(descs []xsk.Desc) {
			d := descs[0]
			if v, err := csum.VerifyFrame(s.u.Frame(d.Addr)[:d.Len]); d.Options&xsk.OptTxMetadata != 0 || v != csum.Good || err != nil {
				bad++
			}
		}
		for _, n := range []int{16, 300, 1400} {
			if err := s.SendUDP(flow, Options{}, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); bad != 0 || st.Offloaded != 0 || st.Completed != 3 {
			t.Errorf("%s: %d bad, %+v (%s)", dst, bad, st, s.Decision())
		}
	}
}

func TestMethodApply(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, m := range Methods {
		for _, n := range []int{0, 1, 63, 64, 255, 256, 1500, 4097, 65536} {
			for off := 0; off < 8; off += 3 {
				src := make([]byte, n+off)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				src = src[off:]
				dst := make([]byte, n+16)
				got := m.Apply(dst[off%2:], src, 7)
				nt.Fence()
				if !bytes.Equal(dst[off%2:][:n], src) {
					t.Fatalf("%s: %d bytes at offset %d: copy differs", m, n, off)
				}
				want := uint32(7)
				if m.Sums() {
					want = csum.Sum(src, 7)
				}
				if csum.Fold(got) != csum.Fold(want) {
					t.Fatalf("%s: %d bytes: sum %#x, want %#x", m, n, got, want)
				}
			}
		}
		if m.String() == "" || m.String()[0] == 'M' {
			t.Errorf("Method %d has no name", m)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Apply into a short destination did not panic")
		}
	}()
	MethodCopy.Apply(make([]byte, 3), make([]byte, 4), 0)
}

// TestSenderAuto checks that the Sender's Auto policy copies the way
// ChooseCopy says: zero-copy (cold destination) with offload, and copy
// mode without.
func TestSenderAuto(t *testing.T) {
	sizes := []int{64, 256, 1500, 1900}
	flow, err := NewUDPFlow(macA, macB, src4, dst4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		zc      bool
		dev     Device
		offload bool
	}{
		{"zerocopy/offload", true, Device{XSKTxChecksum: true}, true},
		{"copy/software", false, Device{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(t, fakeCfg{meta: true, zc: tc.zc, frames: 512, cfg: Config{Device: &tc.dev, BatchSize: 8}})
			wantNT := uint64(0)
			for _, n := range sizes {
				pl := make([]byte, n)
				if err := s.SendUDP(flow, Options{}, pl); err != nil {
					t.Fatal(err)
				}
				if tc.zc && ChooseCopy(n, tc.zc, tc.offload).NT() {
					wantNT++
				}
			}
			if err := s.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.NTCopies != wantNT {
				t.Errorf("NT copies %d, ChooseCopy says %d (%s)", st.NTCopies, wantNT, s.Decision())
			}
			if offloaded := st.Offloaded == st.Packets; offloaded != tc.offload {
				t.Errorf("offloaded %d of %d packets, want all: %v", st.Offloaded, st.Packets, tc.offload)
			}
		})
	}
}

// TestCopyModeMeasuresNothing: a copy-mode Sender with the Auto policy
// neither measures at New nor on its sends (ChooseCopy's table stays
// unbuilt), and still gets the fused copy-and-sum without offload and a
// plain copy with it; a zero-copy one builds the table at New.
func TestCopyModeMeasuresNothing(t *testing.T) {
	useTable(t, nil)
	flow4, err := NewUDPFlow(macA, macB, src4, dst4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []Device{{}, {TxCsumOffload: true}} {
		s, _ := newFake(t, fakeCfg{meta: true, frames: 512, cfg: Config{Device: &dev, BatchSize: 8}})
		for _, n := range []int{64, 1500} {
			if err := s.SendUDP(flow4, Options{}, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		if chosen.Load() != nil {
			t.Fatalf("copy mode (%s) built ChooseCopy's table", s.Decision())
		}
		want := MethodFused
		if dev.TxCsumOffload {
			want = MethodCopy
		}
		if m := s.autoCopy(1500, dev.TxCsumOffload); m != want {
			t.Errorf("copy mode, offload %v: %v, want %v", dev.TxCsumOffload, m, want)
		}
	}
	// XDP_UMEM_TX_SW_CSUM against the fused sum on a software device: one
	// measured point, not the table.
	if f, c := swCosts(); !(f > 0 && c > 0) || chosen.Load() != nil {
		t.Errorf("swCosts: fused %.1f ns, copy+sum %.1f ns, table built %v", f, c, chosen.Load() != nil)
	}
	if testing.Short() {
		return // the zero-copy half measures for a while
	}
	newFake(t, fakeCfg{meta: true, zc: true, frames: 512, cfg: Config{Device: &Device{}, BatchSize: 8}})
	if chosen.Load() == nil {
		t.Error("a zero-copy Auto Sender did not build ChooseCopy's table at New")
	}
}
