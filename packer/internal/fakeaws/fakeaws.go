// Package fakeaws is a strict, in-memory stand-in for the two AWS APIs the
// AMI post-processor talks to: the EBS direct REST API (restJson1) and the
// EC2 Query API (form-encoded requests, XML responses). Tests point the real
// SDK clients at it with a base endpoint, so what is checked is the wire
// format the SDK produces, not a Go interface.
//
// Strict means: it rejects what AWS rejects for the operations used —
// blocks that are not exactly the snapshot's block size, a block checksum
// that does not match its bytes, a CompleteSnapshot whose changed-block
// count or LINEAR aggregate checksum disagrees with what was stored, an AMI
// referring to a snapshot that is not completed, deleting a snapshot an AMI
// still uses. Requests must carry a valid SigV4 signature (recomputed with
// the key's secret, sigv4.go) whose scope names the right service and
// whose time is within 5 minutes of the fake's clock; the region of the
// scope is the region the resource lives in, so one server plays every
// region.
//
// It is also as unkind as AWS where the plugin depends on it: an
// aws:ec2:image parameter is validated after PutParameter has answered
// (ssm.go), deregistration protection with cooldown outlives its
// disabling by 24 hours, encrypted AMIs cannot be made public, snapshots
// can end in state error and pending ones expire (ec2.go, ebs.go), what
// the API has just created is not found by its first lookups (eventual
// consistency, eventual.go), auto rollback is refused where Auto Scaling
// refuses it and CloudWatch alarms can roll a refresh back (fleet.go,
// alarms.go). Each behaviour cites the AWS documentation it follows. The
// fake's clock is injectable (SetClock).
package fakeaws

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

// BlockSize is what StartSnapshot answers, as EBS does.
const BlockSize = 524288

const gib = 1 << 30

// Fault is an error response to inject.
type Fault struct {
	Status  int
	Code    string // error code; empty sends a bare status with no body
	Message string
	Reason  string // EBS ValidationException reason
}

// Snapshot is a snapshot as the fake stores it.
type Snapshot struct {
	ID, Region, OwnerID string
	VolumeSize          int64
	Encrypted           bool
	KmsKeyArn           string
	Description         string
	ClientToken         string
	Timeout             int32
	Tags                map[string]string
	// VolumeUsers and VolumeGroups have create-volume permission.
	VolumeUsers, VolumeGroups []string
	Blocks                    map[int32][]byte
	Sums                      map[int32][]byte // raw SHA-256 per stored block
	State                     string           // pending, completed, error
	// StateMessage says why a snapshot is in state error.
	StateMessage  string
	ChangedBlocks int32
	Checksum      string
	// polls left before a completed upload reports "completed"
	pendingPolls int
	// failWith, when set, is the status message the completed upload ends
	// in state error with (Server.CompleteError when it was completed).
	failWith string
	// deadline is when EBS cancels the snapshot if no block and no
	// CompleteSnapshot came by then.
	deadline time.Time
	// Completed is set by a successful CompleteSnapshot.
	Completed bool
}

// Image is an AMI as the fake stores it.
type Image struct {
	ID, Region, Name, Description string
	Architecture, Virtualization  string
	RootDevice, BootMode, Imds    string
	SriovNetSupport               string
	EnaSupport                    bool
	SnapshotID, VolumeType        string
	VolumeSize                    int64
	DeleteOnTermination           bool
	Tags                          map[string]string
	LaunchUsers, LaunchGroups     []string
	LaunchOrgs, LaunchOUs         []string
	Tpm, DeprecateAt              string
	Protected, ProtectedCooldown  bool
	// ProtectedUntil is when the cooldown of a disabled protection ends:
	// the AMI cannot be deregistered before.
	ProtectedUntil              time.Time
	SourceRegion, SourceImageID string
	State                       string
	// UEFIData is RegisterImage's UefiData, UEFIVars its variables as
	// decoded (uefi.go).
	UEFIData string
	UEFIVars []uefivars.Variable
	// Params are the decoded request parameters that created the image.
	Params       map[string]string
	pendingPolls int
}

// Call is one request the fake answered.
type Call struct {
	Op, Region string
	Status     int
	// Key is the access key that signed it.
	Key string
}

