package daemon

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy"
)

// TestStreamRefusedAtShutdownLogged: a stream site's connection that
// arrives once the generation stopped taking them (shutdown) is closed
// with its access-log line, status 503 (proxy.RefuseConn), as every
// session a stream site served or refused has one, and not closed
// without a trace.
func TestStreamRefusedAtShutdownLogged(t *testing.T) {
	logPath := t.TempDir() + "/access.log"
	px, err := proxy.New(proxy.Config{
		AccessLog: proxy.AccessLogConfig{Path: logPath, Format: "template", Template: "{method} {site} {status}"},
		Upstreams: []proxy.UpstreamConfig{{Name: "u", Targets: []proxy.TargetConfig{{Address: "127.0.0.1:1"}}}},
		Sites:     []proxy.SiteConfig{{Name: "legacy", Stream: &proxy.StreamConfig{Upstream: "u"}}},
	}, proxy.NopObserver{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	gen := &Generation{}
	gen.serveWith(px, &conf.Config{Sites: []conf.Site{{Name: "legacy", Stream: &conf.Stream{Target: "127.0.0.1:1"}}}})
	ref := gen.serveRef()
	ref.retire()
	l := &listener{}
	l.gen.Store(ref)
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b)
	l.dispatch(frontdoor.NewConn(a, frontdoor.ConnState{Site: "legacy"}))
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("the connection refused at shutdown was left open")
	}
	px.AccessLog().Flush()
	if line, _ := os.ReadFile(logPath); strings.TrimSpace(string(line)) != "STREAM legacy 503" {
		t.Errorf("access log %q, want the refused session with status 503", line)
	}
}
