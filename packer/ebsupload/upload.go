// Package ebsupload writes a raw disk image into a new EBS snapshot with the
// EBS direct APIs (StartSnapshot, PutSnapshotBlock, CompleteSnapshot).
//
// The direct APIs skip the S3 bucket, the import role and the conversion
// service that ec2:ImportSnapshot needs, and they let the uploader leave out
// the blocks a sparse image never wrote. The protocol is strict, so this
// package follows it to the letter: the block size comes from StartSnapshot,
// every block is exactly that long (the last one zero-padded), every block
// carries its own base64 SHA-256, and CompleteSnapshot carries the number of
// blocks written and the LINEAR aggregate: the SHA-256 of the concatenated
// raw per-block digests, in block-index order.
package ebsupload

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/aws/aws-sdk-go-v2/service/ebs/types"
)

// GiB is the unit of EBS volume sizes.
const GiB = 1 << 30

// API is the part of the EBS direct API client the upload uses; *ebs.Client
// implements it.
type API interface {
	StartSnapshot(context.Context, *ebs.StartSnapshotInput, ...func(*ebs.Options)) (*ebs.StartSnapshotOutput, error)
	PutSnapshotBlock(context.Context, *ebs.PutSnapshotBlockInput, ...func(*ebs.Options)) (*ebs.PutSnapshotBlockOutput, error)
	CompleteSnapshot(context.Context, *ebs.CompleteSnapshotInput, ...func(*ebs.Options)) (*ebs.CompleteSnapshotOutput, error)
}

// Options describe one upload.
type Options struct {
	// Path is the raw disk image.
	Path string
	// VolumeSizeGiB is the snapshot's volume size; 0 means the image size
	// rounded up to whole GiB. It may not be smaller than that.
	VolumeSizeGiB int64
	Description   string
	Tags          map[string]string
	// Encrypted snapshots get every block of the image written, zeros
	// included; unencrypted ones skip holes and all-zero blocks, which read
	// back as zeros anyway.
	Encrypted bool
	KMSKeyARN string
	// ClientToken makes StartSnapshot idempotent across retries; empty
	// means a random one per upload.
	ClientToken string
	// Timeout is how long EBS keeps the snapshot pending without a
	// CompleteSnapshot before it gives up on it (10 minutes to 72 hours).
	Timeout time.Duration
	// Workers is the number of blocks in flight (default 16).
	Workers int
	// Attempts is how often one block is tried before the upload fails
	// (default 5), on top of the retries the SDK's retryer does inside each
	// attempt. The SDK retries throttling and 5xx; this outer loop also
	// covers what it does not, such as a checksum mismatch after the data
	// was damaged in transit or a connection dropped mid-body.
	Attempts int
	// Backoff is the first pause between attempts of one block; it doubles
	// up to 30 s (default 500 ms).
	Backoff time.Duration
	// Progress, if set, is called after each block is done (from several
	// goroutines, never concurrently).
	Progress func(Progress)
	// OnStart, if set, is called with the snapshot id as soon as
	// StartSnapshot returns, so that a caller can clean up after a failure.
	OnStart func(snapshotID string)
}

// Progress is a snapshot of an upload's counters.
type Progress struct {
	Done, Total int   // blocks handled (sent or skipped) of all blocks
	Sent        int   // blocks written
	BytesSent   int64 // bytes written
	Elapsed     time.Duration
}

// Result describes a completed upload.
type Result struct {
	SnapshotID    string
	VolumeSizeGiB int64
	BlockSize     int
	Blocks        int // blocks in the image
	Sent          int // blocks written (ChangedBlocksCount)
	Checksum      string
	Status        types.Status
}

// RoundUpGiB returns size rounded up to whole GiB, at least 1.
func RoundUpGiB(size int64) int64 {
	g := (size + GiB - 1) / GiB
	if g < 1 {
		g = 1
	}
	return g
}

