// Package bql makes a NIC's byte queue limits inert, per transmit queue.
//
// Byte queue limits (BQL, net/core/dynamic_queue_limits.c) cap the bytes a
// driver may hold in a transmit ring: when a queue's in-flight bytes pass
// its dynamic limit, netdev_tx_sent_queue stops the queue
// (__QUEUE_STATE_STACK_XOFF) until completions bring it under again.
// Behind a queueing qdisc a stopped queue just holds packets in the qdisc.
// Behind noqueue (the case study's step 8) there is nowhere to hold them:
// __dev_queue_xmit (net/core/dev.c, 6.12) drops the packet, counts it in
// the device's tx_dropped, returns -ENETDOWN and logs "Virtual device
// eth0 asks to queue packet!". 6.12's ENA and virtio_net run BQL on every
// transmit; the case study measured step 8 on Amazon Linux 2's ENA driver,
// which ships with BQL off.
//
// The limit cannot be turned off from user space, but it can be made
// inert: the dynamic limit never goes below limit_min
// (/sys/class/net/DEV/queues/tx-N/byte_queue_limits/limit_min, net-sysfs.c
// bql_set_limit_min), and limit_min may be set as high as DQL_MAX_LIMIT
// (include/linux/dynamic_queue_limits.h). With it there, only the driver's
// own ring-full stop remains (virtio_net: fewer than 2+MAX_SKB_FRAGS free
// descriptors; ENA: too few free LLQ entries).
package bql

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/internal/sysfsattr"
)

// StepName is the boot report's name of the step.
const StepName = "nic-bql"

// MaxLimit is DQL_MAX_LIMIT, ((UINT_MAX / 2) - DQL_MAX_OBJECT) with
// DQL_MAX_OBJECT = UINT_MAX / 16: the highest limit_min the kernel takes
// (bql_set refuses more with EINVAL) and what it shows for "max".
const MaxLimit = (1<<32-1)/2 - (1<<32-1)/16

// Step returns the boot step that sets limit_min of every transmit queue
// of the interface link() names (when the step runs: the NIC is found by
// an earlier step) to MaxLimit, and reads each back. sysRoot is "/sys".
// inert false skips it: the kernel's dynamic limits stay (nic.bql=on, or
// auto with a queueing qdisc). It runs after nic-channels, the only step
// that changes the number of queues (a queue never used before has
// limit_min 0, dql_init at allocation); it is not
// among the steps re-run on a link change (the Tuner's), as a device
// reset keeps a queue's limit_min (dql_reset leaves min_limit alone).
func Step(sysRoot string, link func() string, inert bool) boot.Step {
	var files []string // apply's, read back by verify
	return boot.Step{
		Name: StepName,
		Apply: func(_ context.Context, d boot.Detail) error {
			files = nil
			if !inert {
				return boot.Skip("the kernel's dynamic byte queue limits stay (nic.bql=on, or auto with a queueing qdisc)")
			}
			lim, err := limitFiles(sysRoot, link())
			if err != nil {
				return err
			}
			v := strconv.Itoa(MaxLimit)
			for _, f := range lim {
				if err := sysfsattr.WriteExisting(f, v); err != nil {
					return fmt.Errorf("write %s: %w", f, err)
				}
			}
			files = lim
			d["queues"] = strconv.Itoa(len(lim))
			return nil
		},
		Verify: func(_ context.Context, d boot.Detail) error {
			for _, f := range files {
				got, err := sysfsattr.ReadInt(f)
				if err != nil {
					return err
				}
				if got != MaxLimit {
					return fmt.Errorf("%s: kernel has %d, want %d", f, got, MaxLimit)
				}
			}
			d["limit_min"] = strconv.Itoa(MaxLimit)
			return nil
		},
	}
}

// limitFiles lists limit_min of every tx-N queue of dev, in queue order.
// A device whose queues have no byte_queue_limits (a kernel without
// CONFIG_BQL) is a skip: there is no limit to make inert.
func limitFiles(sysRoot, dev string) ([]string, error) {
	dir := filepath.Join(sysRoot, "class", "net", dev, "queues")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("queues of %s: %w", dev, err)
	}
	type q struct {
		n    int
		file string
	}
	var qs []q
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "tx-"))
		if !strings.HasPrefix(e.Name(), "tx-") || err != nil {
			continue
		}
		qs = append(qs, q{n, filepath.Join(dir, e.Name(), "byte_queue_limits", "limit_min")})
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s has no transmit queue in %s", dev, dir)
	}
	slices.SortFunc(qs, func(a, b q) int { return a.n - b.n })
	out := make([]string, len(qs))
	for i, q := range qs {
		if _, err := os.Stat(q.file); errors.Is(err, fs.ErrNotExist) {
			return nil, boot.Skip("%s: no byte_queue_limits (kernel without CONFIG_BQL)", dev)
		}
		out[i] = q.file
	}
	return out, nil
}
