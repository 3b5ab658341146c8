package irqname

import (
	"fmt"
	"reflect"
	"testing"
)

// The action names each driver prints, as its code (cited in Table)
// formats them: queue vectors, and the driver's other vectors, which must
// never be taken for a queue.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		dev     Device
		actions []string
		want    []string // "name queue kind"
		shared  bool
	}{
		{Device{Driver: "virtio_net", Ifname: "eth0", Dev: "virtio0", PCI: "0000:00:03.0"},
			[]string{"virtio0-config", "virtio0-input.0", "virtio0-output.0", "virtio0-input.1", "virtio0-output.1", "virtio1-input.0"},
			[]string{"virtio0-input.0 0 rx", "virtio0-output.0 0 tx", "virtio0-input.1 1 rx", "virtio0-output.1 1 tx"}, false},
		{Device{Driver: "virtio_net", Ifname: "eth0", Dev: "virtio0"},
			[]string{"virtio0-config", "virtio0-virtqueues"}, []string{"virtio0-virtqueues 0 all"}, true},
		// virtio-pci without MSI-X: one INTx line named after the device.
		{Device{Driver: "virtio_net", Ifname: "eth0", Dev: "virtio0"},
			[]string{"virtio0", "virtio1-config"}, []string{"virtio0 0 all"}, true},
		{Device{Driver: "ena", Ifname: "eth0", Dev: "0000:00:05.0", PCI: "0000:00:05.0"},
			[]string{"ena-mgmnt@pci:0000:00:05.0", "eth0-Tx-Rx-0", "eth0-Tx-Rx-1", "eth1-Tx-Rx-0"},
			[]string{"eth0-Tx-Rx-0 0 TxRx", "eth0-Tx-Rx-1 1 TxRx"}, false},
		{Device{Driver: "e1000e", Ifname: "eth0", Dev: "0000:00:02.0", PCI: "0000:00:02.0"},
			[]string{"eth0-rx-0", "eth0-tx-0", "eth0"},
			[]string{"eth0-rx-0 0 rx", "eth0-tx-0 0 tx"}, false},
		{Device{Driver: "igb", Ifname: "enp1s0", Dev: "0000:01:00.0"},
			[]string{"enp1s0", "enp1s0-TxRx-0", "enp1s0-TxRx-1", "enp1s0-TxRx-2", "enp1s0-TxRx-3"},
			[]string{"enp1s0-TxRx-0 0 TxRx", "enp1s0-TxRx-1 1 TxRx", "enp1s0-TxRx-2 2 TxRx", "enp1s0-TxRx-3 3 TxRx"}, false},
		{Device{Driver: "igb", Ifname: "eth0"}, // more queues than vectors/2: split rx and tx vectors
			[]string{"eth0", "eth0-rx-0", "eth0-rx-1", "eth0-tx-0", "eth0-tx-1", "eth0-unused"},
			[]string{"eth0-rx-0 0 rx", "eth0-tx-0 0 tx", "eth0-rx-1 1 rx", "eth0-tx-1 1 tx"}, false},
		{Device{Driver: "igc", Ifname: "enp2s0"},
			[]string{"enp2s0", "enp2s0-TxRx-0", "enp2s0-TxRx-1"},
			[]string{"enp2s0-TxRx-0 0 TxRx", "enp2s0-TxRx-1 1 TxRx"}, false},
		{Device{Driver: "ixgbe", Ifname: "eth2"},
			[]string{"eth2", "eth2-TxRx-0", "eth2-TxRx-1", "eth2-TxRx-15", "eth20-TxRx-0"},
			[]string{"eth2-TxRx-0 0 TxRx", "eth2-TxRx-1 1 TxRx", "eth2-TxRx-15 15 TxRx"}, false},
		{Device{Driver: "i40e", Ifname: "ens1f0", Dev: "0000:3b:00.0", PCI: "0000:3b:00.0"},
			[]string{"i40e-0000:3b:00.0:misc", "i40e-ens1f0-TxRx-0", "i40e-ens1f0-TxRx-1", "ens1f0-TxRx-0"},
			[]string{"i40e-ens1f0-TxRx-0 0 TxRx", "i40e-ens1f0-TxRx-1 1 TxRx"}, false},
		{Device{Driver: "ice", Ifname: "ens2f0", Dev: "0000:5e:00.0", PCI: "0000:5e:00.0"},
			[]string{"ice-0000:5e:00.0:misc", "ice-0000:5e:00.0:ll_ts", "ice-ens2f0-TxRx-0", "ice-ens2f0-TxRx-1", "ice-ens2f0-TxRx-2"},
			[]string{"ice-ens2f0-TxRx-0 0 TxRx", "ice-ens2f0-TxRx-1 1 TxRx", "ice-ens2f0-TxRx-2 2 TxRx"}, false},
		{Device{Driver: "mlx5_core", Ifname: "enp59s0f0np0", Dev: "0000:3b:00.0", PCI: "0000:3b:00.0"},
			[]string{"mlx5_async0@pci:0000:3b:00.0", "mlx5_comp0@pci:0000:3b:00.0", "mlx5_comp1@pci:0000:3b:00.0",
				"mlx5_comp2@pci:0000:3b:00.0", "mlx5_comp0@pci:0000:3b:00.1", "mlx5_async0@pci:0000:3b:00.1"},
			[]string{"mlx5_comp0@pci:0000:3b:00.0 0 TxRx", "mlx5_comp1@pci:0000:3b:00.0 1 TxRx", "mlx5_comp2@pci:0000:3b:00.0 2 TxRx"}, false},
		{Device{Driver: "mlx5_core", Ifname: "eth0", PCI: "0000:3b:00.0"},
			[]string{"mlx5_combined0@pci:0000:3b:00.0"}, []string{"mlx5_combined0@pci:0000:3b:00.0 0 all"}, true},
		// I217/I218/I219: no MSI-X, one MSI vector named after the interface.
		{Device{Driver: "e1000e", Ifname: "eno1", Dev: "0000:00:1f.6", PCI: "0000:00:1f.6"},
			[]string{"eno1"}, []string{"eno1 0 all"}, true},
		// 82574 named with 11 characters or more: rx, tx and link vectors
		// all print the bare name; all serve queue 0.
		{Device{Driver: "e1000e", Ifname: "enp0s31f6abc", Dev: "0000:00:02.0"},
			[]string{"enp0s31f6abc", "enp0s31f6abc", "enp0s31f6abc"},
			[]string{"enp0s31f6abc 0 all", "enp0s31f6abc 0 all", "enp0s31f6abc 0 all"}, true},
		// RTL8168/8125: one vector, whatever its kind.
		{Device{Driver: "r8169", Ifname: "enp3s0", Dev: "0000:03:00.0", PCI: "0000:03:00.0"},
			[]string{"enp3s0", "enp3s0-rx-0"}, []string{"enp3s0 0 all"}, true},
		// igb fallen back to MSI (no MSI-X).
		{Device{Driver: "igb", Ifname: "eth0"}, []string{"eth0"}, []string{"eth0 0 all"}, true},
		// A driver the table does not know, with one vector.
		{Device{Driver: "atlantic", Ifname: "enp5s0"}, []string{"enp5s0"}, []string{"enp5s0 0 all"}, true},
		{Device{Driver: "bnxt_en", Ifname: "eno1np0"},
			[]string{"eno1np0-TxRx-0", "eno1np0-TxRx-1"},
			[]string{"eno1np0-TxRx-0 0 TxRx", "eno1np0-TxRx-1 1 TxRx"}, false},
		{Device{Driver: "bnxt_en", Ifname: "eno1np0"}, // separate rings: tx counts on after rx
			[]string{"eno1np0-rx-0", "eno1np0-rx-1", "eno1np0-tx-2", "eno1np0-tx-3"},
			[]string{"eno1np0-rx-0 0 rx", "eno1np0-tx-2 0 tx", "eno1np0-rx-1 1 rx", "eno1np0-tx-3 1 tx"}, false},
		{Device{Driver: "some_new_driver", Ifname: "eth0"},
			[]string{"eth0", "drv-eth0-TxRx-0", "eth0-txrx-1"},
			[]string{"drv-eth0-TxRx-0 0 TxRx", "eth0-txrx-1 1 TxRx"}, false},
	} {
		t.Run(tc.dev.Driver, func(t *testing.T) {
			var as []Action
			for i, n := range tc.actions {
				as = append(as, Action{IRQ: 40 + i, Name: n})
			}
			vs, shared := For(tc.dev.Driver).Match(tc.dev, as)
			var got []string
			for _, v := range vs {
				got = append(got, fmt.Sprintf("%s %d %s", v.Name, v.Queue, v.Kind))
			}
			if !reflect.DeepEqual(got, tc.want) || (shared != "") != tc.shared {
				t.Errorf("Match(%v) = %q shared %v, want %q shared %v", tc.actions, got, shared, tc.want, tc.shared)
			}
		})
	}
}

// Every scheme cites its source, and every driver the kernel policy
// builds in has one.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Table {
		if s.Source == "" || s.queue == nil && s.Driver != "r8169" { // r8169 has one vector only
			t.Errorf("%s: no source or no pattern", s.Driver)
		}
		if seen[s.Driver] {
			t.Errorf("%s twice", s.Driver)
		}
		seen[s.Driver] = true
	}
	for _, d := range []string{"virtio_net", "ena", "e1000e", "igb", "igc", "ixgbe", "i40e", "ice", "mlx5_core", "bnxt_en"} {
		if !seen[d] {
			t.Errorf("no scheme for %s", d)
		}
	}
}
