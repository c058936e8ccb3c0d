package txpath_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdpkit/xdpkit/txpath"
)

const datagrams = 100000

var sendTimeout = 30 * time.Second

// TestPolicies delivers 100,000 datagrams of 64..1514-byte frames per
// policy and family to a kernel UDP socket that verifies checksums: every
// payload byte-exact and in order, the checksum error counters unchanged,
// every frame free afterwards.
func TestPolicies(t *testing.T) {
	for _, c := range []struct {
		name string
		r    run
	}{
		// Offload on a UMEM with TX_SW_CSUM: the kernel completes the
		// checksum from our metadata before the frame leaves, so the
		// receiver really checks the request (csum_start, csum_offset,
		// the pre-filled pseudo-header sum).
		{"offload", run{policy: txpath.Offload, meta: true, swCsum: true}},
		{"software", run{policy: txpath.Software}},
		{"nt", run{policy: txpath.NT}},
		{"plain-raw", run{policy: txpath.Plain, raw: true}},
	} {
		for _, fam := range []string{"ipv4", "ipv6"} {
			t.Run(c.name+"/"+fam, func(t *testing.T) {
				e := newEnv(t, 1500)
				r := c.r
				r.v6 = fam == "ipv6"
				r.n = datagrams
				if testing.Short() {
					r.n = 5000
				}
				before := e.csumErrors(t)
				st, dec := e.send(t, r)
				if after := e.csumErrors(t); after != before {
					t.Errorf("checksum errors at the receiver: %d -> %d", before, after)
				}
				if st.Packets != uint64(r.n) {
					t.Errorf("stats: %d packets, want %d", st.Packets, r.n)
				}
				if r.policy == txpath.Offload && st.Offloaded != st.Packets {
					t.Errorf("offloaded %d of %d", st.Offloaded, st.Packets)
				}
				if r.policy == txpath.NT && st.NTCopies != st.Packets {
					t.Errorf("NT copies %d of %d", st.NTCopies, st.Packets)
				}
				t.Logf("%v; %+v", dec, st)
			})
		}
	}
}

// TestJumbo sends 9000-MTU datagrams (4000..9014-byte frames, three
// 4 KiB UMEM frames at most) as descriptor chains over XDP_USE_SG, and
// checks every checksum on the wire with an AF_PACKET capture: veth passes
// offload-nosw's frames on CHECKSUM_PARTIAL, which the receiving kernel
// does not verify, so there the field must hold the pseudo-header sum we
// pre-filled; every other case must verify.
func TestJumbo(t *testing.T) {
	for _, c := range []struct {
		name string
		r    run
	}{
		{"offload", run{policy: txpath.Offload, meta: true, swCsum: true}},
		{"offload-nosw", run{policy: txpath.Offload, meta: true}},
		{"software", run{policy: txpath.Software}},
		{"nt", run{policy: txpath.NT}},
	} {
		for _, fam := range []string{"ipv4", "ipv6"} {
			t.Run(c.name+"/"+fam, func(t *testing.T) {
				e := newEnv(t, 9000)
				r := c.r
				r.v6 = fam == "ipv6"
				r.jumbo = true
				r.n = 5000
				fd := e.capture(t)
				r.wire = new(atomic.Int64)
				type wireResult struct {
					ok, partial int
					err         error
				}
				wire := make(chan wireResult, 1)
				go func() {
					ok, partial, err := wireUDP(fd, r.n, r.wire)
					wire <- wireResult{ok, partial, err}
				}()
				before := e.csumErrors(t)
				st, _ := e.send(t, r)
				if after := e.csumErrors(t); after != before {
					t.Errorf("checksum errors at the receiver: %d -> %d", before, after)
				}
				w := <-wire
				if w.err != nil {
					t.Fatal(w.err)
				}
				if partial := r.policy == txpath.Offload && !r.swCsum; partial && w.partial != r.n {
					t.Errorf("%d of %d datagrams carry the pre-filled pseudo-header sum on the wire (%d verify)", w.partial, r.n, w.ok)
				} else if !partial && w.ok != r.n {
					t.Errorf("%d of %d datagrams verify on the wire", w.ok, r.n)
				}
				if st.Descs <= st.Packets {
					t.Errorf("no chained descriptors: %+v", st)
				}
				if r.policy == txpath.Offload && !r.swCsum && st.Offloaded != st.Packets {
					t.Errorf("offloaded %d of %d", st.Offloaded, st.Packets)
				}
				t.Logf("%+v; on the wire %d verify, %d carry the pseudo-header sum", st, w.ok, w.partial)
			})
		}
	}
}

// TestCorruptChecksum is the negative control: datagrams with a wrong UDP
// checksum move the receiver's InCsumErrors counter.
func TestCorruptChecksum(t *testing.T) {
	for _, fam := range []string{"ipv4", "ipv6"} {
		t.Run(fam, func(t *testing.T) {
			e := newEnv(t, 1500)
			before := e.csumErrors(t)
			const n = 100
			e.send(t, run{policy: txpath.Plain, raw: true, corrupt: true, n: n, v6: fam == "ipv6"})
			// send returned once the receiver read the good marker sent
			// after the bad datagrams: recvmsg counted each on its way.
			if after := e.csumErrors(t); after-before != n {
				t.Fatalf("checksum errors %d -> %d, want +%d", before, after, n)
			}
		})
	}
}
