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
| ([$r[] | .op] | reduce .[] as $o ([]; if index([$o]) then . else . + [$o] end)) as $ops
| (["gmproxy", "gmproxy-base", "tengine"] | map(select(. as $s | $r | any(.server == $s)))) as $servers
| ([["gmproxy", "tengine"], ["gmproxy", "gmproxy-base"]] | map(select(all(.[]; . as $s | $servers | index([$s]))))) as $pairs
| def vals(s; o): s as $sv | o as $ov | [$r[] | select(.server == $sv and .op == $ov)];
  def show(unit; xs): if (xs | length) == 0 then "–"
                      elif unit == "mib" then (xs | map(1e6 / .)) as $m | "\($m | median | f(0)) MiB/CPU-s (\($m | span(0)))"
                      else "\(xs | median | f(0)) µs (\(xs | span(0)))" end;
  def ratios(a; b): [a[] as $x | [b[] | select(.round == $x.round)][0] as $y | select($y != null) | $x.us_per_op / $y.us_per_op];
  def share(xs): if (xs | length) == 0 then "–" else ((xs | map(.resumed) | add) * 100 / (xs | map(.connections) | add) | f(0)) + " %" end;
"## gmproxy side by side (\($doc.date), \($doc.host))",
"",
"\($doc.rounds) rounds alternating the servers, \($doc.concurrency) client workers (downloads: 1); load average \($doc.load)\(if ($doc.pin // "") != "" then "; servers pinned to CPUs \($doc.pin | split(":")[0]), client and backend to \($doc.pin | split(":")[1])" else "" end).",
"Server CPU = utime+stime of every process of the server, per operation: medians (min–max) over rounds.",
"Ratios = CPU per operation of the first server / the second (below 1: the first uses less), median (min–max) of the per-round ratios.",
"",
row(["operation"] + $servers + ($pairs | map(.[0] + " / " + .[1])) + ["resumed (" + ($servers | join(" / ")) + ")", "errors"]),
row(["---"] + ($servers | map("---:")) + ($pairs | map("---:")) + ["---:", "---:"]),
($ops[] as $o
 | ($r | map(select(.op == $o))[0].unit) as $u
 | row([($doc.labels[$o] // $o)]
       + ($servers | map(. as $s | show($u; vals($s; $o) | map(.us_per_op))))
       + ($pairs | map(ratios(vals(.[0]; $o); vals(.[1]; $o)) as $q | if ($q | length) > 0 then "\($q | median | f(2)) (\($q | span(2)))" else "–" end))
       + [if $u == "conn" then ($servers | map(. as $s | share(vals($s; $o))) | join(" / ")) else "–" end,
          ($r | map(select(.op == $o) | .errors) | add)])),
(if ($r | any(.sys_us_per_op != null)) then
  "",
  "### Kernel time per operation (stime of every process of the server; medians over rounds, share of the server CPU)",
  "",
  row(["operation"] + $servers),
  row(["---"] + ($servers | map("---:"))),
  ($ops[] as $o
   | ($r | map(select(.op == $o))[0].unit) as $u
   | select($u != "mib")
   | row([($doc.labels[$o] // $o)]
         + ($servers | map(. as $s | vals($s; $o) | map(select(.sys_us_per_op != null)) as $xs
             | if ($xs | length) == 0 then "–"
               else "\($xs | map(.sys_us_per_op) | median | f(0)) µs (\($xs | map(.sys_us_per_op / .us_per_op * 100) | median | f(0)) %)" end))))
 else empty end),
(if (($doc.latency // []) | length) > 0 then
  "",
  "### Handshake latency at a share of the peak rate (`s_time -loadgen -rate`, 64 workers, handshakes only)",
  "",
  "Rate: \"own\" is the share of the peak of each server; \"common\" the share of the lowest peak, the same rate for every server. A client CPU near 100 % means the tail is queueing in the client, not in the server.",
  "",
  row(["operation", "server", "rate of", "peak / s", "rate / s", "p50 ms", "p99 ms", "p99 / p50", "server CPU busy", "client CPU busy", "errors"]),
  row(["---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]),
  ($doc.latency[] | row([($doc.labels[.op] // .op | sub(" \\+ GET.*$"; "")), .server, (.basis // "own"), (.peak | f(0)), .rate, (.p50 * 1000 | f(2)), (.p99 * 1000 | f(2)),
                         (if .p50 > 0 then .p99 / .p50 | f(1) else "–" end), "\(.server_cpu_busy) %", "\(.client_cpu_busy) %", .errors])),
  (if (($doc.wakeup // []) | length) > 0 then
    "",
    "How late the machine wakes a sleeping thread (`bench/wakeup`, measured before the latency runs on idle CPUs): every handshake waits for several such wake-ups, on the server CPU and on the client CPU, whatever the server.",
    "",
    row(["CPU", "sleeps", "sleep µs", "late p50 µs", "p99 µs", "p99.9 µs", "max µs"]),
    row(["---", "---:", "---:", "---:", "---:", "---:", "---:"]),
    ($doc.wakeup[] | row(["\(.role) (\(.cpu))", .n, (.sleep_us | f(0)), (.p50_us | f(0)), (.p99_us | f(0)), (.p999_us | f(0)), (.max_us | f(0))]))
   else empty end)
 else empty end),
(if ($doc.syscalls | length) > 0 then
  "",
  "### System calls per operation (`strace -c -f` on every process of the server, one bounded run each)",
  "",
  row(["operation", "server", "operations", "calls / op", "most frequent (per op)"]),
  row(["---", "---", "---:", "---:", "---"]),
  ($doc.syscalls[] | row([($doc.labels[.op] // .op), .server, .ops, (.per_op | f(1)), .top]))
 else empty end),
(if (($doc.kernel // []) | length) > 0 then
  "",
  "### Where the kernel time goes (`perf record -g` on the server, one bounded run each; µs per operation, sampling included)",
  "",
  "By the system call the kernel was in (\"entry and exit\": the system-call entry and exit themselves; \"interrupts\": outside any call). Wake-ups: the part spent waking another task (on loopback, a write wakes its reader).",
  "",
  row(["operation", "server", "user", "kernel", "of which wake-ups", "kernel by system call"]),
  row(["---", "---", "---:", "---:", "---:", "---"]),
  ($doc.kernel[] | row([($doc.labels[.op] // .op), .server, (.user_us | f(0)), (.kernel_us | f(0)), (.wakeups_us | f(0)),
                        (.syscalls | to_entries | sort_by(-.value) | map("\(.key) \(.value | f(1))") | join(", "))])),
  (([$doc.kernel[] | .user_parts // empty][0] // []) | map(.part)) as $parts
  | if ($parts | length) > 0 then
    "",
    "### Where the user time goes (the same samples; µs per operation by what the sampled function is part of)",
    "",
    "sm2: SM2, elliptic-curve and big-number arithmetic; sm3, sm4: those ciphers (GCM included); tls: the rest of the TLS/TLCP library (for Tengine, all of Tongsuo that is not the SM crypto); http: the code of the server itself, connections, HTTP and proxy (nginx; gmproxy with the Go standard library outside crypto); runtime: the Go scheduler, collector and allocator, or the glibc allocator and memory functions; stubs: system-call stubs and the vDSO (on a paravirtualised VM the cost of the system-call instruction itself lands here). Rules: `bench/kernelsplit/userparts.go`.",
    "",
    row(["operation", "server", "user"] + $parts),
    row(["---", "---"] + ([$parts[], "user"] | map("---:"))),
    ($doc.kernel[] | select(.user_parts != null) | (.user_parts | map({(.part): .us}) | add) as $u
     | row([($doc.labels[.op] // .op), .server, (.user_us | f(0))] + ($parts | map($u[.] | f(1)))))
    else empty end
 else empty end)
' "$1"
