package h1server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/h1head"
	"github.com/gmproxy/gmproxy/internal/testwait"
)

// idleHeld is what a connection keeps between requests of the header
// storage its requests and responses grew.
type idleHeld struct {
	resHeader, reqHeader http.Header // the maps the next request gets (emptied)
	resKeys, reqFields   int         // how many fields' storage goes with them
	declared, hostBytes  int
	req                  bool // the last request is still referred to
}

// held reads it; call it only while the connection is idle (after its
// state was seen stateIdle: the atomic orders the reads after the
// serving goroutine's writes).
func (c *conn) held() idleHeld {
	rh, rf := c.hdr.Storage()
	return idleHeld{
		resHeader: c.w.header, reqHeader: rh,
		resKeys: cap(c.w.keys), reqFields: rf,
		declared: cap(c.w.declared), hostBytes: cap(c.scan.host),
		req: c.w.req != nil,
	}
}

// waitIdle waits for c to wait for its next request.
func waitIdle(t *testing.T, c *conn) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Bound(5 * time.Second)); c.state.Load() != stateIdle; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection never went idle")
		}
	}
}

// TestIdleConnHoldsLittle: a kept-alive connection waiting for its next
// request after one with a huge response header holds neither the map
// and key lists it grew (emptying a map keeps its buckets) nor the last
// request (whose head can be max_header_bytes) or its fields, nor a long
// Host field's copy, but storage for a small head only, as after a small
// request.
func TestIdleConnHoldsLittle(t *testing.T) {
	const resFields, reqFields = 2000, h1head.MaxFields - 1 // the request's head is one h1head parses: its map is the reused one
	conns := make(chan *conn, 1)
	var resMap, reqMap uintptr
	s := &Server{ReuseHeader: true}
	_, addr := testServer(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			for i := range resFields {
				w.Header().Set(fmt.Sprintf("X-F%d", i), "v")
			}
			w.Header().Set("Trailer", strings.Repeat("X-T, ", resFields))
			resMap, reqMap = reflect.ValueOf(w.Header()).Pointer(), reflect.ValueOf(r.Header).Pointer()
		}
		io.WriteString(w, "ok")
		conns <- w.(*response).c
	}))
	c := dial(t, addr)
	br := bufio.NewReader(c)
	var head strings.Builder
	head.WriteString("GET /big HTTP/1.1\r\nHost: a\r\n")
	for i := range reqFields {
		fmt.Fprintf(&head, "R%d:v\r\n", i)
	}
	io.WriteString(c, head.String()+"\r\n")
	readResponses(t, br, "GET")
	sc := <-conns
	waitIdle(t, sc)
	const bound = 64 // fields; a small request's head fits
	h := sc.held()
	if reflect.ValueOf(h.reqHeader).Pointer() != reqMap {
		t.Fatal("the big request's head was not read into the connection's map: the test checks nothing of it")
	}
	if h.resKeys > bound || h.reqFields > bound || h.declared > bound || h.req ||
		reflect.ValueOf(h.resHeader).Pointer() == resMap || len(h.reqHeader) > 0 {
		t.Errorf("idle after a big request and response, the connection holds: the response's map %v (%d keys), the request's fields %d (storage for %d), %d trailer names, the request %v",
			reflect.ValueOf(h.resHeader).Pointer() == resMap, h.resKeys, len(h.reqHeader), h.reqFields, h.declared, h.req)
	}
	// A long Host field (read by http.ReadRequest: the head is past the
	// read buffer).
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+strings.Repeat("h", 8<<10)+"\r\n\r\n")
	readResponses(t, br, "GET")
	<-conns
	waitIdle(t, sc)
	if h := sc.held(); h.hostBytes > 1<<10 {
		t.Errorf("idle after a request with a long Host, the connection holds %d bytes of it", h.hostBytes)
	}
	// A small request's storage stays: it is reused, not made again.
	var kept []idleHeld
	for range 2 {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\r\n")
		readResponses(t, br, "GET")
		<-conns
		waitIdle(t, sc)
		kept = append(kept, sc.held())
	}
	same := func(a, b http.Header) bool {
		return a != nil && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
	}
	if !same(kept[0].resHeader, kept[1].resHeader) || !same(kept[0].reqHeader, kept[1].reqHeader) {
		t.Errorf("a small request's header storage was not kept for the next (response map kept %v, request map kept %v)",
			same(kept[0].resHeader, kept[1].resHeader), same(kept[0].reqHeader, kept[1].reqHeader))
	}
	// The connection ends on a request, which orders the reads above
	// before its end's writes (the race detector takes a write to a
	// socket and the read of it for a synchronization, not a close).
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	readResponses(t, br, "GET")
	<-conns
}
