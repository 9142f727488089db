package keyoffload

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/testpeer"
)

// locRec records KeyOpAt events.
type locRec struct {
	mu  sync.Mutex
	ops []string
}

func (r *locRec) KeyOp(op, family string, _, _ time.Duration, err error) {
	r.KeyOpAt(op, family, "?", 0, 0, err)
}

func (r *locRec) KeyOpAt(op, family, loc string, _, _ time.Duration, err error) {
	res := "ok"
	if err != nil {
		res = "error"
	}
	r.mu.Lock()
	r.ops = append(r.ops, op+"/"+family+"/"+loc+"/"+res)
	r.mu.Unlock()
}

func (r *locRec) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ops...)
}

// blockingRemote is a remote key whose operations wait for release.
type blockingRemote struct {
	crypto.Signer
	started chan struct{}
	release chan struct{}
}

func (b *blockingRemote) KeyLocation() string { return Remote }

func (b *blockingRemote) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	b.started <- struct{}{}
	<-b.release
	return b.Signer.Sign(r, d, o)
}

// TestOffloadRemoteKeys: operations on remote keys do not occupy the
// workers (a stalled key server leaves local keys working), are bounded by
// RemoteInFlight (fail fast when full) and are reported with their
// location.
func TestOffloadRemoteKeys(t *testing.T) {
	rec := &locRec{}
	o := New(Config{Workers: 1, Queue: 4, RemoteInFlight: 2}, rec)
	defer o.Close()
	lk, _ := sm2.GenerateKey(rand.Reader)
	rkey, _ := sm2.GenerateKey(rand.Reader)
	br := &blockingRemote{Signer: rkey, started: make(chan struct{}, 4), release: make(chan struct{})}
	remote, local := o.Wrap(br, family.TLCP), o.Wrap(lk, family.TLS13SM)
	if remote.KeyLocation() != Remote || local.KeyLocation() != Local {
		t.Fatalf("locations %q %q", remote.KeyLocation(), local.KeyLocation())
	}
	ctx := context.Background()
	errc := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := remote.SignContext(ctx, rand.Reader, make([]byte, 32), nil)
			errc <- err
		}()
		testpeer.Recv(t, br.started, "remote operation started")
	}
	// Both remote slots are taken: the next remote operation fails fast...
	if _, err := remote.SignContext(ctx, rand.Reader, make([]byte, 32), nil); !errors.Is(err, ErrBusy) {
		t.Errorf("third remote operation: err = %v, want ErrBusy", err)
	}
	// ...and the single worker still serves local keys.
	if _, err := local.SignContext(ctx, rand.Reader, make([]byte, 32), nil); err != nil {
		t.Errorf("local operation while remote ones are stalled: %v", err)
	}
	close(br.release)
	for i := 0; i < 2; i++ {
		if err := testpeer.Recv(t, errc, "remote operation result"); err != nil {
			t.Error(err)
		}
	}
	counts := map[string]int{}
	for _, op := range rec.list() {
		counts[op]++
	}
	want := map[string]int{"sign/tlcp/remote/ok": 2, "sign/tlcp/remote/error": 1, "sign/tls13sm/local/ok": 1}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: %d events, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
}
