package h1head

import (
	"bytes"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"
)

// Request parses the request head at the start of buf into req and
// returns its length. Besides the cases the package lists, it leaves to
// http.ReadRequest a request line other than
// "token SP origin-form SP HTTP/1.x" (RFC 9112 §3) or with the CONNECT
// method, one with more than one Host field, and one with a body: a
// Content-Length other than 0. The request gets no context (the caller
// adds it, with WithContext) and, as http.ReadRequest's, no Host field:
// its Host is the field's value.
func Request(buf []byte, req *http.Request) (n int, ok bool) {
	return RequestReusing(buf, req, nil)
}

// RequestReusing is Request with the header map built in r's storage
// (see Reuse): the map the previous request got from r is emptied and
// filled again. A nil r allocates as Request does.
func RequestReusing(buf []byte, req *http.Request, r *Reuse) (n int, ok bool) {
	line, next, ok := nextLine(buf, 0)
	if !ok {
		return 0, false
	}
	method, target, proto, ok := requestLine(line)
	if !ok {
		return 0, false
	}
	var fs fields
	if n, ok = fs.scan(buf, next); !ok {
		return 0, false
	}
	head := string(buf[:n])
	h := fs.header(head, r)
	if len(h["Host"]) > 1 {
		return 0, false
	}
	if cl, ok := fs.contentLength(head); !ok || cl > 0 {
		return 0, false
	}
	requestURI := head[target.start:target.end]
	u, err := url.ParseRequestURI(requestURI)
	if err != nil {
		return 0, false
	}
	host := u.Host
	if host == "" {
		if hv := h["Host"]; len(hv) > 0 {
			host = hv[0]
		}
	}
	delete(h, "Host")
	minor := 1
	if proto == "HTTP/1.0" {
		minor = 0
	}
	*req = http.Request{
		Method:     head[method.start:method.end],
		URL:        u,
		Proto:      proto,
		ProtoMajor: 1,
		ProtoMinor: minor,
		Header:     h,
		Body:       http.NoBody,
		Host:       host,
		RequestURI: requestURI,
		Close:      closeAfter(minor, h["Connection"]),
	}
	return n, true
}

// requestLine splits "method SP origin-form SP HTTP/1.x" (RFC 9112 §3).
func requestLine(line []byte) (method, target span, proto string, ok bool) {
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !isToken(line[:sp]) || string(line[:sp]) == http.MethodConnect {
		return span{}, span{}, "", false
	}
	method = span{0, sp}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 || rest[0] != '/' {
		return span{}, span{}, "", false
	}
	for _, c := range rest[:sp2] {
		if c <= ' ' || c >= 0x7f {
			return span{}, span{}, "", false
		}
	}
	target = span{sp + 1, sp + 1 + sp2}
	if proto, ok = version(rest[sp2+1:]); !ok {
		return span{}, span{}, "", false
	}
	return method, target, proto, true
}

// version returns the HTTP/1.x version named by b.
func version(b []byte) (string, bool) {
	switch string(b) {
	case "HTTP/1.1":
		return "HTTP/1.1", true
	case "HTTP/1.0":
		return "HTTP/1.0", true
	}
	return "", false
}

// closeAfter reports whether the connection closes after this message
// (RFC 9112 §9.3): HTTP/1.1 unless "close", HTTP/1.0 unless "keep-alive".
func closeAfter(minor int, connection []string) bool {
	hasClose := httpguts.HeaderValuesContainsToken(connection, "close")
	if minor == 0 {
		return hasClose || !httpguts.HeaderValuesContainsToken(connection, "keep-alive")
	}
	return hasClose
}
