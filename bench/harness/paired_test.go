package main

import (
	"strings"
	"testing"
)

func TestParsePaired(t *testing.T) {
	out := []byte(`=== RUN   TestPairedC
PAIRED {"bench":"sum","size":20,"blocks":2000,"reps":4096,"go_ns":4.5,"go_min_ns":4.4,"c_ns":3.6,"c_min_ns":3.5,"c_kernel":"avx2","ratio":0.8,"ratio_p10":0.7,"ratio_p90":0.9,"kernel_ns":{"C-adc":6,"C-avx2":3.6,"Sum":4.5}}
PAIRED {"bench":"sum","size":1500,"blocks":2000,"reps":174,"go_ns":30,"go_min_ns":26,"c_ns":31,"c_min_ns":26.5,"c_kernel":"avx2","ratio":1.02,"ratio_p10":0.9,"ratio_p90":1.1}
PAIRED {"bench":"copy_and_sum","size":1024,"blocks":2000,"reps":256,"go_ns":17.53,"go_min_ns":17.34,"c_ns":17.49,"c_min_ns":17.3,"c_kernel":"copy-avx2","ratio":0.99971,"ratio_p10":0.991,"ratio_p90":1.21}
PAIRED {"bench":"copy_and_sum","size":64,"blocks":2000,"reps":4096,"go_ns":9,"go_min_ns":8,"c_ns":11,"c_min_ns":10,"c_kernel":"copy-avx2","ratio":1.2,"ratio_p10":1.1,"ratio_p90":1.3}
    cref_test.go:164: 
        bench          size     Go ns      C ns C         ratio       p10-p90
--- PASS: TestPairedC (3.20s)
PASS
`)
	rows, err := parsePaired(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Bench != "sum" || r.Size != 20 || r.GoNs != 4.5 || r.CNs != 3.6 || r.CBest != "avx2" || r.Ratio != 0.8 ||
		r.P10 != 0.7 || r.P90 != 0.9 || r.Blocks != 2000 || r.Kernel["C-adc"] != 6 {
		t.Errorf("row 0: %+v", r)
	}
	var b strings.Builder
	writePaired(&b, rows)
	s := b.String()
	for _, want := range []string{
		"### Sum vs best C (paired): at least 1.00x at 1 of 2 sizes",
		"| 20 B | 4.50 (4.40) | 3.60 (3.50) | avx2 | 0.800x | 0.700-0.900 | 2000 | **no** |",
		"| 1500 B | 30.00 (26.00) | 31.00 (26.50) | avx2 | 1.020x | 0.900-1.100 | 2000 | yes |",
		"### CopyAndSum vs C copy+sum (paired): at least 1.00x at 1 of 2 sizes",
		"| 1024 B | 17.53 (17.34) | 17.49 (17.30) | copy-avx2 | 0.9997x | 0.991-1.210 | 2000 | **no** |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

func TestParsePairedErrors(t *testing.T) {
	for name, out := range map[string]string{
		"none":       "=== RUN   TestPairedC\n--- PASS: TestPairedC\n",
		"bad json":   "PAIRED {\"bench\":\"sum\",\n",
		"incomplete": `PAIRED {"bench":"sum","size":20,"go_ns":4.5}` + "\n",
	} {
		if _, err := parsePaired([]byte(out)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
