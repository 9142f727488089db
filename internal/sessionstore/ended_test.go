package sessionstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// broadcastMemory is a Memory store whose messages reach its subscribers
// at once (the in-process stand-in for Redis pub/sub; redisstore tests the
// real one).
type broadcastMemory struct {
	*Memory
	mu   sync.Mutex
	subs map[int]sub
	next int
}

type sub struct {
	channel string
	deliver func([]byte)
}

func newBroadcastMemory() *broadcastMemory {
	return &broadcastMemory{Memory: NewMemory(), subs: map[int]sub{}}
}

func (b *broadcastMemory) Publish(_ context.Context, channel string, msg []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.subs {
		if s.channel == channel {
			s.deliver(msg)
		}
	}
	return nil
}

func (b *broadcastMemory) Subscribe(channel string, deliver func([]byte), _ func()) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.subs[id] = sub{channel, deliver}
	return func() {
		b.mu.Lock()
		delete(b.subs, id)
		b.mu.Unlock()
	}
}

func (b *broadcastMemory) active() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// TestEndedReachesEveryCacheOfTheChannel: a build of the configuration
// makes new Tiered stores on the running one's channel, and may then be
// refused (a reload that fails): the cache in use still hears of ended
// sessions, whichever Tiered was made last, and so does the new one.
func TestEndedReachesEveryCacheOfTheChannel(t *testing.T) {
	store := newBroadcastMemory()
	keys := ticket.Static{testKey(t, 1)}
	other := NewShared(store, time.Second, nil) // another instance
	defer other.Close()
	ender := NewTiered(newMapLocal(), other, keys, "p:tlcp:", time.Minute)

	sh := NewShared(store, time.Second, nil)
	running, refused := newMapLocal(), newMapLocal()
	inUse := NewTiered(running, sh, keys, "p:tlcp:", time.Minute)
	NewTiered(refused, sh, ticket.Static{testKey(t, 2)}, "p:tlcp:", time.Minute) // the refused build: other keys
	ender.Put("id-1", []byte("s"), time.Minute)
	if _, ok := inUse.Get("id-1"); !ok {
		t.Fatal("setup: id-1 did not resume from the store")
	}
	refused.Put("id-1", []byte("s"), time.Minute)
	if n := store.active(); n != 2 {
		t.Fatalf("%d subscriptions, want one per Shared", n)
	}
	ender.Delete("id-1")
	if _, ok := running.Get("id-1"); ok {
		t.Fatal("the cache in use kept a session ended elsewhere: the newest Tiered took its place")
	}
	if _, ok := refused.Get("id-1"); ok {
		t.Fatal("the newest cache kept a session ended elsewhere")
	}

	// Close ends the subscription, and a Tiered made after it follows
	// nothing.
	sh.Close()
	NewTiered(newMapLocal(), sh, keys, "p:tlcp:", time.Minute)
	if n := store.active(); n != 1 {
		t.Fatalf("%d subscriptions after one Shared closed, want 1", n)
	}
}
