package imds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Identity is what the boot report states about the instance, so that an
// operator reading get-console-output (or a fleet tool) knows which
// machine, from which AMI, in which zone, with which network interface.
//
// Every field is a checked value: the metadata service is on the other
// side of a network, and what it answers goes into the console, the
// report and (the MAC) a metadata path. The only way to make one from a
// string is its Parse function, which refuses anything that is not in
// AWS's documented format; a zero value means "not known".
type Identity struct {
	InstanceID       InstanceID   `json:"instance_id"`
	InstanceType     InstanceType `json:"instance_type"`
	Region           Region       `json:"region"`
	AvailabilityZone Zone         `json:"availability_zone"`
	AMIID            ImageID      `json:"ami_id"`
	MAC              MAC          `json:"mac"`
	// DeviceNumber is the ENI's device index (0 for the primary ENI).
	DeviceNumber DeviceNumber `json:"device_number"`
}

// Metadata paths of the identity facts.
const (
	PathInstanceID   = "/latest/meta-data/instance-id"
	PathInstanceType = "/latest/meta-data/instance-type"
	PathRegion       = "/latest/meta-data/placement/region"
	PathAZ           = "/latest/meta-data/placement/availability-zone"
	PathAMIID        = "/latest/meta-data/ami-id"
	PathMAC          = "/latest/meta-data/mac"
	PathUserData     = "/latest/user-data"
)

// MaxValue bounds one identity answer. The longest documented value (an
// availability zone of a Wavelength zone, "us-east-1-wl1-bos-wlz-1") is
// under 30 bytes; anything near this bound is not an identity value.
const MaxValue = 255

// DeviceNumberPath is the metadata path of the device number of the ENI
// with the given MAC. Only a checked MAC goes into the path.
func DeviceNumberPath(mac MAC) string {
	return "/latest/meta-data/network/interfaces/macs/" + mac.String() + "/device-number"
}

// value is the checked string every identity type carries; its methods
// are promoted to them.
type value struct{ s string }

// String returns the value as the metadata service gave it ("" when it is
// not known).
func (v value) String() string { return v.s }

// MarshalText makes a checked value a plain JSON string.
func (v value) MarshalText() ([]byte, error) { return []byte(v.s), nil }

// IsZero reports whether the value is unknown.
func (v value) IsZero() bool { return v.s == "" }

// Identity value types; see the Parse functions for their formats.
type (
	InstanceID   struct{ value }
	InstanceType struct{ value }
	Region       struct{ value }
	Zone         struct{ value }
	ImageID      struct{ value }
	MAC          struct{ value }
	DeviceNumber struct{ value }
)

// AWS's documented formats. Resource ids are a prefix and 8 (before 2016)
// or 17 lowercase hexadecimal digits (EC2 User Guide, "Resource IDs").
// An instance type is family.size, both lowercase letters, digits and
// hyphens ("c5n.xlarge", "u-6tb1.metal", "r7iz.metal-16xl",
// "m7i-flex.large"). A region is a partition-and-area prefix and a number
// ("eu-west-1", "us-gov-west-1", "us-isob-east-1", "eusc-de-east-1"); a
// zone is its region and a letter ("eu-west-1b"), or, for Local and
// Wavelength Zones, its region and a hyphenated suffix
// ("us-west-2-lax-1a", "us-east-1-wl1-bos-wlz-1").
var (
	instanceIDRE   = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)
	imageIDRE      = regexp.MustCompile(`^ami-([0-9a-f]{8}|[0-9a-f]{17})$`)
	instanceTypeRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}\.[a-z0-9][a-z0-9-]{0,30}$`)
	regionRE       = regexp.MustCompile(`^[a-z]{2,4}(-[a-z]{2,12}){1,3}-[0-9]{1,2}$`)
	zoneRE         = regexp.MustCompile(`^([a-z]{2,4}(-[a-z]{2,12}){1,3}-[0-9]{1,2})([a-z]|(-[a-z0-9]{1,12}){1,4}[a-z]?)$`)
	macRE          = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5}$`)
)

