package localstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
)

func serve(t *testing.T, store sessionstore.Store) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go Serve(ln, store)
	return path
}

func TestClientServer(t *testing.T) {
	c := NewClient(serve(t, sessionstore.NewMemory()))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, found, err := c.Get(ctx, "a"); err != nil || found {
		t.Fatalf("Get of a missing key: found=%v err=%v", found, err)
	}
	if err := c.Set(ctx, "a", []byte("one"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.Get(ctx, "a"); err != nil || !found || string(v) != "one" {
		t.Fatalf("Get = %q %v %v", v, found, err)
	}
	if err := c.Set(ctx, "empty", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.Get(ctx, "empty"); err != nil || !found || len(v) != 0 {
		t.Fatalf("Get of an empty value = %q %v %v", v, found, err)
	}
	if v, err := c.AddOrGet(ctx, "a", []byte("two"), time.Minute); err != nil || string(v) != "one" {
		t.Fatalf("AddOrGet of a present key = %q %v, want the first value", v, err)
	}
	if v, err := c.AddOrGet(ctx, "b", []byte("two"), time.Minute); err != nil || string(v) != "two" {
		t.Fatalf("AddOrGet of a new key = %q %v", v, err)
	}
	vals, err := c.GetMany(ctx, []string{"a", "missing", "b"})
	if err != nil || len(vals) != 3 || string(vals[0]) != "one" || vals[1] != nil || string(vals[2]) != "two" {
		t.Fatalf("GetMany = %q %v", vals, err)
	}
	if err := c.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := c.Get(ctx, "a"); found {
		t.Fatal("deleted key still found")
	}
	if err := c.Set(ctx, "big", make([]byte, MaxMessage), time.Minute); err == nil {
		t.Fatal("a value above MaxMessage was sent")
	}
	// The connection is still usable after the refused request.
	if _, found, err := c.Get(ctx, "b"); err != nil || !found {
		t.Fatalf("Get after a refused request: %v %v", found, err)
	}
}

// TestMalformedRequest: a request that does not parse closes the
// connection without an answer; a well-formed but invalid one is refused.
func TestMalformedRequest(t *testing.T) {
	path := serve(t, sessionstore.NewMemory())
	for _, tc := range []struct {
		name   string
		req    []byte
		answer bool
	}{
		{"length above MaxMessage", []byte{0xff, 0xff, 0xff, 0xff}, false},
		{"field past the end", []byte{0, 0, 0, 15, opGet, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9}, false},
		{"trailing bytes", []byte{0, 0, 0, 12, opGet, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}, false},
		{"unknown op", []byte{0, 0, 0, 11, 99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true},
		{"get without a key", []byte{0, 0, 0, 11, opGet, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write(tc.req)
			m, err := readMessage(c, false)
			switch {
			case tc.answer && (err != nil || m.code != statusError):
				t.Fatalf("want a refusal, got %+v %v", m, err)
			case !tc.answer && err != io.EOF:
				t.Fatalf("want the connection closed, got %+v %v", m, err)
			}
		})
	}
}

func TestBoundedMemory(t *testing.T) {
	m := sessionstore.NewBoundedMemory(3)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		m.Set(ctx, k, []byte(k), time.Minute)
	}
	if n := m.Len(); n != 3 {
		t.Fatalf("bounded store holds %d entries, want 3", n)
	}
	if v, found, _ := m.Get(ctx, "e"); !found || string(v) != "e" {
		t.Fatal("the newest entry was dropped")
	}
}

func FuzzReadMessage(f *testing.F) {
	for _, m := range []message{
		{code: opGet, fields: [][]byte{[]byte("k")}},
		{code: opSet, ttl: time.Minute, fields: [][]byte{[]byte("k"), []byte("v")}},
		{code: opGetMany, fields: [][]byte{[]byte("a"), nil, []byte("b")}},
	} {
		b, _ := appendMessage(nil, m, true)
		f.Add(b, true)
		b, _ = appendMessage(nil, m, false)
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, withTTL bool) {
		m, err := readMessage(bytes.NewReader(b), withTTL)
		if err != nil {
			return
		}
		// A parsed message marshals back to what was read.
		out, err := appendMessage(nil, m, withTTL)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if !bytes.Equal(out, b[:len(out)]) {
			t.Fatalf("re-marshalled %x, read %x", out, b[:len(out)])
		}
	})
}

// TestGetManyOfManyKeys: GetMany takes any number of keys, as the other
// stores do, though one message holds at most maxFields: FleetKeys asks
// for the key of every past epoch that may still open a ticket (10081 of
// them with ticket_rotation 1m and lifetime 168h), and one refused
// request would fail every refresh, leaving each worker its own keys.
func TestGetManyOfManyKeys(t *testing.T) {
	c := NewClient(serve(t, sessionstore.NewMemory()))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := make([]string, 3*maxFields+5)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		if i%7 == 0 {
			if err := c.Set(ctx, keys[i], []byte(keys[i]), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	vals, err := c.GetMany(ctx, keys)
	if err != nil || len(vals) != len(keys) {
		t.Fatalf("GetMany of %d keys: %d values, %v", len(keys), len(vals), err)
	}
	for i, v := range vals {
		if (i%7 == 0) != (v != nil) || v != nil && string(v) != keys[i] {
			t.Fatalf("value %d of GetMany: %q", i, v)
		}
	}
	if vals, err := c.GetMany(ctx, nil); err != nil || len(vals) != 0 {
		t.Fatalf("GetMany of no keys: %q %v", vals, err)
	}
}
