// Package h1head parses the heads of plain HTTP/1.1 messages (RFC 9112
// §2–§6) from bytes already buffered, with few allocations: one string
// holds the whole head, and the request line's parts, the status and the
// field values are slices of it.
//
// It takes only the plain messages most traffic consists of and leaves
// every other head to net/http's readers (http.ReadRequest,
// http.ReadResponse), which then read the same bytes: its callers try it
// first and fall back. What it takes, net/http's readers take too, with
// the same result; FuzzRequestMatchesReadRequest and
// FuzzResponseMatchesReadResponse check that.
//
// A head is left to net/http when
//   - it is not complete in the buffer;
//   - a line is folded (obs-fold), or is not "token:value" with the name
//     directly followed by the colon (RFC 9112 §5);
//   - a field value has a control character other than HTAB (RFC 9110
//     §5.5);
//   - it has Transfer-Encoding, more than one Content-Length field, or a
//     Content-Length that is not a number (RFC 9112 §6);
//   - it has more than MaxFields fields;
//   - and for the start lines and bodies, as Request and Response say.
package h1head

import (
	"bytes"
	"net/http"

	"github.com/gmproxy/gmproxy/internal/asciifold"
	"golang.org/x/net/http/httpguts"
)

// MaxFields bounds the fields of a head parsed here.
const MaxFields = 32

type span struct{ start, end int }

type field struct{ name, value span }

// fields is a head's field lines, located in its buffer.
type fields struct {
	f [MaxFields]field
	n int
}

// scan reads the field lines from buf[i] to the empty line that ends the
// head, and returns where the head ends.
func (fs *fields) scan(buf []byte, i int) (end int, ok bool) {
	for {
		line, next, ok := nextLine(buf, i)
		if !ok {
			return 0, false
		}
		if len(line) == 0 {
			return next, true
		}
		if fs.n == len(fs.f) {
			return 0, false
		}
		f, ok := fieldLine(line)
		if !ok {
			return 0, false
		}
		f.name.start += i
		f.name.end += i
		f.value.start += i
		f.value.end += i
		fs.f[fs.n] = f
		fs.n++
		i = next
	}
}

