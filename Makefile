# xdpkit: build, test, benchmark and demo targets.
# Run as root (or with CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) for
# the namespace tests, the benchmarks and the demo.

GO          ?= go
GOBIN       ?= $(CURDIR)/.bin
STATICCHECK := $(GOBIN)/staticcheck
STATICCHECK_VERSION ?= v0.6.1
TESTFLAGS   ?=
export GOTOOLCHAIN ?= local

.PHONY: all build test test-unit test-ns test-purego test-bench lint vet fmt demo bench clean

all: build

build:
	$(GO) build ./...
	$(GO) vet ./...

## test: every unit and namespace test, the purego build, and every benchmark once.
test: build
	$(GO) test -count=1 $(TESTFLAGS) ./...
	$(GO) test -count=1 -tags purego $(TESTFLAGS) ./csum/... ./nt/...
	GOARCH=arm64 $(GO) vet ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime=1x ./... > /dev/null

bench:
	@echo "make bench: the benchmark suite is not there yet (issue 8)" >&2; exit 1

demo:
	@d=$$(mktemp -d /tmp/xdpkit-demo.XXXXXX) && trap 'rm -rf "$$d"' EXIT INT TERM && \
	$(GO) build -o "$$d/" ./apps/xdpgen ./apps/xdpfwd ./apps/xdprecv ./apps/xdpdemo && \
	"$$d/xdpdemo"

$(STATICCHECK):
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

clean:
	$(GO) clean -testcache
	rm -rf $(GOBIN) bench/out
