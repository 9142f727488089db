package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"
)

// Proxy overhead per 1 KiB keep-alive request over plain TCP, against
// net/http/httputil.ReverseProxy and against no proxy at all, in the same
// run: go test -run XXX -bench 1KiB -benchmem ./proxy/

var kib = bytes.Repeat([]byte("x"), 1024)

func benchBackend(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(kib)
	}))
	b.Cleanup(s.Close)
	return s
}

func benchLoop(b *testing.B, url string) { benchLoopBody(b, url, nil) }

// benchLoopBody sends GETs, or POSTs of body when it is not nil.
func benchLoopBody(b *testing.B, url string, body []byte) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	method := "GET"
	if body != nil {
		method = "POST"
	}
	req, _ := http.NewRequest(method, url, nil)
	rd := bytes.NewReader(body)
	b.ReportAllocs()
	b.SetBytes(1024)
	b.ResetTimer()
	for b.Loop() {
		if body != nil {
			rd.Reset(body)
			req.Body, req.ContentLength = io.NopCloser(rd), int64(len(body))
		}
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if n != 1024 || res.StatusCode != 200 {
			b.Fatalf("status %d, %d bytes", res.StatusCode, n)
		}
	}
}

// benchProxy starts this proxy (plain TCP front) in front of be and
// returns its address.
func benchProxy(b *testing.B, be *httptest.Server) string {
	cfg := Config{Upstreams: []UpstreamConfig{upstream("u", addrOf(be))}, Sites: oneSite(RouteConfig{PathPrefix: "/", Upstream: "u"})}
	cfg.Limits.MaxRequestsPerClient = 1024 // the daemon's default
	p, err := New(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	serveProxy(b, p, ln)
	return ln.Addr().String()
}

// benchHTTPUtil starts net/http/httputil.ReverseProxy in front of be and
// returns its URL.
func benchHTTPUtil(b *testing.B, be *httptest.Server) string {
	u, _ := url.Parse(be.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	s := httptest.NewServer(rp)
	b.Cleanup(s.Close)
	return s.URL
}

func BenchmarkProxy1KiB(b *testing.B) {
	be := benchBackend(b)
	benchLoop(b, "http://"+benchProxy(b, be)+"/bench")
}

// BenchmarkProxyPOST1KiB: a 1 KiB POST body up, 1 KiB down (h1Client
// carries the body).
func BenchmarkProxyPOST1KiB(b *testing.B) {
	be := benchBackend(b)
	benchLoopBody(b, "http://"+benchProxy(b, be)+"/bench", kib)
}

func BenchmarkHTTPUtil1KiB(b *testing.B) {
	be := benchBackend(b)
	benchLoop(b, benchHTTPUtil(b, be)+"/bench")
}

func BenchmarkDirect1KiB(b *testing.B) {
	be := benchBackend(b)
	benchLoop(b, be.URL+"/bench")
}

// BenchmarkInterleaved1KiB alternates one request through this proxy, one
// through httputil.ReverseProxy and one straight to the backend in every
// iteration, so that load from other processes hits all three alike; it
// reports each path's ns per request and the ratio proxy/httputil.
func BenchmarkInterleaved1KiB(b *testing.B) {
	be := benchBackend(b)
	proxyAddr, httputilURL := benchProxy(b, be), benchHTTPUtil(b, be)

	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	reqs := []*http.Request{}
	for _, u := range []string{"http://" + proxyAddr + "/bench", httputilURL + "/bench", be.URL + "/bench"} {
		r, _ := http.NewRequest("GET", u, nil)
		reqs = append(reqs, r)
	}
	var spent [3]time.Duration
	b.ResetTimer()
	for b.Loop() {
		for i, req := range reqs {
			start := time.Now()
			res, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			spent[i] += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(spent[0])/n, "proxy-ns/req")
	b.ReportMetric(float64(spent[1])/n, "httputil-ns/req")
	b.ReportMetric(float64(spent[2])/n, "direct-ns/req")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "proxy/httputil")
	b.ReportMetric(float64(spent[0]-spent[2])/float64(spent[1]-spent[2]), "overhead-ratio")
}
