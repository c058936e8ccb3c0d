package nt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Never is the Threshold of a Calibration in which NT stores did not win at
// any measured size (and of every Calibration in a build without them).
const Never = -1

// EnvCalibration names the environment variable that Default reads: the path
// of a file written by Calibration.Save. When it is set and the file holds a
// calibration taken on the same CPU model and build, Default loads it instead
// of measuring.
const EnvCalibration = "XDPKIT_NT_CALIBRATION"

// Sentinel errors.
var (
	// ErrInvalidOptions is returned by Calibrate for options it cannot use.
	ErrInvalidOptions = errors.New("nt: invalid calibration options")
	// ErrBadCalibration is returned by LoadCalibration for a file that is
	// not a calibration of this format.
	ErrBadCalibration = errors.New("nt: bad calibration file")
)

// calibrationVersion is stored in saved files; a file of another version is
// rejected rather than misread.
const calibrationVersion = 1

// Point is one measured size: the best time per copy, over the rounds, of an
// ordinary copy (the builtin copy, in pieces below 1 MiB) and of the NT copy
// (fenced once per batch), both writing into a destination that cycles
// through a ring larger than the cache; and the median over the rounds of
// the ratio of the two, each round timing both back to back.
type Point struct {
	Size int     `json:"size"`
	Copy float64 `json:"copy_ns"` // best ns per copy, ordinary stores
	NT   float64 `json:"nt_ns"`   // best ns per copy, NT stores + 1 Fence per batch
	// Speedup is the median of copy time / NT time: above 1 NT is faster.
	// It decides wins and losses: a pair of trials run back to back sees
	// the same interference from other processes, so their ratio varies
	// less than either time.
	Speedup float64 `json:"speedup"`
}

// Calibration is the answer to "from which size do nontemporal stores pay on
// this machine", and the evidence for it.
type Calibration struct {
	Version int `json:"version"`
	// Threshold is the smallest measured size, in bytes, at which NT won
	// (was at least MinGain faster than ordinary stores) and above which it
	// lost nowhere (was nowhere more than MinGain slower); Never (-1) if
	// there is no such size. A Threshold of 0 is treated as Never too.
	Threshold int     `json:"threshold"`
	Points    []Point `json:"points"`
	// Took is how long the measurement took, Setup the part of it spent
	// allocating and faulting in the ring.
	Took  time.Duration `json:"took_ns"`
	Setup time.Duration `json:"setup_ns"`
	// CPU is the processor model the measurement ran on, Impl the NT
	// implementation ("avx512", "avx2", "sse2" or "generic").
	CPU  string `json:"cpu"`
	Impl string `json:"impl"`
	// The options used.
	RingBytes int     `json:"ring_bytes"`
	Batch     int     `json:"batch"`
	MinGain   float64 `json:"min_gain"`
	Rounds    int     `json:"rounds"`
	// When the measurement was taken.
	When time.Time `json:"when"`
	// Source says where the value came from: "measured" or the file it was
	// loaded from. Default appends why it did not use a file it was given.
	Source string `json:"-"`
}

// UseNT reports whether a copy of n bytes should use Copy rather than the
// builtin copy according to this calibration. It does not know where the
// destination goes: the caller must also know that the CPU will not read the
// destination again soon (for AF_XDP, that a device reads it by DMA).
func (c Calibration) UseNT(n int) bool {
	return c.Threshold > 0 && n >= c.Threshold
}

// String summarises the calibration on one line.
func (c Calibration) String() string {
	th := "never"
	if c.Threshold > 0 {
		th = fmt.Sprintf("%d B", c.Threshold)
	}
	return fmt.Sprintf("nt: NT copy wins from %s (%s, %s, ring %d MiB, fence per %d, %d sizes x %d rounds in %v, set-up %v, %s)",
		th, c.Impl, c.CPU, c.RingBytes>>20, c.Batch, len(c.Points), c.Rounds,
		c.Took.Round(time.Microsecond), c.Setup.Round(time.Microsecond), c.Source)
}

// CalibrateOptions tunes Calibrate. The zero value, or a nil pointer, means
// the defaults.
type CalibrateOptions struct {
	// Sizes to measure, in bytes; default 64, 128, 256, 512, 1024, 1500,
	// 2048, 4096, 8192 and 16384 bytes, 64 KiB, 256 KiB and 1 MiB.
	Sizes []int
	// RingBytes is the size of the destination ring; it should exceed the
	// last-level cache the copying core sees. Default 64 MiB.
	RingBytes int
	// Batch is the number of copies per Fence; default 32.
	Batch int
	// MinGain is how much faster NT must be to win at a size, and how much
	// slower to lose: 0.05 means a win is NT time <= 0.95 * copy time and a
	// loss NT time > 1.05 * copy time; in between is a tie. Default 0.05.
	MinGain float64
	// Budget is the measuring time to aim for, ring set-up excluded, default
	// 20ms. At least 3 rounds are measured whatever the budget.
	Budget time.Duration
}

