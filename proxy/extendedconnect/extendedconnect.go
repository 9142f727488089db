// Package extendedconnect holds the setting that turns on RFC 8441 extended
// CONNECT (WebSockets over HTTP/2) in golang.org/x/net/http2 servers, and
// adds it to a process environment.
//
// x/net/http2 (v0.63; on Go 1.27 the net/http HTTP/2 server it wraps)
// keeps extended CONNECT off unless the process environment's GODEBUG
// contains http2xconnect=1 when that package initialises, which is before main runs. Setting the variable from an init
// function would depend on the order in which Go initialises packages, so
// nothing here does: the setting must be in the environment the process
// starts with. gmproxy's main re-executes itself once with Environ's
// result when it is missing (cmd/gmproxy, startup environment). With it,
// h2 clients (browsers) may open WebSockets as CONNECT streams with
// :protocol websocket; package proxy relays those to the backend as
// HTTP/1.1 Upgrade requests. The setting is inherited by child processes.
package extendedconnect

import "github.com/gmproxy/gmproxy/internal/godebugenv"

// The GODEBUG key and value that turn extended CONNECT on.
const (
	key   = "http2xconnect"
	value = "1"
)

// Setting is the GODEBUG entry that turns extended CONNECT on.
const Setting = key + "=" + value

// Environ returns env (entries "KEY=value", as os.Environ) with Setting
// added to GODEBUG, and whether it added it. An explicit http2xconnect=
// choice already in GODEBUG is kept. env itself is not modified.
func Environ(env []string) ([]string, bool) {
	return godebugenv.Add(env, key, value)
}
