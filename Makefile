# xdpkit: build, test, benchmark and demo targets.
# Run as root (or with CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) for
# the namespace tests, the benchmarks and the demo.

GO          ?= go
GOBIN       ?= $(CURDIR)/.bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION ?= v0.6.1
TESTFLAGS   ?=
export GOTOOLCHAIN ?= local

.PHONY: all build apps test kernels stress-test fuzz lint demo demo-mq soak ndr bench bench-quick bench-render dnsbench clean

# The Go modules of the repository. The root one is the library; apps/
# (the programs, with client_golang for their metrics), metrics/promxdp
# (the Prometheus collector) and bench/harness each have a go.mod of their
# own that points at the library through a replace directive, so
# client_golang stays out of the library's go.mod. A ./... at the root
# stops at their go.mod: each is built, vetted and tested in its own
# directory.
MODULES := . apps metrics/promxdp bench/harness examples/dnsserver

all: build

build:
	@set -e; for m in $(MODULES); do echo "build, vet: $$m"; (cd $$m && $(GO) build -o /dev/null ./... && $(GO) vet ./...); done

## apps: xdpfwd, xdpgen, xdprecv, xdpdemo and xdpndr built into the repository's
## top directory (where .gitignore ignores them).
APPS := xdpgen xdpfwd xdprecv xdpdemo xdpndr
apps:
	cd apps && $(GO) build -o $(CURDIR)/ $(addprefix ./,$(APPS))

## test: every unit and namespace test (with Go's default package
## parallelism, as a user types it: the packages that send traffic through
## veth take a lock file in TestMain and run one at a time), the purego
## build, the race detector, arm64 vet, a short run of every fuzz target,
## and every benchmark once so none rots (make bench-quick included).
test: build lint
	$(GO) test -count=1 $(TESTFLAGS) ./...
	cd apps && $(GO) test -count=1 $(TESTFLAGS) ./...
	cd examples/dnsserver && $(GO) test -count=1 $(TESTFLAGS) ./...
	$(GO) test -count=1 -tags purego $(TESTFLAGS) ./csum/... ./nt/...
	$(GO) test -count=1 -tags csumcgo -run '^TestOnStack$$' ./csum/
	$(GO) test -count=1 -p 1 -race -short $(RACEPKGS)
	cd apps && $(GO) test -count=1 -p 1 -race -short $(APPSRACEPKGS)
	@set -e; for m in $(MODULES); do echo "arm64 vet: $$m"; (cd $$m && GOARCH=arm64 $(GO) vet ./...); done
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(CI_FUZZTIME)
	{ $(GO) test -count=1 -p 1 -run '^$$' -bench . -benchtime=1x ./... && \
	  cd apps && $(GO) test -count=1 -p 1 -run '^$$' -bench . -benchtime=1x ./...; } > .bench-once.log 2>&1 || { cat .bench-once.log; exit 1; }
	@grep -h "^ok\|^FAIL\|^---" .bench-once.log; rm -f .bench-once.log
	cd bench/harness && $(GO) test -count=1 ./...
	cd metrics/promxdp && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory bench-quick

## kernels: the namespace tests of the library and the apps on Debian's
## 6.1, 6.12 and 6.17 kernels, each booted in QEMU (TCG, no KVM; the 6.17
## guest's virtio-net NICs run the zero-copy tests), and on the host's
## kernel; prints a table per package and kernel (test/kernels/run.sh;
## KERNELS="6.1 host" to choose, RUN=regexp for -test.run).
kernels:
	bash test/kernels/run.sh

## stress-test: the namespace packages STRESSCOUNT times over, one package at
## a time, while two unrelated CPU-bound processes (sha256sum /dev/zero,
## started here and ended by pid) keep both CPUs busy; CI=true, so nothing
## skips. Not part of make test; bounded by STRESSTIMEOUT (about 20 minutes
## on the 2-CPU development VM) for the library's packages and the apps'
## (STRESSAPPSPKGS, relative to apps/) together.
STRESSPKGS     ?= ./test/vethns/ ./rxpath/ ./txpath/
STRESSAPPSPKGS ?= ./
STRESSCOUNT    ?= 5
STRESSTIMEOUT  ?= 30m
stress-test:
	@sha256sum /dev/zero & l1=$$!; sha256sum /dev/zero & l2=$$!; \
	trap 'kill $$l1 $$l2 2>/dev/null' EXIT INT TERM; \
	echo "stress-test: load pids $$l1 $$l2"; \
	CI=true timeout --foreground $(STRESSTIMEOUT) $(GO) test -count=$(STRESSCOUNT) -p 1 -timeout $(STRESSTIMEOUT) $(TESTFLAGS) $(STRESSPKGS) && \
	  (cd apps && CI=true timeout --foreground $(STRESSTIMEOUT) $(GO) test -count=$(STRESSCOUNT) -p 1 -timeout $(STRESSTIMEOUT) $(TESTFLAGS) $(STRESSAPPSPKGS)); \
	rc=$$?; kill $$l1 $$l2 2>/dev/null; wait $$l1 $$l2 2>/dev/null; exit $$rc

