package fakeaws

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const ec2NS = "http://ec2.amazonaws.com/doc/2016-11-15/"

// ec2Error writes an EC2 Query error document.
func ec2Error(w http.ResponseWriter, f Fault) {
	if f.Code == "" {
		w.WriteHeader(f.Status)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(f.Status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>fake-request</RequestID></Response>`,
		esc(f.Code), esc(f.Message))
}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

func badParam(format string, args ...any) *Fault {
	return &Fault{Status: 400, Code: "InvalidParameterValue", Message: fmt.Sprintf(format, args...)}
}

func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request, region string) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		http.Error(w, "fakeaws: EC2 Query requests are POST /", http.StatusBadRequest)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		http.Error(w, "fakeaws: content type "+ct, http.StatusBadRequest)
		return
	}
	p, err := queryParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	op := p["Action"]
	check := func() *Fault { return checkAction(p, "2016-11-15", ec2Actions, "UnknownParameter") }
	answer(s, w, r, region, op, check, func() (string, *Fault) { return ec2Actions[op].serve(s, p, region) },
		func(w http.ResponseWriter, body string, f *Fault) {
			if f != nil {
				ec2Error(w, *f)
				return
			}
			w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<%sResponse xmlns="%s"><requestId>fake-request</requestId>%s</%sResponse>`,
				op, ec2NS, body, op)
		})
}

// checkPrincipals checks whom a permission is added for: 12-digit
// account ids, and the one group EC2 has, "all".
func checkPrincipals(users, groups []string) *Fault {
	for _, u := range users {
		if !accountRE.MatchString(u) {
			return badParam("UserId %q", u)
		}
	}
	for _, g := range groups {
		if g != "all" {
			return badParam("Group %q", g)
		}
	}
	return nil
}

// selection reads what a Describe call asks for: the ids listed under
// idKey (none: all, sorted), the values of its one supported filter, and
// an owner that can only be "self".
func selection(p map[string]string, idKey, filter string, all []string) (ids, values []string, f *Fault) {
	values, err := filterValues(p, filter, filter)
	if err != nil {
		return nil, nil, badParam("%v", err)
	}
	if owners := list(p, "Owner", ""); len(owners) > 0 && (len(owners) != 1 || owners[0] != "self") {
		return nil, nil, badParam("fakeaws: Owner must be self, not %v", owners)
	}
	ids = list(p, idKey, "")
	if len(ids) == 0 {
		ids = all
		sort.Strings(ids)
	}
	return ids, values, nil
}

// list collects the values of Prefix.1, Prefix.2, ... (or, with a suffix,
// Prefix.N.Suffix) in index order.
func list(p map[string]string, prefix, suffix string) []string {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `\.(\d+)` + regexp.QuoteMeta(suffix) + `$`)
	type kv struct {
		n int
		v string
	}
	var got []kv
	for k, v := range p {
		if m := re.FindStringSubmatch(k); m != nil {
			n, _ := strconv.Atoi(m[1])
			got = append(got, kv{n, v})
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].n < got[j].n })
	out := make([]string, len(got))
	for i, g := range got {
		out[i] = g.v
	}
	return out
}

func tags(p map[string]string, prefix string) map[string]string {
	keys := list(p, prefix, ".Key")
	vals := list(p, prefix, ".Value")
	m := map[string]string{}
	for i, k := range keys {
		if i < len(vals) {
			m[k] = vals[i]
		}
	}
	return m
}

func tagSet(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<tagSet>")
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "<item><key>%s</key><value>%s</value></item>", esc(k), esc(m[k]))
	}
	b.WriteString("</tagSet>")
	return b.String()
}

var (
	amiNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_ '@\[\]]{3,128}$`)
	accountRE = regexp.MustCompile(`^\d{12}$`)
	kmsARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:kms:([a-z0-9-]+):\d{12}:key/[A-Za-z0-9-]+$`)
	orgARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:organizations::\d{12}:organization/o-[a-z0-9]{10,32}$`)
	ouARNRE   = regexp.MustCompile(`^arn:aws[a-z-]*:organizations::\d{12}:ou/o-[a-z0-9]{10,32}/ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}$`)
)

