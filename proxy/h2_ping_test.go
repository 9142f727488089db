package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// frozenH2Target serves one HTTP/2 response per connection, with raw
// frames, then stops answering (no PING acknowledged, no response), as
// a target that froze or whose network path dropped it; gone receives
// a value when the proxy closes such a connection.
func frozenH2Target(t *testing.T) (addr string, gone <-chan struct{}) {
	ch := make(chan struct{}, 4)
	addr = connBackend(t, func(c net.Conn) {
		defer func() { ch <- struct{}{} }()
		c.SetDeadline(time.Now().Add(testwait.Bound(20 * time.Second)))
		if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.WriteSettings()
		answered := false
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return // the proxy closed it
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && !answered {
					fr.WriteSettingsAck()
				}
			case *http2.MetaHeadersFrame:
				if answered {
					continue // frozen: no answer
				}
				answered = true
				var hb bytes.Buffer
				hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hb.Bytes(), EndHeaders: true})
				fr.WriteData(f.StreamID, true, []byte("ok"))
			}
		}
	})
	return addr, ch
}

// TestH2PingClosesFrozenTarget: with h2_ping, a connection to an HTTP/2
// target that stopped answering is pinged once quiet and closed when no
// answer comes, so later requests do not wait on it for response_header;
// without it the dead connection stays in the pool.
func TestH2PingClosesFrozenTarget(t *testing.T) {
	for _, ping := range []time.Duration{0, 200 * time.Millisecond} {
		addr, gone := frozenH2Target(t)
		cfg := proxyTo(addr)
		cfg.Upstreams[0].Protocol = "h2c"
		cfg.Upstreams[0].Transport.H2PingTimeout = ping
		f := newFront(t, cfg, frontOpts{})
		if code, body, _ := get(t, testClient(t), f.url+"/"); code != http.StatusOK || body != "ok" {
			t.Fatalf("h2_ping %v: first request %d %q", ping, code, body)
		}
		// Quiet for well over the ping and its wait.
		wait := testwait.Bound(5 * time.Second)
		if ping == 0 {
			wait = 8 * 200 * time.Millisecond
		}
		select {
		case <-gone:
			if ping == 0 {
				t.Error("without h2_ping the connection to the target was closed while it idled")
			}
		case <-time.After(wait):
			if ping != 0 {
				t.Errorf("h2_ping %v: the connection to a target that answers no PING still open after %v", ping, wait)
			}
		}
	}
}
