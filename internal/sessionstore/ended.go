package sessionstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Ended sessions. A TLCP session that ends with a fatal alert must not be
// resumed (RFC 5246 §7.2, which GB/T 38636-2020 follows); Tiered.Delete
// removes it from this instance's cache and from the store, but the other
// instances may hold it in their in-process caches, where a resumption
// never asks the store. Over a store that is a Broadcaster, Delete also
// publishes the session ID on the channel <prefix>ended, and every instance
// following the channel forgets it (within a round trip, not atomically:
// a resumption on another instance in that moment still succeeds).
//
// The message is sealed with the fleet's ticket keys like a stored session
// (label endedLabel, then the ID), so that whoever may publish on the
// store but does not hold the keys cannot make the instances drop a
// session of their choice. When a subscription was broken (the store
// restarted, the connection dropped), messages may have been lost: the
// in-process cache is then emptied, since any of its sessions may have
// ended meanwhile. Emptied, it costs a store round trip on the next
// resumption of each session, not a full handshake: the store still holds
// them. So one who may publish on the channel and gets the subscriptions
// disconnected (a message over the server's output buffer limit for
// subscribers does it) costs the fleet those round trips; grant the
// channels to gmproxy's user alone (deploy/examples/fleet/redis.conf).

// endedLabel starts the plaintext of an ended-session message.
const endedLabel = "gmproxy session-id ended v1\x00"

// maxEnded bounds a message that is opened (a sealed ID is under 100
// bytes); longer ones are ignored.
const maxEnded = 512

// endedChannel is the channel of a Tiered cache's ended sessions.
func endedChannel(prefix string) string { return prefix + "ended" }

// clearer is a Local that can forget every session at once (the daemon's
// cache can).
type clearer interface{ Clear() }

// follower delivers one channel's messages to the caches of the Tiered
// stores made for it. Every build of the daemon's configuration makes new
// Tiered stores, and a build may still be refused (a reload that fails):
// so a follower does not trust the newest alone but keeps the last
// maxTargets distinct (cache, keys) pairs, opens a message with any of
// their keys and drops the session from every one of their caches.
type follower struct {
	targets atomic.Pointer[[]endedTarget] // newest first
	stop    func()
	logged  atomic.Int64 // Unix ns of lost's last log line
}

// maxTargets bounds the pairs a follower keeps.
const maxTargets = 8

type endedTarget struct {
	local Local
	keys  ticket.Source
	names string // the keys' names when registered: pairs differ by them
}

// keyNames identifies a key source by the names of its keys.
func keyNames(src ticket.Source) string {
	ks := src.TicketKeys()
	b := make([]byte, 0, len(ks)*len(ticket.Key{}.Name))
	for i := range ks {
		b = append(b, ks[i].Name[:]...)
	}
	return string(b)
}

// followEnded makes sure the channel of prefix is followed for local.
func (s *Shared) followEnded(prefix string, local Local, keys ticket.Source) {
	b, ok := s.store.(Broadcaster)
	if !ok {
		return
	}
	channel := endedChannel(prefix)
	t := endedTarget{local: local, keys: keys, names: keyNames(keys)}
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.followClosed {
		return
	}
	f := s.followers[channel]
	if f == nil {
		f = &follower{}
		f.targets.Store(&[]endedTarget{t})
		if s.followers == nil {
			s.followers = map[string]*follower{}
		}
		s.followers[channel] = f
		f.stop = b.Subscribe(channel, f.deliver, f.lost)
		return
	}
	ts := []endedTarget{t}
	for _, o := range *f.targets.Load() {
		if len(ts) < maxTargets && (o.local != t.local || o.names != t.names) {
			ts = append(ts, o)
		}
	}
	f.targets.Store(&ts)
}

// stopFollowing ends the subscriptions (Shared.Close).
func (s *Shared) stopFollowing() {
	s.followMu.Lock()
	s.followClosed = true
	fs := s.followers
	s.followers = nil
	s.followMu.Unlock()
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f.stop)
	}
	wg.Wait()
}

// deliver forgets the session a message names, if it opens.
func (f *follower) deliver(msg []byte) {
	if len(msg) > maxEnded {
		return
	}
	ts := *f.targets.Load()
	for _, t := range ts {
		pt, ok, _ := ticket.Open(t.keys, ticket.StoredSession, msg)
		if !ok || len(pt) <= len(endedLabel) || string(pt[:len(endedLabel)]) != endedLabel {
			continue
		}
		id := string(pt[len(endedLabel):])
		for i, u := range ts {
			if !seenLocal(ts[:i], u.local) {
				u.local.Delete(id)
			}
		}
		return
	}
}

// lost empties the caches: any of their sessions may have ended unheard.
// It says so in the log, at most once a minute.
func (f *follower) lost() {
	if now := time.Now().UnixNano(); now-f.logged.Load() >= int64(time.Minute) {
		f.logged.Store(now)
		slog.Info("session store: the subscription to ended sessions may have missed messages (the store restarted, the connection dropped, or more ended at once than it holds); the in-process session cache was emptied, its sessions resume from the store")
	}
	ts := *f.targets.Load()
	for i, t := range ts {
		if c, ok := t.local.(clearer); ok && !seenLocal(ts[:i], t.local) {
			c.Clear()
		}
	}
}

// seenLocal reports whether one of ts has local.
func seenLocal(ts []endedTarget, local Local) bool {
	for _, t := range ts {
		if t.local == local {
			return true
		}
	}
	return false
}

// publishEnded tells the instances following the channel of t on st that
// id ended. It runs within the store write of Delete (ctx bounds both).
func (t *Tiered) publishEnded(ctx context.Context, st Store, id string) error {
	b, ok := st.(Broadcaster)
	if !ok {
		return nil
	}
	pt := make([]byte, 0, len(endedLabel)+len(id))
	pt = append(pt, endedLabel...)
	pt = append(pt, id...)
	msg, err := ticket.Seal(make([]byte, 0, len(pt)+ticket.Overhead), t.keys, ticket.StoredSession, pt)
	if err != nil {
		return nil // no key yet: nothing another instance could open
	}
	return b.Publish(ctx, endedChannel(t.prefix), msg)
}
