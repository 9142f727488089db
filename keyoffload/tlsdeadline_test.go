package keyoffload

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// gatedSigner signs with key; while gate is set it first says so on
// entered and waits until gate is closed. It counts its signatures.
type gatedSigner struct {
	key     *ecdsa.PrivateKey
	entered chan struct{}
	gate    chan struct{}
	n       atomic.Int32
}

func (g *gatedSigner) Public() crypto.PublicKey { return g.key.Public() }
func (g *gatedSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	g.n.Add(1)
	if g.gate != nil {
		close(g.entered)
		<-g.gate
	}
	return g.key.Sign(r, d, o)
}

// TestTLSHandshakeDeadlineDropsQueuedKeyOp: a crypto/tls handshake whose
// certificate key is wrapped by the engine and bound to the handshake's
// context per handshake (GetCertificate and smkey.WithContext, as
// internal/daemon does for TLS sites) does not compute its queued
// signature once its context is done: crypto/tls calls Sign, which alone
// has no context, and the operation used to run anyway when a slot freed.
func TestTLSHandshakeDeadlineDropsQueuedKeyOp(t *testing.T) {
	rec := &keyOpRec{}
	o := New(Config{Workers: 1, Queue: 8}, rec)
	defer o.Close()

	// Occupy the engine's only slot.
	bk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	blocker := &gatedSigner{key: bk, entered: make(chan struct{}), gate: make(chan struct{})}
	go o.Wrap(blocker, "tls").Sign(rand.Reader, make([]byte, 32), crypto.SHA256)
	<-blocker.entered

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"x"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	inner := &gatedSigner{key: key}
	wrapped := o.Wrap(inner, "tls")
	cfg := &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: smkey.WithContext(hi.Context(), wrapped)}, nil
	}}

	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	go tls.Client(cc, &tls.Config{InsecureSkipVerify: true, ServerName: "x"}).Handshake()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tls.Server(sc, cfg).HandshakeContext(ctx) }()
	// The handshake's signature waits in the queue.
	for o.QueueLen() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the handshake's deadline passes
	close(blocker.gate)
	if err := <-done; err == nil {
		t.Fatal("cancelled handshake succeeded")
	}
	if n := inner.n.Load(); n != 0 {
		t.Errorf("the cancelled handshake's queued signature was computed (%d signatures); want it dropped", n)
	}
	// The dropped operation is counted (as failed, before its Sign
	// returned), not lost from the metrics.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, err := range rec.err {
		if errors.Is(err, context.Canceled) {
			return
		}
	}
	t.Errorf("the dropped operation was not reported to the observer: %v", rec.err)
}
