package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// parseFlags parses args with fs, allowing flags after positional
// arguments too (gmproxy get URL -k), as curl and openssl do. Afterwards
// fs.Args() holds the positional arguments in order. When parsing ends the
// command, ok is false and code is its exit status: 0 after -h or -help
// (the usage went to the command's stderr), 2 for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0, false
			}
			return 2, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// flag stops at the first non-flag or after "--"; a "--" it
		// consumed means the rest is positional.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if err := fs.Parse(append([]string{"--"}, pos...)); err != nil {
		return 2, false
	}
	return 0, true
}

// passwordSource reads a password given as openssl does: pass:TEXT,
// env:VARIABLE or file:PATH (first line). The empty string means none.
// A bare word is refused: it would be visible in ps.
func passwordSource(spec string) ([]byte, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	switch {
	case spec == "":
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("password %q: give pass:TEXT, env:VARIABLE or file:PATH (a bare password would show in ps)", "…")
	case kind == "pass":
		return []byte(arg), nil
	case kind == "env":
		v, set := os.LookupEnv(arg)
		if !set {
			return nil, fmt.Errorf("password: environment variable %s is not set", arg)
		}
		return []byte(v), nil
	case kind == "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("password: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return []byte(strings.TrimSuffix(line, "\r")), nil
	}
	return nil, fmt.Errorf("password source %q: want pass:PASSWORD, env:VARIABLE or file:PATH", kind+":")
}
