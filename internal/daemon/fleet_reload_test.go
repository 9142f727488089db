package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// fleetConfig is a fleet configuration whose wrap key file holds wrap and
// whose store TLS files are in dir.
func fleetConfig(t *testing.T, dir string, wrap []byte) *conf.Config {
	cfg := &conf.Config{Dir: dir}
	cfg.Sessions.Lifetime = 5 * time.Minute
	cfg.Sessions.TicketRotation = time.Hour
	cfg.Sessions.Store = &conf.SessionStore{Type: sessionstore.TypeRedis, Addresses: []string{"127.0.0.1:1"}, KeyPrefix: "t:", Timeout: time.Second,
		TLS: &conf.StoreTLS{CA: "redis-ca.pem", Cert: "redis-client.pem", Key: "redis-client.key"}}
	keys, err := ticket.ParseKeyFile(wrap, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sessions.TicketKeys = &conf.FleetTicketKeys{Store: sessionstore.TypeRedis, WrapKeyFile: "wrap.key", WrapKeys: keys}
	return cfg
}

// TestFleetReloadFollowsFileContents: a reload after the wrap key file was
// rewritten in place (a rotation: the new key first) builds new fleet keys,
// and one after the store's TLS files were renewed under the same names
// opens a new store connection; one with the same contents keeps both.
func TestFleetReloadFollowsFileContents(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("redis-ca.pem", "ca 1")
	write("redis-client.pem", "cert 1")
	write("redis-client.key", "key 1")
	mem := sessionstore.NewMemory()
	opened := 0
	e := &Env{OpenStore: func(*conf.SessionStore) sessionstore.Store { opened++; return mem }}
	defer e.closeFleet()
	oldWrap := bytes.Repeat([]byte{1, 2}, 16)
	newWrap := append(bytes.Repeat([]byte{3, 4}, 16), oldWrap...)

	k1, err := e.TicketKeys(fleetConfig(t, dir, oldWrap))
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := e.TicketKeys(fleetConfig(t, dir, oldWrap)); k != k1 || opened != 1 {
		t.Fatalf("a reload with the same files rebuilt the fleet keys (%v) or opened the store again (%d times)", k != k1, opened)
	}
	k2, err := e.TicketKeys(fleetConfig(t, dir, newWrap)) // the wrap key rotated
	if err != nil {
		t.Fatal(err)
	}
	if k2 == k1 {
		t.Errorf("after the wrap key file was rotated in place the fleet keeps the key set sealed with the old wrap key")
	}
	if opened != 1 {
		t.Errorf("a reload that rotated only the wrap key opened the store again (%d times)", opened)
	}
	write("redis-client.pem", "cert 2") // renewed
	if _, err := e.TicketKeys(fleetConfig(t, dir, newWrap)); err != nil {
		t.Fatal(err)
	}
	if opened != 2 {
		t.Errorf("after the store's client certificate file was renewed the store was opened %d times, want 2", opened)
	}
}

// TestFleetReloadKeepsOpeningTickets: a reload that changes the ticket
// rotation (the store's epochs are numbered anew) or the key prefix builds
// new fleet keys; the tickets sealed before it still resume.
func TestFleetReloadKeepsOpeningTickets(t *testing.T) {
	e := &Env{OpenStore: func(*conf.SessionStore) sessionstore.Store { return sessionstore.NewMemory() }}
	defer e.closeFleet()
	wrap := bytes.Repeat([]byte{1, 2}, 16)
	cfg := fleetConfig(t, t.TempDir(), wrap)
	cfg.Sessions.Store.TLS = nil
	k1, err := e.TicketKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := ticket.Seal(nil, k1, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sessions.TicketRotation = 3 * time.Hour
	k2, err := e.TicketKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sessions.Store.KeyPrefix = "u:"
	k3, err := e.TicketKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if k2 == k1 || k3 == k2 {
		t.Fatal("test setup: the reloads did not build new fleet keys")
	}
	for i, k := range []ticket.Source{k2, k3} {
		if _, ok, _ := ticket.Open(k, ticket.TLCP, tk); !ok {
			t.Errorf("after reload %d a ticket sealed before it does not open", i+1)
		}
	}
}