// ec2Actions are the EC2 actions the fake serves: the parameters of each
// (names as the EC2 Query API spells them) and the method that serves it.
// The launch template actions are in fleet.go.
var ec2Actions = map[string]queryAction{
	"DescribeSnapshots": {merge(filters, querySpec{"SnapshotId.#": str, "Owner.#": str}), (*Server).describeSnapshots},
	"RegisterImage": {merge(tagSpec, querySpec{
		"Name": str, "Description": str, "Architecture": str, "VirtualizationType": str, "RootDeviceName": str,
		"BlockDeviceMapping.#.DeviceName": str, "BlockDeviceMapping.#.Ebs.SnapshotId": str,
		"BlockDeviceMapping.#.Ebs.VolumeType": str, "BlockDeviceMapping.#.Ebs.DeleteOnTermination": boolean,
		"BlockDeviceMapping.#.Ebs.VolumeSize": integer,
		"EnaSupport":                          boolean, "SriovNetSupport": str, "BootMode": str, "ImdsSupport": str, "TpmSupport": str,
		"UefiData": str,
	}), (*Server).registerImage},
	"DescribeImages":  {merge(filters, querySpec{"ImageId.#": str, "Owner.#": str, "IncludeDeprecated": boolean}), (*Server).describeImages},
	"DeregisterImage": {querySpec{"ImageId": str}, (*Server).deregisterImage},
	"DeleteSnapshot":  {querySpec{"SnapshotId": str}, (*Server).deleteSnapshot},
	"CreateTags":      {querySpec{"ResourceId.#": str, "Tag.#.Key": str, "Tag.#.Value": str}, (*Server).createTags},
	"CopyImage": {querySpec{"Name": str, "Description": str, "SourceImageId": str, "SourceRegion": str, "Encrypted": boolean,
		"KmsKeyId": str, "ClientToken": str}, (*Server).copyImage},
	"EnableImageDeprecation":               {querySpec{"ImageId": str, "DeprecateAt": timestamp}, (*Server).enableImageDeprecation},
	"EnableImageDeregistrationProtection":  {querySpec{"ImageId": str, "WithCooldown": boolean}, (*Server).enableProtection},
	"DisableImageDeregistrationProtection": {querySpec{"ImageId": str}, (*Server).disableProtection},
	"ModifyImageAttribute": {querySpec{
		"ImageId": str, "LaunchPermission.Add.#.UserId": str, "LaunchPermission.Add.#.Group": str,
		"LaunchPermission.Add.#.OrganizationArn": str, "LaunchPermission.Add.#.OrganizationalUnitArn": str,
	}, (*Server).modifyImageAttribute},
	"ModifySnapshotAttribute": {querySpec{
		"SnapshotId": str, "Attribute": str, "OperationType": str,
		"CreateVolumePermission.Add.#.UserId": str, "CreateVolumePermission.Add.#.Group": str,
	}, (*Server).modifySnapshotAttribute},
	"CreateLaunchTemplateVersion": {querySpec{
		"LaunchTemplateId": str, "LaunchTemplateName": str, "SourceVersion": str, "VersionDescription": str,
		"LaunchTemplateData.ImageId": str, "ClientToken": str, "LaunchTemplateData.InstanceType": str,
		"LaunchTemplateData.MetadataOptions.HttpEndpoint": str, "LaunchTemplateData.MetadataOptions.HttpTokens": str,
		"LaunchTemplateData.MetadataOptions.HttpProtocolIpv6":    str,
		"LaunchTemplateData.NetworkInterface.1.DeviceIndex":      str,
		"LaunchTemplateData.NetworkInterface.1.Ipv6AddressCount": str,
	}, (*Server).createLaunchTemplateVersion},
	"ModifyLaunchTemplate": {querySpec{"LaunchTemplateId": str, "LaunchTemplateName": str, "SetDefaultVersion": str, "ClientToken": str},
		(*Server).modifyLaunchTemplate},
	"DescribeLaunchTemplateVersions": {querySpec{"LaunchTemplateId": str, "LaunchTemplateName": str, "LaunchTemplateVersion.#": str},
		(*Server).describeLaunchTemplateVersions},
	"DescribeInstanceTypes": {querySpec{"InstanceType.#": str}, (*Server).describeInstanceTypes}, // instancetypes.go
}

