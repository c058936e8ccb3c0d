// Command xdpdoctor says what will happen before an xdpkit app touches an
// interface: the kernel and each optional feature the library probes, the
// device's driver, XDP and AF_XDP features, zero-copy, channels, rings,
// MTU against the frame size, NAPI settings, privileges and locked memory
// against the UMEM the apps would register, what xdpgen, xdprecv and
// xdpfwd would choose on it and why, and each problem with the command
// that fixes it. It changes nothing.
//
// Kernel: any Linux with AF_XDP; it reports what is missing. It reads as
// any user, and sees the capabilities it runs with, so run it as the apps
// will run.
//
// Run:
//
//	xdpdoctor -i eth1
//	xdpdoctor -i eth1 -queues 4 -frame-size 4096
//	xdpdoctor -i eth1 -json
//
// The exit status is 1 when a check fails (the apps would stop), 2 for
// bad flags or an interface that cannot be read, 0 otherwise.
//
// The checks are xsk.Preflight, which the apps run when their set-up
// fails.
package main
