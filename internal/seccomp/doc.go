// Package seccomp makes chosen kernel calls fail the way an older kernel
// answers them, with a seccomp filter (a classic BPF program over the
// system call number and arguments), so that tests can prove xdpkit's
// fallbacks on a new kernel: the real call is made and the kernel refuses
// it. Only for tests and the without command; Install cannot be undone
// and applies to every thread of the process and to what it executes.
//
// A filter sees the call's number and argument registers, not the memory
// they point to: it can refuse a socket option by level, name and length,
// a bpf command, a socket family and protocol, but not one flag inside a
// struct (the bind address's XDP_USE_SG). umem passes XDP_UMEM_REG's long
// struct only with flags or a metadata area, so its length tells those
// registrations apart.
package seccomp
