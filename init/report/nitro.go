package report

// PreviousBoot is what the boot before this one left in pstore (package
// init/pstore): the kernel's last lines before a panic or an oops, kept in
// EFI variables across the warm reboot that panic=10 makes. The records
// are removed once read, so each crash is reported by exactly one boot.
type PreviousBoot struct {
	// Crashed is true when a panic or oops dump was found.
	Crashed bool `json:"crashed"`
	// Reason is the dump's reason in lower case: "panic", "oops",
	// "emergency", "shutdown"; the most severe of the dumps found.
	Reason string `json:"reason,omitempty"`
	// Summary is the one line an operator reads first: "previous boot:
	// panic, Kernel panic - not syncing: sysrq triggered crash".
	Summary string `json:"summary,omitempty"`
	// Lines are the dump's last kernel log lines, oldest first, without
	// their syslog priority prefix.
	Lines []string `json:"lines,omitempty"`
	// Records is the number of pstore files read; Backend the pstore
	// backend that kept them ("efi_pstore").
	Records int    `json:"records"`
	Backend string `json:"backend,omitempty"`
	// Cleared is true once every record was removed (the EFI variables
	// deleted); ClearError says why not otherwise.
	Cleared    bool   `json:"cleared"`
	ClearError string `json:"clear_error,omitempty"`
}

// NUMA is the machine's NUMA topology as the numa-locality step found it,
// and where it placed the NIC's queue interrupts.
type NUMA struct {
	Nodes []NUMANode `json:"nodes"`
	// NICNode is the primary NIC's node (its device's numa_node); -1 when
	// the firmware gives the device none.
	NICNode int `json:"nic_node"`
	// QueueCPUs is the order in which the NIC's queues take the workload's
	// CPUs when there are fewer queues than CPUs: the NIC's node first.
	// Empty when the placement is off or does not apply.
	QueueCPUs string `json:"queue_cpus,omitempty"`
}

// NUMANode is one node and its CPUs (cpulist format, "0-3").
type NUMANode struct {
	ID   int    `json:"id"`
	CPUs string `json:"cpus"`
}
