// Package vethns is xdpkit's test bed: network namespaces and veth pairs
// built for one test (or one program run) and torn down afterwards.
//
// A test asks for the environment with [Require], creates namespaces with
// [NewNS] and connects them with [NewPair]:
//
//	func TestSomething(t *testing.T) {
//		vethns.Require(t)
//		a, b := vethns.NewNS(t), vethns.NewNS(t)
//		p := vethns.NewPair(t, a, b, &vethns.PairConfig{Queues: 4})
//		err := a.Do(func() error {
//			// this runs on an OS thread switched into a; sockets
//			// created here stay in a.
//			return nil
//		})
//		...
//	}
//
// Everything it creates is named uniquely per process and per call and is
// deleted by tb.Cleanup, on success and on failure alike:
//
//   - namespaces are "xk-<pid>-<seq>-<tag>", bind-mounted at
//     /run/netns/<name> exactly like `ip netns add` does, so
//     `ip netns exec <name> ...` (and [NS.Exec]) work on them;
//   - veth ends are "xk<pid base 36>-<seq base 36><a|b>", at most 15 bytes,
//     and are created directly inside their namespaces (never in the
//     caller's namespace), through netlink handles opened in the namespace;
//   - addresses come only from 198.18.0.0/15 (one /30 per pair) and
//     2001:db8::/32 (one /64 per pair). The IPv6 /64 is
//     2001:db8:<22-bit pid><10-bit sequence>::/64, so it is unique across
//     concurrent test processes; the IPv4 /30 is block
//     (pid mod 128)<<8 | (sequence mod 256) of the 32768 /30 blocks in
//     198.18.0.0/15, unique within a process for 256 pairs and across
//     processes whose pids differ by less than 128.
//
// Each pair gets permanent (NUD_PERMANENT) ARP and NDP entries both ways, so
// no neighbour resolution traffic is needed, and IPv6 duplicate address
// detection is off (accept_dad=0 in the namespace and IFA_F_NODAD on the
// address), so the IPv6 address is usable at once.
//
// [Sweep] removes namespaces left behind by test processes that died
// without cleaning up, and [LeakCheck] makes a TestMain fail when file
// descriptors or memory mappings leak across the run:
//
//	func TestMain(m *testing.M) {
//		vethns.Sweep()
//		os.Exit(vethns.LeakCheck(m))
//	}
//
// Namespace tests skip when the process lacks CAP_NET_ADMIN/CAP_SYS_ADMIN;
// with CI=true in the environment they fail instead.
package vethns
