package server

import "strconv"

// statusText covers the statuses a JSON API uses; others get a generic
// reason phrase (clients must ignore it anyway, RFC 9112 4). Kept here
// rather than importing net/http for http.StatusText, which would link the
// whole net/http package into every workload binary.
var statusText = map[int]string{
	100: "Continue", 101: "Switching Protocols",
	200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 206: "Partial Content",
	301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
	307: "Temporary Redirect", 308: "Permanent Redirect",
	400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
	405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout", 409: "Conflict",
	410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Content Too Large",
	414: "URI Too Long", 415: "Unsupported Media Type", 422: "Unprocessable Content",
	429: "Too Many Requests", 431: "Request Header Fields Too Large",
	500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
	503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
}

// statusLines holds the pre-rendered status line of every code 100-599.
var statusLines = func() (t [600]string) {
	for code := 100; code < 600; code++ {
		text, ok := statusText[code]
		if !ok {
			text = "Status " + strconv.Itoa(code)
		}
		t[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
	}
	return t
}()

func appendStatusLine(out []byte, code int) []byte {
	if code < 100 || code >= 600 {
		code = 500
	}
	return append(out, statusLines[code]...)
}
