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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	now := time.Now()
	serial := func() (*big.Int, error) {
		return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	}
	var written []string
	write := func(name, typ string, der []byte, perm os.FileMode) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) error {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		return write(name, "PRIVATE KEY", der, 0o600)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	caT := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{Organization: []string{"gmproxy test PKI"}, CommonName: "gmproxy key server CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity), IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("key server CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := write(fileKSCACert, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(fileKSCAKey, caKey); err != nil {
		return nil, err
	}
	leaf := func(certFile, keyFile, cn string, eku x509.ExtKeyUsage, hosts []string) error {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		sn, err := serial()
		if err != nil {
			return err
		}
		t := &x509.Certificate{SerialNumber: sn, Subject: pkix.Name{Organization: []string{"gmproxy test PKI"}, CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{eku}}
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
		if err := write(certFile, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writeKey(keyFile, k)
	}
	if err := leaf(fileKSServerCert, fileKSServerKey, hosts[0], x509.ExtKeyUsageServerAuth, hosts); err != nil {
		return nil, err
	}
	if err := leaf(fileKSClientCert, fileKSClientKey, "gmproxy", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return written, nil
}
