package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessioncache"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redisstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// downStore is a store whose calls fail while down.
type downStore struct {
	sessionstore.Store
	mu   sync.Mutex
	down bool
}

func (s *downStore) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

func (s *downStore) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("connection refused")
	}
	return nil
}

func (s *downStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.err(); err != nil {
		return nil, false, err
	}
	return s.Store.Get(ctx, key)
}

func (s *downStore) Delete(ctx context.Context, key string) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

// TestReloadRemovingStoreFlushesPendingDeletions: a reload that removes
// sessions.store (the Redis other instances may still share) makes the
// old store try once more, before it closes, the deletions of ended
// sessions it had not taken: a session ended with a fatal alert while the
// store did not answer is gone from Redis once the store answers, and
// when it still does not, the number dropped is logged.
func TestReloadRemovingStoreFlushesPendingDeletions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stillDown bool
	}{{"store answers", false}, {"store still down", true}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(d time.Duration) { retireDelay = d }(retireDelay)
			retireDelay = 0
			td, srv, logs, backend := pendingDeletion(t, tc.stillDown)

			next := storeConfig(t, backend, bytes.Repeat([]byte{3, 4}, 16))
			next.Listeners[0].Address = td.cfg.Listeners[0].Address
			next.Sessions.Store, next.Sessions.TicketKeys = nil, nil
			td.setConfig(next)
			if err := td.Reload(); err != nil {
				t.Fatal(err)
			}
			for end := time.Now().Add(testwait.Bound(10 * time.Second)); ; {
				exists, _ := srv.Command("EXISTS t:tlcp:6964")
				if !tc.stillDown && exists == ":0" {
					break
				}
				if tc.stillDown && strings.Contains(logs.String(), "dropped=1") {
					if exists != ":1" {
						t.Errorf("a deletion the store did not take reported dropped, yet Redis holds the session: %q", exists)
					}
					break
				}
				if time.Now().After(end) {
					t.Fatalf("a reload removed the store: Redis still holds the ended session (EXISTS %s), log:\n%s", exists, logs.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !tc.stillDown && strings.Contains(logs.String(), "dropped=") {
				t.Errorf("deletions reported dropped though the store took them:\n%s", logs.String())
			}
		})
	}
}

// pendingDeletion starts a daemon whose sessions.store is srv, a real
// Redis, with one ended session whose deletion the store did not take (it
// did not answer, its circuit breaker opened); the store answers again
// unless stillDown. backend is the address of the sites' backend.
func pendingDeletion(t *testing.T, stillDown bool) (td *testDaemon, srv *redistest.Server, logs *lockedLog, backend string) {
	t.Helper()
	srv = redistest.Start(t)
	b := newBackend(t)
	backend = b.Listener.Addr().String()
	logs = new(lockedLog)
	var st *downStore
	cfg := storeConfig(t, backend, bytes.Repeat([]byte{3, 4}, 16))
	cfg.Sessions.Store.Addresses = []string{srv.Addr}
	td = startDaemon(t, cfg, func(e *Env) {
		e.Logger = slog.New(slog.NewTextHandler(logs, nil))
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store {
			st = &downStore{Store: redisstore.New(redisstore.Options{Addresses: []string{srv.Addr}, Timeout: time.Second})}
			return st
		}
	})
	td.env.mu.Lock()
	old := td.env.fleet.shared
	td.env.mu.Unlock()
	key, err := ticket.NewKey(bytes.Repeat([]byte{9}, ticket.KeySize), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tr := sessionstore.NewTiered(sessioncache.New(16, time.Minute), old, ticket.Static{key}, "t:tlcp:", time.Minute)
	tr.Put("id", []byte("state"), time.Minute)
	if got, _ := srv.Command("EXISTS t:tlcp:6964"); got != ":1" {
		t.Fatalf("test setup: the session is not in Redis: %q", got)
	}
	st.setDown(true)
	for i := 0; !old.BreakerOpen(); i++ {
		if i == 10*sessionstore.BreakerThreshold {
			t.Fatal("test setup: the breaker did not open")
		}
		tr.Get("other")
	}
	tr.Delete("id") // the fatal alert: the store does not take it
	st.setDown(stillDown)
	return td, srv, logs, backend
}

// TestShutdownFlushesPendingDeletions: at shutdown, the shared store (the
// Redis other instances may still share) tries once more, before it
// closes, the deletions of ended sessions it had not taken, as a store a
// reload removes does: a session ended with a fatal alert while the store
// did not answer is gone from Redis once the store answers, and when it
// still does not, the number dropped is logged.
func TestShutdownFlushesPendingDeletions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stillDown bool
	}{{"store answers", false}, {"store still down", true}} {
		t.Run(tc.name, func(t *testing.T) {
			td, srv, logs, _ := pendingDeletion(t, tc.stillDown)
			td.Close()
			td.env.Close() // returns once the store closed
			exists, _ := srv.Command("EXISTS t:tlcp:6964")
			dropped := strings.Contains(logs.String(), "shutdown: deletions of ended sessions the store did not take were dropped")
			switch {
			case !tc.stillDown && exists != ":0":
				t.Errorf("after shutdown, Redis still holds the ended session (EXISTS %s), log:\n%s", exists, logs.String())
			case !tc.stillDown && dropped:
				t.Errorf("deletions reported dropped though the store took them:\n%s", logs.String())
			case tc.stillDown && (!dropped || !strings.Contains(logs.String(), "dropped=1")):
				t.Errorf("the deletion the store did not take is not reported dropped at shutdown:\n%s", logs.String())
			case tc.stillDown && exists != ":1":
				t.Errorf("a deletion reported dropped, yet Redis no longer holds the session: %q", exists)
			}
		})
	}
}
