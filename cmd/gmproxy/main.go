// Command gmproxy is an edge proxy for China's commercial cryptography: TLCP
// (GB/T 38636-2020), TLS 1.3 with the RFC 8998 SM suites and ordinary TLS on
// one port. With no arguments it runs a self-contained development setup.
//
// Each subcommand lives in its own file and registers itself in init.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: run is given the arguments after its name.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

// newFlags returns a subcommand's flag set: errors and usage go to stderr,
// the usage being the given lines followed by the flag defaults.
func newFlags(name string, stderr io.Writer, usage ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		for _, l := range usage {
			fmt.Fprintln(stderr, l)
		}
		fs.PrintDefaults()
	}
	return fs
}

// defaultCommand runs when gmproxy is started without arguments.
const defaultCommand = "run"

func main() {
	// speed measures whatever implementation the environment selects
	// (and reports it); every other command gets constant-time single-block
	// SM4 and extended CONNECT in the HTTP/2 servers, and the servers (run,
	// keyserver) the runtime monitor's setting.
	if name, _ := commandName(os.Args[1:]); name != "speed" {
		ensureStartupEnv(os.Stderr, name == "run" || name == "keyserver")
	}
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// commandName returns the command args select and the arguments left for
// it.
func commandName(args []string) (string, []string) {
	switch {
	case len(args) > 0 && args[0] == "-t":
		// nginx's spelling: gmproxy -t -c FILE tests the configuration.
		return "check", args[1:]
	case len(args) > 0 && strings.HasPrefix(args[0], "-") && !isHelp(args[0]):
		// gmproxy -c FILE runs it.
		return defaultCommand, args
	case len(args) > 0:
		return args[0], args[1:]
	}
	return defaultCommand, args
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	name, args := commandName(args)
	if name == "help" || isHelp(name) {
		usage(stdout)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "gmproxy: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	return cmd.run(args, stdout, stderr)
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gmproxy [command] [flags]   (no command: run the embedded development setup)")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	width := 0
	for n := range commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, commands[n].summary)
	}
}
