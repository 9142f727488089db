package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gmproxy/gmproxy/proxy"
)

// TestConfigNameLabels: a configuration name is shown as it is when it is
// at most maxNameLen bytes of printable UTF-8, Chinese and spaces
// included, and as "other" otherwise (not cut); NameProblem says which,
// and of "other" and "none" that they mix with those series.
func TestConfigNameLabels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shown bool
	}{
		{"网上银行", true},
		{"online banking", true},
		{"政务服务 (新版) «统一认证»", true},
		{`a "quoted" \ name`, true},
		{strings.Repeat("银", maxNameLen/3), true},
		{strings.Repeat("银", maxNameLen/3+1), false},
		{strings.Repeat("x", maxNameLen), true},
		{strings.Repeat("x", maxNameLen+1), false},
		{"line\nbreak", false},
		{"tab\tbed", false},
		{"esc\x1b[31m", false},
		{"c1\u009b", false},
		{"bidi\u202eknab", false},
		{"zero\u200bwidth", false},
		{"bad\xffutf8", false},
	} {
		a := newAdmitter(8)
		want := tc.name
		if !tc.shown {
			want = Other
		}
		if got := a.label(tc.name); got != want {
			t.Errorf("name %q labelled %q, want %q", tc.name, got, want)
		}
		if p := NameProblem(tc.name); (p == "") != tc.shown {
			t.Errorf("NameProblem(%q) = %q", tc.name, p)
		}
	}
	for _, reserved := range []string{Other, None} {
		if p := NameProblem(reserved); !strings.Contains(p, "mixes with") {
			t.Errorf("NameProblem(%q) = %q, want it to say it mixes with those series", reserved, p)
		}
	}
}

// TestChineseNamesExposed: names in Chinese, with spaces, quotes and
// backslashes are written in /metrics as the text format wants them.
func TestChineseNamesExposed(t *testing.T) {
	m, _ := newTest(t)
	m.RequestDone(proxy.RequestEvent{Site: "网上银行", Route: `账户 "查询" \ 旧`, Method: "GET", Status: 200, Upstream: "核心系统"})
	srv := httptest.NewServer(m.AdminMux(AdminOptions{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := `gmproxy_http_requests_total{code="2xx",method="GET",route="账户 \"查询\" \\ 旧",site="网上银行"} 1`
	if !strings.Contains(string(b), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestMethodLabelCaseSensitive: methods are case-sensitive (RFC 9110
// §9.1), so a request of method "get" is not a GET and is counted under
// "other" with the methods outside the standard set, never folded into
// the GET series.
func TestMethodLabelCaseSensitive(t *testing.T) {
	m, reg := newTest(t)
	for _, method := range []string{"GET", "get", "Get", "post", "PATCH", "patch", "pri", "PROPFIND"} {
		m.RequestDone(proxy.RequestEvent{Site: "www", Route: "api", Method: method, Status: 200})
	}
	for method, want := range map[string]float64{"GET": 1, "PATCH": 1, "POST": 0, "PRI": 0, Other: 6} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues("www", "api", method, "2xx")); got != want {
			t.Errorf("requests of method label %q: %v, want %v", method, got, want)
		}
	}
	if s := series(t, reg, "gmproxy_http_requests_total", `value:"get"`); len(s) != 0 {
		t.Errorf("a lower-case method has a series of its own: %v", s)
	}
	for _, tc := range []struct{ in, want string }{
		{"GET", "GET"}, {"get", Other}, {"gEt", Other}, {"delete", Other}, {"DELETE", "DELETE"}, {"", None},
	} {
		if got := methodLabel(tc.in); got != tc.want {
			t.Errorf("methodLabel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
