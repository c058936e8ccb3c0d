package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate parses a rate in packets per second: 10000, 10k, 1.5M, 2Mpps,
// 1G. It must be above 0 and finite.
func ParseRate(s string) (float64, error) {
	v := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "pps")
	mult := 1.0
	switch {
	case strings.HasSuffix(v, "k"):
		v, mult = strings.TrimSuffix(v, "k"), 1e3
	case strings.HasSuffix(v, "m"):
		v, mult = strings.TrimSuffix(v, "m"), 1e6
	case strings.HasSuffix(v, "g"):
		v, mult = strings.TrimSuffix(v, "g"), 1e9
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q: want a rate in packets/s above 0 (10000, 10k, 1.5M)", s)
	}
	return f * mult, nil
}
