package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// reload keeps their connections and keys. A build whose settings differ
// from the serving generation's opens a store (or makes a key set) of its
// own, which becomes the Env's only once the generation serves
// (useFleet): the replaced store closes after retireDelay (handshakes in
// flight may still use it), the replaced keys stop refreshing at once. A
// build that never serves (a refused reload) closes what it opened
// (dropFleet) and leaves the running generation's store and keys alone.

// retireDelay is how long a replaced store stays open (a variable for
// tests).
var retireDelay = time.Minute

// fleetState is a generation's store and fleet keys (Env.fleet: the
// serving generation's).
type fleetState struct {
	storeID string
	shared  *sessionstore.Shared
	keysID  string
	keys    *sessionstore.FleetKeys
	// newStore and newKeys tell that the build opened shared and made
	// keys, rather than reusing the serving generation's (dropFleet).
	newStore, newKeys bool
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
				b, _ := conf.ReadNamed(cfg.Resolve(f))
				h.Write(b)
				h.Write([]byte{0})
			}
		}
		tlsID = strings.Join([]string{t.CA, t.Cert, t.Key, t.ServerName, hex.EncodeToString(h.Sum(nil))}, "|")
	}
	return fmt.Sprintf("%s|%q|%s|%t|%s|%s|%q|%q|%s|%s|%d", st.Type, st.Addresses, st.MasterName, st.Cluster, st.Username, st.Password,
		st.SentinelUsername, st.SentinelPassword, tlsID, st.Timeout, st.PoolSize)
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

// buildFleet returns the store and fleet keys of cfg for a build: the
// serving generation's where the settings are the same, else new ones,
// the Env's once the build serves (useFleet) and closed if it never does
// (dropFleet). Without sessions.store it is empty.
func (e *Env) buildFleet(cfg *conf.Config) fleetState {
	st := cfg.Sessions.Store
	if st == nil {
		return fleetState{}
	}
	var f fleetState
	f.storeID = storeID(cfg)
	e.mu.Lock()
	cur := e.fleet
	e.mu.Unlock()
	if cur.shared != nil && cur.storeID == f.storeID {
		f.shared = cur.shared
	} else {
		obs, _ := e.Sessions.(sessionstore.Observer)
		f.shared = sessionstore.NewShared(e.openStore(st), st.Timeout, obs)
		f.newStore = true
	}
	if cfg.Sessions.TicketKeys != nil {
		f.keys, f.keysID = e.fleetKeys(cfg, f.shared, cur.keys, cur.keysID)
		f.newKeys = f.keys != cur.keys
	}
	return f
}

// useFleet makes f, the fleet of a generation that now serves, the Env's:
// a store it replaces hands its pending deletions of ended sessions to f's
// and closes after retireDelay, replaced keys stop
// refreshing (their tickets still open with f's keys: Previous).
func (e *Env) useFleet(f fleetState) {
	e.mu.Lock()
	old := e.fleet
	e.fleet = f
	e.mu.Unlock()
	if old.keys != nil && old.keys != f.keys {
		old.keys.Close()
	}
	if s := old.shared; s != nil && s != f.shared {
		if f.shared == nil {
			// sessions.store removed: no store takes the deletions s
			// has not; s tries them once more before it closes.
			time.AfterFunc(retireDelay, func() { e.flushRemovedStore(s) })
			return
		}
		// Sessions ended while s did not take their deletion stay
		// unresumable and deleted through f's store.
		s.RetireTo(f.shared)
		time.AfterFunc(retireDelay, func() { s.Close() })
	}
}

// finalStoreFlush bounds the last attempt of a store that closes for good
// (a reload removed sessions.store, or gmproxy stops) at the deletions of
// ended sessions it has not taken.
const finalStoreFlush = 5 * time.Second

// flushRemovedStore closes s, the store of sessions.store that a reload
// removed (Env.useFleet).
func (e *Env) flushRemovedStore(s *sessionstore.Shared) {
	e.flushAndCloseStore(s, "sessions.store removed")
}

