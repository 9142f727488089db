package tlcp

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/namedfile"
	"github.com/gmproxy/gmproxy/internal/record"
	"github.com/gmproxy/gmproxy/internal/smkey"
)

// Server returns a server-side TLCP connection on conn. config must hold at
// least one Certificate or a GetCertificate callback.
func Server(conn net.Conn, config *Config) *Conn {
	c := &Conn{core: record.Conn{Raw: conn, Name: "tlcp"}, config: config}
	return c
}

// Client returns a client-side TLCP connection on conn. config must set
// ServerName or InsecureSkipVerify.
func Client(conn net.Conn, config *Config) *Conn {
	c := &Conn{core: record.Conn{Raw: conn, Name: "tlcp"}, config: config, isClient: true}
	return c
}

// NewListener wraps inner so that accepted connections are TLCP servers.
func NewListener(inner net.Listener, config *Config) net.Listener {
	return record.NewListener(inner, func(c net.Conn) net.Conn { return Server(c, config) })
}

// Listen listens on laddr and returns a TLCP listener.
func Listen(network, laddr string, config *Config) (net.Listener, error) {
	if config == nil || (len(config.Certificates) == 0 && config.GetCertificate == nil && config.GetConfigForClient == nil) {
		return nil, errors.New("tlcp: neither Certificates, GetCertificate, nor GetConfigForClient set in Config")
	}
	return record.Listen(network, laddr, func(c net.Conn) net.Conn { return Server(c, config) })
}

// Dial connects to addr and runs the client handshake.
func Dial(network, addr string, config *Config) (*Conn, error) {
	return DialWithDialer(new(net.Dialer), network, addr, config)
}

// DialWithDialer is Dial with a dialer; its Timeout and Deadline bound the
// handshake too. Without config.ServerName, the host part of addr is used.
func DialWithDialer(dialer *net.Dialer, network, addr string, config *Config) (*Conn, error) {
	return record.DialWithDialer(dialer, network, addr, clientFor(config))
}

// DialContext is Dial with a context bounding the connection and handshake.
func DialContext(ctx context.Context, network, addr string, config *Config) (*Conn, error) {
	return record.DialContext(ctx, new(net.Dialer), network, addr, clientFor(config))
}

// clientFor returns the client constructor of a dial: config (nil meaning
// the zero Config) with ServerName defaulting to the host dialled.
func clientFor(config *Config) func(net.Conn, string) *Conn {
	return func(raw net.Conn, host string) *Conn {
		if config == nil {
			config = &Config{}
		}
		if config.ServerName == "" {
			config = config.Clone()
			config.ServerName = host
		}
		return Client(raw, config)
	}
}

// LoadX509KeyPair reads a TLCP certificate pair from PEM files: the signing
// certificate (leaf first, chain may follow) and key, the encryption
// certificate and key. Keys may be PKCS#8, SEC 1 or encrypted PKCS#8
// (including GmSSL's), decrypted with password. The files must be regular
// files of at most 64 MiB: a FIFO (whose open waits for a writer) or a
// device such as /dev/zero (which never ends) is refused at once.
func LoadX509KeyPair(signCertFile, signKeyFile, encCertFile, encKeyFile string, password []byte) (Certificate, error) {
	var files [4][]byte
	for i, f := range []string{signCertFile, signKeyFile, encCertFile, encKeyFile} {
		b, err := namedfile.Read(f, namedfile.Max)
		if err != nil {
			return Certificate{}, fmt.Errorf("tlcp: %w", err)
		}
		files[i] = b
	}
	c, err := X509KeyPair(files[0], files[1], files[2], files[3], password)
	if err != nil {
		return Certificate{}, fmt.Errorf("%w (files %s, %s, %s, %s)", err, signCertFile, signKeyFile, encCertFile, encKeyFile)
	}
	return c, nil
}

// X509KeyPair parses a TLCP certificate pair from PEM data and checks that
// each key matches its certificate and that the key usages fit: signing
// certificate digitalSignature, encryption certificate keyEncipherment,
// dataEncipherment or keyAgreement.
func X509KeyPair(signCertPEM, signKeyPEM, encCertPEM, encKeyPEM, password []byte) (Certificate, error) {
	var c Certificate
	signCerts, err := smkey.ParseCertificatesPEM(signCertPEM)
	if err != nil {
		return c, fmt.Errorf("tlcp: signing certificate: %w", err)
	}
	encCerts, err := smkey.ParseCertificatesPEM(encCertPEM)
	if err != nil {
		return c, fmt.Errorf("tlcp: encryption certificate: %w", err)
	}
	signKey, err := smkey.ParsePrivateKeyPEM(signKeyPEM, password)
	if err != nil {
		return c, fmt.Errorf("tlcp: signing key: %w", err)
	}
	encKey, err := smkey.ParsePrivateKeyPEM(encKeyPEM, password)
	if err != nil {
		return c, fmt.Errorf("tlcp: encryption key: %w", err)
	}
	for _, sc := range signCerts {
		c.SignCertificate = append(c.SignCertificate, sc.Raw)
	}
	c.Leaf, c.EncLeaf = signCerts[0], encCerts[0]
	c.EncCertificate = encCerts[0].Raw
	c.SignKey, c.EncKey = signKey, encKey
	if err := c.check(); err != nil {
		return Certificate{}, err
	}
	return c, nil
}

// check verifies key/certificate matches and key usages.
func (c *Certificate) check() error {
	if err := c.complete(); err != nil {
		return fmt.Errorf("tlcp: %w", err)
	}
	var err error
	if c.Leaf == nil {
		if c.Leaf, err = smx509.ParseCertificate(c.SignCertificate[0]); err != nil {
			return fmt.Errorf("tlcp: signing certificate: %w", err)
		}
	}
	if c.EncLeaf == nil {
		if c.EncLeaf, err = smx509.ParseCertificate(c.EncCertificate); err != nil {
			return fmt.Errorf("tlcp: encryption certificate: %w", err)
		}
	}
	if _, err := sm2Public(c.Leaf); err != nil {
		return fmt.Errorf("tlcp: signing %w", err)
	}
	if _, err := sm2Public(c.EncLeaf); err != nil {
		return fmt.Errorf("tlcp: encryption %w", err)
	}
	if c.SignKey == nil || !smkey.PublicKeysEqual(c.SignKey, c.Leaf.PublicKey) {
		return errors.New("tlcp: signing private key does not match the signing certificate")
	}
	var encPub crypto.PublicKey
	if s, ok := c.EncKey.(interface{ Public() crypto.PublicKey }); ok {
		encPub = s.Public()
	} else if ka := smkey.AsKeyAgreement(c.EncKey); ka != nil {
		encPub = ka.Public()
	}
	if !publicKeysEqual(encPub, c.EncLeaf.PublicKey) {
		return errors.New("tlcp: encryption private key does not match the encryption certificate")
	}
	if err := checkSignUsage(c.Leaf); err != nil {
		return fmt.Errorf("tlcp: %w", err)
	}
	if err := checkEncUsage(c.EncLeaf); err != nil {
		return fmt.Errorf("tlcp: %w", err)
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type eq interface{ Equal(crypto.PublicKey) bool }
	if e, ok := a.(eq); ok && a != nil {
		return e.Equal(b)
	}
	return false
}
