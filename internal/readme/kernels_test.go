package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdpkit/xdpkit/internal/kfeature"
)

// TestKernelTable: every kernel feature that a test may find missing
// (internal/kfeature, whose names its not-applicable messages give) has a
// row in README.md's kernel table, with the same Linux version.
func TestKernelTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	for _, f := range kfeature.Features {
		found := false
		for _, r := range rows {
			cells := strings.Split(r, "|")
			if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), f.Name) {
				continue
			}
			found = true
			if v := strings.TrimSpace(cells[2]); v != f.Linux {
				t.Errorf("README's kernel table gives %q Linux %s, the tests %s", f.Name, v, f.Linux)
			}
		}
		if !found {
			t.Errorf("README's kernel table has no row for %q (Linux %s)", f.Name, f.Linux)
		}
	}
}