// defaultSizes are packet sizes and the sizes of larger messages.
var defaultSizes = []int{64, 128, 256, 512, 1024, 1500, 2048, 4096, 8192, 16384, 65536, 262144, 1 << 20}

const (
	defaultRing    = 64 << 20
	defaultBatch   = 32
	defaultMinGain = 0.05
	defaultBudget  = 20 * time.Millisecond
	minRounds      = 3
	maxRounds      = 50
	// bytesPerTrial is about how much one timed trial copies.
	bytesPerTrial = 512 << 10
)

func (o *CalibrateOptions) withDefaults() (CalibrateOptions, error) {
	var r CalibrateOptions
	if o != nil {
		r = *o
	}
	if r.Sizes == nil {
		r.Sizes = defaultSizes
	}
	r.Sizes = slices.Clone(r.Sizes)
	slices.Sort(r.Sizes)
	r.Sizes = slices.Compact(r.Sizes)
	if r.RingBytes == 0 {
		r.RingBytes = defaultRing
	}
	if r.Batch == 0 {
		r.Batch = defaultBatch
	}
	if r.MinGain == 0 {
		r.MinGain = defaultMinGain
	}
	if r.Budget == 0 {
		r.Budget = defaultBudget
	}
	switch {
	case len(r.Sizes) == 0 || r.Sizes[0] <= 0:
		return r, fmt.Errorf("%w: sizes must be positive, got %v", ErrInvalidOptions, r.Sizes)
	case r.RingBytes < 4*r.Sizes[len(r.Sizes)-1]:
		return r, fmt.Errorf("%w: ring of %d bytes is less than 4 copies of %d", ErrInvalidOptions, r.RingBytes, r.Sizes[len(r.Sizes)-1])
	case r.Batch < 0 || r.MinGain < 0 || r.MinGain >= 1 || r.Budget < 0:
		return r, fmt.Errorf("%w: batch %d, min gain %g, budget %v", ErrInvalidOptions, r.Batch, r.MinGain, r.Budget)
	}
	return r, nil
}

// Calibrate measures, for each size, an ordinary copy against the NT copy
// (fenced once per Batch copies) into a destination that cycles through a
// ring of RingBytes, and returns the size from which the NT copy wins. With
// the defaults it takes a few tens of milliseconds (20 ms of measuring plus
// the ring set-up) and maps the 64 MiB ring for that time only. It measures
// the NT path at every size, ignoring Copy's 256-byte cut-over. In a build
// without NT stores it measures nothing and returns Threshold Never.
//
// The source is hot (one buffer copied again and again), as a payload the
// application has just written is; the destination is cold, as a UMEM frame
// that a device last read by DMA is. Each point is the best of several
// rounds so that a preempted round does not count.
func Calibrate(opts *CalibrateOptions) (Calibration, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Calibration{}, err
	}
	start := time.Now()
	c := Calibration{
		Version:   calibrationVersion,
		Threshold: Never,
		CPU:       cpuModel(),
		Impl:      implName(),
		RingBytes: o.RingBytes,
		Batch:     o.Batch,
		MinGain:   o.MinGain,
		When:      start.UTC(),
		Source:    "measured",
	}
	if !Supported {
		c.Took = time.Since(start)
		return c, nil
	}

	ring, free := allocRing(o.RingBytes)
	defer free()
	src := make([]byte, o.Sizes[len(o.Sizes)-1])
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	m := meter{ring: ring, src: src, batch: o.Batch}

	best := make([]Point, len(o.Sizes))
	ratios := make([][]float64, len(o.Sizes))
	for i, s := range o.Sizes {
		best[i] = Point{Size: s, Copy: -1, NT: -1}
		ratios[i] = make([]float64, 0, maxRounds)
	}
	t0 := time.Now()
	c.Setup = t0.Sub(start)
	rounds := 0
	for rounds < minRounds || (rounds < maxRounds && time.Since(t0) < o.Budget) {
		rounds++
		for i := range best {
			p := &best[i]
			// Alternate which goes first so neither always inherits the
			// other's cache state.
			var ct, nt float64
			if rounds%2 == 0 {
				ct = m.trial(p.Size, false)
				nt = m.trial(p.Size, true)
			} else {
				nt = m.trial(p.Size, true)
				ct = m.trial(p.Size, false)
			}
			if p.Copy < 0 || ct < p.Copy {
				p.Copy = ct
			}
			if p.NT < 0 || nt < p.NT {
				p.NT = nt
			}
			ratios[i] = append(ratios[i], ct/nt)
		}
	}
	for i := range best {
		best[i].Speedup = median(ratios[i])
	}
	c.Points = best
	c.Rounds = rounds
	c.Threshold = threshold(best, o.MinGain)
	c.Took = time.Since(start)
	return c, nil
}

