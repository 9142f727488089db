package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessioncache"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// mapLocal is a Local without bounds.
type mapLocal struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMapLocal() *mapLocal { return &mapLocal{m: map[string][]byte{}} }

func (l *mapLocal) Get(id string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[id]
	return v, ok
}
func (l *mapLocal) Put(id string, st []byte, _ time.Duration) {
	l.mu.Lock()
	l.m[id] = st
	l.mu.Unlock()
}
func (l *mapLocal) Delete(id string) { l.mu.Lock(); delete(l.m, id); l.mu.Unlock() }

// recorder is an Observer that counts results per op.
type recorder struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *recorder) StoreOp(op, result string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[op+"/"+result]++
}

func (r *recorder) get(k string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.n[k] }

func testKey(t *testing.T, b byte) ticket.Key {
	t.Helper()
	k, err := ticket.NewKey(bytes.Repeat([]byte{b}, ticket.KeySize), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestTieredSharesSessionsBetweenInstances(t *testing.T) {
	mem := NewMemory()
	keys := ticket.Static{testKey(t, 1)}
	rec := &recorder{}
	sh := NewShared(mem, time.Second, rec)
	a := NewTiered(newMapLocal(), sh, keys, "p:tlcp:", time.Minute)
	b := NewTiered(newMapLocal(), sh, keys, "p:tlcp:", time.Minute)
	state := []byte("master secret and the rest of the session state")
	a.Put("id-1", state, time.Minute)
	got, ok := b.Get("id-1")
	if !ok || !bytes.Equal(got, state) {
		t.Fatalf("instance b: Get = %q, %v; want the state a stored", got, ok)
	}
	if rec.get("get/hit") != 1 || rec.get("set/ok") != 1 {
		t.Fatalf("observed %v", rec.n)
	}
	// b now has it locally: no second round trip.
	b.Get("id-1")
	if rec.get("get/hit") != 1 {
		t.Fatalf("a local hit went to the store: %v", rec.n)
	}
	// The store never holds the state in clear.
	for _, e := range mem.m {
		if bytes.Contains(e.val, state[:13]) {
			t.Fatal("the store holds the session state in clear")
		}
	}
	a.Delete("id-1")
	if _, ok := NewTiered(newMapLocal(), sh, keys, "p:tlcp:", time.Minute).Get("id-1"); ok {
		t.Fatal("a deleted session was found in the store")
	}
}

func TestTieredRefusesForeignOrMovedEntries(t *testing.T) {
	mem := NewMemory()
	sh := NewShared(mem, time.Second, nil)
	a := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 1)}, "p:", time.Minute)
	a.Put("id-1", []byte("state one"), time.Minute)

	// Another fleet (other keys) writing to the same store: not opened.
	other := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 2)}, "p:", time.Minute)
	if _, ok := other.Get("id-1"); ok {
		t.Fatal("a session sealed with another key set was accepted")
	}

	// An entry copied under another session ID (someone with write access
	// to the store) must not resume as that ID.
	v, _, _ := mem.Get(context.Background(), a.key("id-1"))
	// A stored session presented as a ticket never opens.
	if _, ok, _ := ticket.Open(ticket.Static{testKey(t, 1)}, ticket.TLCP, v); ok {
		t.Fatal("a stored session opened as a TLCP ticket")
	}
	mem.Set(context.Background(), a.key("id-2"), v, time.Minute)
	if _, ok := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 1)}, "p:", time.Minute).Get("id-2"); ok {
		t.Fatal("a sealed session moved to another ID was accepted")
	}
	// Damaged entries are misses.
	v[len(v)-1] ^= 1
	mem.Set(context.Background(), a.key("id-3"), v, time.Minute)
	if _, ok := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 1)}, "p:", time.Minute).Get("id-3"); ok {
		t.Fatal("a damaged entry was accepted")
	}
}

// failingStore fails (or blocks until the deadline) and counts calls.
type failingStore struct {
	Memory
	mu    sync.Mutex
	calls int
	block bool
}

func (s *failingStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if s.block {
		<-ctx.Done()
		return nil, false, ctx.Err()
	}
	return nil, false, errors.New("connection refused")
}

