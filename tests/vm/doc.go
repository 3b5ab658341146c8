// Package vm is the end-to-end test harness: it boots a hotpath disk image in
// QEMU through OVMF UEFI firmware, with multi-queue virtio-net on a tap device
// inside a network namespace it creates, serves DHCPv4 to the guest from that
// namespace, captures the serial console (where the init prints its boot
// report and events), and drives QEMU over QMP (system_powerdown, quit).
//
// Everything it creates (namespaces, taps, processes, temporary files) is
// released by Close methods, and the testing helpers (NewNetns, Boot)
// register those with t.Cleanup so a failing test leaves nothing behind.
// Names carry the test process's PID so parallel runs do not clash and
// leftovers of a killed run can be recognised and removed.
//
// The guest has no shell: every check is made from outside, over HTTP from
// inside the namespace, or on the facts the init reports on the console.
package vm
