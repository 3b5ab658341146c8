package e2e

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
)

// buildImage builds an appliance disk with the given workload package
// (empty: the default workload) through the image package, the same path
// `make image` takes. The kernel comes from kernel-config's cache; on a
// cold cache this is the ~30-minute kernel build, whose progress goes to
// stderr so a CI log shows it moving.
func buildImage(t *testing.T, workload string) string {
	t.Helper()
	return buildImageConfig(t, workload, nil)
}

// buildImageConfig is buildImage with an init configuration file (nil:
// the default).
func buildImageConfig(t *testing.T, workload string, initConfig []byte) string {
	t.Helper()
	o := image.Options{InitConfig: initConfig}
	if workload != "" {
		o.Workload = image.Program{Package: workload}
	}
	return buildWith(t, o).Disk
}

// buildWith builds o into a new directory, with the progress on stderr.
func buildWith(t *testing.T, o image.Options) *image.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	defer cancel()
	o.Out, o.Log = t.TempDir(), prefixWriter{os.Stderr, "e2e: "}
	start := time.Now()
	res, err := image.Build(ctx, o)
	if err != nil {
		t.Fatalf("image build: %v", err)
	}
	t.Logf("image with workload %q built in %v (kernel cached: %v)\n%s",
		o.Workload, time.Since(start).Round(time.Second), res.KernelCached, res.Summary())
	return res
}

// prefixWriter prefixes each write (the image package writes whole lines).
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
