package conf

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gmproxy/gmproxy/proxy"
)

// TestRateParse: rates read as the interval between requests and write
// back in the smallest unit whose count reads as the same interval.
func TestRateParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		iv   time.Duration
		back string
	}{
		{"10/s", 100 * time.Millisecond, "10/s"},
		{"30/m", 2 * time.Second, "30/m"},
		{" 500 / h ", 7200 * time.Millisecond, "500/h"},
		{"60/m", time.Second, "1/s"},
		{"7/s", 142857142, "7/s"},
		{"25200/h", 142857142, "7/s"},
		{"998/s", 1002004, "998/s"},
		{"1000000/s", time.Microsecond, "1000000/s"},
		{"10r/s", 100 * time.Millisecond, "10/s"}, // nginx's limit_req_zone
		{" 30r / m", 2 * time.Second, "30/m"},
	} {
		r, err := parseRate(&yaml.Node{Kind: yaml.ScalarNode, Value: c.in})
		if err != nil || r.Interval() != c.iv || r.String() != c.back {
			t.Errorf("%q: %v (%q), %v; want %v (%q)", c.in, r.Interval(), r.String(), err, c.iv, c.back)
		}
	}
	for _, bad := range []string{"10", "0/s", "-1/s", "10/d", "1000001/s", "x/s", "10/", "r/s", "10rr/s", "10 r/s", "10R/s"} {
		if r, err := parseRate(&yaml.Node{Kind: yaml.ScalarNode, Value: bad}); err == nil {
			t.Errorf("%q accepted as %v", bad, r)
		}
	}
}

// TestRouteRateLimitParsed: a route's rate_limit reaches the configuration.
func TestRouteRateLimitParsed(t *testing.T) {
	cfg, _ := minimalWithRoutes(t, "{path_prefix: /, upstream: app, rate_limit: {rate: 30/m, burst: 5}}")
	rl := cfg.Sites[0].Routes[0].RateLimit
	if rl == nil || rl.Rate.Interval() != 2*time.Second || rl.Burst != 5 {
		t.Fatalf("rate_limit %+v, want an interval of 2s and burst 5", rl)
	}
}

// TestRateRoundTrip: every rate gmproxy accepts writes back (in check
// -dump's normalised configuration) as a rate it accepts, with the same
// interval: 976562/s (an interval of 1024 ns, a whole count only per
// minute) was written 58593750/m, which the normalised configuration then
// refused as above the largest count.
func TestRateRoundTrip(t *testing.T) {
	var counts []int
	for c := 1; c <= maxRate; c += 997 {
		counts = append(counts, c)
	}
	counts = append(counts, 976562, 300000, 700000, maxRate-1, maxRate)
	bad := 0
	for _, u := range []string{"s", "m", "h"} {
		for _, c := range counts {
			in := strconv.Itoa(c) + "/" + u
			r, err := parseRate(&yaml.Node{Kind: yaml.ScalarNode, Value: in})
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			back, err := parseRate(&yaml.Node{Kind: yaml.ScalarNode, Value: r.String()})
			if err != nil || back != r {
				if bad++; bad <= 5 {
					t.Errorf("%s (interval %d ns) writes as %s, which reads as %d ns, %v", in, r, r.String(), back, err)
				}
			}
		}
	}
}

// TestRateLimitBurstDefault: a rate_limit without a burst has the
// documented default of 0 (nginx's), which the normalised configuration
// (check -dump, "every default filled in") shows.
func TestRateLimitBurstDefault(t *testing.T) {
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "{path_prefix: /, upstream: app}", "{path_prefix: /, upstream: app, rate_limit: {rate: 30/m}}", 1)
	cfg, err := Parse(path, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if rl := cfg.Sites[0].Routes[0].RateLimit; rl == nil || rl.Burst != 0 {
		t.Fatalf("rate_limit %+v, want burst 0", rl)
	}
	norm, err := cfg.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(norm), "rate: 30/m\n") || !strings.Contains(string(norm), "burst: 0\n") {
		t.Errorf("normalised rate_limit without burst: 0:\n%s", norm)
	}
}

// TestAccessLogFieldsDocumented: the access_log template's documentation
// names every field the proxy writes.
func TestAccessLogFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## access\\_log")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, f := range proxy.AccessLogFields {
		if !strings.Contains(section, strings.ReplaceAll(f, "_", "\\_")) {
			t.Errorf("access log field %s not in conf/README.md's access_log section", f)
		}
	}
}

