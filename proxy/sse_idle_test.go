package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestSendTimeoutIdleStream: send_timeout bounds a write the client does
// not take (nginx's send_timeout), not the time between two events of a
// stream whose target is quiet (that is the upstream's read_timeout): an
// event stream idle for longer than send_timeout goes on, over HTTP/1.1
// and HTTP/2 alike, to a client that reads all it is sent.
func TestSendTimeoutIdleStream(t *testing.T) {
	const sendTimeout = 200 * time.Millisecond
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-time.After(4 * sendTimeout): // a quiet spell, on purpose
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: 2\n\n")
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = sendTimeout
	cfg.Upstreams[0].Transport.ReadTimeout = time.Minute
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2=", h2), func(t *testing.T) {
			f, c := frontFor(t, cfg, h2)
			res, err := c.Get(f.url + "/events")
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(bufio.NewReader(res.Body))
			if err != nil || string(body) != "data: 1\n\ndata: 2\n\n" {
				t.Fatalf("event stream %q, %v; want both events and its end", body, err)
			}
		})
	}
}

// TestSendTimeoutSlowUpload: send_timeout does not run while the client
// is still sending its body and nothing is written to it: an upload that
// takes longer than send_timeout, each piece within body_timeout, gets
// its answer over HTTP/1.1 and HTTP/2 alike.
func TestSendTimeoutSlowUpload(t *testing.T) {
	const sendTimeout = 200 * time.Millisecond
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, n)
	}))
	t.Cleanup(backend.Close)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = sendTimeout
	cfg.Limits.RequestBuffer = -1
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2=", h2), func(t *testing.T) {
			f, c := frontFor(t, cfg, h2)
			pr, pw := io.Pipe()
			go func() {
				for range 8 {
					pw.Write([]byte("0123456789"))
					time.Sleep(sendTimeout / 2) // a slow client, on purpose
				}
				pw.Close()
			}()
			res, err := c.Post(f.url+"/up", "application/octet-stream", pr)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != 200 || string(body) != "80" {
				t.Fatalf("upload answered %d %q, %v; want 200 \"80\"", res.StatusCode, body, err)
			}
		})
	}
}

// TestH2SendTimeoutNoWindow: a client that grants an HTTP/2 response no
// flow-control window (its socket still read) has the stream reset once
// a write waited send_timeout.
func TestH2SendTimeoutNoWindow(t *testing.T) {
	backend := longResponseBackend(t)
	cfg := proxyTo(addrOf(backend))
	cfg.Limits.SendTimeout = 200 * time.Millisecond
	f := newFront(t, cfg, frontOpts{state: &frontdoor.ConnState{ALPN: "h2"}})
	c := dialRaw(t, f.addr)
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	h2Get(t, fr, 1, "/big")
	evs := h2Events(t, fr, 1)
	if last := evs[len(evs)-1]; last.kind != "rst" {
		t.Fatalf("the stream ended %+v, want a reset", last)
	}
}
