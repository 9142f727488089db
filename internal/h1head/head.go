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

// header builds the header map; head is buf as a string.
func (fs *fields) header(head string, buf []byte) http.Header {
	h := make(http.Header, fs.n)
	values := make([]string, fs.n)
	for i, f := range fs.f[:fs.n] {
		key := fieldKey(head, buf, f.name)
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

// contentLength checks the framing fields: no Transfer-Encoding and at
// most one Content-Length, a number. n is -1 without Content-Length.
func contentLength(h http.Header) (n int64, ok bool) {
	if _, te := h["Transfer-Encoding"]; te {
		return 0, false
	}
	cl := h["Content-Length"]
	switch {
	case len(cl) == 0:
		return -1, true
	case len(cl) > 1 || cl[0] == "" || len(cl[0]) > 18:
		return 0, false
	}
	for i := 0; i < len(cl[0]); i++ {
		c := cl[0][i]
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
// field name at name in buf: a common name's constant, a slice of head
// when the name is written canonically, or a new string.
func fieldKey(head string, buf []byte, name span) string {
	raw := buf[name.start:name.end]
	var a [64]byte
	if len(raw) > len(a) {
		return http.CanonicalHeaderKey(head[name.start:name.end])
	}
	c := a[:len(raw)]
	upper := true
	for i, b := range raw {
		switch {
		case upper && 'a' <= b && b <= 'z':
			b -= 'a' - 'A'
		case !upper && 'A' <= b && b <= 'Z':
			b += 'a' - 'A'
		}
		c[i] = b
		upper = b == '-'
	}
	if k, ok := commonNames[string(c)]; ok {
		return k
	}
	if bytes.Equal(c, raw) {
		return head[name.start:name.end]
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
