package fakeaws

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// Parameter is an SSM parameter as the fake stores it.
type Parameter struct {
	Name, Region, Type, DataType, Value, Description string
	Version                                          int64
	// History holds every value, oldest first.
	History []string
}

// pendingPut is an aws:ec2:image value PutParameter accepted and Parameter
// Store has not validated yet.
type pendingPut struct {
	in    putInput
	reads int // GetParameter reads left that still see the state before the put
}

// Parameter returns a copy of a parameter as stored (a value still being
// validated is not in it), or false.
func (s *Server) Parameter(region, name string) (Parameter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pm, ok := s.parameters[region+"/"+name]
	if !ok {
		return Parameter{}, false
	}
	c := *pm
	c.History = append([]string(nil), pm.History...)
	return c, true
}

// PutParameterValue sets an aws:ec2:image parameter as if someone had
// published it.
func (s *Server) PutParameterValue(region, name, value string) {
	s.PutParameterAs(region, name, value, "aws:ec2:image")
}

// DeleteParameterValue deletes a parameter as if someone had.
func (s *Server) DeleteParameterValue(region, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.parameters, region+"/"+name)
}

// PutParameterAs sets a String parameter of the data type given, as if
// someone had published it.
func (s *Server) PutParameterAs(region, name, value, dataType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parameters[region+"/"+name] = &Parameter{Name: name, Region: region, Type: "String", DataType: dataType, Value: value, Version: 1, History: []string{value}}
}

var (
	ssmNameRE = regexp.MustCompile(`^/?[a-zA-Z0-9_.\-]+(/[a-zA-Z0-9_.\-]+)*$`)
	amiIDRE   = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
)

func ssmError(w http.ResponseWriter, f Fault) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(f.Status)
	json.NewEncoder(w).Encode(map[string]string{"__type": f.Code, "message": f.Message})
}

// serveSSM answers the SSM JSON 1.1 API: the operation in X-Amz-Target,
// a JSON body whose unknown fields and wrong types are refused.
func (s *Server) serveSSM(w http.ResponseWriter, r *http.Request, region string) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AmazonSSM.")
	if r.Method != http.MethodPost || !ok || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		http.Error(w, "fakeaws: SSM requests are JSON 1.1 POSTs with X-Amz-Target AmazonSSM.<op>", http.StatusBadRequest)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	do := func() (any, *Fault) {
		serve, ok := ssmActions[op]
		if !ok {
			return nil, &Fault{Status: 400, Code: "InvalidAction", Message: "fakeaws: unsupported SSM operation " + op}
		}
		return serve(s, raw, region)
	}
	answer(s, w, r, region, op, func() *Fault { return nil }, do,
		func(w http.ResponseWriter, resp any, f *Fault) {
			if f != nil {
				ssmError(w, *f)
				return
			}
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			json.NewEncoder(w).Encode(resp)
		})
}

func strictJSON(raw []byte, v any) *Fault {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Fault{Status: 400, Code: "ValidationException", Message: "fakeaws: " + err.Error()}
	}
	return nil
}

// ssmActions are the SSM operations the fake serves; each decodes its own
// JSON input strictly and runs under s.mu.
var ssmActions = map[string]func(s *Server, raw []byte, region string) (any, *Fault){
	"PutParameter":    (*Server).putParameter,
	"DeleteParameter": (*Server).deleteParameter,
	"GetParameter":    (*Server).getParameter,
}

func ssmInvalid(format string, args ...any) *Fault {
	return &Fault{Status: 400, Code: "ValidationException", Message: fmt.Sprintf(format, args...)}
}

// parameterNotFound is SSM's answer for a name it does not have.
func parameterNotFound() *Fault {
	return &Fault{Status: 400, Code: "ParameterNotFound", Message: ""}
}

// putInput is PutParameter's input, as far as the fake knows it.
type putInput struct {
	Name, Value, Type, DataType, Description string
	Overwrite                                *bool
}

func (s *Server) putParameter(raw []byte, region string) (any, *Fault) {
	var in putInput
	if f := strictJSON(raw, &in); f != nil {
		return nil, f
	}
	if f := checkPut(in); f != nil {
		return nil, f
	}
	key := region + "/" + in.Name
	s.settle(key)
	pm, exists := s.parameters[key]
	if f := checkOverwrite(in, pm, exists); f != nil {
		return nil, f
	}
	if in.DataType == "aws:ec2:image" {
		// "Native parameter support for Amazon Machine Image IDs" (SSM
		// User Guide) and PutParameter's DataType (SSM API Reference):
		// an aws:ec2:image value is validated asynchronously; the call
		// answers 200 before validation, and an invalid AMI id is not
		// stored, without any error to the caller.
		s.pending[key] = &pendingPut{in: in, reads: s.ValidationPolls}
		v := int64(1)
		if exists {
			v = pm.Version + 1
		}
		return map[string]any{"Version": v, "Tier": "Standard"}, nil
	}
	return s.store(key, region, in, pm), nil
}

