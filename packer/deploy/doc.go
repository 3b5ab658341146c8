// Package deploy holds the reference deployment of the hotpath fleet,
// fleet.yaml (CloudFormation), and the tests that keep it valid and in
// agreement with the image's defaults and the hotpath-rollout
// post-processor's configuration in example-fleet.pkr.hcl. It has no
// code of its own.
package deploy
