package h1head

import "net/http"

// Response parses the response head at the start of buf, the answer to
// req, and returns it with the head's length. Besides the cases the
// package lists, it leaves to http.ReadResponse a status line other than
// "HTTP/1.x SP 3DIGIT [SP reason]" (RFC 9112 §4) with a code from 100 to
// 599 and a reason free of control characters, a response whose body
// runs to the connection's close (no Content-Length where one is due), and
// a 1xx or 204 response with a Content-Length.
//
// The response's Body is http.NoBody when it has none (RFC 9112 §6.3:
// HEAD, 1xx, 204, 304, Content-Length 0); otherwise it is nil and the
// body is the ContentLength bytes after the head, for the caller to
// deliver. As http.ReadResponse, Close comes from the Connection field
// (which the map keeps: see Fill).
func Response(buf []byte, req *http.Request) (res *http.Response, n int, ok bool) {
	var h Head
	if res, n, ok = ResponseHead(buf, req, &h); ok {
		h.Fill(res)
	}
	return res, n, ok
}

// ResponseHead is Response without the Header map: it leaves res.Header
// nil and the fields in h, for the caller to pass on with
// h.AppendFields or to give res its map with h.Fill.
func ResponseHead(buf []byte, req *http.Request, h *Head) (res *http.Response, n int, ok bool) {
	line, next, ok := nextLine(buf, 0)
	if !ok || len(line) < len("HTTP/1.1 200") || line[8] != ' ' {
		return nil, 0, false
	}
	proto, ok := version(line[:8])
	if !ok {
		return nil, 0, false
	}
	status := line[9:]
	code := 0
	for i, c := range status[:3] {
		if c < '0' || c > '9' || i == 0 && (c < '1' || c > '5') {
			return nil, 0, false
		}
		code = code*10 + int(c-'0')
	}
	if len(status) > 3 && status[3] != ' ' {
		return nil, 0, false
	}
	for _, c := range status {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, 0, false
		}
	}
	h.fs.n = 0
	if n, ok = h.fs.scan(buf, next); !ok {
		return nil, 0, false
	}
	h.text = string(buf[:n])
	cl, ok := h.fs.contentLength(h.text)
	if !ok {
		return nil, 0, false
	}
	minor := 1
	if proto == "HTTP/1.0" {
		minor = 0
	}
	var cv [4]string
	res = &http.Response{
		Status:     h.text[9:len(line)],
		StatusCode: code,
		Proto:      proto,
		ProtoMajor: 1,
		ProtoMinor: minor,
		Request:    req,
		Close:      closeAfter(minor, h.fs.appendValues(cv[:0], h.text, "Connection")),
	}
	switch {
	case (code/100 == 1 || code == http.StatusNoContent) && cl >= 0:
		// A body announced where none may be (RFC 9110 §8.6), also in
		// answer to a HEAD: left to the caller's slower path, which
		// does not reuse the connection.
		return nil, 0, false
	case req != nil && req.Method == http.MethodHead:
		res.ContentLength, res.Body = cl, http.NoBody
	case code/100 == 1 || code == http.StatusNoContent || code == http.StatusNotModified:
		res.ContentLength, res.Body = 0, http.NoBody
	case cl < 0:
		return nil, 0, false // delimited by the connection's close
	case cl == 0:
		res.ContentLength, res.Body = 0, http.NoBody
	default:
		res.ContentLength = cl
	}
	return res, n, true
}

// Fill gives res, read by ResponseHead into h, its Header map. Unlike
// http.ReadResponse, which drops a Connection field that says "close"
// in HTTP/1.1, it keeps that field whole: the other fields it names are
// hop-by-hop too (RFC 9110 §7.6.1), and a proxy that no longer saw them
// named would pass them on.
func (h *Head) Fill(res *http.Response) {
	res.Header = h.fs.header(h.text, nil)
}