// header builds the header map of the head whose text is head; with a
// non-nil r, in r's map and values storage (cleared first).
func (fs *fields) header(head string, r *Reuse) http.Header {
	var h http.Header
	var values []string
	if r == nil {
		h, values = make(http.Header, fs.n), make([]string, fs.n)
	} else {
		if r.h == nil {
			r.h = make(http.Header, fs.n)
		} else {
			clear(r.h) // nothing of an earlier request may stay
		}
		if cap(r.vals) < fs.n {
			r.vals = make([]string, max(fs.n, 16))
		}
		clear(r.vals[:cap(r.vals)])
		h, values = r.h, r.vals[:fs.n]
	}
	for i, f := range fs.f[:fs.n] {
		key := fieldKey(head, f.name)
		v := head[f.value.start:f.value.end]
		if vv, dup := h[key]; dup {
			h[key] = append(vv, v)
			continue
		}
		values[i] = v
		h[key] = values[i : i+1 : i+1]
	}
	// RFC 9111 §5.4: "Pragma: no-cache" without Cache-Control (as
	// net/http's readers).
	if hp := h["Pragma"]; len(hp) > 0 && hp[0] == "no-cache" {
		if _, cc := h["Cache-Control"]; !cc {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	return h
}

// Reuse is the storage of one request's header map, for the next request
// (RequestReusing): a server whose handlers keep neither a request's
// Header nor its value slices after they return builds every request's
// map in the same storage. The zero value is ready; Clear drops what the
// last request left (its values hold that request's head).
type Reuse struct {
	h    http.Header
	vals []string
}

// Clear empties the storage.
func (r *Reuse) Clear() {
	clear(r.h)
	clear(r.vals[:cap(r.vals)])
}

// Storage returns the map the next request gets emptied (nil: a new one)
// and how many field values its storage holds (at most MaxFields), for
// tests.
func (r *Reuse) Storage() (h http.Header, fields int) { return r.h, cap(r.vals) }

// parseLength parses a Content-Length value: digits only, at most 18.
func parseLength(v string) (n int64, ok bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// nextLine returns the line starting at buf[i] without its end (LF, or
// CR LF, as bufio.Reader.ReadLine) and where the next one starts.
func nextLine(buf []byte, i int) (line []byte, next int, ok bool) {
	j := bytes.IndexByte(buf[i:], '\n')
	if j < 0 {
		return nil, 0, false
	}
	line = buf[i : i+j]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, i + j + 1, true
}

// fieldLine splits "name:value" (RFC 9112 §5): the name a token directly
// followed by the colon, the value without the white space around it and
// free of control characters (RFC 9110 §5.5).
func fieldLine(line []byte) (f field, ok bool) {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !isToken(line[:colon]) {
		return f, false
	}
	vs, ve := colon+1, len(line)
	for vs < ve && (line[vs] == ' ' || line[vs] == '\t') {
		vs++
	}
	for ve > vs && (line[ve-1] == ' ' || line[ve-1] == '\t') {
		ve--
	}
	for _, c := range line[vs:ve] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return f, false
		}
	}
	return field{span{0, colon}, span{vs, ve}}, true
}

func isToken(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return len(b) > 0
}

// fieldKey returns the canonical form (http.CanonicalHeaderKey's) of the
// field name at name in buf: a slice of head when the name is written
// canonically (the common case: no lookup, no allocation), else a common
// name's constant or a new string.
func fieldKey(head string, name span) string {
	raw := head[name.start:name.end]
	var a [64]byte
	if len(raw) > len(a) {
		return http.CanonicalHeaderKey(raw)
	}
	c := a[:len(raw)]
	upper, same := true, true
	for i := 0; i < len(raw); i++ {
		b := raw[i]
		switch {
		case upper && 'a' <= b && b <= 'z':
			b -= 'a' - 'A'
			same = false
		case !upper && 'A' <= b && b <= 'Z':
			b += 'a' - 'A'
			same = false
		}
		c[i] = b
		upper = b == '-'
	}
	if same {
		return raw
	}
	if k, ok := commonNames[string(c)]; ok {
		return k
	}
	return string(c)
}

// commonNames holds the canonical names messages usually carry.
var commonNames = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language",
		"Accept-Ranges", "Age", "Authorization", "Cache-Control",
		"Connection", "Content-Disposition", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Range",
		"Content-Type", "Cookie", "Date", "Dnt", "Etag", "Expires",
		"Forwarded", "Host", "If-Match", "If-Modified-Since",
		"If-None-Match", "If-Range", "Keep-Alive", "Last-Modified",
		"Location", "Origin", "Pragma", "Priority", "Range", "Referer",
		"Sec-Ch-Ua", "Sec-Ch-Ua-Mobile", "Sec-Ch-Ua-Platform",
		"Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site",
		"Sec-Fetch-User", "Server", "Set-Cookie",
		"Strict-Transport-Security", "Te", "Upgrade",
		"Upgrade-Insecure-Requests", "User-Agent", "Vary", "Via",
		"X-Content-Type-Options", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Frame-Options", "X-Real-Ip",
		"X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// Head is a head's field lines located in its text, for a caller that
// passes them on as they came (a proxy writing a backend's plain response
// head to its client) and needs no Header map; Fill builds the map when it
// does.
type Head struct {
	text string
	fs   fields
}

// Len returns the number of field lines.
func (h *Head) Len() int { return h.fs.n }

// Get returns the first value of the field named name (compared ignoring
// ASCII case).
func (h *Head) Get(name string) (string, bool) {
	n, v := h.fs.count(h.text, name)
	return v, n > 0
}

// Values returns the values of the fields named name (compared ignoring
// ASCII case) in the order received, nil when there is none: the lines of
// a list field (RFC 9110 §5.3), which are one list.
func (h *Head) Values(name string) []string {
	return h.fs.appendValues(nil, h.text, name)
}

// count returns how many fields of the head whose text is text are named
// name, and the first one's value.
func (fs *fields) count(text, name string) (n int, first string) {
	for _, f := range fs.f[:fs.n] {
		if asciifold.Equal(text[f.name.start:f.name.end], name) {
			if n == 0 {
				first = text[f.value.start:f.value.end]
			}
			n++
		}
	}
	return n, first
}

// appendValues appends the values of the fields named name.
func (fs *fields) appendValues(vs []string, text, name string) []string {
	for _, f := range fs.f[:fs.n] {
		if asciifold.Equal(text[f.name.start:f.name.end], name) {
			vs = append(vs, text[f.value.start:f.value.end])
		}
	}
	return vs
}

// AppendFields appends every field line as "Name: value\r\n", the name in
// its canonical form (http.CanonicalHeaderKey's), in the order received.
// The values were checked when the head was parsed: no control characters
// but HTAB, no surrounding white space.
func (h *Head) AppendFields(b []byte) []byte {
	for _, f := range h.fs.f[:h.fs.n] {
		upper := true
		for i := f.name.start; i < f.name.end; i++ {
			c := h.text[i]
			switch {
			case upper && 'a' <= c && c <= 'z':
				c -= 'a' - 'A'
			case !upper && 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			}
			b = append(b, c)
			upper = c == '-'
		}
		b = append(b, ": "...)
		b = append(b, h.text[f.value.start:f.value.end]...)
		b = append(b, "\r\n"...)
	}
	return b
}

// contentLength checks the framing fields: no Transfer-Encoding and at
// most one Content-Length, a number. n is -1 without Content-Length.
func (fs *fields) contentLength(text string) (n int64, ok bool) {
	if te, _ := fs.count(text, "Transfer-Encoding"); te > 0 {
		return 0, false
	}
	cn, cl := fs.count(text, "Content-Length")
	switch {
	case cn == 0:
		return -1, true
	case cn > 1:
		return 0, false
	}
	return parseLength(cl)
}
