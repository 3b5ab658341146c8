// Package sysfsattr reads and writes the one-value attribute files of
// sysfs (and procfs) the init's steps tune, such as a NIC queue's
// byte_queue_limits/limit_min or napi_defer_hard_irqs.
package sysfsattr

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// WriteExisting writes v to an attribute that must already exist: sysfs
// files are never created by a write, and a path that does not exist is
// an error rather than a new file (on a test's fake tree too).
func WriteExisting(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadInt reads an attribute holding one decimal integer.
func ReadInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}