func TestSharedBreakerStopsAskingADeadStore(t *testing.T) {
	st := &failingStore{}
	rec := &recorder{}
	sh := NewShared(st, time.Second, rec)
	now := time.Unix(1000, 0)
	sh.br.now = func() time.Time { return now }
	tr := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 1)}, "p:", time.Minute)
	for range 3 * BreakerThreshold {
		if _, ok := tr.Get("id"); ok {
			t.Fatal("hit from a dead store")
		}
	}
	if st.calls != BreakerThreshold {
		t.Fatalf("the dead store was asked %d times; want %d (then the breaker opens)", st.calls, BreakerThreshold)
	}
	if rec.get("get/error") != BreakerThreshold || rec.get("get/skipped") != 2*BreakerThreshold || !sh.BreakerOpen() {
		t.Fatalf("observed %v", rec.n)
	}
	// After the cooldown one probe goes through; it fails: open again.
	now = now.Add(BreakerCooldown)
	tr.Get("id")
	tr.Get("id")
	if st.calls != BreakerThreshold+1 {
		t.Fatalf("after the cooldown the store was asked %d times; want one probe", st.calls-BreakerThreshold)
	}
	// The store is back: the next probe closes the breaker.
	now = now.Add(BreakerCooldown)
	sh.store = NewMemory()
	tr.Get("id")
	if sh.BreakerOpen() {
		t.Fatal("a successful probe did not close the breaker")
	}
	if _, _, _ = sh.get("x"); rec.get("get/miss") != 2 {
		t.Fatalf("observed %v", rec.n)
	}
}

func TestSharedTimeoutGivesAMiss(t *testing.T) {
	st := &failingStore{block: true}
	rec := &recorder{}
	tr := NewTiered(newMapLocal(), NewShared(st, time.Millisecond, rec), ticket.Static{testKey(t, 1)}, "p:", time.Minute)
	if _, ok := tr.Get("id"); ok {
		t.Fatal("hit from a store that never answered")
	}
	if rec.get("get/timeout") != 1 {
		t.Fatalf("observed %v; want one timeout", rec.n)
	}
}

func newTestFleet(t *testing.T, mem Store, wrap byte, now *time.Time) *FleetKeys {
	f := NewFleetKeys(NewShared(mem, time.Second, nil), FleetKeysConfig{
		Prefix: "p:", Rotation: time.Hour, Lifetime: 5 * time.Minute, Wrap: ticket.Static{testKey(t, wrap)},
	})
	f.SetClock(func() time.Time { return *now })
	return f
}

