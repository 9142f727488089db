package frontdoor

import (
	"context"
	"crypto"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/testwait"
	"github.com/gmproxy/gmproxy/tlcp"
)

func TestDeadlineContext(t *testing.T) {
	t.Run("before and after the deadline", func(t *testing.T) {
		d := time.Now().Add(50 * time.Millisecond)
		c := &deadlineContext{deadline: d}
		defer c.stop()
		if got, ok := c.Deadline(); !ok || !got.Equal(d) {
			t.Fatalf("Deadline() = %v, %v", got, ok)
		}
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline = %v", err)
		}
		if c.done != nil {
			t.Fatal("Err made the Done channel")
		}
		done := c.Done()
		select {
		case <-done:
			t.Fatal("Done closed before the deadline")
		default:
		}
		select {
		case <-done:
		case <-time.After(testwait.Bound(10 * time.Second)):
			t.Fatal("Done not closed at the deadline")
		}
		if err := c.Err(); err != context.DeadlineExceeded {
			t.Fatalf("Err after Done = %v", err)
		}
		if c.Value("any") != nil {
			t.Fatal("Value: the context carries no values")
		}
	})
	t.Run("Err closes a waiting Done", func(t *testing.T) {
		c := &deadlineContext{deadline: time.Now().Add(time.Hour)}
		done := c.Done()
		c.stop() // the timer will not fire
		c.deadline = time.Now().Add(-time.Millisecond)
		if err := c.Err(); err != context.DeadlineExceeded {
			t.Fatalf("Err = %v", err)
		}
		select {
		case <-done:
		default:
			t.Fatal("Err reported the deadline but Done is open")
		}
	})
	t.Run("Done after the deadline", func(t *testing.T) {
		c := &deadlineContext{deadline: time.Now().Add(-time.Second)}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done made after the deadline is open")
		}
	})
	t.Run("the stacks do not watch it", func(t *testing.T) {
		var ctx context.Context = &deadlineContext{deadline: time.Now().Add(time.Hour)}
		if _, ok := ctx.(record.ConnDeadline); !ok {
			t.Fatal("deadlineContext is not a record.ConnDeadline")
		}
	})
}

// waitingSigner is a TLCP sign key whose operation waits for its context
// to end, as a key operation queued behind a busy engine or a silent key
// server does.
type waitingSigner struct {
	crypto.Signer
	ended chan error // the context's error when the wait ended
	had   chan bool  // whether the context had a deadline
}

func (s *waitingSigner) SignContext(ctx context.Context, _ io.Reader, _ []byte, _ crypto.SignerOpts) ([]byte, error) {
	_, ok := ctx.Deadline()
	s.had <- ok
	<-ctx.Done()
	s.ended <- ctx.Err()
	return nil, ctx.Err()
}

// TestServeHandshakeDeadlineEndsKeyWait: a handshake Serve runs has no
// timer of its own until something waits on its context; a key operation
// that waits still ends at the handshake deadline, and the handshake is
// reported as timed out.
func TestServeHandshakeDeadlineEndsKeyWait(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	signer := &waitingSigner{Signer: p.ServerSign.Key, ended: make(chan error, 1), had: make(chan bool, 1)}
	srv := &tlcp.Config{
		Certificates: []tlcp.Certificate{{
			SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: signer,
			EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
		}},
		SessionTicketsDisabled: true,
	}
	site := &Site{Name: "s", TLCP: TLCPHandshaker(srv)}
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLCP: true, HandshakeTimeout: 300 * time.Millisecond, Sites: NewSites([]*Site{site}, nil)}, obs)
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second))) // the server's 300 ms, with room for a slow machine
	start := time.Now()
	cc := tlcp.Client(raw, &tlcp.Config{RootCAs: roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3, tlcp.ECC_SM4_GCM_SM3}})
	if err := cc.Handshake(); err == nil {
		t.Fatal("handshake succeeded without a signature")
	}
	if !<-signer.had {
		t.Error("the key operation's context has no deadline")
	}
	select {
	case err := <-signer.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("key wait ended with %v, want the deadline", err)
		}
	case <-time.After(testwait.Bound(5 * time.Second)):
		t.Fatal("the key operation's wait did not end at the handshake deadline")
	}
	if ev := obs.next(t); ev.Reason != ReasonTimeout {
		t.Errorf("reason %q, want timeout", ev.Reason)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("handshake ended after %v", el)
	}
}

// TestHandshakePanicEndsOneConnection: a panic in a site's handshake (a
// defect of a protocol stack on one connection's input) fails that
// handshake and closes its connection; the server goes on serving the
// next connection.
func TestHandshakePanicEndsOneConnection(t *testing.T) {
	p, err := devpki.Generate(devpki.Options{SkipECDSA: true})
	if err != nil {
		t.Fatal(err)
	}
	good := TLCPHandshaker(&tlcp.Config{
		Certificates: []tlcp.Certificate{{
			SignCertificate: [][]byte{p.ServerSign.Cert.Raw}, SignKey: p.ServerSign.Key,
			EncCertificate: p.ServerEnc.Cert.Raw, EncKey: p.ServerEnc.Key,
		}},
		SessionTicketsDisabled: true,
	})
	var calls int
	var mu sync.Mutex
	site := &Site{Name: "s", TLCP: HandshakerFunc(func(ctx context.Context, conn net.Conn, hello *ClientHello) (*Established, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			panic("a defect met on hostile input")
		}
		return good.Handshake(ctx, conn, hello)
	})}
	obs := newRecObserver()
	_, addr := startServer(t, &ListenerConfig{Name: "l", TLCP: true, HandshakeTimeout: testwait.Bound(5 * time.Second), Sites: NewSites([]*Site{site}, nil)}, obs)
	roots := smx509.NewCertPool()
	roots.AddCert(p.CA.Cert)
	dial := func() error {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(testwait.Bound(5 * time.Second)))
		return tlcp.Client(raw, &tlcp.Config{RootCAs: roots, ServerName: "localhost"}).Handshake()
	}
	if err := dial(); err == nil {
		t.Fatal("the handshake that panicked succeeded")
	}
	if ev := obs.next(t); ev.Err == nil || !strings.Contains(ev.Err.Error(), "panic") {
		t.Errorf("the panicked handshake reported as %v", ev.Err)
	}
	if err := dial(); err != nil {
		t.Fatalf("the next connection after a handshake panic: %v", err)
	}
}
