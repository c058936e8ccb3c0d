// Command xdpdoctor is the preflight of the xdpkit apps: see main.go for
// what it reports and how to run it. The checks are xsk.Preflight, which
// the apps can run themselves before they start.
package main