# Packages whose tests run under the race detector in make test (the
# apps' relative to apps/).
RACEPKGS     ?= ./umem/... ./xsk/... ./csum/... ./nt/... ./internal/... ./rxpath/... ./txpath/... ./mq/... ./pkt/... ./examples/... ./test/vethns/... ./xdpnet/...
APPSRACEPKGS ?= ./internal/...
# Fuzz targets, as package:Target (a package of another module, such as
# ./apps/xdpfwd, is fuzzed from its module's directory); make fuzz
# FUZZTIME=10m runs each longer.
FUZZTARGETS ?= ./csum:FuzzSum ./csum:FuzzUpdate ./csum:FuzzFillFrame ./csum:FuzzVerify ./nt:FuzzCopy \
               ./internal/pkt:FuzzParse ./pkt:FuzzReplyUDP ./rxpath:FuzzSplitPacket ./apps/xdpfwd:FuzzParseChain \
               ./xdpnet:FuzzParseDatagram ./apps/internal/pcapfile:FuzzReader
FUZZTIME    ?= 30s
CI_FUZZTIME ?= 5s

## fuzz: each fuzz target for FUZZTIME (its seed corpus is in testdata/fuzz).
fuzz:
	@GO=$(GO) scripts/fuzz.sh $(FUZZTIME) $(FUZZTARGETS)

## bench: xdpkit side by side with the C reference (AF_XDP on veth, csum, nt), the
## copy-policy grid, bench/out/{results.json,summary.md,xdp.png,copy.png}, a line
## appended to bench/out/history.jsonl, and README's bench section (its summary);
## root, gcc, < 10 min.
bench:
	cd bench/harness && $(GO) run . -out ../out -readme ../../README.md

## bench-render: README's bench section and bench/out/summary.md written
## again from bench/out/results.json and history.jsonl, measuring nothing.
bench-render:
	cd bench/harness && $(GO) run . -render -out ../out -readme ../../README.md > /dev/null

## bench-quick: every benchmark of `make bench` once, briefly (CI), into bench/out/quick.
bench-quick:
	cd bench/harness && $(GO) run . -quick -out ../out/quick

demo:
	@d=$$(mktemp -d /tmp/xdpkit-demo.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	(cd apps && $(GO) build -o "$$d/" $(addprefix ./,$(APPS))) && \
	"$$d/xdpdemo"

## demo-mq: the demo on 2 queues per veth, each program one pinned thread per queue.
demo-mq:
	@d=$$(mktemp -d /tmp/xdpkit-demo.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	(cd apps && $(GO) build -o "$$d/" $(addprefix ./,$(APPS))) && \
	"$$d/xdpdemo" -queues 2

## soak: generator -> forwarder -> receiver for SOAK with link flaps every
## FLAP; reports every loss and fails if the forwarder's memory or fds grew.
SOAK ?= 60s
FLAP ?= 5s
soak:
	@d=$$(mktemp -d /tmp/xdpkit-soak.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	(cd apps && $(GO) build -o "$$d/" $(addprefix ./,$(APPS))) && \
	"$$d/xdpdemo" -soak -duration $(SOAK) -flap $(FLAP) -quiet

## ndr: xdpndr's search for the highest rate xdpfwd forwards without loss
## (the NDR) on the demo's topology, gen-ns -> xdpfwd -> recv-ns, which
## xdpndr creates with unique names and removes, also on failure: each
## trial and the result as JSON lines. NDRFLAGS adds xdpndr flags, e.g.
## NDRFLAGS="-loss 0.5 -trial 5s -resolution 1%" for a PDR. Root.
NDRFLAGS ?=
ndr:
	@d=$$(mktemp -d /tmp/xdpkit-ndr.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	(cd apps && $(GO) build -o "$$d/" ./xdpgen ./xdpfwd ./xdprecv ./xdpndr) && \
	"$$d/xdpndr" -topo $(NDRFLAGS)

## dnsbench: examples/dnsserver over the kernel's UDP socket and over
## xdpnet, alternating DNSRUNS times, with dnsperf in the peer namespace:
## queries/s, server CPU-s per million queries, latency, lost queries and
## response codes; fails unless an xdpnet run served 2x the kernel's
## queries per server CPU-second with none lost and all NOERROR. Writes
## its summary into README's "A UDP socket" section. Root, dnsperf
## (Debian package dnsperf, installed if missing); about a minute.
DNSRUNS ?= 3
dnsbench:
	@command -v dnsperf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dnsperf >/dev/null; }
	@d=$$(mktemp -d /tmp/xdpkit-dnsbench.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	(cd examples/dnsserver && $(GO) build -o "$$d/dnsserver" . && $(GO) build -o "$$d/dnsbench" ./dnsbench) && \
	"$$d/dnsbench" -server "$$d/dnsserver" -runs $(DNSRUNS) -readme $(CURDIR)/README.md

$(STATICCHECK):
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

## lint: gofmt, go vet and staticcheck in every module, and the text check
## (internal/textcheck: no commit hashes, dates, words about work periods or issue
## numbers in product text; README.md at most 250 lines).
lint: $(STATICCHECK)
	@$(GO) run ./internal/textcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do echo "vet, staticcheck: $$m"; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); done

clean:
	$(GO) clean -testcache
	rm -rf $(GOBIN) bench/out
