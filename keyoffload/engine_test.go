package keyoffload

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/sm2sign"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/testpeer"
)

type keyOpRec struct {
	mu  sync.Mutex
	ops []string
	err []error
}

func (r *keyOpRec) KeyOp(op, family string, wait, exec time.Duration, err error) {
	r.mu.Lock()
	r.ops = append(r.ops, op+"/"+family)
	r.err = append(r.err, err)
	r.mu.Unlock()
}

func TestOffloadOperations(t *testing.T) {
	rec := &keyOpRec{}
	o := New(Config{Workers: 2, Queue: 8}, rec)
	defer o.Close()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := o.Wrap(key, family.TLCP)
	ctx := context.Background()

	msg := []byte("signed data")
	sig, err := smkey.Sign(ctx, k, rand.Reader, msg, sm2.DefaultSM2SignerOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !sm2.VerifyASN1WithSM2(&key.PublicKey, nil, msg, sig) {
		t.Fatal("signature from the offloaded key does not verify")
	}

	ct, err := sm2.EncryptASN1(rand.Reader, &key.PublicKey, []byte("pre-master"))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := k.(crypto.Decrypter)
	if !ok {
		t.Fatal("a wrapped SM2 key does not decrypt")
	}
	pt, err := smkey.Decrypt(ctx, d, rand.Reader, ct, nil)
	if err != nil || string(pt) != "pre-master" {
		t.Fatalf("decrypt: %q, %v", pt, err)
	}

	// Key agreement through the engine equals the local computation.
	peer, _ := sm2.GenerateKey(rand.Reader)
	peerStatic, _ := peer.ECDH()
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	peerEph, _ := ecdh.P256().GenerateKey(rand.Reader)
	ka := smkey.AsKeyAgreement(k)
	got, err := ka.SM2KeyAgree(ctx, eph, peerStatic.PublicKey(), peerEph.PublicKey(), false, 48, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := smkey.LocalKeyAgreement{Key: key}.SM2KeyAgree(ctx, eph, peerStatic.PublicKey(), peerEph.PublicKey(), false, 48, nil, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("key agreement differs: %v", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ops) != 3 || rec.ops[0] != "sign/tlcp" || rec.ops[1] != "decrypt/tlcp" || rec.ops[2] != "key_agreement/tlcp" {
		t.Fatalf("observed ops %v", rec.ops)
	}
}

// blockingKey blocks Sign until release is closed.
type blockingKey struct {
	crypto.Signer
	entered chan struct{}
	release chan struct{}
}

func (b *blockingKey) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	b.entered <- struct{}{}
	<-b.release
	return []byte("sig"), nil
}

func TestOffloadBackpressure(t *testing.T) {
	key, _ := sm2.GenerateKey(rand.Reader)
	bk := &blockingKey{Signer: key, entered: make(chan struct{}, 4), release: make(chan struct{})}

	for _, wait := range []bool{false, true} {
		o := New(Config{Workers: 1, Queue: 1, WaitWhenFull: wait}, nil)
		k := o.Wrap(bk, family.TLS13SM)
		results := make(chan error, 2)
		go func() { _, err := k.SignContext(context.Background(), rand.Reader, nil, nil); results <- err }()
		testpeer.Recv(t, bk.entered, "first signature at the worker") // the worker is busy
		go func() { _, err := k.SignContext(context.Background(), rand.Reader, nil, nil); results <- err }()
		deadline := time.Now().Add(testpeer.WaitLimit)
		for o.QueueLen() != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("queue length %d, want 1", o.QueueLen())
			}
			time.Sleep(time.Millisecond)
		}
		// Queue full: fail fast, or wait until the handshake's context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := k.SignContext(ctx, rand.Reader, nil, nil)
		cancel()
		if !wait && !errors.Is(err, ErrBusy) {
			t.Errorf("fail-fast: err = %v, want ErrBusy", err)
		}
		if wait && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait: err = %v, want the context's deadline", err)
		}
		bk.release <- struct{}{}
		testpeer.Recv(t, bk.entered, "next signature at the worker")
		bk.release <- struct{}{}
		for i := 0; i < 2; i++ {
			if err := testpeer.Recv(t, results, "queued signature"); err != nil {
				t.Errorf("queued op failed: %v", err)
			}
		}
		o.Close()
	}
}

// TestOffloadDecrypterOnlyForDecryptingKeys: a wrapped key is a
// crypto.Decrypter only for RSA and SM2 keys. crypto/tls fails every TLS 1.2
// handshake ("unsupported decryption key type") on an ECDSA certificate
// whose key claims to decrypt.
func TestOffloadDecrypterOnlyForDecryptingKeys(t *testing.T) {
	o := New(Config{Workers: 1, Queue: 1}, nil)
	defer o.Close()
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	sk, _ := sm2.GenerateKey(rand.Reader)
	for _, c := range []struct {
		name     string
		key      crypto.Signer
		decrypts bool
	}{{"ecdsa", ec, false}, {"rsa", rk, true}, {"sm2", sk, true}} {
		_, ok := o.Wrap(c.key, family.TLS).(crypto.Decrypter)
		if ok != c.decrypts {
			t.Errorf("%s: wrapped key is a Decrypter: %v, want %v", c.name, ok, c.decrypts)
		}
	}
}

