package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func testUpstream(t *testing.T, balance string, targets ...TargetConfig) *Upstream {
	t.Helper()
	u, err := newUpstream(&UpstreamConfig{Name: "u", Targets: targets, Balance: balance, HashHeader: "X-User", HashCookie: "sid"}, NopObserver{}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.close)
	return u
}

func TestSmoothWeightedRoundRobin(t *testing.T) {
	u := testUpstream(t, "round_robin",
		TargetConfig{Address: "a:1", Weight: 5}, TargetConfig{Address: "b:1", Weight: 1}, TargetConfig{Address: "c:1", Weight: 1})
	var seq []string
	for i := 0; i < 7; i++ {
		seq = append(seq, u.pick(nil, "", nil).Addr[:1])
	}
	// nginx's smooth weighted round robin interleaves: a a b a c a a.
	if got := strings.Join(seq, " "); got != "a a b a c a a" {
		t.Fatalf("sequence %q, want \"a a b a c a a\"", got)
	}
}

func TestLeastConn(t *testing.T) {
	u := testUpstream(t, "least_conn", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1", Weight: 2}, TargetConfig{Address: "c:1"})
	a, b, c := u.Targets()[0], u.Targets()[1], u.Targets()[2]
	a.inflight.Store(3)
	b.inflight.Store(4) // 4/2 = 2 per weight
	c.inflight.Store(5)
	if got := u.pick(nil, "", nil); got != b {
		t.Fatalf("picked %s, want b (fewest per weight)", got.Addr)
	}
	if got := u.pick(nil, "", []*Target{b}); got != a {
		t.Fatalf("picked %s, want a after excluding b", got.Addr)
	}
}

func TestConsistentHashing(t *testing.T) {
	for _, balance := range []string{"ip_hash", "hash"} {
		t.Run(balance, func(t *testing.T) {
			u := testUpstream(t, balance, TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"}, TargetConfig{Address: "c:1"}, TargetConfig{Address: "d:1"})
			pick := func(key string) *Target {
				r, _ := http.NewRequest("GET", "/", nil)
				r.Header.Set("X-User", key)
				return u.pick(r, key, nil)
			}
			const n = 2000
			before := make([]*Target, n)
			count := map[string]int{}
			for i := range n {
				before[i] = pick(fmt.Sprint("10.0.", i/256, ".", i%256))
				count[before[i].Addr]++
			}
			for _, tg := range u.Targets() { // roughly even: each gets 25 % ± 7 %
				if c := count[tg.Addr]; c < n*18/100 || c > n*32/100 {
					t.Errorf("target %s got %d of %d keys", tg.Addr, c, n)
				}
			}
			for i := range n { // stable
				if pick(fmt.Sprint("10.0.", i/256, ".", i%256)) != before[i] {
					t.Fatalf("key %d moved without a change", i)
				}
			}
			dead := u.Targets()[1]
			dead.activeDn.Store(true)
			moved := 0
			for i := range n {
				now := pick(fmt.Sprint("10.0.", i/256, ".", i%256))
				if now == dead {
					t.Fatal("picked a down target")
				}
				if now != before[i] {
					moved++
					if before[i] != dead {
						t.Fatalf("key %d moved from healthy %s to %s", i, before[i].Addr, now.Addr)
					}
				}
			}
			if moved != count[dead.Addr] {
				t.Errorf("moved %d keys, want exactly the dead target's %d", moved, count[dead.Addr])
			}
		})
	}
}

func TestHashCookieAndFallback(t *testing.T) {
	u := testUpstream(t, "hash", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"}, TargetConfig{Address: "c:1"})
	r, _ := http.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: "sid", Value: "session-42"})
	first := u.pick(r, "1.2.3.4", nil)
	for range 20 {
		if u.pick(r, "5.6.7.8", nil) != first {
			t.Fatal("cookie hash not sticky")
		}
	}
	// Without a key: round robin over all three.
	plain, _ := http.NewRequest("GET", "/", nil)
	seen := map[*Target]bool{}
	for range 3 {
		seen[u.pick(plain, "1.2.3.4", nil)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("fallback round robin used %d targets, want 3", len(seen))
	}
}

func TestBackupOnlyWhenPrimariesDown(t *testing.T) {
	u := testUpstream(t, "round_robin", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"}, TargetConfig{Address: "z:1", Backup: true})
	for range 10 {
		if got := u.pick(nil, "", nil); got.Backup {
			t.Fatal("backup used while primaries are up")
		}
	}
	u.Targets()[0].activeDn.Store(true)
	u.Targets()[1].downUntil.Store(1 << 62)
	if got := u.pick(nil, "", nil); got == nil || got.Addr != "z:1" {
		t.Fatalf("picked %v, want the backup", got)
	}
	// Nothing available: the passively down target is tried rather
	// than none; one an active check took out is not.
	u.Targets()[2].activeDn.Store(true)
	if got := u.pick(nil, "", nil); got == nil || got.Addr != "b:1" {
		t.Fatalf("picked %v with every target down, want b:1 (passively down)", got)
	}
	u.Targets()[1].activeDn.Store(true)
	if got := u.pick(nil, "", nil); got != nil {
		t.Fatalf("picked %s with every target down by active checks", got.Addr)
	}
}

// TestBalancingDistribution sends real requests through the proxy to three
// loopback backends weighted 1:2:3.
func TestBalancingDistribution(t *testing.T) {
	a, b, c := nameBackend(t, "a"), nameBackend(t, "b"), nameBackend(t, "c")
	cfg := Config{
		Upstreams: []UpstreamConfig{{Name: "app", Targets: []TargetConfig{
			{Address: addrOf(a), Weight: 1}, {Address: addrOf(b), Weight: 2}, {Address: addrOf(c), Weight: 3}}}},
		Sites: oneSite(RouteConfig{Upstream: "app"}),
	}
	f := newFront(t, cfg, frontOpts{})
	cl := testClient(t)
	count := map[string]int{}
	for range 60 {
		_, body, _ := get(t, cl, f.url+"/")
		count[body]++
	}
	if count["a"] != 10 || count["b"] != 20 || count["c"] != 30 {
		t.Fatalf("distribution %v, want a=10 b=20 c=30", count)
	}
}

// TestLeastConnRotationWraps: least_conn's tie-breaking rotation counts
// picks in a uint64 that, converted to int before the modulo, went
// negative (after 2^31 picks where int has 32 bits, GOARCH=arm or 386) and
// indexed the targets with a negative number: a panic on every request.
func TestLeastConnRotationWraps(t *testing.T) {
	u := testUpstream(t, "least_conn", TargetConfig{Address: "a:1"}, TargetConfig{Address: "b:1"}, TargetConfig{Address: "c:1"})
	for _, seq := range []uint64{1<<31 - 1, 1<<63 - 1, 1<<64 - 2} {
		u.seq.Store(seq)
		for range 3 {
			if got := u.pick(nil, "", nil); got == nil {
				t.Fatalf("after %d picks: no target", seq)
			}
		}
	}
}
