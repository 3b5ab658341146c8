# hotpath: build a tuned appliance disk image around a Go HTTP workload.
#
#   make image     out/hotpath.img (+ out/manifest.json) with the default workload;
#                  ARCH=arm64 (for kernel, image, run) builds a Graviton image
#                  (cross-built kernel, \EFI\BOOT\BOOTAA64.EFI) and boots it on QEMU virt
#   make run       boot out/hotpath.img in QEMU; curl http://127.0.0.1:8080/json
#   make test      every test: unit, integration, the Packer plugin, QEMU boots
#   make test-arm64  only the arm64 image (part of make test): cross-built,
#                  reproducible, booted under TCG, the same e2e checks
#   make bench     servers side by side on loopback (wrk), ratios against peers
#   make pgo       regenerate server/cmd/hotpath-json/default.pgo, the workload's PGO profile
#   make bench-vm  the appliance on 6.1, 6.12 and 6.12 with step 10, and Debian's stock
#                  kernel, side by side in QEMU (builds the 6.1 kernel once, cached)
#   make kernel    only the appliance kernel (cached, see kernel-config/)
#   make plugin    packer/packer-plugin-hotpath
#   make plugin-release PLUGIN_VERSION=x.y.z   packer/dist: binaries, zips, SHA256SUMS (what
#                  packer init downloads; .github/workflows/packer-plugin-release.yml publishes them)
#   make verify-reproducible  two cold builds, compared byte for byte (~1 h)
#   make mutation  mutation testing (gremlins) of the packages where a wrong line
#                  hurts most; slow, not part of make test (tests/mutation/README.md)
#   make mutation-named  the bugs issue 41's review named (tests/mutation/named.txt), each
#                  put in a copy of the tree: its tests must fail; NAMED_BOOT=1 adds the boots
#
# Set-up is part of every target: image/deps.sh installs what is missing from
# Debian's packages (it says what and why) and does nothing when all is there.
# Everything that needs network namespaces, taps or QEMU runs as root.

GO      ?= go
OUT     ?= out
ARCH    ?= amd64
# A cold kernel build takes ~30 min on 2 cores; `kernel` runs it before the
# tests so that they only relink, but the limit allows for it anyway.
TEST_TIMEOUT ?= 80m

HOTPATH_IMAGE  = $(GO) run ./image/cmd/hotpath-image
HOTPATH_KERNEL = $(GO) run ./kernel-config/cmd/hotpath-kernel
# Every package of the main module but the QEMU boots, which run apart with -v
# so that their progress (image builds, accelerator, boot times) streams.
UNIT_PKGS = $$($(GO) list ./... | grep -v '/tests/e2e$$')
# arm64 needs the cross compiler, qemu-system-aarch64 and AAVMF besides.
DEPS_ARCH = $(if $(filter arm64 aarch64,$(ARCH)),arm64)

.PHONY: all deps deps-test deps-bench kernel image run test test-arm64 vet unit e2e packer-test \
	packer-generate-check plugin plugin-release bench bench-vm verify-reproducible \
	actionlint fleet-lint packer-docs pgo

all: image

deps:
	@image/deps.sh build test $(DEPS_ARCH)

# The tests need root (network namespaces, taps, QEMU on a tap): without it
# this stops first, before any build, with the reason. Both architectures'
# QEMU and firmware, so that no boot test is skipped for a missing package.
deps-test:
	@image/deps.sh root build test arm64

deps-bench:
	@image/deps.sh build test bench

kernel: deps
	$(HOTPATH_KERNEL) build -arch $(ARCH)

image: deps
	$(HOTPATH_IMAGE) build -arch $(ARCH) -out $(OUT)

run: image
	$(HOTPATH_IMAGE) run -arch $(ARCH) -disk $(OUT)/hotpath.img

test: deps-test vet kernel unit e2e packer-test packer-generate-check actionlint fleet-lint test-arm64

vet:
	$(GO) vet ./...
	cd tests/peers && $(GO) vet ./...
	cd packer && $(GO) vet ./...

# -json through tests/testsum: the usual quiet output (failures in full),
# then every skipped test with its reason, so a skip is never invisible. It
# exits non-zero on any failure it reads (sh has no pipefail). The second
# run: deferred responses (issue 36) kept in order, cancelled, bounded and
# drained, also under the race detector (Finish comes from other
# goroutines).
unit: deps-test
	$(GO) build -o $(OUT)/testsum ./tests/testsum
	$(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) $(UNIT_PKGS) | $(OUT)/testsum
	$(GO) test -json -count=1 -race -timeout $(TEST_TIMEOUT) \
		-run '^TestDefer(Order|Full|Deadline|HoldsReading|Panics|QueueClose|Drain|RequestCopy|OnDone|CancelOnHangUp)$$' ./server/ | $(OUT)/testsum

