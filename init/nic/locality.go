package nic

import "slices"

// queueOrder is the workload's CPUs in the order the NIC's n queues take
// them: with a queue for every CPU, the CPUs in order (queue i -> CPU i);
// with fewer, QueueOrder's (package numa: the NIC's node first) when it
// is set. Queue q then owns CPUs order[k] for k mod n == q, its interrupt
// on order[q].
func (t *Tuner) queueOrder(n int) []int {
	cpus := t.WorkloadCPUs()
	if t.QueueOrder == nil || n >= len(cpus) {
		return cpus
	}
	out := make([]int, 0, len(cpus))
	for _, c := range t.QueueOrder {
		if slices.Contains(cpus, c) {
			out = append(out, c)
		}
	}
	for _, c := range cpus {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// queueCPUSet is QueueCPUs over queueOrder, sorted as masks read back.
func (t *Tuner) queueCPUSet(q, n int) []int {
	return slices.Sorted(slices.Values(QueueCPUs(q, n, t.queueOrder(n))))
}

// queueCount is the number of queues the interrupts serve.
func queueCount(irqs []QueueIRQ) int {
	n := 0
	for _, q := range irqs {
		n = max(n, q.Queue+1)
	}
	return n
}
