package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/gmproxy/gmproxy/internal/sysmon"
	"github.com/gmproxy/gmproxy/proxy/extendedconnect"
)

// sm4BlockEnv is gmsm's switch (read once, when its sm4 package is
// initialised) that makes single-block SM4 use the constant-time AES-NI or
// GFNI code on amd64 and NEON+AES on arm64 instead of its default lookup
// tables (docs/protocol-notes.md §13.1). Single blocks are used by SM4-GCM for the
// hash key and the tag mask of every record, so with the tables the cache
// timing of each record depends on the key.
const sm4BlockEnv = "FORCE_SM4BLOCK_AESNI"

// ensureStartupEnv re-executes gmproxy once when its environment lacks a
// setting that packages read before main runs, so that setting it now
// would change nothing:
//
//   - FORCE_SM4BLOCK_AESNI=1 (amd64 and arm64), when the variable is not
//     set at all: constant-time single-block SM4 in gmsm. An explicit
//     value, "0" included, is the operator's choice and is kept.
//   - http2xconnect=1 in GODEBUG (extendedconnect.Environ), unless GODEBUG
//     already chooses http2xconnect: RFC 8441 WebSockets over h2 in
//     x/net/http2 servers.
//   - for a server (server: run, keyserver), schedtrace=2147483647 in
//     GODEBUG (sysmon.Environ), unless GODEBUG already chooses schedtrace:
//     the runtime's system monitor is no longer woken by the system calls
//     of every connection. Short commands do without it, as they do
//     without its rare SCHED line on stderr.
//
// If the re-execution fails gmproxy goes on without them and says so on
// stderr.
func ensureStartupEnv(stderr io.Writer, server bool) {
	env := os.Environ()
	_, sm4Set := os.LookupEnv(sm4BlockEnv)
	needSM4 := !sm4Set && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
	if needSM4 {
		env = append(env, sm4BlockEnv+"=1")
	}
	env, needXConnect := extendedconnect.Environ(env)
	needSysmon := false
	if server {
		env, needSysmon = sysmon.Environ(env)
	}
	if !needSM4 && !needXConnect && !needSysmon {
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = reexec(exe, os.Args, env)
	}
	if needSM4 {
		fmt.Fprintf(stderr, "gmproxy: warning: could not restart with %s=1 (%v): single-block SM4 uses gmsm's table code, which is not constant time; set %s=1 in the environment\n", sm4BlockEnv, err, sm4BlockEnv)
	}
	if needXConnect {
		fmt.Fprintf(stderr, "gmproxy: warning: could not restart with GODEBUG=%s (%v): WebSockets over HTTP/2 (RFC 8441) are refused; set GODEBUG=%s in the environment\n", extendedconnect.Setting, err, extendedconnect.Setting)
	}
	if needSysmon {
		fmt.Fprintf(stderr, "gmproxy: warning: could not restart with GODEBUG=%s (%v): the Go runtime's monitor thread is woken by the system calls of every connection, which costs CPU; set GODEBUG=%s in the environment\n", sysmon.Setting, err, sysmon.Setting)
	}
}
