//go:build !go1.27 || http2legacy

package proxy

import "net/http"

// H2BaseConfig is the ServeConnOpts.BaseConfig for an h2 connection whose
// http2.Server was bound to base by http2.ConfigureServer. Before Go 1.27,
// x/net/http2's own server takes its limits (MaxHeaderBytes, timeouts)
// only from the BaseConfig, and base.Shutdown reaches the connection
// through the binding.
func H2BaseConfig(base *http.Server) *http.Server { return base }
