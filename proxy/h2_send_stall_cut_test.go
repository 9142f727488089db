package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// writeDeadlines records the write deadlines set on a writer.
type writeDeadlines struct {
	mu  sync.Mutex
	set []time.Time
}

func (w *writeDeadlines) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set = append(w.set, t)
	return nil
}

// passed reports whether a deadline in the past was set (a cut).
func (w *writeDeadlines) passed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.set {
		if t.Equal(aLongTimeAgo) {
			return true
		}
	}
	return false
}

type deadlineStream struct {
	http.ResponseWriter
	writeDeadlines
}

type stallConn struct {
	net.Conn
	writeDeadlines
}

func (c *stallConn) SetWriteDeadline(t time.Time) error { return c.writeDeadlines.SetWriteDeadline(t) }

// TestH2SendStallCutsBlockedConnection: an HTTP/2 response write that
// waits send_timeout resets its stream (the stream's write deadline); a
// write still waiting one more send_timeout later means the connection
// itself takes nothing (the reset cannot go), and the connection is cut,
// as nginx closes one whose send_timeout passed; a write that returned
// leaves the connection to its other streams. Which of the two a client
// that stops reading gives depends on x/net's frame writer and the
// kernel's buffers (TestH2SendTimeoutClientNotReading meets the second on
// some machines only), so the stall is driven here directly.
func TestH2SendStallCutsBlockedConnection(t *testing.T) {
	const d = 20 * time.Millisecond
	for _, blocked := range []bool{true, false} {
		stream, conn := &deadlineStream{ResponseWriter: httptest.NewRecorder()}, &stallConn{}
		rs := &reqState{ci: &connInfo{conn: conn}}
		rs.w.rw = stream
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.ProtoMajor = 2
		(&Proxy{}).startSend(rs, r, d, time.Time{}, false)
		st := rs.w.send.stall
		if st == nil {
			t.Fatal("no stall watch for an HTTP/2 response")
		}
		st.starts() // a write that waits
		for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); !stream.passed(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the stream's write deadline not passed after a write waited send_timeout")
			}
		}
		if !blocked {
			st.ends()
			time.Sleep(10 * d)
			if conn.passed() {
				t.Error("a write that returned after its stream's reset: the connection cut as well")
			}
			continue
		}
		for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); !conn.passed(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a write still waiting send_timeout after its stream's reset: the connection not cut")
			}
		}
	}
}
