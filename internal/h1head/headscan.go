package h1head

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/gmproxy/gmproxy/internal/asciifold"
)

// HeadScan notes what net/http's readers drop of one message head given
// to it in pieces (Write), from the head's first byte on; it takes no
// byte past the empty line that ends the head:
//   - the values of its Connection fields: http.ReadResponse drops a
//     Connection field that says "close" in HTTP/1.1, and with it the
//     other fields the field names as hop-by-hop (RFC 9110 §7.6.1), which
//     a proxy must then remove;
//   - whether it has both Content-Length and Transfer-Encoding, which
//     net/http reads as chunked, dropping Content-Length, where RFC 9112
//     §6.3 has a proxy take it as an error (request smuggling, response
//     splitting), and whether it has either (Framed);
//
// a field name followed by spaces before its colon counts as the name.
//
// Fed the bytes http.ReadResponse reads, it recovers them. Lines
// end at LF (a CR before it is dropped), as net/textproto reads them; a
// line starting with SP or HTAB continues the field before it (obs-fold,
// RFC 9112 §5.2).
type HeadScan struct {
	line    []byte // the current line so far
	started bool   // past the start line
	code    int    // the status line's code; 0: none (a request line)
	// field is the field line being read, with its continuations (nil:
	// none); fieldBuf keeps its storage.
	field, fieldBuf []byte
	done            bool
	vals            []string
	length, coding  bool // a Content-Length, a Transfer-Encoding field
}

// Reset makes s ready for a new head.
func (s *HeadScan) Reset() {
	s.line = s.line[:0]
	s.started, s.done = false, false
	s.code = 0
	s.field = nil
	s.vals = nil
	s.length, s.coding = false, false
}

// Done reports whether the head's end was seen.
func (s *HeadScan) Done() bool { return s.done }

// StatusCode returns the code of the head's status line ("HTTP/1.x
// 3DIGIT"), or 0.
func (s *HeadScan) StatusCode() int { return s.code }

// Connection returns the Connection fields' values, in order.
func (s *HeadScan) Connection() []string { return s.vals }

// LengthAndCoding reports whether the head has both a Content-Length and
// a Transfer-Encoding field.
func (s *HeadScan) LengthAndCoding() bool { return s.length && s.coding }

// Framed reports whether the head has a Content-Length or a
// Transfer-Encoding field: a 204 response that has one announces a body
// it must not have (RFC 9110 §8.6, RFC 9112 §6.1), and whatever the
// sender then writes may be read as the next response.
func (s *HeadScan) Framed() bool { return s.length || s.coding }

// Write scans p, the head's next bytes, and returns how many belong to
// the head.
func (s *HeadScan) Write(p []byte) int {
	if s.done {
		return 0
	}
	for i := 0; i < len(p); {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			s.line = append(s.line, p[i:]...)
			return len(p)
		}
		s.line = append(s.line, p[i:i+j]...)
		i += j + 1
		s.endLine(bytes.TrimSuffix(s.line, []byte("\r")))
		s.line = s.line[:0]
		if s.done {
			return i
		}
	}
	return len(p)
}

// endLine takes one complete line of the head. A field line and its
// continuations are joined as net/textproto joins them: each trimmed of
// spaces and tabs, with one space between (an empty continuation too),
// the value then trimmed on its left.
func (s *HeadScan) endLine(line []byte) {
	switch {
	case !s.started:
		s.started = true // the status or request line
		s.code = statusCode(line)
	case len(line) == 0:
		s.endField()
		s.done = true
	case line[0] == ' ' || line[0] == '\t':
		if s.field != nil {
			s.field = append(s.field, ' ')
			s.field = append(s.field, bytes.Trim(line, " \t")...)
		}
	default:
		s.endField()
		s.field = append(s.fieldBuf[:0], bytes.Trim(line, " \t")...)
	}
}

// endField takes the field line gathered in s.field.
func (s *HeadScan) endField() {
	if s.field == nil {
		return
	}
	name, value, ok := bytes.Cut(s.field, []byte(":"))
	// "Content-Length :" is no field name (RFC 9112 §5.1), but
	// net/http keeps it under that name; a proxy that forwarded it would
	// have to remove the space, and then it frames the message.
	name = bytes.TrimRight(name, " \t")
	switch {
	case !ok:
	case len(name) == len("Connection") && asciifold.Equal(string(name), "Connection"):
		s.vals = append(s.vals, string(bytes.TrimLeft(value, " \t")))
	case len(name) == len("Content-Length") && asciifold.Equal(string(name), "Content-Length"):
		s.length = true
	case len(name) == len("Transfer-Encoding") && asciifold.Equal(string(name), "Transfer-Encoding"):
		s.coding = true
	}
	s.fieldBuf, s.field = s.field[:0], nil
}

// statusCode reads a status line's code as http.ReadResponse does, or
// returns 0.
func statusCode(line []byte) int {
	proto, status, ok := bytes.Cut(line, []byte(" "))
	if _, _, isHTTP := http.ParseHTTPVersion(string(proto)); !ok || !isHTTP {
		return 0
	}
	code, _, _ := bytes.Cut(bytes.TrimLeft(status, " "), []byte(" "))
	n, err := strconv.Atoi(string(code))
	if len(code) != 3 || err != nil || n < 0 {
		return 0
	}
	return n
}
