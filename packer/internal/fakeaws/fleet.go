package fakeaws

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// LaunchTemplate is an EC2 launch template as the fake stores it.
type LaunchTemplate struct {
	ID, Name, Region string
	// Default is the default version's number.
	Default int
	// Images holds each version's AMI; version n is Images[n-1].
	Images       []string
	Descriptions []string
	// InstanceTypes holds each version's instance type ("" or missing:
	// none); see SetInstanceType.
	InstanceTypes []string
	// Options holds each version's IPv6 launch options as given (version
	// n is Options[n-1]): what the rollout asked EC2 for.
	Options []VersionOptions
}

// VersionOptions are the IPv6-related launch template data of a version:
// the metadata options (HttpProtocolIpv6 "enabled" turns on the IMDS
// IPv6 endpoint) and the primary interface's IPv6 address count.
type VersionOptions struct {
	HTTPEndpoint, HTTPTokens, HTTPProtocolIPv6 string
	IPv6AddressCount                           int
	// Interface is set when the version was given a network interface
	// at all (an IPv6 address count of 0 included): EC2 then replaces
	// the source version's interfaces with it.
	Interface bool
}

// Group is an Auto Scaling group: its instances run one launch template
// version until an instance refresh replaces them.
type Group struct {
	Name, Region string
	TemplateID   string
	// Version is what the group's configuration names: "$Default",
	// "$Latest" or a number.
	Version string
	// Running is the AMI the instances were launched with: "$Default"
	// is resolved at launch, not when a refresh compares.
	Running   string
	Instances int
	Refreshes []Refresh
	// Updated counts the instances running the refresh's desired
	// configuration (a failed refresh leaves the group mixed).
	Updated int
	// Mixed, when set, is the group's mixed instances policy (mixed.go).
	Mixed *MixedInstancesPolicy
	// failAt and failReason arm a failure for the next refresh.
	failAt     int
	failReason string
}

// Refresh is one instance refresh.
type Refresh struct {
	ID, Status, StatusReason      string
	Percentage, InstancesToUpdate int
	TemplateID, Version           string
	MinHealthy, MaxHealthy        int
	Warmup, CheckDelay            int
	Checkpoints                   []int
	SkipMatching, AutoRollback    bool
	// Alarms are the CloudWatch alarms the refresh watches (alarms.go).
	Alarms []string
	// Given lists the preferences the request carried (their names, as
	// InstanceWarmup, sorted): a preference left out takes Auto Scaling's
	// default (the group's grace period for InstanceWarmup), which the
	// zero above cannot tell from a 0 given.
	Given []string
	// failAt, when > 0, is the percentage at which replacements stop
	// passing health checks.
	failAt     int
	failReason string
	waited     map[int]bool // checkpoints already paused at
	// prevTemplate and prevVer are the group's configuration when the
	// refresh started: what a rollback goes back to.
	prevTemplate, prevVer string
	// desired is set when the request gave a desired configuration.
	desired bool
}

// AddLaunchTemplate creates a launch template whose version 1 (the
// default) launches image, and returns its id.
func (s *Server) AddLaunchTemplate(region, name, image string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := &LaunchTemplate{ID: s.nextID("lt"), Name: name, Region: region, Default: 1, Images: []string{image}, Descriptions: []string{""},
		Options: []VersionOptions{{}}}
	s.templates[lt.ID] = lt
	return lt.ID
}

// AddImage registers an available AMI directly, as if built earlier, and
// returns its id.
func (s *Server) AddImage(region, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := &Snapshot{ID: s.nextID("snap"), Region: region, OwnerID: "123456789012", VolumeSize: 1, State: "completed", Completed: true, Tags: map[string]string{}}
	s.snapshots[sn.ID] = sn
	im := &Image{ID: s.nextID("ami"), Region: region, Name: name, Architecture: "x86_64", Virtualization: "hvm",
		RootDevice: "/dev/xvda", SnapshotID: sn.ID, VolumeType: "gp3", VolumeSize: 1, State: "available", Tags: map[string]string{}}
	s.images[im.ID] = im
	return im.ID
}

