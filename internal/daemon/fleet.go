package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/localstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redisstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/shmstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// The fleet: the shared session store (sessions.store) and the ticket keys
// agreed on through it (sessions.ticket_keys). Both live in the Env, so a
// reload keeps their connections and keys; a reload that changes the
// store's settings opens a new one and closes the old one after
// retireDelay (handshakes in flight may still use it).

const retireDelay = time.Minute

// fleetState is the Env's current store and fleet keys.
type fleetState struct {
	storeID string
	shared  *sessionstore.Shared
	keysID  string
	keys    *sessionstore.FleetKeys
}

// storeID identifies a store configuration: equal IDs share connections.
// The TLS files count by their content (a digest), so that a reload after
// a renewed client certificate or CA file uses them.
func storeID(cfg *conf.Config) string {
	st := cfg.Sessions.Store
	var tlsID string
	if t := st.TLS; t != nil {
		h := sha256.New()
		for _, f := range []string{t.CA, t.Cert, t.Key} {
			if f != "" {
				b, _ := os.ReadFile(cfg.Resolve(f))
				h.Write(b)
				h.Write([]byte{0})
			}
		}
		tlsID = strings.Join([]string{t.CA, t.Cert, t.Key, t.ServerName, hex.EncodeToString(h.Sum(nil))}, "|")
	}
	return fmt.Sprintf("%s|%q|%s|%t|%s|%s|%s|%s|%d", st.Type, st.Addresses, st.MasterName, st.Cluster, st.Username, st.Password, tlsID, st.Timeout, st.PoolSize)
}

// wrapKeysID names the wrap keys of sessions.ticket_keys by their key
// names (derived from the keys, not secret), so that a reload after the
// file was rewritten uses the new keys.
func wrapKeysID(keys []ticket.Key) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(hex.EncodeToString(k.Name[:]))
		b.WriteByte(',')
	}
	return b.String()
}

// sharedStore returns the shared store of cfg (nil without sessions.store).
// Caller holds no lock.
func (e *Env) sharedStore(cfg *conf.Config) *sessionstore.Shared {
	st := cfg.Sessions.Store
	if st == nil {
		return nil
	}
	id := storeID(cfg)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fleet.shared != nil && e.fleet.storeID == id {
		return e.fleet.shared
	}
	if old := e.fleet.shared; old != nil {
		time.AfterFunc(retireDelay, func() { old.Close() })
	}
	obs, _ := e.Sessions.(sessionstore.Observer)
	e.fleet.shared = sessionstore.NewShared(e.openStore(st), st.Timeout, obs)
	e.fleet.storeID = id
	return e.fleet.shared
}

// openStore opens the backend of st.
func (e *Env) openStore(st *conf.SessionStore) sessionstore.Store {
	if e.OpenStore != nil {
		return e.OpenStore(st)
	}
	if st.Type == localstore.Type && len(st.Addresses) == 1 {
		// The worker mode's store, served by the supervisor.
		return localstore.NewClient(st.Addresses[0])
	}
	if st.Type == shmstore.Type && len(st.Addresses) == 1 {
		// The worker mode's store in memory the workers share (mapped
		// when the worker started).
		s, err := shmstore.OpenFD(st.Addresses[0])
		if err != nil {
			if e.Logger != nil {
				e.Logger.Error("shared memory session store", "error", err)
			}
			return shmstore.Failed(err)
		}
		return s
	}
	o := redisstore.Options{
		Addresses: st.Addresses, MasterName: st.MasterName, Cluster: st.Cluster, Username: st.Username, Password: st.Password,
		PoolSize: st.PoolSize, Timeout: st.Timeout,
	}
	if st.TLS != nil {
		o.TLS = st.TLS.Config
	}
	return redisstore.New(o)
}

// fleetKeys returns the ticket keys agreed on through the store. A store
// that does not answer does not stop the build: the keys fall back to
// random ones of this instance until it answers (sessionstore.FleetKeys).
func (e *Env) fleetKeys(cfg *conf.Config) ticket.Source {
	s := &cfg.Sessions
	shared := e.sharedStore(cfg)
	id := fmt.Sprintf("%p|%s|%s|%s|%s|%s", shared, s.TicketKeys.WrapKeyFile, wrapKeysID(s.TicketKeys.WrapKeys), s.TicketRotation, s.Lifetime, s.Store.KeyPrefix)
	e.mu.Lock()
	if e.fleet.keys != nil && e.fleet.keysID == id {
		k := e.fleet.keys
		e.mu.Unlock()
		return k
	}
	old := e.fleet.keys
	fc := sessionstore.FleetKeysConfig{
		Prefix: s.Store.KeyPrefix, Rotation: s.TicketRotation, Lifetime: s.Lifetime, Wrap: ticket.Static(s.TicketKeys.WrapKeys),
	}
	if old != nil {
		// The tickets the replaced set sealed keep resuming (a new
		// rotation or prefix names other store keys).
		fc.Previous, fc.PreviousUntil = old.Retiring()
	}
	fk := sessionstore.NewFleetKeys(shared, fc)
	e.fleet.keys, e.fleet.keysID = fk, id
	e.mu.Unlock()
	if old != nil {
		old.Close()
	}
	log := e.Logger
	if err := fk.Refresh(context.Background()); err != nil && log != nil {
		log.Warn("fleet ticket keys: the store did not answer; tickets resume on this instance only until it does", "err", err)
	}
	fk.Start(0, func(err error) {
		if log != nil {
			log.Warn("fleet ticket keys: refresh failed", "err", err)
		}
	})
	return fk
}

// tieredStore puts the shared store of cfg behind a protocol's in-process
// session cache (local itself without sessions.store).
func (e *Env) tieredStore(cfg *conf.Config, family string, local sessionstore.Local, keys ticket.Source, lifetime time.Duration) sessionstore.Local {
	shared := e.sharedStore(cfg)
	if shared == nil {
		return local
	}
	return sessionstore.NewTiered(local, shared, keys, cfg.Sessions.Store.KeyPrefix+family+":", lifetime)
}

// closeFleet stops the fleet keys and closes the store (Env.Close).
func (e *Env) closeFleet() {
	e.mu.Lock()
	f := e.fleet
	e.fleet = fleetState{}
	e.mu.Unlock()
	if f.keys != nil {
		f.keys.Close()
	}
	if f.shared != nil {
		f.shared.Close()
	}
}
