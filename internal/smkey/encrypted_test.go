package smkey

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"testing"

	"github.com/emmansun/gmsm/pkcs"
	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/sm2"
)

// Object identifiers of the encrypted PKCS#8 keys the tests build by hand.
var (
	oidPBES2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidMD5AndDESCBC  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 3}
	oidSM4CBC        = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 104, 2}
	oidAES256CBC     = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidTestSMPBKDF   = asn1.ObjectIdentifier{1, 2, 156, 10197, 6, 4, 1, 5, 1}
	oidTestScrypt    = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11591, 4, 11}
	hmacWithSM3PRF   = pkix.AlgorithmIdentifier{Algorithm: oidHMACWithSM3, Parameters: asn1.NullRawValue}
	testKeyPassword  = []byte("P@ssw0rd")
	sixteenZeroBytes = make([]byte, 16)
)

// encryptedKeyPEM returns an ENCRYPTED PRIVATE KEY block of alg and
// ciphertext data (RFC 5958 §3, EncryptedPrivateKeyInfo).
func encryptedKeyPEM(t *testing.T, alg pkix.AlgorithmIdentifier, data []byte) []byte {
	t.Helper()
	der, err := asn1.Marshal(struct {
		Alg  pkix.AlgorithmIdentifier
		Data []byte
	}{alg, data})
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der})
}

// pbes2 returns the AlgorithmIdentifier of PBES2 (RFC 8018 §6.2) with kdf
// and its params, and cipher with its params.
func pbes2(t *testing.T, kdf asn1.ObjectIdentifier, kdfParams any, cipher asn1.ObjectIdentifier, cipherParams any) pkix.AlgorithmIdentifier {
	t.Helper()
	return pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: raw(t, struct {
		KDF, Enc pkix.AlgorithmIdentifier
	}{
		pkix.AlgorithmIdentifier{Algorithm: kdf, Parameters: raw(t, kdfParams)},
		pkix.AlgorithmIdentifier{Algorithm: cipher, Parameters: raw(t, cipherParams)},
	})}
}

func raw(t *testing.T, v any) asn1.RawValue {
	t.Helper()
	b, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return asn1.RawValue{FullBytes: b}
}

type testPBKDF2Params struct {
	Salt       []byte
	Iterations int
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

type testScryptParams struct {
	Salt    []byte
	N, R, P int
}

type testPBES1Params struct {
	Salt       []byte
	Iterations int
}

// parseBoth parses pemData with ParsePrivateKeyPEM and
// ParseAllPrivateKeysPEM, turning a panic into a test failure, and returns
// the first one's error.
func parseBoth(t *testing.T, name string, pemData []byte) error {
	t.Helper()
	var err error
	for i, parse := range []func() error{
		func() error { _, err := ParsePrivateKeyPEM(pemData, testKeyPassword); return err },
		func() error { _, err := ParseAllPrivateKeysPEM(pemData, testKeyPassword); return err },
	} {
		e := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
					t.Errorf("%s: parser %d panicked: %v", name, i, p)
				}
			}()
			return parse()
		}()
		if i == 0 {
			err = e
		}
	}
	return err
}

// TestMalformedEncryptedKeyRefused: an encrypted PKCS#8 key whose
// parameters crypto/cipher refuses by panicking (an IV not of the block
// size, a ciphertext not in whole blocks) is an error at load, where a
// panic would end gmproxy on a reload that meets such a file. Any
// password gets that far: it only feeds the key derivation.
func TestMalformedEncryptedKeyRefused(t *testing.T) {
	kdf := testPBKDF2Params{Salt: []byte("saltsalt"), Iterations: 1, PRF: hmacWithSM3PRF}
	for _, c := range []struct {
		name string
		alg  pkix.AlgorithmIdentifier
		data []byte
	}{
		{"SM4-CBC IV of 3 bytes", pbes2(t, oidPBKDF2, kdf, oidSM4CBC, []byte{1, 2, 3}), make([]byte, 32)},
		{"AES-256-CBC IV of 8 bytes", pbes2(t, oidPBKDF2, kdf, oidAES256CBC, make([]byte, 8)), make([]byte, 32)},
		{"SM4-CBC ciphertext of 17 bytes", pbes2(t, oidPBKDF2, kdf, oidSM4CBC, sixteenZeroBytes), make([]byte, 17)},
		{"PBES1 DES ciphertext of 9 bytes", pkix.AlgorithmIdentifier{Algorithm: oidMD5AndDESCBC, Parameters: raw(t, testPBES1Params{[]byte("saltsalt"), 1})}, make([]byte, 9)},
	} {
		if err := parseBoth(t, c.name, encryptedKeyPEM(t, c.alg, c.data)); err == nil {
			t.Errorf("%s: parsed", c.name)
		}
	}
}

