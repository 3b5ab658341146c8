package vm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Nitro rigs become QEMU arguments: NVMe instead of virtio-blk, two
// NUMA nodes with their memory, the NIC behind a pxb-pcie on node 1, and
// on virt a PCI UART to a file with the PL011 on nothing and no
// virtio-rng.
func TestArgsNitro(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		want, not []string
	}{
		{"nvme numa", Config{CPUs: 4, MemoryMB: 1024, Queues: 2, Netns: &Netns{Name: "x"}, Tap: "tap0",
			Nitro: Nitro{NVMe: true, NUMA: []string{"0-1", "2-3"}, NICNode: 1}},
			[]string{
				"-device nvme,serial=hotpath-root,drive=disk0,bootindex=0",
				"-object memory-backend-ram,id=numa0,size=512M -numa node,nodeid=0,cpus=0-1,memdev=numa0",
				"-object memory-backend-ram,id=numa1,size=512M -numa node,nodeid=1,cpus=2-3,memdev=numa1",
				"-device pxb-pcie,id=nicpxb,bus_nr=128,bus=pcie.0,numa_node=1",
				"-device pcie-root-port,id=nicport,bus=nicpxb,chassis=9",
				"romfile=,bus=nicport",
				"-serial stdio",
				"-smp 4,sockets=2,cores=2,threads=1",
			},
			[]string{"virtio-blk-pci"}},
		{"uneven memory", Config{CPUs: 3, MemoryMB: 1000, Nitro: Nitro{NUMA: []string{"0", "1", "2"}}},
			[]string{"id=numa0,size=333M", "id=numa2,size=334M"}, []string{"pxb-pcie"}},
		{"graviton", Config{CPUs: 2, MemoryMB: 1024, Arch: "arm64", Dir: "/run/d",
			Nitro: Nitro{PCISerial: true, SerialNull: true, NoRNG: true}},
			[]string{"-serial null", "-chardev file,id=pciuart,path=/run/d/" + PCISerialLog, "-device pci-serial,chardev=pciuart",
				"-device virtio-blk-pci"},
			[]string{"virtio-rng", "-serial stdio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Disk, tc.cfg.Accel = "/d.img", "tcg"
			got := strings.Join(tc.cfg.Args("/v.fd", "/q.sock"), " ")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("args lack %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("args have %q:\n%s", n, got)
				}
			}
		})
	}
}

func TestStartRefusesNitro(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{
		{Disk: "/nonexistent", Nitro: Nitro{NICNode: 1}},
		{Disk: "/nonexistent", Arch: "arm64", Nitro: Nitro{NUMA: []string{"0", "1"}, NICNode: 1}},
	} {
		if _, err := Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "NICNode") {
			t.Errorf("%+v: %v", cfg.Nitro, err)
		}
	}
}

// follow copies a file that appears late and grows, through to what was
// written just before the writer exited.
func TestFollow(t *testing.T) {
	p := filepath.Join(t.TempDir(), "uart.log")
	c := NewConsole(nil)
	exited := make(chan struct{})
	done := follow(p, c, exited)
	time.Sleep(100 * time.Millisecond)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("first line\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.WaitString(ctx, 0, "first line"); err != nil {
		t.Fatal(err)
	}
	f.WriteString("last line\n")
	f.Close()
	close(exited)
	<-done
	if got := c.String(); got != "first line\nlast line\n" {
		t.Errorf("followed %q", got)
	}
}
