package redisstore

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/redis/go-redis/v9"
)

// heard collects a subscription's messages and losses.
type heard struct {
	msgs chan string
	lost atomic.Int32
}

func subscribe(s *Store, channel string) (*heard, func()) {
	h := &heard{msgs: make(chan string, 16)}
	stop := s.Subscribe(channel, func(m []byte) {
		select {
		case h.msgs <- string(m):
		default: // a test not reading them: dropped
		}
	}, func() { h.lost.Add(1) })
	return h, stop
}

// publishUntilHeard publishes msg (from p) until h hears it: a subscription
// is confirmed asynchronously, so the first messages may precede it.
func publishUntilHeard(t *testing.T, p *Store, channel, msg string, h *heard) {
	t.Helper()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for time.Now().Before(deadline) {
		if err := p.Publish(context.Background(), channel, []byte(msg)); err != nil {
			t.Logf("Publish: %v", err)
		}
		select {
		case m := <-h.msgs:
			if m == msg {
				return
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%q on %s was not heard", msg, channel)
}

// TestSubscriptionSurvivesARestart: a subscriber hears another client's
// messages; when the server restarts (its subscriptions gone), the
// subscription comes back by itself and reports that messages may have
// been lost meanwhile; stop ends it at once, also while a read waits.
func TestSubscriptionSurvivesARestart(t *testing.T) {
	srv := redistest.Start(t)
	sub := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer sub.Close()
	pub := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer pub.Close()
	h, stop := subscribe(sub, "gmproxy:tlcp:ended")
	publishUntilHeard(t, pub, "gmproxy:tlcp:ended", "one", h)
	if n := h.lost.Load(); n != 0 {
		t.Fatalf("lost called %d times on a subscription never broken", n)
	}
	if err := pub.Publish(context.Background(), "gmproxy:other", []byte("x")); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Restart()
	publishUntilHeard(t, pub, "gmproxy:tlcp:ended", "two", h)
	if n := h.lost.Load(); n != 1 {
		t.Fatalf("lost called %d times after one restart, want 1", n)
	}
	select {
	case m := <-h.msgs:
		if m != "two" { // repeats of "two" may still be in flight
			t.Fatalf("heard %q: a message on another channel, or a stale one", m)
		}
	default:
	}
	// stop ends the read in progress: the server has no subscriber left
	// at once, not after the read's followCheck.
	stop()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for {
		info, err := srv.Command("INFO stats")
		if err == nil && strings.Contains(info, "pubsub_channels:0\r") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscription outlived stop: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterThroughOneAddress: with Cluster set, one node's address is
// enough to reach every key of a Redis Cluster (go-redis learns the slots
// and follows MOVED); without it, keys on the other node fail. A message
// published through one node reaches a subscriber on another.
func TestClusterThroughOneAddress(t *testing.T) {
	nodes := redistest.StartCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound(30*time.Second))
	defer cancel()
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("gmproxy:tlcp:%02x", i)
	}

	plain := New(Options{Addresses: []string{nodes[0].Addr}, Timeout: time.Second})
	defer plain.Close()
	moved := 0
	for _, k := range keys {
		if err := plain.Set(ctx, k, []byte("v"), time.Minute); err != nil {
			if !strings.Contains(err.Error(), "MOVED") {
				t.Fatalf("Set %s without Cluster: %v", k, err)
			}
			moved++
		}
	}
	if moved == 0 || moved == len(keys) {
		t.Fatalf("%d of %d keys were on the other node: the slots are not split", moved, len(keys))
	}

	s := New(Options{Addresses: []string{nodes[0].Addr}, Cluster: true, Timeout: time.Second})
	defer s.Close()
	for _, k := range keys {
		if err := s.Set(ctx, k, []byte("v-"+k), time.Minute); err != nil {
			t.Fatalf("Set %s: %v", k, err)
		}
	}
	for _, k := range keys {
		if v, ok, err := s.Get(ctx, k); err != nil || !ok || string(v) != "v-"+k {
			t.Fatalf("Get %s = %q %v %v", k, v, ok, err)
		}
	}
	vals, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(v) != "v-"+keys[i] {
			t.Fatalf("GetMany[%d] = %q", i, v)
		}
	}
	if v, err := s.AddOrGet(ctx, keys[1], []byte("other"), time.Minute); err != nil || string(v) != "v-"+keys[1] {
		t.Fatalf("AddOrGet of a held key = %q %v", v, err)
	}

	h, stop := subscribe(s, "gmproxy:tlcp:ended")
	defer stop()
	other := New(Options{Addresses: []string{nodes[1].Addr}, Timeout: time.Second})
	defer other.Close()
	publishUntilHeard(t, other, "gmproxy:tlcp:ended", "via node 1", h)
	publishUntilHeard(t, plain, "gmproxy:tlcp:ended", "via node 0", h)
}

// freezer forwards TCP connections to addr until frozen: then the
// connections it carries stay open and carry nothing (a NAT or firewall
// that dropped them without a word); new connections go through.
type freezer struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	held   []net.Conn
}

func newFreezer(t *testing.T, addr string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.held {
			c.Close()
		}
		f.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.held = append(f.held, c, up)
			f.mu.Unlock()
			frozen := f.frozen.Load() // a connection made after freezing flows
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 4096)
				for {
					n, err := src.Read(buf)
					if err != nil {
						return
					}
					if !frozen && f.frozen.Load() {
						continue // dropped, the connection left open
					}
					dst.Write(buf[:n])
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return f
}

// TestSubscriptionNoticesASilentDrop: a subscription whose connection
// stops carrying anything without closing (dropped by a NAT or firewall) is
// noticed by the check after followCheck (its probe unheard, or, where the
// ACL refuses the probe's PUBLISH, its PING unanswered), replaced, and lost
// is called, so the cache does not go on trusting a subscription that
// hears nothing.
func TestSubscriptionNoticesASilentDrop(t *testing.T) {
	defer func(d time.Duration) { followCheck = d }(followCheck)
	followCheck = 200 * time.Millisecond
	for _, tc := range []struct{ name, acl string }{
		{"probe", "+@all"},
		{"ping", "+@all -publish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			if r, err := srv.Command("ACL SETUSER gmproxy on >pw ~gmproxy:* &gmproxy:* " + tc.acl); err != nil || r != "+OK" {
				t.Fatalf("ACL SETUSER: %q %v", r, err)
			}
			fr := newFreezer(t, srv.Addr)
			sub := New(Options{Addresses: []string{fr.ln.Addr().String()}, Username: "gmproxy", Password: "pw", Timeout: time.Second})
			defer sub.Close()
			pub := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
			defer pub.Close()
			h, stop := subscribe(sub, "gmproxy:tlcp:ended")
			defer stop()
			// Another instance's subscription, whose probes sub hears
			// and must not deliver.
			_, stopOther := subscribe(pub, "gmproxy:tlcp:ended")
			defer stopOther()
			publishUntilHeard(t, pub, "gmproxy:tlcp:ended", "before", h)
			// Quiet for several checks: answered checks keep it.
			time.Sleep(5 * followCheck)
			if n := h.lost.Load(); n != 0 {
				t.Fatalf("lost called %d times on a healthy, quiet subscription", n)
			}
			for len(h.msgs) > 0 {
				if m := <-h.msgs; strings.HasPrefix(m, probePrefix) {
					t.Fatalf("a probe was delivered: %q", m)
				}
			}
			fr.frozen.Store(true)
			publishUntilHeard(t, pub, "gmproxy:tlcp:ended", "after", h)
			if n := h.lost.Load(); n != 1 {
				t.Fatalf("lost called %d times after the silent drop, want 1", n)
			}
		})
	}
}

