//go:build !linux

package nt

func allocRing(n int) ([]byte, func()) { return heapRing(n) }
