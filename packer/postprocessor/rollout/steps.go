package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/internal/eventual"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/ami"
)

// State bag keys.
const (
	keyConfig  = "config"
	keyUI      = "ui"
	keyClients = "clients"
	keyAMIs    = "amis"   // map[region]ami id
	keyResult  = "result" // *Artifact
	keyError   = "error"
	keyLeft    = "left" // []string: the state things are left in after a failure
)

var errCancelled = errors.New("cancelled")

// clients are the regional EC2, Auto Scaling and SSM clients.
type clients struct {
	cfg aws.Config
	ac  *ami.AccessConfig
	mu  sync.Mutex
	ec  map[string]*ec2.Client
	as  map[string]*autoscaling.Client
	pm  map[string]*ssm.Client
}

func newClients(cfg aws.Config, ac *ami.AccessConfig) *clients {
	return &clients{cfg: cfg, ac: ac, ec: map[string]*ec2.Client{}, as: map[string]*autoscaling.Client{}, pm: map[string]*ssm.Client{}}
}

// nilIfEmpty is s as an optional AWS string: nil when empty (an endpoint
// not overridden, a launch template named by the other key).
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

func (cl *clients) ec2(r string) *ec2.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.ec[r] == nil {
		cl.ec[r] = ec2.NewFromConfig(cl.cfg, func(o *ec2.Options) { o.Region, o.BaseEndpoint = r, nilIfEmpty(cl.ac.CustomEndpointEC2) })
	}
	return cl.ec[r]
}

func (cl *clients) autoscaling(r string) *autoscaling.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.as[r] == nil {
		cl.as[r] = autoscaling.NewFromConfig(cl.cfg, func(o *autoscaling.Options) {
			o.Region, o.BaseEndpoint = r, nilIfEmpty(cl.ac.CustomEndpointAutoScaling)
		})
	}
	return cl.as[r]
}

func (cl *clients) ssm(r string) *ssm.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.pm[r] == nil {
		cl.pm[r] = ssm.NewFromConfig(cl.cfg, func(o *ssm.Options) { o.Region, o.BaseEndpoint = r, nilIfEmpty(cl.ac.CustomEndpointSSM) })
	}
	return cl.pm[r]
}

func bag(state multistep.StateBag) (*Config, packersdk.Ui, *clients) {
	return state.Get(keyConfig).(*Config), state.Get(keyUI).(packersdk.Ui), state.Get(keyClients).(*clients)
}

func halt(ctx context.Context, state multistep.StateBag, err error) multistep.StepAction {
	ui := state.Get(keyUI).(packersdk.Ui)
	if ctx.Err() != nil {
		state.Put(keyError, errCancelled)
		ui.Say("Cancelled; undoing the roll-out...")
		return multistep.ActionHalt
	}
	state.Put(keyError, err)
	ui.Error(err.Error())
	return multistep.ActionHalt
}

func failed(state multistep.StateBag) bool {
	_, cancelled := state.GetOk(multistep.StateCancelled)
	_, halted := state.GetOk(multistep.StateHalted)
	return cancelled || halted
}

// left records the state something is left in after a failure, for the
// final message.
func left(state multistep.StateBag, what string) {
	l, _ := state.Get(keyLeft).([]string)
	state.Put(keyLeft, append(l, what))
}

// versionNotFound says whether err is EC2's answer for a launch template
// version it does not know.
func versionNotFound(err error) bool {
	return apiCode(err) == "InvalidLaunchTemplateId.VersionNotFound"
}

func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func (t Target) name() string {
	if t.LaunchTemplateID != "" {
		return t.LaunchTemplateID
	}
	return t.LaunchTemplateName
}

// stepParameter publishes each region's AMI id to the SSM parameter and,
// when the roll-out fails, puts the previous value back.
type stepParameter struct {
	previous map[string]*string // region -> old value (nil: there was none)
}

