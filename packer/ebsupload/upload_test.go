package ebsupload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/hotpath-dev/hotpath/packer/ebsupload"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
)

const bs = fakeaws.BlockSize

// client returns a real EBS client talking to the fake, with the SDK's
// standard retryer (attempts as given, tiny back-off so tests are quick).
func client(t *testing.T, f *fakeaws.Server, attempts int) *ebs.Client {
	t.Helper()
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider(f.AccessKey, "secret", ""),
		BaseEndpoint: aws.String(f.URL),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = 5 * time.Millisecond
				o.RateLimiter = ratelimit.None
			})
		},
	}
	return ebs.NewFromConfig(cfg)
}

// layout describes a test image block by block.
type blockKind int

const (
	hole  blockKind = iota // never written: a hole in the sparse file
	zeros                  // written with zeros: allocated but all zero
	data                   // random bytes
)

// writeImage writes a sparse image following kinds, with a tail of
// `tail` data bytes after the last full block (0: none), and returns its
// path, its sha256 and how many blocks hold data.
func writeImage(t *testing.T, kinds []blockKind, tail int) (string, string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	size := int64(len(kinds))*bs + int64(tail)
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	nData := 0
	buf := make([]byte, bs)
	for i, k := range kinds {
		switch k {
		case zeros:
			clear(buf)
		case data:
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
			buf[0] = 1 // never all zero
			nData++
		default:
			continue
		}
		if _, err := f.WriteAt(buf, int64(i)*bs); err != nil {
			t.Fatal(err)
		}
	}
	if tail > 0 {
		tb := bytes.Repeat([]byte{0xa5}, tail)
		if _, err := f.WriteAt(tb, int64(len(kinds))*bs); err != nil {
			t.Fatal(err)
		}
		nData++
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil)), nData
}

