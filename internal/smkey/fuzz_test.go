package smkey

import (
	"crypto"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/transcript"
)

// FuzzParsePrivateKeyPEM reads any bytes as a key file (every form the
// daemon accepts: PKCS#8, SEC 1, GmSSL's encrypted PKCS#8 of 3.3 and 3.1.1,
// PKCS#1). Parsing never panics; a key that parses signs, and its own
// public key verifies the signature; every key ParseAllPrivateKeysPEM gives
// is a usable signer too; HasUnencryptedKey finds every key that parses
// without a password.
func FuzzParsePrivateKeyPEM(f *testing.F) {
	if d, err := transcript.PKIDir(); err == nil {
		for _, n := range []string{"server_sign.key", "server_enc.gmssl.key.pem", "client_sign.gmssl311.key.pem", "server_sign_enc_keys.gmssl.pem", "server_sign.tongsuo-sm3.key.pem"} {
			if b, err := os.ReadFile(filepath.Join(d, n)); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	digest := sm3.Sum([]byte("message"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParsePrivateKeyPEM(data, []byte("P@ssw0rd"))
		if err == nil {
			usable(t, k, digest[:])
		}
		keys, err := ParseAllPrivateKeysPEM(data, []byte("P@ssw0rd"))
		if err == nil {
			for _, k := range keys {
				usable(t, k, digest[:])
			}
		}
		_, _ = ParseCertificatesPEM(data)
		// A key that parses without a password is stored in the clear:
		// conf's warning that a password protects nothing relies on it.
		if _, err := ParsePrivateKeyPEM(data, nil); err == nil && !HasUnencryptedKey(data) {
			t.Fatal("a key parsed without a password, but HasUnencryptedKey says the file has none in the clear")
		}
	})
}

// usable signs with k and checks the signature with k's public key (SM2
// keys; other types only need a public key).
func usable(t *testing.T, k crypto.Signer, digest []byte) {
	t.Helper()
	if k == nil || k.Public() == nil {
		t.Fatalf("parsed key %T without a public key", k)
	}
	sk, ok := k.(*sm2.PrivateKey)
	if !ok {
		return
	}
	sig, err := sk.Sign(rand.Reader, digest, nil)
	if err != nil {
		t.Fatalf("parsed SM2 key does not sign: %v", err)
	}
	if !sm2.VerifyASN1(&sk.PublicKey, digest, sig) {
		t.Fatal("parsed SM2 key's signature does not verify with its public key")
	}
}