// quote renders a refused value for an error message: quoted (no control
// byte survives) and cut, so that a 1 MiB answer makes a short error.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q... (%d bytes)", s[:max], len(s))
	}
	return strconv.Quote(s)
}

func check(re *regexp.Regexp, what, s string) (value, error) {
	if len(s) > MaxValue || !re.MatchString(s) {
		return value{}, fmt.Errorf("imds: %s %s is not in AWS's format", what, quote(s))
	}
	return value{s}, nil
}

// ParseInstanceID checks an instance id: "i-" and 8 or 17 hex digits.
func ParseInstanceID(s string) (InstanceID, error) {
	v, err := check(instanceIDRE, "instance-id", s)
	return InstanceID{v}, err
}

// ParseImageID checks an AMI id: "ami-" and 8 or 17 hex digits.
func ParseImageID(s string) (ImageID, error) {
	v, err := check(imageIDRE, "ami-id", s)
	return ImageID{v}, err
}

// ParseInstanceType checks an instance type: family.size.
func ParseInstanceType(s string) (InstanceType, error) {
	v, err := check(instanceTypeRE, "instance-type", s)
	return InstanceType{v}, err
}

// ParseRegion checks a region name ("eu-west-1").
func ParseRegion(s string) (Region, error) {
	v, err := check(regionRE, "region", s)
	return Region{v}, err
}

// ParseZone checks an availability zone name and, when region is known,
// that the zone is in it.
func ParseZone(s string, region Region) (Zone, error) {
	v, err := check(zoneRE, "availability-zone", s)
	if err != nil {
		return Zone{}, err
	}
	if !region.IsZero() && zoneRE.FindStringSubmatch(s)[1] != region.s {
		return Zone{}, fmt.Errorf("imds: availability-zone %s is not in region %s", quote(s), region.s)
	}
	return Zone{v}, nil
}

// ParseMAC checks a MAC address as the metadata service writes it: six
// lowercase hexadecimal octets separated by colons. It is also a path
// element (DeviceNumberPath), so nothing else may pass.
func ParseMAC(s string) (MAC, error) {
	v, err := check(macRE, "mac", s)
	if err == nil {
		if _, perr := net.ParseMAC(s); perr != nil {
			return MAC{}, fmt.Errorf("imds: mac %s: %w", quote(s), perr)
		}
	}
	return MAC{v}, err
}

// ParseDeviceNumber checks an ENI device index: a decimal number below
// 256 without leading zeros (instances have at most a few dozen ENIs).
func ParseDeviceNumber(s string) (DeviceNumber, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 || strconv.Itoa(n) != s {
		return DeviceNumber{}, fmt.Errorf("imds: device-number %s is not a device index", quote(s))
	}
	return DeviceNumber{value{s}}, nil
}

// Identity reads the identity facts and checks each against its format.
// It reads every item even when one fails, and returns what it got (a
// refused value stays zero) with the failures joined.
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	var errs []error
	get := func(path string, parse func(string) error) {
		b, err := c.get(ctx, path, MaxValue)
		if err == nil {
			err = parse(strings.TrimSpace(string(b)))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	get(PathInstanceID, func(s string) (err error) { id.InstanceID, err = ParseInstanceID(s); return })
	get(PathInstanceType, func(s string) (err error) { id.InstanceType, err = ParseInstanceType(s); return })
	get(PathRegion, func(s string) (err error) { id.Region, err = ParseRegion(s); return })
	get(PathAZ, func(s string) (err error) { id.AvailabilityZone, err = ParseZone(s, id.Region); return })
	get(PathAMIID, func(s string) (err error) { id.AMIID, err = ParseImageID(s); return })
	get(PathMAC, func(s string) (err error) { id.MAC, err = ParseMAC(s); return })
	if !id.MAC.IsZero() {
		get(DeviceNumberPath(id.MAC), func(s string) (err error) { id.DeviceNumber, err = ParseDeviceNumber(s); return })
	}
	return id, errors.Join(errs...)
}