// TestWrapSignsSM2InProcessThroughSM2Sign: an in-process SM2 key signs
// through sm2sign (digests and messages with an ID verify), and is still
// the key that Unwrap returns; any other signer is used as it is.
func TestWrapSignsSM2InProcessThroughSM2Sign(t *testing.T) {
	o := New(Config{Workers: 1, Queue: 4}, nil)
	defer o.Close()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	w := o.Wrap(key, family.TLS13SM)
	k := w.(decrypterKey).Key
	if _, ok := k.signer.(*sm2sign.Key); !ok {
		t.Fatalf("in-process SM2 key signs through %T", k.signer)
	}
	if smkey.InProcessSM2(w) != key {
		t.Fatal("Unwrap does not reach the SM2 key")
	}
	ctx := context.Background()
	e := bytes.Repeat([]byte{0x42}, 32)
	sig, err := smkey.Sign(ctx, w, rand.Reader, e, crypto.Hash(0))
	if err != nil || !sm2.VerifyASN1(&key.PublicKey, e, sig) {
		t.Fatalf("digest signature: %v", err)
	}
	uid := []byte("1234567812345678x")
	sig, err = smkey.Sign(ctx, w, rand.Reader, []byte("content"), smkey.NewSM2SignerOpts(uid))
	if err != nil || !sm2.VerifyASN1WithSM2(&key.PublicKey, uid, []byte("content"), sig) {
		t.Fatalf("message signature: %v", err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if k := o.Wrap(ec, family.TLS).(*Key); k.signer != crypto.Signer(ec) {
		t.Fatalf("ECDSA key signs through %T", k.signer)
	}
}

// TestDecryptRefusedIsKeyUnavailable: a decryption the engine refuses
// (queue full, engine closed) never looked at the ciphertext, so it must
// say so (smkey.ErrKeyUnavailable): a TLCP server then fails the handshake
// with internal_error instead of going on with a random pre-master and
// blaming the client's Finished (decrypt_error) for its own overload.
func TestDecryptRefusedIsKeyUnavailable(t *testing.T) {
	key, _ := sm2.GenerateKey(rand.Reader)
	ct, err := sm2.EncryptASN1(rand.Reader, &key.PublicKey, make([]byte, 48))
	if err != nil {
		t.Fatal(err)
	}
	bk := &blockingKey{Signer: key, entered: make(chan struct{}, 4), release: make(chan struct{})}
	o := New(Config{Workers: 1, Queue: 1}, nil)
	blocker, d := o.Wrap(bk, family.TLCP), o.Wrap(key, family.TLCP).(smkey.ContextDecrypter)
	results := make(chan error, 2)
	go func() { _, err := blocker.SignContext(context.Background(), rand.Reader, nil, nil); results <- err }()
	testpeer.Recv(t, bk.entered, "signature at the worker")
	go func() { _, err := blocker.SignContext(context.Background(), rand.Reader, nil, nil); results <- err }()
	deadline := time.Now().Add(testpeer.WaitLimit)
	for o.QueueLen() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("queue length %d, want 1", o.QueueLen())
		}
		time.Sleep(time.Millisecond)
	}
	_, err = d.DecryptContext(context.Background(), rand.Reader, ct, nil)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, smkey.ErrKeyUnavailable) {
		t.Errorf("queue full: err = %v, want ErrBusy and smkey.ErrKeyUnavailable", err)
	}
	bk.release <- struct{}{}
	testpeer.Recv(t, bk.entered, "queued signature at the worker")
	bk.release <- struct{}{}
	for i := 0; i < 2; i++ {
		if err := testpeer.Recv(t, results, "signature"); err != nil {
			t.Errorf("signature: %v", err)
		}
	}
	// A bad ciphertext is the key's verdict, not the key unavailable.
	if _, err := d.DecryptContext(context.Background(), rand.Reader, ct[:len(ct)-1], nil); err == nil || errors.Is(err, smkey.ErrKeyUnavailable) {
		t.Errorf("bad ciphertext: err = %v, want a decryption error that is not smkey.ErrKeyUnavailable", err)
	}
	o.Close()
	_, err = d.DecryptContext(context.Background(), rand.Reader, ct, nil)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, smkey.ErrKeyUnavailable) {
		t.Errorf("closed: err = %v, want ErrClosed and smkey.ErrKeyUnavailable", err)
	}
}
