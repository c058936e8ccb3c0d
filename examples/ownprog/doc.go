// Command ownprog brings its own XDP program: it loads ownprog.c (built
// with cilium/ebpf's bpf2go; the generated files are committed), attaches
// it to an interface, and hands the program's XSKMAP to xdpkit with
// xsk.UseMap. The program sends UDP datagrams to one port to the AF_XDP
// socket of their receive queue, everything else to the kernel; ownprog
// echoes the datagrams back, as examples/udpecho does, and prints the
// program's counters when it stops.
//
// An interface that already has an XDP program is refused with an error
// matching xsk.ErrBusy, and the other program stays. With -replace, a
// program attached through netlink (ip link set dev X xdp ...) is
// replaced; one held by a bpf_link (xdpkit's own, cilium/ebpf's
// link.AttachXDP, libxdp's) cannot be, and is still refused. The replaced
// program is not put back on exit: the interface is left without one.
//
// As root, Linux 5.10 or later (5.9 for the bpf_link); SIGINT or SIGTERM
// stops it:
//
//	go run ./examples/ownprog -dev eth0 -queue 0 -port 9000
package main