// notFound is EC2's answer for an id it does not know (in this region):
// code is the resource's *.NotFound code, message what EC2 says.
func notFound(code, message string) *Fault {
	return &Fault{Status: 400, Code: code, Message: message}
}

// imageNotFound and snapshotNotFound are notFound for AMIs and snapshots,
// worded as EC2 words them.
func imageNotFound(id string) *Fault {
	return notFound("InvalidAMIID.NotFound", "The image id '["+id+"]' does not exist")
}

func snapshotNotFound(id string) *Fault {
	return notFound("InvalidSnapshot.NotFound", "The snapshot '"+id+"' does not exist.")
}

// image returns the AMI id of region.
func (s *Server) image(id, region string) (*Image, *Fault) {
	im, ok := s.images[id]
	if !ok || im.Region != region {
		return nil, imageNotFound(id)
	}
	return im, nil
}

// snapshot returns the snapshot id of region.
func (s *Server) snapshot(id, region string) (*Snapshot, *Fault) {
	sn, ok := s.snapshots[id]
	if !ok || sn.Region != region {
		return nil, snapshotNotFound(id)
	}
	return sn, nil
}

func (s *Server) describeSnapshots(p map[string]string, region string) (string, *Fault) {
	var all []string
	for _, sn := range s.snapshots {
		if sn.Region == region {
			all = append(all, sn.ID)
		}
	}
	ids, desc, f := selection(p, "SnapshotId", "description", all)
	if f != nil {
		return "", f
	}
	var b strings.Builder
	b.WriteString("<snapshotSet>")
	for _, id := range ids {
		sn, f := s.snapshot(id, region)
		if f == nil && len(list(p, "SnapshotId", "")) > 0 && s.unseen(id) {
			f = snapshotNotFound(id)
		}
		if f != nil {
			return "", f
		}
		if len(desc) > 0 && !slices.ContainsFunc(desc, func(d string) bool { return globMatch(d, sn.Description) }) {
			continue
		}
		progress := s.advanceSnapshot(sn)
		fmt.Fprintf(&b, "<item><snapshotId>%s</snapshotId><volumeId>vol-ffffffff</volumeId><status>%s</status>%s"+
			"<startTime>2026-01-01T00:00:00.000Z</startTime><progress>%s</progress><ownerId>%s</ownerId>"+
			"<volumeSize>%d</volumeSize><description>%s</description><encrypted>%t</encrypted>%s%s</item>",
			sn.ID, sn.State, optional("statusMessage", sn.StateMessage), progress, sn.OwnerID, sn.VolumeSize, esc(sn.Description), sn.Encrypted,
			optional("kmsKeyId", sn.KmsKeyArn), tagSet(sn.Tags))
	}
	b.WriteString("</snapshotSet>")
	return b.String(), nil
}

// advanceSnapshot moves a snapshot one DescribeSnapshots poll further and
// returns its progress: a completed upload is "pending" PendingPolls more
// times, then "completed" (or "error" when it was armed to fail); one
// never completed expires.
func (s *Server) advanceSnapshot(sn *Snapshot) (progress string) {
	s.expire(sn)
	switch {
	case !sn.Completed || sn.State != "pending":
		if sn.State == "completed" {
			return "100%"
		}
		return "0%"
	case sn.pendingPolls > 0:
		sn.pendingPolls--
		return "99%"
	case sn.failWith != "":
		// EC2 User Guide, "Amazon EBS snapshot lifecycle"/DescribeSnapshots:
		// a snapshot's state is pending, completed, error, recoverable or
		// recovering; an error carries its reason in StateMessage.
		sn.State, sn.StateMessage = "error", sn.failWith
		return "0%"
	}
	sn.State = "completed"
	return "100%"
}

