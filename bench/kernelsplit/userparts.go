package main

import (
	"path"
	"regexp"
	"strings"
)

// User-space time is split by what the sampled function is part of, so that
// a Go server and a C one (Tengine with Tongsuo linked in) compare part by
// part: is the difference in the SM crypto, in the TLS library around it, in
// the server's own code, or in the runtime (Go's scheduler, collector and
// allocator; glibc's allocator and memory functions)?
//
// The parts, in the order userPart tests a leaf frame against them (the
// first match wins; unresolved addresses are tested for right after runtime):
const (
	partStubs   = "stubs"   // system-call stubs in user space and the vDSO (clock reads)
	partRuntime = "runtime" // Go's runtime; glibc outside its system-call stubs
	partSM2     = "sm2"     // SM2, other elliptic curves and big-number arithmetic
	partSM3     = "sm3"     // SM3's compression and the code named after it
	partSM4     = "sm4"     // SM4 and its modes (GCM's GHASH included)
	partTLS     = "tls"     // the rest of the TLS/TLCP library: handshake, records, ASN.1, X.509, the crypto framework (for a C server, all code that is neither the server's nor glibc's)
	partHTTP    = "http"    // the server's own code: connections, HTTP, proxy, metrics (nginx's ngx_ functions; for Go, the standard library outside crypto too)
	partOther   = "other"   // unresolved addresses
)

// UserParts lists the parts in the order reports print them.
var UserParts = []string{partSM2, partSM3, partSM4, partTLS, partHTTP, partRuntime, partStubs, partOther}

var (
	goStubs = regexp.MustCompile(`^(syscall\.|internal/runtime/syscall/|golang\.org/x/sys/unix\.)`)
	// glibc's system-call wrappers; its other functions count as runtime.
	libcStubs = regexp.MustCompile(`^(__GI_+)?(__libc_)?_*(read|write|writev|readv|recv|recvfrom|recvmsg|send|sendto|sendmsg|sendfile64|sendfile|epoll_wait|epoll_pwait|epoll_ctl|accept4|accept|close|shutdown|getsockopt|setsockopt|getsockname|getpeername|ioctl|fcntl64|fcntl|getpid|clock_gettime|gettimeofday|syscall|errno_location|nanosleep|clock_nanosleep|futex|internal_syscall_cancel|syscall_cancel)$`)
	goRuntime = regexp.MustCompile(`^(runtime\.|internal/runtime/|internal/bytealg\.|internal/sync\.|gcWriteBarrier|aeshash|memeqbody|indexbytebody|cmpbody|countbody)`)
	sm2Syms   = regexp.MustCompile(`(?i)sm2|bigmod|math/big|nistec|p256|felem|^(ec_|ecp_|ossl_ec|__ecp|bn_|ossl_bn|point_(add|double)|batch_mul|scalar_mul|select_point)`)
	sm3Syms   = regexp.MustCompile(`(?i)sm3`)
	sm4Syms   = regexp.MustCompile(`(?i)sm4|gcm|ghash|gmult`)
	goTLS     = regexp.MustCompile(`^(github\.com/gmproxy/gmproxy/(tlcp|tls13sm|internal/(record|transcript|ticket|suite|wire|smkey|sm4ecb|sessionstore))[./]|crypto/|vendor/golang\.org/x/crypto/|golang\.org/x/crypto/|github\.com/emmansun/gmsm/)`)
	goSymbol  = regexp.MustCompile(`^(github\.com/|golang\.org/|google\.golang\.org/|gopkg\.in/|go\.|main\.|type:|[a-z0-9_]+(/[a-z0-9_.-]+)*\.[A-Za-z_(*])`)
	cSuffix   = regexp.MustCompile(`\.(isra|constprop|part|cold|lto_priv)\.`)
)

// userPart is the part a user-space leaf frame belongs to.
func userPart(f frame) string {
	sym, _, _ := strings.Cut(f.sym, "@") // glibc's symbol versions: clock_gettime@@GLIBC_2.17
	lib := path.Base(f.dso)
	libc := strings.HasPrefix(lib, "libc.so") || strings.HasPrefix(lib, "libc-")
	switch {
	case f.dso == "[vdso]" || goStubs.MatchString(sym) || libc && libcStubs.MatchString(sym):
		return partStubs
	case goRuntime.MatchString(sym) || libc:
		return partRuntime
	case sym == "" || sym == "[unknown]" || strings.HasPrefix(sym, "0x"):
		return partOther
	case sm2Syms.MatchString(sym):
		return partSM2
	case sm3Syms.MatchString(sym):
		return partSM3
	case sm4Syms.MatchString(sym):
		return partSM4
	case goTLS.MatchString(sym):
		return partTLS
	case strings.HasPrefix(sym, "ngx_") || goSymbol.MatchString(sym) && !cSuffix.MatchString(sym):
		return partHTTP
	}
	// A C function outside glibc and nginx: Tongsuo or OpenSSL linked in.
	return partTLS
}
