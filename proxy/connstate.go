package proxy

import (
	"context"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// connInfo is what the proxy keeps per client connection in the request
// context: the handshake state, whether a request was already logged (the
// handshake time is reported on the first request only), the TLS and
// client-certificate header values (computed once per connection), and
// the client trace that tells the retry logic whether an HTTP/1 request's
// headers reached the backend.
type connInfo struct {
	state     frontdoor.ConnState
	hasState  bool
	requested atomic.Bool

	// wrote is set by trace.WroteHeaders. The connection context carries
	// trace, so every request of the connection reports into wrote; only
	// HTTP/1 requests use it (they run one at a time per connection),
	// HTTP/2 streams get a per-request trace instead.
	wrote atomic.Bool
	trace httptrace.ClientTrace

	// limits are the limits of the connection's listener, nil: the
	// proxy's own (ConnContextLimits).
	limits *LimitsConfig
	// client is the address max_requests_per_client counts the
	// connection's requests by (valid when the peer address is IP),
	// except those a trusted proxy sends for its clients (requestClient).
	client netip.Addr
	// conn is the client connection (ConnContext's; nil otherwise): an
	// HTTP/2 response stalled past its send_timeout on a connection that
	// takes nothing has it cut (initSend).
	conn net.Conn

	// compressing counts the connection's responses being compressed
	// (maxCompressingPerConn).
	compressing atomic.Int32

	tlsOnce sync.Once
	tlsVals tlsValues
	pemOnce sync.Once
	pemVal  []string
}

// tlsValues are the header values derived from the handshake state. The
// slices have len == cap == 1 and are shared by every request of the
// connection: they are put into header maps but never written through
// (an append copies them).
type tlsValues struct {
	protocol, cipher, reused []string
	verify                   []string
	subjectDN, issuerDN      []string
	serial                   []string
	subject                  string // client certificate subject DN, "" without one
}

var (
	reusedYes  = []string{"r"}
	reusedNo   = []string{"."}
	verifyNone = []string{"NONE"}
	verifyOK   = []string{"SUCCESS"}
)

func one(s string) []string { return []string{s} }

// nameValues holds one shared header value per protocol and cipher name
// (a small closed set), so that a connection's TLS headers cost no
// allocation; past maxNameValues names (never, with the known protocols
// and suites) values are made per connection.
var (
	nameValues    sync.Map // string → []string, len == cap == 1
	nameValuesLen atomic.Int32
)

const maxNameValues = 256

// nameValue returns the header value []string{s}, shared when s is a name
// seen before.
func nameValue(s string) []string {
	if v, ok := nameValues.Load(s); ok {
		return v.([]string)
	}
	v := one(s)
	if nameValuesLen.Load() < maxNameValues {
		if old, loaded := nameValues.LoadOrStore(s, v); loaded {
			return old.([]string)
		}
		nameValuesLen.Add(1)
	}
	return v
}

func (ci *connInfo) computeTLS() {
	st, v := &ci.state, &ci.tlsVals
	v.protocol, v.cipher = nameValue(st.Protocol), nameValue(st.Cipher)
	v.reused = reusedNo
	if st.Resumed {
		v.reused = reusedYes
	}
	c := ci.peerCert()
	switch {
	case c != nil && st.ClientAuth:
		v.verify = verifyOK
	case c != nil && st.ClientVerifyError != "":
		// client_auth optional_no_ca took a certificate that does not
		// verify: nginx's $ssl_client_verify "FAILED:reason", with the
		// certificate's headers as nginx sends them. They identify no
		// one: the backend must check this header before trusting them,
		// and a route matching SUCCESS does not match.
		v.verify = one("FAILED:" + st.ClientVerifyError)
	default:
		// No certificate, or one nobody verified (a TLCP ECDHE client's
		// certificates on a site without client authentication): it
		// identifies no one, so no identity header is derived from it.
		v.verify = verifyNone
		return
	}
	v.subject = dnString(encodedDN(c.RawSubject, &c.Subject))
	v.subjectDN, v.issuerDN = one(v.subject), one(dnString(encodedDN(c.RawIssuer, &c.Issuer)))
	if c.SerialNumber != nil {
		v.serial = one(serialHex(c.SerialNumber))
	}
}

// serialHex writes a certificate serial as nginx's $ssl_client_serial
// does (OpenSSL's i2a_ASN1_INTEGER): its bytes in upper-case hex, two
// digits each ("0A1B", not big.Int's "A1B"; "00" for zero), a minus sign
// before a negative one. A backend's list of serials taken from nginx
// matches them so.
func serialHex(n *big.Int) string {
	b := n.Bytes()
	if len(b) == 0 {
		b = []byte{0}
	}
	h := strings.ToUpper(hex.EncodeToString(b))
	if n.Sign() < 0 {
		h = "-" + h
	}
	return h
}

// encodedDN returns the name der (a certificate's RawSubject or
// RawIssuer) in RFC 2253 form: every attribute, in the certificate's
// order with the last RDN first, as nginx's $ssl_client_s_dn writes it.
// pkix.Name.String (n, used when der does not parse) keeps the last of
// two CNs only, flattens multi-valued RDNs and orders the attributes its
// own way: two certificates ("CN=joe,CN=admin,O=Bank" and "CN=joe,O=Bank")
// would show one identity.
func encodedDN(der []byte, n *pkix.Name) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdns); err == nil && len(rest) == 0 {
		return rdns.String()
	}
	return n.String()
}