// expire cancels a snapshot still pending after its deadline. EBS direct
// APIs reference, StartSnapshot, Timeout: the snapshot is automatically
// cancelled if no block is written to it, or it is not completed after
// the last block is written, within Timeout minutes (default 60); a
// cancelled snapshot is in state error.
func (s *Server) expire(sn *Snapshot) {
	if sn.State == "pending" && !sn.Completed && !sn.deadline.IsZero() && s.clock().After(sn.deadline) {
		sn.State = "error"
		sn.StateMessage = fmt.Sprintf("cancelled: no block written and no CompleteSnapshot within the %d-minute timeout", sn.timeout())
	}
}

// timeout is the snapshot's Timeout in minutes, 60 when not given.
func (sn *Snapshot) timeout() int32 {
	if sn.Timeout == 0 {
		return 60
	}
	return sn.Timeout
}

func (s *Server) registerImage(p map[string]string, region string) (string, *Fault) {
	im := &Image{
		Region: region, Name: p["Name"], Description: p["Description"],
		Architecture: p["Architecture"], Virtualization: p["VirtualizationType"],
		RootDevice: p["RootDeviceName"], BootMode: p["BootMode"], Imds: p["ImdsSupport"],
		SriovNetSupport: p["SriovNetSupport"], EnaSupport: p["EnaSupport"] == "true", Tpm: p["TpmSupport"],
		Tags: map[string]string{}, State: "pending", Params: p, pendingPolls: s.PendingPolls,
	}
	if f := s.checkImageName(im.Name, region); f != nil {
		return "", f
	}
	if f := checkRegister(im); f != nil {
		return "", f
	}
	if f := checkUEFIData(im, p["UefiData"]); f != nil {
		return "", f
	}
	if f := s.rootDevice(im, p); f != nil {
		return "", f
	}
	for i, rt := range list(p, "TagSpecification", ".ResourceType") {
		if rt != "image" && rt != "snapshot" {
			return "", badParam("TagSpecification resource type %q", rt)
		}
		if rt == "image" {
			for k, v := range tags(p, fmt.Sprintf("TagSpecification.%d.Tag", i+1)) {
				im.Tags[k] = v
			}
		}
	}
	im.ID = s.nextID("ami")
	s.images[im.ID] = im
	s.created(im.ID)
	return "<imageId>" + im.ID + "</imageId>", nil
}

// checkRegister checks the enumerated attributes of a RegisterImage
// against the values EC2 has.
func checkRegister(im *Image) *Fault {
	switch {
	case !oneOf(im.Architecture, "i386", "x86_64", "arm64", "x86_64_mac", "arm64_mac"):
		return badParam("Architecture %q", im.Architecture)
	case !oneOf(im.Virtualization, "hvm", "paravirtual"):
		return badParam("VirtualizationType %q", im.Virtualization)
	case im.BootMode != "" && !oneOf(im.BootMode, "legacy-bios", "uefi", "uefi-preferred"):
		return badParam("BootMode %q", im.BootMode)
	case im.Imds != "" && im.Imds != "v2.0":
		return badParam("ImdsSupport %q", im.Imds)
	case im.SriovNetSupport != "" && im.SriovNetSupport != "simple":
		return badParam("SriovNetSupport %q", im.SriovNetSupport)
	case im.Tpm != "" && im.Tpm != "v2.0":
		return badParam("TpmSupport %q", im.Tpm)
	case im.Tpm != "" && im.BootMode != "uefi":
		return badParam("NitroTPM (TpmSupport) needs BootMode uefi, not %q", im.BootMode)
	case im.Architecture == "arm64" && im.BootMode != "" && im.BootMode != "uefi":
		return badParam("BootMode %q: arm64 AMIs boot UEFI only", im.BootMode)
	case len(im.Description) > 255:
		return badParam("Description longer than 255 characters")
	}
	return nil
}

