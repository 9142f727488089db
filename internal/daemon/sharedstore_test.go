package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
	"github.com/gmproxy/gmproxy/tlcp"
)

// storeConfig is testConfig with sessions.store and sessions.ticket_keys
// through the store (opened by the test's OpenStore hook).
func storeConfig(t *testing.T, backend string, wrap []byte) *conf.Config {
	cfg := testConfig(t, backend)
	cfg.Sessions.Store = &conf.SessionStore{Type: sessionstore.TypeRedis, Addresses: []string{"127.0.0.1:1"}, KeyPrefix: "t:", Timeout: time.Second}
	keys, err := ticket.ParseKeyFile(wrap, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sessions.TicketKeys = &conf.FleetTicketKeys{Store: sessionstore.TypeRedis, WrapKeyFile: "wrap.key", WrapKeys: keys}
	return cfg
}

// tlcpIDResumer is a fetchOver connection function for TLCP session-ID
// resumption (no tickets) with one client session cache.
func tlcpIDResumer(t testing.TB) func(net.Conn) (net.Conn, func() bool) {
	cfg := &tlcp.Config{RootCAs: testRoots(t), ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_CBC_SM3},
		SessionTicketsDisabled: true, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	return func(raw net.Conn) (net.Conn, func() bool) {
		c := tlcp.Client(raw, cfg)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
}

// TestSharedStoreResumesAcrossInstances: two daemons with no key file,
// sharing only a store, resume each other's TLCP session IDs, TLCP tickets
// and TLS 1.3-SM PSK tickets; the store holds the sessions sealed.
func TestSharedStoreResumesAcrossInstances(t *testing.T) {
	b := newBackend(t)
	mem := sessionstore.NewMemory()
	wrap := make([]byte, 32)
	rand.Read(wrap)
	var addrs []string
	for range 2 {
		td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), wrap), func(e *Env) {
			e.OpenStore = func(*conf.SessionStore) sessionstore.Store { return mem }
		})
		addrs = append(addrs, td.addr)
	}
	tlcpTickets := &tlcp.Config{RootCAs: testRoots(t), ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}, ClientSessionCache: tlcp.NewLRUClientSessionCache(4)}
	tlcpTicket := func(raw net.Conn) (net.Conn, func() bool) {
		c := tlcp.Client(raw, tlcpTickets)
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c, func() bool { return c.ConnectionState().DidResume }
	}
	for name, mk := range map[string]func(net.Conn) (net.Conn, func() bool){
		"tlcp-session-id": tlcpIDResumer(t), "tlcp-ticket": tlcpTicket, "tls13sm-psk": tls13smResumer(t),
	} {
		if fetchOver(t, addrs[0], mk) {
			t.Errorf("%s: first connection resumed", name)
		}
		for i := range 3 {
			if !fetchOver(t, addrs[(i+1)%2], mk) {
				t.Errorf("%s: connection %d to instance %d did not resume", name, i+2, (i+1)%2)
			}
		}
	}
	if mem.Len() == 0 {
		t.Fatal("nothing was written to the store")
	}
}

// deadStore fails every call, like a Redis that is down.
type deadStore struct{}

var errDown = errors.New("connection refused")

func (deadStore) Get(context.Context, string) ([]byte, bool, error) { return nil, false, errDown }
func (deadStore) Set(context.Context, string, []byte, time.Duration) error {
	return errDown
}
func (deadStore) AddOrGet(context.Context, string, []byte, time.Duration) ([]byte, error) {
	return nil, errDown
}
func (deadStore) GetMany(context.Context, []string) ([][]byte, error) { return nil, errDown }
func (deadStore) Delete(context.Context, string) error                { return errDown }

// TestSharedStoreDownFailsNoHandshake: with the store down from the start,
// every handshake succeeds (full, or resumed from this instance's own
// cache and fallback ticket keys).
func TestSharedStoreDownFailsNoHandshake(t *testing.T) {
	b := newBackend(t)
	wrap := make([]byte, 32)
	rand.Read(wrap)
	td := startDaemon(t, storeConfig(t, b.Listener.Addr().String(), wrap), func(e *Env) {
		e.OpenStore = func(*conf.SessionStore) sessionstore.Store { return &deadStore{} }
	})
	for name, mk := range map[string]func(net.Conn) (net.Conn, func() bool){"tlcp-session-id": tlcpIDResumer(t), "tls13sm-psk": tls13smResumer(t)} {
		fetchOver(t, td.addr, mk)
		if !fetchOver(t, td.addr, mk) {
			t.Errorf("%s: with the store down the instance did not resume its own session", name)
		}
	}
	td.obs.mu.Lock()
	defer td.obs.mu.Unlock()
	if len(td.obs.fail) != 0 {
		t.Fatalf("failed handshakes with the store down: %v %v", td.obs.fail, td.obs.reasons)
	}
}
func (deadStore) Close() error { return nil }
