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