func (s *stepParameter) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	if c.SSMParameter == "" {
		return multistep.ActionContinue
	}
	amis := state.Get(keyAMIs).(map[string]string)
	s.previous = map[string]*string{}
	for _, r := range sortedKeys(amis) {
		old, err := cl.ssm(r).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(c.SSMParameter)})
		var prev *string
		switch {
		case err == nil:
			prev = old.Parameter.Value
		case apiCode(err) != "ParameterNotFound":
			return halt(ctx, state, fmt.Errorf("read SSM parameter %s in %s: %w", c.SSMParameter, r, err))
		}
		if err == nil && aws.ToString(old.Parameter.DataType) != "aws:ec2:image" {
			// Parameter Store refuses to change a parameter's data type to
			// or from aws:ec2:image: say so before trying.
			return halt(ctx, state, fmt.Errorf("SSM parameter %s in %s has data type %q: Parameter Store cannot change a parameter's data type "+
				"to aws:ec2:image; delete it or name another ssm_parameter", c.SSMParameter, r, aws.ToString(old.Parameter.DataType)))
		}
		if prev != nil && *prev == amis[r] {
			ui.Say(fmt.Sprintf("SSM parameter %s in %s is already %s", c.SSMParameter, r, amis[r]))
			continue
		}
		out, err := cl.ssm(r).PutParameter(ctx, &ssm.PutParameterInput{
			Name: aws.String(c.SSMParameter), Value: aws.String(amis[r]), Type: ssmtypes.ParameterTypeString,
			DataType: aws.String("aws:ec2:image"), Overwrite: aws.Bool(true),
			Description: aws.String("hotpath appliance AMI, set by packer-plugin-hotpath"),
		})
		if err != nil {
			return halt(ctx, state, fmt.Errorf("publish %s to SSM parameter %s in %s: %w", amis[r], c.SSMParameter, r, err))
		}
		s.previous[r] = prev
		if err := awaitParameter(ctx, cl.ssm(r), c.SSMParameter, amis[r], c.PollInterval); err != nil {
			return halt(ctx, state, fmt.Errorf("publish %s to SSM parameter %s in %s: %w", amis[r], c.SSMParameter, r, err))
		}
		was := "new"
		if prev != nil {
			was = "was " + *prev
		}
		ui.Say(fmt.Sprintf("SSM parameter %s in %s = %s (version %d, %s)", c.SSMParameter, r, amis[r], out.Version, was))
	}
	return multistep.ActionContinue
}

func (s *stepParameter) Cleanup(state multistep.StateBag) {
	if !failed(state) || len(s.previous) == 0 {
		return
	}
	c, ui, cl := bag(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range sortedKeys(s.previous) {
		var err error
		if prev := s.previous[r]; prev != nil {
			_, err = cl.ssm(r).PutParameter(ctx, &ssm.PutParameterInput{
				Name: aws.String(c.SSMParameter), Value: prev, Overwrite: aws.Bool(true), DataType: aws.String("aws:ec2:image"),
			})
			if err == nil {
				err = awaitParameter(ctx, cl.ssm(r), c.SSMParameter, *prev, c.PollInterval)
			}
			if err == nil {
				ui.Say(fmt.Sprintf("SSM parameter %s in %s is %s again", c.SSMParameter, r, *prev))
			}
		} else {
			_, err = cl.ssm(r).DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(c.SSMParameter)})
			if apiCode(err) == "ParameterNotFound" {
				err = nil // Parameter Store dropped the value: it never existed
			}
			if err == nil {
				ui.Say(fmt.Sprintf("SSM parameter %s in %s deleted again (it did not exist before)", c.SSMParameter, r))
			}
		}
		if err != nil {
			ui.Error(fmt.Sprintf("Error restoring SSM parameter %s in %s: %s", c.SSMParameter, r, err))
			left(state, fmt.Sprintf("SSM parameter %s in %s still names the new AMI", c.SSMParameter, r))
		}
	}
}