// Server is the fake endpoint.
type Server struct {
	*httptest.Server
	AccessKey, SecretKey string

	mu        sync.Mutex
	snapshots map[string]*Snapshot
	images    map[string]*Image
	tokens    map[string]string // StartSnapshot client token -> snapshot id
	faults    map[string][]Fault
	always    map[string]Fault
	calls     []Call
	seq       int
	// PendingPolls is how many DescribeSnapshots/DescribeImages answers
	// say "pending" before "completed"/"available" (default 1), so that
	// the waiters really wait.
	PendingPolls int
	// CopyPendingPolls is added to PendingPolls for AMI copies, which
	// take longest on EC2.
	CopyPendingPolls int
	// OnCall, if set, is called after each answered request of the Query
	// and JSON APIs (EC2, Auto Scaling, SSM, STS) with its operation and
	// status, outside the lock; EBS blocks have OnPut.
	OnCall func(op string, status int)

	templates  map[string]*LaunchTemplate // by id
	groups     map[string]*Group          // by region/name
	parameters map[string]*Parameter      // by region/name
	pending    map[string]*pendingPut     // by region/name: aws:ec2:image puts being validated
	sessions   map[string]session         // assumed-role access key -> session
	// OnPut, if set, is called for each accepted block (outside the lock).
	OnPut func(snapshotID string, index int32)
	// now is the fake's clock (nil: time.Now), guarded by mu: the signature check's
	// 5-minute window, snapshot expiry and the deregistration cooldown
	// read it, and answers carry it in their Date header. A test moves it
	// with SetClock.
	now func() time.Time
	// ValidationPolls is how many GetParameter reads of an aws:ec2:image
	// parameter still answer its previous state after a PutParameter
	// (default 1): Parameter Store validates such values asynchronously.
	ValidationPolls int
	// CompleteError, if set, makes snapshots completed from now on end in
	// state error, with this status message, instead of completed.
	CompleteError string
	// NotFoundAfterCreate is how many lookups by id of a resource the API
	// just created answer that it does not exist (eventual.go; default
	// 2, so that every test that creates things meets it; 0 turns it off).
	NotFoundAfterCreate int
	young               map[string]int    // resource key -> lookups left that miss
	alarms              map[string]*Alarm // by region/name (alarms.go)
	notFoundAnswers     int
}

// SetClock replaces the fake's clock (nil: time.Now).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// clock returns the fake's time; s.mu must be held.
func (s *Server) clock() time.Time {
	if s.now == nil {
		return time.Now()
	}
	return s.now()
}

// New starts a fake on 127.0.0.1. Only requests signed with accessKey and
// secretKey (or with the temporary credentials of an assumed role) are
// accepted.
func New(accessKey, secretKey string) *Server {
	s := &Server{
		AccessKey:    accessKey,
		SecretKey:    secretKey,
		snapshots:    map[string]*Snapshot{},
		images:       map[string]*Image{},
		tokens:       map[string]string{},
		faults:       map[string][]Fault{},
		always:       map[string]Fault{},
		templates:    map[string]*LaunchTemplate{},
		groups:       map[string]*Group{},
		parameters:   map[string]*Parameter{},
		pending:      map[string]*pendingPut{},
		sessions:     map[string]session{},
		PendingPolls: 1,
		young:        map[string]int{},
		alarms:       map[string]*Alarm{},

		NotFoundAfterCreate: 2,

		ValidationPolls: 1,
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Inject queues faults for op: its next len(f) calls fail, in order.
func (s *Server) Inject(op string, f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[op] = append(s.faults[op], f...)
}

// FailAlways makes every call of op fail with f.
func (s *Server) FailAlways(op string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.always[op] = f
}

func (s *Server) fault(op string) (Fault, bool) {
	if f, ok := s.always[op]; ok {
		return f, true
	}
	if q := s.faults[op]; len(q) > 0 {
		s.faults[op] = q[1:]
		return q[0], true
	}
	return Fault{}, false
}

// Calls returns the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CountCalls counts answered calls of op with the given status (0: any).
func (s *Server) CountCalls(op string, status int) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Op == op && (status == 0 || c.Status == status) {
			n++
		}
	}
	return n
}