// dnString escapes the control characters of a distinguished name as
// RDNSequence.String writes it (it leaves them as they are: a UTF8String
// attribute may hold any) as RFC 4514 §2.4 hex pairs, "\00", as nginx's
// $ssl_client_s_dn does. A header value cannot carry them (RFC 9110
// §5.5): http.Transport refuses to send one, a target refuses it, and a
// backend in C would take "CN=admin\x00.evil" for "CN=admin".
func dnString(s string) string {
	i := strings.IndexFunc(s, isCTL)
	if i < 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := []byte(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; isCTL(rune(c)) {
			b = append(b, '\\', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func isCTL(r rune) bool { return r < ' ' || r == 0x7f }

func (ci *connInfo) computePEM() {
	if c := ci.peerCert(); c != nil && (ci.state.ClientAuth || ci.state.ClientVerifyError != "") {
		b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		ci.pemVal = one(strings.ReplaceAll(url.QueryEscape(string(b)), "+", "%20"))
	}
}

func (ci *connInfo) peerCert() *smx509.Certificate {
	if len(ci.state.PeerCertificates) == 0 {
		return nil
	}
	return ci.state.PeerCertificates[0] // may be nil
}

// tls returns the connection's TLS header values (hasState must be true).
func (ci *connInfo) tls() *tlsValues {
	ci.tlsOnce.Do(ci.computeTLS)
	return &ci.tlsVals
}

// certPEM returns the URL-escaped PEM of the client certificate, or nil.
func (ci *connInfo) certPEM() []string {
	ci.pemOnce.Do(ci.computePEM)
	return ci.pemVal
}

type connInfoKey struct{}

// newConnContext attaches ci and its client trace to a connection context.
func newConnContext(ctx context.Context, ci *connInfo) context.Context {
	ci.trace.WroteHeaders = func() { ci.wrote.Store(true) }
	ctx = context.WithValue(ctx, connInfoKey{}, ci)
	return httptrace.WithClientTrace(ctx, &ci.trace)
}

// WithConnState returns a context carrying the handshake state of a
// connection. The daemon calls it from http.Server.ConnContext (see
// ConnContext); the proxy reads it for forwarded/TLS headers and the access
// log.
func WithConnState(ctx context.Context, st frontdoor.ConnState) context.Context {
	return newConnContext(ctx, &connInfo{state: st, hasState: true})
}

// ConnStateFrom returns the handshake state stored by WithConnState.
func ConnStateFrom(ctx context.Context) (frontdoor.ConnState, bool) {
	ci, _ := ctx.Value(connInfoKey{}).(*connInfo)
	if ci == nil || !ci.hasState {
		return frontdoor.ConnState{}, false
	}
	return ci.state, true
}

// ConnContext is an http.Server.ConnContext function: connections that
// implement frontdoor.StateConn get their state attached; others get an
// empty per-connection record so that first-request logic still works.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{}
	if sc, ok := c.(frontdoor.StateConn); ok {
		ci.state, ci.hasState = sc.ConnState(), true
	}
	ci.client, _ = frontdoor.ClientKey(c.RemoteAddr())
	ci.conn = c
	return newConnContext(ctx, ci)
}

// ConnContextLimits is ConnContext for a connection whose listener has
// limits of its own: the body and send timeouts (and the read and write
// timeouts that bound them) of its requests are l's, not the proxy's. l
// has its defaults applied (LimitsConfig.WithDefaults) and must not
// change while the connection lasts.
func ConnContextLimits(ctx context.Context, c net.Conn, l *LimitsConfig) context.Context {
	ctx = ConnContext(ctx, c)
	connInfoFrom(ctx).limits = l
	return ctx
}

// limitsOf returns the limits that apply to a request of ci's connection.
func (p *Proxy) limitsOf(ci *connInfo) *LimitsConfig {
	if ci != nil && ci.limits != nil {
		return ci.limits
	}
	return &p.limits
}

func connInfoFrom(ctx context.Context) *connInfo {
	ci, _ := ctx.Value(connInfoKey{}).(*connInfo)
	return ci
}
