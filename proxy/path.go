package proxy

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalPath returns p, an origin-form request path (already
// percent-decoded), with its dot segments removed (RFC 3986 §5.2.4, the
// normalisation RFC 9110 §4.2.3 describes for comparing URIs) and runs of
// slashes merged (as nginx's merge_slashes), and whether that changed it.
// Routes match the normal form and the upstream receives it: a route that
// answers /admin/ itself cannot be passed by /x/../admin/, /./admin/ or
// //admin/, which a backend that normalises would serve as /admin/. A
// trailing slash, or a final dot segment (which stands for one), is kept.
// An empty path (an absolute-form target "http://h.test") is "/" (RFC
// 9110 §4.2.3): left empty, it matched no route of "/", a path: / that
// denies it, and went to a catch-all route and on to the target as "/".
func normalPath(p string) (string, bool) {
	if p == "" {
		return "/", true
	}
	if !strings.HasPrefix(p, "/") || !strings.Contains(p, "/.") && !strings.Contains(p, "//") {
		return p, false
	}
	c := path.Clean(p)
	if c != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		c += "/"
	}
	return c, c != p
}

// NormalPath is p in the normal form routes match (normalPath): a
// route's path written otherwise matches no request.
func NormalPath(p string) string {
	np, _ := normalPath(p)
	return np
}

// paramlessPath is p with the parameters of each segment (";..." up to the
// next slash) removed and then normalised: the path as servlet containers
// and Spring resolve it ("/x/..;/admin/" is /admin/ to them).
func paramlessPath(p string) string {
	var b strings.Builder
	b.Grow(len(p))
	for len(p) > 0 {
		seg, rest, slash := strings.Cut(p, "/")
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		b.WriteString(seg)
		if slash {
			b.WriteByte('/')
		}
		p = rest
	}
	np, _ := normalPath(b.String())
	return np
}

// backslashPath is p with each '\' read as '/' and then normalised: the
// path as IIS, ASP.NET and other Windows backends resolve it
// ("/x/..\admin/" and "/admin\" are /admin/ to them).
func backslashPath(p string) string {
	np, _ := normalPath(strings.ReplaceAll(p, `\`, "/"))
	return np
}

// foldPrefix reports whether p starts with prefix when each rune is
// compared upper-cased (as Windows compares file and URL names: IIS and
// ASP.NET read "/ADMIN/" as "/admin/"), and the length in p of the part
// that matched, which may differ from len(prefix) ("ı" is 'I' upper-cased).
func foldPrefix(p, prefix string) (int, bool) {
	i := 0
	for _, pr := range prefix {
		if i >= len(p) {
			return 0, false
		}
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && size == 1 || r != pr && unicode.ToUpper(r) != unicode.ToUpper(pr) {
			return 0, false
		}
		i += size
	}
	return i, true
}

// MaxPathRegexLen bounds a RouteConfig.PathRegex: RE2 matches in time
// linear in the path, but compiles in time and memory that grow with the
// expression (a{1000}{1000} is refused by the parser; long alternations
// are not).
const MaxPathRegexLen = 1024

// CompilePathRegex compiles a RouteConfig.PathRegex (nil for ""), case
// insensitive with fold (SiteConfig.CaseInsensitivePaths), or says what
// is wrong with it.
func CompilePathRegex(expr string, fold bool) (*regexp.Regexp, error) {
	switch {
	case expr == "":
		return nil, nil
	case len(expr) > MaxPathRegexLen:
		return nil, fmt.Errorf("path_regex is %d bytes, over %d", len(expr), MaxPathRegexLen)
	}
	if fold {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("path_regex: %w", err)
	}
	return re, nil
}
