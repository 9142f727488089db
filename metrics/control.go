package metrics

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Control endpoints (POST /reload) change what the process does, so they
// refuse what a browser could be tricked into sending: a page on any site
// can POST to 127.0.0.1 (a "simple" request needs no preflight), and a
// name the attacker controls can be re-pointed at 127.0.0.1 (DNS
// rebinding), so
//
//   - a request carrying Origin is refused (browsers send it with every
//     cross-origin POST; curl, kubectl and sidecars do not);
//   - the Host must be an IP address, "localhost" or the listener's own
//     host name, never a name an attacker could point anywhere;
//   - with a token, "Authorization: Bearer <token>" is required.
//
// A Unix socket is unreachable from browsers: there only the token counts.

// ControlOptions configure GuardControl.
type ControlOptions struct {
	// Token, when set, returns the token that must be presented as
	// "Authorization: Bearer <token>" (none when empty). It is called on
	// every request, so that a reload that replaces a token (one that
	// leaked) refuses the old one from the next request on.
	Token func() []byte
	// HostName is the host of the listener's configured address when it
	// is a name (not an IP address); such a Host is accepted too.
	HostName string
}

// GuardControl wraps a control handler with CheckControl.
func GuardControl(h http.Handler, o ControlOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, why := CheckControl(r, o); code != 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gmproxy control"`)
			}
			w.WriteHeader(code)
			w.Write([]byte(why + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CheckControl returns 0 when r may use a control endpoint, else the status
// to answer and why.
func CheckControl(r *http.Request, o ControlOptions) (int, string) {
	if _, ok := r.Header["Origin"]; ok {
		return http.StatusForbidden, "control requests from browsers (with an Origin header) are refused"
	}
	unix := unixConn(r)
	if !unix && !controlHost(r.Host, o.HostName) {
		return http.StatusForbidden, "Host must be an IP address or localhost"
	}
	if tok := o.token(); len(tok) > 0 {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), tok) != 1 {
			return http.StatusUnauthorized, "a bearer token is required"
		}
	}
	return 0, ""
}

// GuardDebug wraps a handler that reveals the process's internals
// (/debug/pprof/) against browser pages, as far as a GET allows. Any page
// may have a browser load a URL (an <img> sends no Origin) and read the
// answer of its own origin, which DNS rebinding makes the listener's, so
//
//   - the Host must name the listener as a local client would, as for
//     control requests: a rebound name is refused (the page would read
//     the goroutine stacks, heap profiles and command line);
//   - a request the browser says comes from another site (Sec-Fetch-Site
//     cross-site or same-site) is refused: the page would start a CPU
//     profile or a trace of up to ten minutes. go tool pprof and curl send
//     no such header; an operator's browser sends none or same-origin.
//
// hostName is as ControlOptions.HostName. A Unix socket is unreachable
// from browsers: its requests are not checked.
func GuardDebug(h http.Handler, hostName string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !unixConn(r) {
			why := ""
			switch {
			case !controlHost(r.Host, hostName):
				why = "Host must be an IP address or localhost"
			case r.Header.Get("Sec-Fetch-Site") == "cross-site", r.Header.Get("Sec-Fetch-Site") == "same-site":
				why = "debug requests from other sites' pages are refused"
			}
			if why != "" {
				http.Error(w, why, http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// unixConn reports whether r came over a Unix socket.
func unixConn(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && la.Network() == "unix"
}

// bearer returns the credentials of an Authorization value of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 §11.1: "bearer" and
// "BEARER" are Bearer).
func bearer(auth string) (string, bool) {
	const scheme = "Bearer "
	if len(auth) < len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) {
		return "", false
	}
	return auth[len(scheme):], true
}

// token returns the token in force, if any.
func (o ControlOptions) token() []byte {
	if o.Token == nil {
		return nil
	}
	return o.Token()
}

// controlHost reports whether a Host value names the listener as only a
// local client would: an IP literal, localhost, or the configured name.
func controlHost(host, name string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch {
	case host == "":
		return false
	case net.ParseIP(host) != nil, strings.EqualFold(host, "localhost"):
		return true
	}
	return name != "" && net.ParseIP(name) == nil && strings.EqualFold(host, name)
}