// checkOverwrite checks a put against the parameter already stored (pm,
// when exists).
func checkOverwrite(in putInput, pm *Parameter, exists bool) *Fault {
	switch {
	case exists && (in.Overwrite == nil || !*in.Overwrite):
		return &Fault{Status: 400, Code: "ParameterAlreadyExists", Message: "The parameter already exists. To overwrite this value, set the overwrite option in the request to true."}
	case !exists && in.Type == "":
		return ssmInvalid("Type is required for a new parameter")
	case exists && in.Type != "" && in.Type != pm.Type:
		return ssmInvalid("Type can't be changed from %s to %s", pm.Type, in.Type)
	case exists && dataType(in.DataType) != dataType(pm.DataType) &&
		(dataType(in.DataType) == "aws:ec2:image" || dataType(pm.DataType) == "aws:ec2:image"):
		// Parameter Store refuses to turn a parameter into an AMI id or
		// back (issue 20 records it of the real service; the exact error
		// text is ours).
		return ssmInvalid("The data type of parameter %s can't be changed from %s to %s", in.Name, dataType(pm.DataType), dataType(in.DataType))
	}
	return nil
}

// dataType is a parameter's data type, "text" when not given.
func dataType(t string) string {
	if t == "" {
		return "text"
	}
	return t
}

// store writes a put into the parameter (a new one when pm is nil) and
// answers as PutParameter does.
func (s *Server) store(key, region string, in putInput, pm *Parameter) map[string]any {
	if pm == nil {
		pm = &Parameter{Name: in.Name, Region: region, Type: in.Type}
		s.parameters[key] = pm
	}
	pm.Value, pm.DataType, pm.Description = in.Value, in.DataType, in.Description
	pm.Version++
	pm.History = append(pm.History, in.Value)
	return map[string]any{"Version": pm.Version, "Tier": "Standard"}
}

// settle ends the validation of a pending aws:ec2:image put of key: a
// value that is an available AMI of the region is stored, any other is
// dropped silently, as Parameter Store does.
func (s *Server) settle(key string) {
	p, ok := s.pending[key]
	if !ok {
		return
	}
	delete(s.pending, key)
	region, _, _ := strings.Cut(key, "/")
	im, ok := s.images[p.in.Value]
	if !amiIDRE.MatchString(p.in.Value) || !ok || im.Region != region || im.State != "available" {
		return
	}
	s.store(key, region, p.in, s.parameters[key])
}

// checkPut checks what PutParameter checks whatever is stored: the
// name, the type, the data type and the value's length.
func checkPut(in putInput) *Fault {
	lower := strings.ToLower(strings.TrimPrefix(in.Name, "/"))
	switch {
	case len(in.Name) < 1 || len(in.Name) > 1011 || !ssmNameRE.MatchString(in.Name):
		return ssmInvalid("Parameter name %q is not valid", in.Name)
	case strings.HasPrefix(lower, "aws") || strings.HasPrefix(lower, "ssm"):
		return ssmInvalid("Parameter name: can't be prefixed with \"aws\" or \"ssm\" (case-insensitive)")
	case strings.Count(in.Name, "/") > 15:
		return &Fault{Status: 400, Code: "HierarchyLevelLimitExceededException", Message: "more than 15 levels"}
	case !oneOf(in.Type, "String", "StringList", "SecureString", ""):
		return ssmInvalid("Type %q", in.Type)
	case !oneOf(in.DataType, "", "text", "aws:ec2:image", "aws:ssm:integration"):
		return ssmInvalid("DataType %q", in.DataType)
	case in.Value == "" || len(in.Value) > 4096:
		return ssmInvalid("Value must be 1 to 4096 characters")
	}
	return nil
}

func (s *Server) deleteParameter(raw []byte, region string) (any, *Fault) {
	var in struct{ Name string }
	if f := strictJSON(raw, &in); f != nil {
		return nil, f
	}
	s.settle(region + "/" + in.Name)
	if _, ok := s.parameters[region+"/"+in.Name]; !ok {
		return nil, parameterNotFound()
	}
	delete(s.parameters, region+"/"+in.Name)
	return map[string]any{}, nil
}

func (s *Server) getParameter(raw []byte, region string) (any, *Fault) {
	var in struct {
		Name           string
		WithDecryption *bool
	}
	if f := strictJSON(raw, &in); f != nil {
		return nil, f
	}
	key := region + "/" + in.Name
	if p, ok := s.pending[key]; ok {
		if p.reads--; p.reads < 0 {
			s.settle(key)
		}
	}
	pm, ok := s.parameters[key]
	if !ok {
		return nil, parameterNotFound()
	}
	return map[string]any{"Parameter": map[string]any{
		"Name": pm.Name, "Type": pm.Type, "Value": pm.Value, "Version": pm.Version, "DataType": pm.DataType,
		"ARN": "arn:aws:ssm:" + region + ":123456789012:parameter/" + strings.TrimPrefix(pm.Name, "/"), "LastModifiedDate": 1767225600.0,
	}}, nil
}