func TestUpload(t *testing.T) {
	kinds := []blockKind{data, hole, hole, zeros, data, data, hole, zeros, data}
	for _, tc := range []struct {
		name      string
		encrypted bool
		tail      int
		workers   int
	}{
		{"sparse aligned", false, 0, 4},
		{"sparse with partial last block", false, 12345, 3},
		{"encrypted", true, 777, 5},
		{"one worker", false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, sum, nData := writeImage(t, kinds, tc.tail)
			f := fakeaws.New("AKIDTEST", "secret")
			defer f.Close()
			var (
				mu    sync.Mutex
				last  ebsupload.Progress
				calls int
			)
			res, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{
				Path: path, Encrypted: tc.encrypted, Workers: tc.workers,
				Tags:     map[string]string{"Name": "test", "b": "2"},
				Timeout:  30 * time.Minute,
				Progress: func(p ebsupload.Progress) { mu.Lock(); last, calls = p, calls+1; mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			blocks := len(kinds)
			if tc.tail > 0 {
				blocks++
			}
			want := nData
			if tc.encrypted {
				want = blocks // every block, zeros and holes included
			}
			if res.BlockSize != bs || res.Blocks != blocks || res.Sent != want || res.VolumeSizeGiB != 1 {
				t.Errorf("result %+v, want block size %d, %d blocks, %d sent, 1 GiB", res, bs, blocks, want)
			}
			if calls != blocks || last.Done != blocks || last.Total != blocks || last.Sent != want || last.BytesSent != int64(want)*bs {
				t.Errorf("progress: %d calls, last %+v", calls, last)
			}
			if n := f.CountCalls("PutSnapshotBlock", 201); n != want {
				t.Errorf("%d blocks stored, want %d", n, want)
			}
			snaps := f.Snapshots()
			if len(snaps) != 1 {
				t.Fatalf("%d snapshots", len(snaps))
			}
			sn := snaps[0]
			if !sn.Completed || sn.Encrypted != tc.encrypted || sn.Tags["Name"] != "test" || sn.Timeout != 30 || sn.ClientToken == "" {
				t.Errorf("snapshot %+v", sn)
			}
			size := int64(len(kinds))*bs + int64(tc.tail)
			got, err := f.SnapshotSHA256(res.SnapshotID, size)
			if err != nil {
				t.Fatal(err)
			}
			if got != sum {
				t.Errorf("reassembled snapshot sha256 %s, image %s", got, sum)
			}
			if n := f.BlocksBeyond(res.SnapshotID, size); n != 0 {
				t.Errorf("%d non-zero blocks past the end of the image", n)
			}
			// The last block is padded with zeros, never with what the
			// worker's buffer held before: the volume reads back as the
			// image followed by zeros up to the block's end.
			padded := (size + bs - 1) / bs * bs
			img, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			wantPadded := sha256.Sum256(append(img, make([]byte, padded-size)...))
			if got, _ := f.SnapshotSHA256(res.SnapshotID, padded); got != hex.EncodeToString(wantPadded[:]) {
				t.Errorf("the last block past the image's end is not zeros: sha256 %s", got)
			}
		})
	}
}

// Throttling and server errors, from the SDK's retryer's view and beyond
// it: the SDK gets 2 attempts per call, so a block that fails three times
// in a row is saved by the upload's own retry loop.
func TestUploadRetries(t *testing.T) {
	kinds := []blockKind{data, data, data, hole, data, data, data, data}
	path, sum, nData := writeImage(t, kinds, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	f.Inject("StartSnapshot", fakeaws.Fault{Status: 503})
	f.Inject("PutSnapshotBlock",
		fakeaws.Fault{Status: 429, Code: "RequestThrottledException", Message: "slow down", Reason: "ACCOUNT_THROTTLED"},
		fakeaws.Fault{Status: 400, Code: "ThrottlingException", Message: "Rate exceeded"},
		fakeaws.Fault{Status: 503},
		fakeaws.Fault{Status: 500, Code: "InternalServerException", Message: "oops"},
		fakeaws.Fault{Status: 502},
		fakeaws.Fault{Status: 400, Code: "ValidationException", Message: "The checksum of the block does not match", Reason: "INVALID_PARAMETER_VALUE"},
		fakeaws.Fault{Status: 429, Code: "RequestThrottledException", Message: "slow down"},
		fakeaws.Fault{Status: 429, Code: "RequestThrottledException", Message: "slow down"},
	)
	f.Inject("CompleteSnapshot", fakeaws.Fault{Status: 500, Code: "InternalServerException", Message: "try again"})
	res, err := ebsupload.Upload(context.Background(), client(t, f, 2), ebsupload.Options{
		Path: path, Workers: 2, Attempts: 6, Backoff: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != nData {
		t.Errorf("sent %d, want %d", res.Sent, nData)
	}
	failedPuts := 0
	for _, c := range f.Calls() {
		if c.Op == "PutSnapshotBlock" && c.Status != 201 {
			failedPuts++
		}
	}
	if failedPuts != 8 {
		t.Errorf("%d failed PutSnapshotBlock calls answered, want all 8 injected", failedPuts)
	}
	if n := f.CountCalls("StartSnapshot", 0); n != 2 {
		t.Errorf("StartSnapshot called %d times, want 2 (one retried 503)", n)
	}
	if n := len(f.Snapshots()); n != 1 {
		t.Errorf("%d snapshots: a retried StartSnapshot must not create a second one", n)
	}
	got, _ := f.SnapshotSHA256(res.SnapshotID, int64(len(kinds))*bs)
	if got != sum {
		t.Errorf("reassembled sha256 %s, want %s", got, sum)
	}
}

// A permanent failure stops the upload, reports the snapshot id for
// clean-up, and does not complete the snapshot.
func TestUploadPermanentFailure(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data, data, data, data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	f.FailAlways("PutSnapshotBlock", fakeaws.Fault{Status: 403, Code: "AccessDeniedException", Message: "no", Reason: "UNAUTHORIZED_ACCOUNT"})
	var started string
	res, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{
		Path: path, Workers: 2, Attempts: 5, Backoff: time.Millisecond,
		OnStart: func(id string) { started = id },
	})
	if err == nil {
		t.Fatal("upload succeeded")
	}
	if ebsupload.Retryable(err) {
		t.Errorf("AccessDenied classified retryable: %v", err)
	}
	if res == nil || res.SnapshotID == "" || res.SnapshotID != started {
		t.Errorf("result %+v, OnStart %q", res, started)
	}
	if n := f.CountCalls("PutSnapshotBlock", 0); n > 2 {
		t.Errorf("%d PutSnapshotBlock calls: a permanent error must not be retried", n)
	}
	if n := f.CountCalls("CompleteSnapshot", 0); n != 0 {
		t.Errorf("CompleteSnapshot called after a failed upload")
	}
}

// TestUploadExpired: EBS cancels a pending snapshot that receives no
// block (or no CompleteSnapshot) within its timeout; the upload then
// fails at once, naming the snapshot and the timeout, instead of
// retrying a snapshot that is gone. The fake's clock jumps past the
// timeout after the first block (the SDK, refused for clock skew,
// corrects its own clock from the fake's Date and goes on).
func TestUploadExpired(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data, data, data, data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	var (
		mu   sync.Mutex
		skew time.Duration
	)
	f.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) })
	f.OnPut = func(string, int32) { mu.Lock(); skew = 31 * time.Minute; mu.Unlock() }
	res, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{
		Path: path, Workers: 1, Attempts: 5, Backoff: time.Millisecond, Timeout: 30 * time.Minute,
	})
	if err == nil {
		t.Fatal("upload into an expired snapshot succeeded")
	}
	for _, want := range []string{res.SnapshotID + " is no longer pending", "timeout (30m0s)", "state error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := f.CountCalls("sigv4:RequestTimeTooSkewed", 403); n == 0 {
		t.Errorf("no request was refused for clock skew: the test did not move the clock")
	}
	if n := f.CountCalls("PutSnapshotBlock", 400); n != 1 {
		t.Errorf("%d refused PutSnapshotBlock calls, want 1: a cancelled snapshot is not retried", n)
	}
	if n := f.CountCalls("CompleteSnapshot", 0); n != 0 {
		t.Errorf("CompleteSnapshot called after the snapshot expired")
	}
}

func TestUploadCancel(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data, data, data, data, data, data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	f.OnPut = func(string, int32) { cancel() }
	_, err := ebsupload.Upload(ctx, client(t, f, 3), ebsupload.Options{Path: path, Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := f.CountCalls("CompleteSnapshot", 0); n != 0 {
		t.Errorf("CompleteSnapshot called after cancel")
	}
}

func TestUploadVolumeSize(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	res, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{Path: path, VolumeSizeGiB: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.VolumeSizeGiB != 8 || f.Snapshots()[0].VolumeSize != 8 {
		t.Errorf("volume %d GiB", res.VolumeSizeGiB)
	}
}

func TestRoundUpGiB(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{
		{1, 1}, {ebsupload.GiB, 1}, {ebsupload.GiB + 1, 2}, {0, 1}, {5*ebsupload.GiB - 1, 5},
	} {
		if got := ebsupload.RoundUpGiB(tc.in); got != tc.want {
			t.Errorf("RoundUpGiB(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
