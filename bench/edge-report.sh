#!/usr/bin/env bash
# edge-report.sh EDGE.json: markdown tables from bench/edge.sh results.
set -euo pipefail
[[ $# -eq 1 && -r $1 ]] || { echo "usage: $0 edge.json" >&2; exit 2; }
jq -r '
def f(n): if . == null then "–" else (. * pow(10; n) | round) / pow(10; n) | tostring end;
def row(cells): "| " + (cells | map(tostring) | join(" | ")) + " |";
def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def span(n): if length == 0 then "–" else (min | f(n)) + "–" + (max | f(n)) end;
. as $doc
| [.results[] | select(.us_per_op != null)] as $r
| ($r | map(.op) | unique) as $present
| [$doc.labels | keys_unsorted[]] as $_
| ([$r[] | .op] | reduce .[] as $o ([]; if index([$o]) then . else . + [$o] end)) as $ops
| ($r | map(.server) | unique) as $servers
| def vals(s; o): [$r[] | select(.server == s and .op == o)];
  def show(unit; xs): if unit == "mib" then (xs | map(1e6 / .) ) as $m | "\($m | median | f(0)) MiB/CPU-s (\($m | span(0)))"
                      else "\(xs | median | f(0)) µs (\(xs | span(0)))" end;
"## gmproxy vs Tengine (\($doc.date), \($doc.host))",
"",
"\($doc.rounds) alternating rounds, \($doc.concurrency) client workers (downloads: 1); load average \($doc.load).",
"Server CPU = utime+stime of every server process per operation; medians with (min–max) over rounds.",
"Ratio = gmproxy / Tengine CPU per operation, median of the per-round ratios (min–max); below 1 gmproxy uses less.",
"",
row(["operation", "gmproxy", "Tengine", "gmproxy / Tengine", "resumed (gmproxy / Tengine)", "errors"]),
row(["---", "---:", "---:", "---:", "---:", "---:"]),
($ops[] as $o
 | vals("gmproxy"; $o) as $g | vals("tengine"; $o) as $t
 | ($g[0].unit) as $u
 | [range(0; [$g, $t] | map(length) | min) as $i | ($g[$i].us_per_op / ([$t[] | select(.round == $g[$i].round)][0].us_per_op // null))] as $ratios
 | row([($doc.labels[$o] // $o),
        show($u; $g | map(.us_per_op)),
        (if ($t | length) > 0 then show($u; $t | map(.us_per_op)) else "–" end),
        (if ($t | length) > 0 then "\($ratios | median | f(2)) (\($ratios | span(2)))" else "–" end),
        (if $u == "conn" then
           ((($g | map(.resumed) | add) * 100 / ($g | map(.connections) | add) | f(0)) + " %"
            + (if ($t | length) > 0 then " / " + ((($t | map(.resumed) | add) * 100 / ($t | map(.connections) | add) | f(0)) + " %") else "" end))
         else "–" end),
        ([$g[], $t[]] | map(.errors) | add)])),
(if ($doc.syscalls | length) > 0 then
  "",
  "### System calls per operation (`strace -c -f` on the server, one bounded run each)",
  "",
  row(["operation", "server", "operations", "calls / op", "most frequent (per op)"]),
  row(["---", "---", "---:", "---:", "---"]),
  ($doc.syscalls[] | row([($doc.labels[.op] // .op), .server, .ops, (.per_op | f(1)), .top]))
 else empty end)
' "$1"
