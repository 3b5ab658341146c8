package fakeaws

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MixedInstancesPolicy is the part of an Auto Scaling group's mixed
// instances policy the fake keeps: the launch template's overrides, each
// naming an instance type, or instance requirements (attribute-based
// instance type selection, which names no type), and optionally a launch
// template of its own. The group's launch template stays Group.TemplateID
// and Group.Version; in DescribeAutoScalingGroups it moves from the
// group's LaunchTemplate into MixedInstancesPolicy.LaunchTemplate.
// LaunchTemplateSpecification, as the real API reports such a group.
type MixedInstancesPolicy struct {
	Overrides []Override
}

// Override is one MixedInstancesPolicy.LaunchTemplate.Overrides member.
type Override struct {
	InstanceType string
	// TemplateID, when set, is the override's own launch template
	// (its LaunchTemplateSpecification): instances of this type launch
	// that template, not the group's.
	TemplateID string
	// Requirements, when set, replaces InstanceType.
	Requirements *InstanceRequirements
}

// InstanceRequirements are the attributes of an attribute-based override
// the fake reports: VCpuCount and MemoryMiB (required by the API) and
// BareMetal ("included", "excluded" or "required"; "" leaves it out, which
// AWS takes as "excluded").
type InstanceRequirements struct {
	VCPUMin, MemoryMiBMin int
	BareMetal             string
}

// SetMixedInstancesPolicy gives a group a mixed instances policy, as if it
// had been created with one (AddGroup creates a group with a plain launch
// template).
func (s *Server) SetMixedInstancesPolicy(region, name string, p MixedInstancesPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Overrides = slices.Clone(p.Overrides)
	s.groups[region+"/"+name].Mixed = &p
}

// describeAutoScalingGroups answers DescribeAutoScalingGroups as in the
// Amazon EC2 Auto Scaling API Reference (AutoScalingGroup: a group
// launched from a launch template reports LaunchTemplate; a group with a
// mixed instances policy reports MixedInstancesPolicy instead, whose
// LaunchTemplate holds the LaunchTemplateSpecification and Overrides.member.N,
// each a LaunchTemplateOverrides: InstanceType or InstanceRequirements,
// WeightedCapacity, and an optional LaunchTemplateSpecification of its
// own). Names that match no group are left out, not an error, as AWS does;
// more than 50 names (or MaxRecords, when larger) are refused, as the
// reference's AutoScalingGroupNames says. Filters and paging are not
// served: every match fits in one page.
func (s *Server) describeAutoScalingGroups(p map[string]string, region string) (string, *Fault) {
	names := list(p, "AutoScalingGroupNames.member", "")
	limit, _ := strconv.Atoi(p["MaxRecords"])
	if len(names) > max(50, limit) {
		return "", asInvalid("fakeaws: %d AutoScalingGroupNames, at most 50 (or MaxRecords)", len(names))
	}
	var b strings.Builder
	b.WriteString("<AutoScalingGroups>")
	for _, key := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[key]
		if g.Region != region || len(names) > 0 && !slices.Contains(names, g.Name) {
			continue
		}
		b.WriteString("<member>" + s.groupXML(g) + "</member>")
	}
	b.WriteString("</AutoScalingGroups>")
	return b.String(), nil
}

func (s *Server) groupXML(g *Group) string {
	lt := s.templateSpecXML(g.TemplateID, g.Version)
	var conf string
	if g.Mixed == nil {
		conf = "<LaunchTemplate>" + lt + "</LaunchTemplate>"
	} else {
		conf = "<MixedInstancesPolicy><LaunchTemplate><LaunchTemplateSpecification>" + lt + "</LaunchTemplateSpecification><Overrides>"
		for _, o := range g.Mixed.Overrides {
			conf += "<member>" + optional("InstanceType", o.InstanceType) + requirementsXML(o.Requirements)
			if o.TemplateID != "" {
				conf += "<LaunchTemplateSpecification>" + s.templateSpecXML(o.TemplateID, "$Default") + "</LaunchTemplateSpecification>"
			}
			conf += "</member>"
		}
		conf += "</Overrides></LaunchTemplate><InstancesDistribution><OnDemandAllocationStrategy>prioritized</OnDemandAllocationStrategy>" +
			"<OnDemandBaseCapacity>0</OnDemandBaseCapacity><OnDemandPercentageAboveBaseCapacity>100</OnDemandPercentageAboveBaseCapacity>" +
			"</InstancesDistribution></MixedInstancesPolicy>"
	}
	return fmt.Sprintf("<AutoScalingGroupName>%s</AutoScalingGroupName>"+
		"<AutoScalingGroupARN>arn:aws:autoscaling:%s:123456789012:autoScalingGroup:00000000-0000-4000-8000-000000000000:autoScalingGroupName/%s</AutoScalingGroupARN>"+
		"%s<MinSize>0</MinSize><MaxSize>%d</MaxSize><DesiredCapacity>%d</DesiredCapacity><DefaultCooldown>300</DefaultCooldown>"+
		"<HealthCheckType>ELB</HealthCheckType><CreatedTime>2026-01-01T00:00:00.000Z</CreatedTime>",
		esc(g.Name), g.Region, esc(g.Name), conf, 2*g.Instances, g.Instances)
}

// templateSpecXML is a LaunchTemplateSpecification's inner XML.
func (s *Server) templateSpecXML(id, version string) string {
	name := ""
	if lt, ok := s.templates[id]; ok {
		name = lt.Name
	}
	return "<LaunchTemplateId>" + esc(id) + "</LaunchTemplateId>" + optional("LaunchTemplateName", name) + optional("Version", version)
}

func requirementsXML(r *InstanceRequirements) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("<InstanceRequirements><VCpuCount><Min>%d</Min></VCpuCount><MemoryMiB><Min>%d</Min></MemoryMiB>%s</InstanceRequirements>",
		r.VCPUMin, r.MemoryMiBMin, optional("BareMetal", r.BareMetal))
}
