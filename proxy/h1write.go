package proxy

import (
	"bufio"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req to w as http.Request.Write does, without its
// per-request allocations (fmt formatting, the transfer writer) on the
// common case: a GET or HEAD without body, or a request with a body of
// known length, with an ASCII host, a plain origin-form target, at most
// 32 clean header fields and no client trace beyond WroteHeaders. Of a
// request with a body it writes the head only: the caller writes the
// body (h1Conn.writeBody). Any other request is written, body included,
// by http.Request.Write itself, and body reports that: a request
// writesPlainly admits may still be one (its fields are looked at only
// here), and a body written twice would find the client's read already.
// TestWriteRequestSameBytes holds the two to the same bytes.
func writeRequest(w *bufio.Writer, req *http.Request) (body bool, err error) {
	if !writesPlainly(req) {
		return true, req.Write(w)
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	ruri := req.URL.RequestURI()
	var keys [32]string
	n := 0
	for k, vv := range req.Header {
		if excludedRequestHeader(k) {
			continue
		}
		if n == len(keys) || !httpguts.ValidHeaderFieldName(k) {
			return true, req.Write(w)
		}
		for _, v := range vv {
			if !plainValue(v) {
				return true, req.Write(w)
			}
		}
		keys[n] = k
		n++
	}
	ua := "Go-http-client/1.1" // http.Request.Write's default
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
		if !plainValue(ua) {
			return true, req.Write(w)
		}
	}
	if !plainTarget(ruri) { // the host passed ValidHostHeader
		return true, req.Write(w)
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(ruri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	if ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(ua)
		w.WriteString("\r\n")
	}
	if req.ContentLength > 0 {
		var num [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(num[:0], req.ContentLength, 10))
		w.WriteString("\r\n")
	}
	sorted := keys[:n]
	slices.Sort(sorted)
	for _, k := range sorted {
		for _, v := range req.Header[k] {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	if _, err = w.WriteString("\r\n"); err != nil {
		return false, err
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	return false, nil
}

// writesPlainly reports whether writeRequest may write req itself.
func writesPlainly(req *http.Request) bool {
	switch {
	case req.Body == nil && req.ContentLength == 0:
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			return false // other methods may get a Content-Length: 0
		}
	case req.Body == nil || req.Body == http.NoBody || req.ContentLength <= 0:
		return false
	case !httpguts.ValidHeaderFieldName(req.Method) || req.Method == http.MethodConnect:
		return false
	}
	if req.Close || len(req.TransferEncoding) > 0 || req.Trailer != nil || req.URL == nil {
		return false
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	// ASCII (no Punycode), no zone, a valid Host field.
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 || host[i] == '%' {
			return false
		}
	}
	if !httpguts.ValidHostHeader(host) {
		return false
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil &&
		(trace.WroteHeaderField != nil || trace.WroteRequest != nil) {
		return false
	}
	return true
}

// excludedRequestHeader: the fields http.Request.Write writes itself or
// never copies from Header.
func excludedRequestHeader(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

// plainValue: v goes out as is (http.Request.Write would turn line breaks
// into spaces and trim surrounding white space).
func plainValue(v string) bool {
	if strings.ContainsAny(v, "\r\n") {
		return false
	}
	return v == "" || (v[0] != ' ' && v[0] != '\t' && v[len(v)-1] != ' ' && v[len(v)-1] != '\t')
}

// plainTarget: a request target without control bytes (which
// http.Request.Write refuses) in origin form.
func plainTarget(s string) bool {
	if s == "" || s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return false
		}
	}
	return true
}