// AddGroup creates an Auto Scaling group of n instances launched from
// the template's version (e.g. "1" or "$Default").
func (s *Server) AddGroup(region, name, templateID, version string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := s.templates[templateID]
	v, _ := lt.resolve(version)
	s.groups[region+"/"+name] = &Group{Name: name, Region: region, TemplateID: templateID, Version: version, Running: s.imageOf(lt, v), Instances: n}
}

// ssmAlias is how a launch template's ImageId names a Systems Manager
// parameter instead of an AMI (EC2 User Guide, "Use a Systems Manager
// parameter instead of an AMI ID"): resolve:ssm:<name>[:<version>], which
// EC2 resolves at each launch.
const ssmAlias = "resolve:ssm:"

// imageOf is the AMI version v of the launch template launches now: its
// ImageId, or the current value of the parameter an ssm alias names ("" when
// the parameter does not exist).
func (s *Server) imageOf(lt *LaunchTemplate, v int) string {
	img := lt.Images[v-1]
	name, ok := strings.CutPrefix(img, ssmAlias)
	if !ok {
		return img
	}
	if i := strings.LastIndex(name, ":"); i > 0 {
		name = name[:i] // a :<version> or :<label> suffix; the fake keeps no history by label
	}
	if pm, ok := s.parameters[lt.Region+"/"+name]; ok {
		return pm.Value
	}
	return ""
}

// FailRefresh makes the next instance refresh of the group fail once it
// has replaced atPercent of the instances, with reason.
func (s *Server) FailRefresh(region, name string, atPercent int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[region+"/"+name]
	g.failAt, g.failReason = max(atPercent, 1), reason
}

// LaunchTemplates returns copies of the launch templates, by id.
func (s *Server) LaunchTemplates() map[string]LaunchTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]LaunchTemplate{}
	for id, lt := range s.templates {
		c := *lt
		c.Images = append([]string(nil), lt.Images...)
		c.InstanceTypes = append([]string(nil), lt.InstanceTypes...)
		out[id] = c
	}
	return out
}

// GroupState returns a copy of a group.
func (s *Server) GroupState(region, name string) Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := *s.groups[region+"/"+name]
	g.Refreshes = append([]Refresh(nil), g.Refreshes...)
	return g
}

func (s *Server) template(p map[string]string, region string) (*LaunchTemplate, *Fault) {
	id, name := p["LaunchTemplateId"], p["LaunchTemplateName"]
	if (id == "") == (name == "") {
		return nil, &Fault{Status: 400, Code: "MissingParameter", Message: "exactly one of LaunchTemplateId and LaunchTemplateName is required"}
	}
	for _, lt := range s.templates {
		if lt.Region == region && (lt.ID == id || lt.Name == name) {
			return lt, nil
		}
	}
	if id != "" {
		return nil, notFound("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID "+id+", does not exist.")
	}
	return nil, notFound("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name "+name+", does not exist.")
}