// TestEncryptedKeyWorkBounded: an encrypted key cannot make its loading
// (at start, at each reload, at gmproxy check) take minutes of CPU or
// gigabytes of memory, whichever key derivation it names: PBKDF2 under
// RFC 8018's identifier or the SM one (1.2.156.10197.6.4.1.5.1, which
// gmsm derived without a bound), scrypt (RFC 7914; gmsm allocated 128·N·r
// bytes as the file asked) and PBES1. Each is refused before deriving,
// the password right or wrong.
func TestEncryptedKeyWorkBounded(t *testing.T) {
	salt := []byte("saltsalt")
	over := maxKDFIterations + 1
	for _, c := range []struct {
		name string
		alg  pkix.AlgorithmIdentifier
	}{
		{"PBKDF2 HMAC-SM3", pbes2(t, oidPBKDF2, testPBKDF2Params{Salt: salt, Iterations: over, PRF: hmacWithSM3PRF}, oidSM4CBC, sixteenZeroBytes)},
		{"SM PBKDF", pbes2(t, oidTestSMPBKDF, testPBKDF2Params{Salt: salt, Iterations: over}, oidSM4CBC, sixteenZeroBytes)},
		// N·r·p of 2^21 in 256 KiB: the work is bounded, not only the
		// memory.
		{"scrypt p", pbes2(t, oidTestScrypt, testScryptParams{salt, 1 << 11, 1, 1 << 10}, oidSM4CBC, sixteenZeroBytes)},
		{"scrypt N", pbes2(t, oidTestScrypt, testScryptParams{salt, 1 << 40, 1, 1}, oidSM4CBC, sixteenZeroBytes)},
		{"scrypt r", pbes2(t, oidTestScrypt, testScryptParams{salt, 2, 1 << 30, 1}, oidSM4CBC, sixteenZeroBytes)},
		{"PBES1 MD5 DES", pkix.AlgorithmIdentifier{Algorithm: oidMD5AndDESCBC, Parameters: raw(t, testPBES1Params{salt, over})}},
	} {
		err := parseBoth(t, c.name, encryptedKeyPEM(t, c.alg, make([]byte, 32)))
		if !errors.Is(err, errKDFWork) {
			t.Errorf("%s: err %v, want errKDFWork", c.name, err)
		}
	}
}

// TestEncryptedKeyDerivations: keys encrypted with each key derivation
// gmsm writes (PBKDF2 under both identifiers, scrypt with OpenSSL's
// parameters, PBES1) load, with the right password only.
func TestEncryptedKeyDerivations(t *testing.T) {
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pbes1, err := pkcs.NewPbeWithMD5AndDESCBC(rand.Reader, 8, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		enc  pkcs.PBESEncrypter
	}{
		{"PBKDF2 HMAC-SM3", pkcs.NewPBESEncrypter(pkcs.SM4CBC, pkcs.NewPBKDF2Opts(pkcs.SM3, 16, 2048))},
		{"SM PBES", pkcs.NewSMPBESEncrypter(16, 2048)},
		{"scrypt", pkcs.NewPBESEncrypter(pkcs.SM4CBC, pkcs.NewScryptOpts(16, 16384, 8, 1))},
		{"PBES1 MD5 DES", pbes1},
	} {
		der, err := pkcs8.MarshalPrivateKey(key, testKeyPassword, c.enc)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der})
		k, err := ParsePrivateKeyPEM(p, testKeyPassword)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if !key.Equal(k) {
			t.Errorf("%s: another key loaded", c.name)
		}
		if _, err := ParsePrivateKeyPEM(p, []byte("wrong")); err == nil {
			t.Errorf("%s: loaded with a wrong password", c.name)
		}
	}
}
