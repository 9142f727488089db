//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/speed"
	"github.com/gmproxy/gmproxy/internal/sysmon"
	"github.com/gmproxy/gmproxy/proxy/extendedconnect"
)

// TestEnsureStartupEnv runs this test binary as a child that calls
// ensureStartupEnv and then reports the variable, gmsm's single-block
// implementation and GODEBUG: unset, the child must have re-executed
// itself with FORCE_SM4BLOCK_AESNI=1; an explicit 0 must be kept; either
// way GODEBUG must then hold http2xconnect=1, and for a server the
// monitor's setting unless GODEBUG already chose schedtrace.
func TestEnsureStartupEnv(t *testing.T) {
	if os.Getenv("GMPROXY_SM4ENV_CHILD") == "1" {
		ensureStartupEnv(os.Stderr, os.Getenv("GMPROXY_STARTENV_SERVER") == "1")
		os.Stdout.WriteString("\nFORCE=" + os.Getenv(sm4BlockEnv) + " IMPL=" + speed.DetectImpl().SM4Single + "\nGODEBUG=" + os.Getenv("GODEBUG") + "\n")
		return
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("gmsm has no table/constant-time switch on " + runtime.GOARCH)
	}
	hasAESNI := runtime.GOARCH == "amd64" && slices.Contains(speed.DetectImpl().Features, "AES-NI")
	for _, tc := range []struct {
		env           []string
		want, godebug string
	}{
		{[]string{"GMPROXY_STARTENV_SERVER=1"}, "FORCE=1 ", extendedconnect.Setting + "," + sysmon.Setting},
		{[]string{"GMPROXY_STARTENV_SERVER=1", sm4BlockEnv + "=0"}, "FORCE=0 ", extendedconnect.Setting + "," + sysmon.Setting},
		{[]string{"GMPROXY_STARTENV_SERVER=1", "GODEBUG=schedtrace=0"}, "FORCE=1 ", "schedtrace=0," + extendedconnect.Setting},
		{nil, "FORCE=1 ", extendedconnect.Setting},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEnsureStartupEnv$", "-test.count=1")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, sm4BlockEnv+"=") && !strings.HasPrefix(kv, "GODEBUG=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(append(cmd.Env, "GMPROXY_SM4ENV_CHILD=1"), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("child %v: %v\n%s", tc.env, err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Fatalf("child %v: want %q in\n%s", tc.env, tc.want, out)
		}
		if !strings.Contains(string(out), "GODEBUG="+tc.godebug+"\n") {
			t.Fatalf("child %v: want GODEBUG=%s in\n%s", tc.env, tc.godebug, out)
		}
		if !hasAESNI {
			continue // gmsm's generic code either way
		}
		constantTime := !strings.Contains(string(out), "not constant time")
		if constantTime != (tc.want == "FORCE=1 ") {
			t.Fatalf("child %v: implementation line does not match the variable:\n%s", tc.env, out)
		}
	}
}