// flushAndCloseStore closes s, which no store follows (a reload removed
// it, or gmproxy stops), after a last attempt (bounded) at its pending
// deletions, and logs how many it dropped: those sessions, ended with a
// fatal alert, stay resumable from the store for the instances that still
// use it (or the next start), until their lifetime ends.
func (e *Env) flushAndCloseStore(s *sessionstore.Shared, why string) {
	dropped, _ := s.FlushAndClose(finalStoreFlush)
	if dropped > 0 && e.Logger != nil {
		e.Logger.Warn(why+": deletions of ended sessions the store did not take were dropped; other instances on that store may still resume those sessions until they expire", "dropped", dropped)
	}
}

// dropFleet closes what buildFleet opened for a build that never served
// (what it reused belongs to the serving generation).
func (e *Env) dropFleet(f fleetState) {
	if f.newKeys {
		f.keys.Close()
	}
	if f.newStore {
		f.shared.Close()
	}
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
		SentinelUsername: st.SentinelUsername, SentinelPassword: st.SentinelPassword,
		PoolSize: st.PoolSize, Timeout: st.Timeout,
	}
	if st.TLS != nil {
		o.TLS = st.TLS.Config
	}
	return redisstore.New(o)
}

// fleetKeys returns the ticket keys of cfg agreed on through shared: cur
// (the serving generation's, named curID) when the settings are the same,
// else a new set that keeps opening cur's tickets. A store that does not
// answer does not stop the build: the keys fall back to random ones of
// this instance until it answers (sessionstore.FleetKeys).
func (e *Env) fleetKeys(cfg *conf.Config, shared *sessionstore.Shared, cur *sessionstore.FleetKeys, curID string) (*sessionstore.FleetKeys, string) {
	s := &cfg.Sessions
	id := fmt.Sprintf("%p|%s|%s|%s|%s|%s", shared, s.TicketKeys.WrapKeyFile, wrapKeysID(s.TicketKeys.WrapKeys), s.TicketRotation, s.Lifetime, s.Store.KeyPrefix)
	if cur != nil && curID == id {
		return cur, id
	}
	fc := sessionstore.FleetKeysConfig{
		Prefix: s.Store.KeyPrefix, Rotation: s.TicketRotation, Lifetime: s.Lifetime, Wrap: ticket.Static(s.TicketKeys.WrapKeys),
	}
	if cur != nil {
		// The tickets the replaced set sealed keep resuming (a new
		// rotation or prefix names other store keys).
		fc.Previous, fc.PreviousUntil = cur.Retiring()
	}
	fk := sessionstore.NewFleetKeys(shared, fc)
	log := e.Logger
	if err := fk.Refresh(context.Background()); err != nil && log != nil {
		log.Warn("fleet ticket keys: the store did not answer; tickets resume on this instance only until it does", "err", err)
	}
	fk.Start(0, func(err error) {
		if log != nil {
			log.Warn("fleet ticket keys: refresh failed", "err", err)
		}
	})
	return fk, id
}

// tieredStore puts shared, the store of cfg's build, behind a protocol's
// in-process session cache (local itself without sessions.store).
func tieredStore(cfg *conf.Config, shared *sessionstore.Shared, family string, local sessionstore.Local, keys ticket.Source, lifetime time.Duration) sessionstore.Local {
	if shared == nil {
		return local
	}
	return sessionstore.NewTiered(local, shared, keys, cfg.Sessions.Store.KeyPrefix+family+":", lifetime)
}

// closeFleet stops the fleet keys and closes the store (Env.Close), after
// its last attempt at the deletions it has not taken, as a store a reload
// removed: no store follows it.
func (e *Env) closeFleet() {
	e.mu.Lock()
	f := e.fleet
	e.fleet = fleetState{}
	e.mu.Unlock()
	if f.keys != nil {
		f.keys.Close()
	}
	if f.shared != nil {
		e.flushAndCloseStore(f.shared, "shutdown")
	}
}
