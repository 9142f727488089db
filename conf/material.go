package conf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"

	"github.com/emmansun/gmsm/smx509"
)

// KeyPair is a loaded certificate chain with its private key.
type KeyPair struct {
	// Chain is the certificate file's content, leaf first.
	Chain []*smx509.Certificate
	// Key is the private key: *sm2.PrivateKey for SM2, else the standard
	// library's *ecdsa.PrivateKey / *rsa.PrivateKey / ed25519.PrivateKey.
	Key crypto.Signer
	// CertFile and KeyFile are the resolved file names.
	CertFile, KeyFile string
}

// Leaf returns the first certificate of the chain.
func (k *KeyPair) Leaf() *smx509.Certificate {
	if k == nil || len(k.Chain) == 0 {
		return nil
	}
	return k.Chain[0]
}

// DER returns the chain as DER certificates, leaf first.
func (k *KeyPair) DER() [][]byte {
	out := make([][]byte, len(k.Chain))
	for i, c := range k.Chain {
		out[i] = c.Raw
	}
	return out
}

// TLSCertificate returns the pair as a crypto/tls certificate (for ordinary
// TLS, and as the DER chain + signer the SM protocol packages take).
func (k *KeyPair) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: k.DER(), PrivateKey: k.Key}
}

// SiteMaterial is what a site's files contain, loaded and checked.
type SiteMaterial struct {
	// TLCPSign and TLCPEnc are set when the site has a tlcp section.
	TLCPSign, TLCPEnc *KeyPair
	// TLCPSuites are the TLCP suite values in preference order.
	TLCPSuites []uint16
	// TLS13SM is set when the site has a tls13sm section.
	TLS13SM *KeyPair
	// TLS13SMSuites are the TLS 1.3 SM suite values in preference order.
	TLS13SMSuites []uint16
	// TLS is set when the site has a tls section.
	TLS *KeyPair
	// TLSMinVersion is tls.VersionTLS12 or tls.VersionTLS13.
	TLSMinVersion uint16
	// ClientCAs are the CA certificates of client_auth.ca.
	ClientCAs []*smx509.Certificate
}

// ClientCAPool returns ClientCAs as an smx509 pool (nil when there are none).
func (m *SiteMaterial) ClientCAPool() *smx509.CertPool { return SMPool(m.ClientCAs) }

// UpstreamMaterial is what an upstream's tls files contain.
type UpstreamMaterial struct {
	// RootCAs verify the targets; nil means the system roots (h2, tls).
	RootCAs []*smx509.Certificate
	// ClientCert is the client certificate for h2, tls and tls13sm.
	ClientCert *KeyPair
	// Sign and Enc are the TLCP client certificates.
	Sign, Enc *KeyPair
	// Suites are the TLCP or TLS 1.3 SM suite values offered.
	Suites []uint16
}

// SMPool returns a pool holding certs (nil for none).
func SMPool(certs []*smx509.Certificate) *smx509.CertPool {
	if len(certs) == 0 {
		return nil
	}
	p := smx509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// X509Pool returns a crypto/x509 pool holding the certificates of certs that
// crypto/x509 can use (RSA, ECDSA, Ed25519); nil for none.
func X509Pool(certs []*smx509.Certificate) *x509.CertPool {
	var p *x509.CertPool
	for _, c := range certs {
		xc, err := x509.ParseCertificate(c.Raw)
		if err != nil || xc.PublicKeyAlgorithm == x509.UnknownPublicKeyAlgorithm {
			continue
		}
		if p == nil {
			p = x509.NewCertPool()
		}
		p.AddCert(xc)
	}
	return p
}