// rootDevice fills in the image's root volume from its one block device
// mapping, which must name a completed snapshot of the region.
func (s *Server) rootDevice(im *Image, p map[string]string) *Fault {
	devs := list(p, "BlockDeviceMapping", ".DeviceName")
	if len(devs) != 1 || devs[0] != im.RootDevice {
		return badParam("block device mappings %v must be exactly the root device %q", devs, im.RootDevice)
	}
	im.SnapshotID = p["BlockDeviceMapping.1.Ebs.SnapshotId"]
	sn, f := s.snapshot(im.SnapshotID, im.Region)
	if f != nil {
		return f
	}
	if sn.State != "completed" {
		return &Fault{Status: 400, Code: "IncorrectState", Message: "Snapshot " + sn.ID + " is not completed"}
	}
	im.VolumeType = p["BlockDeviceMapping.1.Ebs.VolumeType"]
	im.DeleteOnTermination = p["BlockDeviceMapping.1.Ebs.DeleteOnTermination"] == "true"
	im.VolumeSize = sn.VolumeSize
	if v := p["BlockDeviceMapping.1.Ebs.VolumeSize"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < sn.VolumeSize {
			return badParam("volume size %q smaller than snapshot (%d GiB)", v, sn.VolumeSize)
		}
		im.VolumeSize = n
	}
	if !oneOf(im.VolumeType, "gp2", "gp3", "io1", "io2", "st1", "sc1", "standard") {
		return badParam("VolumeType %q", im.VolumeType)
	}
	return nil
}

func (s *Server) describeImages(p map[string]string, region string) (string, *Fault) {
	var all []string
	for _, im := range s.images {
		if im.Region == region {
			all = append(all, im.ID)
		}
	}
	ids, names, f := selection(p, "ImageId", "name", all)
	if f != nil {
		return "", f
	}
	var b strings.Builder
	b.WriteString("<imagesSet>")
	for _, id := range ids {
		im, f := s.image(id, region)
		if f == nil && len(list(p, "ImageId", "")) > 0 && s.unseen(id) {
			f = imageNotFound(id)
		}
		if f != nil {
			return "", f
		}
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return globMatch(n, im.Name) }) {
			continue
		}
		if im.State == "pending" {
			if im.pendingPolls > 0 {
				im.pendingPolls--
			} else {
				im.State = "available"
				if sn := s.snapshots[im.SnapshotID]; sn != nil && sn.State == "pending" {
					sn.State, sn.Completed = "completed", true
				}
			}
		}
		b.WriteString(imageXML(im, s.snapshots[im.SnapshotID], s.clock()))
	}
	b.WriteString("</imagesSet>")
	return b.String(), nil
}

func (s *Server) deregisterImage(p map[string]string, region string) (string, *Fault) {
	id := p["ImageId"]
	im, f := s.image(id, region)
	if f != nil {
		return "", f
	}
	if im.Protected {
		return "", &Fault{Status: 400, Code: "InvalidParameter", Message: "Image " + id + " has deregistration protection enabled"}
	}
	if now := s.clock(); now.Before(im.ProtectedUntil) {
		return "", &Fault{Status: 400, Code: "InvalidParameter", Message: "Image " + id + " has deregistration protection enabled: its cooldown ends at " +
			im.ProtectedUntil.UTC().Format(ec2Time)}
	}
	delete(s.images, id)
	return "<return>true</return>", nil
}

func (s *Server) deleteSnapshot(p map[string]string, region string) (string, *Fault) {
	id := p["SnapshotId"]
	if _, f := s.snapshot(id, region); f != nil {
		return "", f
	}
	for _, im := range s.images {
		if im.SnapshotID == id {
			return "", &Fault{Status: 400, Code: "InvalidSnapshot.InUse", Message: "The snapshot " + id + " is currently in use by " + im.ID}
		}
	}
	delete(s.snapshots, id)
	return "<return>true</return>", nil
}

