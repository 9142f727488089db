package daemon

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	gmecdh "github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/keyserver"
)

// Remote key servers: every key_servers entry of a configuration becomes a
// keyserver.Client (multiplexed mutual-TLS or Unix-socket connections to
// each of its addresses, with failover); site keys that name it become keyserver.RemoteKeys behind
// the offload engine. Clients live in the Env so that a reload that keeps
// a key server's settings keeps its connections; one whose settings
// changed gets a new client, and the old one closes when the last
// generation using it is released.

// keyClient is one key server client with the number of generations
// using it.
type keyClient struct {
	cfg  conf.KeyServer
	c    *keyserver.Client
	refs int
}

// acquireKeyClients returns the clients of cfg's key servers by name,
// counted as used by one more generation until releaseKeyClients: the
// current client of a name when its settings are the same, else a new one,
// current once its generation serves (useKeyClients).
func (e *Env) acquireKeyClients(cfg *conf.Config) []*keyClient {
	if len(cfg.KeyServers) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.allKeyClients == nil {
		e.allKeyClients = map[*keyClient]struct{}{}
	}
	var out []*keyClient
	for _, ks := range cfg.KeyServers {
		kc := e.keyClients[ks.Name]
		if kc == nil || !sameKeyServer(&kc.cfg, &ks) {
			kc = &keyClient{cfg: ks, c: newKeyClient(&ks, e.logger())}
			e.allKeyClients[kc] = struct{}{}
		}
		kc.refs++
		out = append(out, kc)
	}
	return out
}

// useKeyClients makes kcs, the clients of a generation that now serves,
// the current ones: a client they replace, or of a key server no longer
// configured, closes once no generation uses it.
func (e *Env) useKeyClients(kcs []*keyClient) {
	e.mu.Lock()
	cur := make(map[string]*keyClient, len(kcs))
	for _, kc := range kcs {
		cur[kc.cfg.Name] = kc
	}
	var done []*keyClient
	for name, old := range e.keyClients {
		if cur[name] != old && old.refs <= 0 {
			delete(e.allKeyClients, old)
			done = append(done, old)
		}
	}
	e.keyClients = cur
	e.mu.Unlock()
	for _, kc := range done {
		kc.c.Close()
	}
}

// logger returns the Env's logger (slog's default before Build sets it).
func (e *Env) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.Default()
	}
	return e.Logger
}

// releaseKeyClients drops a generation's use of its key clients; a client
// not current (replaced, of a key server no longer configured, or built
// for a refused reload) and no longer used closes its connections.
func (e *Env) releaseKeyClients(kcs []*keyClient) {
	e.mu.Lock()
	var done []*keyClient
	for _, kc := range kcs {
		kc.refs--
		if kc.refs <= 0 && e.keyClients[kc.cfg.Name] != kc {
			if _, live := e.allKeyClients[kc]; live {
				delete(e.allKeyClients, kc)
				done = append(done, kc)
			}
		}
	}
	e.mu.Unlock()
	for _, kc := range done {
		kc.c.Close()
	}
}

// closeKeyClients closes every key client (Env.Close).
func (e *Env) closeKeyClients() {
	e.mu.Lock()
	kcs := e.allKeyClients
	e.keyClients, e.allKeyClients = nil, nil
	e.mu.Unlock()
	for kc := range kcs {
		kc.c.Close()
	}
}

// sameKeyServer reports whether a and b configure the same client: same
// settings and the same loaded certificates and keys.
func sameKeyServer(a, b *conf.KeyServer) bool {
	ma, mb := &a.Material, &b.Material
	if a.Name != b.Name || !slices.Equal(ma.Endpoints, mb.Endpoints) || a.ConnectTimeout != b.ConnectTimeout || a.Timeout != b.Timeout ||
		a.PoolSize != b.PoolSize || a.MaxInFlight != b.MaxInFlight || a.HealthCheckInterval != b.HealthCheckInterval {
		return false
	}
	if (ma.ClientCert == nil) != (mb.ClientCert == nil) || (ma.RootCAs == nil) != (mb.RootCAs == nil) {
		return false
	}
	if ma.RootCAs != nil && !ma.RootCAs.Equal(mb.RootCAs) {
		return false
	}
	if ca, cb := ma.ClientCert, mb.ClientCert; ca != nil {
		if !slices.EqualFunc(ca.Certificate, cb.Certificate, bytes.Equal) {
			return false
		}
		ka, ok := ca.PrivateKey.(interface{ Equal(crypto.PrivateKey) bool })
		if !ok || !ka.Equal(cb.PrivateKey) {
			return false
		}
	}
	return true
}

// newKeyClient returns the client of one key_servers entry.
func newKeyClient(ks *conf.KeyServer, log *slog.Logger) *keyserver.Client {
	m := ks.Material
	connect := durOr(ks.ConnectTimeout, conf.DefaultKeyServerConnectTimeout)
	c := &keyserver.Client{
		Conns:          ks.PoolSize,
		MaxInFlight:    ks.MaxInFlight,
		Timeout:        durOr(ks.Timeout, conf.DefaultKeyServerTimeout),
		HealthInterval: durOr(ks.HealthCheckInterval, conf.DefaultKeyServerHealthInterval),
		Logger:         log.With("key_server", ks.Name),
	}
	for _, e := range m.Endpoints {
		var d interface {
			DialContext(ctx context.Context, network, addr string) (net.Conn, error)
		} = &net.Dialer{}
		if e.Network == "tcp" {
			tc := &tls.Config{RootCAs: m.RootCAs, ServerName: e.ServerName, MinVersion: tls.VersionTLS13}
			if m.ClientCert != nil {
				tc.Certificates = []tls.Certificate{*m.ClientCert}
			}
			d = &tls.Dialer{Config: tc}
		}
		c.Endpoints = append(c.Endpoints, keyserver.Endpoint{Address: e.Addr, Dial: func(ctx context.Context) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, connect)
			defer cancel()
			return d.DialContext(ctx, e.Network, e.Addr)
		}})
	}
	return c
}

