package logship

import "strconv"

// AppendRFC5424 appends m as an RFC 5424 message (without framing):
//
//	<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - MSG
//
// The timestamp is UTC with microseconds; header fields are cut to their
// RFC lengths and anything outside printable US-ASCII in them becomes
// "_"; empty fields are NILVALUE ("-"); there is no structured data.
func AppendRFC5424(dst []byte, m *Message, host string) []byte {
	fac, sev := m.Facility, m.Severity
	if fac < 0 || fac > 23 {
		fac = FacilityUser
	}
	if sev < 0 || sev > 7 {
		sev = SeverityInfo
	}
	dst = append(dst, '<')
	dst = strconv.AppendInt(dst, int64(fac*8+sev), 10)
	dst = append(dst, ">1 "...)
	dst = m.Time.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000Z07:00")
	dst = append(dst, ' ')
	dst = appendField(dst, host, 255)
	dst = append(dst, ' ')
	dst = appendField(dst, m.App, 48)
	dst = append(dst, ' ')
	dst = appendField(dst, m.ProcID, 128)
	dst = append(dst, ' ')
	dst = appendField(dst, m.MsgID, 32)
	dst = append(dst, " -"...)
	if m.Text != "" {
		dst = append(dst, ' ')
		dst = append(dst, m.Text...)
	}
	return dst
}

func appendField(dst []byte, v string, limit int) []byte {
	if v == "" || v == "-" {
		return append(dst, '-')
	}
	if len(v) > limit {
		v = v[:limit]
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 33 || c > 126 {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}
