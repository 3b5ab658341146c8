package fakeaws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ebsError writes a restJson1 error the way EBS does: the code in the
// x-amzn-ErrorType header, the message (and reason) in the JSON body.
func ebsError(w http.ResponseWriter, f Fault) {
	if f.Code == "" {
		w.WriteHeader(f.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", f.Code)
	w.WriteHeader(f.Status)
	body := map[string]string{"message": f.Message}
	if f.Reason != "" {
		body["Reason"] = f.Reason
	}
	json.NewEncoder(w).Encode(body)
}

func invalid(reason, format string, args ...any) Fault {
	return Fault{Status: 400, Code: "ValidationException", Message: fmt.Sprintf(format, args...), Reason: reason}
}

// ebsAnswer is the outcome of one EBS operation: a fault, or the status,
// JSON body (nil: none) and headers of the answer.
type ebsAnswer struct {
	status int
	body   any
	header map[string]string
	fault  *Fault
}

func ebsFail(f Fault) ebsAnswer { return ebsAnswer{status: f.Status, fault: &f} }

// An ebsRequest is one EBS request: its path split at "/", its headers,
// and its whole body.
type ebsRequest struct {
	parts []string
	r     *http.Request
	body  []byte
}

// ebsActions are the EBS direct API operations the fake serves, each run
// under s.mu; ebsRoute maps a request to one of them.
var ebsActions = map[string]func(s *Server, q ebsRequest, region string) ebsAnswer{
	"StartSnapshot":    (*Server).startSnapshot,
	"PutSnapshotBlock": (*Server).putSnapshotBlock,
	"CompleteSnapshot": (*Server).completeSnapshot,
}

// ebsRoute names the operation of an EBS REST request ("" for none).
func ebsRoute(method string, parts []string) string {
	switch {
	case method == http.MethodPost && len(parts) == 1 && parts[0] == "snapshots":
		return "StartSnapshot"
	case method == http.MethodPut && len(parts) == 4 && parts[0] == "snapshots" && parts[2] == "blocks":
		return "PutSnapshotBlock"
	case method == http.MethodPost && len(parts) == 3 && parts[0] == "snapshots" && parts[1] == "completion":
		return "CompleteSnapshot"
	}
	return ""
}

func (s *Server) serveEBS(w http.ResponseWriter, r *http.Request, region string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	op := ebsRoute(r.Method, parts)
	if op == "" {
		http.Error(w, "fakeaws: unsupported EBS request "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	// Read the whole body before taking the lock: it may be large and slow.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	s.mu.Lock()
	a, injected := ebsAnswer{}, false
	if f, ok := s.fault(op); ok {
		a, injected = ebsFail(f), true
	}
	if !injected {
		a = ebsActions[op](s, ebsRequest{parts, r, body}, region)
	}
	s.record(r, op, region, a.status)
	onPut := s.OnPut
	s.mu.Unlock()
	if a.fault != nil {
		ebsError(w, *a.fault)
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	if a.body != nil {
		json.NewEncoder(w).Encode(a.body)
	}
	if op == "PutSnapshotBlock" && onPut != nil {
		i, _ := strconv.Atoi(parts[3])
		onPut(parts[1], int32(i))
	}
}

// startInput is StartSnapshot's JSON body.
type startInput struct {
	VolumeSize  *int64
	ClientToken string
	Description string
	Encrypted   bool
	KmsKeyArn   string
	Timeout     *int32
	Tags        []struct{ Key, Value string }
	// ParentSnapshotId is not supported: always a fresh snapshot.
	ParentSnapshotId string
}

func (s *Server) startSnapshot(q ebsRequest, region string) ebsAnswer {
	if ct := q.r.Header.Get("Content-Type"); ct != "application/json" {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "StartSnapshot: content type %q", ct))
	}
	var in startInput
	dec := json.NewDecoder(bytes.NewReader(q.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "StartSnapshot body: %v", err))
	}
	switch {
	case in.VolumeSize == nil || *in.VolumeSize < 1 || *in.VolumeSize > 65536:
		return ebsFail(invalid("INVALID_VOLUME_SIZE", "VolumeSize must be 1..65536 GiB"))
	case in.Timeout != nil && (*in.Timeout < 10 || *in.Timeout > 4320):
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "Timeout must be 10..4320 minutes"))
	case in.KmsKeyArn != "" && !in.Encrypted:
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "KmsKeyArn requires Encrypted"))
	case in.ParentSnapshotId != "":
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "fakeaws: ParentSnapshotId unsupported"))
	}
	if id, ok := s.tokens[in.ClientToken]; ok && in.ClientToken != "" {
		// Idempotent replay: the same snapshot again.
		sn := s.snapshots[id]
		if sn == nil || sn.VolumeSize != *in.VolumeSize || sn.Encrypted != in.Encrypted {
			return ebsFail(invalid("INVALID_PARAMETER_VALUE", "ClientToken reused with different parameters"))
		}
		return ebsAnswer{status: 201, body: startOut(sn)}
	}
	sn := &Snapshot{
		ID: s.nextID("snap"), Region: region, OwnerID: "123456789012",
		VolumeSize: *in.VolumeSize, Encrypted: in.Encrypted, KmsKeyArn: in.KmsKeyArn,
		Description: in.Description, ClientToken: in.ClientToken, Tags: map[string]string{},
		Blocks: map[int32][]byte{}, Sums: map[int32][]byte{}, State: "pending",
	}
	if in.Timeout != nil {
		sn.Timeout = *in.Timeout
	}
	if sn.Encrypted && sn.KmsKeyArn == "" {
		sn.KmsKeyArn = "arn:aws:kms:" + region + ":123456789012:key/default"
	}
	for _, t := range in.Tags {
		sn.Tags[t.Key] = t.Value
	}
	sn.deadline = s.clock().Add(time.Duration(sn.timeout()) * time.Minute)
	s.snapshots[sn.ID] = sn
	s.created(sn.ID)
	if in.ClientToken != "" {
		s.tokens[in.ClientToken] = sn.ID
	}
	return ebsAnswer{status: 201, body: startOut(sn)}
}

