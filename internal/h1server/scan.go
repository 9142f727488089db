package h1server

import "bytes"

// headScan watches the raw bytes of one request's header block as they
// are read, for what http.ReadRequest hides from its caller:
//
//   - whether the block had both Content-Length and Transfer-Encoding
//     (ReadRequest frames such a request by Transfer-Encoding and drops
//     Content-Length; RFC 9112 §6.1 has the server close the connection
//     after responding, so that nothing a peer that trusted Content-Length
//     would see as another request is ever served);
//   - how many Host fields it had, and the value of the first (ReadRequest
//     removes Host from the header and takes the request target's
//     authority over it; RFC 9112 §3.2 has a server reject a request
//     without Host, or with a malformed one, with 400).
//
// It starts at the first byte of a request and stops at the empty line
// that ends the header block: body bytes and pipelined requests read in
// the same system call are not looked at. Only lines that ReadRequest
// takes as fields can match (a field name is a token directly followed
// by a colon; folded continuation lines start with white space).
type headScan struct {
	prefix [len("transfer-encoding:")]byte // start of the current line
	n      int                             // bytes of the current line so far
	inHost bool                            // the current line is a Host field
	seen   bool                            // a non-empty line was seen
	done   bool                            // the empty line ending the block was seen

	cl, te bool
	hosts  int
	host   []byte // raw value of the first Host field (reused)
	fields int    // field lines (continuations too) seen so far
}

var (
	prefixCL   = []byte("content-length:")
	prefixTE   = []byte("transfer-encoding:")
	prefixHost = []byte("host:")
)

func (s *headScan) reset() {
	host := s.host[:0]
	*s = headScan{host: host}
}

// ambiguous reports whether the block had both Content-Length and
// Transfer-Encoding.
func (s *headScan) ambiguous() bool { return s.cl && s.te }

// feed scans b, the next bytes of the request; it returns at the end of
// the header block.
func (s *headScan) feed(b []byte) {
	for len(b) > 0 && !s.done {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		s.segment(seg)
		if i < 0 {
			return
		}
		s.endLine()
		b = b[i+1:]
	}
}

// segment takes the bytes of the current line up to (not including) its
// line feed, or up to the end of what was read so far.
func (s *headScan) segment(seg []byte) {
	if s.inHost {
		s.host = append(s.host, seg...)
	}
	if s.n < len(s.prefix) {
		k := copy(s.prefix[s.n:], seg)
		if s.n+k >= len(prefixHost) && s.n < len(prefixHost) && s.seen && bytes.EqualFold(s.prefix[:len(prefixHost)], prefixHost) {
			s.hosts++
			if s.hosts == 1 {
				s.inHost = true
				s.host = append(s.host[:0], seg[len(prefixHost)-s.n:]...)
			}
		}
	}
	s.n += len(seg)
}

func (s *headScan) endLine() {
	n := s.n
	s.n = 0
	s.inHost = false
	if n > 0 && n <= len(s.prefix) && s.prefix[n-1] == '\r' {
		n--
	}
	if n == 0 {
		if s.seen { // an empty line after the request line ends the block
			s.done = true
		}
		return
	}
	if !s.seen {
		s.seen = true // the request line
		return
	}
	s.fields++
	line := s.prefix[:min(n, len(s.prefix))]
	switch {
	case hasPrefixFold(line, prefixCL):
		s.cl = true
	case hasPrefixFold(line, prefixTE):
		s.te = true
	}
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}

// hostValue returns the first Host field's value as ReadRequest would
// (white space around it removed).
func (s *headScan) hostValue() []byte {
	return bytes.Trim(bytes.TrimSuffix(s.host, []byte("\r")), " \t")
}
