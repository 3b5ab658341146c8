package fakeaws

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
)

// session is a set of temporary credentials handed out by AssumeRole.
type session struct {
	token, secret, RoleARN, SessionName, ExternalID string
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
	// stsActions are the STS actions the fake serves.
	stsActions = map[string]queryAction{
		"AssumeRole": {querySpec{
			"RoleArn": str, "RoleSessionName": str, "DurationSeconds": integer, "ExternalId": str, "Policy": str,
			"PolicyArns.member.#.arn": str, "Tags.member.#.Key": str, "Tags.member.#.Value": str, "TransitiveTagKeys.member.#": str,
		}, (*Server).assumeRole},
	}
	roleARNRE    = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	sessionRE    = regexp.MustCompile(`^[\w+=,.@-]{2,64}$`)
	trustedRoles = regexp.MustCompile(`:role/(hotpath|packer)`)
)

// serveSTS answers AssumeRole (awsquery). Roles whose name starts with
// hotpath or packer can be assumed; others are AccessDenied. The
// credentials it returns are accepted by every other service of the fake.
func (s *Server) serveSTS(w http.ResponseWriter, r *http.Request, region string) {
	p, err := queryParams(r)
	if err != nil {
		http.Error(w, "fakeaws: STS requests are form POSTs: "+err.Error(), http.StatusBadRequest)
		return
	}
	op := p["Action"]
	check := func() *Fault {
		if f := checkAction(p, "2011-06-15", stsActions, "ValidationError"); f != nil {
			return f
		}
		return checkAssumeRole(p)
	}
	answer(s, w, r, region, op, check, func() (string, *Fault) { return stsActions[op].serve(s, p, region) },
		func(w http.ResponseWriter, body string, f *Fault) {
			w.Header().Set("Content-Type", "text/xml")
			if f != nil {
				queryError(w, stsNS, *f)
				return
			}
			fmt.Fprintf(w, `<%sResponse xmlns="%s"><%sResult>%s</%sResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></%sResponse>`,
				op, stsNS, op, body, op, op)
		})
}

// checkAssumeRole checks the values of an AssumeRole request, before any
// injected fault: a malformed request is refused whatever the service's state.
func checkAssumeRole(p map[string]string) *Fault {
	d, _ := strconv.Atoi(p["DurationSeconds"])
	switch {
	case !roleARNRE.MatchString(p["RoleArn"]):
		return &Fault{Status: 400, Code: "ValidationError", Message: "RoleArn " + p["RoleArn"]}
	case !sessionRE.MatchString(p["RoleSessionName"]):
		return &Fault{Status: 400, Code: "ValidationError", Message: "RoleSessionName " + p["RoleSessionName"]}
	case p["DurationSeconds"] != "" && (d < 900 || d > 43200):
		return &Fault{Status: 400, Code: "ValidationError", Message: "DurationSeconds " + p["DurationSeconds"]}
	}
	return nil
}

func (s *Server) assumeRole(p map[string]string, _ string) (string, *Fault) {
	if !trustedRoles.MatchString(p["RoleArn"]) {
		return "", &Fault{Status: 403, Code: "AccessDenied", Message: "not authorized to perform sts:AssumeRole on " + p["RoleArn"]}
	}
	s.seq++
	key := fmt.Sprintf("ASIAFAKE%012d", s.seq)
	sess := session{token: fmt.Sprintf("token-%d", s.seq), secret: fmt.Sprintf("secret-%d", s.seq),
		RoleARN: p["RoleArn"], SessionName: p["RoleSessionName"], ExternalID: p["ExternalId"]}
	s.sessions[key] = sess
	return fmt.Sprintf("<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken>"+
		"<Expiration>2999-01-01T00:00:00Z</Expiration></Credentials><AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROAFAKE:%s</AssumedRoleId></AssumedRoleUser>",
		key, sess.secret, sess.token, esc(p["RoleArn"]), esc(sess.SessionName), esc(sess.SessionName)), nil
}

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"