func (s *Server) createTags(p map[string]string, region string) (string, *Fault) {
	ids := list(p, "ResourceId", "")
	t := tags(p, "Tag")
	if len(ids) == 0 || len(t) == 0 {
		return "", &Fault{Status: 400, Code: "MissingParameter", Message: "CreateTags needs ResourceId and Tag"}
	}
	for _, id := range ids {
		if s.unseen("CreateTags/" + id) { // eventual.go
			if strings.HasPrefix(id, "snap-") {
				return "", snapshotNotFound(id)
			}
			return "", imageNotFound(id)
		}
	}
	for _, id := range ids {
		var m map[string]string
		if im, ok := s.images[id]; ok && im.Region == region {
			m = im.Tags
		} else if sn, ok := s.snapshots[id]; ok && sn.Region == region {
			m = sn.Tags
		} else {
			return "", &Fault{Status: 400, Code: "InvalidID", Message: "The ID '" + id + "' is not valid"}
		}
		for k, v := range t {
			m[k] = v
		}
	}
	return "<return>true</return>", nil
}

func (s *Server) copyImage(p map[string]string, region string) (string, *Fault) {
	src, ok := s.images[p["SourceImageId"]]
	if !ok || src.Region != p["SourceRegion"] {
		return "", notFound("InvalidAMIID.NotFound", "The image id '["+p["SourceImageId"]+"]' does not exist in "+p["SourceRegion"])
	}
	if src.State != "available" {
		return "", &Fault{Status: 400, Code: "IncorrectState", Message: "image " + src.ID + " is not available"}
	}
	if f := s.checkImageName(p["Name"], region); f != nil {
		return "", f
	}
	if k := p["KmsKeyId"]; k != "" {
		if p["Encrypted"] != "true" {
			return "", badParam("KmsKeyId requires Encrypted")
		}
		if m := kmsARNRE.FindStringSubmatch(k); m == nil || m[1] != region {
			return "", &Fault{Status: 400, Code: "InvalidParameterValue", Message: "KmsKeyId " + k + " is not a KMS key ARN in " + region}
		}
	}
	ssn := s.snapshots[src.SnapshotID]
	id := s.nextID("ami")
	// Like EC2: the copy's snapshot exists (pending) from the start,
	// but DescribeImages names it only once the copy is available.
	sn := &Snapshot{
		ID: s.nextID("snap"), Region: region, OwnerID: ssn.OwnerID, VolumeSize: ssn.VolumeSize,
		Encrypted: ssn.Encrypted || p["Encrypted"] == "true", KmsKeyArn: p["KmsKeyId"],
		Description: fmt.Sprintf("Copied for DestinationAmi %s from SourceAmi %s for SourceSnapshot %s. Task created on 1,767,225,600,000.", id, src.ID, ssn.ID),
		Tags:        map[string]string{}, Blocks: ssn.Blocks, Sums: ssn.Sums, State: "pending",
	}
	s.snapshots[sn.ID] = sn
	s.created(sn.ID)
	im := *src
	im.ID, im.Region, im.Name, im.Description = id, region, p["Name"], p["Description"]
	im.SnapshotID, im.State, im.pendingPolls = sn.ID, "pending", s.PendingPolls+s.CopyPendingPolls
	im.Protected, im.DeprecateAt = false, ""
	im.SourceRegion, im.SourceImageID = src.Region, src.ID
	im.Tags, im.LaunchUsers, im.LaunchGroups, im.Params = map[string]string{}, nil, nil, p
	s.images[im.ID] = &im
	s.created(im.ID)
	return "<imageId>" + im.ID + "</imageId>", nil
}

