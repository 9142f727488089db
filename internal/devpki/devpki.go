// Package devpki generates a complete throwaway SM2 test PKI: a CA, TLCP
// server and client sign/enc certificate pairs, a TLS 1.3-SM server
// certificate and (optionally) an ECDSA P-256 CA and server certificate for
// ordinary TLS clients without SM support.
//
// The certificates follow the rules the Tongsuo and GmSSL peers enforce
// (protocol-notes §8):
//   - the CA has basicConstraints CA:TRUE (critical) and keyUsage
//     keyCertSign|cRLSign;
//   - sign certificates carry digitalSignature only, enc certificates
//     keyEncipherment|dataEncipherment|keyAgreement, and each sign/enc pair has
//     identical subject, subjectAltName and issuer;
//   - serial numbers are 16 random bytes (GmSSL rejects serials under 4 bytes);
//   - leaf certificates carry no basicConstraints extension at all (GmSSL
//     rejects the empty CA:FALSE sequence some tools write);
//   - signatures are SM2-with-SM3 with the standard ID 1234567812345678.
//
// The keys are for development and tests only.
package devpki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Options say what to generate. The zero value is usable: hosts localhost
// and 127.0.0.1, 825 days of validity, ECDSA certificates included.
type Options struct {
	// Hosts are the DNS names and IP addresses the server certificates are
	// valid for; default ["localhost", "127.0.0.1", "::1"].
	Hosts []string
	// Validity of every certificate; default 825 days. The CA is valid for
	// the same period.
	Validity time.Duration
	// Organization is the subject O of every certificate; default
	// "gmproxy development PKI".
	Organization string
	// ServerCN is the subject CN of the server certificates; default the
	// first host.
	ServerCN string
	// ClientCN is the subject CN of the client certificates; default
	// "gmproxy test client".
	ClientCN string
	// SkipECDSA leaves out the ECDSA P-256 CA and server certificate.
	SkipECDSA bool
	// Rand is the randomness source; default crypto/rand.Reader.
	Rand io.Reader
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// DefaultHosts are used when Options.Hosts is empty.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// DefaultValidity is used when Options.Validity is zero.
const DefaultValidity = 825 * 24 * time.Hour

func (o *Options) fill() {
	if len(o.Hosts) == 0 {
		o.Hosts = DefaultHosts
	}
	if o.Validity <= 0 {
		o.Validity = DefaultValidity
	}
	if o.Organization == "" {
		o.Organization = "gmproxy development PKI"
	}
	if o.ServerCN == "" {
		o.ServerCN = o.Hosts[0]
	}
	if o.ClientCN == "" {
		o.ClientCN = "gmproxy test client"
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Cert is one certificate with its private key.
type Cert struct {
	Cert *smx509.Certificate
	// Key is *sm2.PrivateKey for SM2 certificates, *ecdsa.PrivateKey for
	// the ECDSA ones.
	Key crypto.Signer
}

// PKI is a complete development PKI.
type PKI struct {
	CA         Cert
	ServerSign Cert // TLCP server signing certificate; also the TLS 1.3-SM certificate
	ServerEnc  Cert // TLCP server encryption certificate
	ClientSign Cert
	ClientEnc  Cert
	// ECDSACA and ECDSAServer are nil when Options.SkipECDSA was set.
	ECDSACA     *Cert
	ECDSAServer *Cert

	// Created is true when LoadOrCreate generated (some of) the files
	// instead of reusing all of them.
	Created bool
}

// TLS13SM returns the TLS 1.3-SM server certificate, which is the TLCP
// signing certificate (an SM2 certificate with digitalSignature).
func (p *PKI) TLS13SM() Cert { return p.ServerSign }

// File names written by WriteFiles, relative to the PKI folder.
const (
	FileCACert          = "ca.crt"
	FileCAKey           = "ca.key"
	FileServerSignCert  = "server_sign.crt"
	FileServerSignKey   = "server_sign.key"
	FileServerEncCert   = "server_enc.crt"
	FileServerEncKey    = "server_enc.key"
	FileClientSignCert  = "client_sign.crt"
	FileClientSignKey   = "client_sign.key"
	FileClientEncCert   = "client_enc.crt"
	FileClientEncKey    = "client_enc.key"
	FileECDSACACert     = "ecdsa_ca.crt"
	FileECDSACAKey      = "ecdsa_ca.key"
	FileECDSAServerCert = "server_ecdsa.crt"
	FileECDSAServerKey  = "server_ecdsa.key"
)

// Generate creates a new PKI.
func Generate(opts Options) (*PKI, error) {
	opts.fill()
	ca, err := newSM2CA(&opts)
	if err != nil {
		return nil, err
	}
	p := &PKI{CA: ca, Created: true}
	if err := p.issueSM2Leaves(&opts); err != nil {
		return nil, err
	}
	if !opts.SkipECDSA {
		if err := p.issueECDSA(&opts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *PKI) issueSM2Leaves(opts *Options) error {
	dns, ips := splitHosts(opts.Hosts)
	server := pkix.Name{Country: []string{"CN"}, Organization: []string{opts.Organization}, CommonName: opts.ServerCN}
	client := pkix.Name{Country: []string{"CN"}, Organization: []string{opts.Organization}, CommonName: opts.ClientCN}
	const (
		signUsage = smx509.KeyUsageDigitalSignature
		encUsage  = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	)
	var err error
	if p.ServerSign, err = issueSM2(opts, p.CA, server, dns, ips, signUsage, smx509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("server sign certificate: %w", err)
	}
	if p.ServerEnc, err = issueSM2(opts, p.CA, server, dns, ips, encUsage, smx509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("server enc certificate: %w", err)
	}
	if p.ClientSign, err = issueSM2(opts, p.CA, client, nil, nil, signUsage, smx509.ExtKeyUsageClientAuth); err != nil {
		return fmt.Errorf("client sign certificate: %w", err)
	}
	if p.ClientEnc, err = issueSM2(opts, p.CA, client, nil, nil, encUsage, smx509.ExtKeyUsageClientAuth); err != nil {
		return fmt.Errorf("client enc certificate: %w", err)
	}
	return nil
}

func (p *PKI) issueECDSA(opts *Options) error {
	dns, ips := splitHosts(opts.Hosts)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), opts.Rand)
	if err != nil {
		return err
	}
	name := pkix.Name{Country: []string{"CN"}, Organization: []string{opts.Organization}, CommonName: "gmproxy development ECDSA CA"}
	ca, err := selfSign(opts, name, caKey)
	if err != nil {
		return fmt.Errorf("ECDSA CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), opts.Rand)
	if err != nil {
		return err
	}
	tmpl, err := leafTemplate(opts, pkix.Name{Country: []string{"CN"}, Organization: []string{opts.Organization}, CommonName: opts.ServerCN},
		dns, ips, smx509.KeyUsageDigitalSignature, smx509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	leaf, err := create(opts, tmpl, ca, key)
	if err != nil {
		return fmt.Errorf("ECDSA server certificate: %w", err)
	}
	p.ECDSACA = &ca
	p.ECDSAServer = &Cert{Cert: leaf, Key: key}
	return nil
}

func newSM2CA(opts *Options) (Cert, error) {
	key, err := sm2.GenerateKey(opts.Rand)
	if err != nil {
		return Cert{}, err
	}
	name := pkix.Name{Country: []string{"CN"}, Organization: []string{opts.Organization}, CommonName: "gmproxy development SM2 CA"}
	ca, err := selfSign(opts, name, key)
	if err != nil {
		return Cert{}, fmt.Errorf("SM2 CA: %w", err)
	}
	return ca, nil
}

func selfSign(opts *Options, name pkix.Name, key crypto.Signer) (Cert, error) {
	serial, err := newSerial(opts.Rand)
	if err != nil {
		return Cert{}, err
	}
	now := opts.Now()
	tmpl := &smx509.Certificate{
		SerialNumber:          serial,
		Subject:               name,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(opts.Validity),
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := smx509.CreateCertificate(opts.Rand, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Cert{}, err
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		return Cert{}, err
	}
	return Cert{Cert: c, Key: key}, nil
}

func leafTemplate(opts *Options, subject pkix.Name, dns []string, ips []net.IP, ku smx509.KeyUsage, eku smx509.ExtKeyUsage) (*smx509.Certificate, error) {
	serial, err := newSerial(opts.Rand)
	if err != nil {
		return nil, err
	}
	now := opts.Now()
	return &smx509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(opts.Validity),
		KeyUsage:     ku,
		ExtKeyUsage:  []smx509.ExtKeyUsage{eku},
		DNSNames:     dns,
		IPAddresses:  ips,
		// No basicConstraints: BasicConstraintsValid stays false.
	}, nil
}

func issueSM2(opts *Options, ca Cert, subject pkix.Name, dns []string, ips []net.IP, ku smx509.KeyUsage, eku smx509.ExtKeyUsage) (Cert, error) {
	key, err := sm2.GenerateKey(opts.Rand)
	if err != nil {
		return Cert{}, err
	}
	tmpl, err := leafTemplate(opts, subject, dns, ips, ku, eku)
	if err != nil {
		return Cert{}, err
	}
	c, err := create(opts, tmpl, ca, key)
	if err != nil {
		return Cert{}, err
	}
	return Cert{Cert: c, Key: key}, nil
}

func create(opts *Options, tmpl *smx509.Certificate, ca Cert, key crypto.Signer) (*smx509.Certificate, error) {
	if ca.Cert != nil && tmpl.NotAfter.After(ca.Cert.NotAfter) {
		// The clock read for the leaf may be a second past the CA's:
		// a leaf does not outlive its issuer.
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	der, err := smx509.CreateCertificate(opts.Rand, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	return smx509.ParseCertificate(der)
}

// newSerial returns a positive 16-byte serial number whose DER encoding is
// exactly 16 bytes (top bit clear, second-highest bit set).
func newSerial(r io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	b[0] = b[0]&0x3f | 0x40
	return new(big.Int).SetBytes(b), nil
}

func splitHosts(hosts []string) (dns []string, ips []net.IP) {
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// files lists every certificate/key of p with its file names.
func (p *PKI) files() []struct {
	cert, key string
	c         *Cert
} {
	out := []struct {
		cert, key string
		c         *Cert
	}{
		{FileCACert, FileCAKey, &p.CA},
		{FileServerSignCert, FileServerSignKey, &p.ServerSign},
		{FileServerEncCert, FileServerEncKey, &p.ServerEnc},
		{FileClientSignCert, FileClientSignKey, &p.ClientSign},
		{FileClientEncCert, FileClientEncKey, &p.ClientEnc},
	}
	if p.ECDSACA != nil && p.ECDSAServer != nil {
		out = append(out, struct {
			cert, key string
			c         *Cert
		}{FileECDSACACert, FileECDSACAKey, p.ECDSACA}, struct {
			cert, key string
			c         *Cert
		}{FileECDSAServerCert, FileECDSAServerKey, p.ECDSAServer})
	}
	return out
}

// WriteFiles writes every certificate (PEM, 0644) and key (PKCS#8 PEM, 0600)
// into dir, creating it (0700) if needed, and returns the paths written.
func (p *PKI) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range p.files() {
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.c.Cert.Raw})
		keyDER, err := smx509.MarshalPKCS8PrivateKey(f.c.Key)
		if err != nil {
			return written, fmt.Errorf("%s: %w", f.key, err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
		cp, kp := filepath.Join(dir, f.cert), filepath.Join(dir, f.key)
		if err := WriteFile(cp, certPEM, 0o644); err != nil {
			return written, err
		}
		written = append(written, cp)
		if err := WriteFile(kp, keyPEM, 0o600); err != nil {
			return written, err
		}
		written = append(written, kp)
	}
	return written, nil
}

// WriteFile replaces path atomically with data and mode perm: it writes a
// temporary file in the same folder, created readable by its owner only,
// and renames it over path. Unlike os.WriteFile it never follows a
// symbolic link at path and never keeps the mode of a file already there,
// so a private key cannot land in a world-readable file or outside the
// folder.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}

// renewMargin: files expiring sooner than this are regenerated by LoadOrCreate.
const renewMargin = 24 * time.Hour

// LoadOrCreate returns the PKI stored in dir, reusing it when every file is
// present, readable and valid for at least another day, the server
// certificates cover opts.Hosts and every leaf verifies against its CA.
// Otherwise it generates what is needed and writes it: the CA is kept when it
// is still usable (so clients that trust it keep working) and only the leaf
// certificates are reissued; a missing or expiring CA makes a new PKI.
func LoadOrCreate(dir string, opts Options) (*PKI, error) {
	opts.fill()
	now := opts.Now()
	ca, caErr := loadPair(dir, FileCACert, FileCAKey)
	if caErr == nil && (!ca.Cert.IsCA || now.Add(renewMargin).After(ca.Cert.NotAfter)) {
		caErr = errors.New("CA expired or not a CA")
	}
	if caErr != nil {
		p, err := Generate(opts)
		if err != nil {
			return nil, err
		}
		if _, err := p.WriteFiles(dir); err != nil {
			return nil, err
		}
		return p, nil
	}

	p := &PKI{CA: ca}
	if err := p.loadLeaves(dir, &opts); err != nil {
		p.Created = true
		if err := p.issueSM2Leaves(&opts); err != nil {
			return nil, err
		}
	}
	if !opts.SkipECDSA {
		if err := p.loadECDSA(dir, &opts); err != nil {
			p.Created = true
			if err := p.issueECDSA(&opts); err != nil {
				return nil, err
			}
		}
	}
	if p.Created {
		if _, err := p.WriteFiles(dir); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *PKI) loadLeaves(dir string, opts *Options) error {
	pairs := []struct {
		cert, key string
		dst       *Cert
		server    bool
	}{
		{FileServerSignCert, FileServerSignKey, &p.ServerSign, true},
		{FileServerEncCert, FileServerEncKey, &p.ServerEnc, true},
		{FileClientSignCert, FileClientSignKey, &p.ClientSign, false},
		{FileClientEncCert, FileClientEncKey, &p.ClientEnc, false},
	}
	for _, pr := range pairs {
		c, err := loadPair(dir, pr.cert, pr.key)
		if err != nil {
			return err
		}
		if err := usable(c, p.CA, opts, pr.server); err != nil {
			return fmt.Errorf("%s: %w", pr.cert, err)
		}
		*pr.dst = c
	}
	return nil
}

func (p *PKI) loadECDSA(dir string, opts *Options) error {
	ca, err := loadPair(dir, FileECDSACACert, FileECDSACAKey)
	if err != nil {
		return err
	}
	if opts.Now().Add(renewMargin).After(ca.Cert.NotAfter) {
		return errors.New("ECDSA CA expires")
	}
	srv, err := loadPair(dir, FileECDSAServerCert, FileECDSAServerKey)
	if err != nil {
		return err
	}
	if err := usable(srv, ca, opts, true); err != nil {
		return err
	}
	p.ECDSACA, p.ECDSAServer = &ca, &srv
	return nil
}

// usable checks that c is signed by ca, valid for another renewMargin and,
// for server certificates, covers every requested host.
func usable(c, ca Cert, opts *Options, server bool) error {
	if err := c.Cert.CheckSignatureFrom(ca.Cert); err != nil {
		return fmt.Errorf("not issued by the CA in the folder: %w", err)
	}
	now := opts.Now()
	if now.Add(renewMargin).After(c.Cert.NotAfter) || now.Before(c.Cert.NotBefore) {
		return errors.New("expired or expiring")
	}
	if server {
		dns, ips := splitHosts(opts.Hosts)
		for _, d := range dns {
			if !slices.Contains(c.Cert.DNSNames, d) {
				return fmt.Errorf("does not cover host %s", d)
			}
		}
		for _, ip := range ips {
			if !slices.ContainsFunc(c.Cert.IPAddresses, ip.Equal) {
				return fmt.Errorf("does not cover IP %s", ip)
			}
		}
	}
	return nil
}

func loadPair(dir, certFile, keyFile string) (Cert, error) {
	certs, err := smkey.LoadCertificatesFile(filepath.Join(dir, certFile))
	if err != nil {
		return Cert{}, err
	}
	key, err := smkey.LoadPrivateKeyFile(filepath.Join(dir, keyFile), nil)
	if err != nil {
		return Cert{}, err
	}
	if !smkey.PublicKeysEqual(key, certs[0].PublicKey) {
		return Cert{}, fmt.Errorf("%s does not match %s", keyFile, certFile)
	}
	return Cert{Cert: certs[0], Key: key}, nil
}

// CAPool returns a pool with the SM2 CA (and the ECDSA CA, if any).
func (p *PKI) CAPool() *smx509.CertPool {
	pool := smx509.NewCertPool()
	pool.AddCert(p.CA.Cert)
	if p.ECDSACA != nil {
		pool.AddCert(p.ECDSACA.Cert)
	}
	return pool
}

// CertPEM returns the PEM encoding of c's certificate.
func (c Cert) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})
}

// KeyPEM returns the PKCS#8 PEM encoding of c's key.
func (c Cert) KeyPEM() ([]byte, error) {
	der, err := smx509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