// Snapshots returns copies of the stored snapshots, sorted by id.
func (s *Server) Snapshots() []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Snapshot
	for _, sn := range s.snapshots {
		out = append(out, *sn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Images returns copies of the registered images, sorted by id.
func (s *Server) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Image
	for _, im := range s.images {
		out = append(out, *im)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SnapshotSHA256 reassembles the first length bytes of a snapshot's volume
// from its stored blocks (unwritten blocks read as zeros, as on EBS) and
// returns their hex SHA-256.
func (s *Server) SnapshotSHA256(id string, length int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok {
		return "", fmt.Errorf("no snapshot %s", id)
	}
	h := sha256.New()
	zero := make([]byte, BlockSize)
	for off := int64(0); off < length; off += BlockSize {
		b, ok := sn.Blocks[int32(off/BlockSize)]
		if !ok {
			b = zero
		}
		h.Write(b[:min(int64(BlockSize), length-off)])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BlocksBeyond counts stored blocks of a snapshot that start at or after
// offset length and hold anything but zeros.
func (s *Server) BlocksBeyond(id string, length int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, b := range s.snapshots[id].Blocks {
		if int64(i)*BlockSize >= length && strings.Trim(string(b), "\x00") != "" {
			n++
		}
	}
	return n
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%017x", prefix, s.seq)
}

// scope checks the SigV4 signature and returns its region and service;
// a refusal is a 403 fault with the code AWS gives.
func (s *Server) scope(r *http.Request) (region, service string, f *Fault) {
	sig, err := parseAuth(r.Header.Get("Authorization"))
	if err != nil {
		return "", "", &Fault{Status: 403, Code: "IncompleteSignature", Message: err.Error()}
	}
	creds := aws.Credentials{AccessKeyID: sig.key, SecretAccessKey: s.SecretKey}
	s.mu.Lock()
	role, ok := s.sessions[sig.key]
	now := s.clock()
	s.mu.Unlock()
	if sig.key != s.AccessKey {
		if !ok {
			return sig.region, sig.service, &Fault{Status: 403, Code: "InvalidClientTokenId", Message: fmt.Sprintf("unknown access key %q", sig.key)}
		}
		if r.Header.Get("X-Amz-Security-Token") != role.token {
			return sig.region, sig.service, &Fault{Status: 403, Code: "InvalidClientTokenId",
				Message: fmt.Sprintf("temporary access key %q without its session token", sig.key)}
		}
		creds.SecretAccessKey, creds.SessionToken = role.secret, role.token
	}
	if f := verifySignature(r, sig, creds, now); f != nil {
		return sig.region, sig.service, f
	}
	r.Header.Set("X-Fakeaws-Key", sig.key)
	return sig.region, sig.service, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	// The SDK corrects its clock from the Date of an answer that refused
	// a skewed signature: the fake's Date is the fake's clock.
	w.Header().Set("Date", s.clock().UTC().Format(http.TimeFormat))
	s.mu.Unlock()
	region, service, f := s.scope(r)
	if f != nil {
		s.mu.Lock()
		s.calls = append(s.calls, Call{Op: "sigv4:" + f.Code, Region: region, Status: f.Status})
		s.mu.Unlock()
		authError(w, service, *f)
		return
	}

	switch service {
	case "ebs":
		s.serveEBS(w, r, region)
	case "ec2":
		s.serveEC2(w, r, region)
	case "autoscaling":
		s.serveAutoScaling(w, r, region)
	case "ssm":
		s.serveSSM(w, r, region)
	case "sts":
		s.serveSTS(w, r, region)
	default:
		http.Error(w, "unknown service "+service, http.StatusBadRequest)
	}
}

// authError writes a refused signature in the error format of the
// service the scope names, so that the SDK reads its code (and, for
// RequestTimeTooSkewed, corrects its clock and retries).
func authError(w http.ResponseWriter, service string, f Fault) {
	switch service {
	case "ebs":
		ebsError(w, f)
	case "ec2":
		ec2Error(w, f)
	case "ssm":
		ssmError(w, f)
	case "autoscaling", "sts":
		w.Header().Set("Content-Type", "text/xml")
		queryError(w, "https://"+service+".amazonaws.com/", f)
	default:
		http.Error(w, f.Code+": "+f.Message, f.Status)
	}
}

// queryParams reads the form-encoded body of an awsquery POST (EC2, Auto
// Scaling, STS) into the first value of each parameter.
func queryParams(r *http.Request) (map[string]string, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, err
	}
	if r.Method != http.MethodPost {
		return nil, fmt.Errorf("method %s", r.Method)
	}
	p := map[string]string{}
	for k, v := range form {
		p[k] = v[0]
	}
	return p, nil
}

// answer runs one operation of a request under the lock: check (the
// request's own validation; nil passes) first, then a fault injected for
// op, then do. It records the call, writes the outcome with write (the
// body, or the fault when there is one) and only then, outside the lock,
// tells the test's OnCall hook, so that a hook that cancels the client
// sees the answer delivered first.
func answer[T any](s *Server, w http.ResponseWriter, r *http.Request, region, op string,
	check func() *Fault, do func() (T, *Fault), write func(http.ResponseWriter, T, *Fault)) {
	s.mu.Lock()
	var body T
	f := check()
	if f == nil {
		if ff, ok := s.fault(op); ok {
			f = &ff
		} else {
			body, f = do()
		}
	}
	status := http.StatusOK
	if f != nil {
		status = f.Status
	}
	s.record(r, op, region, status)
	onCall := s.OnCall
	s.mu.Unlock()
	write(w, body, f)
	if onCall != nil {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		onCall(op, status)
	}
}

func (s *Server) record(r *http.Request, op, region string, status int) {
	s.calls = append(s.calls, Call{Op: op, Region: region, Status: status, Key: r.Header.Get("X-Fakeaws-Key")})
}

func b64sha(b []byte) (string, []byte) {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:]), sum[:]
}
