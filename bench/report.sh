#!/usr/bin/env bash
# report.sh RESULTS.json: markdown tables from bench/run.sh results.
set -euo pipefail
[[ $# -eq 1 && -r $1 ]] || { echo "usage: $0 results.json" >&2; exit 2; }
jq -r '
def f(n): if . == null then "–" else (. * pow(10; n) | round) / pow(10; n) | tostring end;
def row(cells): "| " + (cells | map(tostring) | join(" | ")) + " |";
. as $doc
| .results as $r
| def get(s; p; c; t): [$r[] | select(.server == s and .protocol == p and .suite == c and .test == t)][0];
  ($r | map(select(.test == "full")) ) as $fulls
| "## gmproxy benchmark (\($doc.date), \($doc.host))",
  "",
  "\($doc.seconds_per_measurement) s per measurement, \($doc.concurrency) client workers; client and server share the machine. Server CPU from /proc/PID/stat (user+system).",
  "",
  "### Handshakes",
  "",
  row(["server", "protocol", "suite", "full hs/s", "server CPU ms / full hs", "resumed hs/s", "server CPU ms / resumed hs", "resumed share", "p99 ms at 80 % of peak (target / achieved hs/s)", "errors"]),
  row(["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]),
  ($fulls[] as $f
   | get($f.server; $f.protocol; $f.suite; "resumed") as $s
   | get($f.server; $f.protocol; $f.suite; "p99_at_80pct") as $p
   | row([$f.server, $f.protocol, $f.suite,
          ($f.connections_per_second | f(0)), ($f.cpu_ms_per_connection | f(3)),
          ($s.connections_per_second | f(0)), ($s.cpu_ms_per_connection | f(3)),
          (if $s.connections > 0 then ($s.resumed / $s.connections * 100 | f(0)) + " %" else "–" end),
          (if $p then ($p.p99_ms | f(2)) + " (" + ($p.rate | f(0)) + " / " + ($p.connections_per_second | f(0)) + ")" else "–" end),
          (($f.errors // 0) + ($s.errors // 0) + ($p.errors // 0))])),
  "",
  "### Requests and throughput (first suite of each protocol)",
  "",
  row(["server", "protocol", "1 KiB keep-alive req/s", "server CPU µs / req", "request p50 / p99 ms", "1 MiB download MiB/s", "connections used (1 KiB run)", "errors"]),
  row(["---", "---", "---:", "---:", "---:", "---:", "---:", "---:"]),
  ($r | map(select(.test == "keepalive_1k"))[] as $k
   | get($k.server; $k.protocol; "default"; "download_1m") as $d
   | row([$k.server, $k.protocol, ($k.requests_per_second | f(0)), ($k.cpu_us_per_request | f(1)),
          (($k.request_p50_ms | f(2)) + " / " + ($k.request_p99_ms | f(2))),
          ($d.mib_per_second | f(1)), $k.connections, (($k.errors // 0) + ($d.errors // 0))])),
  (if ($r | map(.server) | unique | length) > 1 then
    "",
    "### gmproxy / Tongsuo ratios (same run)",
    "",
    row(["protocol", "suite", "full hs/s", "CPU per full hs", "resumed hs/s", "CPU per resumed hs"]),
    row(["---", "---", "---:", "---:", "---:", "---:"]),
    ($fulls[] | select(.server == "gmproxy") as $g
     | get("tongsuo"; $g.protocol; $g.suite; "full") as $t
     | select($t != null)
     | get("gmproxy"; $g.protocol; $g.suite; "resumed") as $gs
     | get("tongsuo"; $g.protocol; $g.suite; "resumed") as $ts
     | def ratio(a; b): if (a == null or b == null or b == 0) then "–" else (a / b | f(2)) end;
       row([$g.protocol, $g.suite,
            ratio($g.connections_per_second; $t.connections_per_second),
            ratio($g.cpu_ms_per_connection; $t.cpu_ms_per_connection),
            ratio($gs.connections_per_second; $ts.connections_per_second),
            ratio($gs.cpu_ms_per_connection; $ts.cpu_ms_per_connection)]))
  else empty end)
' "$1"