func TestFleetKeysAgreeWithoutALeader(t *testing.T) {
	mem := NewMemory()
	now := time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(10 * time.Minute)
	mem.SetClock(func() time.Time { return now })
	fleet := make([]*FleetKeys, 4)
	for i := range fleet {
		fleet[i] = newTestFleet(t, mem, 9, &now)
	}
	// All refresh at once: SET NX lets one key per epoch win.
	var wg sync.WaitGroup
	for _, f := range fleet {
		wg.Go(func() {
			if err := f.Refresh(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	first := fleet[0].TicketKeys()
	for i, f := range fleet {
		if got := f.TicketKeys(); got[0].Name != first[0].Name {
			t.Fatalf("instance %d encrypts with another key than instance 0", i)
		}
	}
	// A ticket sealed by one opens on another.
	tk, err := ticket.Seal(nil, fleet[1], ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(fleet[3], ticket.TLCP, tk); !ok {
		t.Fatal("a ticket of instance 1 does not open on instance 3")
	}
	// The epoch turns: every instance switches to the key made ahead,
	// without asking the store.
	now = now.Add(time.Hour)
	next := fleet[0].TicketKeys()[0].Name
	if next == first[0].Name {
		t.Fatal("the encrypting key did not rotate")
	}
	for i, f := range fleet {
		if f.TicketKeys()[0].Name != next {
			t.Fatalf("instance %d did not switch to the next epoch's key", i)
		}
	}
	if _, ok, stale := ticket.Open(fleet[2], ticket.TLCP, tk); !ok || !stale {
		t.Fatalf("a ticket of the previous epoch: ok=%v stale=%v; want it to open, as stale", ok, stale)
	}
	// Long after (the previous key's tickets expired), it no longer opens.
	now = now.Add(3 * time.Hour)
	if err := fleet[2].Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(fleet[2], ticket.TLCP, tk); ok {
		t.Fatal("a retired key still opens tickets")
	}
	// The store holds no secret in clear: another wrap key cannot use it.
	if err := newTestFleet(t, mem, 8, &now).Refresh(context.Background()); !errors.Is(err, errWrap) {
		t.Fatalf("refresh with another wrap key: %v; want errWrap", err)
	}
}

func TestFleetKeysFallBackWhileTheStoreIsDown(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := &flakyStore{Memory: NewMemory(), down: true}
	f := newTestFleet(t, st, 9, &now)
	if err := f.Refresh(context.Background()); err == nil {
		t.Fatal("refresh with a dead store succeeded")
	}
	tk, err := ticket.Seal(nil, f, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatalf("no key to seal with while the store is down: %v", err)
	}
	st.down = false
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(f, ticket.TLCP, tk); !ok {
		t.Fatal("a ticket sealed with the fallback key no longer opens once the store is back")
	}
	other := newTestFleet(t, st, 9, &now)
	if err := other.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.TicketKeys()[0].Name != other.TicketKeys()[0].Name {
		t.Fatal("after the store came back the instances do not share the encrypting key")
	}
}

type flakyStore struct {
	*Memory
	down bool
}

func (s *flakyStore) AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) ([]byte, error) {
	if s.down {
		return nil, errors.New("connection refused")
	}
	return s.Memory.AddOrGet(ctx, key, val, ttl)
}

// TestFleetKeysSurviveAnEmptiedStore: a store that lost its keys (Redis
// restarted without persistence) gets back the keys the instances hold,
// so tickets issued before keep opening everywhere.
func TestFleetKeysSurviveAnEmptiedStore(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	mem := NewMemory()
	a, b := newTestFleet(t, mem, 9, &now), newTestFleet(t, mem, 9, &now)
	for _, f := range []*FleetKeys{a, b} {
		if err := f.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	tk, _ := ticket.Seal(nil, a, ticket.TLCP, []byte("state"))
	emptied := NewMemory()
	a.shared.store, b.shared.store = emptied, emptied
	for _, f := range []*FleetKeys{b, a} {
		if err := f.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, stale := ticket.Open(b, ticket.TLCP, tk); !ok || stale {
		t.Fatalf("after the store was emptied: ok=%v stale=%v; want the ticket to open with the current key", ok, stale)
	}
	if a.TicketKeys()[0].Name != b.TicketKeys()[0].Name {
		t.Fatal("the instances disagree on the encrypting key")
	}
}

// TestFleetKeysRefuseAKeyMovedToAnotherEpoch: a sealed key copied under
// another epoch's name (someone with write access to the store pinning an
// old key as the newest) is refused.
func TestFleetKeysRefuseAKeyMovedToAnotherEpoch(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	mem := NewMemory()
	mem.SetClock(func() time.Time { return now })
	f := newTestFleet(t, mem, 9, &now)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ep := f.epochOf(now)
	old, _, _ := mem.Get(context.Background(), f.storeKey(ep))
	later := now.Add(10 * time.Hour)
	mem.Set(context.Background(), f.storeKey(f.epochOf(later)), old, time.Hour)
	g := newTestFleet(t, mem, 9, &later)
	if err := g.Refresh(context.Background()); !errors.Is(err, errWrap) {
		t.Fatalf("a key moved to another epoch: refresh = %v; want errWrap", err)
	}
}

// TestFleetKeysKeepRotatingPastJunk: someone who can write to the store
// puts junk (no TTL) under the names of the coming epochs, so every
// refresh fails. No key encrypts for more than two rotations: after one
// overdue epoch the instance encrypts with its own rotating keys, and the
// fleet's tickets issued before still open.
func TestFleetKeysKeepRotatingPastJunk(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(10 * time.Minute)
	mem := NewMemory()
	mem.SetClock(func() time.Time { return now })
	f := newTestFleet(t, mem, 9, &now)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, err := ticket.Seal(nil, f, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	ep := f.epochOf(now)
	for e := ep + 2; e < ep+60; e++ {
		mem.Set(context.Background(), f.storeKey(e), []byte("junk junk junk junk junk junk junk junk junk junk"), 0)
	}
	names := map[[16]byte]bool{}
	for h := 1; h <= 48; h++ {
		now = now.Add(time.Hour)
		f.Refresh(context.Background())
		k := f.TicketKeys()[0]
		if age := now.Sub(k.Created); age > 2*f.rotation {
			t.Fatalf("hour %d: the encrypting key was made %s ago (rotation %s): rotation stopped", h, age, f.rotation)
		}
		names[k.Name] = true
		if h == 1 {
			if _, ok, _ := ticket.Open(f, ticket.TLCP, before); !ok {
				t.Fatal("a ticket of the fleet's key no longer opens")
			}
		}
	}
	if len(names) < 40 {
		t.Errorf("%d encrypting keys in 48 rotations", len(names))
	}
}

// tooLargeStore refuses every write for its size and fails every lookup.
type tooLargeStore struct{ failingStore }

func (s *tooLargeStore) Set(context.Context, string, []byte, time.Duration) error {
	return fmt.Errorf("test store: %w", ErrTooLarge)
}

// TestSharedSizeRefusalIsNoOutcome: a write refused for its size neither
// closes the breaker in its probe (the store said nothing of its health)
// nor counts as a failure: the next call probes.
func TestSharedSizeRefusalIsNoOutcome(t *testing.T) {
	st := &tooLargeStore{}
	rec := &recorder{}
	sh := NewShared(st, time.Second, rec)
	now := time.Unix(1000, 0)
	sh.br.now = func() time.Time { return now }
	tr := NewTiered(newMapLocal(), sh, ticket.Static{testKey(t, 1)}, "p:", time.Minute)
	tripBreaker(t, tr, sh, "id")
	now = now.Add(BreakerCooldown)
	tr.Put("big", []byte("state"), time.Minute) // the probe's turn, refused for its size
	if rec.get("set/error") != 1 {
		t.Fatalf("observed %v; want the refused write counted as an error", rec.n)
	}
	tr.Get("id") // the probe, failing
	if st.calls != BreakerThreshold+1 || !sh.BreakerOpen() {
		t.Fatalf("after a size refusal in the half-open breaker: %d lookups (want %d), open %v (want the failed probe to reopen it)",
			st.calls, BreakerThreshold+1, sh.BreakerOpen())
	}
}

// TestFleetKeysKeepTheirKeyWhenANewcomerReseeds: the store lost its keys
// (Redis restarted without persistence) and an instance that holds none
// (it just started) refreshes first: its new key wins the epoch. An
// instance that held the epoch's old key takes the store's to encrypt, as
// the fleet must agree, but keeps the old one to open the tickets it
// sealed with it: they stay valid for their lifetime.
func TestFleetKeysKeepTheirKeyWhenANewcomerReseeds(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(10 * time.Minute)
	mem := NewMemory()
	a := newTestFleet(t, mem, 9, &now)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	tk, err := ticket.Seal(nil, a, ticket.TLCP, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	emptied := NewMemory()
	a.shared.store = emptied
	c := newTestFleet(t, emptied, 9, &now)
	for _, f := range []*FleetKeys{c, a} {
		if err := f.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if a.TicketKeys()[0].Name != c.TicketKeys()[0].Name {
		t.Fatal("the instances disagree on the encrypting key")
	}
	if _, ok, stale := ticket.Open(a, ticket.TLCP, tk); !ok || !stale {
		t.Fatalf("a ticket sealed with the displaced key: ok=%v stale=%v; want it to open, as stale", ok, stale)
	}
	// Through the epochs it stays as long as its epoch's key would.
	for range 2 {
		now = now.Add(time.Hour)
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := ticket.Open(a, ticket.TLCP, tk); !ok {
		t.Fatal("the displaced key was dropped before its epoch's tickets expired")
	}
	now = now.Add(time.Hour)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ticket.Open(a, ticket.TLCP, tk); ok {
		t.Fatal("the displaced key outlived its epoch's retention")
	}
}

// TestTieredSkipsOversizedStates: a state over sessioncache.MaxState is
// not written to the store (no instance keeps it locally, and past the
// store's read bound it could never be read back); one at the bound is.
func TestTieredSkipsOversizedStates(t *testing.T) {
	mem := NewMemory()
	rec := &recorder{}
	tr := NewTiered(newMapLocal(), NewShared(mem, time.Second, rec), ticket.Static{testKey(t, 1)}, "p:", time.Minute)
	tr.Put("big", make([]byte, sessioncache.MaxState+1), time.Minute)
	if mem.Len() != 0 || rec.get("set/ok") != 0 {
		t.Errorf("a %d-byte state was written to the store (%d entries, observed %v)", sessioncache.MaxState+1, mem.Len(), rec.n)
	}
	tr.Put("limit", make([]byte, sessioncache.MaxState), time.Minute)
	if mem.Len() != 1 || rec.get("set/ok") != 1 {
		t.Errorf("a state of MaxState bytes was not written (%d entries, observed %v)", mem.Len(), rec.n)
	}
}

// switchStore is a Store that fails every call while down.
type switchStore struct {
	Store
	mu   sync.Mutex
	down bool
}

func (s *switchStore) set(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }
func (s *switchStore) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("connection refused")
	}
	return nil
}
func (s *switchStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.err(); err != nil {
		return nil, false, err
	}
	return s.Store.Get(ctx, key)
}
func (s *switchStore) Delete(ctx context.Context, key string) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

// A session ended (Delete, on a fatal alert) while the store did not
// answer must not resume from the store once it answers again (RFC 5246
// §7.2): the deletion is retried, and until it is taken the process does
// not take the session from the store.
func TestEndedSessionNotResumedWhenTheDeleteWasLost(t *testing.T) {
	mem := NewMemory()
	st := &switchStore{Store: mem}
	sh := NewShared(st, time.Second, nil)
	defer sh.Close()
	now := time.Unix(1000, 0)
	var clock sync.Mutex
	sh.br.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	sh.retryEvery = time.Millisecond
	keys := ticket.Static{testKey(t, 1)}
	tr := NewTiered(newMapLocal(), sh, keys, "p:", time.Minute)
	tr.Put("id", []byte("state"), time.Minute)

	st.set(true)
	tripBreaker(t, tr, sh, "other")
	tr.Delete("id") // skipped: the breaker is open
	// Another Tiered of the same process (a reload's) shares the store.
	tr2 := NewTiered(newMapLocal(), sh, keys, "p:", time.Minute)
	clock.Lock()
	now = now.Add(BreakerCooldown)
	clock.Unlock()
	st.set(false)
	if _, ok := tr2.Get("id"); ok {
		t.Fatal("a session ended while the store was down resumed from the store")
	}
	for i := 0; ; i++ {
		if _, found, _ := mem.Get(context.Background(), tr.key("id")); !found {
			break
		}
		if i == 2000 {
			t.Fatal("the lost deletion was never retried: the store still holds the ended session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := tr2.Get("id"); ok {
		t.Fatal("the ended session resumed after its deletion was retried")
	}
}

// tripBreaker fails BreakerThreshold lookups of key through tr, on a store
// that does not answer, and checks that sh's breaker opened.
func tripBreaker(t *testing.T, tr *Tiered, sh *Shared, key string) {
	t.Helper()
	for range BreakerThreshold {
		tr.Get(key)
	}
	if !sh.BreakerOpen() {
		t.Fatal("the breaker did not open")
	}
}

// gateStore is a Store whose deletions wait until gate is closed.
type gateStore struct {
	Store
	gate chan struct{}
}

func (s *gateStore) Delete(ctx context.Context, key string) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Delete(ctx, key)
}

// A reload that replaces the store (RetireTo, then Close of the old one)
// hands over the deletions of ended sessions the old store did not take:
// the new store does not resume them and deletes them, also those that
// fail on the old store between the reload and its close.
func TestEndedSessionDeletionSurvivesStoreReplacement(t *testing.T) {
	mem := NewMemory()
	oldSt := &switchStore{Store: mem}
	old := NewShared(oldSt, time.Second, nil)
	now := time.Unix(1000, 0)
	old.br.now = func() time.Time { return now }
	old.retryEvery = time.Hour // the old store's own retries never run here
	keys := ticket.Static{testKey(t, 1)}
	tr := NewTiered(newMapLocal(), old, keys, "p:", time.Minute)
	tr.Put("id", []byte("state"), time.Minute)
	tr.Put("late", []byte("state"), time.Minute)

	oldSt.set(true)
	tripBreaker(t, tr, old, "other")
	tr.Delete("id") // skipped: the breaker is open

	// The reload: a new store on the same data (other settings), whose
	// deletions wait for gate so that the lookups below find the entries.
	gate := make(chan struct{})
	next := NewShared(&gateStore{Store: mem, gate: gate}, time.Minute, nil)
	defer next.Close()
	next.retryEvery = time.Millisecond
	old.RetireTo(next)
	tr.Delete("late") // a handshake in flight on the retired store
	// The old store answers again before it closes: its handshakes in
	// flight do not resume the handed-over sessions either.
	oldSt.set(false)
	now = now.Add(BreakerCooldown)
	for _, id := range []string{"id", "late"} {
		if _, ok := tr.Get(id); ok {
			t.Fatalf("session %q resumed on the retired store after the reload", id)
		}
	}
	oldSt.set(true) // the old settings' server is gone: only next deletes
	old.Close()

	tr2 := NewTiered(newMapLocal(), next, keys, "p:", time.Minute)
	for _, id := range []string{"id", "late"} {
		if _, ok := tr2.Get(id); ok {
			t.Fatalf("session %q, ended while its deletion was pending at the reload, resumed from the new store", id)
		}
	}
	close(gate)
	for i := 0; ; i++ {
		_, f1, _ := mem.Get(context.Background(), tr.key("id"))
		_, f2, _ := mem.Get(context.Background(), tr.key("late"))
		if !f1 && !f2 {
			break
		}
		if i == 2000 {
			t.Fatalf("the deletions pending at the reload were dropped: the store still holds id %t, late %t", f1, f2)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
