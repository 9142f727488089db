package h1head

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

var plainResponses = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nhi",
	"HTTP/1.1 204 No Content\r\nDate: Tue, 01 Dec 2026 22:00:00 GMT\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\nContent-Length: 100\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 404\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nPragma: no-cache\r\nContent-Length: 3\r\n\r\nabc",
	"HTTP/1.1 503 Service Unavailable \r\nRetry-After: 1\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 00\nConnection: Close, x\n\n",
}

var notPlainResponses = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",                          // not complete
	"HTTP/1.1 200 OK\r\n\r\nbody to the close",                          // no length
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",    // chunked
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", // two lengths
	"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX : a\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 600 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n",
	"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1\r\n\r\n",
	"http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: 1\r\n", MaxFields+1) + "Content-Length: 0\r\n\r\n",
	// A length where none may be (RFC 9110 §8.6), also answering a
	// HEAD: the connection is not to be reused.
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n\r\n",
}

// TestResponse: the plain responses are parsed as http.ReadResponse
// parses them, and every other kind is left to it.
func TestResponse(t *testing.T) {
	for _, method := range []string{"GET", "HEAD"} {
		for _, in := range plainResponses {
			if msg := compareResponse([]byte(in), method); msg != "" {
				t.Errorf("%s %q: %s", method, in, msg)
			}
			if _, _, ok := Response([]byte(in), &http.Request{Method: method}); !ok {
				t.Errorf("%s %q: not parsed", method, in)
			}
		}
		for _, in := range notPlainResponses {
			if _, _, ok := Response([]byte(in), &http.Request{Method: method}); ok && !(method == "HEAD" && strings.Contains(in, "body to the close")) {
				t.Errorf("%s %q: parsed, want it left to http.ReadResponse", method, in)
			}
		}
	}
}

// compareResponse parses in with Response and, when it takes it, with
// http.ReadResponse, and describes any difference, the body included.
func compareResponse(in []byte, method string) string {
	req := &http.Request{Method: method}
	got, n, ok := Response(in, req)
	if !ok {
		return ""
	}
	br := bufio.NewReaderSize(bytes.NewReader(in), len(in)+16)
	want, err := http.ReadResponse(br, req)
	if err != nil {
		return "parsed, but ReadResponse says: " + err.Error()
	}
	wantBody, werr := io.ReadAll(want.Body)
	var gotBody []byte
	gerr := error(nil)
	switch {
	case got.Body == http.NoBody:
		if want.Body != http.NoBody {
			return "body presence differs"
		}
	case got.Body != nil:
		return "body neither NoBody nor nil"
	default:
		rest := in[n:]
		if int64(len(rest)) < got.ContentLength {
			gerr = io.ErrUnexpectedEOF
		}
		gotBody = rest[:min(int64(len(rest)), got.ContentLength)]
	}
	if !bytes.Equal(wantBody, gotBody) || (werr == nil) != (gerr == nil) {
		return "body differs"
	}
	if werr == nil && br.Buffered() != len(in)-n-len(gotBody) {
		return "length differs"
	}
	if got.Close && got.ProtoMinor == 1 {
		// Fill keeps the Connection field that ReadResponse drops.
		got.Header = got.Header.Clone()
		delete(got.Header, "Connection")
	}
	if !reflect.DeepEqual(want.Header, got.Header) {
		return "header differs"
	}
	// The field lines passed on as they came (AppendFields) read back as
	// the same header.
	var h Head
	if _, _, ok := ResponseHead(in, req, &h); !ok {
		return "ResponseHead refused what Response took"
	}
	again := got.Proto + " 200 OK\r\n" + string(h.AppendFields(nil)) + "\r\n"
	res2, err := http.ReadResponse(bufio.NewReader(strings.NewReader(again)), &http.Request{Method: "HEAD"})
	if err != nil {
		return "the fields passed on do not parse: " + err.Error()
	}
	if !reflect.DeepEqual(want.Header, res2.Header) {
		return "the fields passed on read back as another header"
	}
	want.Header, got.Header, want.Body, got.Body = nil, nil, nil, nil
	if !reflect.DeepEqual(*want, *got) {
		return "response differs"
	}
	return ""
}

// FuzzResponseMatchesReadResponse: what Response takes,
// http.ReadResponse takes too, and reads into the same response and body.
func FuzzResponseMatchesReadResponse(f *testing.F) {
	for _, s := range append(plainResponses, notPlainResponses...) {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		if msg := compareResponse(in, method); msg != "" {
			t.Fatalf("%s %q: %s", method, in, msg)
		}
	})
}

// TestResponseAllocs bounds the allocations of a typical head: the head
// string, the header map (two blocks), its values and the response.
func TestResponseAllocs(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\nDate: Tue, 01 Dec 2026 22:00:00 GMT\r\n\r\n")
	req := &http.Request{Method: "GET"}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, ok := Response(in, req); !ok {
			t.Fatal("not parsed")
		}
	})
	if allocs > 5 {
		t.Errorf("%v allocations, want at most 5", allocs)
	}
}

func BenchmarkResponse(b *testing.B) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1024\r\nDate: Tue, 01 Dec 2026 22:00:00 GMT\r\n\r\n")
	req := &http.Request{Method: "GET"}
	b.Run("h1head", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Response(in, req)
		}
	})
	b.Run("ReadResponse", func(b *testing.B) {
		benchNetHTTP(b, in, func(br *bufio.Reader) { http.ReadResponse(br, req) })
	})
}

// TestResponseHead: ResponseHead leaves the header to the caller: no map
// until Fill, the fields by name (ignoring case) and as lines.
func TestResponseHead(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nset-cookie: a=1\r\nCONTENT-type:text/html\r\nSet-Cookie: b=2 \r\nContent-Length: 4\r\n\r\nbody")
	var h Head
	res, n, ok := ResponseHead(in, &http.Request{Method: "GET"}, &h)
	if !ok || res.Header != nil || res.ContentLength != 4 || res.Body != nil || string(in[n:]) != "body" {
		t.Fatalf("ResponseHead: %+v %d %v", res, n, ok)
	}
	if v, ok := h.Get("Content-Type"); !ok || v != "text/html" {
		t.Errorf("Get Content-Type: %q %v", v, ok)
	}
	if _, ok := h.Get("Date"); ok {
		t.Error("Get Date found one")
	}
	want := "Set-Cookie: a=1\r\nContent-Type: text/html\r\nSet-Cookie: b=2\r\nContent-Length: 4\r\n"
	if got := string(h.AppendFields([]byte("x"))); got != "x"+want {
		t.Errorf("AppendFields: %q, want %q", got, "x"+want)
	}
	h.Fill(res)
	if got := res.Header["Set-Cookie"]; len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" || res.Header.Get("Content-Type") != "text/html" {
		t.Errorf("Fill: %v", res.Header)
	}
	close := []byte("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	res, _, ok = ResponseHead(close, nil, &h)
	if !ok || !res.Close {
		t.Fatalf("Connection: close: %+v %v", res, ok)
	}
	h.Fill(res)
	if got := res.Header["Connection"]; len(got) != 1 || got[0] != "close" {
		t.Errorf("Fill dropped Connection: close (%q): the fields it names would pass as end-to-end", got)
	}
}
