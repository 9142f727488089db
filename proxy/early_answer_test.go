package proxy

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// blockedBody is a client body whose Read blocks until released;
// returned is set as it returns, before the reqBody reading it lets go
// of its lock.
type blockedBody struct {
	reading  chan struct{}
	release  chan struct{}
	returned atomic.Bool
}

func (b *blockedBody) Read([]byte) (int, error) {
	b.reading <- struct{}{}
	<-b.release
	b.returned.Store(true)
	return 0, os.ErrDeadlineExceeded
}

func (b *blockedBody) Close() error { return nil }

// pastDeadline releases a blockedBody when given a read deadline in the
// past, as a connection's would end its read.
type pastDeadline struct {
	b    *blockedBody
	once sync.Once
}

func (d *pastDeadline) SetReadDeadline(t time.Time) error {
	if !t.After(time.Now()) {
		d.once.Do(func() { close(d.b.release) })
	}
	return nil
}

// TestHandlerDoneWaitsForBodyRead: when a target answers an upload early,
// net/http's Transport may still be reading the client's body from its
// own goroutine as the handler returns, and the server then reuses the
// connection's body (a read through it was a nil-pointer panic no handler
// recovers, or a read of the next request's body). handlerDone ends that
// read (a past read deadline) and returns only after it; without read
// deadlines it waits for the read; no read starts after it.
func TestHandlerDoneWaitsForBodyRead(t *testing.T) {
	for _, withDeadline := range []bool{true, false} {
		bb := &blockedBody{reading: make(chan struct{}, 1), release: make(chan struct{})}
		body := &reqBody{rc: bb}
		if withDeadline {
			body.rd = &pastDeadline{b: bb}
		}
		go body.Read(make([]byte, 8))
		<-bb.reading
		done := make(chan bool, 1)
		go func() {
			body.handlerDone()
			// The client's Read has returned: the store happened before
			// reqBody let go of the lock handlerDone waits for (a flag
			// set after body.Read returned could still be unset).
			done <- bb.returned.Load()
		}()
		if !withDeadline {
			select {
			case <-done:
				t.Fatal("handlerDone returned while a read of the body was in progress")
			case <-time.After(100 * time.Millisecond):
			}
			close(bb.release)
		}
		select {
		case finished := <-done:
			if !finished {
				t.Errorf("deadline %v: handlerDone returned before the read in progress ended", withDeadline)
			}
		case <-time.After(testwait.Bound(5 * time.Second)):
			t.Fatalf("deadline %v: handlerDone never returned", withDeadline)
		}
		if _, err := body.Read(make([]byte, 8)); !errors.Is(err, errHandlerDone) {
			t.Errorf("a read after handlerDone: %v, want errHandlerDone", err)
		}
	}
}
