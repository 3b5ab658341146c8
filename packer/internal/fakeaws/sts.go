package fakeaws

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
)

// session is a set of temporary credentials handed out by AssumeRole.
type session struct {
	token, RoleARN, SessionName, ExternalID string
}

// AssumedRoles returns the roles assumed so far, by access key.
func (s *Server) AssumedRoles() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.sessions {
		out[k] = v.RoleARN + " " + v.SessionName + " " + v.ExternalID
	}
	return out
}

var (
	stsParams = querySpec{
		"RoleArn": str, "RoleSessionName": str, "DurationSeconds": integer, "ExternalId": str, "Policy": str,
		"PolicyArns.member.#.arn": str, "Tags.member.#.Key": str, "Tags.member.#.Value": str, "TransitiveTagKeys.member.#": str,
	}
	roleARNRE    = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	sessionRE    = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	trustedRoles = regexp.MustCompile(`:role/(hotpath|packer)`)
)

// serveSTS answers AssumeRole (awsquery). Roles whose name starts with
// hotpath or packer can be assumed; others are AccessDenied. The
// credentials it returns are accepted by every other service of the fake.
func (s *Server) serveSTS(w http.ResponseWriter, r *http.Request, region string) {
	raw, _ := io.ReadAll(r.Body)
	form, err := url.ParseQuery(string(raw))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, "fakeaws: STS requests are form POSTs", http.StatusBadRequest)
		return
	}
	p := map[string]string{}
	for k, v := range form {
		p[k] = v[0]
	}
	s.mu.Lock()
	var (
		f    *Fault
		body string
	)
	d, _ := strconv.Atoi(p["DurationSeconds"])
	switch {
	case p["Action"] != "AssumeRole" || p["Version"] != "2011-06-15":
		f = &Fault{Status: 400, Code: "InvalidAction", Message: "fakeaws: unsupported STS action " + p["Action"]}
	default:
		if err := checkQuery(stsParams, p); err != nil {
			f = &Fault{Status: 400, Code: "ValidationError", Message: err.Error()}
		}
	}
	switch {
	case f != nil:
	case !roleARNRE.MatchString(p["RoleArn"]):
		f = &Fault{Status: 400, Code: "ValidationError", Message: "RoleArn " + p["RoleArn"]}
	case !sessionRE.MatchString(p["RoleSessionName"]):
		f = &Fault{Status: 400, Code: "ValidationError", Message: "RoleSessionName " + p["RoleSessionName"]}
	case p["DurationSeconds"] != "" && (d < 900 || d > 43200):
		f = &Fault{Status: 400, Code: "ValidationError", Message: "DurationSeconds " + p["DurationSeconds"]}
	case !trustedRoles.MatchString(p["RoleArn"]):
		f = &Fault{Status: 403, Code: "AccessDenied", Message: "not authorized to perform sts:AssumeRole on " + p["RoleArn"]}
	default:
		s.seq++
		key := fmt.Sprintf("ASIAFAKE%012d", s.seq)
		sess := session{token: fmt.Sprintf("token-%d", s.seq), RoleARN: p["RoleArn"], SessionName: p["RoleSessionName"], ExternalID: p["ExternalId"]}
		s.sessions[key] = sess
		body = fmt.Sprintf("<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>%s</SessionToken>"+
			"<Expiration>2999-01-01T00:00:00Z</Expiration></Credentials><AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROAFAKE:%s</AssumedRoleId></AssumedRoleUser>",
			key, sess.token, esc(p["RoleArn"]), esc(sess.SessionName), esc(sess.SessionName))
	}
	status := 200
	if f != nil {
		status = f.Status
	}
	s.record(r, "AssumeRole", region, status)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	if f != nil {
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>fake</RequestId></ErrorResponse>`, esc(f.Code), esc(f.Message))
		return
	}
	fmt.Fprintf(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>%s</AssumeRoleResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></AssumeRoleResponse>`, body)
}
