// Command without runs a program with kernel features taken away by a
// seccomp filter (see package seccomp): the calls that use them fail the
// way an older kernel answers them. For tests of xdpkit's fallbacks.
//
//	without -deny tx-budget,stats,genl,bpf-link -- xdpgen -i veth0 ...
//
// Linux 3.17 or later (seccomp(2) with TSYNC); no privilege needed.
package main
