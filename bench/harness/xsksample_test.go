package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSampleArgs(t *testing.T) {
	for _, tc := range []struct {
		mode string
		poll bool
		want []string
	}{
		{"rxdrop", false, []string{"-r", "-i", "veth0", "-q", "0", "-N", "-c", "-b", "64", "-n", "1", "-d", "5"}},
		{"l2fwd", true, []string{"-l", "-i", "veth0", "-q", "0", "-N", "-c", "-b", "64", "-n", "1", "-d", "5", "-p"}},
		// -s counts the FCS: 1504 puts 1500-byte frames in the ring.
		{"txonly", false, []string{"-t", "-i", "veth0", "-q", "0", "-N", "-c", "-b", "64", "-n", "1", "-d", "5", "-s", "1504"}},
	} {
		got, err := sampleArgs(tc.mode, "veth0", 1500, 5, tc.poll)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("sampleArgs(%s) = %q, %v; want %q", tc.mode, got, err, tc.want)
		}
	}
	if _, err := sampleArgs("fwd", "veth0", 64, 5, false); err == nil {
		t.Error("sampleArgs(fwd): no error")
	}
}

// The sample's statistics as it prints them (-n 1), twice.
const sampleOut = `
 sock0@veth1:0 rxdrop xdp-drv 
                   pps            pkts           1.00          
rx                 512,000        512,000       
tx                 0              0             

 sock0@veth1:0 rxdrop xdp-drv 
                   pps            pkts           1.00          
rx                 498123         1010123       
tx                 7              7             
`

func TestSampleStats(t *testing.T) {
	var s sampleStats
	for _, l := range strings.Split(sampleOut, "\n") {
		if err := s.parseLine(l); err != nil {
			t.Fatal(err)
		}
	}
	if s.Blocks != 2 || s.RX != 1010123 || s.TX != 7 {
		t.Errorf("got %+v, want 2 blocks, rx 1010123, tx 7 (the last block's)", s)
	}
	if err := s.parseLine("rx  1  12x4"); err == nil {
		t.Error("a malformed count parsed")
	}
}

func TestSampleOf(t *testing.T) {
	for _, tc := range []struct {
		xc   xdpCase
		want string // the sample's case name, "" for none
	}{
		{xdpCase{mode: "txonly", size: 64, strategy: "ring"}, "txonly 64 B"},
		{xdpCase{mode: "txonly", size: 64, strategy: "sender"}, ""},
		{xdpCase{mode: "rxdrop", size: 1500}, "rxdrop 1500 B"},
		{xdpCase{mode: "rxdrop", size: 64, rate: 300_000}, "rxdrop 64 B at 300 kpps"},
		{xdpCase{mode: "rxdrop", size: 64, rate: 300_000, napi: true}, ""},
		{xdpCase{mode: "fwd", size: 64, rate: 1_000_000}, "l2fwd 64 B at 1 Mpps"},
		{xdpCase{mode: "fwd", size: 64}, ""}, // the hairpin has l2fwd at the maximum rate
		{xdpCase{mode: "hairpin", size: 1500}, "l2fwd 1500 B"},
		{xdpCase{mode: "l3fwd", size: 64}, ""},
	} {
		sx, ok := sampleOf(tc.xc)
		got := ""
		if ok {
			got = caseName(sx)
			if sampleCountedAt[sx.mode] == "" {
				t.Errorf("%s: no counting point", got)
			}
		}
		if got != tc.want {
			t.Errorf("sampleOf(%s) = %q, want %q", caseName(tc.xc), got, tc.want)
		}
	}
}

func TestSampleReport(t *testing.T) {
	xdp := []XDPCase{
		{Mode: "hairpin", Size: 64, C: []XDPRun{{Mpps: 0.4}}, Go: []XDPRun{{Mpps: 0.5}, {Mpps: 0.7}}, CMedian: 0.4, GoMedian: 0.6,
			Sample: &SampleRuns{Mode: "l2fwd", Runs: []XDPRun{{Mpps: 0.5}, {Mpps: 1}}, Sum: RunSummary{Mpps: 0.5}}},
		{Mode: "hairpin", Size: 1500, CMedian: 9, GoMedian: 9},
	}
	var b strings.Builder
	writeSample(&b, xdp)
	if !strings.Contains(b.String(), "| l2fwd 64 B | 0.500 (0.500-1.000) | 0.400 (0.400-0.400) | 0.600 (0.500-0.700) | 0.80 | 1.20 |") {
		t.Errorf("report:\n%s", b.String())
	}
	if strings.Contains(b.String(), "1500 B") {
		t.Errorf("a row without sample runs:\n%s", b.String())
	}
	b.Reset()
	writeSample(&b, xdp[1:])
	if b.Len() != 0 {
		t.Error("a section without rows")
	}
}