// TestRouteTimeoutsParsed: a route's timeouts reach the configuration,
// a key left out as absent (the upstream's or listener's value), 0 as no
// limit, and the normalised form keeps that difference.
func TestRouteTimeoutsParsed(t *testing.T) {
	cfg, path := minimalWithRoutes(t, "{path_prefix: /, upstream: app, timeouts: {read: 10m, body: 0}}\n      - {path_prefix: /b, upstream: app, timeouts: {body: 90s, response_header: 5m}}")
	for round := range 2 {
		a, b := cfg.Sites[0].Routes[0].Timeouts, cfg.Sites[0].Routes[1].Timeouts
		if a == nil || a.Read == nil || *a.Read != 10*time.Minute || a.Body == nil || *a.Body != 0 || a.ResponseHeader != nil {
			t.Fatalf("round %d: timeouts %+v, want read 10m, body 0 (no limit) and response_header left out", round, a)
		}
		if b == nil || b.Read != nil || b.Body == nil || *b.Body != 90*time.Second || b.ResponseHeader == nil || *b.ResponseHeader != 5*time.Minute {
			t.Fatalf("round %d: timeouts %+v, want read left out, body 90s and response_header 5m", round, b)
		}
		norm, err := cfg.Normalized()
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err = Parse(path, norm); err != nil {
			t.Fatalf("the normalised form does not load: %v\n%s", err, norm)
		}
	}
}

// minimalWithRoutes is testdata/good/minimal.yaml with its route replaced
// by routes (flow mappings, one per line at the routes' indentation),
// parsed, and the path it was read from.
func minimalWithRoutes(t *testing.T, routes string) (*Config, string) {
	t.Helper()
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "{path_prefix: /, upstream: app}", routes, 1)
	cfg, err := Parse(path, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, path
}

// TestRateLimitZoneInvalidFirst: a zone whose first route gives an
// invalid rate or burst is reported once, at that value; the routes of
// the zone after it are compared with the first valid declaration, not
// with the invalid one (which told the operator to copy a value gmproxy
// refuses). A mismatch between valid declarations names the rate and
// burst to give.
func TestRateLimitZoneInvalidFirst(t *testing.T) {
	path := filepath.Join("testdata", "good", "minimal.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	routes := []string{
		"{path: /a, upstream: app, rate_limit: {rate: 0/s, zone: z}}",
		"{path: /b, upstream: app, rate_limit: {rate: 10/s, zone: z}}",
		"{path: /c, upstream: app, rate_limit: {rate: 10/s, burst: -1, zone: y}}",
		"{path: /d, upstream: app, rate_limit: {rate: 10/s, zone: y}}",
		"{path: /e, upstream: app, rate_limit: {zone: x}}",
		"{path: /f, upstream: app, rate_limit: {rate: 5/s, zone: x}}",
		"{path: /g, upstream: app, rate_limit: {rate: 5/s, burst: 2, zone: x}}",
	}
	text := strings.Replace(string(data), "{path_prefix: /, upstream: app}", strings.Join(routes, "\n      - "), 1)
	lineOf := func(s string) int {
		for i, l := range strings.Split(text, "\n") {
			if strings.Contains(l, s) {
				return i + 1
			}
		}
		t.Fatalf("%q not in the configuration", s)
		return 0
	}
	_, err = Parse(path, []byte(text))
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("configuration accepted (err %v)", err)
	}
	type where struct {
		path string
		line int
	}
	got := map[where]string{}
	for _, p := range probs {
		if p.Severity == SeverityError {
			got[where{p.Path, p.Line}] = p.String()
		}
	}
	want := []where{
		{"sites[0].routes[0].rate_limit.rate", lineOf("/a,")},
		{"sites[0].routes[2].rate_limit.burst", lineOf("/c,")},
		{"sites[0].routes[4].rate_limit.rate", lineOf("/e,")},
		{"sites[0].routes[6].rate_limit", lineOf("/g,")},
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("no error at %s (line %d); errors: %v", w.path, w.line, probs)
		}
		delete(got, w)
	}
	for _, p := range got {
		t.Errorf("unexpected error: %s", p)
	}
	mismatch := probs[len(probs)-1].String()
	for _, p := range probs {
		if p.Path == "sites[0].routes[6].rate_limit" {
			mismatch = p.String()
		}
	}
	if !strings.Contains(mismatch, "sites[0].routes[5]") || !strings.Contains(mismatch, "rate: 5/s") || !strings.Contains(mismatch, "burst: 0") {
		t.Errorf("the mismatch does not name the first valid route of the zone and its rate and burst: %s", mismatch)
	}
}
