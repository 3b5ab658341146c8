package fakeaws

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p := map[string]string{}
	for k, v := range form {
		p[k] = v[0]
	}
	op := p["Action"]
	s.mu.Lock()
	var (
		body string
		f    *Fault
	)
	if p["Version"] != "2016-11-15" {
		f = badParam("Version %q", p["Version"])
	} else if ff, ok := s.fault(op); ok {
		f = &ff
	} else {
		body, f = s.ec2Op(op, p, region)
	}
	status := 200
	if f != nil {
		status = f.Status
	}
	s.record(op, region, status)
	s.mu.Unlock()
	if f != nil {
		ec2Error(w, *f)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<%sResponse xmlns="%s"><requestId>fake-request</requestId>%s</%sResponse>`,
		op, ec2NS, body, op)
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
)

// ec2Op runs one EC2 operation under s.mu and returns the inner XML of its
// response.
func (s *Server) ec2Op(op string, p map[string]string, region string) (string, *Fault) {
	switch op {
	case "DescribeSnapshots":
		var b strings.Builder
		b.WriteString("<snapshotSet>")
		for _, id := range list(p, "SnapshotId", "") {
			sn, ok := s.snapshots[id]
			if !ok || sn.Region != region {
				return "", &Fault{Status: 400, Code: "InvalidSnapshot.NotFound", Message: "The snapshot '" + id + "' does not exist."}
			}
			state, progress := sn.State, "0%"
			if sn.Completed {
				if sn.pendingPolls > 0 {
					sn.pendingPolls--
					progress = "99%"
				} else {
					sn.State, state, progress = "completed", "completed", "100%"
				}
			}
			fmt.Fprintf(&b, "<item><snapshotId>%s</snapshotId><volumeId>vol-ffffffff</volumeId><status>%s</status>"+
				"<startTime>2026-01-01T00:00:00.000Z</startTime><progress>%s</progress><ownerId>%s</ownerId>"+
				"<volumeSize>%d</volumeSize><description>%s</description><encrypted>%t</encrypted>%s%s</item>",
				sn.ID, state, progress, sn.OwnerID, sn.VolumeSize, esc(sn.Description), sn.Encrypted,
				optional("kmsKeyId", sn.KmsKeyArn), tagSet(sn.Tags))
		}
		b.WriteString("</snapshotSet>")
		return b.String(), nil

	case "RegisterImage":
		im := &Image{
			Region: region, Name: p["Name"], Description: p["Description"],
			Architecture: p["Architecture"], Virtualization: p["VirtualizationType"],
			RootDevice: p["RootDeviceName"], BootMode: p["BootMode"], Imds: p["ImdsSupport"],
			SriovNetSupport: p["SriovNetSupport"], EnaSupport: p["EnaSupport"] == "true",
			Tags: map[string]string{}, State: "pending", Params: p, pendingPolls: s.PendingPolls,
		}
		if f := s.checkImageName(im.Name, region); f != nil {
			return "", f
		}
		switch {
		case !oneOf(im.Architecture, "i386", "x86_64", "arm64", "x86_64_mac", "arm64_mac"):
			return "", badParam("Architecture %q", im.Architecture)
		case !oneOf(im.Virtualization, "hvm", "paravirtual"):
			return "", badParam("VirtualizationType %q", im.Virtualization)
		case im.BootMode != "" && !oneOf(im.BootMode, "legacy-bios", "uefi", "uefi-preferred"):
			return "", badParam("BootMode %q", im.BootMode)
		case im.Imds != "" && im.Imds != "v2.0":
			return "", badParam("ImdsSupport %q", im.Imds)
		case im.SriovNetSupport != "" && im.SriovNetSupport != "simple":
			return "", badParam("SriovNetSupport %q", im.SriovNetSupport)
		case len(im.Description) > 255:
			return "", badParam("Description longer than 255 characters")
		}
		devs := list(p, "BlockDeviceMapping", ".DeviceName")
		if len(devs) != 1 || devs[0] != im.RootDevice {
			return "", badParam("block device mappings %v must be exactly the root device %q", devs, im.RootDevice)
		}
		im.SnapshotID = p["BlockDeviceMapping.1.Ebs.SnapshotId"]
		sn, ok := s.snapshots[im.SnapshotID]
		if !ok || sn.Region != region {
			return "", &Fault{Status: 400, Code: "InvalidSnapshot.NotFound", Message: "The snapshot '" + im.SnapshotID + "' does not exist."}
		}
		if sn.State != "completed" {
			return "", &Fault{Status: 400, Code: "IncorrectState", Message: "Snapshot " + sn.ID + " is not completed"}
		}
		im.VolumeType = p["BlockDeviceMapping.1.Ebs.VolumeType"]
		im.DeleteOnTermination = p["BlockDeviceMapping.1.Ebs.DeleteOnTermination"] == "true"
		im.VolumeSize = sn.VolumeSize
		if v := p["BlockDeviceMapping.1.Ebs.VolumeSize"]; v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < sn.VolumeSize {
				return "", badParam("volume size %q smaller than snapshot (%d GiB)", v, sn.VolumeSize)
			}
			im.VolumeSize = n
		}
		if !oneOf(im.VolumeType, "gp2", "gp3", "io1", "io2", "st1", "sc1", "standard") {
			return "", badParam("VolumeType %q", im.VolumeType)
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
		return "<imageId>" + im.ID + "</imageId>", nil

	case "DescribeImages":
		var b strings.Builder
		b.WriteString("<imagesSet>")
		for _, id := range list(p, "ImageId", "") {
			im, ok := s.images[id]
			if !ok || im.Region != region {
				return "", &Fault{Status: 400, Code: "InvalidAMIID.NotFound", Message: "The image id '[" + id + "]' does not exist"}
			}
			if im.State == "pending" {
				if im.pendingPolls > 0 {
					im.pendingPolls--
				} else {
					im.State = "available"
				}
			}
			b.WriteString(imageXML(im, s.snapshots[im.SnapshotID]))
		}
		b.WriteString("</imagesSet>")
		return b.String(), nil

	case "DeregisterImage":
		id := p["ImageId"]
		im, ok := s.images[id]
		if !ok || im.Region != region {
			return "", &Fault{Status: 400, Code: "InvalidAMIID.NotFound", Message: "The image id '[" + id + "]' does not exist"}
		}
		delete(s.images, id)
		return "<return>true</return>", nil

	case "DeleteSnapshot":
		id := p["SnapshotId"]
		sn, ok := s.snapshots[id]
		if !ok || sn.Region != region {
			return "", &Fault{Status: 400, Code: "InvalidSnapshot.NotFound", Message: "The snapshot '" + id + "' does not exist."}
		}
		for _, im := range s.images {
			if im.SnapshotID == id {
				return "", &Fault{Status: 400, Code: "InvalidSnapshot.InUse", Message: "The snapshot " + id + " is currently in use by " + im.ID}
			}
		}
		delete(s.snapshots, id)
		return "<return>true</return>", nil

	case "CreateTags":
		ids := list(p, "ResourceId", "")
		t := tags(p, "Tag")
		if len(ids) == 0 || len(t) == 0 {
			return "", &Fault{Status: 400, Code: "MissingParameter", Message: "CreateTags needs ResourceId and Tag"}
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

	case "CopyImage":
		src, ok := s.images[p["SourceImageId"]]
		if !ok || src.Region != p["SourceRegion"] {
			return "", &Fault{Status: 400, Code: "InvalidAMIID.NotFound", Message: "The image id '[" + p["SourceImageId"] + "]' does not exist in " + p["SourceRegion"]}
		}
		if src.State != "available" {
			return "", &Fault{Status: 400, Code: "IncorrectState", Message: "image " + src.ID + " is not available"}
		}
		if f := s.checkImageName(p["Name"], region); f != nil {
			return "", f
		}
		ssn := s.snapshots[src.SnapshotID]
		sn := &Snapshot{
			ID: s.nextID("snap"), Region: region, OwnerID: ssn.OwnerID, VolumeSize: ssn.VolumeSize,
			Encrypted: ssn.Encrypted || p["Encrypted"] == "true", KmsKeyArn: p["KmsKeyId"],
			Description: "Copied for " + p["Name"], Tags: map[string]string{},
			Blocks: ssn.Blocks, Sums: ssn.Sums, State: "completed", Completed: true,
		}
		s.snapshots[sn.ID] = sn
		im := *src
		im.ID, im.Region, im.Name, im.Description = s.nextID("ami"), region, p["Name"], p["Description"]
		im.SnapshotID, im.State, im.pendingPolls = sn.ID, "pending", s.PendingPolls
		im.SourceRegion, im.SourceImageID = src.Region, src.ID
		im.Tags, im.LaunchUsers, im.LaunchGroups, im.Params = map[string]string{}, nil, nil, p
		s.images[im.ID] = &im
		return "<imageId>" + im.ID + "</imageId>", nil

	case "ModifyImageAttribute":
		im, ok := s.images[p["ImageId"]]
		if !ok || im.Region != region {
			return "", &Fault{Status: 400, Code: "InvalidAMIID.NotFound", Message: "The image id '[" + p["ImageId"] + "]' does not exist"}
		}
		users := list(p, "LaunchPermission.Add", ".UserId")
		groups := list(p, "LaunchPermission.Add", ".Group")
		if len(users)+len(groups) == 0 {
			return "", &Fault{Status: 400, Code: "MissingParameter", Message: "no launch permission to add"}
		}
		for _, u := range users {
			if !accountRE.MatchString(u) {
				return "", badParam("UserId %q", u)
			}
		}
		for _, g := range groups {
			if g != "all" {
				return "", badParam("Group %q", g)
			}
		}
		im.LaunchUsers = append(im.LaunchUsers, users...)
		im.LaunchGroups = append(im.LaunchGroups, groups...)
		return "<return>true</return>", nil
	}
	return "", &Fault{Status: 400, Code: "InvalidAction", Message: "fakeaws: unsupported action " + op}
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

func imageXML(im *Image, sn *Snapshot) string {
	encrypted := sn != nil && sn.Encrypted
	var b strings.Builder
	fmt.Fprintf(&b, "<item><imageId>%s</imageId><imageLocation>123456789012/%s</imageLocation><imageState>%s</imageState>"+
		"<imageOwnerId>123456789012</imageOwnerId><creationDate>2026-01-01T00:00:00.000Z</creationDate><isPublic>false</isPublic>"+
		"<architecture>%s</architecture><imageType>machine</imageType><name>%s</name><description>%s</description>"+
		"<rootDeviceType>ebs</rootDeviceType><rootDeviceName>%s</rootDeviceName>"+
		"<blockDeviceMapping><item><deviceName>%s</deviceName><ebs><snapshotId>%s</snapshotId><volumeSize>%d</volumeSize>"+
		"<deleteOnTermination>%t</deleteOnTermination><volumeType>%s</volumeType><encrypted>%t</encrypted></ebs></item></blockDeviceMapping>"+
		"<virtualizationType>%s</virtualizationType><hypervisor>xen</hypervisor><enaSupport>%t</enaSupport>%s%s%s%s</item>",
		im.ID, esc(im.Name), im.State, im.Architecture, esc(im.Name), esc(im.Description), im.RootDevice,
		im.RootDevice, im.SnapshotID, im.VolumeSize, im.DeleteOnTermination, im.VolumeType, encrypted,
		im.Virtualization, im.EnaSupport, optional("sriovNetSupport", im.SriovNetSupport),
		optional("bootMode", im.BootMode), optional("imdsSupport", im.Imds), tagSet(im.Tags))
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