// parameterReads bounds the read-back of a published parameter: this many
// reads, poll_interval apart (5 minutes at the default 15 s), before the
// roll-out gives up on a value Parameter Store did not take.
const parameterReads = 20

// awaitParameter reads the parameter back until it holds want. Parameter
// Store validates an aws:ec2:image value asynchronously (SSM API
// Reference, PutParameter, DataType; SSM User Guide, "Native parameter
// support for Amazon Machine Image IDs"): PutParameter answers 200 before
// the validation, and a value that is not an available AMI of the region
// is then dropped without any error. Only a read shows that it took.
func awaitParameter(ctx context.Context, client *ssm.Client, name, want string, poll time.Duration) error {
	holds := "no value (it does not exist)"
	for i := 1; ; i++ {
		out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		switch {
		case err == nil && aws.ToString(out.Parameter.Value) == want:
			return nil
		case err == nil:
			holds = aws.ToString(out.Parameter.Value)
		case apiCode(err) != "ParameterNotFound":
			return fmt.Errorf("read the parameter back: %w", err)
		}
		if i == parameterReads {
			return fmt.Errorf("PutParameter answered 200, but after %d reads %s apart the parameter still holds %s: "+
				"Parameter Store validates aws:ec2:image values asynchronously and drops one that is not an available AMI of the region",
				parameterReads, poll, holds)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// version is the launch template version created for a target.
type version struct {
	id           string // launch template id
	number       int64
	prevDefault  int64
	madeDefault  bool
	targetRegion string
}

// stepTemplates creates the new launch template versions (a copy of
// source_version with the new AMI) and makes them the default where
// asked; on failure the previous default comes back (the new version
// stays, unused: EC2 keeps every version).
type stepTemplates struct {
	versions []version
}

func (s *stepTemplates) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	amis := state.Get(keyAMIs).(map[string]string)
	res := state.Get(keyResult).(*Artifact)
	for _, t := range c.Targets {
		e := cl.ec2(t.Region)
		cur, err := e.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
			LaunchTemplateId: nilIfEmpty(t.LaunchTemplateID), LaunchTemplateName: nilIfEmpty(t.LaunchTemplateName),
			Versions: []string{"$Default"},
		})
		if err != nil {
			return halt(ctx, state, fmt.Errorf("launch template %s in %s: %w", t.name(), t.Region, err))
		}
		if len(cur.LaunchTemplateVersions) != 1 {
			return halt(ctx, state, fmt.Errorf("launch template %s in %s: no default version", t.name(), t.Region))
		}
		d := cur.LaunchTemplateVersions[0]
		out, err := e.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
			LaunchTemplateId:   d.LaunchTemplateId,
			SourceVersion:      aws.String(t.SourceVersion),
			VersionDescription: aws.String("hotpath " + amis[t.Region]),
			LaunchTemplateData: t.launchTemplateData(amis[t.Region]),
		})
		if err != nil {
			return halt(ctx, state, fmt.Errorf("new version of launch template %s in %s: %w", t.name(), t.Region, err))
		}
		v := version{id: aws.ToString(d.LaunchTemplateId), number: aws.ToInt64(out.LaunchTemplateVersion.VersionNumber),
			prevDefault: aws.ToInt64(d.VersionNumber), targetRegion: t.Region}
		ui.Say(fmt.Sprintf("Launch template %s (%s) in %s: version %d launches %s (copied from %s)",
			t.name(), v.id, t.Region, v.number, amis[t.Region], t.SourceVersion))
		if t.SetDefaultVersion {
			// The version was created a moment ago: EC2 may not know it
			// yet (eventual consistency).
			if err := eventual.Do(ctx, c.PollInterval, versionNotFound, func() error {
				_, err := e.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{
					LaunchTemplateId: aws.String(v.id), DefaultVersion: aws.String(strconv.FormatInt(v.number, 10)),
				})
				return err
			}); err != nil {
				s.versions = append(s.versions, v)
				return halt(ctx, state, fmt.Errorf("make version %d the default of %s in %s: %w", v.number, t.name(), t.Region, err))
			}
			v.madeDefault = true
			ui.Say(fmt.Sprintf("Launch template %s in %s: default version %d -> %d", t.name(), t.Region, v.prevDefault, v.number))
		}
		s.versions = append(s.versions, v)
		res.Versions[t.Region+"/"+t.name()] = v.number
	}
	state.Put("versions", s.versions)
	return multistep.ActionContinue
}

