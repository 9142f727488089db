package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// sm4BlockEnv is gmsm's switch (read once, when its sm4 package is
// initialised) that makes single-block SM4 use the constant-time AES-NI or
// GFNI code on amd64 and NEON+AES on arm64 instead of its default lookup
// tables (docs/protocol-notes.md §13.1). Single blocks are used by SM4-GCM for the
// hash key and the tag mask of every record, so with the tables the cache
// timing of each record depends on the key.
const sm4BlockEnv = "FORCE_SM4BLOCK_AESNI"

// ensureConstantTimeSM4 re-executes gmproxy once with FORCE_SM4BLOCK_AESNI=1
// when the variable is not set at all: gmsm reads it before main runs, so
// setting it now would change nothing. An explicit value, "0" included, is
// the operator's choice and is kept. If the re-execution fails gmproxy goes
// on with the table code and says so on stderr.
func ensureConstantTimeSM4(stderr io.Writer) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		return
	}
	if _, set := os.LookupEnv(sm4BlockEnv); set {
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = reexec(exe, os.Args, append(os.Environ(), sm4BlockEnv+"=1"))
	}
	fmt.Fprintf(stderr, "gmproxy: warning: could not restart with %s=1 (%v): single-block SM4 uses gmsm's table code, which is not constant time; set %s=1 in the environment\n", sm4BlockEnv, err, sm4BlockEnv)
}
