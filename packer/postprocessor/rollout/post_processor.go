// Package rollout is the hotpath-rollout post-processor: it hands new
// AMIs to the fleet engine AWS users already run. After hotpath-ami (or
// any amazon builder) it publishes each region's AMI id to an SSM
// parameter, creates a launch template version with the new AMI
// (optionally the default), and moves Auto Scaling groups onto it with
// Instance Refresh, waiting with progress. When a refresh fails, the build
// is cancelled or the wait runs out, it rolls the refresh back (or
// cancels it), restores the parameter and the default version, and says
// in what state each group is left.
package rollout

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/ami"
)

// PostProcessor implements packersdk.PostProcessor.
type PostProcessor struct {
	config   Config
	warnings []string

	// loadOptions is for tests (a fast retryer).
	loadOptions []func(*awsconfig.LoadOptions) error
}

var _ packersdk.PostProcessor = (*PostProcessor)(nil)

func (p *PostProcessor) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

func (p *PostProcessor) Configure(raws ...interface{}) error {
	w, err := p.config.Prepare(raws...)
	p.warnings = w
	return err
}

// amiPairRE matches one "region:ami-id" of an amazon-style artifact id.
var amiPairRE = regexp.MustCompile(`^([a-z0-9-]+):(ami-[0-9a-f]+)$`)

// amisOf reads region -> AMI id from the artifact id, the format
// hotpath-ami and the amazon builders share ("r1:ami-…,r2:ami-…"); it
// survives Packer's RPC, unlike typed state.
func amisOf(a packersdk.Artifact) (map[string]string, error) {
	if a == nil {
		return nil, fmt.Errorf("no input artifact")
	}
	out := map[string]string{}
	for _, part := range strings.Split(a.Id(), ",") {
		m := amiPairRE.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return nil, fmt.Errorf("input artifact %q (%s) is not a set of region:ami-id pairs; put hotpath-rollout after hotpath-ami", a.Id(), a.BuilderId())
		}
		out[m[1]] = m[2]
	}
	return out, nil
}

// PostProcess rolls the input artifact's AMIs out. The input artifact is
// kept whatever happens: the AMIs are good even when a fleet refuses them.
func (p *PostProcessor) PostProcess(ctx context.Context, ui packersdk.Ui, in packersdk.Artifact) (packersdk.Artifact, bool, bool, error) {
	for _, w := range p.warnings {
		ui.Say("Warning: " + w)
	}
	amis, err := amisOf(in)
	if err != nil {
		return nil, true, false, err
	}
	c := &p.config
	for _, t := range c.Targets {
		if _, ok := amis[t.Region]; !ok {
			return nil, true, false, fmt.Errorf("target %s in %s: the input artifact has no AMI in %s (it has %s)",
				t.name(), t.Region, t.Region, in.Id())
		}
	}
	cfg, err := ami.LoadAWS(ctx, &c.AccessConfig, p.loadOptions...)
	if err != nil {
		return nil, true, false, err
	}
	state := new(multistep.BasicStateBag)
	state.Put(keyConfig, c)
	state.Put(keyUI, ui)
	state.Put(keyClients, newClients(cfg, &c.AccessConfig))
	state.Put(keyAMIs, amis)
	result := &Artifact{AMIs: amis, Versions: map[string]int64{}, Refreshes: map[string]string{}}
	state.Put(keyResult, result)
	runner := &multistep.BasicRunner{Steps: []multistep.Step{
		&stepBootModes{},    // bootmode.go: refuses before any change
		&stepRollbackable{}, // rollbackable.go: likewise
		&stepParameter{},
		&stepTemplates{},
		&stepRefresh{},
	}}
	runner.Run(ctx, state)

	e, failed := state.GetOk(keyError)
	_, cancelled := state.GetOk(multistep.StateCancelled)
	if failed || cancelled {
		msg := "cancelled"
		if failed && e != errCancelled {
			msg = e.(error).Error()
		}
		if l, _ := state.Get(keyLeft).([]string); len(l) > 0 {
			msg += "; state left behind: " + strings.Join(l, "; ")
		}
		return nil, true, false, fmt.Errorf("%s", msg)
	}
	return result, true, false, nil
}

// Artifact is what the roll-out changed.
type Artifact struct {
	// AMIs maps region to AMI id, as in the input.
	AMIs map[string]string
	// Versions maps "region/template" to the launch template version
	// created.
	Versions map[string]int64
	// Refreshes maps "region/group" to the instance refresh id.
	Refreshes map[string]string
}

func (a *Artifact) BuilderId() string { return BuilderID }
func (a *Artifact) Files() []string   { return nil }

// Id keeps the input's "region:ami-id" pairs, so further post-processors
// and tools see the AMIs.
func (a *Artifact) Id() string {
	var parts []string
	for _, r := range sortedKeys(a.AMIs) {
		parts = append(parts, r+":"+a.AMIs[r])
	}
	return strings.Join(parts, ",")
}

func (a *Artifact) String() string {
	var b strings.Builder
	b.WriteString("AMIs rolled out:\n")
	for _, r := range sortedKeys(a.AMIs) {
		fmt.Fprintf(&b, "%s: %s\n", r, a.AMIs[r])
	}
	for _, k := range sortedKeys(a.Versions) {
		fmt.Fprintf(&b, "launch template %s: version %d\n", k, a.Versions[k])
	}
	for _, k := range sortedKeys(a.Refreshes) {
		fmt.Fprintf(&b, "auto scaling group %s: instance refresh %s successful\n", k, a.Refreshes[k])
	}
	return b.String()
}

func (a *Artifact) State(name string) interface{} { return nil }

// Destroy does nothing: a roll-out is not undone by deleting an artifact.
func (a *Artifact) Destroy() error { return nil }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cleanupWait bounds waiting for a rollback or cancel after a failure.
const cleanupWait = 30 * time.Minute
