package daemon

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// closeStore is a memory store that records its Close.
type closeStore struct {
	*sessionstore.Memory
	mu     sync.Mutex
	closed bool
}

func (s *closeStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *closeStore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// TestRefusedReloadKeepsRunningStore: a reload that changes
// sessions.store but fails (a new listener's port is taken) leaves the
// running generation its store: the store the refused build opened is
// closed, the running one is not, and a later reload back to the running
// settings reuses it instead of opening another.
func TestRefusedReloadKeepsRunningStore(t *testing.T) {
	defer func(d time.Duration) { retireDelay = d }(retireDelay)
	retireDelay = 0
	b := newBackend(t)
	var mu sync.Mutex
	var stores []*closeStore
	wrap := bytes.Repeat([]byte{5, 6}, 16)
	td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), wrap), func(e *Env) {
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store {
			mu.Lock()
			defer mu.Unlock()
			s := &closeStore{Memory: sessionstore.NewMemory()}
			stores = append(stores, s)
			return s
		}
	})
	opened := func() []*closeStore {
		mu.Lock()
		defer mu.Unlock()
		return append([]*closeStore(nil), stores...)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	refused := storeConfig(t, b.Listener.Addr().String(), wrap)
	refused.Listeners[0].Address = td.cfg.Listeners[0].Address
	refused.Sessions.Store.Addresses = []string{"127.0.0.1:2"}
	extra := refused.Listeners[0]
	extra.Address = busy.Addr().String()
	refused.Listeners = append(refused.Listeners, extra)
	running := td.cfg
	td.setConfig(refused)
	if err := td.Reload(); err == nil {
		t.Fatal("test setup: the reload onto a taken port succeeded")
	}
	s := opened()
	if len(s) != 2 {
		t.Fatalf("test setup: %d stores opened, want 2", len(s))
	}
	// The running store's close, if scheduled, runs after retireDelay (0).
	for end := time.Now().Add(testwait.Bound(5 * time.Second)); !s[0].isClosed() && !s[1].isClosed() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if s[0].isClosed() {
		t.Error("a refused reload closed the store of the running generation")
	}
	if !s[1].isClosed() {
		t.Error("the store the refused reload opened was left open")
	}
	td.setConfig(running)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := len(opened()); n != 2 {
		t.Errorf("a reload back to the running store settings opened a store again (%d opened)", n)
	}
}

// TestReloadWithoutStoreClosesIt: a reload that removes sessions.store
// closes the store (its connections and the fleet keys' refresh against
// it) once the retired generation is done with it, instead of keeping it
// for the life of the process.
func TestReloadWithoutStoreClosesIt(t *testing.T) {
	defer func(d time.Duration) { retireDelay = d }(retireDelay)
	retireDelay = 0
	b := newBackend(t)
	st := &closeStore{Memory: sessionstore.NewMemory()}
	td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), bytes.Repeat([]byte{7, 8}, 16)), func(e *Env) {
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store { return st }
	})
	cfg := testConfig(t, b.Listener.Addr().String())
	cfg.Listeners[0].Address = td.cfg.Listeners[0].Address
	td.setConfig(cfg)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(testwait.Bound(5 * time.Second)); !st.isClosed() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if !st.isClosed() {
		t.Error("the store stays open after a reload removed sessions.store")
	}
}

// TestReloadReplacingStoreClosesOld: a reload that points sessions.store
// elsewhere closes the store it replaces (after retireDelay, once it has
// handed its pending deletions to the new one), and keeps the new open.
func TestReloadReplacingStoreClosesOld(t *testing.T) {
	defer func(d time.Duration) { retireDelay = d }(retireDelay)
	retireDelay = 0
	b := newBackend(t)
	old, repl := &closeStore{Memory: sessionstore.NewMemory()}, &closeStore{Memory: sessionstore.NewMemory()}
	var mu sync.Mutex
	opened := 0
	td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), bytes.Repeat([]byte{7, 8}, 16)), func(e *Env) {
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store {
			mu.Lock()
			defer mu.Unlock()
			opened++
			if opened == 1 {
				return old
			}
			return repl
		}
	})
	cfg := storeConfig(t, b.Listener.Addr().String(), bytes.Repeat([]byte{7, 8}, 16))
	cfg.Listeners[0].Address = td.cfg.Listeners[0].Address
	cfg.Sessions.Store.Addresses = []string{"127.0.0.2:1"} // another store
	td.setConfig(cfg)
	if err := td.Reload(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(testwait.Bound(5 * time.Second)); !old.isClosed() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if !old.isClosed() {
		t.Error("the store a reload replaced stays open")
	}
	if repl.isClosed() {
		t.Error("the store the reload put in place is closed")
	}
}
