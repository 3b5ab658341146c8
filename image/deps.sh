#!/bin/sh
# deps.sh installs, from Debian's packages, what hotpath needs on the build
# machine. It is idempotent: a package already installed is not touched, and
# nothing at all happens when everything is present.
#
# usage: image/deps.sh [root] [build] [test] [bench] [arm64]   (default: build test)
#
#   root   not a package: fail unless run as root, first and whatever is
#          installed (`make test` and .ci/run: the namespace, tap and QEMU
#          tests need root, and a run without it must not look green)
#   build  linux-source-6.12               the kernel source the appliance kernel is built from (Linux 6.12 LTS)
#          build-essential bc bison flex   the kernel's build tools (make, gcc, Kconfig parsers)
#          libelf-dev libssl-dev           objtool and the kernel's certificate tools link these
#          xz-utils cpio                   unpack the source tarball; inspect initramfs images
#          grub-pc-bin                     GRUB's i386-pc boot code and modules (with grub-common's grub-mkimage):
#                                          the x86 disk's legacy BIOS boot (image/bios); installs no boot loader here
#   test   qemu-system-x86 ovmf            boot the disk image under UEFI firmware in tests and `make run`
#          seabios                         QEMU's legacy BIOS: the same disk booted as on EC2 .metal (hotpath-image run -firmware bios)
#          linux-source-6.1                the previous kernel, still buildable with -source: the policy tests configure it too
#          iproute2                        network namespaces and tap devices for the guest's network
#          strace                          count system calls per request in benchmarks and tests
#          dosfstools gdisk                fsck.fat and sgdisk -v: independent checks of the ESP and GPT the image builder writes
#          swtpm swtpm-tools               a software TPM 2.0 per guest (SHA-256 and SHA-384 banks): measured boot tests
#          sbsigntool openssl              sbverify: an independent check of the Authenticode signature; openssl
#                                          decrypts the snakeoil test key (the ovmf package's) for signing tests
#   arm64  gcc-aarch64-linux-gnu           cross-builds the arm64 (Graviton) kernel; only for ARCH=arm64
#          qemu-system-arm qemu-efi-aarch64  boot arm64 images on QEMU's virt machine through AAVMF UEFI firmware
#   bench  wrk                             the HTTP load generator
#          valgrind                        user-space instructions per request (cachegrind), a
#                                          figure the machine's load does not move
#          nginx-light                     one of the servers compared side by side
#   (`make bench-vm` also needs Debian's stock kernel: it fetches linux-image-amd64 with
#   `apt-get download` into its cache and unpacks it there, never installing it on this machine.)
set -eu

groups="${*:-build test}"
want=""
for g in $groups; do
	case "$g" in
	root)
		if [ "$(id -u)" != 0 ]; then
			echo "deps.sh: the tests need root (network namespaces, tap devices, QEMU on a tap); run as root" >&2
			exit 1
		fi
		;;
	build) want="$want linux-source-6.12 build-essential bc bison flex libelf-dev libssl-dev xz-utils cpio grub-pc-bin" ;;
	test) want="$want qemu-system-x86 ovmf seabios linux-source-6.1 iproute2 strace dosfstools gdisk swtpm swtpm-tools sbsigntool openssl" ;;
	bench) want="$want wrk nginx-light strace valgrind" ;;
	arm64) want="$want gcc-aarch64-linux-gnu qemu-system-arm qemu-efi-aarch64" ;;
	*) echo "deps.sh: unknown group '$g' (want root, build, test, bench or arm64)" >&2; exit 2 ;;
	esac
done

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		case " $missing " in *" $p "*) ;; *) missing="$missing $p" ;; esac
	fi
done

if [ -z "$missing" ]; then
	exit 0
fi

echo "deps.sh: installing from Debian's packages:$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: not root; as root run: apt-get update && apt-get install -y$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be absent (fresh machine) or stale; refresh once per run.
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >&2
echo "deps.sh: done" >&2
