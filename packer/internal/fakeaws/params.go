package fakeaws

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// kind is the wire type of a Query API parameter.
type kind byte

const (
	str kind = iota
	boolean
	integer
	timestamp
)

// A querySpec lists the parameters one Query API action accepts. In a
// key, "#" stands for a 1-based list index (Filter.#.Value.#). Anything
// else in a request — a parameter the action does not have, a boolean
// that is not true/false, an integer that does not parse — is refused, as
// AWS does, so a field the plugin sets by mistake cannot pass silently.
type querySpec map[string]kind

var (
	tagSpec = querySpec{"TagSpecification.#.ResourceType": str, "TagSpecification.#.Tag.#.Key": str, "TagSpecification.#.Tag.#.Value": str}
	filters = querySpec{"Filter.#.Name": str, "Filter.#.Value.#": str}
)

func merge(specs ...querySpec) querySpec {
	out := querySpec{}
	for _, s := range specs {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// A queryAction is one action of an awsquery service (EC2, Auto
// Scaling, STS): the parameters it accepts and the method that serves it
// under s.mu, returning the inner XML of its answer. Each service keeps
// one table of them, its only list of the actions it has.
type queryAction struct {
	params querySpec
	serve  func(s *Server, p map[string]string, region string) (string, *Fault)
}

var (
	specREs   = map[string]*regexp.Regexp{}
	specREsMu sync.Mutex
)

func specRE(key string) *regexp.Regexp {
	specREsMu.Lock()
	defer specREsMu.Unlock()
	re, ok := specREs[key]
	if !ok {
		re = regexp.MustCompile(`^` + strings.ReplaceAll(regexp.QuoteMeta(key), "#", `[1-9][0-9]*`) + `$`)
		specREs[key] = re
	}
	return re
}

// checkAction checks an awsquery request: the API version, an Action the
// fake has, and its parameters (checkQuery), whose problems the service
// reports with code.
func checkAction(p map[string]string, version string, actions map[string]queryAction, code string) *Fault {
	a, known := actions[p["Action"]]
	switch {
	case p["Version"] != version:
		return &Fault{Status: 400, Code: "InvalidParameterValue", Message: fmt.Sprintf("Version %q", p["Version"])}
	case !known:
		return &Fault{Status: 400, Code: "InvalidAction", Message: "fakeaws: unsupported action " + p["Action"]}
	}
	if err := checkQuery(a.params, p); err != nil {
		return &Fault{Status: 400, Code: code, Message: err.Error()}
	}
	return nil
}

// checkQuery refuses parameters an action does not have and values of the
// wrong type; Action and Version are the caller's to check.
func checkQuery(spec querySpec, p map[string]string) error {
	for k, v := range p {
		if k == "Action" || k == "Version" {
			continue
		}
		kd, known := spec[k]
		if !known {
			for pat, pk := range spec {
				if strings.Contains(pat, "#") && specRE(pat).MatchString(k) {
					kd, known = pk, true
					break
				}
			}
		}
		if !known {
			return fmt.Errorf("the parameter %s is not recognized", k)
		}
		switch kd {
		case boolean:
			if v != "true" && v != "false" {
				return fmt.Errorf("value (%s) for parameter %s is invalid: expected a boolean", v, k)
			}
		case integer:
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("value (%s) for parameter %s is invalid: expected an integer", v, k)
			}
		case timestamp:
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return fmt.Errorf("value (%s) for parameter %s is invalid: expected an ISO 8601 timestamp", v, k)
			}
		}
	}
	return nil
}

// filterValues returns the values of the filter called name, and whether
// every filter in the request is one of known.
func filterValues(p map[string]string, name string, known ...string) ([]string, error) {
	names := list(p, "Filter", ".Name")
	var vals []string
	for i, n := range names {
		if !oneOf(n, known...) {
			return nil, fmt.Errorf("the filter '%s' is invalid", n)
		}
		if n == name {
			vals = append(vals, list(p, fmt.Sprintf("Filter.%d.Value", i+1), "")...)
		}
	}
	return vals, nil
}

// globMatch matches EC2 filter wildcards: * any run, ? one character.
func globMatch(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	ok, _ := regexp.MatchString(re, s)
	return ok
}
