package h1server

import (
	"bufio"
	"io"
	"net/http"
	"reflect"
	"sync"
	"testing"
)

// TestReuseHeader: with ReuseHeader a request's Header map is the one the
// connection's previous request had, emptied: no field of an earlier
// request (of the same connection or of a connection served before on
// the same storage) reaches a later one. Without it every request gets a
// map of its own, which the handler may keep.
func TestReuseHeader(t *testing.T) {
	for _, reuse := range []bool{true, false} {
		var mu sync.Mutex
		var seen []http.Header
		var maps []http.Header // kept, so that no map's memory is reused while compared
		s := &Server{ReuseHeader: reuse}
		_, addr := testServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			maps = append(maps, r.Header)
			mu.Unlock()
			io.WriteString(w, "ok")
		}))
		// Two requests on one connection, then one on a new connection
		// (served from the pooled connection state when there is one).
		c := dial(t, addr)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer first\r\nX-Secret: 1\r\nX-Dup: a\r\nX-Dup: b\r\n\r\n")
		readResponses(t, br, "GET")
		io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: a\r\nX-Second: 2\r\nPragma: no-cache\r\n\r\n")
		readResponses(t, br, "GET")
		c.Close()
		c2 := dial(t, addr)
		io.WriteString(c2, "GET /3 HTTP/1.1\r\nHost: a\r\nX-Third: 3\r\nConnection: close\r\n\r\n")
		readResponses(t, bufio.NewReader(c2), "GET")
		c2.Close()

		mu.Lock()
		if len(seen) != 3 {
			t.Fatalf("reuse %v: %d requests served, want 3", reuse, len(seen))
		}
		want := []http.Header{
			{"Authorization": {"Bearer first"}, "X-Secret": {"1"}, "X-Dup": {"a", "b"}},
			{"X-Second": {"2"}, "Pragma": {"no-cache"}, "Cache-Control": {"no-cache"}},
			{"X-Third": {"3"}, "Connection": {"close"}},
		}
		for i, h := range seen {
			if !reflect.DeepEqual(h, want[i]) {
				t.Errorf("reuse %v: request %d header %v, want %v", reuse, i+1, h, want[i])
			}
		}
		same := reflect.ValueOf(maps[0]).Pointer() == reflect.ValueOf(maps[1]).Pointer()
		if reuse && !same {
			t.Error("with ReuseHeader the second request of a connection got a new map")
		} else if !reuse && same {
			t.Error("without ReuseHeader two requests got one map")
		}
		mu.Unlock()
	}
}
