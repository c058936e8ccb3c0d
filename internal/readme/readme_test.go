package readme

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// TestUsingItBuilds extracts the Go block of README.md's "Using it"
// section and builds it, as it is written, as a program of this module.
func TestUsingItBuilds(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	i := strings.Index(sec, "\n## Using it\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Using it" section`)
	}
	sec = sec[i+1:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) != 1 {
		t.Fatalf(`"Using it" has %d Go blocks, want 1`, len(blocks))
	}
	// A directory of this module that the go command's ./... skips.
	dir, err := os.MkdirTemp(".", "_snippet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(blocks[0][1]), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull}, {"vet"}} {
		cmd := exec.Command("go", append(args, "./"+filepath.Base(dir))...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of README.md's snippet: %v\n%s\n--- snippet:\n%s", args[0], err, out, blocks[0][1])
		}
	}
}

// TestEveryPackageHasDocGo: every directory of the module with Go files
// (the internal and test packages too, and the apps module) has a doc.go whose package
// comment is the package's only one.
func TestEveryPackageHasDocGo(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// apps/ is a module of its own (client_golang stays out of
			// this one's go.mod) but held to the same rule.
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				(fileExists(filepath.Join(path, "go.mod")) && path != filepath.Join(root, "apps"))) {
				return filepath.SkipDir // another module, or what the go command skips
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		switch {
		case name == "doc.go" && f.Doc == nil:
			t.Errorf("%s has no package comment", path)
		case name != "doc.go" && f.Doc != nil:
			t.Errorf("%s has a package comment; it belongs in doc.go", path)
		case name != "doc.go" && !fileExists(filepath.Join(dir, "doc.go")):
			t.Errorf("%s has no doc.go", dir)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
