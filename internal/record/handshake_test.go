package record

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
)

// closeCounter counts Close calls.
type closeCounter struct{ n chan struct{} }

func (c *closeCounter) Close() error { c.n <- struct{}{}; return nil }

func TestCloseOnDone(t *testing.T) {
	// A context that cannot end: nothing to stop, nothing closed.
	c := &closeCounter{n: make(chan struct{}, 2)}
	if err := closeOnDone(context.Background(), c)(); err != nil || len(c.n) != 0 {
		t.Fatalf("background: %v, %d closes", err, len(c.n))
	}

	// Stopped before the context ends: not closed.
	ctx, cancel := context.WithCancel(context.Background())
	stop := closeOnDone(ctx, c)
	if err := stop(); err != nil {
		t.Fatalf("stopped in time: %v", err)
	}
	cancel()
	if len(c.n) != 0 {
		t.Fatal("closed after a stop in time")
	}

	// The context ends first: closed once, and stop reports ctx's error.
	ctx, cancel = context.WithCancel(context.Background())
	stop = closeOnDone(ctx, c)
	cancel()
	<-c.n
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: %v", err)
	}
	if len(c.n) != 0 {
		t.Fatal("closed twice")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestIsTimeout(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{os.ErrDeadlineExceeded, true},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), true},
		{context.DeadlineExceeded, true},
		{timeoutErr{}, true},
		{context.Canceled, false},
		{errors.New("boom"), false},
		{nil, false},
	} {
		if got := IsTimeout(tc.err); got != tc.want {
			t.Errorf("IsTimeout(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
