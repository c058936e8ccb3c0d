package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/vishvananda/netlink"

	"github.com/xdpkit/xdpkit/apps/internal/payload"
	"github.com/xdpkit/xdpkit/internal/netdev"
	"github.com/xdpkit/xdpkit/test/vethns"
)

func TestMain(m *testing.M) {
	vethns.Sweep()
	os.Exit(vethns.LeakCheck(m))
}

// TestPcapNanoseconds: an independent reader (gopacket's pcapgo) reads
// the file with nanosecond resolution, the exact timestamps written, and
// the captured and original lengths.
func TestPcapNanoseconds(t *testing.T) {
	var buf bytes.Buffer
	w, err := newPcapWriter(&buf, 80)
	if err != nil {
		t.Fatal(err)
	}
	f := frame(1, 100)
	times := []time.Time{time.Unix(1700000000, 123456789), time.Unix(1700000001, 1)}
	w.write(times[0], f)
	w.write(times[1], f[:60])
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Resolution() != gopacket.TimestampResolutionNanosecond || r.LinkType() != layers.LinkTypeEthernet || r.Snaplen() != 80 {
		t.Fatalf("header: resolution %v, link type %v, snaplen %d", r.Resolution(), r.LinkType(), r.Snaplen())
	}
	for i, want := range []struct{ capLen, len int }{{80, 100}, {60, 60}} {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !ci.Timestamp.Equal(times[i]) || ci.CaptureLength != want.capLen || ci.Length != want.len || !bytes.Equal(data, f[:want.capLen]) {
			t.Errorf("record %d: %v, %d of %d bytes; want %v, %d of %d", i, ci.Timestamp, ci.CaptureLength, ci.Length, times[i], want.capLen, want.len)
		}
	}
	if _, _, err := r.ReadPacketData(); err != io.EOF {
		t.Errorf("after the last record: %v, want EOF", err)
	}
}

// TestPcapEndToEnd runs xdprecv -pcap on end A of a veth pair while end
// B's kernel sends generator datagrams, and reads the file with pcapgo:
// every record is one of the datagrams as sent (UDP to the port, the
// generator payload), stamped between the start and the end of the run,
// in order; and not all stamps are whole microseconds (with microsecond
// resolution every one would be: the chance that all of them fall on one
// by luck is 1e-3 per record).
func TestPcapEndToEnd(t *testing.T) {
	vethns.Require(t)
	a, b := vethns.NewNS(t), vethns.NewNS(t)
	p := vethns.NewPair(t, a, b, nil)
	// Full checksums from B's kernel: xdprecv counts only good ones.
	if err := b.Do(func() error { return netdev.SetTxCsumOffload(p.B.Name, false) }); err != nil {
		t.Fatal(err)
	}
	const port, want = 9000, 20
	path := filepath.Join(t.TempDir(), "rx.pcap")
	c := &config{iface: p.A.Name, port: port, count: want, pcap: path, snaplen: 65535, frames: 1024, ring: 256, xdpMode: "auto", quiet: true, napiDefer: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- a.Do(func() error {
			_, err := run(ctx, cancel, c)
			return err
		})
	}()
	// Wait for the program (bounded), then send until xdprecv has counted
	// want datagrams and returned: those sent before its socket was
	// registered went to the kernel. At most 2000, 5 ms apart.
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("xdprecv attached no XDP program in 2 s")
		}
		var attached bool
		a.Do(func() error {
			l, err := netlink.LinkByName(p.A.Name)
			attached = err == nil && l.Attrs().Xdp != nil && l.Attrs().Xdp.Attached
			return nil
		})
		if attached {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := b.DialUDP(p.B.AddrPort4(port), p.A.AddrPort4(port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var runErr error
	sent := 0
send:
	for ; sent < 2000; sent++ {
		// ECONNREFUSED: the ICMP answer to one that went to the kernel.
		if _, err := conn.Write(frame(uint64(sent), 14+20+8+64)[42:]); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatal(err)
		}
		select {
		case runErr = <-done:
			sent++
			break send
		case <-time.After(5 * time.Millisecond):
		}
	}
	if sent == 2000 {
		cancel()
		runErr = <-done
	}
	end := time.Now()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		t.Fatalf("xdprecv: %v", runErr)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Resolution() != gopacket.TimestampResolutionNanosecond || r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("header: resolution %v, link type %v", r.Resolution(), r.LinkType())
	}
	var n, subMicro int
	last := start
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if ci.Timestamp.Before(last) || ci.Timestamp.After(end) {
			t.Errorf("record %d stamped %v: not between %v (or the previous record) and %v", n, ci.Timestamp, last, end)
		}
		last = ci.Timestamp
		if ci.Timestamp.Nanosecond()%1000 != 0 {
			subMicro++
		}
		pk := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		udp, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if udp == nil || udp.DstPort != port || ci.Length != len(data) {
			t.Fatalf("record %d: not a whole UDP datagram to port %d: %v", n, port, pk)
		}
		h, ok := payload.Parse(udp.Payload)
		if !ok || h.Seq >= uint64(sent) || !bytes.Equal(udp.Payload, frame(h.Seq, 14+20+8+64)[42:]) {
			t.Fatalf("record %d: payload not one that was sent (%d sent)", n, sent)
		}
		n++
	}
	if n < want {
		t.Errorf("%d records, want at least the %d datagrams xdprecv counted", n, want)
	}
	if subMicro == 0 {
		t.Errorf("all %d timestamps are whole microseconds", n)
	}
	t.Logf("%d sent, %d records, %d with sub-microsecond stamps", sent, n, subMicro)
}
