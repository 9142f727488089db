package daemon

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// TestListenerRequestBufferOff: a listener's http.request_buffer reaches
// its connections' requests. With 0 (off) an upload streams: the backend
// gets the request while its body is still on the way (with the default,
// 64 KiB, this 32 KiB body would be read whole first, and the backend would
// see nothing until then).
func TestListenerRequestBufferOff(t *testing.T) {
	b := newBackend(t)
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].HTTP.RequestBuffer = 0
	td := startDaemon(t, cfg)
	c := tlsClient(t, td.Addr(cfg.Listeners[0].Address), "localhost", false)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, "https://localhost/slow", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 32 << 10
	done := make(chan error, 1)
	go func() {
		res, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		done <- err
	}()
	io.WriteString(pw, strings.Repeat("a", 16<<10))
	testpeer.Recv(t, b.slowStarted, "the request at the backend with half its body sent")
	close(b.release)
	io.WriteString(pw, strings.Repeat("b", 16<<10))
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
