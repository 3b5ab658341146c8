package imds

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Identity is what the boot report states about the instance, so that an
// operator reading get-console-output (or a fleet tool) knows which
// machine, from which AMI, in which zone, with which network interface.
type Identity struct {
	InstanceID       string `json:"instance_id"`
	InstanceType     string `json:"instance_type"`
	AvailabilityZone string `json:"availability_zone"`
	AMIID            string `json:"ami_id"`
	MAC              string `json:"mac"`
	// DeviceNumber is the ENI's device index (0 for the primary ENI).
	DeviceNumber string `json:"device_number"`
}

// Metadata paths of the identity facts.
const (
	PathInstanceID   = "/latest/meta-data/instance-id"
	PathInstanceType = "/latest/meta-data/instance-type"
	PathAZ           = "/latest/meta-data/placement/availability-zone"
	PathAMIID        = "/latest/meta-data/ami-id"
	PathMAC          = "/latest/meta-data/mac"
	PathUserData     = "/latest/user-data"
)

// DeviceNumberPath is the metadata path of the device number of the ENI
// with the given MAC.
func DeviceNumberPath(mac string) string {
	return "/latest/meta-data/network/interfaces/macs/" + mac + "/device-number"
}

// Identity reads the identity facts. It reads every item even when one
// fails, and returns what it got with the failures joined.
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	var errs []error
	get := func(path string, dst *string) {
		b, err := c.Get(ctx, path)
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = strings.TrimSpace(string(b))
	}
	get(PathInstanceID, &id.InstanceID)
	get(PathInstanceType, &id.InstanceType)
	get(PathAZ, &id.AvailabilityZone)
	get(PathAMIID, &id.AMIID)
	get(PathMAC, &id.MAC)
	if id.MAC != "" {
		if strings.ContainsAny(id.MAC, "/?#") {
			errs = append(errs, fmt.Errorf("imds: mac %q is not a MAC address", id.MAC))
		} else {
			get(DeviceNumberPath(id.MAC), &id.DeviceNumber)
		}
	}
	return id, errors.Join(errs...)
}
