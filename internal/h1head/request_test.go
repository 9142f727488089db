package h1head

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

var plainRequests = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /1k?x=1&y=%20 HTTP/1.1\r\nHost: example.com:8443\r\nUser-Agent: curl/8.5\r\nAccept: */*\r\n\r\n",
	"HEAD /a%2Fb HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"DELETE /x HTTP/1.1\nhost: a\nx-forwarded-FOR: 1.2.3.4\nX-Forwarded-For:  5.6.7.8 \t\n\n",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\nContent-Length: 0\r\nConnection: close\r\n\r\nGET /next HTTP/1.1\r\n",
	"OPTIONS /x HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Obs: caf\xc3\xa9\r\nX-Very-Long-Name-That-Is-Not-Common-At-All-Whatsoever-And-Then-Some: 1\r\n\r\n",
	"GET //double/slash HTTP/1.1\r\nHost: a\r\nTrailer: X\r\n\r\n",
}

var notPlainRequests = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n",                                    // not complete
	"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",                        // obs-fold
	"GET / HTTP/1.1\r\n Host: a\r\n\r\n",                               // leading space
	"GET / HTTP/1.1\r\nHost : a\r\n\r\n",                               // space before colon
	"GET / HTTP/1.1\r\nHost a\r\n\r\n",                                 // no colon
	"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",                              // control character
	"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",                                // bare CR
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",       // a body
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", // a body
	"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", // absolute-form
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
	"G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", // the URL parser's refusal
	"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\n" + strings.Repeat("X-A: 1\r\n", MaxFields+1) + "\r\n",
}

// TestRequest: the plain heads are parsed as http.ReadRequest parses
// them, and every other kind is left to it.
func TestRequest(t *testing.T) {
	for _, in := range plainRequests {
		if msg := compareRequest([]byte(in)); msg != "" {
			t.Errorf("%q: %s", in, msg)
		}
		var req http.Request
		if _, ok := Request([]byte(in), &req); !ok {
			t.Errorf("%q: not parsed", in)
		}
	}
	for _, in := range notPlainRequests {
		var req http.Request
		if _, ok := Request([]byte(in), &req); ok {
			t.Errorf("%q: parsed, want it left to http.ReadRequest", in)
		}
	}
}

// compareRequest parses in with Request and, when it takes it, with
// http.ReadRequest, and describes any difference.
// reuseAcross is the header storage that compareRequest's reusing parse
// shares across every input it sees (in one process), as a connection's
// requests do.
var reuseAcross Reuse

func compareRequest(in []byte) string {
	var got http.Request
	n, ok := Request(in, &got)
	var reused http.Request
	rn, rok := RequestReusing(in, &reused, &reuseAcross)
	if rok != ok || rn != n {
		return "RequestReusing decides otherwise than Request"
	}
	if !ok {
		return ""
	}
	if !reflect.DeepEqual(reused.Header, got.Header) {
		return "header built in reused storage differs"
	}
	br := bufio.NewReaderSize(bytes.NewReader(in), len(in)+16)
	want, err := http.ReadRequest(br)
	if err != nil {
		return "parsed, but ReadRequest says: " + err.Error()
	}
	if rest := len(in) - n; br.Buffered() != rest {
		return "head length differs"
	}
	if want.Body != http.NoBody || got.Body != http.NoBody {
		return "body differs"
	}
	want.Body, got.Body = nil, nil
	if !reflect.DeepEqual(want.URL, got.URL) {
		return "URL differs"
	}
	want.URL, got.URL = nil, nil
	if !reflect.DeepEqual(want.Header, got.Header) {
		return "header differs"
	}
	want.Header, got.Header = nil, nil
	if !reflect.DeepEqual(*want, got) {
		return "request differs"
	}
	return ""
}

// FuzzRequestMatchesReadRequest: what Request takes, http.ReadRequest
// takes too, and reads into the same request.
func FuzzRequestMatchesReadRequest(f *testing.F) {
	for _, s := range append(plainRequests, notPlainRequests...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if msg := compareRequest(in); msg != "" {
			t.Fatalf("%q: %s", in, msg)
		}
	})
}

// TestRequestAllocs bounds the allocations of a typical head: the head
// string, the header map (two blocks), its values and the URL.
func TestRequestAllocs(t *testing.T) {
	in := []byte("GET /1k HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gmproxy-s_time\r\nAccept: */*\r\nX-Custom-Field: 1\r\n\r\n")
	var req http.Request
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := Request(in, &req); !ok {
			t.Fatal("not parsed")
		}
	})
	if allocs > 5 {
		t.Errorf("%v allocations, want at most 5", allocs)
	}
}

// TestRequestReusing: a header built in reused storage holds only its own
// request's fields, and costs three allocations less.
func TestRequestReusing(t *testing.T) {
	var r Reuse
	var req http.Request
	first := []byte("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\nCookie: a=1\r\nCookie: b=2\r\nX-1: 1\r\nX-2: 2\r\nX-3: 3\r\nX-4: 4\r\nX-5: 5\r\nX-6: 6\r\nX-7: 7\r\nX-8: 8\r\nX-9: 9\r\nX-10: 10\r\nX-11: 11\r\nX-12: 12\r\nX-13: 13\r\nX-14: 14\r\nX-15: 15\r\nX-16: 16\r\nX-17: 17\r\n\r\n")
	if _, ok := RequestReusing(first, &req, &r); !ok {
		t.Fatal("first head not parsed")
	}
	h1 := req.Header
	if len(h1) != 19 || len(h1["Cookie"]) != 2 { // Host is not a field of the map
		t.Fatalf("first header %v", h1)
	}
	second := []byte("GET /b HTTP/1.1\r\nHost: b\r\nX-Second: yes\r\n\r\n")
	if _, ok := RequestReusing(second, &req, &r); !ok {
		t.Fatal("second head not parsed")
	}
	if want := (http.Header{"X-Second": {"yes"}}); !reflect.DeepEqual(req.Header, want) {
		t.Errorf("second header %v, want %v", req.Header, want)
	}
	r.Clear()
	if len(r.h) != 0 {
		t.Errorf("Clear left %d fields", len(r.h))
	}
	for _, v := range r.vals[:cap(r.vals)] {
		if v != "" {
			t.Fatalf("Clear left the value %q", v)
		}
	}
	in := []byte("GET /1k HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gmproxy-s_time\r\nAccept: */*\r\nX-Custom-Field: 1\r\n\r\n")
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := RequestReusing(in, &req, &r); !ok {
			t.Fatal("not parsed")
		}
	})
	if allocs > 2 {
		t.Errorf("%v allocations with reused storage, want at most 2 (the head string and the URL)", allocs)
	}
}

func BenchmarkRequest(b *testing.B) {
	in := []byte("GET /1k HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gmproxy-s_time\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n")
	b.Run("h1head", func(b *testing.B) {
		b.ReportAllocs()
		var req http.Request
		for b.Loop() {
			Request(in, &req)
		}
	})
	b.Run("ReadRequest", func(b *testing.B) {
		benchNetHTTP(b, in, func(br *bufio.Reader) { http.ReadRequest(br) })
	})
}

// benchNetHTTP runs read, one of net/http's readers, on in over and over
// (the baseline of the h1head benchmarks).
func benchNetHTTP(b *testing.B, in []byte, read func(*bufio.Reader)) {
	b.ReportAllocs()
	r := bytes.NewReader(in)
	br := bufio.NewReader(r)
	for b.Loop() {
		r.Reset(in)
		br.Reset(r)
		read(br)
	}
}
