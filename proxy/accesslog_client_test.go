package proxy

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccessLogClientBehindTrustedProxy: behind a proxy of trusted_proxies
// the access log's {client} is the client X-Real-IP names, the address
// client_ip, rate_limit and the per-client limits judged the request by
// (nginx's $remote_addr behind set_real_ip_from), and {peer} the
// connection's (nginx's $realip_remote_addr). An untrusted peer's
// X-Forwarded-For changes neither.
func TestAccessLogClientBehindTrustedProxy(t *testing.T) {
	for _, tc := range []struct {
		trusted []string
		want    []string
	}{
		{[]string{"127.0.0.1"}, []string{
			"198.51.100.7 127.0.0.1 200", "198.51.100.7 127.0.0.1 429", "203.0.113.9 127.0.0.1 200", "127.0.0.1 127.0.0.1 200"}},
		{nil, []string{
			"127.0.0.1 127.0.0.1 200", "127.0.0.1 127.0.0.1 429", "127.0.0.1 127.0.0.1 429", "127.0.0.1 127.0.0.1 429"}},
	} {
		path := filepath.Join(t.TempDir(), "access.log")
		cfg := Config{
			TrustedProxies: tc.trusted,
			Sites: oneSite(RouteConfig{Name: "limited", RateLimit: &RateLimitConfig{Interval: time.Hour},
				Respond: &RespondConfig{Status: 200, Body: "ok"}}),
			AccessLog: AccessLogConfig{Path: path, Format: "template", Template: "{client} {peer} {status}"},
		}
		f := newFront(t, cfg, frontOpts{})
		for _, xff := range []string{"198.51.100.7", "198.51.100.7", "203.0.113.9, 127.0.0.1", ""} {
			req := "GET / HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n"
			if xff != "" {
				req += "X-Forwarded-For: " + xff + "\r\n"
			}
			rawRoundTrip(t, f.addr, req+"\r\n", 3*time.Second)
		}
		var lines []string
		for deadline := time.Now().Add(20 * time.Second); len(lines) < len(tc.want) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			lines = strings.Split(strings.TrimSpace(string(waitAccessLog(t, f, path))), "\n")
		}
		if strings.Join(lines, "|") != strings.Join(tc.want, "|") {
			t.Errorf("trusted_proxies %v: access log\n%s\nwant\n%s", tc.trusted, strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}