// Upload writes the image at o.Path into a new snapshot. On error after
// StartSnapshot, the snapshot id is in the returned Result (and was passed
// to o.OnStart) so the caller can delete it.
func Upload(ctx context.Context, api API, o Options) (*Result, error) {
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	f, err := os.Open(o.Path)
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat image: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, fmt.Errorf("image %s is empty", o.Path)
	}
	minGiB := RoundUpGiB(size)
	volGiB := o.VolumeSizeGiB
	if volGiB == 0 {
		volGiB = minGiB
	}
	if volGiB < minGiB {
		return nil, fmt.Errorf("volume size %d GiB is smaller than the image (%d bytes, %d GiB)", volGiB, size, minGiB)
	}
	// Map the data extents before any worker starts: holes are decided by
	// the file system, not by reading, so a 1 GiB image with 20 MiB of data
	// costs 20 MiB of reads.
	extents, err := dataExtents(f, size)
	if err != nil {
		return nil, fmt.Errorf("map data extents of %s: %w", o.Path, err)
	}

	token := o.ClientToken
	if token == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("client token: %w", err)
		}
		token = hex.EncodeToString(b[:])
	}
	in := &ebs.StartSnapshotInput{
		VolumeSize:  aws.Int64(volGiB),
		ClientToken: aws.String(token),
		Encrypted:   aws.Bool(o.Encrypted),
		Tags:        tagList(o.Tags),
	}
	if o.Description != "" {
		in.Description = aws.String(o.Description)
	}
	if o.KMSKeyARN != "" {
		in.KmsKeyArn = aws.String(o.KMSKeyARN)
	}
	if o.Timeout > 0 {
		in.Timeout = aws.Int32(int32(o.Timeout / time.Minute))
	}
	out, err := api.StartSnapshot(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("StartSnapshot: %w", err)
	}
	res := &Result{SnapshotID: aws.ToString(out.SnapshotId), VolumeSizeGiB: volGiB}
	if res.SnapshotID == "" {
		return nil, errors.New("StartSnapshot returned no snapshot id")
	}
	if o.OnStart != nil {
		o.OnStart(res.SnapshotID)
	}
	bs := int(aws.ToInt32(out.BlockSize))
	if bs <= 0 || bs%512 != 0 {
		return res, fmt.Errorf("StartSnapshot %s: unusable block size %d", res.SnapshotID, bs)
	}
	res.BlockSize = bs
	res.Blocks = int((size + int64(bs) - 1) / int64(bs))

	sums, sent, err := putBlocks(ctx, api, f, size, extents, res, o)
	if err != nil {
		return res, expired(err, res.SnapshotID, o.Timeout)
	}
	res.Sent = sent
	// LINEAR aggregation: hash the raw digests of the written blocks in
	// block-index order.
	agg := sha256.New()
	for i := range sums {
		if sums[i] != nil {
			agg.Write(sums[i])
		}
	}
	res.Checksum = base64.StdEncoding.EncodeToString(agg.Sum(nil))
	cout, err := api.CompleteSnapshot(ctx, &ebs.CompleteSnapshotInput{
		SnapshotId:                aws.String(res.SnapshotID),
		ChangedBlocksCount:        aws.Int32(int32(sent)),
		Checksum:                  aws.String(res.Checksum),
		ChecksumAlgorithm:         types.ChecksumAlgorithmChecksumAlgorithmSha256,
		ChecksumAggregationMethod: types.ChecksumAggregationMethodChecksumAggregationLinear,
	})
	if err != nil {
		return res, expired(fmt.Errorf("CompleteSnapshot %s: %w", res.SnapshotID, err), res.SnapshotID, o.Timeout)
	}
	res.Status = cout.Status
	if res.Status == types.StatusError {
		return res, fmt.Errorf("CompleteSnapshot %s: snapshot status %s", res.SnapshotID, res.Status)
	}
	return res, nil
}

// expired explains a refusal that says the snapshot is no longer pending
// (a ValidationException with reason INVALID_SNAPSHOT_ID): EBS cancels a
// snapshot, which then ends in state error, when it receives no block, or
// no CompleteSnapshot after its last block, within its timeout (EBS direct
// APIs reference, StartSnapshot, Timeout: 60 minutes unless given).
func expired(err error, snap string, timeout time.Duration) error {
	var v *types.ValidationException
	if !errors.As(err, &v) || v.Reason != types.ValidationExceptionReasonInvalidSnapshotId {
		return err
	}
	t := "60m0s, the EBS default"
	if timeout > 0 {
		t = timeout.String()
	}
	return fmt.Errorf("%w: snapshot %s is no longer pending: EBS cancels a snapshot that receives no block, "+
		"or no CompleteSnapshot after its last block, within its timeout (%s)", err, snap, t)
}