func (s *stepTemplates) Cleanup(state multistep.StateBag) {
	if !failed(state) {
		return
	}
	_, ui, cl := bag(state)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, v := range s.versions {
		if !v.madeDefault {
			continue
		}
		_, err := cl.ec2(v.targetRegion).ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{
			LaunchTemplateId: aws.String(v.id), DefaultVersion: aws.String(strconv.FormatInt(v.prevDefault, 10)),
		})
		if err != nil {
			ui.Error(fmt.Sprintf("Error restoring the default version %d of %s in %s: %s", v.prevDefault, v.id, v.targetRegion, err))
			left(state, fmt.Sprintf("launch template %s in %s: default is still the new version %d", v.id, v.targetRegion, v.number))
			continue
		}
		ui.Say(fmt.Sprintf("Launch template %s in %s: default version is %d again (version %d stays, unused)", v.id, v.targetRegion, v.prevDefault, v.number))
	}
}

// refresh is one instance refresh being watched.
type refresh struct {
	region, group, id string
	version           int64
	status            astypes.InstanceRefreshStatus
	reason            string
	// cause is the reason given when the refresh started to fail or
	// roll back; later answers may only describe the rollback.
	cause         string
	pct, toUpdate int32
	line          string // last progress line shown
	// misses counts answers that did not list the refresh: Auto Scaling
	// may not know a refresh it has just started (eventual consistency).
	misses int
}

func (r *refresh) terminal() bool {
	switch r.status {
	case astypes.InstanceRefreshStatusSuccessful, astypes.InstanceRefreshStatusFailed, astypes.InstanceRefreshStatusCancelled,
		astypes.InstanceRefreshStatusRollbackSuccessful, astypes.InstanceRefreshStatusRollbackFailed:
		return true
	}
	return false
}

// stepRefresh starts an Instance Refresh on every group onto its
// target's new version, and waits for all of them with progress lines.
type stepRefresh struct {
	refreshes []*refresh
}

