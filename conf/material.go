package conf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/revocation"
	"github.com/gmproxy/gmproxy/internal/staple"
	"github.com/gmproxy/gmproxy/keyserver"
)

// KeyPair is a loaded certificate chain with its private key.
type KeyPair struct {
	// Chain is the certificate file's content, leaf first.
	Chain []*smx509.Certificate
	// Key is the private key: *sm2.PrivateKey for SM2, else the standard
	// library's *ecdsa.PrivateKey / *rsa.PrivateKey / ed25519.PrivateKey;
	// a *RemoteKeyRef when a key server holds it (KeyServer is set).
	Key crypto.Signer
	// CertFile and KeyFile are the resolved file names (KeyFile is empty
	// for a remote key).
	CertFile, KeyFile string
	// KeyServer is the name of the key_servers entry that holds the key
	// ("" for a key loaded from KeyFile).
	KeyServer string
}

// RemoteKeyRef stands for a private key held by a key server: it knows the
// public key (from the certificate) and the key server's name, and cannot
// sign or decrypt. The runtime replaces it with a client of that key
// server (keyserver.RemoteKey); conf imports no runtime package.
type RemoteKeyRef struct {
	KeyServer string
	PublicKey crypto.PublicKey
}

// Public implements crypto.Signer.
func (r *RemoteKeyRef) Public() crypto.PublicKey { return r.PublicKey }

// Sign implements crypto.Signer: it always fails.
func (r *RemoteKeyRef) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, fmt.Errorf("conf: the key is held by key server %q and is not connected", r.KeyServer)
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
	// TLSOCSP is tls.ocsp_file's response, verified at load.
	TLSOCSP *staple.Staple
	// TLSOCSPIssuer is the issuer of the TLS certificate when it staples
	// OCSP responses (tls.ocsp_file or tls.ocsp_fetch); TLSOCSPURL is the
	// responder tls.ocsp_fetch asks.
	TLSOCSPIssuer *x509.Certificate
	TLSOCSPURL    string
	// ClientCAs are the CA certificates of client_auth.ca.
	ClientCAs []*smx509.Certificate
	// ClientCRLs are the revocation lists of client_auth.crl, nil without.
	ClientCRLs *revocation.Index
	// ErrorPages are the pages of error_pages, by status.
	ErrorPages map[int][]byte
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
// crypto/x509 can use (RSA, ECDSA, Ed25519), and how many. The pool is
// never nil, also when it is empty: crypto/tls takes a nil ClientCAs for
// the system roots, which would let any publicly issued certificate
// authenticate on a site whose CA file lists SM2 CAs only.
func X509Pool(certs []*smx509.Certificate) (*x509.CertPool, int) {
	p := x509.NewCertPool()
	n := 0
	for _, c := range certs {
		xc, err := x509.ParseCertificate(c.Raw)
		if err != nil || xc.PublicKeyAlgorithm == x509.UnknownPublicKeyAlgorithm {
			continue
		}
		p.AddCert(xc)
		n++
	}
	return p, n
}

// KeyServerMaterial is what a key_servers entry's files contain.
type KeyServerMaterial struct {
	// Endpoints are the parsed addresses, in order.
	Endpoints []KeyServerEndpoint
	// ClientCert is gmproxy's client certificate with its key (tcp only).
	ClientCert *tls.Certificate
	// RootCAs verify the key server's certificate (tcp only).
	RootCAs *x509.CertPool
}

// KeyServerEndpoint is one address of a key server.
type KeyServerEndpoint struct {
	// Network is "tcp" (mutual TLS) or "unix"; Addr is host:port or the
	// socket path.
	Network, Addr string
	// SocketGID is listen_group's group ID for the Unix socket, nil when
	// none is set.
	SocketGID *int
	// ServerName is the name checked in the key server's certificate.
	ServerName string
}

// KeyServerFileMaterial is what a gmproxy keyserver configuration's files
// contain.
type KeyServerFileMaterial struct {
	// Network is "tcp" (mutual TLS) or "unix"; Addr is host:port or the
	// socket path.
	Network, Addr string
	// SocketGID is listen_group's group ID for the Unix socket, nil when
	// none is set.
	SocketGID *int
	// Cert is the key server's certificate with its key (tcp only).
	Cert *tls.Certificate
	// Keys are the served keys.
	Keys []ServedKeyMaterial
	// Policy is the keys with their names and roles, the allowed clients
	// (for a Unix socket: Local, allowed every key) and the CAs that
	// verify the clients' certificates (tcp only).
	Policy keyserver.Policy
}

// ServedKeyMaterial is one served key.
type ServedKeyMaterial struct {
	Key  *sm2.PrivateKey
	File string // the key file it came from
	Name string
}
