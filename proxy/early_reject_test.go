package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/testwait"
)

// TestEarlyRejectionPassedOn: a target that answers an upload before
// taking its body (413, as a server with a body limit does) and closes
// the connection, which resets it since the body is unread: the proxy's
// next write of the body fails, and the client still gets the target's
// answer, not a 502, and the target is not charged a failure (a client
// sending such uploads would mark every target down). Bodies small
// enough for the proxy's own HTTP/1.1 client and larger ones, which
// net/http's Transport sends, both.
func TestEarlyRejectionPassedOn(t *testing.T) {
	for _, size := range []int{32 << 10, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			closed := make(chan struct{}, 1)
			backend := connBackend(t, func(c net.Conn) {
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large")
				c.(*net.TCPConn).SetLinger(0) // reset, as a close with unread data does
				c.Close()
				closed <- struct{}{}
			})
			cfg := proxyTo(backend)
			cfg.Upstreams[0].HealthCheck.Passive = PassiveHealthConfig{MaxFails: 1, Cooldown: time.Hour}
			cfg.Limits.RequestBuffer = -1 // streamed: the target answers mid-body
			f := newFront(t, cfg, frontOpts{})
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(testwait.Bound(10 * time.Second)))
			first := 8 << 10
			fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, strings.Repeat("a", first))
			select {
			case <-closed:
			case <-time.After(testwait.Bound(10 * time.Second)):
				t.Fatal("the request never reached the target")
			}
			time.Sleep(20 * time.Millisecond) // the reset reaches the proxy
			go c.Write([]byte(strings.Repeat("b", size-first)))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != 413 || string(body) != "too large" {
				t.Errorf("got %d %q; want the target's 413", res.StatusCode, body)
			}
			if !f.p.Upstream("u").Targets()[0].Healthy() {
				t.Error("the target's early answer was charged as its failure")
			}
		})
	}
}

// resetConn is a connection the peer has reset.
type resetConn struct{ net.Conn }

func (resetConn) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
}

// TestResetWriteErrorHeldBack: a write of net/http's Transport that the
// target reset returns its error only after earlyAnswerWait, so that the
// Transport's reader, which may hold the target's early answer, returns
// it first (the Transport fails the exchange on whichever comes first).
func TestResetWriteErrorHeldBack(t *testing.T) {
	c := &scanConn{Conn: resetConn{}}
	start := time.Now()
	if _, err := c.Write([]byte("body")); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write error %v; want the reset", err)
	}
	if d := time.Since(start); d < earlyAnswerWait {
		t.Fatalf("the reset's error came back after %v, before earlyAnswerWait (%v)", d, earlyAnswerWait)
	}
}
