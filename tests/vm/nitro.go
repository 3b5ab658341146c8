package vm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Nitro holds the rigs that make a QEMU guest look like an EC2 Nitro
// instance where QEMU's defaults are kinder: each is a trait that hid a
// gap when every boot had virtio-blk, one NUMA node, a console on the
// machine's own UART and a virtio RNG.
type Nitro struct {
	// NVMe attaches Disk through an NVMe controller (how Nitro presents
	// EBS volumes) instead of virtio-blk; OVMF boots from it.
	NVMe bool
	// NUMA gives the guest one node per entry, each with the vCPUs it
	// lists ("0-1") and an equal share of MemoryMB. Empty: one node.
	NUMA []string
	// NICNode puts the virtio-net NIC behind a pxb-pcie expander bridge
	// (its own PCIe root, which QEMU's ACPI tables place on that node with
	// _PXM, as a two-socket instance's firmware places ENA) and a root
	// port. 0 keeps the NIC on the main PCIe root. Needs NUMA.
	NICNode int
	// PCISerial adds a PCI 16550 UART (pci-serial), Graviton's console
	// (1d0f:8250 there), whose output QEMU writes to PCISerialLog in Dir.
	// Console then follows that file; what the machine's own UART prints
	// goes to Serial0.
	PCISerial bool
	// SerialNull connects the machine's own UART (the PL011 on virt, COM1
	// on q35) to nothing, as on Graviton, where no one reads it.
	SerialNull bool
	// NoRNG leaves out the machine's virtio-rng (EC2 has none; Graviton2
	// has no RNDR either).
	NoRNG bool
}

// PCISerialLog is the file in Config.Dir that the PCI UART writes.
const PCISerialLog = "pci-serial.log"

// serial is -serial: the machine's UART on stdout, or nowhere.
func (cfg *Config) serial() string {
	if cfg.SerialNull {
		return "null"
	}
	return "stdio"
}

// devices are the machine's extra devices (without virtio-rng if NoRNG)
// and the PCI UART.
func (cfg *Config) devices(machine []string) []string {
	var out []string
	for i := 0; i < len(machine); i++ {
		if cfg.NoRNG && machine[i] == "-device" && i+1 < len(machine) && machine[i+1] == "virtio-rng-pci" {
			i++
			continue
		}
		out = append(out, machine[i])
	}
	if cfg.PCISerial {
		out = append(out,
			"-chardev", "file,id=pciuart,path="+cfg.Dir+"/"+PCISerialLog,
			"-device", "pci-serial,chardev=pciuart")
	}
	return out
}

// diskDevice is the -device of the boot disk.
func (cfg *Config) diskDevice() string {
	if cfg.NVMe {
		return "nvme,serial=hotpath-root,drive=disk0,bootindex=0"
	}
	return "virtio-blk-pci,drive=disk0,bootindex=0"
}

// smp is -smp: with NUMA nodes, one socket per node, so that the CPUs
// that share a last-level cache (a socket's, in QEMU's CPUID) are on one
// node, as on a two-socket instance; the kernel warns otherwise
// (topology_sane: "llc-sibling ... is not on the same node").
func (cfg *Config) smp() string {
	n := len(cfg.NUMA)
	if n < 2 || cfg.CPUs%n != 0 {
		return strconv.Itoa(cfg.CPUs)
	}
	return fmt.Sprintf("%d,sockets=%d,cores=%d,threads=1", cfg.CPUs, n, cfg.CPUs/n)
}

// numaArgs are the NUMA nodes and their memory.
func (cfg *Config) numaArgs() []string {
	var args []string
	if n := len(cfg.NUMA); n > 0 {
		share := cfg.MemoryMB / n
		for i, cpus := range cfg.NUMA {
			mb := share
			if i == n-1 {
				mb = cfg.MemoryMB - share*(n-1)
			}
			args = append(args,
				"-object", fmt.Sprintf("memory-backend-ram,id=numa%d,size=%dM", i, mb),
				"-numa", fmt.Sprintf("node,nodeid=%d,cpus=%s,memdev=numa%d", i, cpus, i))
		}
	}
	return args
}

// nicBridge is the NIC's expander bridge and root port. It must come
// after every device QEMU places itself (no bus=): QEMU would put those
// on the bridge's bus, which takes bridges only.
func (cfg *Config) nicBridge() []string {
	if cfg.NICNode <= 0 {
		return nil
	}
	return []string{
		"-device", "pxb-pcie,id=nicpxb,bus_nr=128,bus=pcie.0,numa_node=" + strconv.Itoa(cfg.NICNode),
		"-device", "pcie-root-port,id=nicport,bus=nicpxb,chassis=9"}
}

// nicBus places the NIC on the expander bridge's root port.
func (cfg *Config) nicBus() string {
	if cfg.NICNode > 0 {
		return ",bus=nicport"
	}
	return ""
}

// check refuses rigs that cannot work.
func (n Nitro) check(cfg *Config) error {
	if n.NICNode > 0 && n.NICNode >= len(n.NUMA) {
		return fmt.Errorf("vm: NICNode %d without that NUMA node (%d nodes)", n.NICNode, len(n.NUMA))
	}
	if n.NICNode > 0 && cfg.Arch != "" && cfg.Arch != "amd64" {
		return errors.New("vm: NICNode needs q35 (pxb-pcie on pcie.0)")
	}
	return nil
}

// follow copies what QEMU appends to path into w until exited is closed
// and the file has no more, then closes the returned channel. The file
// may not exist yet when it starts.
func follow(path string, w io.Writer, exited <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var f *os.File
		buf := make([]byte, 64<<10)
		for {
			if f == nil {
				f, _ = os.Open(path)
			}
			if f != nil {
				n, _ := f.Read(buf)
				if n > 0 {
					w.Write(buf[:n])
					continue
				}
			}
			select {
			case <-exited:
				if f != nil {
					io.CopyBuffer(w, f, buf)
					f.Close()
				}
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return done
}
