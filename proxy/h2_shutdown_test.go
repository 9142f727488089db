package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// h2GoAway reads frames until a GOAWAY and returns it; nil when the
// connection ends (or its deadline passes) without one.
func h2GoAway(fr *http2.Framer) *http2.GoAwayFrame {
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			return nil
		}
		if ga, ok := fm.(*http2.GoAwayFrame); ok {
			return ga
		}
	}
}

// TestH2ConnectionDuringShutdown: an h2 connection that reaches the
// proxy once Shutdown has begun (another connection's request holds the
// drain open) is told to go away (GOAWAY) before any stream: Shutdown
// stops taking connections. x/net/http2's graceful shutdown reaches only
// the connections its server had when Shutdown ran; a later one was
// served as usual, no GOAWAY, and held Shutdown until its context ended
// (or the connection's idle timeout).
func TestH2ConnectionDuringShutdown(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	defer b.Close()
	f := newFront(t, proxyTo(addrOf(b)), frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})

	first, _ := rawH2(t, f.addr)
	first.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: h2Block(":method", "GET", ":scheme", "https", ":authority", "example.test", ":path", "/slow")})
	testpeer.Recv(t, entered, "request at the backend")
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- f.p.Shutdown(ctx)
	}()
	if h2GoAway(first) == nil {
		t.Fatal("the connection open at Shutdown got no GOAWAY")
	}

	late, _ := rawH2(t, f.addr)
	ga := h2GoAway(late)
	close(release)
	if ga == nil {
		t.Fatal("an h2 connection made after Shutdown began is served without GOAWAY")
	}
	if ga.LastStreamID != 0 {
		t.Errorf("GOAWAY to the late connection with last stream %d, want 0", ga.LastStreamID)
	}
	// The late connection, told to go away, ends, and the drain with it.
	if err := testpeer.Recv(t, shut, "end of Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