# The boots stream their progress (testsum -stream, as go test -v) and end,
# like unit, with every skipped test and its reason.
e2e: deps-test kernel
	$(GO) build -o $(OUT)/testsum ./tests/testsum
	$(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) ./tests/e2e/ | $(OUT)/testsum -stream

# The arm64 image (a second cold kernel on a fresh machine, ~15 min of CPU;
# its boot and checks then take under a minute). The kernel is built first,
# as for the x86 tests, so that the test itself only relinks it.
test-arm64: deps-test
	$(HOTPATH_KERNEL) build -arch arm64
	$(GO) build -o $(OUT)/testsum ./tests/testsum
	$(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) -run 'Arm64' ./tests/e2e/ -args -e2e.arm64 | $(OUT)/testsum -stream

# The plugin is its own module (the Packer and AWS SDKs stay out of go.mod).
# Through testsum as unit is, so that its skips are listed too.
packer-test: deps-test kernel
	$(GO) build -o $(OUT)/testsum ./tests/testsum
	cd packer && $(GO) test -json -count=1 -timeout $(TEST_TIMEOUT) ./... | $(abspath $(OUT))/testsum

# The HCL2 specs are generated (packer-sdc, pinned in packer/go.mod); a
# committed spec that differs from a fresh one fails the build.
packer-generate-check:
	cd packer && $(GO) generate ./... && git diff --exit-code -- '*.hcl2spec.go'
	cd packer && $(GO) run ./tools/webdocs -check

# packer/.web-docs (the Packer integrations index) from packer/docs and the
# configuration structs' comments, with packer-sdc renderdocs.
packer-docs:
	cd packer && $(GO) run ./tools/webdocs

# The GitHub Actions workflows, with actionlint (a Go module at a fixed
# version, fetched by go run; shellcheck left out so that every machine
# gives the same verdict).
ACTIONLINT = github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
actionlint:
	$(GO) run $(ACTIONLINT) -shellcheck= -pyflakes= -no-color

# The fleet template: packer-test decodes it against the CloudFormation
# resource specification (goformation) and checks it against the image's
# and the rollout's defaults (packer/deploy). cfn-lint comes from PyPI,
# which no project file can reach, so it runs where it is installed.
fleet-lint:
	@if command -v cfn-lint >/dev/null 2>&1; then \
		cfn-lint packer/deploy/fleet.yaml && echo "fleet-lint: $$(cfn-lint --version) passed"; \
	else \
		echo "fleet-lint: cfn-lint not installed (PyPI: pip install cfn-lint); only packer-test's goformation check ran"; \
	fi

plugin:
	cd packer && $(GO) build -o packer-plugin-hotpath ./cmd/packer-plugin-hotpath

# Release files for Packer's installer in packer/dist/ (see packer/README.md):
# make plugin-release PLUGIN_VERSION=0.1.0 [PLUGIN_TARGETS=linux/amd64,...]
# (default: every platform the packer-plugin-scaffolding releases)
PLUGIN_TARGETS ?=
plugin-release:
	@test -n "$(PLUGIN_VERSION)" || { echo "set PLUGIN_VERSION, e.g. make plugin-release PLUGIN_VERSION=0.1.0"; exit 1; }
	rm -rf packer/dist
	cd packer && $(GO) run ./tools/release -version $(PLUGIN_VERSION) $(if $(PLUGIN_TARGETS),-targets $(PLUGIN_TARGETS)) -out dist

# Side by side on loopback: hotpath, the C floor (built with gcc), fasthttp,
# net/http, nginx and a minimal Go epoll responder; server on CPU 0, wrk on
# CPU 1. Knobs: ROUNDS DURATION CONNS DEPTH SERVER_CPU CLIENT_CPU PEERS KEEP=1
# BASELINE=<git rev> (see tests/bench/run.sh).
bench: deps-bench
	tests/bench/run.sh

# The default workload's profile for profile-guided optimisation: go build
# uses a main package's default.pgo by itself (-pgo=auto; -trimpath records
# it as "default.pgo", so the image stays reproducible). It is a CPU profile
# of the request path's benchmarks (parse, route, handler, response) and of
# a worker serving loopback connections (BenchmarkLoopback: the loop, recv,
# send), whose hot calls the compiler then inlines: ~40 fewer user-space
# instructions per pipelined /json request, ~80 plain (tests/bench/README.md).
# Regenerate it after changing the request path; it is only a hint, a stale
# one costs speed, never correctness.
pgo:
	tmp=$$(mktemp -d) && $(GO) test -run '^$$' -bench '^BenchmarkRequestPath(Pipelined16)?$$|^BenchmarkLoopback$$' -benchtime 2s \
		-cpuprofile "$$tmp/cpu.pprof" -o "$$tmp/server.test" ./server/ && \
		cp "$$tmp/cpu.pprof" server/cmd/hotpath-json/default.pgo && rm -rf "$$tmp"

