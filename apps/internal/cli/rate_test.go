package cli

import "testing"

func TestParseRate(t *testing.T) {
	for s, want := range map[string]float64{"10000": 10000, "10k": 1e4, "1.5M": 1.5e6, "2Mpps": 2e6, " 3kpps ": 3e3, "1G": 1e9} {
		if got, err := ParseRate(s); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-1k", "x", "inf", "NaN", "1e400"} {
		if got, err := ParseRate(s); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", s, got)
		}
	}
}
