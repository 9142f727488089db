package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

// Files of the key server's mutual-TLS PKI (gmproxy certs -keyserver).
const (
	fileKSCACert     = "keyserver_ca.crt"
	fileKSCAKey      = "keyserver_ca.key"
	fileKSServerCert = "keyserver.crt"
	fileKSServerKey  = "keyserver.key"
	fileKSClientCert = "keyserver_client.crt"
	fileKSClientKey  = "keyserver_client.key"
)

// writeKeyServerMTLS writes an ECDSA P-256 CA, a key server certificate
// (serverAuth, for hosts) and a gmproxy client certificate (clientAuth)
// into dir, for the mutual TLS between gmproxy and gmproxy keyserver. It
// returns the files written.
func writeKeyServerMTLS(dir string, hosts []string, validity time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	w := &mtlsWriter{dir: dir, now: time.Now(), validity: validity}
	ca, caKey, err := w.writeCA()
	if err != nil {
		return nil, err
	}
	if err := w.writeLeaf(ca, caKey, fileKSServerCert, fileKSServerKey, hosts[0], x509.ExtKeyUsageServerAuth, hosts); err != nil {
		return nil, err
	}
	if err := w.writeLeaf(ca, caKey, fileKSClientCert, fileKSClientKey, "gmproxy", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return w.written, nil
}

// mtlsWriter writes the certificates and keys of the key server's PKI,
// valid from an hour before now for validity, as PEM files into dir.
type mtlsWriter struct {
	dir      string
	now      time.Time
	validity time.Duration
	written  []string // the files written so far
}

// write writes der as a PEM block of type typ into the file name, replacing
// the file (see devpki.WriteFile: a key never inherits the mode of a file
// already there, nor follows a symbolic link).
func (w *mtlsWriter) write(name, typ string, der []byte, perm os.FileMode) error {
	p := filepath.Join(w.dir, name)
	if err := devpki.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		return err
	}
	w.written = append(w.written, p)
	return nil
}

// writeKey writes k in PKCS #8, readable by its owner only.
func (w *mtlsWriter) writeKey(name string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return w.write(name, "PRIVATE KEY", der, 0o600)
}

// writeCA creates the self-signed CA and writes its certificate and key.
func (w *mtlsWriter) writeCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	caT := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{Organization: []string{"gmproxy test PKI"}, CommonName: "gmproxy key server CA"},
		NotBefore: w.now.Add(-time.Hour), NotAfter: w.now.Add(w.validity), IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("key server CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	if err := w.write(fileKSCACert, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, nil, err
	}
	if err := w.writeKey(fileKSCAKey, caKey); err != nil {
		return nil, nil, err
	}
	return ca, caKey, nil
}

// writeLeaf creates a certificate for cn with extended key usage eku and
// the host names and IP addresses hosts, signed by ca, and writes it and
// its key.
func (w *mtlsWriter) writeLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile, cn string, eku x509.ExtKeyUsage, hosts []string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	sn, err := randomSerial()
	if err != nil {
		return err
	}
	t := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{Organization: []string{"gmproxy test PKI"}, CommonName: cn},
		NotBefore: w.now.Add(-time.Hour), NotAfter: w.now.Add(w.validity), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, t, ca, &k.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s: %w", cn, err)
	}
	if err := w.write(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return w.writeKey(keyFile, k)
}

// randomSerial returns a random 127-bit certificate serial number.
func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
