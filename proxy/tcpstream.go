package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
)

// streamSite is a site in TCP stream mode: after the handshake the
// client's plaintext is spliced to a target of the upstream (for legacy
// non-HTTP services), with an idle timeout, byte counters and optionally a
// PROXY protocol header towards the target.
type streamSite struct {
	p           *Proxy
	site        string
	up          *Upstream
	idle        time.Duration
	ppVer       int
	dialTimeout time.Duration
	clientNets  []netip.Prefix // StreamConfig.ClientIP; nil: any client
}

func newStreamSite(p *Proxy, site string, sc *StreamConfig) (*streamSite, error) {
	s := &streamSite{p: p, site: site, idle: durOr(sc.IdleTimeout, 10*time.Minute)}
	s.up = p.upstreams[sc.Upstream]
	if s.up == nil {
		return nil, fmt.Errorf("stream: unknown upstream %q", sc.Upstream)
	}
	s.dialTimeout = s.up.dialTimeout
	if sc.ConnectTimeout > 0 {
		s.dialTimeout = sc.ConnectTimeout
		if upstreamproto.Encrypted(s.up.protocol) {
			s.dialTimeout += s.up.hsTimeout
		}
	}
	switch sc.ProxyProtocol {
	case "":
	case "v1":
		s.ppVer = 1
	case "v2":
		s.ppVer = 2
	default:
		return nil, fmt.Errorf("stream: proxy_protocol %q (want v1 or v2)", sc.ProxyProtocol)
	}
	for _, c := range sc.ClientIP {
		pfx, err := parsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("stream: client_ip %q: %w", c, err)
		}
		s.clientNets = append(s.clientNets, pfx)
	}
	return s, nil
}

// admits reports whether a client may use the stream (client_ip): its
// address, or the IPv4 address a NAT64 one embeds, is in a listed range.
func (s *streamSite) admits(clientIP string) bool {
	if s.clientNets == nil {
		return true
	}
	a, err := netip.ParseAddr(clientIP)
	return err == nil && clientIn(s.clientNets, a)
}

// serve splices c to a target and blocks until both directions end.
func (s *streamSite) serve(c net.Conn) error {
	p := s.p
	start := time.Now()
	if p.accessLog != nil {
		p.accessLog.hold()
		defer p.accessLog.release()
	}
	// A session that arrives once Shutdown began is refused, as the
	// HTTP servers refuse new connections then (it would hold the drain
	// up for its whole grace), and logged as every other one is.
	if p.shutting.Load() || !p.trackAdd(c) {
		s.log(c, http.StatusServiceUnavailable, "", 0, 0, start)
		c.Close()
		return net.ErrClosed
	}
	defer p.trackDone(c)
	defer c.Close()
	u := s.up
	// A handshake that straddled a reload was made under the old
	// generation's site and is served by the new one's: refused when the
	// two differ in client authentication or listener, as an HTTP
	// request on such a connection gets 421 (the client connects again).
	if sc, ok := c.(frontdoor.StateConn); ok {
		if ps := p.siteByName[s.site]; ps != nil {
			st := sc.ConnState()
			if why := p.staleHandshake(ps, &st); why != "" {
				s.log(c, http.StatusForbidden, "", 0, 0, start)
				p.logger.Info("stream: connection refused", "site", s.site, "client", c.RemoteAddr().String(), "reason", why)
				return fmt.Errorf("stream %s: %s", s.site, why)
			}
		}
	}
	clientIP, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	if !s.admits(clientIP) {
		s.log(c, http.StatusForbidden, "", 0, 0, start)
		p.logger.Debug("stream: client not in client_ip", "site", s.site, "client", clientIP)
		return fmt.Errorf("stream %s: client %s not in client_ip", s.site, clientIP)
	}
	var tried [maxTries]*Target
	n := 0
	var back net.Conn
	var t *Target
	var lastErr error
	for n < u.tries {
		t = u.pick(nil, clientIP, tried[:n])
		if t == nil {
			break
		}
		if n > 0 {
			p.obs.UpstreamRetry(u.name) // a target is left to retry on
		}
		tried[n] = t
		n++
		// The stream counts against t from now, as a request does from
		// its pick: over a slow connect or handshake, least_conn and
		// max_conns_per_target would see t idle.
		t.inflight.Add(1)
		ctx, cancel := context.WithTimeout(p.cut, s.dialTimeout)
		var err error
		back, err = u.dial(ctx, "tcp", t.Addr)
		cancel()
		if err == nil {
			break
		}
		t.inflight.Add(-1)
		lastErr = err
		back = nil
		if p.cut.Err() != nil {
			break // Close: not the target's failure
		}
		u.fail(t, err.Error())
		// retries.total_time bounds a stream's retries as a request's
		// (roundTrip): no attempt starts after it.
		if n >= u.tries || (u.tryDur > 0 && time.Since(start) >= u.tryDur) {
			break
		}
	}
	if back == nil {
		why := "every target is down"
		if lastErr != nil {
			why = lastErr.Error()
		}
		addr := ""
		if n > 0 {
			addr = tried[n-1].Addr
		}
		s.log(c, http.StatusBadGateway, addr, 0, 0, start)
		p.logger.Warn("stream: no target answered", "site", s.site, "upstream", u.name, "client", c.RemoteAddr().String(), "reason", why)
		return fmt.Errorf("stream %s: %s", s.site, why)
	}
	defer t.inflight.Add(-1)
	if !p.trackAdd(back) {
		back.Close()
		s.log(c, http.StatusServiceUnavailable, t.Addr, 0, 0, start)
		return net.ErrClosed
	}
	defer p.trackDone(back)
	if s.ppVer != 0 {
		var hdr []byte
		if s.ppVer == 1 {
			hdr = AppendProxyHeaderV1(nil, c.RemoteAddr(), c.LocalAddr())
		} else {
			hdr = AppendProxyHeaderV2(nil, c.RemoteAddr(), c.LocalAddr())
		}
		if _, err := back.Write(hdr); err != nil {
			back.Close()
			s.log(c, http.StatusBadGateway, t.Addr, 0, 0, start)
			return fmt.Errorf("stream %s: proxy header: %w", s.site, err)
		}
	}
	client, target := io.ReadWriteCloser(c), io.ReadWriteCloser(back)
	if s.idle > 0 {
		// A write to the client, or to the target, that takes no byte
		// for idle_timeout ends the stream, also while the other side
		// sends a byte now and then (which keeps the idle watchdog
		// quiet), as nginx stream's proxy_timeout bounds both.
		client = &sendBounded{ReadWriteCloser: c, conn: c, d: s.idle}
		target = &sendBounded{ReadWriteCloser: back, conn: back, d: s.idle}
	}
	defer p.streamOpened(s.site, u.name)()
	in, out := pipe(client, target, s.idle, func(in, out int64) { p.obs.StreamBytes(s.site, u.name, in, out) })
	s.log(c, http.StatusOK, t.Addr, in, out, start)
	return nil
}

// log writes the access-log line of a session with nginx stream's
// $status: 200 spliced to its end, 403 refused by client_ip (or made
// under a client authentication or listener a reload changed), 502 no
// target reached, 503 refused because the proxy is shutting down. Refused and failed sessions are logged too: an audit
// of who reached a service must see who tried.
func (s *streamSite) log(c net.Conn, status int, target string, in, out int64, start time.Time) {
	if s.p.accessLog != nil {
		s.p.accessLog.logStream(s.site, s.up.name, target, c, status, in, out, time.Since(start))
	}
}
