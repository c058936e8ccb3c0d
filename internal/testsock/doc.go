// Package testsock builds AF_XDP socket set-ups that the tests of several
// packages need, inside the namespaces of test/vethns. It is for tests
// only; package xsk's own tests cannot use it (it imports xsk).
package testsock
