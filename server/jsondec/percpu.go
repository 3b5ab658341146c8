package jsondec

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// PerCPU hands each worker its own Decoder, by the CPU the worker is
// pinned to (server.Ctx.WorkerCPU): no lock, and no memory shared between
// workers but the table of pointers, each entry written once by its own
// worker. A handler does
//
//	err := schema.Decode(decoders.For(c.WorkerCPU()), c.Body(), &req)
type PerCPU struct {
	opts Options
	ds   []*Decoder // by CPU number
}

// NewPerCPU returns a PerCPU whose Decoders have opts. It covers every
// CPU of the machine and of the process's affinity mask.
func NewPerCPU(opts Options) *PerCPU {
	n := runtime.NumCPU()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		for cpu := len(set) * 64; cpu > n; cpu-- {
			if set.IsSet(cpu - 1) {
				n = cpu
				break
			}
		}
	}
	return &PerCPU{opts: opts, ds: make([]*Decoder, n)}
}

// For returns the Decoder of cpu, made on first use. It must be called
// only from the worker pinned to cpu. A cpu outside the table (a worker
// on a CPU brought online after NewPerCPU) gets a new Decoder each time:
// correct, but it allocates.
func (p *PerCPU) For(cpu int) *Decoder {
	if cpu < 0 || cpu >= len(p.ds) {
		return NewDecoder(p.opts)
	}
	d := p.ds[cpu]
	if d == nil {
		d = NewDecoder(p.opts)
		p.ds[cpu] = d
	}
	return d
}