func (s *Server) modifyImageAttribute(p map[string]string, region string) (string, *Fault) {
	im, f := s.image(p["ImageId"], region)
	if f != nil {
		return "", f
	}
	users := list(p, "LaunchPermission.Add", ".UserId")
	groups := list(p, "LaunchPermission.Add", ".Group")
	orgs := list(p, "LaunchPermission.Add", ".OrganizationArn")
	ous := list(p, "LaunchPermission.Add", ".OrganizationalUnitArn")
	for _, o := range orgs {
		if !orgARNRE.MatchString(o) {
			return "", badParam("OrganizationArn %q", o)
		}
	}
	for _, o := range ous {
		if !ouARNRE.MatchString(o) {
			return "", badParam("OrganizationalUnitArn %q", o)
		}
	}
	if len(users)+len(groups)+len(orgs)+len(ous) == 0 {
		return "", &Fault{Status: 400, Code: "MissingParameter", Message: "no launch permission to add"}
	}
	if f := checkPrincipals(users, groups); f != nil {
		return "", f
	}
	// EC2 User Guide, "Share an AMI publicly" (considerations): an AMI
	// with encrypted volumes cannot be made public; it can be shared with
	// accounts and organizations only.
	if sn := s.snapshots[im.SnapshotID]; slices.Contains(groups, "all") && sn != nil && sn.Encrypted {
		return "", &Fault{Status: 400, Code: "InvalidParameter", Message: "Image " + im.ID + " has encrypted snapshot " + sn.ID + " and cannot be made public"}
	}
	im.LaunchOrgs = append(im.LaunchOrgs, orgs...)
	im.LaunchOUs = append(im.LaunchOUs, ous...)
	im.LaunchUsers = append(im.LaunchUsers, users...)
	im.LaunchGroups = append(im.LaunchGroups, groups...)
	return "<return>true</return>", nil
}

// enableImageDeprecation serves the deprecation time the amazon plugin's
// deprecate_at sets.
func (s *Server) enableImageDeprecation(p map[string]string, region string) (string, *Fault) {
	im, f := s.image(p["ImageId"], region)
	if f != nil {
		return "", f
	}
	t, _ := time.Parse(time.RFC3339, p["DeprecateAt"])
	if !t.After(s.clock()) {
		return "", badParam("DeprecateAt %s is in the past", p["DeprecateAt"])
	}
	t = t.Round(time.Minute) // as EC2 does
	im.DeprecateAt = t.UTC().Format("2006-01-02T15:04:05.000Z")
	return "<return>true</return>", nil
}

func (s *Server) enableProtection(p map[string]string, region string) (string, *Fault) {
	im, f := s.image(p["ImageId"], region)
	if f != nil {
		return "", f
	}
	im.Protected, im.ProtectedCooldown, im.ProtectedUntil = true, p["WithCooldown"] == "true", time.Time{}
	if im.ProtectedCooldown {
		return "<return>enabled-with-cooldown</return>", nil
	}
	return "<return>enabled</return>", nil
}

// ec2Time is how EC2 writes times.
const ec2Time = "2006-01-02T15:04:05.000Z"

// cooldown is how long protection enabled WithCooldown outlives its
// disabling. EC2 API Reference, EnableImageDeregistrationProtection,
// WithCooldown: "enforces deregistration protection for 24 hours after
// deregistration protection is disabled"; EC2 User Guide, "Protect an
// Amazon EC2 AMI from deregistration": the AMI then reads
// disabled-until-<time> and cannot be deregistered before that time.
const cooldown = 24 * time.Hour

func (s *Server) disableProtection(p map[string]string, region string) (string, *Fault) {
	im, f := s.image(p["ImageId"], region)
	if f != nil {
		return "", f
	}
	if im.Protected && im.ProtectedCooldown {
		im.ProtectedUntil = s.clock().Add(cooldown)
	}
	im.Protected, im.ProtectedCooldown = false, false
	if !im.ProtectedUntil.IsZero() {
		return "<return>disabled-until-" + im.ProtectedUntil.UTC().Format(ec2Time) + "</return>", nil
	}
	return "<return>disabled</return>", nil
}