// resolve turns "$Default", "$Latest" or a number into a version number.
func (lt *LaunchTemplate) resolve(v string) (int, bool) {
	switch v {
	case "$Default", "":
		return lt.Default, true
	case "$Latest":
		return len(lt.Images), true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 1 && n <= len(lt.Images)
}

func (lt *LaunchTemplate) versionXML(n int) string {
	return fmt.Sprintf("<launchTemplateId>%s</launchTemplateId><launchTemplateName>%s</launchTemplateName>"+
		"<versionNumber>%d</versionNumber>%s<createTime>2026-01-01T00:00:00.000Z</createTime><createdBy>arn:aws:iam::123456789012:root</createdBy>"+
		"<defaultVersion>%t</defaultVersion><launchTemplateData><imageId>%s</imageId>%s</launchTemplateData>",
		lt.ID, esc(lt.Name), n, optional("versionDescription", lt.Descriptions[n-1]), n == lt.Default, lt.Images[n-1],
		optional("instanceType", lt.instanceType(n)))
}

// versionNotFound is EC2's answer for a launch template version that
// does not exist.
func versionNotFound(v string) *Fault {
	return &Fault{Status: 400, Code: "InvalidLaunchTemplateId.VersionNotFound", Message: "Could not find launch template version " + v}
}

func (s *Server) createLaunchTemplateVersion(p map[string]string, region string) (string, *Fault) {
	lt, f := s.template(p, region)
	if f != nil {
		return "", f
	}
	src, ok := lt.resolve(p["SourceVersion"])
	if p["SourceVersion"] == "" {
		// Without a source the version has only what is given.
		src, ok = 0, true
	}
	if !ok {
		return "", versionNotFound(p["SourceVersion"])
	}
	img := p["LaunchTemplateData.ImageId"]
	if img == "" && src > 0 {
		img = lt.Images[src-1]
	}
	if name, ok := strings.CutPrefix(img, ssmAlias); ok {
		if _, ok := s.parameters[region+"/"+name]; !ok {
			return "", badParam("The SSM parameter %s in the ImageId does not exist", name)
		}
	} else if im, ok := s.images[img]; !ok || im.Region != region || im.State != "available" {
		return "", notFound("InvalidAMIID.NotFound", "The image id '["+img+"]' does not exist or is not available in "+region)
	}
	if len(p["VersionDescription"]) > 255 {
		return "", badParam("VersionDescription longer than 255 characters")
	}
	itype := p["LaunchTemplateData.InstanceType"]
	if itype == "" && src > 0 {
		itype = lt.instanceType(src)
	}
	for len(lt.InstanceTypes) < len(lt.Images) {
		lt.InstanceTypes = append(lt.InstanceTypes, "")
	}
	opts, f := versionOptions(p)
	if f != nil {
		return "", f
	}
	lt.Images = append(lt.Images, img)
	lt.InstanceTypes = append(lt.InstanceTypes, itype)
	lt.Descriptions = append(lt.Descriptions, p["VersionDescription"])
	lt.Options = append(lt.Options, opts)
	s.created(fmt.Sprintf("%s:%d", lt.ID, len(lt.Images)))
	return "<launchTemplateVersion>" + lt.versionXML(len(lt.Images)) + "</launchTemplateVersion>", nil
}

func (s *Server) modifyLaunchTemplate(p map[string]string, region string) (string, *Fault) {
	lt, f := s.template(p, region)
	if f != nil {
		return "", f
	}
	if v := p["SetDefaultVersion"]; v != "" {
		n, ok := lt.resolve(v)
		if !ok || strings.HasPrefix(v, "$") && v != "$Latest" || !strings.HasPrefix(v, "$") && s.unseen(fmt.Sprintf("%s:%d", lt.ID, n)) {
			return "", versionNotFound(v)
		}
		lt.Default = n
	}
	return fmt.Sprintf("<launchTemplate><launchTemplateId>%s</launchTemplateId><launchTemplateName>%s</launchTemplateName>"+
		"<defaultVersionNumber>%d</defaultVersionNumber><latestVersionNumber>%d</latestVersionNumber></launchTemplate>",
		lt.ID, esc(lt.Name), lt.Default, len(lt.Images)), nil
}

func (s *Server) describeLaunchTemplateVersions(p map[string]string, region string) (string, *Fault) {
	lt, f := s.template(p, region)
	if f != nil {
		return "", f
	}
	vs := list(p, "LaunchTemplateVersion", "")
	var b strings.Builder
	b.WriteString("<launchTemplateVersionSet>")
	if len(vs) == 0 {
		for n := range lt.Images {
			b.WriteString("<item>" + lt.versionXML(n+1) + "</item>")
		}
	}
	for _, v := range vs {
		n, ok := lt.resolve(v)
		if !ok || !strings.HasPrefix(v, "$") && s.unseen(fmt.Sprintf("%s:%d", lt.ID, n)) {
			return "", versionNotFound(v)
		}
		b.WriteString("<item>" + lt.versionXML(n) + "</item>")
	}
	b.WriteString("</launchTemplateVersionSet>")
	return b.String(), nil
}

const asNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

// serveAutoScaling answers the Auto Scaling Query API (awsquery: form
// in, XML out, errors in an ErrorResponse document).
func (s *Server) serveAutoScaling(w http.ResponseWriter, r *http.Request, region string) {
	p, err := queryParams(r)
	if err != nil {
		http.Error(w, "fakeaws: Auto Scaling requests are form POSTs: "+err.Error(), http.StatusBadRequest)
		return
	}
	op := p["Action"]
	check := func() *Fault { return checkAction(p, "2011-01-01", autoscalingActions, "ValidationError") }
	answer(s, w, r, region, op, check, func() (string, *Fault) { return autoscalingActions[op].serve(s, p, region) },
		func(w http.ResponseWriter, body string, f *Fault) {
			w.Header().Set("Content-Type", "text/xml")
			if f != nil {
				queryError(w, asNS, *f)
				return
			}
			fmt.Fprintf(w, `<%sResponse xmlns="%s"><%sResult>%s</%sResult><ResponseMetadata><RequestId>fake-request</RequestId></ResponseMetadata></%sResponse>`,
				op, asNS, op, body, op, op)
		})
}

// queryError writes an awsquery ErrorResponse document in namespace ns.
func queryError(w http.ResponseWriter, ns string, f Fault) {
	w.WriteHeader(f.Status)
	fmt.Fprintf(w, `<ErrorResponse xmlns="%s"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fake-request</RequestId></ErrorResponse>`,
		ns, esc(f.Code), esc(f.Message))
}

func active(status string) bool {
	return oneOf(status, "Pending", "InProgress", "Cancelling", "RollbackInProgress", "Baking")
}

// autoscalingActions are the Auto Scaling actions the fake serves.
var autoscalingActions = map[string]queryAction{
	"StartInstanceRefresh": {querySpec{
		"AutoScalingGroupName": str, "Strategy": str,
		"DesiredConfiguration.LaunchTemplate.LaunchTemplateId":   str,
		"DesiredConfiguration.LaunchTemplate.LaunchTemplateName": str,
		"DesiredConfiguration.LaunchTemplate.Version":            str,
		"Preferences.MinHealthyPercentage":                       integer,
		"Preferences.MaxHealthyPercentage":                       integer,
		"Preferences.InstanceWarmup":                             integer,
		"Preferences.CheckpointPercentages.member.#":             integer,
		"Preferences.CheckpointDelay":                            integer,
		"Preferences.SkipMatching":                               boolean,
		"Preferences.AutoRollback":                               boolean,
		"Preferences.AlarmSpecification.Alarms.member.#":         str,
	}, (*Server).startInstanceRefresh},
	"DescribeInstanceRefreshes": {querySpec{"AutoScalingGroupName": str, "InstanceRefreshIds.member.#": str}, (*Server).describeInstanceRefreshes},
	"CancelInstanceRefresh":     {querySpec{"AutoScalingGroupName": str}, (*Server).cancelInstanceRefresh},
	"RollbackInstanceRefresh":   {querySpec{"AutoScalingGroupName": str}, (*Server).rollbackInstanceRefresh},
	"DescribeAutoScalingGroups": {querySpec{"AutoScalingGroupNames.member.#": str, "MaxRecords": integer, "NextToken": str}, (*Server).describeAutoScalingGroups},
}

func asInvalid(format string, args ...any) *Fault {
	return &Fault{Status: 400, Code: "ValidationError", Message: fmt.Sprintf(format, args...)}
}

// group returns the request's Auto Scaling group and its refresh in
// progress (nil when there is none).
func (s *Server) group(p map[string]string, region string) (*Group, *Refresh, *Fault) {
	g, ok := s.groups[region+"/"+p["AutoScalingGroupName"]]
	if !ok {
		return nil, nil, asInvalid("AutoScalingGroup name not found - %s", p["AutoScalingGroupName"])
	}
	var cur *Refresh
	for i := range g.Refreshes {
		if active(g.Refreshes[i].Status) {
			cur = &g.Refreshes[i]
		}
	}
	return g, cur, nil
}

func (s *Server) startInstanceRefresh(p map[string]string, region string) (string, *Fault) {
	g, cur, f := s.group(p, region)
	if f != nil {
		return "", f
	}
	if cur != nil {
		return "", &Fault{Status: 400, Code: "InstanceRefreshInProgress", Message: "An Instance Refresh is already in progress and blocks the execution of this Instance Refresh."}
	}
	if st := p["Strategy"]; st != "" && st != "Rolling" && st != "ReplaceRootVolume" {
		return "", asInvalid("Strategy %s", st)
	}
	rf := Refresh{
		Status: "Pending", StatusReason: "Waiting for the refresh to start",
		TemplateID: p["DesiredConfiguration.LaunchTemplate.LaunchTemplateId"], Version: p["DesiredConfiguration.LaunchTemplate.Version"],
		MinHealthy: 90, SkipMatching: p["Preferences.SkipMatching"] == "true", AutoRollback: p["Preferences.AutoRollback"] == "true",
		waited: map[int]bool{}, prevVer: g.Version, prevTemplate: g.TemplateID,
	}
	if f := refreshPreferences(&rf, p); f != nil {
		return "", f
	}
	if f := s.desiredConfiguration(g, &rf, p, region); f != nil {
		return "", f
	}
	if f := s.refreshAlarms(&rf, p, region); f != nil {
		return "", f
	}
	rf.InstancesToUpdate = g.Instances
	if rf.SkipMatching && s.sameImage(g, rf) {
		rf.InstancesToUpdate = 0
	}
	rf.ID = fmt.Sprintf("%08x-0000-4000-8000-%012x", s.seq+1, s.seq+1)
	s.seq++
	rf.failAt, rf.failReason, g.failAt = g.failAt, g.failReason, 0
	g.Updated = 0
	g.Refreshes = append(g.Refreshes, rf)
	s.created(rf.ID)
	return "<InstanceRefreshId>" + rf.ID + "</InstanceRefreshId>", nil
}

// refreshPreferences reads and checks a StartInstanceRefresh's
// Preferences into rf.
func refreshPreferences(rf *Refresh, p map[string]string) *Fault {
	for k := range p {
		if name, ok := strings.CutPrefix(k, "Preferences."); ok {
			name, _, _ = strings.Cut(name, ".")
			if !slices.Contains(rf.Given, name) {
				rf.Given = append(rf.Given, name)
			}
		}
	}
	slices.Sort(rf.Given)
	if v, ok := p["Preferences.MinHealthyPercentage"]; ok {
		rf.MinHealthy, _ = strconv.Atoi(v)
	}
	rf.MaxHealthy, _ = strconv.Atoi(p["Preferences.MaxHealthyPercentage"])
	if rf.MaxHealthy != 0 && (rf.MaxHealthy < 100 || rf.MaxHealthy > 200 || rf.MaxHealthy-rf.MinHealthy > 100) {
		return asInvalid("MaxHealthyPercentage must be 100..200 and at most 100 above MinHealthyPercentage")
	}
	if rf.MinHealthy == 100 && rf.MaxHealthy <= 100 {
		return asInvalid("MinHealthyPercentage 100 needs MaxHealthyPercentage above 100")
	}
	rf.Warmup, _ = strconv.Atoi(p["Preferences.InstanceWarmup"])
	rf.CheckDelay, _ = strconv.Atoi(p["Preferences.CheckpointDelay"])
	for _, c := range list(p, "Preferences.CheckpointPercentages.member", "") {
		n, _ := strconv.Atoi(c)
		if n < 1 || n > 100 || len(rf.Checkpoints) > 0 && n <= rf.Checkpoints[len(rf.Checkpoints)-1] {
			return asInvalid("CheckpointPercentages must be ascending values in 1..100")
		}
		rf.Checkpoints = append(rf.Checkpoints, n)
	}
	if len(rf.Checkpoints) > 0 && rf.Checkpoints[len(rf.Checkpoints)-1] != 100 {
		return asInvalid("the last checkpoint percentage must be 100")
	}
	if rf.MinHealthy < 0 || rf.MinHealthy > 100 || rf.Warmup < 0 || rf.CheckDelay < 0 || rf.CheckDelay > 172800 {
		return asInvalid("preferences out of range")
	}
	return nil
}

// desiredConfiguration checks the launch template a refresh moves the
// group to (the group's own when none is given).
func (s *Server) desiredConfiguration(g *Group, rf *Refresh, p map[string]string, region string) *Fault {
	if p["DesiredConfiguration.LaunchTemplate.LaunchTemplateName"] != "" {
		return asInvalid("fakeaws: name the launch template by id")
	}
	if rf.TemplateID == "" {
		rf.TemplateID, rf.Version = g.TemplateID, g.Version
	} else {
		rf.desired = true
	}
	if rf.AutoRollback {
		if why := s.irreversible(g, rf); why != "" {
			return asInvalid("AutoRollback is not supported: %s", why)
		}
	}
	lt, ok := s.templates[rf.TemplateID]
	if !ok || lt.Region != region {
		return asInvalid("launch template %s not found", rf.TemplateID)
	}
	if _, ok := lt.resolve(rf.Version); !ok {
		return asInvalid("launch template version %s not found", rf.Version)
	}
	return nil
}

// irreversible says why a refresh cannot be rolled back ("" when it can),
// in exactly the three cases the Auto Scaling API Reference lists under
// RefreshPreferences.AutoRollback and RollbackInstanceRefresh: no desired
// configuration was given; the group's launch template uses a Systems
// Manager parameter instead of an AMI ID for ImageId; the group uses the
// launch template's $Latest or $Default version. "The group's" is the
// configuration the refresh would go back to (User Guide, "Undo changes
// with a manual or auto rollback": a rollback restores the configuration
// last saved on the group, which must be a numbered version and not an
// AMI alias from Parameter Store); the desired configuration's version
// is not restricted.
func (s *Server) irreversible(g *Group, rf *Refresh) string {
	tmpl, ver := g.TemplateID, g.Version
	if rf.prevTemplate != "" {
		tmpl, ver = rf.prevTemplate, rf.prevVer
	}
	if !rf.desired {
		return "there is no desired configuration specified for the instance refresh"
	}
	if ver == "" || strings.HasPrefix(ver, "$") {
		return fmt.Sprintf("the Auto Scaling group %s uses the %s version of its launch template", g.Name, cmp.Or(ver, "$Default"))
	}
	lt, ok := s.templates[tmpl]
	if !ok {
		return ""
	}
	if n, ok := lt.resolve(ver); ok && strings.HasPrefix(lt.Images[n-1], ssmAlias) {
		return fmt.Sprintf("the Auto Scaling group %s has a launch template (%s version %d) that uses a Systems Manager parameter "+
			"instead of an AMI ID for the ImageId property (%s)", g.Name, lt.ID, n, lt.Images[n-1])
	}
	return ""
}

func (s *Server) describeInstanceRefreshes(p map[string]string, region string) (string, *Fault) {
	g, _, f := s.group(p, region)
	if f != nil {
		return "", f
	}
	ids := list(p, "InstanceRefreshIds.member", "")
	var b strings.Builder
	b.WriteString("<InstanceRefreshes>")
	for i := len(g.Refreshes) - 1; i >= 0; i-- {
		rf := &g.Refreshes[i]
		if len(ids) > 0 && (!oneOf(rf.ID, ids...) || s.unseen(rf.ID)) {
			continue
		}
		s.advance(g, rf)
		fmt.Fprintf(&b, "<member><InstanceRefreshId>%s</InstanceRefreshId><AutoScalingGroupName>%s</AutoScalingGroupName>"+
			"<Status>%s</Status>%s<StartTime>2026-01-01T00:00:00Z</StartTime><PercentageComplete>%d</PercentageComplete>"+
			"<InstancesToUpdate>%d</InstancesToUpdate><Preferences><MinHealthyPercentage>%d</MinHealthyPercentage>"+
			"<SkipMatching>%t</SkipMatching><AutoRollback>%t</AutoRollback>%s</Preferences></member>",
			rf.ID, esc(g.Name), rf.Status, optional("StatusReason", rf.StatusReason), rf.Percentage, rf.InstancesToUpdate,
			rf.MinHealthy, rf.SkipMatching, rf.AutoRollback, alarmsXML(rf.Alarms))
	}
	b.WriteString("</InstanceRefreshes>")
	return b.String(), nil
}

// stoppable returns the group's refresh that a cancel or rollback can
// still stop.
func (s *Server) stoppable(p map[string]string, region string) (*Refresh, *Fault) {
	g, cur, f := s.group(p, region)
	if f != nil {
		return nil, f
	}
	if cur == nil || cur.Status == "Cancelling" || cur.Status == "RollbackInProgress" {
		return nil, &Fault{Status: 400, Code: "ActiveInstanceRefreshNotFound", Message: "No in progress or pending Instance Refresh found for Auto Scaling group " + g.Name}
	}
	return cur, nil
}

func (s *Server) cancelInstanceRefresh(p map[string]string, region string) (string, *Fault) {
	cur, f := s.stoppable(p, region)
	if f != nil {
		return "", f
	}
	cur.Status, cur.StatusReason = "Cancelling", "Cancelling the refresh: instances already replaced stay"
	return "<InstanceRefreshId>" + cur.ID + "</InstanceRefreshId>", nil
}

func (s *Server) rollbackInstanceRefresh(p map[string]string, region string) (string, *Fault) {
	cur, f := s.stoppable(p, region)
	if f != nil {
		return "", f
	}
	g, _, _ := s.group(p, region)
	if why := s.irreversible(g, cur); why != "" {
		return "", &Fault{Status: 400, Code: "IrreversibleInstanceRefresh", Message: "The instance refresh cannot be rolled back: " + why}
	}
	cur.Status, cur.StatusReason = "RollbackInProgress", "Rolling back at the caller's request"
	return "<InstanceRefreshId>" + cur.ID + "</InstanceRefreshId>", nil
}

// sameImage says whether the group's instances already run the image of
// the refresh's desired configuration.
func (s *Server) sameImage(g *Group, rf Refresh) bool {
	lt := s.templates[rf.TemplateID]
	v, ok := lt.resolve(rf.Version)
	return ok && s.imageOf(lt, v) == g.Running
}

// advance moves a refresh one poll further: Pending, then one batch of
// instances per poll (the batch is what the minimum healthy percentage
// allows), pausing once at each checkpoint; then Successful — or, with a
// failure armed, Failed (or RollbackInProgress with auto rollback).
// Rollbacks and cancels finish on the next poll.
func (s *Server) advance(g *Group, rf *Refresh) {
	switch rf.Status {
	case "Pending":
		rf.Status, rf.StatusReason = "InProgress", "Replacing instances"
		if rf.InstancesToUpdate == 0 {
			rf.Status, rf.StatusReason, rf.Percentage = "Successful", "", 100
			s.finish(g, rf)
		}
		return
	case "Cancelling":
		rf.Status, rf.StatusReason = "Cancelled", "The refresh was cancelled; "+strconv.Itoa(g.Updated)+" instances were replaced"
		return
	case "RollbackInProgress":
		rf.Status, rf.StatusReason, rf.Percentage = "RollbackSuccessful", "Every instance runs the previous configuration again", 100
		g.Updated = 0
		return
	case "InProgress":
	default:
		return
	}
	for _, c := range rf.Checkpoints {
		if c < 100 && rf.Percentage >= c && !rf.waited[c] {
			rf.waited[c] = true
			rf.StatusReason = fmt.Sprintf("Waiting for the checkpoint delay (%ds) at %d%%", rf.CheckDelay, c)
			return
		}
	}
	batch := max(1, g.Instances*(100-rf.MinHealthy)/100)
	if rf.MaxHealthy > 100 {
		batch = max(1, g.Instances*(rf.MaxHealthy-rf.MinHealthy)/100)
	}
	g.Updated = min(rf.InstancesToUpdate, g.Updated+batch)
	rf.Percentage = 100 * g.Updated / max(rf.InstancesToUpdate, 1)
	rf.StatusReason = fmt.Sprintf("Replacing instances: %d of %d done, warming up for %ds", g.Updated, rf.InstancesToUpdate, rf.Warmup)
	if fired := s.alarmFired(rf, g.Region); fired != "" {
		if rf.AutoRollback {
			rf.Status, rf.StatusReason = "RollbackInProgress", "Instance refresh failed: alarm in ALARM state: "+fired+"; rolling back"
		} else {
			rf.Status, rf.StatusReason = "Failed", "Instance refresh failed: alarm in ALARM state: "+fired
		}
		return
	}
	if rf.failAt > 0 && rf.Percentage >= rf.failAt {
		if rf.AutoRollback {
			rf.Status, rf.StatusReason = "RollbackInProgress", "Instance refresh failed: "+rf.failReason+"; rolling back"
		} else {
			rf.Status, rf.StatusReason = "Failed", "Instance refresh failed: "+rf.failReason
		}
		return
	}
	if g.Updated == rf.InstancesToUpdate {
		rf.Status, rf.StatusReason, rf.Percentage = "Successful", "", 100
		s.finish(g, rf)
	}
}

// finish makes the refresh's desired configuration the group's.
func (s *Server) finish(g *Group, rf *Refresh) {
	lt := s.templates[rf.TemplateID]
	v, _ := lt.resolve(rf.Version)
	g.TemplateID, g.Version, g.Running = rf.TemplateID, rf.Version, s.imageOf(lt, v)
}

// versionOptions reads and checks the IPv6 launch options of a new
// version as EC2 does: the enum values, and an interface with an IPv6
// address count needs its device index.
func versionOptions(p map[string]string) (VersionOptions, *Fault) {
	const md = "LaunchTemplateData.MetadataOptions."
	o := VersionOptions{HTTPEndpoint: p[md+"HttpEndpoint"], HTTPTokens: p[md+"HttpTokens"], HTTPProtocolIPv6: p[md+"HttpProtocolIpv6"]}
	for name, v := range map[string]string{"HttpEndpoint": o.HTTPEndpoint, "HttpProtocolIpv6": o.HTTPProtocolIPv6} {
		if v != "" && v != "enabled" && v != "disabled" {
			return o, badParam("%s%s must be enabled or disabled", md, name)
		}
	}
	if v := o.HTTPTokens; v != "" && v != "required" && v != "optional" {
		return o, badParam("%sHttpTokens must be required or optional", md)
	}
	const ni = "LaunchTemplateData.NetworkInterface.1."
	for k := range p {
		if strings.HasPrefix(k, "LaunchTemplateData.NetworkInterface.") {
			o.Interface = true
		}
	}
	if c := p[ni+"Ipv6AddressCount"]; c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			return o, badParam("%sIpv6AddressCount must be a non-negative integer", ni)
		}
		if p[ni+"DeviceIndex"] != "0" {
			return o, badParam("%sDeviceIndex is required with Ipv6AddressCount", ni)
		}
		o.IPv6AddressCount = n
	}
	return o, nil
}
