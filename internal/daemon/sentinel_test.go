package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
)

// TestStoreThroughSentinelsWithAuth: sentinel_username and
// sentinel_password_file reach the Sentinels, which require AUTH as a user
// of their own, and a reload that changes the Sentinel password opens the
// store again rather than keeping the connections of the old settings.
func TestStoreThroughSentinelsWithAuth(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, "gm", master, 0)
	for _, cmd := range []string{"ACL SETUSER watcher on >spw +@all", "ACL SETUSER default off"} {
		if r, err := sentinel.Command(cmd); err != nil || r != "+OK" {
			t.Fatalf("%s on the Sentinel: %q %v", cmd, r, err)
		}
	}
	st := &conf.SessionStore{Type: sessionstore.TypeRedis, Addresses: []string{sentinel.Addr}, MasterName: "gm",
		SentinelUsername: "watcher", SentinelPassword: "spw", KeyPrefix: "t:", Timeout: time.Second}
	s := (&Env{}).openStore(st)
	defer s.Close()
	ctx := context.Background()
	if err := s.Set(ctx, "t:tlcp:00", []byte("x"), time.Minute); err != nil {
		t.Fatalf("Set through Sentinels that require AUTH: %v", err)
	}
	if b, ok, err := s.Get(ctx, "t:tlcp:00"); err != nil || !ok || string(b) != "x" {
		t.Fatalf("Get through Sentinels that require AUTH: %q %v %v", b, ok, err)
	}

	cfg := &conf.Config{}
	cfg.Sessions.Store = st
	before := storeID(cfg)
	changed := *st
	changed.SentinelPassword = "new"
	cfg.Sessions.Store = &changed
	if storeID(cfg) == before {
		t.Error("a new Sentinel password keeps the store of the old one (same storeID)")
	}
	changed = *st
	changed.SentinelUsername = "other"
	if storeID(cfg) == before {
		t.Error("a new Sentinel user keeps the store of the old one (same storeID)")
	}
}
