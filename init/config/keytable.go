package config

import (
	"fmt"
	"strings"
)

//go:generate go run ./internal/gendoc

// sysctlRow documents the open-ended sysctl.<name> keys, which have no
// row in Keys; KeyTable shows it after the last fixed sysctl key.
var sysctlRow = Key{Name: "sysctl.<dotted.name>", Doc: "any other sysctl, e.g. sysctl.net.core.somaxconn=65535; " +
	"overrides the built-in value of that sysctl"}

// Widths of the key table: the name column, and the text of a line.
const (
	tableNameWidth = 26
	tableWidth     = 100
)

// KeyTable is the key table of the package documentation, one row per
// key in the order of Keys: the name, the default in brackets, the doc,
// wrapped. doc.go is generated from it (go generate), and a test fails
// when the committed doc.go holds another table.
func KeyTable() string {
	var b strings.Builder
	rows := make([]Key, 0, len(Keys)+1)
	lastSysctl := -1
	for i, k := range Keys {
		if strings.HasPrefix(k.Name, sysctlPrefix) {
			lastSysctl = i
		}
	}
	for i, k := range Keys {
		rows = append(rows, k)
		if i == lastSysctl {
			rows = append(rows, sysctlRow)
		}
	}
	indent := strings.Repeat(" ", tableNameWidth+4)
	for _, k := range rows {
		line := fmt.Sprintf("%-*s [%s]", tableNameWidth, k.Name, k.Default)
		for _, w := range strings.Fields(k.Doc) {
			if len(line)+1+len(w) > tableWidth && strings.TrimSpace(line) != "" {
				b.WriteString(line + "\n")
				line = indent + w
				continue
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
