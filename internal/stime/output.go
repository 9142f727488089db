package stime

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes an openssl-s_time style summary line followed by a table.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%d connections in %.2fs; %.2f connections/s, %d bytes read\n",
		r.Connections, r.Elapsed, r.ConnPerSec, r.Bytes)
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-22s "+format+"\n", append([]any{k}, a...)...) }
	proto := r.Protocol
	if proto == "" {
		proto = "-"
	}
	row("target", "%s (%s, %s, %d workers)", r.Addr, proto, r.Mode, r.Concurrency)
	row("connections", "%d (resumed %d)", r.Connections, r.Resumed)
	row("connections/s", "%.1f", r.ConnPerSec)
	h := r.Handshake
	row("handshake p50/p90/p99", "%s / %s / %s", ms(h.P50), ms(h.P90), ms(h.P99))
	row("handshake mean/max", "%s / %s", ms(h.Mean), ms(h.Max))
	if r.Path != "" {
		ka := ""
		if r.KeepAlive {
			ka = ", keep-alive"
		}
		row("requests", "%d (GET %s%s)", r.Requests, r.Path, ka)
		row("requests/s", "%.1f", r.ReqPerSec)
		q := r.Request
		row("request p50/p90/p99", "%s / %s / %s (max %s)", ms(q.P50), ms(q.P90), ms(q.P99), ms(q.Max))
		row("bytes/s", "%.0f (%.2f MiB/s)", r.BytesPerSec, r.BytesPerSec/(1<<20))
	}
	row("versions", "%s", counts(r.Versions))
	row("ciphers", "%s", counts(r.Ciphers))
	row("errors", "%d %s", r.ErrorCount, counts(r.Errors))
	if r.FirstError != "" {
		row("first error", "%s", r.FirstError)
	}
}

func ms(s float64) string { return fmt.Sprintf("%.3f ms", s*1e3) }

func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
