// Package readme holds tests of the repository's documentation: the Go
// program in README.md's "Using it" section compiles as written, and every
// package has a doc.go with a package comment. It has no code of its own.
package readme
