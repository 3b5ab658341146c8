package main

import (
	"os"
	"testing"

	goversion "github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclparse"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	hpimage "github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/packer/builder/image"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/ami"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/rollout"
	"github.com/hotpath-dev/hotpath/packer/version"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// The example template users copy decodes with the components' specs and
// passes their validation, variables at their defaults.
func TestExampleTemplates(t *testing.T) {
	for _, name := range []string{"example.pkr.hcl", "example-fleet.pkr.hcl"} {
		t.Run(name, func(t *testing.T) { checkExample(t, name) })
	}
}

func checkExample(t *testing.T, name string) {
	src, err := os.ReadFile("../../" + name)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, name)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "source", LabelNames: []string{"type", "name"}},
		{Type: "build"},
		{Type: "packer"},
	}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vars := map[string]cty.Value{}
	for _, b := range content.Blocks.OfType("variable") {
		var v struct {
			Type    hcl.Expression `hcl:"type"`
			Default string         `hcl:"default"`
		}
		if d := gohcl.DecodeBody(b.Body, nil, &v); d.HasErrors() {
			t.Fatal(d)
		}
		vars[b.Labels[0]] = cty.StringVal(v.Default)
	}
	ectx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)},
		Functions: map[string]function.Function{
			"formatdate": stdlib.FormatDateFunc,
			"timestamp": function.New(&function.Spec{Type: function.StaticReturnType(cty.String),
				Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.StringVal("2026-01-02T03:04:05Z"), nil }}),
		},
	}
	// The required_plugins block names this plugin with a constraint the
	// release of this version (make plugin-release) satisfies.
	for _, b := range content.Blocks.OfType("packer") {
		pc, d := b.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required_plugins"}}})
		if d.HasErrors() || len(pc.Blocks) != 1 {
			t.Fatalf("packer block: %v", d)
		}
		attrs, _ := pc.Blocks[0].Body.JustAttributes()
		req, d := attrs["hotpath"].Expr.Value(nil)
		if d.HasErrors() {
			t.Fatal(d)
		}
		c, err := goversion.NewConstraint(req.GetAttr("version").AsString())
		if err != nil || req.GetAttr("source").AsString() != "github.com/hotpath-dev/hotpath" ||
			!c.Check(goversion.Must(goversion.NewVersion(version.Version.GetVersion()))) {
			t.Errorf("required_plugins %#v (%v) is not satisfied by a release of %s", req, err, version.Version.GetVersion())
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := hpimage.FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	// The relative output_directory must not exist yet.
	t.Chdir(t.TempDir())
	for _, b := range content.Blocks.OfType("source") {
		if b.Labels[0] != "hotpath-image" {
			t.Fatalf("source %s", b.Labels[0])
		}
		bld := new(image.Builder)
		v, d := hcldec.Decode(b.Body, bld.ConfigSpec(), ectx)
		if d.HasErrors() {
			t.Fatal(d)
		}
		if _, _, err := bld.Prepare(coreVars("hotpath-image"), v, map[string]interface{}{"hotpath_root": root}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range content.Blocks.OfType("build") {
		bc, d := b.Body.Content(&hcl.BodySchema{
			Attributes: []hcl.AttributeSchema{{Name: "sources", Required: true}},
			Blocks: []hcl.BlockHeaderSchema{
				{Type: "post-processor", LabelNames: []string{"type"}},
				{Type: "post-processors"},
			},
		})
		if d.HasErrors() {
			t.Fatal(d)
		}
		pps := bc.Blocks.OfType("post-processor")
		for _, chain := range bc.Blocks.OfType("post-processors") {
			cc, d := chain.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "post-processor", LabelNames: []string{"type"}}}})
			if d.HasErrors() {
				t.Fatal(d)
			}
			pps = append(pps, cc.Blocks...)
		}
		if len(pps) == 0 {
			t.Fatal("no post-processor")
		}
		for _, p := range pps {
			var pp packersdk.PostProcessor
			switch p.Labels[0] {
			case "hotpath-ami":
				pp = new(ami.PostProcessor)
			case "hotpath-rollout":
				pp = new(rollout.PostProcessor)
			default:
				t.Fatalf("post-processor %s", p.Labels[0])
			}
			v, d := hcldec.Decode(p.Body, pp.ConfigSpec(), ectx)
			if d.HasErrors() {
				t.Fatal(d)
			}
			if p.Labels[0] == "hotpath-ami" {
				if got := v.GetAttr("ami_name").AsString(); got != "hotpath-dev-20260102030405" {
					t.Errorf("ami_name %q", got)
				}
			}
			if err := pp.Configure(coreVars("hotpath-image"), v); err != nil {
				t.Fatal(err)
			}
		}
	}
}