// siteKey returns the private key of kp for the handshake stacks: a
// RemoteKey on its key server when conf left a RemoteKeyRef, else kp.Key.
func (b *siteBuild) siteKey(kp *conf.KeyPair) (crypto.Signer, error) {
	ref, ok := kp.Key.(*conf.RemoteKeyRef)
	if !ok {
		return kp.Key, nil
	}
	kc := b.keys[ref.KeyServer]
	if kc == nil {
		return nil, fmt.Errorf("key server %q is not configured", ref.KeyServer)
	}
	pub, ok := ref.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("key server %q: the certificate's key is %T, not SM2", ref.KeyServer, ref.PublicKey)
	}
	return keyserver.NewRemoteKey(kc, pub)
}

// keyClientMap indexes kcs by key server name.
func keyClientMap(kcs []*keyClient) map[string]*keyserver.Client {
	m := make(map[string]*keyserver.Client, len(kcs))
	for _, kc := range kcs {
		m[kc.cfg.Name] = kc.c
	}
	return m
}

// probeRemoteKeys checks, in the background, that every remote key of
// cfg's sites answers on its key server, so that a key server that is
// down or lacks a key shows up in the log at start and reload rather than
// only as failing handshakes. Signing keys sign a throwaway TLCP
// ServerKeyExchange (the key server signs handshake messages only; the
// signature is verified); encryption keys decrypt a random TLCP
// pre-master secret encrypted to them (the key server decrypts nothing
// else). The probes bypass the offload engine, so they do not
// appear in the key-operation metrics. The returned stop cancels the
// probes and waits for them (the generation's Close).
func probeRemoteKeys(log *slog.Logger, cfg *conf.Config, keys map[string]*keyserver.Client) (stop func()) {
	type probe struct {
		site, role string
		kp         *conf.KeyPair
	}
	var probes []probe
	seen := map[*conf.KeyPair]bool{}
	for _, s := range cfg.Sites {
		m := s.Material
		for _, p := range []probe{{s.Name, "sign", m.TLCPSign}, {s.Name, "enc", m.TLCPEnc}, {s.Name, "tls13sm", m.TLS13SM}} {
			if p.kp != nil && p.kp.KeyServer != "" && !seen[p.kp] {
				seen[p.kp] = true
				probes = append(probes, p)
			}
		}
	}
	if len(probes) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range probes {
			err := probeKey(ctx, p.kp, p.role, keys[p.kp.KeyServer])
			if ctx.Err() != nil {
				return // the generation is closed
			}
			if errors.Is(err, errKeyAgreementOnly) {
				log.Info("remote encryption key serves key agreement only: ECDHE handshakes use it, ECC handshakes (TLCP ECC_* suites) fail",
					"site", p.site, "key_server", p.kp.KeyServer, "cert", p.kp.CertFile)
				continue
			}
			if err != nil {
				log.Warn("remote key not usable: handshakes that need it will fail", "site", p.site, "role", p.role,
					"key_server", p.kp.KeyServer, "cert", p.kp.CertFile, "err", err)
				continue
			}
			log.Debug("remote key answers", "site", p.site, "role", p.role, "key_server", p.kp.KeyServer)
		}
	}()
	return func() { cancel(); <-done }
}

// errKeyAgreementOnly: an encryption key the key server serves for key
// agreement (ECDHE) and not for decryption (ECC), a deliberate choice.
var errKeyAgreementOnly = errors.New("the key serves key agreement only")

// probeKeyAgreement asks the key server for one SM2 key agreement with
// rk, with throwaway peer keys, of the shape a TLCP ECDHE server runs
// (the only one the key server answers).
func probeKeyAgreement(ctx context.Context, rk *keyserver.RemoteKey) error {
	var keys [3]*gmecdh.PrivateKey
	for i := range keys {
		k, err := gmecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	_, err := rk.SM2KeyAgree(ctx, keys[0], keys[1].PublicKey(), keys[2].PublicKey(), false, 48, nil, nil)
	return err
}

func probeKey(ctx context.Context, kp *conf.KeyPair, role string, kc *keyserver.Client) error {
	if kc == nil {
		return errors.New("key server not configured")
	}
	pub, ok := kp.Leaf().PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("not an SM2 certificate")
	}
	rk, err := keyserver.NewRemoteKey(kc, pub)
	if err != nil {
		return err
	}
	// Longer than the client's own timeout, so that its error says so.
	ctx, cancel := context.WithTimeout(ctx, durOr(kc.Timeout, conf.DefaultKeyServerTimeout)+time.Second)
	defer cancel()
	if role != "enc" {
		// A throwaway TLCP ServerKeyExchange: the key server signs
		// handshake messages only. The signature is verified (RemoteKey).
		return rk.ProbeSign(ctx)
	}
	secret := make([]byte, 48)
	rand.Read(secret)
	secret[0], secret[1] = 1, 1 // client_version TLCP 1.1: a pre-master secret
	ct, err := sm2.EncryptASN1(rand.Reader, pub, secret)
	if err != nil {
		return err
	}
	pt, err := rk.DecryptContext(ctx, rand.Reader, ct, nil)
	if ke := (*keyserver.Error)(nil); errors.As(err, &ke) && ke.Code == keyserver.CodeWrongRole && probeKeyAgreement(ctx, rk) == nil {
		return errKeyAgreementOnly
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(pt, secret) {
		return errors.New("the key server decrypted to a wrong value")
	}
	return nil
}
