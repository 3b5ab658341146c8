package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/init/report"
)

// User-data as configuration.
//
// One image boots many instances; what differs between them comes from the
// instance's user-data, read from the metadata service after the network
// is up. Precedence, weakest first: the built-in defaults, the baked
// init.conf, the kernel command line, user-data.
//
// User-data made of init.conf lines is hotpath's. User-data meant for
// another system is recognised by its first bytes and left alone with a
// note: a script ("#!"), cloud-init ("#cloud-config" and the other "#cloud-"
// / "#include" / "#part-handler" / "#upstart-job" markers), a MIME
// multi-part document (a first line "Content-Type:" or "MIME-Version:"),
// or gzip (1f 8b). Hotpath user-data with any problem (an unknown key, a
// bad value, a line that is not key=value, more than MaxUserData bytes,
// binary content, keys that contradict each other) is rejected whole: the
// instance boots with its baked configuration and the report names every
// problem. A half-applied configuration is the one outcome nobody tested.
//
// Keys that act before the network is up cannot take effect from
// user-data, because user-data arrives over that network; they are refused
// per key, with the reason in the report, and the other keys apply:
//
//   - net.*: the interface, addressing and DHCP already ran and brought the
//     user-data in; changing them from it could cut the instance off from
//     the very service that would carry the fix.
//   - nic.*: the NIC steps (channels, interrupt moderation, IRQ affinity,
//     XPS, qdisc) ran before the network; re-running them on a live link
//     resets queues (ENA resets the device on a channel change) under
//     the address just configured.
//   - workload.cpus: NIC queue i was bound to the i-th CPU of the list
//     (IRQ affinity, XPS) before the network.
//   - imds: it was read to get here.
//   - bond.*, vlan.*: the bond and VLAN carry that network.
//
// sysctl.* keys are re-applied: the init runs the sysctl steps again with
// the merged values before the workload starts. Every other key
// (workload.*, ready.timeout, supervise.*, shutdown.grace, time.ntp) acts
// after this point and simply takes the user-data value.

// MaxUserData is the largest user-data hotpath accepts as configuration:
// EC2's own limit (16 KiB before base64).
const MaxUserData = 16 << 10

// MaxUserDataErrors is how many problems of rejected user-data are listed
// one by one (the rest are counted): 16 KiB of one-byte lines would
// otherwise list 8,000, which no reader needs and which would crowd the
// boot report out of EC2's 64 KiB console window.
const MaxUserDataErrors = 32

// refusedKey returns why key may not come from user-data, or "".
func refusedKey(key string) string {
	switch {
	case strings.HasPrefix(key, "net."):
		return "acts before the network that brought the user-data up; set it in init.conf or on the kernel command line"
	case strings.HasPrefix(key, "nic."):
		return "the NIC steps ran before the network; re-tuning the live link would reset its queues; set it in init.conf or on the kernel command line"
	case key == "workload.cpus":
		return "the NIC's queue interrupts and XPS were mapped to the CPU list before the network; set it in init.conf or on the kernel command line"
	case key == "imds":
		return "user-data was already read through the metadata service"
	case strings.HasPrefix(key, "bond.") || strings.HasPrefix(key, "vlan."):
		return "the bond and the VLAN carry the network that brought the user-data; set it in init.conf or on the kernel command line"
	}
	return ""
}

// foreign says whose format data is in, or "" for hotpath's.
func foreign(data []byte) string {
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return "gzip-compressed user-data (cloud-init)"
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	first = bytes.TrimSpace(first)
	lower := strings.ToLower(string(first))
	switch {
	case bytes.HasPrefix(first, []byte("#!")):
		return "a script (#!) for cloud-init or similar"
	case strings.HasPrefix(lower, "#cloud-"), strings.HasPrefix(lower, "#include"),
		strings.HasPrefix(lower, "#part-handler"), strings.HasPrefix(lower, "#upstart-job"):
		return fmt.Sprintf("cloud-init data (%s)", first)
	case strings.HasPrefix(lower, "content-type:"), strings.HasPrefix(lower, "mime-version:"):
		return "a MIME multi-part document (cloud-init)"
	}
	return ""
}

// binary says why data is not text, or "".
func binary(data []byte) string {
	if !utf8.Valid(data) {
		return "not UTF-8 text"
	}
	for i, b := range data {
		if b < 0x20 && b != '\n' && b != '\r' && b != '\t' || b == 0x7f {
			return fmt.Sprintf("control byte %#02x at offset %d", b, i)
		}
	}
	return ""
}