func tagList(m map[string]string) []types.Tag {
	if len(m) == 0 {
		return nil
	}
	keys := sortedKeys(m)
	tags := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return tags
}

// putBlocks writes the blocks with o.Workers goroutines and returns the raw
// digest of every written block (nil for skipped ones) and the count.
func putBlocks(ctx context.Context, api API, f *os.File, size int64, extents []extent, res *Result, o Options) ([][]byte, int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	bs := res.BlockSize
	sums := make([][]byte, res.Blocks)
	var (
		mu        sync.Mutex // serialises Progress calls
		done      atomic.Int64
		sent      atomic.Int64
		bytesSent atomic.Int64
		start     = time.Now()
	)
	report := func() {
		if o.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		o.Progress(Progress{
			Done: int(done.Load()), Total: res.Blocks, Sent: int(sent.Load()),
			BytesSent: bytesSent.Load(), Elapsed: time.Since(start),
		})
	}

	idx := make(chan int)
	go func() {
		defer close(idx)
		for i := 0; i < res.Blocks; i++ {
			select {
			case idx <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bs)
			for i := range idx {
				off := int64(i) * int64(bs)
				if !o.Encrypted && !overlaps(extents, off, off+int64(bs)) {
					done.Add(1)
					report()
					continue
				}
				if err := readBlock(f, buf, off, size); err != nil {
					cancel(fmt.Errorf("read block %d: %w", i, err))
					return
				}
				if !o.Encrypted && allZero(buf) {
					done.Add(1)
					report()
					continue
				}
				sum := sha256.Sum256(buf)
				if err := putBlock(ctx, api, res.SnapshotID, i, buf, sum[:], o); err != nil {
					cancel(err)
					return
				}
				sums[i] = sum[:]
				sent.Add(1)
				bytesSent.Add(int64(bs))
				done.Add(1)
				report()
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, 0, err
	}
	return sums, int(sent.Load()), nil
}

// readBlock fills buf with the block at off, zero-padding past the end of
// the image: EBS takes whole blocks only.
func readBlock(f *os.File, buf []byte, off, size int64) error {
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if int64(n) < int64(len(buf)) && off+int64(n) < size {
		return fmt.Errorf("short read at %d: %d bytes", off, n)
	}
	clear(buf[n:])
	return nil
}

func allZero(b []byte) bool {
	// Compare in 4 KiB strides against a zero page: bytes.Equal is
	// vectorised, a byte loop is not.
	var zero [4096]byte
	for len(b) > 0 {
		n := min(len(b), len(zero))
		if !bytes.Equal(b[:n], zero[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// putBlock writes one block, trying up to o.Attempts times with doubling
// back-off between attempts.
func putBlock(ctx context.Context, api API, snap string, i int, buf, sum []byte, o Options) error {
	b64 := base64.StdEncoding.EncodeToString(sum)
	wait := o.Backoff
	var err error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		_, err = api.PutSnapshotBlock(ctx, &ebs.PutSnapshotBlockInput{
			SnapshotId: aws.String(snap),
			BlockIndex: aws.Int32(int32(i)),
			// bytes.Reader is seekable, so the SDK's own retries can
			// rewind the body.
			BlockData:         bytes.NewReader(buf),
			DataLength:        aws.Int32(int32(len(buf))),
			Checksum:          aws.String(b64),
			ChecksumAlgorithm: types.ChecksumAlgorithmChecksumAlgorithmSha256,
		})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !Retryable(err) || attempt == o.Attempts {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("PutSnapshotBlock %s block %d: %w", snap, i, context.Cause(ctx))
		}
		wait = min(2*wait, 30*time.Second)
	}
	return fmt.Errorf("PutSnapshotBlock %s block %d: %w", snap, i, err)
}
