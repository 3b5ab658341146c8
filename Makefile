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
#   make bench-vm  the appliance against Debian's stock kernel, both in QEMU
#   make kernel    only the appliance kernel (cached, see kernel-config/)
#   make plugin    packer/packer-plugin-hotpath
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

.PHONY: all deps deps-bench kernel image run test test-arm64 vet unit e2e packer-test \
	packer-generate-check plugin bench bench-vm

all: image

deps:
	@image/deps.sh build test $(DEPS_ARCH)

deps-bench:
	@image/deps.sh build test bench

kernel: deps
	$(HOTPATH_KERNEL) build -arch $(ARCH)

image: deps
	$(HOTPATH_IMAGE) build -arch $(ARCH) -out $(OUT)

run: image
	$(HOTPATH_IMAGE) run -arch $(ARCH) -disk $(OUT)/hotpath.img

test: deps vet kernel unit e2e packer-test packer-generate-check test-arm64

vet:
	$(GO) vet ./...
	cd tests/peers && $(GO) vet ./...
	cd packer && $(GO) vet ./...

unit: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(UNIT_PKGS)

e2e: deps kernel
	$(GO) test -v -count=1 -timeout $(TEST_TIMEOUT) ./tests/e2e/

# The arm64 image (a second cold kernel on a fresh machine, ~15 min of CPU;
# its boot and checks then take under a minute). The kernel is built first,
# as for the x86 tests, so that the test itself only relinks it.
test-arm64:
	@image/deps.sh build test arm64
	$(HOTPATH_KERNEL) build -arch arm64
	$(GO) test -v -count=1 -timeout $(TEST_TIMEOUT) -run 'Arm64' ./tests/e2e/ -args -e2e.arm64

# The plugin is its own module (the Packer and AWS SDKs stay out of go.mod).
packer-test: deps kernel
	cd packer && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# The HCL2 specs are generated (packer-sdc, pinned in packer/go.mod); a
# committed spec that differs from a fresh one fails the build.
packer-generate-check:
	cd packer && $(GO) generate ./... && git diff --exit-code -- '*.hcl2spec.go'

plugin:
	cd packer && $(GO) build -o packer-plugin-hotpath ./cmd/packer-plugin-hotpath

# Side by side on loopback: hotpath, fasthttp, net/http, nginx and a minimal
# epoll responder; server on CPU 0, wrk on CPU 1. Knobs: ROUNDS DURATION
# CONNS DEPTH SERVER_CPU CLIENT_CPU PEERS KEEP=1 (see tests/bench/run.sh).
bench: deps-bench
	tests/bench/run.sh

# Indicative only under TCG (the program says so).
bench-vm: deps-bench kernel
	$(GO) run ./tests/benchvm
