package metrics

import (
	"crypto/tls"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gmproxy/gmproxy/frontdoor"
	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/keyoffload"
)

// Label values are kept to bounded sets so that no client-controlled input
// (addresses, paths, SNI, header values) can grow the number of series.
//
//   - fixed vocabularies (protocol, result, op, direction, role, method,
//     cipher) map anything outside the vocabulary to "other";
//   - configuration names (listener, site, route, upstream, target) are
//     admitted first come, first served up to a per-label cap, and must be
//     at most maxNameLen bytes of printable UTF-8 (a Chinese site name is
//     shown as it is); everything else becomes "other". The text
//     exposition escapes \, " and newline in label values, so any such
//     name is written as it is.

// Other is the label value that stands for any value outside a bounded set.
const Other = "other"

// None is the label value used when a value is empty (for example the
// cipher of a handshake that failed before a suite was chosen).
const None = "none"

// Caps on the number of distinct configuration-derived label values:
// names past them, in the order the metrics first see them, are shown as
// "other". MaxSites, MaxRoutes and MaxUpstreams (which bounds key server
// names too) are the caps of the site, route and upstream labels.
const (
	maxListeners = 64
	MaxSites     = 256
	MaxRoutes    = 512
	MaxUpstreams = 256
	maxTargets   = 1024
	maxRefusals  = 16 // distinct ConnRefused reasons
	// maxNameLen bounds a name in bytes: 42 Chinese characters (3 bytes
	// each in UTF-8). A longer name becomes "other" rather than being cut,
	// which could merge two names sharing their first bytes.
	maxNameLen = 128
)

var protocols = set(frontdoor.FamilyTLCP, frontdoor.FamilyTLS13SM, frontdoor.FamilyTLS)

var handshakeResults = set("success",
	frontdoor.ReasonTimeout, frontdoor.ReasonBadCertificate, frontdoor.ReasonNoSharedCipher,
	frontdoor.ReasonProtocolError, frontdoor.ReasonPeerAlert, frontdoor.ReasonEOF,
	frontdoor.ReasonUnknownProto, frontdoor.ReasonRefused, frontdoor.ReasonInternal)

var keyOps = set("sign", "decrypt", "key_agreement")

var keyLocations = set(keyoffload.Local, keyoffload.Remote)

var ticketRejectReasons = set(frontdoor.TicketRejectReasons...)

// Session store ops and results (owned by package sessionstore).
var (
	storeOps     = set(sessionstore.Ops...)
	storeResults = set(sessionstore.Results...)
)

var certRoles = set("sign", "enc", "tls13sm", "tls", "client_ca")

var upstreamCertRoles = set("client", "client_sign", "client_enc", "ca")

var keyServerCertRoles = set("client", "ca")

var clientCertReasons = set(frontdoor.ClientCertReasons...)

var versions = set(frontdoor.ProtoTLCP, frontdoor.ProtoTLS13SM, "TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3")

// httpMethodOrder lists the method label values; its order indexes the
// per-route request counters (reqcache.go).
var httpMethodOrder = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"}

var httpMethods = set(httpMethodOrder[:]...)

// cipherNames is the known set of suite names: TLCP suites in the spellings
// used by Tongsuo, GmSSL and the GB/T standard, the RFC 8998 suites, and
// everything crypto/tls knows.
var cipherNames = func() map[string]bool {
	m := set(
		// TLCP, GB/T 38636-2020 (Tongsuo spelling, which gmproxy reports).
		"ECC-SM2-SM4-CBC-SM3", "ECC-SM2-SM4-GCM-SM3", "ECDHE-SM2-SM4-CBC-SM3", "ECDHE-SM2-SM4-GCM-SM3",
		"ECC-SM2-WITH-SM4-SM3", "ECDHE-SM2-WITH-SM4-SM3", "ECC-SM2-WITH-SM4-GCM-SM3", "ECDHE-SM2-WITH-SM4-GCM-SM3",
		// GmSSL and standard-text spellings.
		"ECC_SM4_CBC_SM3", "ECC_SM4_GCM_SM3", "ECDHE_SM4_CBC_SM3", "ECDHE_SM4_GCM_SM3",
		"TLCP_ECC_SM4_CBC_SM3", "TLCP_ECC_SM4_GCM_SM3", "TLCP_ECDHE_SM4_CBC_SM3", "TLCP_ECDHE_SM4_GCM_SM3",
		// RFC 8998.
		"TLS_SM4_GCM_SM3", "TLS_SM4_CCM_SM3",
	)
	for _, s := range tls.CipherSuites() {
		m[s.Name] = true
	}
	for _, s := range tls.InsecureCipherSuites() {
		m[s.Name] = true
	}
	return m
}()

var cipherMu sync.RWMutex

// RegisterCipherNames adds suite names to the set accepted as values of the
// cipher label (the set is small and fixed; this is for suites added later).
func RegisterCipherNames(names ...string) {
	cipherMu.Lock()
	defer cipherMu.Unlock()
	for _, n := range names {
		if validName(n) {
			cipherNames[n] = true
		}
	}
}

