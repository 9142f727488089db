package proxy

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestTCPStreamLoggedWithStatus: every session of a stream site has its
// access-log line, with nginx stream's $status: 200 for a session spliced
// to its end, 403 for a client that client_ip refuses, 502 when no target
// answered (the address tried). An operator auditing who reached a legacy service (or tried
// to) finds the refused and failed attempts beside the served ones.
func TestTCPStreamLoggedWithStatus(t *testing.T) {
	target, dead := echoTCP(t, false, nil), deadAddr(t)
	for _, tc := range []struct {
		name    string
		targets []string
		nets    []string
		want    string
	}{
		{"served", []string{target}, nil, "STREAM tcp 200 " + target + " 4 4"},
		{"client_ip", []string{target}, []string{"10.0.0.0/8"}, "STREAM tcp 403 - 0 0"},
		{"targets down", []string{dead}, nil, "STREAM tcp 502 " + dead + " 0 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logPath := t.TempDir() + "/access.log"
			cfg := Config{
				AccessLog: AccessLogConfig{Path: logPath, Format: "template", Template: "{method} {site} {status} {upstream_addr} {bytes_in} {bytes_out}"},
				Upstreams: []UpstreamConfig{upstream("legacy", tc.targets...)},
				Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy", ClientIP: tc.nets}}},
			}
			f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
			io.WriteString(c, "ping")
			c.(*net.TCPConn).CloseWrite()
			io.ReadAll(c) // the echo, or nothing: until the proxy closes
			c.Close()
			line := waitAccessLog(t, f, logPath)
			if got := strings.TrimSpace(string(line)); got != tc.want {
				t.Errorf("access log %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTCPStreamRefusedInShutdownLogged: a stream session that arrives
// once graceful shutdown began is refused, as the HTTP servers refuse
// new connections then (it would hold the drain up to its grace), and
// has its access-log line with status 503, as nginx stream logs a
// session it refused: an audit of who tried to reach a service sees it.
func TestTCPStreamRefusedInShutdownLogged(t *testing.T) {
	target := echoTCP(t, false, nil)
	logPath := t.TempDir() + "/access.log"
	cfg := Config{
		AccessLog: AccessLogConfig{Path: logPath, Format: "template", Template: "{method} {site} {status} {upstream_addr} {bytes_in} {bytes_out}"},
		Upstreams: []UpstreamConfig{upstream("legacy", target)},
		Sites:     []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}},
	}
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{Site: "tcp"}})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		return c
	}
	// A session in progress keeps the shutdown waiting.
	held := dial()
	defer held.Close()
	io.WriteString(held, "ping")
	if _, err := io.ReadFull(held, make([]byte, 4)); err != nil {
		t.Fatalf("the first session's echo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound(20*time.Second))
	defer cancel()
	go f.p.Shutdown(ctx)
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); !f.p.shutting.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Shutdown never began")
		}
	}
	late := dial()
	io.WriteString(late, "ping")
	late.(*net.TCPConn).CloseWrite()
	if b, _ := io.ReadAll(late); len(b) != 0 {
		t.Errorf("a session begun in shutdown was spliced to the target (read %q)", b)
	}
	late.Close()
	line := waitAccessLog(t, f, logPath)
	if got, want := strings.TrimSpace(string(line)), "STREAM tcp 503 - 0 0"; got != want {
		t.Errorf("access log %q, want %q", got, want)
	}
}

// waitAccessLog flushes f's access log until the file at path holds
// something (bounded), and returns what it holds.
func waitAccessLog(t *testing.T, f *front, path string) []byte {
	t.Helper()
	var data []byte
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f.p.AccessLog().Flush()
		if data, _ = os.ReadFile(path); len(data) > 0 {
			break
		}
	}
	return data
}
