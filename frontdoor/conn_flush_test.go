package frontdoor

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

type bytesObserver struct {
	NopObserver
	mu     sync.Mutex
	calls  int
	rx, tx uint64
}

func (o *bytesObserver) Bytes(family, cipher string, rx, tx, rr, tr uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	o.rx += rx
	o.tx += tx
}

func (o *bytesObserver) snapshot() (int, uint64, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls, o.rx, o.tx
}

// A long-lived connection reports its bytes while in use, not only at Close,
// and the reports add up to exactly what moved.
func TestConnReportsBytesPeriodically(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b)
	obs := &bytesObserver{}
	c := &Conn{Conn: a, obs: obs, state: ConnState{Family: FamilyTLS, Cipher: "TLS_AES_128_GCM_SHA256"}}

	c.Write(make([]byte, 100)) // first I/O starts the clock
	c.Write(make([]byte, 100))
	if calls, _, _ := obs.snapshot(); calls != 0 {
		t.Fatalf("%d reports before the flush interval passed", calls)
	}
	c.lastFlush.Store(monoNow() - int64(StatsFlushInterval+time.Second))
	c.Write(make([]byte, 100))
	if calls, _, tx := obs.snapshot(); calls != 1 || tx != 300 {
		t.Fatalf("after the interval: %d reports, tx %d; want 1 report of 300", calls, tx)
	}
	c.Write(make([]byte, 50))
	c.Close()
	c.Close()
	if calls, rx, tx := obs.snapshot(); calls != 2 || tx != 350 || rx != 0 {
		t.Fatalf("after close: %d reports, rx %d tx %d; want 2 reports adding up to tx 350", calls, rx, tx)
	}
}
