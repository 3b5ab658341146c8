// Package power turns the ACPI power button into an orderly shutdown.
//
// The kernel's ACPI button driver reports the button (EC2 stop/terminate,
// QEMU system_powerdown) as KEY_POWER on an evdev input device; there is
// no acpid here, so the init reads /dev/input/event* itself. The devices are
// chosen by their key capability bitmap in sysfs
// (/sys/class/input/eventN/device/capabilities/key), which lists the keys a
// device can report.
package power

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Linux input constants (include/uapi/linux/input-event-codes.h).
const (
	evKey    = 0x01
	KeyPower = 116
)

// inputEventSize is sizeof(struct input_event) on 64-bit Linux: a
// struct timeval (two 64-bit words), __u16 type, __u16 code, __s32 value.
const inputEventSize = 24

// HasKey reports whether a capabilities/key bitmap (hex words, most
// significant first, each one unsigned long = 64 bits here) has key set.
func HasKey(bitmap string, key int) (bool, error) {
	words := strings.Fields(bitmap)
	for i := len(words) - 1; i >= 0; i-- {
		w, err := strconv.ParseUint(words[i], 16, 64)
		if err != nil {
			return false, fmt.Errorf("key bitmap %q: %w", bitmap, err)
		}
		base := 64 * (len(words) - 1 - i)
		if key >= base && key < base+64 {
			return w&(1<<(key-base)) != 0, nil
		}
	}
	return false, nil
}

// Device is an input device with KEY_POWER.
type Device struct {
	Name string // "event0"
	Path string // devRoot/input/event0
	Desc string // device/name, e.g. "Power Button"
}

// Find lists the evdev devices under sysRoot/class/input that can report
// KEY_POWER, with their nodes under devRoot/input.
func Find(sysRoot, devRoot string) ([]Device, error) {
	ents, err := os.ReadDir(filepath.Join(sysRoot, "class/input"))
	if err != nil {
		return nil, fmt.Errorf("power: %w", err)
	}
	var out []Device
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "event") {
			continue
		}
		dir := filepath.Join(sysRoot, "class/input", e.Name(), "device")
		b, err := os.ReadFile(filepath.Join(dir, "capabilities/key"))
		if err != nil {
			continue
		}
		ok, err := HasKey(string(b), KeyPower)
		if err != nil || !ok {
			continue
		}
		name, _ := os.ReadFile(filepath.Join(dir, "name"))
		out = append(out, Device{Name: e.Name(), Path: filepath.Join(devRoot, "input", e.Name()),
			Desc: strings.TrimSpace(string(name))})
	}
	return out, nil
}

// WaitPress reads input events from r until a KEY_POWER press (value 1)
// and returns nil, or returns the read error.
func WaitPress(r io.Reader) error {
	buf := make([]byte, inputEventSize)
	for {
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		typ := binary.LittleEndian.Uint16(buf[16:])
		code := binary.LittleEndian.Uint16(buf[18:])
		value := int32(binary.LittleEndian.Uint32(buf[20:]))
		if typ == evKey && code == KeyPower && value == 1 {
			return nil
		}
	}
}

// Encode returns one input_event (for tests and documentation).
func Encode(typ, code uint16, value int32) []byte {
	b := make([]byte, inputEventSize)
	binary.LittleEndian.PutUint16(b[16:], typ)
	binary.LittleEndian.PutUint16(b[18:], code)
	binary.LittleEndian.PutUint32(b[20:], uint32(value))
	return b
}

// Watch opens every device and calls pressed once, on the first KEY_POWER
// press on any of them. It returns the devices it listens on.
func Watch(ctx context.Context, devs []Device, pressed func(Device), logf func(string, ...any)) []Device {
	var watching []Device
	for _, d := range devs {
		f, err := os.Open(d.Path)
		if err != nil {
			logf("power button %s: %v", d.Path, err)
			continue
		}
		watching = append(watching, d)
		go func() {
			defer f.Close()
			go func() { <-ctx.Done(); f.Close() }()
			if err := WaitPress(f); err != nil {
				if ctx.Err() == nil {
					logf("power button %s: %v", d.Path, err)
				}
				return
			}
			pressed(d)
		}()
	}
	return watching
}
