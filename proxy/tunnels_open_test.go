package proxy

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// openObserver counts the stream sessions and tunnels open, by site and
// upstream, as a StreamObserver.
type openObserver struct {
	NopObserver
	mu   sync.Mutex
	open map[string]int
	max  map[string]int
}

func newOpenObserver() *openObserver {
	return &openObserver{open: map[string]int{}, max: map[string]int{}}
}

func (o *openObserver) StreamOpened(site, upstream string) func() {
	k := site + "/" + upstream
	o.mu.Lock()
	o.open[k]++
	o.max[k] = max(o.max[k], o.open[k])
	o.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			o.open[k]--
			o.mu.Unlock()
		})
	}
}

func (o *openObserver) get(k string) (open, most int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open[k], o.max[k]
}

// check fails unless exactly one session of k was seen open, and then
// waits until none is.
func (o *openObserver) check(t *testing.T, k string) {
	t.Helper()
	if _, most := o.get(k); most != 1 {
		t.Fatalf("%s: %d sessions seen open at once, want the 1 the test opened", k, most)
	}
	for deadline := time.Now().Add(testwait.Bound(20 * time.Second)); ; time.Sleep(5 * time.Millisecond) {
		open, _ := o.get(k)
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d sessions still open after the client left", k, open)
		}
	}
}

// TestTunnelsOpenObserved: each TCP stream session, WebSocket tunnel and
// extended CONNECT tunnel is reported open to a StreamObserver (the
// metrics' gauge of open tunnels) while it moves bytes, under its site
// and upstream, and closed once it ends.
func TestTunnelsOpenObserved(t *testing.T) {
	if !strings.Contains(getenv("GODEBUG"), "http2xconnect=1") {
		runChild(t, "TestTunnelsOpenObserved", "GODEBUG=http2xconnect=1")
		return
	}
	t.Run("upgrade", func(t *testing.T) {
		obs := newOpenObserver()
		f := newFront(t, proxyTo(addrOf(wsEchoBackend(t))), frontOpts{obs: obs})
		ws := dialWS(t, f)
		wsEcho(t, ws, "hello")
		if open, _ := obs.get("s/u"); open != 1 {
			t.Fatalf("a WebSocket echoing: %d tunnels open, want 1", open)
		}
		ws.Close()
		obs.check(t, "s/u")
	})
	t.Run("stream", func(t *testing.T) {
		obs := newOpenObserver()
		cfg := Config{Upstreams: []UpstreamConfig{upstream("legacy", echoTCP(t, false, nil))},
			Sites: []SiteConfig{{Name: "tcp", Stream: &StreamConfig{Upstream: "legacy"}}}}
		f := newFront(t, cfg, frontOpts{obs: obs, state: &frontdoor.ConnState{Site: "tcp"}})
		c := dialRaw(t, f.addr)
		io.WriteString(c, "ping")
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		if open, _ := obs.get("tcp/legacy"); open != 1 {
			t.Fatalf("a stream echoing: %d sessions open, want 1", open)
		}
		c.Close()
		obs.check(t, "tcp/legacy")
	})
	t.Run("extended CONNECT", func(t *testing.T) {
		obs := newOpenObserver()
		f := newFront(t, proxyTo(addrOf(wsEchoBackend(t))), frontOpts{obs: obs, state: &frontdoor.ConnState{ALPN: "h2"}})
		fr := extendedConnect(t, f.addr)
		var got []byte
		for len(got) < 4 {
			fm, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("extended CONNECT: %v", err)
			}
			switch fm := fm.(type) {
			case *http2.HeadersFrame:
				if fm.StreamID == 1 {
					fr.WriteData(1, false, []byte{0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2})
				}
			case *http2.DataFrame:
				if fm.StreamID == 1 {
					got = append(got, fm.Data()...)
				}
			case *http2.RSTStreamFrame, *http2.GoAwayFrame:
				t.Fatalf("the tunnel ended: %v", fm)
			}
		}
		if open, _ := obs.get("s/u"); open != 1 {
			t.Fatalf("an extended CONNECT tunnel echoing: %d tunnels open, want 1", open)
		}
		fr.WriteData(1, true, nil)
		obs.check(t, "s/u")
	})
}
