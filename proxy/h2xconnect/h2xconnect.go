// Package h2xconnect turns on RFC 8441 extended CONNECT (WebSockets over
// HTTP/2) in golang.org/x/net/http2 servers when imported for its side
// effect:
//
//	import _ "github.com/gmproxy/gmproxy/proxy/h2xconnect"
//
// x/net/http2 (v0.62) keeps extended CONNECT off unless the process
// environment's GODEBUG contains http2xconnect=1 when that package
// initialises. Go initialises packages that are ready in import-path order,
// and this package depends only on os, so it runs before
// golang.org/x/net/http2 and can add the setting. With it, h2 clients
// (browsers) may open WebSockets as CONNECT streams with :protocol
// websocket; package proxy relays those to the backend as HTTP/1.1
// Upgrade requests. The setting is inherited by child processes.
package h2xconnect

import (
	"os"
	"strings"
)

// Setting is the GODEBUG entry this package adds.
const Setting = "http2xconnect=1"

func init() {
	g := os.Getenv("GODEBUG")
	if strings.Contains(g, "http2xconnect=") {
		return // an explicit choice wins
	}
	if g != "" {
		g += ","
	}
	os.Setenv("GODEBUG", g+Setting)
}