// ApplyUserData layers user-data (nil: the instance has none) on top of c.
// It returns the configuration to boot with (c itself unless the data was
// applied) and what happened, for the console and the boot report.
func ApplyUserData(c Config, data []byte) (Config, report.UserData) {
	res := report.UserData{Status: report.UserDataNone, Bytes: len(data)}
	if data == nil {
		return c, res
	}
	sum := sha256.Sum256(data)
	res.SHA256 = hex.EncodeToString(sum[:])
	reject := func(note string, errs ...string) (Config, report.UserData) {
		res.Status, res.Note, res.Errors = report.UserDataRejected, note, errs
		return c, res
	}
	if len(data) > MaxUserData {
		return reject(fmt.Sprintf("%d bytes, more than the %d accepted", len(data), MaxUserData))
	}
	if f := foreign(data); f != "" {
		res.Status, res.Note = report.UserDataForeign, f+": not hotpath configuration, ignored"
		return c, res
	}
	if b := binary(data); b != "" {
		return reject("binary data: " + b)
	}
	next := c
	// The maps and slices are shared with c: copy what Set replaces in
	// place, so that a rejection leaves c untouched.
	next.Sysctls = make(map[string]string, len(c.Sysctls))
	for k, v := range c.Sysctls {
		next.Sysctls[k] = v
	}
	var errs []string
	refused := map[string]string{}
	applied := map[string]bool{}
	err := settingLines(data, func(n int, line string) {
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok {
			// Not the line itself: it may be a secret missing its key.
			errs = append(errs, fmt.Sprintf("line %d is not key=value (%d bytes)", n, len(line)))
			return
		}
		// Check the value on a scratch copy first: a refused key with a
		// bad value is still bad user-data.
		scratch := next
		scratch.Sysctls = map[string]string{}
		if err := scratch.Set(k, v); err != nil {
			if u := Unknown(err); u != nil {
				errs = append(errs, fmt.Sprintf("line %d: unknown key %s", n, k))
			} else {
				errs = append(errs, fmt.Sprintf("line %d: %v", n, err))
			}
			return
		}
		if why := refusedKey(k); why != "" {
			refused[k] = why
			return
		}
		next.Set(k, v)
		applied[k] = true
	})
	if err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) == 0 {
		if err := next.Validate(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		note := fmt.Sprintf("%d problem(s); the baked configuration is used", len(errs))
		if len(errs) > MaxUserDataErrors {
			errs = append(errs[:MaxUserDataErrors:MaxUserDataErrors],
				fmt.Sprintf("and %d more problem(s)", len(errs)-MaxUserDataErrors))
		}
		return reject(note, errs...)
	}
	res.Status = report.UserDataApplied
	for k := range applied {
		res.Applied = append(res.Applied, k)
	}
	sort.Strings(res.Applied)
	if len(refused) > 0 {
		res.Refused = refused
	}
	return next, res
}

// Sources returns, for every key of the configuration the file text and
// the kernel command line produce, where its value came from: FromDefault,
// FromFile or FromCmdline (a later layer wins, a line whose value was
// refused does not count). It re-reads both layers the way Parse and
// ApplyCmdline do; the init calls it once at boot for the report.
func Sources(file []byte, cmdline string) map[string]string {
	src := map[string]string{}
	var scratch Config
	scratch.Sysctls = map[string]string{}
	settingLines(file, func(_ int, line string) {
		if k, v, ok := strings.Cut(line, "="); ok && scratch.Set(k, v) == nil {
			src[strings.TrimSpace(k)] = report.FromFile
		}
	})
	for _, w := range SplitCmdline(cmdline) {
		if rest, ok := strings.CutPrefix(w, CmdlinePrefix); ok {
			if k, v, ok := strings.Cut(rest, "="); ok && scratch.Set(k, v) == nil {
				src[strings.TrimSpace(k)] = report.FromCmdline
			}
		}
	}
	return src
}

// SourceMap completes layers (from Sources, plus FromUserData for the keys
// user-data set) to every key of c's effective configuration.
func (c *Config) SourceMap(layers map[string]string, userData []string) map[string]string {
	m := c.Map()
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = report.FromDefault
		if s, ok := layers[k]; ok {
			out[k] = s
		}
	}
	for _, k := range userData {
		out[k] = report.FromUserData
	}
	return out
}

// settingLines calls fn for every line of init.conf-format text that is
// neither blank nor a comment, with its 1-based number, trimmed.
func settingLines(text []byte, fn func(n int, line string)) error {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		if line := strings.TrimSpace(sc.Text()); line != "" && line[0] != '#' {
			fn(n, line)
		}
	}
	return sc.Err()
}
