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

func (s *Server) serveEBS(w http.ResponseWriter, r *http.Request, region string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var op string
	switch {
	case r.Method == http.MethodPost && len(parts) == 1 && parts[0] == "snapshots":
		op = "StartSnapshot"
	case r.Method == http.MethodPut && len(parts) == 4 && parts[0] == "snapshots" && parts[2] == "blocks":
		op = "PutSnapshotBlock"
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "snapshots" && parts[1] == "completion":
		op = "CompleteSnapshot"
	default:
		http.Error(w, "fakeaws: unsupported EBS request "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	// Read the whole body before taking the lock: it may be large and slow.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	s.mu.Lock()
	status, resp, hdr, f := s.ebsOp(op, parts, r, body, region)
	s.record(r, op, region, status)
	onPut := s.OnPut
	s.mu.Unlock()
	if f != nil {
		ebsError(w, *f)
		return
	}
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	if resp != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	if resp != nil {
		json.NewEncoder(w).Encode(resp)
	}
	if op == "PutSnapshotBlock" && onPut != nil {
		i, _ := strconv.Atoi(parts[3])
		onPut(parts[1], int32(i))
	}
}

// ebsOp runs one EBS operation under s.mu. It returns either a fault or
// the status, JSON body and headers of the answer.
func (s *Server) ebsOp(op string, parts []string, r *http.Request, body []byte, region string) (int, any, map[string]string, *Fault) {
	fail := func(f Fault) (int, any, map[string]string, *Fault) { return f.Status, nil, nil, &f }
	if f, ok := s.fault(op); ok {
		return fail(f)
	}
	switch op {
	case "StartSnapshot":
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			return fail(invalid("INVALID_PARAMETER_VALUE", "StartSnapshot: content type %q", ct))
		}
		var in struct {
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
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return fail(invalid("INVALID_PARAMETER_VALUE", "StartSnapshot body: %v", err))
		}
		switch {
		case in.VolumeSize == nil || *in.VolumeSize < 1 || *in.VolumeSize > 65536:
			return fail(invalid("INVALID_VOLUME_SIZE", "VolumeSize must be 1..65536 GiB"))
		case in.Timeout != nil && (*in.Timeout < 10 || *in.Timeout > 4320):
			return fail(invalid("INVALID_PARAMETER_VALUE", "Timeout must be 10..4320 minutes"))
		case in.KmsKeyArn != "" && !in.Encrypted:
			return fail(invalid("INVALID_PARAMETER_VALUE", "KmsKeyArn requires Encrypted"))
		case in.ParentSnapshotId != "":
			return fail(invalid("INVALID_PARAMETER_VALUE", "fakeaws: ParentSnapshotId unsupported"))
		}
		if id, ok := s.tokens[in.ClientToken]; ok && in.ClientToken != "" {
			// Idempotent replay: the same snapshot again.
			sn := s.snapshots[id]
			if sn == nil || sn.VolumeSize != *in.VolumeSize || sn.Encrypted != in.Encrypted {
				return fail(invalid("INVALID_PARAMETER_VALUE", "ClientToken reused with different parameters"))
			}
			return 201, startOut(sn), nil, nil
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
		s.snapshots[sn.ID] = sn
		if in.ClientToken != "" {
			s.tokens[in.ClientToken] = sn.ID
		}
		return 201, startOut(sn), nil, nil

	case "PutSnapshotBlock":
		sn, f := s.pendingSnapshot(parts[1], region)
		if f != nil {
			return fail(*f)
		}
		idx, err := strconv.ParseInt(parts[3], 10, 32)
		if err != nil || idx < 0 || idx*BlockSize >= sn.VolumeSize*gib {
			return fail(invalid("INVALID_BLOCK", "block index %s outside the %d GiB volume", parts[3], sn.VolumeSize))
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
			return fail(invalid("INVALID_PARAMETER_VALUE", "content type %q", ct))
		}
		if dl := r.Header.Get("X-Amz-Data-Length"); dl != strconv.Itoa(BlockSize) || len(body) != BlockSize {
			return fail(invalid("INVALID_PARAMETER_VALUE", "data length header %q, body %d bytes: must both be %d", dl, len(body), BlockSize))
		}
		if alg := r.Header.Get("X-Amz-Checksum-Algorithm"); alg != "SHA256" {
			return fail(invalid("INVALID_PARAMETER_VALUE", "checksum algorithm %q", alg))
		}
		want, raw := b64sha(body)
		if got := r.Header.Get("X-Amz-Checksum"); got != want {
			return fail(invalid("INVALID_PARAMETER_VALUE", "The value of the checksum %q does not match the block data (%s)", got, want))
		}
		if p := r.Header.Get("X-Amz-Progress"); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 100 {
				return fail(invalid("INVALID_PARAMETER_VALUE", "progress %q", p))
			}
		}
		sn.Blocks[int32(idx)] = body
		sn.Sums[int32(idx)] = raw
		return 201, nil, map[string]string{"X-Amz-Checksum": want, "X-Amz-Checksum-Algorithm": "SHA256"}, nil

	case "CompleteSnapshot":
		sn, f := s.pendingSnapshot(parts[2], region)
		if f != nil {
			return fail(*f)
		}
		if r.Header.Get("X-Amz-Checksum-Algorithm") != "SHA256" || r.Header.Get("X-Amz-Checksum-Aggregation-Method") != "LINEAR" {
			return fail(invalid("INVALID_PARAMETER_VALUE", "checksum algorithm %q, aggregation %q: want SHA256, LINEAR",
				r.Header.Get("X-Amz-Checksum-Algorithm"), r.Header.Get("X-Amz-Checksum-Aggregation-Method")))
		}
		if got, want := r.Header.Get("X-Amz-ChangedBlocksCount"), strconv.Itoa(len(sn.Blocks)); got != want {
			return fail(invalid("INVALID_PARAMETER_VALUE", "ChangedBlocksCount %s, but %s blocks were written", got, want))
		}
		if got, want := r.Header.Get("X-Amz-Checksum"), linear(sn); got != want {
			return fail(invalid("INVALID_PARAMETER_VALUE", "aggregate checksum %q does not match the written blocks (%s)", got, want))
		}
		sn.Completed = true
		sn.pendingPolls = s.PendingPolls
		sn.ChangedBlocks = int32(len(sn.Blocks))
		sn.Checksum = r.Header.Get("X-Amz-Checksum")
		return 202, map[string]string{"Status": "pending"}, nil, nil
	}
	panic("unreachable")
}

func (s *Server) pendingSnapshot(id, region string) (*Snapshot, *Fault) {
	sn, ok := s.snapshots[id]
	if !ok || sn.Region != region {
		return nil, &Fault{Status: 404, Code: "ResourceNotFoundException", Message: "snapshot " + id + " not found", Reason: "SNAPSHOT_NOT_FOUND"}
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
