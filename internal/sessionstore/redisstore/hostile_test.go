package redisstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

type memLocal struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (l *memLocal) Get(id string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[id]
	return v, ok
}
func (l *memLocal) Put(id string, st []byte, _ time.Duration) {
	l.mu.Lock()
	l.m[id] = st
	l.mu.Unlock()
}
func (l *memLocal) Delete(id string) { l.mu.Lock(); delete(l.m, id); l.mu.Unlock() }

func staticKeys(t *testing.T) ticket.Source {
	k, err := ticket.NewKey(bytes.Repeat([]byte{7, 8}, ticket.KeySize/2), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ticket.Static{k}
}

// TestStoredValueReadCapped: whoever can write gmproxy's keys in Redis (a
// tenant of a shared Redis without ACLs, a leaked password) plants a
// value of 8 MiB under the key of a session ID; a client offering that ID
// makes a lookup read at most MaxValue bytes of it (GETRANGE), not
// allocate all of it, and the cut value does not resume.
func TestStoredValueReadCapped(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Under the reply guard's bound (maxReply), so that it is the read
	// of at most MaxValue bytes (GETRANGE) that keeps the lookup small.
	const size = maxReply / 2
	id := "\x01session-id-offered-by-client\x02"
	s := New(Options{Addresses: []string{srv.Addr}, Timeout: 30 * time.Second}) // planting 8 MiB takes long on a busy machine; lookups are bounded by the Shared timeout
	defer s.Close()
	if err := s.Set(ctx, "gmproxy:tlcp:"+hex.EncodeToString([]byte(id)), bytes.Repeat([]byte{'x'}, size), time.Minute); err != nil {
		t.Fatal(err)
	}
	shared := sessionstore.NewShared(s, time.Second, nil)
	defer shared.Close()
	tr := sessionstore.NewTiered(&memLocal{m: map[string][]byte{}}, shared, staticKeys(t), "gmproxy:tlcp:", time.Minute)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, ok := tr.Get(id)
	runtime.ReadMemStats(&after)
	if ok {
		t.Fatal("junk resumed")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("one session-ID lookup allocated %d MiB for a value planted in the store", got>>20)
	}
}

// fakeRedis answers every GET and GETRANGE with header (a bulk header
// announcing n bytes: what a man in the middle on the plain-TCP Redis
// link, or a rogue server behind a poisoned address or Sentinel, can
// send) and everything else with +OK.
func fakeRedis(t *testing.T, header string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	reply := []byte(header) // not converted at each write: tests count a lookup's allocations
	go func() {
		for range 16 {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for range 16 {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if !strings.HasPrefix(line, "*") {
						continue
					}
					n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
					var args []string
					for range min(n, 16) {
						r.ReadString('\n') // $len
						a, _ := r.ReadString('\n')
						args = append(args, strings.TrimSpace(a))
					}
					if len(args) > 0 && (strings.EqualFold(args[0], "GET") || strings.EqualFold(args[0], "GETRANGE")) {
						c.Write(reply)
					} else if len(args) > 0 && strings.EqualFold(args[0], "HELLO") {
						io.WriteString(c, "*2\r\n$6\r\nserver\r\n$5\r\nredis\r\n")
					} else {
						io.WriteString(c, "+OK\r\n")
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestRogueReplyIsAnError: a reply announcing a length go-redis cannot
// allocate ("$1125899906842624") made it panic on the handshake's
// goroutine, ending the process; a lookup now fails with errMalformed
// (the handshake goes on without the session).
func TestRogueReplyIsAnError(t *testing.T) {
	for _, n := range []string{"1125899906842624", "9223372036854775807"} {
		addr := fakeRedis(t, "$"+n+"\r\n")
		s := New(Options{Addresses: []string{addr}, Timeout: time.Second})
		shared := sessionstore.NewShared(s, time.Second, nil)
		tr := sessionstore.NewTiered(&memLocal{m: map[string][]byte{}}, shared, staticKeys(t), "gmproxy:tlcp:", time.Minute)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("bulk length %s: a session-ID lookup panicked: %v", n, v)
				}
			}()
			if _, ok := tr.Get("client-chosen-session-id"); ok {
				t.Errorf("bulk length %s: a session resumed", n)
			}
			if _, _, err := s.Get(context.Background(), "x"); !errors.Is(err, errMalformed) {
				t.Errorf("bulk length %s: Get = %v, want errMalformed", n, err)
			}
			if _, err := s.GetMany(context.Background(), []string{"x", "y"}); !errors.Is(err, errMalformed) {
				t.Errorf("bulk length %s: GetMany = %v, want errMalformed", n, err)
			}
		}()
		shared.Close() // the store too
	}
}

// TestRecoveredPanicIsErrMalformed: a panic of go-redis while it reads a
// reply (one the guard let through) is the lookup's errMalformed, not the
// end of the process.
func TestRecoveredPanicIsErrMalformed(t *testing.T) {
	read := func() (err error) {
		defer recovered(&err)
		panic("runtime error: makeslice: len out of range")
	}
	if err := read(); !errors.Is(err, errMalformed) {
		t.Fatalf("a panic while reading: %v, want errMalformed", err)
	}
}

// TestRogueLengthsBounded: a reply announcing a length or count that
// go-redis can allocate, but that no reply gmproxy asks for comes near
// (64 TiB of bulk string: the runtime's "out of memory" is a fatal
// error that no recover catches, and it ended the process; 1 GiB, a
// status line of 8 MiB, an array of 2^28 elements or arrays nested a
// million deep: a lookup, or the subscription's read of a message,
// allocated all of it), is refused as it is read: the call fails with
// errMalformed and allocates next to nothing.
func TestRogueLengthsBounded(t *testing.T) {
	for _, c := range []struct {
		header string
		reply  bool // read as any reply (as the subscription reads messages), not a string
	}{
		{"$70368744177664\r\n", false},
		{"$1073741824\r\n", false},
		{"+" + strings.Repeat("x", 8<<20) + "\r\n", false},
		{"*268435456\r\n", true},
		{strings.Repeat("*1\r\n", 1<<20), true},
	} {
		name := c.header[:min(len(c.header), 24)]
		addr := fakeRedis(t, c.header)
		s := New(Options{Addresses: []string{addr}, Timeout: 2 * time.Second})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var err error
		if c.reply {
			err = s.c.Do(context.Background(), "GET", "x").Err()
		} else {
			_, _, err = s.Get(context.Background(), "x")
		}
		runtime.ReadMemStats(&after)
		if !errors.Is(err, errMalformed) {
			t.Errorf("%q: Get = %v, want errMalformed", name, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
			t.Errorf("%q: one lookup allocated %d MiB", name, got>>20)
		}
		s.Close()
	}
}