// aclStore starts a server with the gmproxy user of acl and returns a
// Store of that user and one of the default user.
func aclStore(t *testing.T, acl string) (srv *redistest.Server, user, admin *Store) {
	t.Helper()
	srv = redistest.Start(t)
	if r, err := srv.Command("ACL SETUSER gmproxy on >pw ~gmproxy:* " + acl); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER: %q %v", r, err)
	}
	user = New(Options{Addresses: []string{srv.Addr}, Username: "gmproxy", Password: "pw", Timeout: time.Second})
	t.Cleanup(func() { user.Close() })
	admin = New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	t.Cleanup(func() { admin.Close() })
	return srv, user, admin
}

// TestRefusedChannelsTriedAgain: a subscription or PUBLISH the ACL refuses
// is tried again (every refusedRetry), so granting the channel later is
// enough, without a restart; the subscription then reports that messages
// may have been missed.
func TestRefusedChannelsTriedAgain(t *testing.T) {
	defer func(d time.Duration) { refusedRetry = d }(refusedRetry)
	refusedRetry = 200 * time.Millisecond
	srv, user, admin := aclStore(t, "resetchannels +get +getrange +set +del +publish +subscribe +ping +auth +hello +select")
	h, stop := subscribe(user, "gmproxy:tlcp:ended")
	defer stop()
	hAdmin, stopAdmin := subscribe(admin, "gmproxy:tlcp:ended")
	defer stopAdmin()
	publishUntilHeard(t, admin, "gmproxy:tlcp:ended", "setup", hAdmin)
	if err := user.Publish(context.Background(), "gmproxy:tlcp:ended", []byte("refused")); err != nil {
		t.Fatalf("a refused PUBLISH is an error: %v", err)
	}
	select {
	case m := <-h.msgs:
		t.Fatalf("heard %q on a channel the ACL refuses", m)
	case <-time.After(3 * refusedRetry):
	}
	if r, err := srv.Command("ACL SETUSER gmproxy &gmproxy:*"); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER: %q %v", r, err)
	}
	publishUntilHeard(t, admin, "gmproxy:tlcp:ended", "granted", h)
	if n := h.lost.Load(); n != 1 {
		t.Fatalf("lost called %d times after the refusals, want 1", n)
	}
	time.Sleep(refusedRetry)
	publishUntilHeard(t, user, "gmproxy:tlcp:ended", "published again", hAdmin)
}

