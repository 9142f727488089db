package daemon

import (
	"crypto/tls"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/proxy"
	"github.com/gmproxy/gmproxy/proxy/upstreamproto"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

// proxyConfig maps the YAML configuration onto the proxy's plain structs.
func proxyConfig(cfg *conf.Config) proxy.Config {
	pc := proxy.Config{TrustedProxies: cfg.TrustedProxies}
	if len(cfg.Listeners) > 0 {
		// The proxy's own limits, for connections handed over without a
		// listener's (the daemon gives each connection its listener's:
		// HTTPLimits, proxy.ConnContextLimits).
		h := cfg.Listeners[0].HTTP
		pc.Limits = proxy.LimitsConfig{
			MaxHeaderBytes:       int(h.MaxHeaderBytes),
			ReadHeaderTimeout:    h.ReadHeaderTimeout,
			ReadTimeout:          h.ReadTimeout,
			WriteTimeout:         h.WriteTimeout,
			IdleTimeout:          h.IdleTimeout,
			MaxConcurrentStreams: uint32(h.MaxConcurrentStreams),
			BodyTimeout:          offIfZero(h.BodyTimeout),
			SendTimeout:          offIfZero(h.SendTimeout),
			HTTP2MaxResetRate:    h.HTTP2MaxResetRate,
			MaxRequestsPerClient: h.MaxRequestsPerClient,
			RequestBuffer:        offIfZeroSize(h.RequestBuffer),
		}
	}
	if p := cfg.AccessLog.Path; p != "" && p != "off" {
		pc.AccessLog = proxy.AccessLogConfig{Path: cfg.Resolve(p), Format: cfg.AccessLog.Format, Template: cfg.AccessLog.Template,
			QueueSize: int(cfg.AccessLog.Buffer), FlushInterval: cfg.AccessLog.Flush}
	}
	for i := range cfg.Upstreams {
		pc.Upstreams = append(pc.Upstreams, upstreamConfig(&cfg.Upstreams[i]))
	}
	// The sites of each listener, as listenerSpec gives them to its
	// handshakes: a reload that takes a site off a listener reaches the
	// connections made for it there too.
	pc.ListenerSites = make(map[string][]string, len(cfg.Listeners))
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		var names []string
		for _, s := range cfg.Sites {
			if len(l.Sites) == 0 || slices.Contains(l.Sites, s.Name) {
				names = append(names, s.Name)
			}
		}
		pc.ListenerSites[l.Address] = names
	}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		sc := proxy.SiteConfig{Name: s.Name, ServerNames: s.ServerNames, ClientAuth: clientAuthPolicy(s) != "", ClientAuthPolicy: clientAuthPolicy(s),
			CaseInsensitivePaths: s.CaseInsensitivePaths, ErrorPages: s.Material.ErrorPages, RequestIDHeader: s.RequestID,
			Families: siteFamilies(&s.Material), Handshakes: siteHandshakes(&s.Material)}
		for _, r := range s.Routes {
			rc := routeConfig(r)
			if rc.Files != nil && !filepath.IsAbs(rc.Files.Root) {
				// Against the configuration's folder, as validation
				// checked it: not Resolve, which keeps the access
				// log's words off, stdout and stderr as they are.
				rc.Files.Root = filepath.Join(cfg.Dir, rc.Files.Root)
			}
			sc.Routes = append(sc.Routes, rc)
		}
		if st := s.Stream; st != nil {
			up := st.Upstream
			if up == "" && st.Target != "" {
				// A single target: an upstream of its own.
				up = "stream:" + s.Name
				pc.Upstreams = append(pc.Upstreams, proxy.UpstreamConfig{
					Name:      up,
					Targets:   []proxy.TargetConfig{{Address: st.Target, Weight: 1}},
					Transport: proxy.TransportConfig{ConnectTimeout: st.ConnectTimeout},
				})
			}
			sc.Stream = &proxy.StreamConfig{Upstream: up, IdleTimeout: st.IdleTimeout, ProxyProtocol: st.SendProxyProtocol, ConnectTimeout: st.ConnectTimeout,
				ClientIP: st.ClientIP}
		}
		pc.Sites = append(pc.Sites, sc)
	}
	return pc
}

