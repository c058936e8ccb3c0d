// Package cli is what xdpkit's programs share: flag parsing that fails
// with one line and exit code 2, signal handling, the once-a-second
// status line with CPU use, the final JSON summary line, and the
// loopback-only Prometheus endpoint (Metrics: client_golang and promhttp,
// the program's own counters beside promxdp's for its sockets, pollers,
// senders and UMEMs).
package cli
