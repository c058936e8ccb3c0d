// Command textcheck fails when the repository's product text reads like a
// lab notebook: a commit hash, a date, or words about work periods or
// issue numbers in README.md, docs/, the package READMEs, comments of Go
// files, or C, assembly, shell and Makefile sources; and when README.md
// is longer than its line budget. `make lint` runs it from the
// repository's root:
//
//	go run ./internal/textcheck
//
// Generated benchmark output (bench/out), fuzz corpora (testdata) and
// generated Go files are not product text and are not checked;
// CHANGELOG.md may carry release dates.
package main