// siteFamilies returns the handshake families a site has certificates
// for, as buildSite gives it handshakers: the proxy serves a request by
// Host on a connection made for another site only when the Host's site
// could have made that connection (an SM-only site is never reached
// over an RSA/ECDSA handshake, nor the reverse).
func siteFamilies(m *conf.SiteMaterial) []string {
	var f []string
	if m.TLCPSign != nil && m.TLCPEnc != nil {
		f = append(f, frontdoor.FamilyTLCP)
	}
	if m.TLS13SM != nil {
		f = append(f, frontdoor.FamilyTLS13SM)
	}
	if m.TLS != nil {
		f = append(f, frontdoor.FamilyTLS)
	}
	return f
}

// siteHandshakes returns, by family, the protocol versions and cipher
// suites a site's handshakes can end with, as buildSite configures them
// (a suite list left empty is the stack's default): a request reaches
// the site by Host on a connection made for another only when that
// connection's are among them.
func siteHandshakes(m *conf.SiteMaterial) map[string]proxy.HandshakeParams {
	names := func(ids, def []uint16, name func(uint16) string) []string {
		if len(ids) == 0 {
			ids = def
		}
		var n []string
		for _, id := range ids {
			n = append(n, name(id))
		}
		return n
	}
	hs := map[string]proxy.HandshakeParams{}
	if m.TLCPSign != nil && m.TLCPEnc != nil {
		hs[frontdoor.FamilyTLCP] = proxy.HandshakeParams{Ciphers: names(m.TLCPSuites, tlcp.CipherSuites(), tlcp.CipherSuiteName)}
	}
	if m.TLS13SM != nil {
		hs[frontdoor.FamilyTLS13SM] = proxy.HandshakeParams{Ciphers: names(m.TLS13SMSuites, tls13sm.CipherSuites(), tls13sm.CipherSuiteName)}
	}
	if m.TLS != nil && m.TLSMinVersion == tls.VersionTLS13 {
		hs[frontdoor.FamilyTLS] = proxy.HandshakeParams{Protocols: []string{"TLSv1.3"}}
	}
	return hs
}

// UpstreamTargets returns the upstreams of cfg as the proxy names them,
// each with its targets' addresses: those of upstreams, and the upstream
// of its own that a stream site with a single target (stream.target)
// gets, which no entry of upstreams names. What reports by upstream
// (metrics) keeps these series across a reload.
func UpstreamTargets(cfg *conf.Config) map[string][]string {
	ups := proxyConfig(cfg).Upstreams
	out := make(map[string][]string, len(ups))
	for _, u := range ups {
		addrs := make([]string, 0, len(u.Targets))
		for _, t := range u.Targets {
			addrs = append(addrs, t.Address)
		}
		out[u.Name] = addrs
	}
	return out
}

// SiteUpstreams returns the upstreams each site of cfg sends streams to,
// as the proxy names them: its stream's (the upstream of its own of a
// single target too) and its routes' (their tunnels: WebSocket, extended
// CONNECT). Every site has an entry, nil when it names none. What reports
// by site and upstream (metrics' stream series) drops by it the pairs a
// reload ended.
func SiteUpstreams(cfg *conf.Config) map[string][]string {
	sites := proxyConfig(cfg).Sites
	out := make(map[string][]string, len(sites))
	for _, s := range sites {
		var ups []string
		if s.Stream != nil {
			ups = append(ups, s.Stream.Upstream)
		}
		for _, r := range s.Routes {
			if r.Upstream != "" && !slices.Contains(ups, r.Upstream) {
				ups = append(ups, r.Upstream)
			}
		}
		out[s.Name] = ups
	}
	return out
}

// offIfZero maps conf's "0 means no limit" onto the proxy's "negative
// means no limit" (its zero is the default).
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// offIfZeroSize is offIfZero for sizes.
func offIfZeroSize(n conf.ByteSize) int {
	if n == 0 {
		return -1
	}
	return int(n)
}

// routeTimeout is a route's own timeout for the proxy: 0 (the upstream's
// or listener's) when left out, -1 (no limit) for 0.
func routeTimeout(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return offIfZero(*d)
}

// rateLimitConfig is a route's rate_limit for the proxy; nil without one.
func rateLimitConfig(r *conf.RateLimit) *proxy.RateLimitConfig {
	if r == nil {
		return nil
	}
	return &proxy.RateLimitConfig{Interval: r.Rate.Interval(), Burst: r.Burst, Zone: r.Zone}
}

