package record

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/callgate"
)

// deadlineConn records the write deadlines set and whether it was closed.
type deadlineConn struct {
	net.Conn
	deadlines []time.Time
	closed    int
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *deadlineConn) Close() error { c.closed++; return nil }

func TestSendCloseNotifyBounded(t *testing.T) {
	c := &deadlineConn{}
	var during time.Time
	err := SendCloseNotify(c, func() error { during = c.deadlines[len(c.deadlines)-1]; return nil })
	if err != nil || during.IsZero() || time.Until(during) > closeNotifyTimeout {
		t.Fatalf("close_notify written without a bounded deadline: %v %v", err, during)
	}
	if len(c.deadlines) != 2 || !c.deadlines[1].IsZero() {
		t.Fatalf("deadline not cleared after close_notify: %v", c.deadlines)
	}
}

func TestClose(t *testing.T) {
	var g callgate.Gate
	c := &deadlineConn{}
	notified := 0
	boom := errors.New("boom")
	err := closeSequence(&g, c, true, func() error { notified++; return boom }, "tlcp")
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "tlcp: ") || notified != 1 || c.closed != 1 {
		t.Fatalf("first Close: %v, notified %d, closed %d", err, notified, c.closed)
	}
	if err := closeSequence(&g, c, true, func() error { notified++; return nil }, "tlcp"); err != net.ErrClosed || notified != 1 || c.closed != 1 {
		t.Fatalf("second Close: %v, notified %d, closed %d", err, notified, c.closed)
	}
	// A Close during a Write closes at once: notify would wait for the
	// Write, which holds the output side.
	var g3 callgate.Gate
	g3.Enter()
	if err := closeSequence(&g3, c, true, func() error { notified++; return nil }, "tlcp"); err != nil || notified != 1 || c.closed != 2 {
		t.Fatalf("Close during a Write: %v, notified %d, closed %d", err, notified, c.closed)
	}
	g3.Leave()
	// Before the handshake completed there is nothing to notify.
	var g2 callgate.Gate
	if err := closeSequence(&g2, c, false, func() error { notified++; return nil }, "tls13sm"); err != nil || notified != 1 || c.closed != 3 {
		t.Fatalf("Close before the handshake: %v, notified %d", err, notified)
	}
}

// TestLastNotify: the close_notify that follows WriteLast's data runs once
// and leaves the write deadline alone (the caller's bounds the data).
func TestLastNotify(t *testing.T) {
	c := &deadlineConn{}
	core := Conn{Raw: c}
	sent := 0
	for range 2 {
		if err := core.LastNotify(func() error { sent++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if sent != 1 || !core.CloseNotifySent() || len(c.deadlines) != 0 {
		t.Fatalf("sent %d times, marked %v, deadlines set %v", sent, core.CloseNotifySent(), c.deadlines)
	}
	if err := core.CloseNotify(func() error { sent++; return nil }); err != nil || sent != 1 {
		t.Fatalf("close_notify after LastNotify: %v, sent %d times", err, sent)
	}
}
