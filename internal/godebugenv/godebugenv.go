// Package godebugenv adds entries to the GODEBUG variable of a process
// environment. Some of the Go settings gmproxy depends on are read once,
// when the runtime or a package starts, so they must be in the environment
// a process starts with; gmproxy's main re-executes itself once with them
// (cmd/gmproxy, startup environment).
package godebugenv

import "strings"

const prefix = "GODEBUG="

// Add returns env (entries "KEY=value", as os.Environ returns them) with
// key=value added to GODEBUG, and whether it added it. A choice for key
// already in GODEBUG, whatever its value, is the operator's and is kept;
// only the first GODEBUG entry counts, as for Go itself. env itself is not
// modified.
func Add(env []string, key, value string) ([]string, bool) {
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if found || !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
			continue
		}
		found = true
		g := kv[len(prefix):]
		if Has(g, key) {
			return env, false
		}
		if g != "" {
			g += ","
		}
		out = append(out, prefix+g+key+"="+value)
	}
	if !found {
		out = append(out, prefix+key+"="+value)
	}
	return out, true
}

// Has reports whether the GODEBUG value g sets key, as Go reads it: Go
// trims no spaces, so " key=0" sets a key named " key", not key, and taking
// it for the operator's choice would leave key unset.
func Has(g, key string) bool {
	for _, f := range strings.Split(g, ",") {
		if strings.HasPrefix(f, key+"=") {
			return true
		}
	}
	return false
}
