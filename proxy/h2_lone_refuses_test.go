package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestH2LoneTargetRefusesEveryStream: a lone HTTP/2 target that refuses
// every stream (RST_STREAM REFUSED_STREAM) held each request for
// net/http's Transport's eight tries and 63 s of backoff before its
// client got a 502. The Transport's retries on that connection stop
// after the one at once and the one after 1 s (maxRefusedTries): each
// request is answered 502 within a few seconds (here under the client's
// 20 s), having reached the target at most three times, whatever the
// retry policy's tries (no other target to try), the log giving the
// refusals as the reason.
func TestH2LoneTargetRefusesEveryStream(t *testing.T) {
	addr, _, _, reqs := refusingH2Target(t, nil, nil, func(fr *http2.Framer, id uint32) bool {
		fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		return false
	})
	uc := UpstreamConfig{Name: "u", Protocol: "h2c", Retries: RetryConfig{Tries: 3}, Targets: []TargetConfig{{Address: addr}}}
	var logs testpeer.SyncBuffer
	f := newFront(t, Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u"})}, frontOpts{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := testClient(t)
	c.Timeout = testwait.Bound(20 * time.Second)
	const n = 3
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			code, _, err := getBody(c, f.url+"/")
			if err != nil {
				t.Error(err)
			}
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusBadGateway {
			t.Errorf("a request to the refusing target: %d, want 502", code)
		}
	}
	if l := logs.String(); strings.Count(l, errStreamRefused.Error()) < n { // each request's
		t.Errorf("the log does not give the refusals as the reason:\n%s", l)
	}
	if got := reqs.Load(); got > n*(maxRefusedTries+1) {
		t.Errorf("the target saw %d streams for %d requests, want at most %d", got, n, n*(maxRefusedTries+1))
	}
}

// TestH2RefusedStreamRetriedOnDownTarget: a POST (without a body: the
// Transport retries it on its own) whose stream the only
// available target refused again and again was not processed (RFC 9113
// §8.7): once the watch ends its attempt (errStreamRefused), it goes to
// a target passive checks took out (tried when none is available,
// soonestBack), as the Transport's own REFUSED_STREAM error sent it
// there after its 63 s of backoff.
func TestH2RefusedStreamRetriedOnDownTarget(t *testing.T) {
	addr, _, _, _ := refusingH2Target(t, nil, nil, func(fr *http2.Framer, id uint32) bool {
		fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		return false
	})
	other := h2cBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "other "+r.Method+" "+string(b))
	}))
	uc := UpstreamConfig{Name: "u", Protocol: "h2c", Targets: []TargetConfig{{Address: addr}, {Address: other}}}
	f, c := frontFor(t, Config{Upstreams: []UpstreamConfig{uc}, Sites: oneSite(RouteConfig{Upstream: "u"})}, false)
	c.Timeout = testwait.Bound(20 * time.Second)
	for _, tg := range f.p.Upstream("u").Targets() {
		if tg.Addr == other {
			tg.downUntil.Store(1 << 62)
		}
	}
	res, err := c.Post(f.url+"/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "other POST " {
		t.Fatalf("a POST the lone available target refused: %d %q, want 200 from the other target", res.StatusCode, b)
	}
}