// routeKey is the name a route keeps across reloads (its rate_limit
// counts with it): "" (its name) for a route the file names, else what it
// matches, as conf.RateLimit says, not the route<N> of its place. The
// path alone would not do: routes of one path told apart by host, header
// or client_ip were known by their rank among the routes of that path,
// which a reload removing one of them gave to another.
func routeKey(r *conf.Route) string {
	if !r.NameByPlace {
		return ""
	}
	k := []string{proxy.RouteLabel(&proxy.RouteConfig{Path: r.Path, PathPrefix: r.PathPrefix, PathRegex: r.PathRegex})}
	if r.Path != "" {
		k[0] = "=" + k[0] // an exact path, not the prefix that reads the same
	}
	add := func(kind string, vals []string) {
		if len(vals) > 0 {
			vals = slices.Clone(vals)
			slices.Sort(vals) // the order they are written in matches the same
			k = append(k, kind+strings.Join(vals, ","))
		}
	}
	add("host=", r.Host)
	add("client_ip=", r.ClientIP)
	hs := make([]string, 0, len(r.Header))
	for n, v := range r.Header {
		hs = append(hs, strconv.Quote(strings.ToLower(n))+":"+strconv.Quote(v))
	}
	add("header=", hs)
	return strings.Join(k, " ")
}

func routeConfig(r conf.Route) proxy.RouteConfig {
	rc := proxy.RouteConfig{
		Name:            r.Name,
		Key:             routeKey(&r),
		Hosts:           r.Host,
		ClientIP:        r.ClientIP,
		PathPrefix:      r.PathPrefix,
		Path:            r.Path,
		PathRegex:       r.PathRegex,
		Upstream:        r.Upstream,
		StripPrefix:     r.StripPrefix,
		RequestHeaders:  proxy.HeaderOps{Set: r.RequestHeaders.Set, Add: r.RequestHeaders.Add, Remove: r.RequestHeaders.Remove},
		ResponseHeaders: proxy.HeaderOps{Set: r.ResponseHeaders.Set, Add: r.ResponseHeaders.Add, Remove: r.ResponseHeaders.Remove},
		MaxBodyBytes:    int64(r.MaxBody),
		RateLimit:       rateLimitConfig(r.RateLimit),
		AllowTrailers:   r.AllowTrailers,
		// The route's own: the site's other routes do not send the
		// client's certificate to their upstreams.
		TLSInfoHeaders:    r.TLSInfoHeaders,
		ClientCertHeaders: r.ClientCertHeaders,
		ClientCertPEM:     r.ClientCertPEM,
		Upgrades:          r.Upgrades,
		// conf: idempotent requests are retried after a failure regardless.
		RetryIdempotent: true,
	}
	if r.Retries != nil {
		rp := retryConfig(r.Retries)
		rc.Retries = &rp
	}
	if f := r.Files; f != nil {
		rc.Files = &proxy.FilesConfig{Root: f.Root, Index: f.Index, Hidden: f.Hidden, Precompressed: f.Precompressed, Charset: f.Charset, Fallback: f.Fallback, Types: f.Types}
	}
	if a := r.BasicAuth; a != nil {
		rc.BasicAuth = &proxy.BasicAuthConfig{Realm: a.Realm, Users: a.Users, FailuresPerMinute: a.FailuresPerMinute}
	}
	if c := r.Compress; c != nil {
		// min_length 0: every length (the proxy's 0 is its default).
		rc.Compress = &proxy.CompressConfig{Types: c.Types, MinLength: max(int64(c.MinLength), 1), Level: c.Level}
	}
	if t := r.Timeouts; t != nil {
		rc.ReadTimeout, rc.BodyTimeout = routeTimeout(t.Read), routeTimeout(t.Body)
		rc.ResponseHeaderTimeout = routeTimeout(t.ResponseHeader)
		rc.SendTimeout = routeTimeout(t.Send)
	}
	switch r.HostHeader {
	case "", "passthrough":
	case "upstream":
		rc.HostHeader = "{upstream}"
	default:
		rc.HostHeader = r.HostHeader
	}
	// Every header matcher must match (conf.Route), in a fixed order.
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := r.Header[n]
		if v == "*" {
			v = ""
		}
		rc.Headers = append(rc.Headers, proxy.HeaderMatch{Name: n, Value: v})
	}
	if r.Respond != nil {
		rc.Respond = &proxy.RespondConfig{Status: r.Respond.Status, Body: r.Respond.Body, ContentType: r.Respond.ContentType}
	}
	if r.Redirect != nil {
		rc.Redirect = &proxy.RedirectConfig{To: r.Redirect.To, Status: r.Redirect.Status}
	}
	return rc
}

