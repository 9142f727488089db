package sessionstore

import (
	"context"
	"sync"
	"sync/atomic"

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
// store but does not hold the keys cannot make the instances drop
// sessions. When the subscription was broken (the store restarted, a
// failover), messages may have been lost: the in-process cache is then
// emptied, since any of its sessions may have ended meanwhile.

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

// follower delivers one channel's messages to the newest Tiered cache
// made for it (a reload makes new ones; they share the channel).
type follower struct {
	target atomic.Pointer[endedTarget]
	stop   func()
}

type endedTarget struct {
	local Local
	keys  ticket.Source
}

// followEnded makes sure the channel of prefix is followed for local.
func (s *Shared) followEnded(prefix string, local Local, keys ticket.Source) {
	b, ok := s.store.(Broadcaster)
	if !ok {
		return
	}
	channel := endedChannel(prefix)
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.followClosed {
		return
	}
	f := s.followers[channel]
	if f == nil {
		f = &follower{}
		if s.followers == nil {
			s.followers = map[string]*follower{}
		}
		s.followers[channel] = f
		f.target.Store(&endedTarget{local: local, keys: keys})
		f.stop = b.Subscribe(channel, f.deliver, f.lost)
		return
	}
	f.target.Store(&endedTarget{local: local, keys: keys})
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
	t := f.target.Load()
	if len(msg) > maxEnded {
		return
	}
	pt, ok, _ := ticket.Open(t.keys, ticket.StoredSession, msg)
	if !ok || len(pt) <= len(endedLabel) || string(pt[:len(endedLabel)]) != endedLabel {
		return
	}
	t.local.Delete(string(pt[len(endedLabel):]))
}

// lost empties the cache: any of its sessions may have ended unheard.
func (f *follower) lost() {
	if c, ok := f.target.Load().local.(clearer); ok {
		c.Clear()
	}
}

// publishEnded tells the instances following the channel of t that id
// ended. It runs within the store write of Delete (ctx bounds both).
func (t *Tiered) publishEnded(ctx context.Context, id string) error {
	b, ok := t.shared.store.(Broadcaster)
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
