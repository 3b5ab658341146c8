package ebsupload_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/hotpath-dev/hotpath/packer/ebsupload"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
)

// inflight is the EBS client with the PutSnapshotBlock calls in flight
// counted, and a pause in each so that the workers overlap.
type inflight struct {
	*ebs.Client
	mu       sync.Mutex
	now, max int
}

func (c *inflight) PutSnapshotBlock(ctx context.Context, in *ebs.PutSnapshotBlockInput, opts ...func(*ebs.Options)) (*ebs.PutSnapshotBlockOutput, error) {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.mu.Unlock()
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	time.Sleep(5 * time.Millisecond)
	return c.Client.PutSnapshotBlock(ctx, in, opts...)
}

// TestUploadWorkers: Workers bounds the blocks in flight (a user sets it
// to share a link), and left at 0 it is the default of 16, as are the
// attempts and the back-off: an upload with none of them set works.
func TestUploadWorkers(t *testing.T) {
	kinds := make([]blockKind, 40)
	for i := range kinds {
		kinds[i] = data
	}
	for _, tc := range []struct {
		name    string
		workers int
		maxIn   int // most blocks in flight allowed
		minIn   int // and seen at least once
	}{
		{"two workers", 2, 2, 2},
		{"defaults", 0, 16, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _, nData := writeImage(t, kinds, 0)
			f := fakeaws.New("AKIDTEST", "secret")
			defer f.Close()
			api := &inflight{Client: client(t, f, 3)}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := ebsupload.Upload(ctx, api, ebsupload.Options{Path: path, Workers: tc.workers, Timeout: 30 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != nData || api.max > tc.maxIn || api.max < tc.minIn {
				t.Errorf("%d sent (want %d), at most %d blocks in flight; want %d to %d", res.Sent, nData, api.max, tc.minIn, tc.maxIn)
			}
		})
	}
}

// TestUploadDescription: the description given is the snapshot's (what
// the EC2 console and describe-snapshots show).
func TestUploadDescription(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	const desc = "hotpath image 2026-12-01"
	if _, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{Path: path, Description: desc, Timeout: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if sn := f.Snapshots(); len(sn) != 1 || sn[0].Description != desc {
		t.Errorf("snapshots %+v, want one described %q", sn, desc)
	}
}

// TestUploadKMSKey: an encrypted upload with a KMS key is encrypted with
// that key, not the account's default one.
func TestUploadKMSKey(t *testing.T) {
	path, _, _ := writeImage(t, []blockKind{data}, 0)
	f := fakeaws.New("AKIDTEST", "secret")
	defer f.Close()
	const key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	if _, err := ebsupload.Upload(context.Background(), client(t, f, 3), ebsupload.Options{Path: path, Encrypted: true, KMSKeyARN: key, Timeout: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if sn := f.Snapshots(); len(sn) != 1 || !sn[0].Encrypted || sn[0].KmsKeyArn != key {
		t.Errorf("snapshots %+v, want one encrypted with %s", sn, key)
	}
}

// TestUploadAttempts: a block is tried Attempts times (each one HTTP call
// here: the SDK's own retryer is given a single attempt), no more and no
// fewer: it succeeds on the last one, and fails the upload when that one
// fails too.
func TestUploadAttempts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults int
		ok     bool
	}{
		{"succeeds on the last attempt", 2, true},
		{"fails after the last attempt", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, _, _ := writeImage(t, []blockKind{data}, 0)
			f := fakeaws.New("AKIDTEST", "secret")
			defer f.Close()
			for i := 0; i < tc.faults; i++ {
				f.Inject("PutSnapshotBlock", fakeaws.Fault{Status: 503})
			}
			_, err := ebsupload.Upload(context.Background(), client(t, f, 1), ebsupload.Options{
				Path: path, Workers: 1, Attempts: 3, Backoff: time.Millisecond, Timeout: 30 * time.Minute})
			if (err == nil) != tc.ok {
				t.Errorf("Upload: %v, want success %v", err, tc.ok)
			}
			if n := f.CountCalls("PutSnapshotBlock", 0); n != 3 {
				t.Errorf("PutSnapshotBlock called %d times, want 3 (Attempts)", n)
			}
		})
	}
}
