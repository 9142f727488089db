package daemon

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// wireUpstreamDialers plugs our TLCP and TLS 1.3-SM clients into the
// upstreams that re-encrypt (protocol tlcp / tls13sm), with the material
// conf loaded (CA, client certificates, suites, GmSSL options). Client
// session caches live in env so resumption to backends survives reloads;
// each target has its own sessions in them (proxy.TargetSessions).
func wireUpstreamDialers(env *Env, build uint64, cfg *conf.Config, pc *proxy.Config) error {
	for i := range pc.Upstreams {
		uc := &pc.Upstreams[i]
		var u *conf.Upstream
		for j := range cfg.Upstreams {
			if cfg.Upstreams[j].Name == uc.Name {
				u = &cfg.Upstreams[j]
			}
		}
		if u == nil {
			continue
		}
		m := &u.Material
		t := u.TLS
		connect := u.Timeouts.Connect
		if connect <= 0 {
			connect = conf.DefaultConnectTimeout
		}
		switch u.Protocol {
		case upstreamproto.TLCP:
			c := &tlcp.Config{
				RootCAs:                   conf.SMPool(m.RootCAs),
				ServerName:                t.ServerName,
				InsecureSkipVerify:        t.InsecureSkipVerify,
				CipherSuites:              m.Suites,
				NoClientExtensions:        t.NoExtensions || t.GmSSLCompat,
				ClientECDHEParamsAsVector: t.ECDHEParamsAsVector || t.GmSSLCompat,
				NextProtos:                []string{"http/1.1"},
			}
			if c.NoClientExtensions {
				c.NextProtos = nil
			}
			c.ClientSessionCache = env.store(build, "tlcp-client/"+u.Name+"/"+presentedIdentity(m.Sign, m.Enc), func() any { return tlcp.NewLRUClientSessionCache(256) }).(tlcp.ClientSessionCache)
			if m.Sign != nil && m.Enc != nil {
				c.Certificates = []tlcp.Certificate{{
					SignCertificate: m.Sign.DER(), SignKey: m.Sign.Key,
					EncCertificate: m.Enc.Leaf().Raw, EncKey: m.Enc.Key,
				}}
			}
			uc.DialTLSContext = smDial(connect, proxy.TargetConfigs(func(name, addr string) *tlcp.Config {
				cc := c.Clone()
				cc.ServerName = name
				cc.ClientSessionCache = proxy.TargetSessions[*tlcp.ClientSessionState]{Cache: c.ClientSessionCache, Target: addr}
				return cc
			}, t.ServerName), func(raw net.Conn, cc *tlcp.Config) handshaker { return tlcp.Client(raw, cc) })
		case upstreamproto.TLS13SM:
			c := &tls13sm.Config{
				RootCAs:            conf.SMPool(m.RootCAs),
				ServerName:         t.ServerName,
				InsecureSkipVerify: t.InsecureSkipVerify,
				CipherSuites:       m.Suites,
				NextProtos:         []string{"http/1.1"},
			}
			c.ClientSessionCache = env.store(build, "tls13sm-client/"+u.Name+"/"+presentedIdentity(m.ClientCert), func() any { return tls13sm.NewLRUClientSessionCache(256) }).(tls13sm.ClientSessionCache)
			if kp := m.ClientCert; kp != nil {
				c.Certificates = []tls13sm.Certificate{{Certificate: kp.DER(), PrivateKey: kp.Key, Leaf: kp.Leaf()}}
			}
			uc.DialTLSContext = smDial(connect, proxy.TargetConfigs(func(name, addr string) *tls13sm.Config {
				cc := c.Clone()
				cc.ServerName = name
				cc.ClientSessionCache = proxy.TargetSessions[*tls13sm.ClientSessionState]{Cache: c.ClientSessionCache, Target: addr}
				return cc
			}, t.ServerName), func(raw net.Conn, cc *tls13sm.Config) handshaker { return tls13sm.Client(raw, cc) })
		}
	}
	return nil
}

type handshaker interface {
	net.Conn
	HandshakeContext(context.Context) error
}

func smDial[C any](connect time.Duration, configs func(ctx context.Context, addr string) *C, client func(raw net.Conn, c *C) handshaker) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second, ControlContext: proxy.RefuseUnusable}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := d.DialContext(ctx, network, proxy.DialAddr(ctx, addr))
		if err != nil {
			return nil, err
		}
		c := client(raw, configs(ctx, addr))
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("handshake with %s: %w", addr, err)
		}
		return c, nil
	}
}

// presentedIdentity names the client certificates an upstream presents (""
// without any): its client session cache outlives reloads under the
// upstream's name and this, so that a session made with one identity is
// never resumed after a reload changed or removed it (the backend would
// still see the old certificate).
func presentedIdentity(pairs ...*conf.KeyPair) string {
	var certs []*smx509.Certificate
	for _, kp := range pairs {
		if l := kp.Leaf(); l != nil {
			certs = append(certs, l)
		}
	}
	if len(certs) == 0 {
		return ""
	}
	return hex.EncodeToString(tls13sm.CertificatesFingerprint(certs))
}
