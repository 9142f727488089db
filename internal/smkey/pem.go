package smkey

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/emmansun/gmsm/pkcs"
	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/namedfile"
)

// ErrNeedPassword is returned for an encrypted key when no password was given.
var ErrNeedPassword = errors.New("the key is encrypted and no password was given")

// ErrLegacyEncryption is returned for a key encrypted the old PEM way
// (Proc-Type: 4,ENCRYPTED), which gmproxy does not read.
var ErrLegacyEncryption = errors.New("the key is encrypted the legacy PEM way (Proc-Type: 4,ENCRYPTED), which is not supported; convert it to encrypted PKCS#8: openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out KEY.p8")

// ParsePrivateKeyPEM parses the first private key in pemData: PKCS#8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or encrypted PKCS#8 ("ENCRYPTED
// PRIVATE KEY", including GmSSL's PBKDF2-HMAC-SM3/SM4-CBC form), decrypted
// with password. SM2 keys come back as *sm2.PrivateKey; other key types as
// the standard library's types.
func ParsePrivateKeyPEM(pemData, password []byte) (crypto.Signer, error) {
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		if isKeyBlock(block) {
			return parseKeyBlock(block, password)
		}
	}
}

// ParseAllPrivateKeysPEM parses every private key block in pemData, in order
// (GmSSL keeps a sign and an enc key in one file).
func ParseAllPrivateKeysPEM(pemData, password []byte) ([]crypto.Signer, error) {
	var out []crypto.Signer
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if !isKeyBlock(block) {
			continue
		}
		k, err := parseKeyBlock(block, password)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", len(out)+1, err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM private key block found")
	}
	return out, nil
}

// HasUnencryptedKey reports whether pemData holds a private key block
// stored in the clear (any but "ENCRYPTED PRIVATE KEY" and the legacy
// Proc-Type encryption): a password configured for such a file protects
// nothing.
func HasUnencryptedKey(pemData []byte) bool {
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		encrypted := block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED")
		if isKeyBlock(block) && !encrypted {
			clear(block.Bytes)
			return true
		}
		clear(block.Bytes)
	}
}

// isKeyBlock reports whether block is of a private key type
// parseKeyBlock reads.
func isKeyBlock(block *pem.Block) bool {
	switch block.Type {
	case "PRIVATE KEY", "EC PRIVATE KEY", "SM2 PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY":
		return true
	}
	return false
}

// parseKeyBlock parses one private key block (isKeyBlock), then clears
// its decoded bytes: the key in the clear, or its encrypted form, has no
// copy left but the parsed key.
func parseKeyBlock(block *pem.Block, password []byte) (crypto.Signer, error) {
	defer clear(block.Bytes)
	if strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
		// RFC 1421 encryption ("openssl ec -aes256" and older
		// tools): parsed as a plain key it fails as garbage.
		return nil, ErrLegacyEncryption
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := smx509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS#8 key: %w", err)
		}
		return asSigner(k)
	case "EC PRIVATE KEY", "SM2 PRIVATE KEY":
		k, err := smx509.ParseTypedECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse SEC 1 key: %w", err)
		}
		return asSigner(k)
	case "ENCRYPTED PRIVATE KEY":
		if len(password) == 0 {
			return nil, ErrNeedPassword
		}
		k, err := decryptPKCS8(block.Bytes, password)
		if errors.Is(err, errMalformedEncryption) || errors.Is(err, errKDFWork) {
			return nil, fmt.Errorf("encrypted PKCS#8 key: %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("decrypt PKCS#8 key (wrong password?): %w", err)
		}
		return asSigner(k)
	case "RSA PRIVATE KEY":
		k, err := smx509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS#1 key: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
}

// errMalformedEncryption is the failure of an encrypted key whose cipher
// parameters crypto/cipher refuses.
var errMalformedEncryption = errors.New("malformed encryption parameters (an IV not of the cipher's block size, or a ciphertext not in whole blocks)")

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo with gmsm's pkcs8.
// gmsm hands the file's IV and ciphertext to crypto/cipher unchecked, which
// panics on an IV not of the block size or a ciphertext not in whole
// blocks; any password reaches that step, as it only feeds the key
// derivation. Such a file is an error here: at a reload, a panic would end
// the serving process.
func decryptPKCS8(der, password []byte) (k any, err error) {
	defer func() {
		if p := recover(); p != nil {
			k, err = nil, errMalformedEncryption
		}
	}()
	if err := checkPBES1(der); err != nil {
		return nil, err
	}
	k, _, err = pkcs8.ParsePrivateKey(der, password)
	return k, err
}

// checkPBES1 bounds the iterations of a key encrypted with PBES1 (RFC 8018
// §6.1, OpenSSL 1.0's default), whose key derivation gmsm does not let
// replace as it does PBES2's (pbkdf2.go).
func checkPBES1(der []byte) error {
	var info struct {
		Algorithm pkix.AlgorithmIdentifier
		Data      []byte
	}
	if _, err := asn1.Unmarshal(der, &info); err != nil || !pkcs.IsPBES1(info.Algorithm) {
		return nil // not PBES1, or left for gmsm to refuse
	}
	var params struct {
		Salt       []byte
		Iterations int
	}
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err == nil && params.Iterations > maxKDFIterations {
		return fmt.Errorf("PBES1 with %d iterations, at most %d: %w", params.Iterations, maxKDFIterations, errKDFWork)
	}
	return nil
}

func asSigner(k any) (crypto.Signer, error) {
	switch v := k.(type) {
	case *sm2.PrivateKey:
		return v, nil
	case *ecdsa.PrivateKey:
		if v.Curve == sm2.P256() {
			sk, err := sm2.NewPrivateKeyFromInt(v.D)
			if err != nil {
				return nil, err
			}
			return sk, nil
		}
		return v, nil
	case crypto.Signer:
		return v, nil
	}
	return nil, fmt.Errorf("unsupported private key type %T", k)
}

// ParseCertificatesPEM parses every CERTIFICATE block in pemData, in order.
func ParseCertificatesPEM(pemData []byte) ([]*smx509.Certificate, error) {
	var out []*smx509.Certificate
	rest := pemData
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := smx509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate block found")
	}
	return out, nil
}

// LoadCertificatesFile reads ParseCertificatesPEM from a file, a regular
// file of at most namedfile.Max bytes: a FIFO (whose open waits for a
// writer; conf's check of a TLCP pair reads the files this way first) or
// a device such as /dev/zero is refused at once.
func LoadCertificatesFile(path string) ([]*smx509.Certificate, error) {
	b, err := namedfile.Read(path, namedfile.Max)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCertificatesPEM(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs, nil
}

// LoadPrivateKeyFile reads ParsePrivateKeyPEM from a file, read as
// LoadCertificatesFile reads one.
func LoadPrivateKeyFile(path string, password []byte) (crypto.Signer, error) {
	b, err := namedfile.Read(path, namedfile.Max)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKeyPEM(b, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// PublicKeysEqual reports whether the signer's public key is pub.
func PublicKeysEqual(k crypto.Signer, pub crypto.PublicKey) bool {
	type eq interface{ Equal(crypto.PublicKey) bool }
	if e, ok := k.Public().(eq); ok {
		return e.Equal(pub)
	}
	return false
}
