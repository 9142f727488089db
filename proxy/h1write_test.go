package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
)

// TestWriteRequestSameBytes: writeRequest writes what http.Request.Write
// writes, byte for byte, for requests it writes itself and for those it
// leaves to http.Request.Write, and reports WroteHeaders to the client
// trace as http.Request.Write does.
func TestWriteRequestSameBytes(t *testing.T) {
	many := http.Header{}
	for i := range 40 {
		many.Set("X-H"+strconv.Itoa(i), "v")
	}
	cases := []struct {
		name   string
		method string
		url    string
		host   string
		header http.Header
		close  bool
		plain  bool   // passes writesPlainly (written by writeRequest itself)
		body   string // a body of known length
	}{
		{"get", "GET", "http://b/1k", "", http.Header{"Accept": {"*/*"}, "X-Forwarded-For": {"192.0.2.1"}, "User-Agent": {"curl/8"}}, false, true, ""},
		{"ten fields", "GET", "http://b/", "h", http.Header{"K": {"1"}, "J": {"2"}, "I": {"3"}, "H": {"4"}, "G": {"5"}, "F": {"6"}, "E": {"7"}, "D": {"8"}, "C": {"9"}, "B": {"10"}}, false, true, ""},
		{"head", "HEAD", "http://b/", "example.test", http.Header{"A": {"1", "2"}, "B": {}, "C": {""}}, false, true, ""},
		{"query", "GET", "http://b/p?q=1&r=%20", "example.test:8443", http.Header{}, false, true, ""},
		{"no user agent field", "GET", "http://b/x", "h", http.Header{"Z": {"z"}, "A": {"a"}}, false, true, ""},
		{"empty user agent", "GET", "http://b/x", "h", http.Header{"User-Agent": {""}}, false, true, ""},
		{"user agent without value", "GET", "http://b/x", "h", http.Header{"User-Agent": {}}, false, true, ""},
		{"excluded fields", "GET", "http://b/x", "h", http.Header{"Host": {"evil"}, "Content-Length": {"5"}, "Transfer-Encoding": {"chunked"}, "Trailer": {"X"}}, false, true, ""},
		{"escaped path", "GET", "http://b/a%2Fb/c%20d", "h", nil, false, true, ""},
		{"ipv6 host", "GET", "http://[::1]:80/", "", nil, false, true, ""},
		{"empty host", "GET", "http:///x", "", nil, false, true, ""},
		{"post", "POST", "http://b/x", "h", nil, false, false, ""},
		{"delete", "DELETE", "http://b/x", "h", nil, false, false, ""},
		{"close", "GET", "http://b/x", "h", nil, true, false, ""},
		{"value with line break", "GET", "http://b/x", "h", http.Header{"X": {"a\r\nInjected: 1"}}, false, false, ""},
		{"value with spaces around", "GET", "http://b/x", "h", http.Header{"X": {" a "}}, false, false, ""},
		{"user agent with spaces", "GET", "http://b/x", "h", http.Header{"User-Agent": {"\tua "}}, false, false, ""},
		{"invalid field name", "GET", "http://b/x", "h", http.Header{"Bad Name": {"v"}, "Ok": {"v"}}, false, false, ""},
		{"many fields", "GET", "http://b/x", "h", many, false, false, ""},
		{"non-ASCII host", "GET", "http://b/x", "bücher.example", nil, false, false, ""},
		{"zone", "GET", "http://b/x", "[fe80::1%25eth0]:80", nil, false, false, ""},
		{"invalid host", "GET", "http://b/x", "a b", nil, false, false, ""},
		{"options star", "OPTIONS", "http://b/x", "h", nil, false, false, ""},
		{"post with body", "POST", "http://b/api", "h", http.Header{"Content-Type": {"application/json"}, "Content-Length": {"1"}}, false, true, `{"a":1}`},
		{"put with body", "PUT", "http://b/x?y=1", "h", nil, false, true, "0123456789"},
		{"body and close", "POST", "http://b/x", "h", nil, true, false, "abc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(ctx context.Context) *http.Request {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				r, err := http.NewRequestWithContext(ctx, tc.method, tc.url, body)
				if err != nil {
					t.Fatal(err)
				}
				r.Host, r.Close = tc.host, tc.close
				if tc.host == "" {
					r.Host = r.URL.Host
				}
				if tc.header != nil {
					r.Header = tc.header
				}
				return r
			}
			want, wantErr := written(func(w *bufio.Writer) error { return mk(context.Background()).Write(w) })
			wrote := 0
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteHeaders: func() { wrote++ }})
			got, gotErr := written(func(w *bufio.Writer) error {
				r := mk(ctx)
				sent, err := writeRequest(w, r)
				if err == nil && r.Body != nil && !sent {
					_, err = io.Copy(w, r.Body) // the caller writes the body
				}
				if tc.plain && sent {
					t.Errorf("left to http.Request.Write")
				}
				return err
			})
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("writeRequest:\n%q (%v)\nhttp.Request.Write:\n%q (%v)", got, gotErr, want, wantErr)
			}
			if wantErr == nil && wrote != 1 {
				t.Errorf("WroteHeaders reported %d times", wrote)
			}
			if tc.plain && !writesPlainly(mk(context.Background())) {
				t.Errorf("left to http.Request.Write")
			}
		})
	}
}

func written(write func(*bufio.Writer) error) (string, error) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	err := write(w)
	w.Flush()
	return b.String(), err
}

// TestWriteRequestAllocs: the proxy's common upstream request is written
// without a heap allocation.
func TestWriteRequestAllocs(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://127.0.0.1:8080/api/v1/items", nil)
	r.Header = http.Header{"Accept": {"*/*"}, "User-Agent": {"curl/8"}, "X-Forwarded-For": {"192.0.2.1"}, "X-Forwarded-Proto": {"https"}}
	w := bufio.NewWriter(discard{})
	if n := testing.AllocsPerRun(100, func() { writeRequest(w, r) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
