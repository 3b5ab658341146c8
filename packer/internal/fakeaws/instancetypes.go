package fakeaws

import (
	"sort"
	"strings"
)

// InstanceTypeBootModes are the boot modes of the instance types the tests
// use, as EC2's DescribeInstanceTypes reports them (SupportedBootModes).
// AWS's boot-mode documentation: virtualized x86 Nitro types boot both;
// every x86 bare-metal size (and DL1, G4ad, P4, u-*, VT1) boots legacy
// BIOS only; Graviton boots UEFI only.
var InstanceTypeBootModes = map[string][]string{
	"c5n.xlarge":     {"legacy-bios", "uefi"},
	"c5n.18xlarge":   {"legacy-bios", "uefi"},
	"c6in.xlarge":    {"legacy-bios", "uefi"},
	"c7i.xlarge":     {"legacy-bios", "uefi"},
	"c5n.metal":      {"legacy-bios"},
	"c6in.metal":     {"legacy-bios"},
	"c7i.metal-24xl": {"legacy-bios"},
	"c7i.metal-48xl": {"legacy-bios"},
	"p4d.24xlarge":   {"legacy-bios"},
	"c6gn.xlarge":    {"uefi"},
	"c7gn.xlarge":    {"uefi"},
	"c7gn.metal":     {"uefi"},
}

// SetImageBootMode sets an AMI's boot mode, as if it had been registered
// with it (AddImage registers none).
func (s *Server) SetImageBootMode(id, mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images[id].BootMode = mode
}

func (s *Server) describeInstanceTypes(p map[string]string, region string) (string, *Fault) {
	types := list(p, "InstanceType", "")
	if len(types) == 0 {
		for t := range InstanceTypeBootModes {
			types = append(types, t)
		}
		sort.Strings(types)
	}
	var b strings.Builder
	b.WriteString("<instanceTypeSet>")
	for _, t := range types {
		modes, ok := InstanceTypeBootModes[t]
		if !ok {
			return "", &Fault{Status: 400, Code: "InvalidInstanceType", Message: "The following supplied instance types do not exist: [" + t + "]"}
		}
		b.WriteString("<item><instanceType>" + esc(t) + "</instanceType><supportedBootModes>")
		for _, m := range modes {
			b.WriteString("<item>" + m + "</item>")
		}
		b.WriteString("</supportedBootModes></item>")
	}
	b.WriteString("</instanceTypeSet>")
	return b.String(), nil
}

// SetInstanceType makes version (1-based) of a launch template launch
// instanceType, as if the template had been created with it.
func (s *Server) SetInstanceType(templateID string, version int, instanceType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := s.templates[templateID]
	for len(lt.InstanceTypes) < len(lt.Images) {
		lt.InstanceTypes = append(lt.InstanceTypes, "")
	}
	lt.InstanceTypes[version-1] = instanceType
}

// instanceType is version n's instance type ("" when it names none).
func (lt *LaunchTemplate) instanceType(n int) string {
	if n-1 < len(lt.InstanceTypes) {
		return lt.InstanceTypes[n-1]
	}
	return ""
}
