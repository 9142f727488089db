package daemon

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessioncache"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// retireStore is a view of a Memory shared by the stores a test opens
// (downStore: it fails while down) whose deletions wait for gate (when
// set), and whose Close leaves the Memory to the others.
type retireStore struct {
	downStore
	gate chan struct{}
}

func (s *retireStore) Delete(ctx context.Context, key string) error {
	if err := s.err(); err != nil {
		return err
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Store.Delete(ctx, key)
}

func (s *retireStore) Close() error { return nil }

// TestReloadKeepsPendingEndedSessionDeletions: a session ended (a fatal
// alert) while the store did not take its deletion is neither resumed
// from, nor left in, the store that a reload puts in place of that one:
// the retired store hands the pending deletion over before it closes.
func TestReloadKeepsPendingEndedSessionDeletions(t *testing.T) {
	defer func(d time.Duration) { retireDelay = d }(retireDelay)
	retireDelay = 0
	b := newBackend(t)
	mem := sessionstore.NewMemory()
	gate := make(chan struct{})
	var mu sync.Mutex
	var stores []*retireStore
	td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), bytes.Repeat([]byte{3, 4}, 16)), func(e *Env) {
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store {
			mu.Lock()
			defer mu.Unlock()
			s := &retireStore{downStore: downStore{Store: mem}}
			if len(stores) > 0 {
				s.gate = gate // the replacing store's deletions wait
			}
			stores = append(stores, s)
			return s
		}
	})
	fleet := func() *sessionstore.Shared {
		td.env.mu.Lock()
		defer td.env.mu.Unlock()
		return td.env.fleet.shared
	}
	key, err := ticket.NewKey(bytes.Repeat([]byte{9}, ticket.KeySize), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keys := ticket.Static{key}
	old := fleet()
	tr := sessionstore.NewTiered(sessioncache.New(16, time.Minute), old, keys, "t:tlcp:", time.Minute)
	tr.Put("id", []byte("state"), time.Minute)
	if mem.Len() == 0 {
		t.Fatal("test setup: the session was not written to the store")
	}
	mu.Lock()
	first := stores[0]
	mu.Unlock()
	first.setDown(true)
	for i := 0; !old.BreakerOpen(); i++ {
		if i == 10*sessionstore.BreakerThreshold {
			t.Fatal("test setup: the breaker did not open")
		}
		tr.Get("other")
	}
	tr.Delete("id") // the fatal alert: the store does not take it

	cfg := storeConfig(t, b.Listener.Addr().String(), bytes.Repeat([]byte{3, 4}, 16))
	cfg.Listeners[0].Address = td.cfg.Listeners[0].Address
	cfg.Sessions.Store.Addresses = []string{"127.0.0.1:2"} // another store
	td.setConfig(cfg)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	next := fleet()
	if next == old {
		t.Fatal("test setup: the reload kept the store")
	}
	// The retired store closes at once (retireDelay 0), if it has not
	// yet: a close drops what the store still holds.
	old.Close()
	tr2 := sessionstore.NewTiered(sessioncache.New(16, time.Minute), next, keys, "t:tlcp:", time.Minute)
	if _, ok := tr2.Get("id"); ok {
		t.Fatal("a session ended while its deletion was pending at the reload resumed from the new store")
	}
	close(gate)
	for end := time.Now().Add(testwait.Bound(10 * time.Second)); ; {
		if _, found, _ := mem.Get(context.Background(), "t:tlcp:6964"); !found {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the deletion pending at the reload was dropped: the new store still holds the ended session")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