func upstreamConfig(u *conf.Upstream) proxy.UpstreamConfig {
	uc := proxy.UpstreamConfig{
		Name:       u.Name,
		Balance:    u.Balance,
		HashHeader: u.HashKey.Header,
		HashCookie: u.HashKey.Cookie,
		Transport: proxy.TransportConfig{
			ConnectTimeout: u.Timeouts.Connect,
			// timeouts.connect bounds the TLS/TLCP handshake after the
			// connect too, as nginx's proxy_connect_timeout does: with
			// the proxy's fixed default, a target that accepted and
			// never answered held each request for 10 s more.
			HandshakeTimeout:        u.Timeouts.Connect,
			ResponseHeaderTimeout:   u.Timeouts.ResponseHeader,
			IdleTimeout:             u.Timeouts.Idle,
			ReadTimeout:             offIfZero(u.Timeouts.Read),
			WriteTimeout:            offIfZero(u.Timeouts.Write),
			MaxResponseHeaderBytes:  int64(u.MaxResponseHeaderBytes),
			MaxResponseHeaderFields: u.MaxResponseHeaderFields,
			TunnelIdleTimeout:       offIfZero(u.Timeouts.TunnelIdle),
			H2PingTimeout:           u.Timeouts.H2Ping,
			GRPCTimeoutMax:          offIfZero(u.Timeouts.GRPCTimeoutMax),
			MaxIdleConns:            u.Keepalive.MaxIdle,
			MaxConnsPerTarget:       u.Keepalive.MaxConns,
		},
		Retries:         retryConfig(&u.Retries),
		ResolveInterval: u.ResolveInterval,
	}
	if u.Keepalive.MaxIdle == 0 {
		uc.Transport.MaxIdleConns = -1 // conf: 0 disables keep-alive
	}
	for _, t := range u.Targets {
		uc.Targets = append(uc.Targets, proxy.TargetConfig{Address: t.Address, Weight: t.Weight, Backup: t.Backup})
	}
	uc.Protocol = u.Protocol
	if uc.Protocol == "" {
		uc.Protocol = upstreamproto.HTTP
	}
	if upstreamproto.Encrypted(uc.Protocol) {
		t := u.TLS
		uc.TLS = &proxy.UpstreamTLSConfig{
			ServerName: t.ServerName, CA: t.CA, InsecureSkipVerify: t.InsecureSkipVerify,
			Cert: t.Cert, Key: t.Key,
			SignCert: t.SignCert, SignKey: t.SignKey, EncCert: t.EncCert, EncKey: t.EncKey,
			Ciphers:                   t.Ciphers,
			NoClientExtensions:        t.NoExtensions || t.GmSSLCompat,
			ClientECDHEParamsAsVector: t.ECDHEParamsAsVector || t.GmSSLCompat,
		}
		if uc.Protocol == upstreamproto.TLS || uc.Protocol == upstreamproto.H2 {
			// What conf loaded, not the names again: they are relative
			// to the configuration's folder, not the working directory,
			// and the key may need its password. (The SM protocols'
			// dialers take conf's material too: wireUpstreamDialers.)
			m := &u.Material
			uc.TLS.CA, uc.TLS.Cert, uc.TLS.Key = "", "", ""
			if len(m.RootCAs) > 0 {
				uc.TLS.RootCAs, _ = conf.X509Pool(m.RootCAs)
			}
			if m.ClientCert != nil {
				c := m.ClientCert.TLSCertificate()
				uc.TLS.Certificate = &c
			}
		}
	}
	p := u.HealthChecks.Passive
	uc.HealthCheck.Passive = proxy.PassiveHealthConfig{MaxFails: p.MaxFails, FailWindow: p.FailWindow, Cooldown: p.CoolDown, UnhealthyStatus: p.UnhealthyStatus}
	if p.MaxFails == 0 {
		uc.HealthCheck.Passive.MaxFails = -1 // conf: 0 disables
	}
	if a := u.HealthChecks.Active; a != nil {
		path := a.Path
		if path == "" {
			path = "/"
		}
		uc.HealthCheck.Active = proxy.ActiveHealthConfig{Type: a.Type, Service: a.Service, Path: path, Host: a.Host, ExpectStatus: a.ExpectStatus,
			Interval: a.Interval, Timeout: a.Timeout, Rise: a.Rise, Fall: a.Fall}
	}
	return uc
}

// retryConfig maps a retry policy (an upstream's or a route's).
func retryConfig(r *conf.Retries) proxy.RetryConfig {
	return proxy.RetryConfig{Tries: r.Tries, Duration: r.TotalTime, NonIdempotent: r.RetryNonIdempotent}
}
