package daemon

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/proxy"
)

// defaultsUpstream is a conf upstream with conf's defaults (setDefaults)
// and the given targets.
func defaultsUpstream(name string, addrs ...string) conf.Upstream {
	u := conf.Upstream{Name: name, Balance: "round_robin", Protocol: "http"}
	for _, a := range addrs {
		u.Targets = append(u.Targets, conf.Target{Address: a, Weight: 1})
	}
	u.Keepalive.MaxIdle = conf.DefaultKeepaliveMaxIdle
	u.Timeouts = conf.Timeouts{Connect: conf.DefaultConnectTimeout, ResponseHeader: conf.DefaultResponseHeader,
		Idle: conf.DefaultUpstreamIdle, Read: conf.DefaultUpstreamRead, Write: conf.DefaultUpstreamWrite, TunnelIdle: conf.DefaultTunnelIdle}
	u.MaxResponseHeaderBytes = conf.DefaultMaxResponseHeaderBytes
	u.MaxResponseHeaderFields = conf.DefaultMaxResponseHeaderFields
	u.HealthChecks.Passive = conf.PassiveHealth{MaxFails: 0} // off: not under test
	u.Retries = conf.Retries{Tries: conf.DefaultRetryTries, TotalTime: conf.DefaultRetryTotalTime}
	return u
}

// dropBackend reads one request per connection and closes without an
// answer (the request reached the target; its fate is unknown).
func dropBackend(t *testing.T, hits *atomic.Int64) string {
	return testpeer.ServeLoopback(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			hits.Add(1)
		}
	})
}

func okBackend(t *testing.T, hits *atomic.Int64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// plainProxy serves cfg (through the daemon's proxyConfig) on plain TCP.
func plainProxy(t *testing.T, cfg *conf.Config) string {
	p, err := proxy.New(proxyConfig(cfg), proxy.NopObserver{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); p.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.ServeConn(c)
		}
	}()
	return "http://" + ln.Addr().String()
}

func doMethod(t *testing.T, method, url string) int {
	req, _ := http.NewRequest(method, url, nil)
	req.Host = "localhost"
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// TestRouteRetriesApplied: a route's retries replace its upstream's: with
// tries 1 a DELETE that target A received (and dropped without an
// answer) is not replayed on target B.
func TestRouteRetriesApplied(t *testing.T) {
	var dropHits, okHits atomic.Int64
	a, b := dropBackend(t, &dropHits), okBackend(t, &okHits)
	cfg := &conf.Config{
		Upstreams: []conf.Upstream{defaultsUpstream("app", a, b)},
		Sites: []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{{
			Name: "r", PathPrefix: "/", Upstream: "app",
			Retries: &conf.Retries{Tries: 1, TotalTime: conf.DefaultRetryTotalTime},
		}}}},
	}
	url := plainProxy(t, cfg)
	code := doMethod(t, http.MethodDelete, url+"/account/42")
	if dropHits.Load() != 1 {
		t.Fatalf("target A got %d requests, want the first (round robin)", dropHits.Load())
	}
	if okHits.Load() != 0 {
		t.Fatalf("route retries {tries: 1}: the DELETE that reached target A (hits %d) was replayed on target B (hits %d, client got %d) ", dropHits.Load(), okHits.Load(), code)
	}
}

// TestRetryNonIdempotentApplied: retries.retry_non_idempotent lets a POST
// that target A received and dropped be retried on target B.
func TestRetryNonIdempotentApplied(t *testing.T) {
	var dropHits, okHits atomic.Int64
	a, b := dropBackend(t, &dropHits), okBackend(t, &okHits)
	up := defaultsUpstream("app", a, b)
	up.Retries.RetryNonIdempotent = true
	cfg := &conf.Config{
		Upstreams: []conf.Upstream{up},
		Sites:     []conf.Site{{Name: "s", ServerNames: []string{"localhost"}, Routes: []conf.Route{{Name: "r", PathPrefix: "/", Upstream: "app"}}}},
	}
	url := plainProxy(t, cfg)
	code := doMethod(t, http.MethodPost, url+"/ping")
	if code != 200 || okHits.Load() != 1 || dropHits.Load() != 1 {
		t.Fatalf("retry_non_idempotent: true, POST dropped by A (hits %d): client got %d, B hits %d", dropHits.Load(), code, okHits.Load())
	}
}
