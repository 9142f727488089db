package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gmproxy/gmproxy/conf"
	"github.com/gmproxy/gmproxy/metrics"
)

func init() {
	register("check", "test a configuration file like nginx -t: gmproxy check -c FILE", checkMain)
}

// checkMain validates a configuration file, loading every certificate and
// key it names, and prints every problem as file:line:column. Exit status:
// 0 when the file is usable (warnings allowed), 1 when it has errors, 2 on
// bad usage.
func checkMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr, "usage: gmproxy check -c FILE [-dump] [-q] [-no-bind]   (also: gmproxy -t -c FILE)")
	file := fs.String("c", "", "configuration `file` to test (YAML)")
	dump := fs.Bool("dump", false, "on success also print the effective configuration (defaults filled in)")
	quiet := fs.Bool("q", false, "print only errors (no warnings, no success line)")
	noBind := fs.Bool("no-bind", false, "do not try to bind the listener addresses (on a machine other than the one that will run it)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *file == "" && fs.NArg() == 1 {
		*file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gmproxy check: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *file == "" {
		fs.Usage()
		return 2
	}

	cfg, probs := conf.Check(*file)
	if cfg != nil && !*noBind {
		probs = append(probs, cfg.ProbeListeners()...)
	}
	if cfg != nil {
		probs = append(probs, labelProblems(cfg)...)
	}
	for _, p := range probs {
		if *quiet && p.Severity == conf.SeverityWarning {
			continue
		}
		fmt.Fprintln(stderr, p.String())
	}
	nerr, nwarn := probs.Count(conf.SeverityError), probs.Count(conf.SeverityWarning)
	if nerr > 0 || cfg == nil {
		fmt.Fprintf(stderr, "gmproxy: configuration file %s test failed (%s, %s)\n", *file, plural(nerr, "error"), plural(nwarn, "warning"))
		return 1
	}
	if *dump {
		if cfg.Workers == "" {
			// What gmproxy run makes of it here (an unset workers is no
			// key of its own in the effective configuration).
			cfg.Workers = "1"
			if workersSupported {
				cfg.Workers = conf.WorkersAuto
			}
		}
		b, err := cfg.Normalized()
		if err != nil {
			fmt.Fprintf(stderr, "gmproxy check: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "# effective configuration of %s\n%s", *file, b)
	}
	if !*quiet {
		if nwarn > 0 {
			fmt.Fprintf(stdout, "gmproxy: configuration file %s test is successful (%s)\n", *file, plural(nwarn, "warning"))
		} else {
			fmt.Fprintf(stdout, "gmproxy: configuration file %s test is successful\n", *file)
		}
	}
	return 0
}

// reportUnusable prints why configuration file could not be loaded, like
// `gmproxy check`: each problem on its own line as file:line:column, then a
// summary that says what did not happen; cmd names the subcommand.
func reportUnusable(stderr io.Writer, cmd, file string, err error) {
	outcome := "nothing started"
	if cmd == "reload" {
		// The running gmproxy is untouched: say so rather than
		// "nothing started", which reads as if it had stopped.
		outcome = "no reload was asked for, the running gmproxy keeps its configuration"
	}
	var probs conf.Problems
	if !errors.As(err, &probs) {
		fmt.Fprintf(stderr, "gmproxy %s: %s\n", cmd, err)
		return
	}
	for _, p := range probs {
		fmt.Fprintln(stderr, p.String())
	}
	fmt.Fprintf(stderr, "gmproxy %s: configuration file %s is not usable (%s, %s); %s\n", cmd, file,
		plural(probs.Count(conf.SeverityError), "error"), plural(probs.Count(conf.SeverityWarning), "warning"), outcome)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// labelProblems warns of the names of sites, routes, upstreams and key
// servers that the metrics will not show as they are (metrics.NameProblem;
// "other" and "none" themselves conf refuses),
// and of those past a label's cap (metrics.MaxSites, MaxRoutes,
// MaxUpstreams): their series would mix with others under "other"
// without a word.
func labelProblems(cfg *conf.Config) conf.Problems {
	var probs conf.Problems
	site, route := labelNames(&probs, cfg.WarningAt, "site", metrics.MaxSites), labelNames(&probs, cfg.WarningAt, "route", metrics.MaxRoutes)
	for i, s := range cfg.Sites {
		site(fmt.Sprintf("sites[%d].name", i), s.Name)
		for j, r := range s.Routes {
			route(fmt.Sprintf("sites[%d].routes[%d].name", i, j), r.Name)
		}
	}
	upstream := labelNames(&probs, cfg.WarningAt, "upstream", metrics.MaxUpstreams)
	for i, u := range cfg.Upstreams {
		upstream(fmt.Sprintf("upstreams[%d].name", i), u.Name)
	}
	keyServer := labelNames(&probs, cfg.WarningAt, "key server", metrics.MaxUpstreams)
	for i, k := range cfg.KeyServers {
		keyServer(fmt.Sprintf("key_servers[%d].name", i), k.Name)
	}
	return probs
}

// keyServerLabelProblems is labelProblems for gmproxy keyserver's
// configuration: the key and client names its metrics label (client and
// key, metrics.KeyServer: at most metrics.MaxSites each). A key or a
// client named "other" or "none", which would mix with the series of the
// names past the cap or of an empty value, is refused by conf.
func keyServerLabelProblems(f *conf.KeyServerFile) conf.Problems {
	var probs conf.Problems
	key := labelNames(&probs, f.WarningAt, "key", metrics.MaxSites)
	for i := range f.Keys {
		k := &f.Keys[i]
		// An unnamed key is named after its file (ServedKey.KeyName).
		at := fmt.Sprintf("keys[%d].name", i)
		if k.Name == "" {
			at = fmt.Sprintf("keys[%d].key", i)
		}
		key(at, k.KeyName())
	}
	client := labelNames(&probs, f.WarningAt, "client", metrics.MaxSites)
	for i, c := range f.Clients {
		client(fmt.Sprintf("clients[%d].name", i), c.Name)
	}
	return probs
}

// labelNames returns the check of one label's names, whose warnings (made
// by warningAt) it adds to probs: each name is warned of when the metrics
// cannot show it, and the first distinct name past the cap (most) once.
func labelNames(probs *conf.Problems, warningAt func(path, fix, msg string) conf.Problem, kind string, most int) func(path, name string) {
	seen := make(map[string]bool)
	return func(path, name string) {
		if why := metrics.NameProblem(name); why != "" {
			*probs = append(*probs, warningAt(path,
				"use a name of at most 128 bytes (42 Chinese characters) without control characters, and not \"other\" or \"none\"",
				fmt.Sprintf("name %q %s", name, why)))
			return
		}
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		if len(seen) == most+1 {
			*probs = append(*probs, warningAt(path,
				fmt.Sprintf("give fewer %ss names of their own, or split the configuration across instances", kind),
				fmt.Sprintf("name %q is past the %d %s names the metrics tell apart: the names seen last while running (this one or others) show as \"other\"", name, most, kind)))
		}
	}
}
