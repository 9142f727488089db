package daemon

import (
	"context"
	"crypto"
	"io"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// blockingSigner holds every Sign until release is closed.
type blockingSigner struct {
	crypto.Signer
	started chan struct{}
	release chan struct{}
}

func (b *blockingSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	b.started <- struct{}{}
	<-b.release
	return []byte("sig"), nil
}

// KeyQueueLen (the metrics queue gauge) counts operations waiting for a worker.
func TestKeyQueueLen(t *testing.T) {
	env := &Env{}
	off := env.Offload(conf.Offload{Workers: 1, Queue: 8})
	defer off.Close()
	bs := &blockingSigner{started: make(chan struct{}, 8), release: make(chan struct{})}
	key := off.Wrap(bs, "tlcp")
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := smkey.Sign(context.Background(), key, nil, []byte("m"), crypto.Hash(0))
			done <- err
		}()
	}
	testpeer.Recv(t, bs.started, "first signature started") // the one worker is busy; the other two wait in the queue
	deadline := time.Now().Add(testwait.Bound(5 * time.Second))
	for env.KeyQueueLen() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("queue length %d, want 2", env.KeyQueueLen())
		}
		time.Sleep(time.Millisecond)
	}
	close(bs.release)
	for i := 0; i < 3; i++ {
		if err := testpeer.Recv(t, done, "signature"); err != nil {
			t.Fatal(err)
		}
	}
	if n := env.KeyQueueLen(); n != 0 {
		t.Fatalf("queue length %d after draining, want 0", n)
	}
}
