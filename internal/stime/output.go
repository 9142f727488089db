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

// WriteTable writes an openssl-s_time style summary line followed by a
// table; the headline counts requests for keep-alive runs. With hist, the
// latency histogram of the headline operation follows.
func (r *Result) WriteTable(w io.Writer, hist bool) {
	if r.KeepAlive {
		fmt.Fprintf(w, "%d requests in %.2fs; %.2f requests/s over %d connections, %d bytes read\n",
			r.Requests, r.Elapsed, r.ReqPerSec, r.Connections, r.Bytes)
	} else {
		fmt.Fprintf(w, "%d connections in %.2fs; %.2f connections/s, %d bytes read\n",
			r.Connections, r.Elapsed, r.ConnPerSec, r.Bytes)
	}
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-22s "+format+"\n", append([]any{k}, a...)...) }
	proto := r.Protocol
	if proto == "" {
		proto = "-"
	}
	row("target", "%s (%s, %s, %d workers)", r.Addr, proto, r.Mode, r.Concurrency)
	row("connections", "%d (resumed %d)", r.Connections, r.Resumed)
	row("connections/s", "%.1f", r.ConnPerSec)
	h := r.Handshake
	row("handshake p50/p90/p99/p99.9", "%s / %s / %s / %s", ms(h.P50), ms(h.P90), ms(h.P99), ms(h.P999))
	row("handshake mean/max", "%s / %s", ms(h.Mean), ms(h.Max))
	if r.Path != "" {
		ka := ""
		if r.KeepAlive {
			ka = ", keep-alive"
		}
		row("requests", "%d (GET %s%s)", r.Requests, r.Path, ka)
		row("requests/s", "%.1f", r.ReqPerSec)
		q := r.Request
		row("request p50/p90/p99/p99.9", "%s / %s / %s / %s (max %s)", ms(q.P50), ms(q.P90), ms(q.P99), ms(q.P999), ms(q.Max))
		row("bytes/s", "%.0f (%.2f MiB/s)", r.BytesPerSec, r.BytesPerSec/(1<<20))
	}
	row("versions", "%s", counts(r.Versions))
	row("ciphers", "%s", counts(r.Ciphers))
	row("errors", "%d %s", r.ErrorCount, counts(r.Errors))
	if r.FirstError != "" {
		row("first error", "%s", r.FirstError)
	}
	if r.Rate > 0 {
		row("latency measured", "from each operation's scheduled start at %.1f/s", r.Rate)
	}
	if hist {
		name, l := "handshake", r.Handshake
		if r.KeepAlive {
			name, l = "request", r.Request
		}
		writeHistogram(w, name, l.Histogram)
	}
}

// writeHistogram prints one line per bucket with a bar scaled to the
// largest bucket.
func writeHistogram(w io.Writer, name string, buckets []Bucket) {
	var top int64
	for _, b := range buckets {
		top = max(top, b.Count)
	}
	fmt.Fprintf(w, "  %s latency histogram:\n", name)
	for _, b := range buckets {
		le := "     +Inf"
		if b.Le > 0 {
			le = fmt.Sprintf("%9s", ms(b.Le))
		}
		bar := ""
		if top > 0 {
			bar = strings.Repeat("#", int(b.Count*40/top))
		}
		fmt.Fprintf(w, "    <= %s %8d %s\n", le, b.Count, bar)
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