func (s *Server) putSnapshotBlock(q ebsRequest, region string) ebsAnswer {
	sn, f := s.pendingSnapshot(q.parts[1], region)
	if f != nil {
		return ebsFail(*f)
	}
	h := q.r.Header
	idx, err := strconv.ParseInt(q.parts[3], 10, 32)
	if err != nil || idx < 0 || idx*BlockSize >= sn.VolumeSize*gib {
		return ebsFail(invalid("INVALID_BLOCK", "block index %s outside the %d GiB volume", q.parts[3], sn.VolumeSize))
	}
	if ct := h.Get("Content-Type"); ct != "application/octet-stream" {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "content type %q", ct))
	}
	if dl := h.Get("X-Amz-Data-Length"); dl != strconv.Itoa(BlockSize) || len(q.body) != BlockSize {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "data length header %q, body %d bytes: must both be %d", dl, len(q.body), BlockSize))
	}
	if alg := h.Get("X-Amz-Checksum-Algorithm"); alg != "SHA256" {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "checksum algorithm %q", alg))
	}
	want, raw := b64sha(q.body)
	if got := h.Get("X-Amz-Checksum"); got != want {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "The value of the checksum %q does not match the block data (%s)", got, want))
	}
	if p := h.Get("X-Amz-Progress"); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 100 {
			return ebsFail(invalid("INVALID_PARAMETER_VALUE", "progress %q", p))
		}
	}
	sn.Blocks[int32(idx)] = q.body
	sn.Sums[int32(idx)] = raw
	sn.deadline = s.clock().Add(time.Duration(sn.timeout()) * time.Minute)
	return ebsAnswer{status: 201, header: map[string]string{"X-Amz-Checksum": want, "X-Amz-Checksum-Algorithm": "SHA256"}}
}

func (s *Server) completeSnapshot(q ebsRequest, region string) ebsAnswer {
	sn, f := s.pendingSnapshot(q.parts[2], region)
	if f != nil {
		return ebsFail(*f)
	}
	h := q.r.Header
	if h.Get("X-Amz-Checksum-Algorithm") != "SHA256" || h.Get("X-Amz-Checksum-Aggregation-Method") != "LINEAR" {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "checksum algorithm %q, aggregation %q: want SHA256, LINEAR",
			h.Get("X-Amz-Checksum-Algorithm"), h.Get("X-Amz-Checksum-Aggregation-Method")))
	}
	if got, want := h.Get("X-Amz-ChangedBlocksCount"), strconv.Itoa(len(sn.Blocks)); got != want {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "ChangedBlocksCount %s, but %s blocks were written", got, want))
	}
	if got, want := h.Get("X-Amz-Checksum"), linear(sn); got != want {
		return ebsFail(invalid("INVALID_PARAMETER_VALUE", "aggregate checksum %q does not match the written blocks (%s)", got, want))
	}
	sn.Completed = true
	sn.pendingPolls = s.PendingPolls
	sn.failWith = s.CompleteError
	sn.ChangedBlocks = int32(len(sn.Blocks))
	sn.Checksum = h.Get("X-Amz-Checksum")
	return ebsAnswer{status: 202, body: map[string]string{"Status": "pending"}}
}

func (s *Server) pendingSnapshot(id, region string) (*Snapshot, *Fault) {
	sn, ok := s.snapshots[id]
	if !ok || sn.Region != region {
		return nil, &Fault{Status: 404, Code: "ResourceNotFoundException", Message: "snapshot " + id + " not found", Reason: "SNAPSHOT_NOT_FOUND"}
	}
	s.expire(sn)
	if sn.State == "error" {
		return nil, &Fault{Status: 400, Code: "ValidationException", Message: "snapshot " + id + " is in state error (" + sn.StateMessage + ")", Reason: "INVALID_SNAPSHOT_ID"}
	}
	if sn.Completed {
		return nil, &Fault{Status: 400, Code: "ValidationException", Message: "snapshot " + id + " is not pending", Reason: "INVALID_SNAPSHOT_ID"}
	}
	return sn, nil
}

// linear is the LINEAR aggregate of the stored blocks: SHA-256 over their
// raw digests in block-index order.
func linear(sn *Snapshot) string {
	idx := make([]int, 0, len(sn.Sums))
	for i := range sn.Sums {
		idx = append(idx, int(i))
	}
	sort.Ints(idx)
	var cat []byte
	for _, i := range idx {
		cat = append(cat, sn.Sums[int32(i)]...)
	}
	s, _ := b64sha(cat)
	return s
}

func startOut(sn *Snapshot) map[string]any {
	out := map[string]any{
		"SnapshotId":  sn.ID,
		"OwnerId":     sn.OwnerID,
		"Status":      "pending",
		"StartTime":   1.7e9,
		"VolumeSize":  sn.VolumeSize,
		"BlockSize":   BlockSize,
		"Description": sn.Description,
		"SseType":     "NONE",
	}
	if sn.Encrypted {
		out["KmsKeyArn"] = sn.KmsKeyArn
		out["SseType"] = "SSE_EBS"
	}
	var tags []map[string]string
	for _, k := range sortedKeys(sn.Tags) {
		tags = append(tags, map[string]string{"Key": k, "Value": sn.Tags[k]})
	}
	if tags != nil {
		out["Tags"] = tags
	}
	return out
}
