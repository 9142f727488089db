package redisstore

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
)

func TestStoreOnRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer s.Close()
	ctx := context.Background()
	if _, found, err := s.Get(ctx, "k"); found || err != nil {
		t.Fatalf("Get on an empty store: found=%v err=%v", found, err)
	}
	if err := s.Set(ctx, "k", []byte("v\x00bin"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, found, err := s.Get(ctx, "k"); !found || err != nil || string(v) != "v\x00bin" {
		t.Fatalf("Get = %q %v %v", v, found, err)
	}
	if ttl, err := srv.Command("PTTL k"); err != nil || !strings.HasPrefix(ttl, ":") || ttl == ":-1" {
		t.Fatalf("the entry has no expiry: PTTL = %q %v", ttl, err)
	}
	// AddOrGet: concurrent writers all read back the single winner.
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			v, err := s.AddOrGet(ctx, "epoch", []byte{byte('a' + i)}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for i := range got {
		if !bytes.Equal(got[i], got[0]) || len(got[0]) != 1 {
			t.Fatalf("writers disagree on the value: %q", got)
		}
	}
	vals, err := s.GetMany(ctx, []string{"k", "missing", "epoch"})
	if err != nil || string(vals[0]) != "v\x00bin" || vals[1] != nil || !bytes.Equal(vals[2], got[0]) {
		t.Fatalf("GetMany = %q, %v", vals, err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Get(ctx, "k"); found {
		t.Fatal("a deleted key was found")
	}
	// A stopped server: an error within the deadline, not a hang.
	srv.Stop()
	ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, _, err := s.Get(ctx, "k"); err == nil {
		t.Fatal("Get on a stopped server succeeded")
	}
}

func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	s := New(Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer s.Close()
	ctx := context.Background()
	s.Set(ctx, "k", make([]byte, 300), time.Minute)
	for b.Loop() {
		if _, found, err := s.Get(ctx, "k"); !found || err != nil {
			b.Fatal(err)
		}
	}
	info, _ := srv.Command("INFO stats")
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "total_connections_received") {
			b.Log(strings.TrimSpace(l))
		}
	}
}

// TestStoreWithACLUser: the ACL user of deploy/examples/fleet/redis.conf
// (its key prefix and channels, GET, GETRANGE, SET, DEL, PUBLISH,
// SUBSCRIBE) is enough for everything gmproxy does, and nothing outside the
// prefix is reachable; so are the ACLs of earlier releases, without the
// channels (Publish then does nothing) or without GETRANGE (values are
// then read with GET).
func TestStoreWithACLUser(t *testing.T) {
	for _, acl := range []string{
		"&gmproxy:* +get +getrange +set +del +publish +subscribe +ping +auth +hello +select",
		"+get +getrange +set +del +ping +auth +hello +select",
		"+get +set +del +ping +auth +hello +select",
	} {
		t.Run(acl, func(t *testing.T) { testStoreWithACL(t, acl) })
	}
}

func testStoreWithACL(t *testing.T, acl string) {
	srv := redistest.Start(t)
	if r, err := srv.Command("ACL SETUSER gmproxy on >pw ~gmproxy:* " + acl); err != nil || r != "+OK" {
		t.Fatalf("ACL SETUSER: %q %v", r, err)
	}
	s := New(Options{Addresses: []string{srv.Addr}, Username: "gmproxy", Password: "pw", Timeout: time.Second})
	defer s.Close()
	ctx := context.Background()
	if err := s.Set(ctx, "gmproxy:tlcp:00", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := s.Get(ctx, "gmproxy:tlcp:00"); err != nil || !ok || string(b) != "x" {
		t.Fatalf("Get of a stored value: %q %v %v", b, ok, err)
	}
	if _, ok, err := s.Get(ctx, "gmproxy:tlcp:01"); err != nil || ok {
		t.Fatalf("Get of a missing key: %v %v", ok, err)
	}
	if _, err := s.AddOrGet(ctx, "gmproxy:ticket-key:1", []byte("k"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMany(ctx, []string{"gmproxy:ticket-key:0", "gmproxy:ticket-key:1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gmproxy:tlcp:00"); err != nil {
		t.Fatal(err)
	}
	// Sessions ended elsewhere: heard where the ACL grants the channel;
	// where it does not, publishing is no error (the store's other uses
	// go on, and no circuit breaker opens) and the subscription ends.
	heard := make(chan []byte, 1)
	stop := s.Subscribe("gmproxy:tlcp:ended", func(m []byte) { heard <- m }, func() {})
	defer stop()
	mayPublish := strings.Contains(acl, "+publish")
	var got []byte
	for i := 0; i < 100 && got == nil; i++ {
		if err := s.Publish(ctx, "gmproxy:tlcp:ended", []byte("m")); err != nil {
			t.Fatalf("Publish: %v", err)
		}
		select {
		case got = <-heard:
		case <-time.After(50 * time.Millisecond):
		}
		if !mayPublish && i == 3 {
			break
		}
	}
	if mayPublish != (string(got) == "m") {
		t.Fatalf("message heard: %q, with the channel granted: %v", got, mayPublish)
	}
	if !mayPublish && s.publishRefused.Load() == 0 {
		t.Fatal("the refused PUBLISH was not noted")
	}
	if err := s.Set(ctx, "other:key", []byte("x"), time.Minute); err == nil {
		t.Fatal("the ACL user wrote outside its key prefix")
	}
	bad := New(Options{Addresses: []string{srv.Addr}, Username: "gmproxy", Password: "wrong", Timeout: time.Second})
	defer bad.Close()
	if _, _, err := bad.Get(ctx, "gmproxy:x"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
}

// TestStoreWithSentinelAuth: Sentinels that require AUTH (a user of their
// own, Redis 6.2 and later) are reached with SentinelUsername and
// SentinelPassword; without them the master cannot be found and every
// call fails.
func TestStoreWithSentinelAuth(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, "gm", master, 0)
	for _, cmd := range []string{"ACL SETUSER watcher on >spw +@all", "ACL SETUSER default off"} {
		if r, err := sentinel.Command(cmd); err != nil || r != "+OK" {
			t.Fatalf("%s on the Sentinel: %q %v", cmd, r, err)
		}
	}
	ctx := context.Background()
	o := Options{Addresses: []string{sentinel.Addr}, MasterName: "gm", Timeout: time.Second}
	anon := New(o)
	defer anon.Close()
	if err := anon.Set(ctx, "gmproxy:tlcp:00", []byte("x"), time.Minute); err == nil {
		t.Fatal("test setup: the Sentinel answered without AUTH")
	}
	o.SentinelUsername, o.SentinelPassword = "watcher", "spw"
	s := New(o)
	defer s.Close()
	if err := s.Set(ctx, "gmproxy:tlcp:00", []byte("x"), time.Minute); err != nil {
		t.Fatalf("Set through Sentinels that require AUTH: %v", err)
	}
	if b, ok, err := s.Get(ctx, "gmproxy:tlcp:00"); err != nil || !ok || string(b) != "x" {
		t.Fatalf("Get through Sentinels that require AUTH: %q %v %v", b, ok, err)
	}
}