func (s *Server) modifySnapshotAttribute(p map[string]string, region string) (string, *Fault) {
	sn, f := s.snapshot(p["SnapshotId"], region)
	if f != nil {
		return "", f
	}
	if p["Attribute"] != "createVolumePermission" && p["Attribute"] != "" {
		return "", badParam("Attribute %q", p["Attribute"])
	}
	users := list(p, "CreateVolumePermission.Add", ".UserId")
	groups := list(p, "CreateVolumePermission.Add", ".Group")
	if len(users)+len(groups) == 0 {
		return "", &Fault{Status: 400, Code: "MissingParameter", Message: "no create volume permission to add"}
	}
	if f := checkPrincipals(users, groups); f != nil {
		return "", f
	}
	if sn.Encrypted && sn.KmsKeyArn == "" && len(users)+len(groups) > 0 {
		return "", &Fault{Status: 400, Code: "OperationNotPermitted", Message: "Snapshots encrypted with the AWS managed key can't be shared"}
	}
	sn.VolumeUsers = append(sn.VolumeUsers, users...)
	sn.VolumeGroups = append(sn.VolumeGroups, groups...)
	return "<return>true</return>", nil
}

func (s *Server) checkImageName(name, region string) *Fault {
	if !amiNameRE.MatchString(name) {
		return badParam("AMI name %q", name)
	}
	for _, o := range s.images {
		if o.Region == region && o.Name == name {
			return &Fault{Status: 400, Code: "InvalidAMIName.Duplicate", Message: "AMI name " + name + " is already in use by AMI " + o.ID}
		}
	}
	return nil
}

func imageXML(im *Image, sn *Snapshot, now time.Time) string {
	encrypted := sn != nil && sn.Encrypted
	// EC2 leaves the snapshot id out while an image (a copy) is pending.
	snap := ""
	if im.State != "pending" {
		snap = optional("snapshotId", im.SnapshotID)
	}
	extra := optional("sriovNetSupport", im.SriovNetSupport) + optional("bootMode", im.BootMode) +
		optional("imdsSupport", im.Imds) + optional("tpmSupport", im.Tpm) + optional("deprecationTime", im.DeprecateAt)
	switch {
	case im.Protected && im.ProtectedCooldown:
		extra += "<deregistrationProtection>enabled-with-cooldown</deregistrationProtection>"
	case im.Protected:
		extra += "<deregistrationProtection>enabled</deregistrationProtection>"
	case now.Before(im.ProtectedUntil):
		extra += "<deregistrationProtection>disabled-until-" + im.ProtectedUntil.UTC().Format(ec2Time) + "</deregistrationProtection>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<item><imageId>%s</imageId><imageLocation>123456789012/%s</imageLocation><imageState>%s</imageState>"+
		"<imageOwnerId>123456789012</imageOwnerId><creationDate>2026-01-01T00:00:00.000Z</creationDate><isPublic>false</isPublic>"+
		"<architecture>%s</architecture><imageType>machine</imageType><name>%s</name><description>%s</description>"+
		"<rootDeviceType>ebs</rootDeviceType><rootDeviceName>%s</rootDeviceName>"+
		"<blockDeviceMapping><item><deviceName>%s</deviceName><ebs>%s<volumeSize>%d</volumeSize>"+
		"<deleteOnTermination>%t</deleteOnTermination><volumeType>%s</volumeType><encrypted>%t</encrypted></ebs></item></blockDeviceMapping>"+
		"<virtualizationType>%s</virtualizationType><hypervisor>xen</hypervisor><enaSupport>%t</enaSupport>%s%s</item>",
		im.ID, esc(im.Name), im.State, im.Architecture, esc(im.Name), esc(im.Description), im.RootDevice,
		im.RootDevice, snap, im.VolumeSize, im.DeleteOnTermination, im.VolumeType, encrypted,
		im.Virtualization, im.EnaSupport, extra, tagSet(im.Tags))
	return b.String()
}

func optional(tag, v string) string {
	if v == "" {
		return ""
	}
	return "<" + tag + ">" + esc(v) + "</" + tag + ">"
}

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
