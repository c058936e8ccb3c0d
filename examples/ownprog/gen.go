package main

// The generated files (ownprog_bpfe[lb].go and .o) are committed: building
// and testing need no clang. To regenerate after editing ownprog.c, with
// clang, llvm and libbpf-dev installed (Debian: apt-get install clang
// llvm libbpf-dev):
//
//	go generate ./examples/ownprog

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" ownprog ownprog.c
