package ami

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"github.com/hotpath-dev/hotpath/packer/version"
)

// clients holds the AWS clients of one post-processing run: one EBS
// direct client for the build region and one EC2 client per region used.
type clients struct {
	cfg    aws.Config
	ebs    *ebs.Client
	ec2EP  string
	mu     sync.Mutex
	byRegn map[string]*ec2.Client
}

// newClients loads the AWS configuration the standard way (environment,
// shared files, profile, SSO, roles), with static keys from the template
// taking precedence, and builds the clients. extra options come last, so a
// test can replace the retryer.
func newClients(ctx context.Context, c *AccessConfig, extra ...func(*awsconfig.LoadOptions) error) (*clients, error) {
	cfg, err := LoadAWS(ctx, c, extra...)
	if err != nil {
		return nil, err
	}
	cl := &clients{cfg: cfg, ec2EP: c.CustomEndpointEC2, byRegn: map[string]*ec2.Client{}}
	cl.ebs = ebs.NewFromConfig(cfg, func(o *ebs.Options) {
		if c.CustomEndpointEBS != "" {
			o.BaseEndpoint = aws.String(c.CustomEndpointEBS)
		}
	})
	return cl, nil
}

// LoadAWS loads the AWS configuration for c: the standard chain, static
// keys from the template first, retries, and the assumed role. extra
// options come last, so a test can replace the retryer.
func LoadAWS(ctx context.Context, c *AccessConfig, extra ...func(*awsconfig.LoadOptions) error) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(c.RawRegion),
		awsconfig.WithRetryMaxAttempts(c.MaxRetries + 1),
		awsconfig.WithAppID("packer-plugin-hotpath/" + version.Version.String()),
	}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	if c.SharedCredentialsFile != "" {
		opts = append(opts, awsconfig.WithSharedCredentialsFiles([]string{c.SharedCredentialsFile}))
	}
	if c.AccessKey != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, c.Token)))
	}
	opts = append(opts, extra...)
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if a := c.AssumeRole; a.RoleARN != "" {
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(
			sts.NewFromConfig(cfg, func(o *sts.Options) {
				if c.CustomEndpointSTS != "" {
					o.BaseEndpoint = aws.String(c.CustomEndpointSTS)
				}
			}), a.RoleARN, a.options))
	}
	return cfg, nil
}

// options applies the block to the STS AssumeRole call.
func (a AssumeRoleConfig) options(o *stscreds.AssumeRoleOptions) {
	o.RoleSessionName = a.SessionName
	if o.RoleSessionName == "" {
		o.RoleSessionName = fmt.Sprintf("packer-plugin-hotpath-%d", time.Now().Unix())
	}
	if a.DurationSeconds > 0 {
		o.Duration = time.Duration(a.DurationSeconds) * time.Second
	}
	if a.ExternalID != "" {
		o.ExternalID = aws.String(a.ExternalID)
	}
	if a.Policy != "" {
		o.Policy = aws.String(a.Policy)
	}
	for _, p := range a.PolicyARNs {
		o.PolicyARNs = append(o.PolicyARNs, ststypes.PolicyDescriptorType{Arn: aws.String(p)})
	}
	for _, k := range sortedRegions(a.Tags) {
		o.Tags = append(o.Tags, ststypes.Tag{Key: aws.String(k), Value: aws.String(a.Tags[k])})
	}
	o.TransitiveTagKeys = a.TransitiveTagKeys
}

// ec2 returns the EC2 client for region.
func (cl *clients) ec2(region string) *ec2.Client {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if c, ok := cl.byRegn[region]; ok {
		return c
	}
	c := ec2.NewFromConfig(cl.cfg, func(o *ec2.Options) {
		o.Region = region
		if cl.ec2EP != "" {
			o.BaseEndpoint = aws.String(cl.ec2EP)
		}
	})
	cl.byRegn[region] = c
	return c
}
