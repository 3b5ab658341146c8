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
	p, err := queryParams(r)
	if err != nil {
		http.Error(w, "fakeaws: STS requests are form POSTs: "+err.Error(), http.StatusBadRequest)
		return
	}
	check := func() *Fault {
		d, _ := strconv.Atoi(p["DurationSeconds"])
		if p["Action"] != "AssumeRole" || p["Version"] != "2011-06-15" {
			return &Fault{Status: 400, Code: "InvalidAction", Message: "fakeaws: unsupported STS action " + p["Action"]}
		}
		if err := checkQuery(stsParams, p); err != nil {
			return &Fault{Status: 400, Code: "ValidationError", Message: err.Error()}
		}
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
	assume := func() (string, *Fault) {
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
	answer(s, w, r, region, "AssumeRole", check, assume, func(w http.ResponseWriter, body string, f *Fault) {
		w.Header().Set("Content-Type", "text/xml")
		if f != nil {
			queryError(w, stsNS, *f)
			return
		}
		fmt.Fprintf(w, `<AssumeRoleResponse xmlns="%s"><AssumeRoleResult>%s</AssumeRoleResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata></AssumeRoleResponse>`, stsNS, body)
	})
}

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"