func set(vals ...string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// fixed maps v to itself when it is in vocab, "none" when empty, else "other".
func fixed(vocab map[string]bool, v string) string {
	if v == "" {
		return None
	}
	if vocab[v] {
		return v
	}
	return Other
}

func protocolLabel(v string) string { return fixed(protocols, v) }

func cipherLabel(v string) string {
	if v == "" {
		return None
	}
	cipherMu.RLock()
	ok := cipherNames[v]
	cipherMu.RUnlock()
	if ok {
		return v
	}
	return Other
}

// methodLabel labels a request method. Methods are case-sensitive (RFC 9110
// §9.1): "get" is not GET, and a server may treat it as another method, so
// only an exact spelling of a standard method is shown as that method;
// any other spelling is "other" with the unknown methods, which keeps the
// label bounded.
func methodLabel(v string) string { return fixed(httpMethods, v) }

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// codeClass maps an HTTP status to "1xx".."5xx", or "other".
func codeClass(status int) string {
	if status < 100 || status > 599 {
		return Other
	}
	return string(rune('0'+status/100)) + "xx"
}

// validName reports whether v may be used as a configuration-derived label
// value: non-empty, at most maxNameLen bytes of valid UTF-8, every
// character graphic (letters, marks, numbers, punctuation, symbols and
// spaces, of any script). Control characters (newline, ESC, DEL, C1) and
// format characters (bidirectional overrides, zero-width joiners) are
// refused: they would garble or disguise the name in a terminal or a
// dashboard.
func validName(v string) bool {
	return v != "" && nameProblem(v) == ""
}

// nameProblem says why a non-empty v is not a valid name, "" when it is.
func nameProblem(v string) string {
	if len(v) > maxNameLen {
		return fmt.Sprintf("is %d bytes long, more than the %d a label value may have", len(v), maxNameLen)
	}
	if !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	for _, r := range v {
		if !unicode.IsGraphic(r) {
			return fmt.Sprintf("has the control or format character %U", r)
		}
	}
	return ""
}

// NameProblem says why the configuration name v (of a listener, site,
// route, upstream or key server) will not be told apart in the metrics,
// "" when it will: it is shown as "other", with every name refused and
// those past a label's cap, or it is "other" or "none" itself and mixes
// with those series.
func NameProblem(v string) string {
	switch v {
	case Other:
		return `is the label value "other" the metrics give every name they cannot show, and mixes with them`
	case None:
		return `is the label value "none" the metrics give an empty value, and mixes with it`
	case "":
		return ""
	}
	if p := nameProblem(v); p != "" {
		return p + `: the metrics show it as "other"`
	}
	return ""
}

// admitter admits configuration-derived names up to a cap; later names and
// malformed ones map to "other". Admitted names stay admitted until retain
// forgets them.
type admitter struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
	// retired are the names retain forgot (at most maxRetired): the
	// caches of resolved series keep their deleted children, into which
	// the events of a removed name still draining land unseen, until a
	// configuration names them again.
	retired map[string]struct{}
}

// maxRetired bounds admitter.retired; past it, retain asks for every cached
// series of the label to be resolved again.
const maxRetired = 4096

func newAdmitter(max int) *admitter {
	return &admitter{max: max, seen: make(map[string]struct{}), retired: make(map[string]struct{})}
}

// retain forgets every admitted name not in keep and returns the names
// forgotten, and the names of keep whose cached series must be resolved
// again (back): the names retired before and the names not admitted (which
// may be cached under "other"). all reports that the retired names
// overflowed and every cached series of the label must be resolved again.
func (a *admitter) retain(keep map[string]bool) (gone []string, back map[string]bool, all bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	back = make(map[string]bool)
	for v := range keep {
		_, retired := a.retired[v]
		if _, ok := a.seen[v]; retired || !ok {
			back[v] = true
			delete(a.retired, v)
		}
	}
	for v := range a.seen {
		if !keep[v] {
			delete(a.seen, v)
			gone = append(gone, v)
			a.retired[v] = struct{}{}
		}
	}
	if len(a.retired) > maxRetired {
		clear(a.retired)
		all = true
	}
	return gone, back, all
}

// isRetired reports whether v is a name retain forgot and no
// configuration named again since.
func (a *admitter) isRetired(v string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.retired[v]
	return ok
}

// forget stops counting v, admitted, against the cap.
func (a *admitter) forget(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.seen, v)
}

func (a *admitter) label(v string) string {
	if v == "" {
		return None
	}
	a.mu.RLock()
	_, ok := a.seen[v]
	a.mu.RUnlock()
	if ok {
		return v
	}
	if !validName(v) {
		return Other
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.seen[v]; ok {
		return v
	}
	if len(a.seen) >= a.max {
		return Other
	}
	a.seen[v] = struct{}{}
	return v
}
