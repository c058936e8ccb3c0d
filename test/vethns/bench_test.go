package vethns

import "testing"

// BenchmarkCreateNS measures creating and deleting a namespace.
func BenchmarkCreateNS(b *testing.B) {
	Require(b)
	for b.Loop() {
		ns, err := CreateNS()
		if err != nil {
			b.Fatal(err)
		}
		if err := ns.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreatePair measures building and deleting a configured
// 4-queue veth pair between two existing namespaces.
func BenchmarkCreatePair(b *testing.B) {
	Require(b)
	x, y := NewNS(b), NewNS(b)
	for b.Loop() {
		p, err := CreatePair(x, y, &PairConfig{Queues: 4})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDo measures one round trip through Do.
func BenchmarkDo(b *testing.B) {
	Require(b)
	ns := NewNS(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := ns.Do(func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