// TestRefusedPingKeepsTheSubscription: an ACL without +publish and +ping
// refuses both checks (the probe and the PING); the subscription goes on
// (it hears later messages and reports no loss), only without them.
func TestRefusedPingKeepsTheSubscription(t *testing.T) {
	defer func(d time.Duration) { followCheck = d }(followCheck)
	followCheck = 100 * time.Millisecond
	_, user, admin := aclStore(t, "&gmproxy:* +get +getrange +set +del +subscribe +auth +hello +select")
	h, stop := subscribe(user, "gmproxy:tlcp:ended")
	defer stop()
	publishUntilHeard(t, admin, "gmproxy:tlcp:ended", "first", h)
	time.Sleep(6 * followCheck)
	publishUntilHeard(t, admin, "gmproxy:tlcp:ended", "after the refused pings", h)
	if n := h.lost.Load(); n != 0 {
		t.Fatalf("lost called %d times: a refused PING was taken for a broken connection", n)
	}
}

// TestStopDuringDial: stop ends a subscription whose connection is still
// being made (a server that accepts and never answers), without waiting
// for the dial and AUTH timeouts.
func TestStopDuringDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	st := New(Options{Addresses: []string{ln.Addr().String()}, Password: "pw", Timeout: 3 * time.Second})
	defer st.Close()
	stop := st.Subscribe("gmproxy:tlcp:ended", func([]byte) {}, func() {})
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	stop()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("stop took %v: it waited for the dial", d)
	}
}

// TestClosedStoreEndsSubscriptions: closing the Store ends its
// subscriptions' goroutines (they do not go on retrying a closed client),
// without stop.
func TestClosedStoreEndsSubscriptions(t *testing.T) {
	srv := redistest.Start(t)
	pub := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer pub.Close()
	st := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	h, _ := subscribe(st, "gmproxy:tlcp:ended")
	publishUntilHeard(t, pub, "gmproxy:tlcp:ended", "one", h)
	if !subscriptionRunning() {
		t.Fatal("no subscription goroutine found: the test cannot see it end")
	}
	st.Close()
	deadline := time.Now().Add(testwait.Bound(10 * time.Second))
	for subscriptionRunning() {
		if time.Now().After(deadline) {
			t.Fatal("the subscription of a closed Store still runs")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// subscriptionRunning reports whether a Subscribe goroutine runs.
func subscriptionRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Contains(string(buf[:n]), "redisstore.(*Store).Subscribe.func")
}

// TestSubscriptionFollowsASentinelFailover: a Sentinel failover while the
// old master stays up and reachable for this instance (a partition cut it
// off from the Sentinels only, so they could not turn it into a replica).
// The instances switch to the new master and publish there; a
// subscription left on the old master would hear nothing, with every
// ping answered. Its probe, published like any command (so on the new
// master), goes unheard: the subscription moves to the new master and
// reports that messages may have been missed.
func TestSubscriptionFollowsASentinelFailover(t *testing.T) {
	defer func(d time.Duration) { followCheck = d }(followCheck)
	followCheck = 200 * time.Millisecond
	old := redistest.Start(t)
	replica := redistest.StartReplica(t, old)
	for _, s := range []*redistest.Server{old, replica} {
		if r, err := s.Command("ACL SETUSER gmproxy on >pw ~gmproxy:* &gmproxy:* +@all"); err != nil || r != "+OK" {
			t.Fatalf("ACL SETUSER on %s: %q %v", s.Addr, r, err)
		}
	}
	sentinel := redistest.StartSentinel(t, "gm", old, 1)
	o := Options{Addresses: []string{sentinel.Addr}, MasterName: "gm", Username: "gmproxy", Password: "pw", Timeout: time.Second}
	sub := New(o)
	defer sub.Close()
	pub := New(o)
	defer pub.Close()
	const channel = "gmproxy:tlcp:ended"
	h, stop := subscribe(sub, channel)
	defer stop()
	publishUntilHeard(t, pub, channel, "before", h)

	// The old master shuts out the Sentinel and the replica (the default
	// user), not gmproxy's user: the Sentinel takes it for down and
	// promotes the replica, and cannot make the old master a replica.
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: old.Addr, Username: "gmproxy", Password: "pw", Protocol: 2})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "USER", "default").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testwait.Bound(20 * time.Second))
	for {
		info, err := replica.Command("INFO replication")
		if err == nil && strings.Contains(info, "role:master") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica was not promoted: %q %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Once what pub publishes reaches the new master (a client of its
	// own hears it there), pub has followed the failover.
	direct := New(Options{Addresses: []string{replica.Addr}, Username: "gmproxy", Password: "pw", Timeout: time.Second})
	defer direct.Close()
	hNew, stopNew := subscribe(direct, channel)
	defer stopNew()
	publishUntilHeard(t, pub, channel, "on the new master", hNew)
	publishUntilHeard(t, pub, channel, "after the failover", h)
	if info, err := admin.Info(ctx, "replication").Result(); err != nil || !strings.Contains(info, "role:master") {
		t.Fatalf("the old master was made a replica (%q %v): the test did not partition it", info, err)
	}
	if n := h.lost.Load(); n != 1 {
		t.Fatalf("lost called %d times after the subscription moved, want 1", n)
	}
}
