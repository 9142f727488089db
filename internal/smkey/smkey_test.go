package smkey

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/internal/transcript"
)

func pki(t *testing.T, name string) string {
	t.Helper()
	d, err := transcript.PKIDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, name)
}

// The shared Tongsuo PKI holds each key in two forms: plain PKCS#8 and
// GmSSL's encrypted PKCS#8 (PBKDF2-HMAC-SM3, SM4-CBC). Both must load to the
// same key, and match the certificate.
func TestLoadTongsuoAndGmSSLKeys(t *testing.T) {
	for _, n := range []string{"server_sign", "server_enc", "client_sign", "client_enc"} {
		plain, err := LoadPrivateKeyFile(pki(t, n+".key"), nil)
		if err != nil {
			t.Fatal(err)
		}
		// GmSSL 3.3's form, and 3.1.1's, whose ECPrivateKey also carries the
		// curve parameters and the public key.
		for _, form := range []string{".gmssl.key.pem", ".gmssl311.key.pem"} {
			enc, err := LoadPrivateKeyFile(pki(t, n+form), []byte("P@ssw0rd"))
			if err != nil {
				t.Fatalf("%s%s: %v", n, form, err)
			}
			p, ok1 := plain.(*sm2.PrivateKey)
			e, ok2 := enc.(*sm2.PrivateKey)
			if !ok1 || !ok2 || !p.Equal(e) {
				t.Fatalf("%s%s: keys differ or are not SM2 (%T, %T)", n, form, plain, enc)
			}
		}
		certs, err := LoadCertificatesFile(pki(t, n+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		if !PublicKeysEqual(plain, certs[0].PublicKey) {
			t.Fatalf("%s: key does not match certificate", n)
		}
	}
	if _, err := LoadPrivateKeyFile(pki(t, "server_sign.gmssl.key.pem"), nil); err != ErrNeedPassword && err == nil {
		t.Fatal("encrypted key loaded without a password")
	}
	if _, err := LoadPrivateKeyFile(pki(t, "server_sign.gmssl.key.pem"), []byte("wrong")); err == nil {
		t.Fatal("encrypted key loaded with a wrong password")
	}
	b, _ := os.ReadFile(pki(t, "server_sign_enc_keys.gmssl.pem"))
	keys, err := ParseAllPrivateKeysPEM(b, []byte("P@ssw0rd"))
	if err != nil || len(keys) != 2 {
		t.Fatalf("two-key GmSSL file: %d keys, %v", len(keys), err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// protocol-notes §12.6: the TLCP ECDHE pre-master computed by both roles.
func TestKeyAgreementVectorE10(t *testing.T) {
	c := ecdh.P256()
	priv := func(h string) *ecdh.PrivateKey {
		k, err := c.NewPrivateKey(unhex(t, h))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serverStatic := priv("e04c3fd77408b56a648ad439f673511a2ae248def3bab26bdfc9cdbd0ae9607e")
	serverEph := priv("6fe0bac5b09d3ab10f724638811c34464790520e4604e71e6cb0e5310623b5b1")
	clientStatic := priv("7a1136f60d2c5531447e5a3093078c2a505abf74f33aefed927ac0a5b27e7dd7")
	clientEph := priv("d0233bdbb0b8a7bfe1aab66132ef06fc4efaedd5d5000692bc21185242a31f6f")
	want := unhex(t, "f7942e6b065dec7726c030fd09941d773dc3487b8a62c22c7da0b03fe1130f5686d8081e40f97f31e125e61a8d0168bf")

	toSM2 := func(k *ecdh.PrivateKey) *sm2.PrivateKey {
		s, err := sm2.NewPrivateKey(k.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	server := AsKeyAgreement(toSM2(serverStatic))
	client := AsKeyAgreement(toSM2(clientStatic))
	got, err := server.SM2KeyAgree(ctx, serverEph, clientStatic.PublicKey(), clientEph.PublicKey(), false, 48, nil, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("initiator (server) pre-master %x, %v", got, err)
	}
	got, err = client.SM2KeyAgree(ctx, clientEph, serverStatic.PublicKey(), serverEph.PublicKey(), true, 48, nil, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("responder (client) pre-master %x, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := server.SM2KeyAgree(cctx, serverEph, clientStatic.PublicKey(), clientEph.PublicKey(), false, 48, nil, nil); err == nil {
		t.Fatal("key agreement ran with a cancelled context")
	}
}

func TestSignPrefersContextSigner(t *testing.T) {
	k, _ := sm2.GenerateKey(rand.Reader)
	cs := &countingSigner{PrivateKey: k}
	sig, err := Sign(context.Background(), cs, rand.Reader, []byte("msg"), sm2.DefaultSM2SignerOpts)
	if err != nil || cs.calls != 1 {
		t.Fatalf("SignContext not used: calls=%d err=%v", cs.calls, err)
	}
	if !sm2.VerifyASN1WithSM2(&k.PublicKey, nil, []byte("msg"), sig) {
		t.Fatal("signature does not verify")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Sign(ctx, k, rand.Reader, []byte("msg"), sm2.DefaultSM2SignerOpts); err == nil {
		t.Fatal("plain signer ran with a cancelled context")
	}
}

type unwrapper struct{ crypto.Signer }

func (u unwrapper) Unwrap() crypto.Signer { return u.Signer }

func TestInProcessSM2(t *testing.T) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		want *sm2.PrivateKey
	}{
		{"raw", k, k},
		{"wrapped", unwrapper{k}, k},
		{"wrapped twice", unwrapper{unwrapper{k}}, nil}, // one level only
		{"not SM2", other, nil},
		{"wrapped not SM2", unwrapper{other}, nil},
	} {
		if got := InProcessSM2(tc.key); got != tc.want {
			t.Errorf("%s: got %p, want %p", tc.name, got, tc.want)
		}
	}
}

func TestSM2Point(t *testing.T) {
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := SM2Point(&k.PublicKey)
	want := elliptic.Marshal(k.Curve, k.X, k.Y) //nolint:staticcheck // the reference encoding
	if !ok || !bytes.Equal(p[:], want) {
		t.Fatalf("SM2Point = %x, %v; want %x", p, ok, want)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, ok := SM2Point(&other.PublicKey); ok {
		t.Fatal("a P-256 key accepted as SM2")
	}
	if _, ok := SM2Point(&ecdsa.PublicKey{Curve: sm2.P256(), X: new(big.Int).Lsh(big.NewInt(1), 256), Y: big.NewInt(1)}); ok {
		t.Fatal("an out-of-range coordinate accepted")
	}
	if _, ok := SM2Point(nil); ok {
		t.Fatal("nil accepted")
	}
}

// countingKey is an RSA key that counts its signatures and decryptions.
type countingKey struct {
	*rsa.PrivateKey
	signs, decrypts int
}

func (k *countingKey) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	k.signs++
	return k.PrivateKey.Sign(r, d, o)
}

func (k *countingKey) Decrypt(r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	k.decrypts++
	return k.PrivateKey.Decrypt(r, m, o)
}

// TestWithContext: a key bound to a context that is done neither signs
// nor decrypts (crypto/tls, which calls Sign and Decrypt, then gets the
// context's error); bound to a live one it does both, and it still
// decrypts only when the key does.
func TestWithContext(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k := &countingKey{PrivateKey: rk}
	digest := make([]byte, 32)
	ct, err := rsa.EncryptPKCS1v15(rand.Reader, &rk.PublicKey, []byte("pre-master"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	bound := WithContext(ctx, k)
	if _, err := bound.Sign(rand.Reader, digest, crypto.SHA256); err != nil || k.signs != 1 {
		t.Fatalf("live context: Sign err %v, %d signatures", err, k.signs)
	}
	d, ok := bound.(crypto.Decrypter)
	if !ok {
		t.Fatal("a decrypting key bound to a context does not decrypt")
	}
	if pt, err := d.Decrypt(rand.Reader, ct, nil); err != nil || string(pt) != "pre-master" {
		t.Fatalf("live context: Decrypt %q %v", pt, err)
	}
	cancel()
	if _, err := bound.Sign(rand.Reader, digest, crypto.SHA256); !errors.Is(err, context.Canceled) || k.signs != 1 {
		t.Errorf("done context: Sign err %v, %d signatures (want the context's error and none more)", err, k.signs)
	}
	if _, err := d.Decrypt(rand.Reader, ct, nil); !errors.Is(err, context.Canceled) || k.decrypts != 1 {
		t.Errorf("done context: Decrypt err %v, %d decryptions", err, k.decrypts)
	}
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, ok := WithContext(ctx, ek).(crypto.Decrypter); ok {
		t.Error("an ECDSA key bound to a context decrypts")
	}
}

// TestLegacyEncryptedPEM: a key encrypted the RFC 1421 way (Proc-Type:
// 4,ENCRYPTED, what "openssl ec -aes256" writes) is refused as such, with
// or without a password, instead of failing as a garbled SEC 1 key.
func TestLegacyEncryptedPEM(t *testing.T) {
	_, legacy := ecKeyPEMs(t)
	for _, pw := range [][]byte{nil, []byte("secret")} {
		if _, err := ParsePrivateKeyPEM(legacy, pw); !errors.Is(err, ErrLegacyEncryption) {
			t.Errorf("password %q: err %v, want ErrLegacyEncryption", pw, err)
		}
	}
}

// TestHasUnencryptedKey: a file with any private key in the clear
// (whatever else it holds) has one; encrypted keys (PKCS#8 or the legacy
// PEM way) and certificates are not.
func TestHasUnencryptedKey(t *testing.T) {
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(pki(t, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain, enc, cert := read("server_sign.key"), read("server_sign.gmssl.key.pem"), read("server_sign.crt")
	sec1, legacy := ecKeyPEMs(t)
	for _, c := range []struct {
		name string
		pem  []byte
		want bool
	}{
		{"plain PKCS#8", plain, true},
		{"plain SEC 1", sec1, true},
		{"encrypted PKCS#8", enc, false},
		{"legacy encrypted", legacy, false},
		{"certificate", cert, false},
		{"certificate then encrypted key", append(append([]byte{}, cert...), enc...), false},
		{"encrypted then plain key", append(append([]byte{}, enc...), plain...), true},
		{"empty", nil, false},
	} {
		if got := HasUnencryptedKey(c.pem); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// ecKeyPEMs returns a new P-256 key as SEC 1 PEM, in the clear and
// encrypted the legacy PEM way (Proc-Type: 4,ENCRYPTED, password
// "secret").
func ecKeyPEMs(t *testing.T) (plain, legacy []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the legacy format, made on purpose
	blk, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", der, []byte("secret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(blk)
}

// TestTongsuoEncryptedKey: a key Tongsuo encrypted with PBKDF2-HMAC-SM3
// under OpenSSL's object identifier for hmacWithSM3 (which gmsm's own
// PBKDF2 refuses) loads, with the right password only.
func TestTongsuoEncryptedKey(t *testing.T) {
	plain, err := LoadPrivateKeyFile(pki(t, "server_sign.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadPrivateKeyFile(pki(t, "server_sign.tongsuo-sm3.key.pem"), []byte("P@ssw0rd"))
	if err != nil {
		t.Fatal(err)
	}
	if !plain.(*sm2.PrivateKey).Equal(k) {
		t.Error("the Tongsuo-encrypted key differs from the plain one")
	}
	if _, err := LoadPrivateKeyFile(pki(t, "server_sign.tongsuo-sm3.key.pem"), []byte("wrong")); err == nil {
		t.Error("loaded with a wrong password")
	}
}
