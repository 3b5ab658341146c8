# hotpath: build a tuned appliance disk image around a Go HTTP workload.
#
#   make image     build out/hotpath.img (+ out/manifest.json) with the default workload
#   make test      every test, the end-to-end QEMU boots included
#   make run       boot out/hotpath.img in QEMU; curl http://127.0.0.1:8080/json
#   make bench     servers side by side on loopback (wrk), ratios against peers
#   make kernel    only the appliance kernel (cached; see kernel-config/)
#
# Set-up is part of every target: image/deps.sh installs what is missing from
# Debian's packages (it says what and why) and does nothing when all is there.

GO      ?= go
OUT     ?= out
# The end-to-end tests build a kernel when the cache is cold (~30 min on 2 cores).
TEST_TIMEOUT ?= 80m

.PHONY: all deps deps-bench test vet unit bench

all: image

deps:
	@image/deps.sh build test

deps-bench:
	@image/deps.sh build test bench

vet:
	$(GO) vet ./...
	cd tests/peers && $(GO) vet ./...

unit: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

test: deps vet unit

# Side by side on loopback: hotpath, fasthttp, net/http, nginx and a minimal
# epoll responder; server on CPU 0, wrk on CPU 1. Knobs: ROUNDS DURATION
# CONNS DEPTH SERVER_CPU CLIENT_CPU PEERS KEEP=1 (see tests/bench/run.sh).
bench: deps-bench
	tests/bench/run.sh
