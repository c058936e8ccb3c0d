// Command udpecho answers UDP datagrams to one port, over IPv4 and IPv6,
// from an AF_XDP socket on one queue of an interface; the rest goes on to
// the kernel. As root, Linux 5.10 or later; SIGINT or SIGTERM stops it:
//
//	go run ./examples/udpecho -dev eth0 -queue 0 -port 9000
package main
