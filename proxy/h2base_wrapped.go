//go:build go1.27 && !http2legacy

package proxy

import "net/http"

// H2BaseConfig is the ServeConnOpts.BaseConfig for an h2 connection whose
// http2.Server was bound to base by http2.ConfigureServer. On Go 1.27,
// x/net/http2 wraps net/http's own HTTP/2 server, which serves such a
// connection from base itself when no BaseConfig is given; given one, it
// serves from a one-off copy that base.Shutdown (GOAWAY) never reaches.
func H2BaseConfig(base *http.Server) *http.Server { return nil }
