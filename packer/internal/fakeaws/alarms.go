package fakeaws

import (
	"fmt"
	"slices"
	"strings"
)

// Alarm is a CloudWatch alarm as far as Auto Scaling watches it during an
// instance refresh (RefreshPreferences.AlarmSpecification): its state,
// and, when armed with FireAlarm, the point of a watching refresh at which
// it goes into ALARM.
type Alarm struct {
	Name, Region string
	// State is OK, ALARM or INSUFFICIENT_DATA.
	State  string
	Reason string
	// fireAt > 0: go into ALARM once a refresh watching the alarm has
	// replaced this percentage of its instances (what a health or latency
	// alarm on the new instances does).
	fireAt int
}

// AddAlarm creates an alarm in state OK.
func (s *Server) AddAlarm(region, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alarms[region+"/"+name] = &Alarm{Name: name, Region: region, State: "OK"}
}

// FireAlarm arms an alarm to go into ALARM, with reason, when a refresh
// that watches it reaches atPercent (1..100).
func (s *Server) FireAlarm(region, name string, atPercent int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.alarms[region+"/"+name]
	a.fireAt, a.Reason = max(atPercent, 1), reason
}

// AlarmState returns a copy of an alarm.
func (s *Server) AlarmState(region, name string) Alarm {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.alarms[region+"/"+name]
}

// refreshAlarms reads and checks a StartInstanceRefresh's
// Preferences.AlarmSpecification: at most 10 names (Auto Scaling API
// Reference, AlarmSpecification), each an alarm of the region. (Whether
// Auto Scaling refuses a name no alarm has is not documented; the fake
// refuses it, so that a test's alarms are alarms it made.)
func (s *Server) refreshAlarms(rf *Refresh, p map[string]string, region string) *Fault {
	rf.Alarms = list(p, "Preferences.AlarmSpecification.Alarms.member", "")
	if len(rf.Alarms) > 10 {
		return asInvalid("AlarmSpecification: %d alarms, at most 10", len(rf.Alarms))
	}
	for _, a := range rf.Alarms {
		if _, ok := s.alarms[region+"/"+a]; !ok {
			return asInvalid("fakeaws: no CloudWatch alarm %q in %s", a, region)
		}
	}
	return nil
}

// alarmFired moves the refresh's alarms on to its progress and returns
// the first in ALARM ("" when none): Auto Scaling fails the refresh (and
// with AutoRollback rolls it back) when one goes into ALARM (User Guide,
// "Undo changes with a manual or auto rollback").
func (s *Server) alarmFired(rf *Refresh, region string) string {
	var fired []string
	for _, name := range rf.Alarms {
		a := s.alarms[region+"/"+name]
		if a.fireAt > 0 && rf.Percentage >= a.fireAt {
			a.State, a.fireAt = "ALARM", 0
		}
		if a.State == "ALARM" {
			fired = append(fired, fmt.Sprintf("%s (%s)", a.Name, a.Reason))
		}
	}
	slices.Sort(fired)
	return strings.Join(fired, ", ")
}

// alarmsXML is a refresh's Preferences.AlarmSpecification as
// DescribeInstanceRefreshes reports it.
func alarmsXML(alarms []string) string {
	if len(alarms) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<AlarmSpecification><Alarms>")
	for _, a := range alarms {
		b.WriteString("<member>" + esc(a) + "</member>")
	}
	b.WriteString("</Alarms></AlarmSpecification>")
	return b.String()
}