# Indicative only under TCG (the program says so). The 6.1 guests need the
# 6.1 kernel in the cache: a cold build the first time (~20 min), then none;
# it is built only when BENCHVM_GUESTS names a 6.1 guest. BENCHVM_GUESTS
# picks the guests (tests/benchvm -guests; e.g. the 6.12 rows only, with
# each half of step 10 alone: BENCHVM_GUESTS=6.12,6.12-defer,6.12-prefer,6.12-step10);
# BENCHVM_ARGS adds flags (-runs, -d, -lock /tmp/qemu.lock, ...).
comma := ,
BENCHVM_GUESTS ?= 6.1,6.12,6.12-step10,stock
BENCHVM_ARGS ?=
bench-vm: deps-bench kernel
	$(if $(filter 6.1 6.1-step10,$(subst $(comma), ,$(BENCHVM_GUESTS))),$(HOTPATH_KERNEL) build -source /usr/src/linux-source-6.1.tar.xz)
	$(GO) run ./tests/benchvm -guests '$(BENCHVM_GUESTS)' $(BENCHVM_ARGS)

# Two complete builds from clean, separate caches (GOCACHE for the Go
# binaries and the tool itself, HOTPATH_CACHE for the kernel: the source is
# extracted and the kernel compiled twice, ~1 hour on 2 cores) in two
# different directories; the disks and manifests must be byte-identical.
# Not part of `make test`.
REPRO ?= $(OUT)/reproducible
verify-reproducible: deps
	rm -rf $(REPRO)
	for i in 1 2; do \
		echo "verify-reproducible: build $$i of 2 (clean caches under $(REPRO)/$$i)"; \
		GOCACHE=$(abspath $(REPRO))/$$i/gocache HOTPATH_CACHE=$(abspath $(REPRO))/$$i/cache \
			$(HOTPATH_IMAGE) build -out $(REPRO)/$$i/out || exit 1; \
	done
	cmp $(REPRO)/1/out/manifest.json $(REPRO)/2/out/manifest.json
	cmp $(REPRO)/1/out/hotpath.img $(REPRO)/2/out/hotpath.img
	@echo "verify-reproducible: disk and manifest byte-identical from two clean caches"

# Mutation testing (issue 20), not part of `make test`: about two hours for
# every target on 2 cores. gremlins (pinned) mutates each target in a staged
# copy of the tree and runs that package's unit tests (-short) per mutant;
# every surviving mutant and the score per package go to
# $(OUT)/mutation/report.txt, the table to stdout. One package:
# make mutation MUTATION_PKG=server/http1; an earlier report.json as the
# "before" column: MUTATION_BASELINE=path. See tests/mutation/README.md.
GREMLINS_VERSION  ?= v0.6.0
MUTATION_PKG      ?=
MUTATION_WORKERS  ?= 1
MUTATION_NICE     ?= 19
MUTATION_BASELINE ?=
.PHONY: mutation
mutation:
	GOBIN=$(abspath $(OUT))/mutation/bin $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	nice -n $(MUTATION_NICE) $(GO) run ./tests/mutation -gremlins $(OUT)/mutation/bin/gremlins -out $(OUT)/mutation \
		-workers $(MUTATION_WORKERS) -pkg "$(MUTATION_PKG)" $(if $(MUTATION_BASELINE),-baseline $(MUTATION_BASELINE))

# The named mutations (issue 41): the bugs a review named, catalogued in
# tests/mutation/named.txt with the tests that must fail. Each is put in a
# throwaway copy of the tree, its tests run (the control run first,
# unmutated), reverted; the table goes to stdout and $(OUT)/mutation/named.txt,
# the tests' output to named.log. Exits 1 when one survives, does not
# compile or no longer applies. 13-26 min at nice 19 on 2 shared cores; the QEMU
# entries (~4 min) only with NAMED_BOOT=1 (under NAMED_LOCK). One or a few:
# make mutation-named NAMED=release-last-peak,vlan-8021ad.
# `make unit` checks that every entry still applies (TestNamedCatalogue).
NAMED      ?=
NAMED_BOOT ?=
NAMED_LOCK ?= /tmp/qemu.lock
.PHONY: mutation-named
mutation-named: deps-test
	nice -n $(MUTATION_NICE) $(GO) run ./tests/mutation -named tests/mutation/named.txt -out $(OUT)/mutation \
		-only "$(NAMED)" $(if $(NAMED_BOOT),-boot -lock $(NAMED_LOCK))
