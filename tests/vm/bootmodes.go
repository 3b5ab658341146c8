package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotpath-dev/hotpath/image/machine"
)

// UserNet is a NIC on QEMU's user networking (slirp). Its DHCP server
// hands out 10.0.2.15 and, with BootFile, a boot file name (option 67); for
// an http:// URL libslirp also answers the vendor class "HTTPClient"
// (option 60), which is what UEFI HTTP boot looks for. 10.0.2.2 is the host
// side: QEMU's own loopback (inside Config.Netns when set), and with
// TFTPDir also the TFTP server (next-server) that UEFI PXE fetches
// BootFile from.
type UserNet struct {
	// BootFile is the DHCP boot file: an http:// URL for UEFI HTTP boot,
	// or with TFTPDir a file name in it for UEFI PXE over TFTP.
	BootFile string
	// TFTPDir is the root of libslirp's built-in TFTP server (-netdev
	// user,tftp=), read-only, at UserNetHostAddr.
	TFTPDir string
	// HostFwd are QEMU hostfwd rules, e.g. "tcp:127.0.0.1:8080-:8080".
	HostFwd []string
	// Restrict isolates the guest (restrict=on): libslirp drops every
	// packet the guest sends past its own services, so nothing leaves the
	// host (NTP, metadata or DNS queries included), while its DHCP server
	// (udp_input answers BOOTP before the restricted check), its router
	// advertisements (a timer and an answer to solicitations) and HostFwd
	// still work: `make run`'s network minus the egress.
	Restrict bool
}

// UserNetGuestAddr is the address slirp's DHCP server gives the guest;
// UserNetHostAddr is the host as the guest sees it.
// UserNetPrefix6 is the IPv6 prefix slirp's router advertisements give,
// without the managed flag (the guest takes its address by SLAAC): the
// one `hotpath-image run` sets, machine.UserNetIPv6.
const (
	UserNetGuestAddr = "10.0.2.15"
	UserNetHostAddr  = "10.0.2.2"
	UserNetPrefix6   = machine.UserNetIPv6
)

// args are the -netdev and -device arguments. The NIC has no option ROM
// (romfile=): OVMF's own virtio-net driver and network stack do the HTTP
// boot, as a server's firmware would with its own NIC driver. With a boot
// file, bootindex makes it the first boot option.
func (u *UserNet) args() []string {
	nd := "user,id=net0,ipv6-net=" + UserNetPrefix6
	if u.TFTPDir != "" {
		nd += ",tftp=" + u.TFTPDir
	}
	if u.BootFile != "" {
		nd += ",bootfile=" + u.BootFile
	}
	if u.Restrict {
		nd += ",restrict=on"
	}
	for _, f := range u.HostFwd {
		nd += ",hostfwd=" + f
	}
	nic := fmt.Sprintf("virtio-net-pci,netdev=net0,mac=%s,romfile=", GuestMAC)
	if u.BootFile != "" {
		// A disk booted beside this NIC has bootindex 0 itself.
		nic += ",bootindex=0"
	}
	args := []string{"-netdev", nd, "-device", nic}
	if strings.HasPrefix(u.BootFile, "http://") || strings.HasPrefix(u.BootFile, "https://") {
		// OVMF tries its PXEv4 and PXEv6 boot options before HTTPv4 (a
		// TFTP error, then a wait for DHCPv6 offers that never come);
		// these knobs of OVMF's platform boot manager leave them out, as
		// a server's boot order set to HTTP boot would.
		args = append(args,
			"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	if u.TFTPDir != "" && u.BootFile != "" {
		// PXEv4 is OVMF's first network boot option; leaving out PXEv6
		// makes a failed PXEv4 fall through to HTTP boot's (failing)
		// attempt at once instead of after a wait for DHCPv6 offers.
		args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	return args
}

// netBoot says the guest boots from the network: a boot file and no disk
// or kernel.
func (cfg *Config) netBoot() bool {
	return cfg.UserNet != nil && cfg.UserNet.BootFile != "" && cfg.Disk == "" && cfg.Kernel == ""
}

// usesPflash says the guest boots through UEFI firmware on pflash.
func (cfg *Config) usesPflash() bool {
	return cfg.Firmware != "bios" && (cfg.Disk != "" || cfg.netBoot())
}

// checkBootMode refuses what QEMU would boot differently than asked.
func (cfg *Config) checkBootMode() error {
	switch cfg.Firmware {
	case "", "uefi":
	case "bios":
		if cfg.Arch != "" && cfg.Arch != "amd64" {
			return fmt.Errorf("vm: Firmware bios on %s: SeaBIOS is x86 only", cfg.Arch)
		}
		if cfg.Disk == "" {
			return errors.New("vm: Firmware bios needs a Disk")
		}
	default:
		return fmt.Errorf("vm: Firmware %q: want uefi or bios", cfg.Firmware)
	}
	if cfg.UserNet != nil && cfg.Tap != "" {
		return errors.New("vm: UserNet and Tap both set: one NIC")
	}
	if u := cfg.UserNet; u != nil {
		return u.check()
	}
	return nil
}

// check refuses a boot file the firmware could not fetch: a name without
// a TFTP root, a URL or a missing file with one, and what would break
// QEMU's comma-separated -netdev option.
func (u *UserNet) check() error {
	url := strings.Contains(u.BootFile, "://")
	switch {
	case strings.Contains(u.BootFile+u.TFTPDir, ","):
		return fmt.Errorf("vm: UserNet: a comma in %q or %q would end QEMU's option", u.BootFile, u.TFTPDir)
	case u.TFTPDir == "" && u.BootFile != "" && !url:
		return fmt.Errorf("vm: UserNet.BootFile %q: want a URL (http://%s:PORT/...), or a TFTPDir that holds it", u.BootFile, UserNetHostAddr)
	case u.TFTPDir != "" && url:
		return fmt.Errorf("vm: UserNet.BootFile %q with a TFTPDir: want a file name in it", u.BootFile)
	case u.TFTPDir != "" && u.BootFile != "":
		if _, err := os.Stat(filepath.Join(u.TFTPDir, u.BootFile)); err != nil {
			return fmt.Errorf("vm: UserNet: the PXE boot file: %w", err)
		}
	}
	return nil
}
