# Lightpath: the two commands that matter are `make demo` and `make test`.
GO      ?= go
BIN     := bin/lightpath
PKGS    := ./...
# The fuzz pass: FUZZBUDGET seconds in all, shared by the targets; or
# FUZZTIME=30s for that long each.
FUZZBUDGET ?= 60
FUZZTIME ?=
# make test-stress N=3: the e2e and root suites three times beside a busy core.
N ?= 1
# make install puts $(BIN) in $(DESTDIR)$(PREFIX)/bin.
PREFIX  ?= /usr/local
DESTDIR ?=
# The build's version, as `lightpath version` and GET /api/v1/health say it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/lightpath/lightpath/internal/cli.version=$(VERSION)

.PHONY: all build install demo test test-stress check vulncheck unit fuzz bench clean deps bpf

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/lightpath

install: build
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 $(BIN) "$(DESTDIR)$(PREFIX)/bin/lightpath"

# Regenerates the compiled BPF programs (internal/cc/*_bpfel.o) from their
# sources; the objects are committed, so building needs no clang.
bpf:
	@scripts/bpf.sh

# Installs what the tests and the demo need on a fresh Debian machine.
deps:
	@scripts/deps.sh

demo: deps build
	$(GO) build -o bin/dashshot ./scripts/dashshot
	@scripts/demo.sh

# The whole test suite: formatting, vet, staticcheck, a short pass of every
# fuzz target, then unit and end-to-end tests with the race detector (the
# end-to-end ones run the real binary, built with -race too; those that need
# root skip elsewhere). It ends with every failure, the slowest twenty tests
# and each package's time.
test: deps check fuzz unit

# The end-to-end and root suites, N times, while stress-ng keeps a core busy.
test-stress: deps build
	@scripts/stress.sh $(N)

check:
	@fmt=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$fmt" ]; then echo "gofmt would change: $$fmt"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	@# staticcheck (pinned in go.mod) judges Linux and macOS together: code
	@# used only by _linux.go files is not "unused" on macOS.
	printf 'linux: GOOS=linux\ndarwin: GOOS=darwin\n' | $(GO) tool staticcheck -matrix $(PKGS)

# govulncheck (pinned in go.mod); says so and exits 0 where no database can
# be reached (scripts/vulncheck.sh).
vulncheck:
	@scripts/vulncheck.sh

unit: build
	@scripts/gotest.sh $(PKGS)

fuzz:
	@FUZZBUDGET=$(FUZZBUDGET) scripts/fuzz.sh $(FUZZTIME)

# The movers against their peers on loopback, the scheduler and the store,
# the monitoring repository,
# then (as root) the testbed's fidelity and the movers over an emulated
# wide-area path, what steering flows onto reservations costs and gives, and
# FAST TCP against the kernel's congestion controls (bench/fast.sh), and
# the UDP transport against iperf3 -u, uftp and TCP (bench/transports.sh).
bench: deps build
	bench/movers.sh
	bench/scheduler.sh
	bench/monitoring.sh
	@if [ "$$(id -u)" -eq 0 ]; then bench/testbed.sh && bench/steering.sh && bench/fast.sh && bench/transports.sh; else echo "bench/testbed.sh, bench/steering.sh, bench/fast.sh and bench/transports.sh skipped: they need root"; fi

clean:
	rm -rf bin
