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
//
// The arguments are first split as the flag package reads them: "-x" or
// "--x" is a flag, which takes the next argument as its value unless it
// is a boolean flag or written "-x=v"; a "--" in a flag's place ends the
// flags; anything else is positional. So a value that looks like "--"
// (-d --) is a value, not the end of the flags.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimPrefix(a[1:], "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	if err := fs.Parse(flags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if err := fs.Parse(append([]string{"--"}, pos...)); err != nil {
		return 2, false
	}
	return 0, true
}

// isBoolFlag reports whether f takes no value (-k, not -k VALUE).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
