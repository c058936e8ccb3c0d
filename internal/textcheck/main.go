package main

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
)

// readmeBudget is README.md's line budget: a front page, not a manual.
const readmeBudget = 250

// A problem is one finding: file, line and what was found.
type problem struct {
	file string
	line int
	what string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.what) }

var (
	// hexWord is a lowercase hexadecimal word of 7 to 40 characters, as
	// git abbreviates commits; hexWords() keeps those with a digit and a
	// letter, and none written as a constant (0x...).
	hexWord = regexp.MustCompile(`(^|[^0-9A-Za-z_])([0-9a-f]{7,40})($|[^0-9A-Za-z_])`)
	date    = regexp.MustCompile(`\b20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\b`)
	words   = regexp.MustCompile(`(?i)\bsessions?\b|\bissues?\s+#?[0-9]+|\bissue\s+#[0-9]+`)
	letter  = regexp.MustCompile(`[a-f]`)
	digit   = regexp.MustCompile(`[0-9]`)
)

// check returns the problems of one line of product text.
func check(file string, line int, text string, hashesAndDates bool) []problem {
	var out []problem
	if hashesAndDates {
		for _, m := range hexWord.FindAllStringSubmatchIndex(text, -1) {
			w := text[m[4]:m[5]]
			if !letter.MatchString(w) || !digit.MatchString(w) || strings.HasSuffix(text[:m[4]], "0x") {
				continue
			}
			out = append(out, problem{file, line, fmt.Sprintf("commit hash? %q", w)})
		}
		for _, d := range date.FindAllString(text, -1) {
			out = append(out, problem{file, line, fmt.Sprintf("date %q", d)})
		}
	}
	for _, w := range words.FindAllString(text, -1) {
		out = append(out, problem{file, line, fmt.Sprintf("%q: work sessions and issue numbers are not product text", w)})
	}
	return out
}

// checkText checks every line of a text file.
func checkText(file string, src []byte, hashesAndDates bool) []problem {
	var out []problem
	for i, l := range strings.Split(string(src), "\n") {
		out = append(out, check(file, i+1, l, hashesAndDates)...)
	}
	return out
}

// checkGo checks the comments of a Go file; generated files are skipped.
func checkGo(file string, src []byte) []problem {
	if regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`).Match(src) {
		return nil
	}
	var out []problem
	fset := token.NewFileSet()
	f := fset.AddFile(file, -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, scanner.ScanComments)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			continue
		}
		line := fset.Position(pos).Line
		for i, l := range strings.Split(lit, "\n") {
			out = append(out, check(file, line+i, l, true)...)
		}
	}
	return out
}

// productText says whether a repository file is product text, and whether
// hashes and dates are refused in it.
func productText(file string) (ok, hashesAndDates bool) {
	for _, dir := range []string{"bench/out/", ".bin/"} {
		if strings.HasPrefix(file, dir) {
			return false, false
		}
	}
	if strings.Contains("/"+file, "/testdata/") {
		return false, false
	}
	if file == "CHANGELOG.md" {
		return true, false // release dates
	}
	base := path.Base(file)
	switch {
	case base == "Makefile" || file == ".ci/run":
		return true, true
	}
	switch path.Ext(file) {
	case ".md", ".go", ".c", ".h", ".s", ".sh", ".py", ".svg", ".dot":
		return true, true
	}
	return false, false
}

func main() {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "textcheck: git ls-files:", err)
		os.Exit(2)
	}
	var problems []problem
	for _, file := range strings.Fields(string(out)) {
		ok, hd := productText(file)
		if !ok {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			fmt.Fprintln(os.Stderr, "textcheck:", err)
			os.Exit(2)
		}
		if strings.HasSuffix(file, ".go") {
			problems = append(problems, checkGo(file, src)...)
		} else {
			problems = append(problems, checkText(file, src, hd)...)
		}
		if file == "README.md" {
			if n := bytes.Count(src, []byte("\n")); n > readmeBudget {
				problems = append(problems, problem{file, n, fmt.Sprintf("%d lines, over the budget of %d", n, readmeBudget)})
			}
		}
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "textcheck: %d problems in product text (no commit hashes, dates, sessions or issue numbers; README at most %d lines)\n", len(problems), readmeBudget)
		os.Exit(1)
	}
}
