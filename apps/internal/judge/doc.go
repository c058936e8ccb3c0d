// Package judge checks frames for the apps' tests independently of
// xdpkit's own packet code: it decodes them with gopacket and recomputes
// every checksum with gopacket's serializers.
package judge
