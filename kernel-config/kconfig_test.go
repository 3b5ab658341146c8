package kernelconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEvalExpr(t *testing.T) {
	cfg, _ := ParseConfig(strings.NewReader(`CONFIG_Y=y
CONFIG_M=m
# CONFIG_N is not set
CONFIG_S="reno"
CONFIG_I=64
`))
	tests := []struct {
		expr string
		want byte
	}{
		{"Y", 'y'}, {"M", 'm'}, {"N", 'n'}, {"ABSENT", 'n'},
		{"!N", 'y'}, {"!Y", 'n'}, {"!M", 'm'},
		{"Y && M", 'm'}, {"Y && N", 'n'}, {"N || M", 'm'}, {"N || Y", 'y'},
		{"(N || Y) && !ABSENT", 'y'}, {"Y && (N || ABSENT)", 'n'},
		{`S = "reno"`, 'y'}, {`S != "reno"`, 'n'}, {`S = "cubic"`, 'n'},
		{"I >= 32", 'y'}, {"I < 32", 'n'}, {"Y = y", 'y'}, {"N = y", 'n'},
		{"$(cc-option,-mabi=ms) || X86_32", 'y'},
		{"PCI_MSI && !CPU_BIG_ENDIAN", 'n'},
	}
	for _, tc := range tests {
		if got := evalExpr(tc.expr, cfg); got != tc.want {
			t.Errorf("%s = %c, want %c", tc.expr, got, tc.want)
		}
	}
	if got := unmetSymbols("PCI_MSI && !Y && (N || S = \"x\")", cfg); !reflect.DeepEqual(got, []string{"PCI_MSI is not set", "Y is set", "N is not set"}) {
		t.Errorf("unmet = %q", got)
	}
}

// A fake tree: Explain must find the conditions that keep an option off,
// including an enclosing "if", and skip other architectures.
func TestExplain(t *testing.T) {
	tree := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(tree, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("drivers/net/ethernet/amazon/Kconfig", `
config NET_VENDOR_AMAZON
	bool "Amazon Devices"
	default y

if NET_VENDOR_AMAZON

config ENA_ETHERNET
	tristate "Elastic Network Adapter (ENA) support"
	depends on PCI_MSI && !CPU_BIG_ENDIAN # a comment
	select DIMLIB

endif # NET_VENDOR_AMAZON
`)
	write("drivers/tty/Kconfig", `
config VT
	bool "Virtual terminal" if EXPERT
	default y

config FANCY_CONSOLE
	bool "fancy"
	select VT if X86
`)
	write("arch/arm64/Kconfig", `
config EFI_STUB
	bool
	depends on ARM64_ONLY
`)
	write("arch/x86/Kconfig", `
config EFI_STUB
	bool "EFI stub support"
	depends on EFI && !X86_USE_3DNOW
`)
	cfg, _ := ParseConfig(strings.NewReader("# CONFIG_NET_VENDOR_AMAZON is not set\nCONFIG_EFI=y\nCONFIG_FANCY_CONSOLE=y\n"))
	vs := []Violation{
		{Requirement: Requirement{Symbol: "ENA_ETHERNET", Value: "y"}, Kind: Missing},
		{Requirement: Requirement{Symbol: "VT", Value: NotSet}, Kind: Forbidden, Got: "y"},
		{Requirement: Requirement{Symbol: "NO_SUCH_OPTION", Value: "y"}, Kind: Missing},
		{Requirement: Requirement{Symbol: "EFI_STUB", Value: "y"}, Kind: Missing},
	}
	if err := Explain(tree, "x86_64", cfg, vs); err != nil {
		t.Fatal(err)
	}
	ena := vs[0].Error()
	for _, want := range []string{"inside if NET_VENDOR_AMAZON", "NET_VENDOR_AMAZON is not set",
		"depends on PCI_MSI && !CPU_BIG_ENDIAN", "PCI_MSI is not set", "drivers/net/ethernet/amazon/Kconfig:"} {
		if !strings.Contains(ena, want) {
			t.Errorf("ENA explanation %q lacks %q", ena, want)
		}
	}
	vt := vs[1].Error()
	for _, want := range []string{"prompt if EXPERT", "EXPERT is not set", "selected by FANCY_CONSOLE", "FANCY_CONSOLE is set"} {
		if !strings.Contains(vt, want) {
			t.Errorf("VT explanation %q lacks %q", vt, want)
		}
	}
	if !vs[2].Undefined || !strings.Contains(vs[2].Error(), "no Kconfig file") {
		t.Errorf("undefined option not reported: %s", vs[2].Error())
	}
	if len(vs[3].Deps) != 0 {
		t.Errorf("EFI_STUB deps are met on x86 (arm64 file must be skipped): %s", vs[3].Error())
	}
}
