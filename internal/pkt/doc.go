// Package pkt forwards to the public package
// github.com/xdpkit/xdpkit/pkt, which holds the header parser and the
// rewrite helpers since they became public. It stays so that the apps
// and the fuzz corpus that import it keep working; new code imports
// github.com/xdpkit/xdpkit/pkt.
package pkt