func (s *stepRefresh) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	versions, _ := state.Get("versions").([]version)
	res := state.Get(keyResult).(*Artifact)
	prefs := &astypes.RefreshPreferences{
		MinHealthyPercentage: aws.Int32(int32(*c.MinHealthyPercentage)),
		SkipMatching:         c.SkipMatching,
		AutoRollback:         c.AutoRollback,
	}
	if c.MaxHealthyPercentage != nil {
		prefs.MaxHealthyPercentage = aws.Int32(int32(*c.MaxHealthyPercentage))
	}
	if c.InstanceWarmup > 0 {
		prefs.InstanceWarmup = aws.Int32(int32(c.InstanceWarmup / time.Second))
	}
	for _, p := range c.CheckpointPercentages {
		prefs.CheckpointPercentages = append(prefs.CheckpointPercentages, int32(p))
	}
	if len(c.CheckpointPercentages) > 0 {
		prefs.CheckpointDelay = aws.Int32(int32(c.CheckpointDelay / time.Second))
	}
	if len(c.Alarms) > 0 {
		prefs.AlarmSpecification = &astypes.AlarmSpecification{Alarms: c.Alarms}
	}
	for i, t := range c.Targets {
		v := versions[i]
		for _, g := range t.AutoScalingGroups {
			out, err := cl.autoscaling(t.Region).StartInstanceRefresh(ctx, &autoscaling.StartInstanceRefreshInput{
				AutoScalingGroupName: aws.String(g),
				Strategy:             astypes.RefreshStrategyRolling,
				DesiredConfiguration: &astypes.DesiredConfiguration{LaunchTemplate: &astypes.LaunchTemplateSpecification{
					LaunchTemplateId: aws.String(v.id), Version: aws.String(strconv.FormatInt(v.number, 10)),
				}},
				Preferences: prefs,
			})
			if err != nil {
				return halt(ctx, state, fmt.Errorf("start the instance refresh of %s in %s: %w", g, t.Region, err))
			}
			r := &refresh{region: t.Region, group: g, id: aws.ToString(out.InstanceRefreshId), version: v.number}
			s.refreshes = append(s.refreshes, r)
			watch := ""
			if len(c.Alarms) > 0 {
				watch = ", alarms " + strings.Join(c.Alarms, ", ")
			}
			ui.Say(fmt.Sprintf("Instance refresh %s started on %s in %s (launch template %s version %d, min healthy %d%%, auto rollback %t%s)",
				r.id, g, t.Region, v.id, v.number, *c.MinHealthyPercentage, *c.AutoRollback, watch))
		}
	}
	deadline := time.Now().Add(c.RefreshTimeout)
	for {
		pending := 0
		for _, r := range s.refreshes {
			if r.terminal() {
				continue
			}
			if err := r.poll(ctx, cl, ui); err != nil {
				return halt(ctx, state, err)
			}
			switch {
			case r.status == astypes.InstanceRefreshStatusSuccessful:
				res.Refreshes[r.region+"/"+r.group] = r.id
			case r.terminal():
				return halt(ctx, state, fmt.Errorf("instance refresh %s of %s in %s: %s: %s", r.id, r.group, r.region, r.status, r.cause))
			default:
				pending++
			}
		}
		if pending == 0 {
			return multistep.ActionContinue
		}
		if time.Now().After(deadline) {
			return halt(ctx, state, fmt.Errorf("the instance refreshes did not finish within refresh_timeout (%s)", c.RefreshTimeout))
		}
		select {
		case <-ctx.Done():
			return halt(ctx, state, ctx.Err())
		case <-time.After(c.PollInterval):
		}
	}
}

// poll reads the refresh's state and prints a progress line when it
// changed: status, percentage, instances to update, status reason.
func (r *refresh) poll(ctx context.Context, cl *clients, ui packersdk.Ui) error {
	out, err := cl.autoscaling(r.region).DescribeInstanceRefreshes(ctx, &autoscaling.DescribeInstanceRefreshesInput{
		AutoScalingGroupName: aws.String(r.group), InstanceRefreshIds: []string{r.id},
	})
	if err != nil {
		return fmt.Errorf("instance refresh %s of %s in %s: %w", r.id, r.group, r.region, err)
	}
	if len(out.InstanceRefreshes) != 1 {
		if r.misses++; len(out.InstanceRefreshes) == 0 && r.misses < eventual.Looks {
			return nil // just started: look again at the next poll
		}
		return fmt.Errorf("instance refresh %s of %s in %s: not found in %d looks", r.id, r.group, r.region, r.misses)
	}
	ir := out.InstanceRefreshes[0]
	r.status, r.reason = ir.Status, aws.ToString(ir.StatusReason)
	if r.cause == "" && r.status != astypes.InstanceRefreshStatusSuccessful &&
		(r.status == astypes.InstanceRefreshStatusRollbackInProgress || r.terminal()) {
		r.cause = r.reason
	}
	r.pct, r.toUpdate = aws.ToInt32(ir.PercentageComplete), aws.ToInt32(ir.InstancesToUpdate)
	line := fmt.Sprintf("%s (%s): %s %d%%, %d instances to update", r.group, r.region, r.status, r.pct, r.toUpdate)
	if r.reason != "" {
		line += ": " + r.reason
	}
	if line != r.line {
		ui.Say(line)
		r.line = line
	}
	return nil
}