// threshold returns the smallest size at which NT won (Speedup at least
// 1/(1-minGain)) such that NT lost (Speedup below 1/(1+minGain)) at no larger
// size; Never if there is none. points are sorted by size.
func threshold(points []Point, minGain float64) int {
	th := Never
	for i := len(points) - 1; i >= 0; i-- {
		p := points[i]
		if p.Speedup <= 0 || p.Speedup*(1+minGain) < 1 {
			break
		}
		if p.Speedup*(1-minGain) >= 1 {
			th = p.Size
		}
	}
	return th
}

// median sorts v and returns its median (0 for none).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// meter runs timed trials of copies into a ring with one cursor shared by
// all trials, so that each copy lands where the ring was written longest ago.
type meter struct {
	ring, src []byte
	batch     int
	pos       int
}

// trial copies about bytesPerTrial bytes in copies of size s and returns the
// time per copy in ns.
func (m *meter) trial(s int, useNT bool) float64 {
	stride := (s + 63) &^ 63
	k := max(4, bytesPerTrial/stride)
	batch := max(1, m.batch)
	src := m.src[:s]
	start := time.Now()
	for i := 0; i < k; i++ {
		if m.pos+stride > len(m.ring) {
			m.pos = 0
		}
		dst := m.ring[m.pos : m.pos+s]
		if useNT {
			copyNT(dst, src)
			if (i+1)%batch == 0 {
				Fence()
			}
		} else {
			copyOrdinary(dst, src)
		}
		m.pos += stride
	}
	if useNT {
		Fence()
	}
	return float64(time.Since(start).Nanoseconds()) / float64(k)
}

// Save writes the calibration to path as JSON.
func (c Calibration) Save(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("nt: encoding calibration: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("nt: saving calibration: %w", err)
	}
	return nil
}

// LoadCalibration reads a calibration written by Save. It does not check
// that it was taken on this machine; Default does.
func LoadCalibration(path string) (Calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Calibration{}, fmt.Errorf("nt: loading calibration: %w", err)
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return Calibration{}, fmt.Errorf("%w: %s: %w", ErrBadCalibration, path, err)
	}
	if c.Version != calibrationVersion {
		return Calibration{}, fmt.Errorf("%w: %s: version %d, want %d", ErrBadCalibration, path, c.Version, calibrationVersion)
	}
	if c.Threshold == 0 || c.Threshold < Never {
		c.Threshold = Never
	}
	c.Source = path
	return c, nil
}

var (
	defaultOnce sync.Once
	defaultCal  Calibration
)

// Default returns the process-wide calibration, obtained on first use: loaded
// from the file named by $XDPKIT_NT_CALIBRATION when that file holds a
// calibration taken on the same CPU model with the same implementation,
// measured with the default options otherwise (a few tens of milliseconds,
// once). Its Source says which, and why a named file was not used. Call it
// while setting up (when a socket is opened), not on the first packet.
func Default() Calibration {
	defaultOnce.Do(func() { defaultCal = loadOrCalibrate(os.Getenv(EnvCalibration)) })
	return defaultCal
}

func loadOrCalibrate(path string) Calibration {
	why := ""
	if path != "" {
		c, err := LoadCalibration(path)
		switch {
		case err != nil:
			why = err.Error()
		case c.CPU != cpuModel() || c.Impl != implName():
			why = fmt.Sprintf("%s was taken on %q/%s, this is %q/%s", path, c.CPU, c.Impl, cpuModel(), implName())
		default:
			return c
		}
	}
	c, err := Calibrate(nil)
	if err != nil {
		// The default options are valid; this cannot happen.
		panic(err)
	}
	if why != "" {
		c.Source += " (" + EnvCalibration + " not used: " + why + ")"
	}
	return c
}

// heapRing allocates a calibration ring on the Go heap and faults it in.
func heapRing(n int) ([]byte, func()) {
	b := make([]byte, n)
	touch(b)
	return b, func() {}
}

// touch writes one byte per 4 KiB page of b.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// ordinaryChunk keeps each builtin copy below 1 MiB: from 1 MiB on, the Go
// runtime's memmove on amd64 with AVX itself switches to nontemporal stores
// (runtime/memmove_amd64.s, gobble_big_data_fwd).
const ordinaryChunk = 256 << 10

// copyOrdinary is the builtin copy with ordinary stores at every size: the
// baseline that calibration and the benchmarks compare Copy with.
func copyOrdinary(dst, src []byte) int {
	n := min(len(dst), len(src))
	for off := 0; off < n; off += ordinaryChunk {
		copy(dst[off:n], src[off:min(off+ordinaryChunk, n)])
	}
	return n
}