func (s *stepRefresh) Cleanup(state multistep.StateBag) {
	if !failed(state) || len(s.refreshes) == 0 {
		return
	}
	c, ui, cl := bag(state)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupWait)
	defer cancel()
	for _, r := range s.refreshes {
		if r.terminal() {
			continue
		}
		as := cl.autoscaling(r.region)
		if c.OnFailure == "rollback" {
			_, err := as.RollbackInstanceRefresh(ctx, &autoscaling.RollbackInstanceRefreshInput{AutoScalingGroupName: aws.String(r.group)})
			if err == nil {
				ui.Say(fmt.Sprintf("Rolling back instance refresh %s of %s in %s...", r.id, r.group, r.region))
				continue
			}
			if apiCode(err) == "ActiveInstanceRefreshNotFound" {
				continue // it finished meanwhile: the wait below reads how
			}
			ui.Error(fmt.Sprintf("Rollback of %s in %s refused (%s); cancelling it instead", r.group, r.region, err))
		}
		if _, err := as.CancelInstanceRefresh(ctx, &autoscaling.CancelInstanceRefreshInput{AutoScalingGroupName: aws.String(r.group)}); err != nil &&
			apiCode(err) != "ActiveInstanceRefreshNotFound" {
			ui.Error(fmt.Sprintf("Error cancelling the instance refresh of %s in %s: %s", r.group, r.region, err))
			continue
		}
		ui.Say(fmt.Sprintf("Cancelling instance refresh %s of %s in %s...", r.id, r.group, r.region))
	}
	// Wait (bounded) until every refresh has settled, then say what each
	// group runs now.
	for {
		busy := false
		for _, r := range s.refreshes {
			if !r.terminal() {
				if err := r.poll(ctx, cl, ui); err != nil {
					ui.Error(err.Error())
					break
				}
				busy = busy || !r.terminal()
			}
		}
		if !busy || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(c.PollInterval):
		}
	}
	for _, r := range s.refreshes {
		msg := r.leftIn()
		ui.Say(msg)
		left(state, msg)
	}
}

// leftIn says what a group runs after its refresh ended as it did.
func (r *refresh) leftIn() string {
	g := fmt.Sprintf("group %s in %s", r.group, r.region)
	switch r.status {
	case astypes.InstanceRefreshStatusSuccessful:
		return fmt.Sprintf("%s runs the new AMI (launch template version %d)", g, r.version)
	case astypes.InstanceRefreshStatusRollbackSuccessful:
		return fmt.Sprintf("%s was rolled back: every instance runs its previous configuration", g)
	case astypes.InstanceRefreshStatusCancelled:
		return fmt.Sprintf("%s is mixed: the refresh was cancelled at %d%%; replaced instances run version %d, the others the previous one", g, r.pct, r.version)
	case astypes.InstanceRefreshStatusFailed:
		return fmt.Sprintf("%s is mixed: the refresh failed at %d%% (%s); start a refresh onto the previous version to undo", g, r.pct, r.reason)
	case astypes.InstanceRefreshStatusRollbackFailed:
		return fmt.Sprintf("%s: the rollback failed (%s); check the group", g, r.reason)
	}
	return fmt.Sprintf("%s: refresh %s still %s at %d%% (stopped waiting)", g, r.id, r.status, r.pct)
}

// launchTemplateData is what the new version changes: the AMI, and the
// IPv6 options the target asks for (config.go's Target).
func (t Target) launchTemplateData(ami string) *ec2types.RequestLaunchTemplateData {
	d := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(ami)}
	if t.HTTPProtocolIPv6 {
		d.MetadataOptions = &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:     ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpTokens:       ec2types.LaunchTemplateHttpTokensStateRequired,
			HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Enabled,
		}
	}
	if t.IPv6AddressCount > 0 {
		d.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: aws.Int32(0), Ipv6AddressCount: aws.Int32(int32(t.IPv6AddressCount)),
		}}
	}
	return d
}
