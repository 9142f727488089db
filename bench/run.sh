#!/usr/bin/env bash
# gmproxy benchmark harness: starts gmproxy (and, with GMPROXY_TONGSUO_BIN,
# Tongsuo's s_server) in front of a loopback backend, drives them with
# `gmproxy s_time`, reads server CPU time from /proc, and prints a markdown
# table and a JSON document. See bench/README.md.
#
# Environment (all optional):
#   BENCH_TIME=5            seconds per measurement
#   BENCH_CONC=4            concurrent client workers
#   BENCH_PROTOCOLS="tlcp tls13sm tls"
#   BENCH_SUITES_TLCP="ECC-SM2-SM4-CBC-SM3 ECC-SM2-SM4-GCM-SM3 ECDHE-SM2-SM4-CBC-SM3 ECDHE-SM2-SM4-GCM-SM3"
#   BENCH_SUITES_TLS13SM="TLS_SM4_GCM_SM3 TLS_SM4_CCM_SM3"
#   BENCH_PKI=DIR           PKI folder with devpki file names (default: made by the dev setup)
#   BENCH_OUT=DIR           where results.json and results.md go (default: a temp folder, printed)
#   BENCH_SERVERS="gmproxy tongsuo"  which servers to measure (tongsuo needs GMPROXY_TONGSUO_BIN)
#   GMPROXY_BIN=PATH        use this gmproxy binary instead of building one
#   GMPROXY_TONGSUO_BIN=PATH Tongsuo's `openssl`: benchmark its s_server side by side
set -euo pipefail

BENCH_TIME=${BENCH_TIME:-5}
BENCH_CONC=${BENCH_CONC:-4}
BENCH_PROTOCOLS=${BENCH_PROTOCOLS:-"tlcp tls13sm tls"}
BENCH_SUITES_TLCP=${BENCH_SUITES_TLCP:-"ECC-SM2-SM4-CBC-SM3 ECC-SM2-SM4-GCM-SM3 ECDHE-SM2-SM4-CBC-SM3 ECDHE-SM2-SM4-GCM-SM3"}
BENCH_SUITES_TLS13SM=${BENCH_SUITES_TLS13SM:-"TLS_SM4_GCM_SM3 TLS_SM4_CCM_SM3"}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gmproxy-bench.XXXXXX")
OUT=${BENCH_OUT:-$WORK}
mkdir -p "$OUT"
CLK_TCK=$(getconf CLK_TCK)
PIDS=()
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

cleanup() {
	stop_started
	if [[ -n ${BENCH_OUT:-} ]]; then
		rm -rf "$WORK"
	else
		log "results and logs kept in $WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in jq awk getconf; do
	command -v "$tool" >/dev/null || die "$tool is required (apt-get install jq gawk libc-bin)"
done
[[ -r /proc/self/stat ]] || die "/proc is required (Linux)"

build_binaries
make_pki
start_backend

RESULTS=$WORK/results.jsonl
: >"$RESULTS"

# measure SERVER PID PROTO SUITE TEST -- s_time args...
# Runs s_time, derives per-operation server CPU, appends one JSON line.
measure() {
	local server=$1 pid=$2 proto=$3 suite=$4 test=$5
	shift 6
	local before after out rc=0
	before=$(cpu_ticks "$pid")
	out=$("$GMPROXY" s_time -json -time "$BENCH_TIME" "$@" 2>"$WORK/s_time.err") || rc=$?
	after=$(cpu_ticks "$pid")
	if ! jq -e '.runs[0]' >/dev/null 2>&1 <<<"$out"; then
		log "$server $proto $suite $test: s_time failed (exit $rc): $(head -c 300 "$WORK/s_time.err")"
		jq -nc --arg s "$server" --arg p "$proto" --arg c "$suite" --arg t "$test" \
			'{server:$s, protocol:$p, suite:$c, test:$t, error:"s_time failed"}' >>"$RESULTS"
		return 0
	fi
	jq -c --arg s "$server" --arg p "$proto" --arg c "$suite" --arg t "$test" \
		--argjson cpu "$(awk -v a="$before" -v b="$after" -v t="$CLK_TCK" 'BEGIN{printf "%.4f", (b-a)/t}')" '
		.runs[0] as $r
		| ($r.connections) as $n | ($r.requests) as $q
		| {server:$s, protocol:$p, suite:$c, test:$t,
		   connections:$n, resumed:$r.resumed, requests:$q, elapsed:$r.elapsed_seconds,
		   connections_per_second:$r.connections_per_second, requests_per_second:$r.requests_per_second,
		   mib_per_second:($r.bytes_per_second / 1048576),
		   p50_ms:($r.handshake_latency.p50 * 1000), p99_ms:($r.handshake_latency.p99 * 1000),
		   request_p50_ms:(($r.request_latency.p50 // 0) * 1000), request_p99_ms:(($r.request_latency.p99 // 0) * 1000),
		   rate:($r.rate // 0), errors:$r.error_count, error_kinds:$r.errors,
		   server_cpu_seconds:$cpu,
		   cpu_ms_per_connection:(if $n > 0 then $cpu * 1000 / $n else null end),
		   cpu_us_per_request:(if $q > 0 then $cpu * 1e6 / $q else null end)}' <<<"$out" >>"$RESULTS"
	log "$(tail -n 1 "$RESULTS" | jq -r '"\(.server) \(.protocol) \(.suite) \(.test): \(.connections) conns \(.connections_per_second|floor)/s, \(.requests) reqs, cpu \(.server_cpu_seconds)s, errors \(.errors)"')"
}

# run_suite SERVER PID PROTO SUITE ARGS...: full, resumed, p99 at 80 % of peak.
run_suite() {
	local server=$1 pid=$2 proto=$3 suite=$4
	shift 4
	local args=("$@") peak rate
	measure "$server" "$pid" "$proto" "$suite" full -- -new -c "$BENCH_CONC" "${args[@]}"
	measure "$server" "$pid" "$proto" "$suite" resumed -- -reuse -c "$BENCH_CONC" "${args[@]}"
	peak=$(tail -n 2 "$RESULTS" | head -n 1 | jq -r '.connections_per_second // 0')
	rate=$(awk -v p="$peak" 'BEGIN{printf "%.1f", p * 0.8}')
	if awk -v r="$rate" 'BEGIN{exit !(r > 0)}'; then
		measure "$server" "$pid" "$proto" "$suite" p99_at_80pct -- -new -c "$BENCH_CONC" -rate "$rate" "${args[@]}"
	fi
}

# run_server SERVER PID PORT [tongsuo]: every protocol and suite against one server.
proto_flag() { case $1 in tlcp) echo -ntls ;; tls13sm) echo -tls13sm ;; tls) echo -tls ;; esac; }

run_gmproxy() {
	local port admin cfg pid proto suite
	port=$(free_port)
	admin=$(free_port)
	cfg=$WORK/gmproxy.yaml
	gmproxy_config "$cfg" "$port" "$admin"
	"$GMPROXY" run -c "$cfg" >"$WORK/gmproxy.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait_port "$port" 30 || die "gmproxy did not listen on $port (see $WORK/gmproxy.log: $(tail -n 3 "$WORK/gmproxy.log"))"
	log "gmproxy (pid $pid) on 127.0.0.1:$port, backend $BACKEND"
	local common=(-connect "127.0.0.1:$port" -servername localhost)
	for proto in $BENCH_PROTOCOLS; do
		case $proto in
		tlcp)
			for suite in $BENCH_SUITES_TLCP; do
				local extra=()
				[[ $suite == ECDHE* ]] && read -ra extra <<<"$(client_auth_args)"
				run_suite gmproxy "$pid" tlcp "$suite" -ntls -CAfile "$PKI/ca.crt" -cipher "$suite" "${extra[@]}" "${common[@]}"
			done
			;;
		tls13sm)
			for suite in $BENCH_SUITES_TLS13SM; do
				run_suite gmproxy "$pid" tls13sm "$suite" -tls13sm -CAfile "$PKI/ca.crt" -cipher "$suite" "${common[@]}"
			done
			;;
		tls)
			run_suite gmproxy "$pid" tls default -tls "${common[@]}"
			;;
		esac
		measure gmproxy "$pid" "$proto" default keepalive_1k -- "$(proto_flag "$proto")" -new -keepalive -www /1k -c "$BENCH_CONC" "${common[@]}"
		measure gmproxy "$pid" "$proto" default download_1m -- "$(proto_flag "$proto")" -new -download -www /1m -c 1 "${common[@]}"
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# start_tongsuo MODE PORT DOCROOT: MODE ntls | ntls-auth | tls13sm. Sets TONGSUO_PID.
start_tongsuo() {
	local mode=$1 port=$2 docroot=$3 args
	args=(s_server -accept "127.0.0.1:$port" -quiet -WWW -http_server_binmode)
	case $mode in
	ntls) args+=(-enable_ntls -sign_cert "$PKI/server_sign.crt" -sign_key "$PKI/server_sign.key" -enc_cert "$PKI/server_enc.crt" -enc_key "$PKI/server_enc.key") ;;
	ntls-auth) args+=(-enable_ntls -sign_cert "$PKI/server_sign.crt" -sign_key "$PKI/server_sign.key" -enc_cert "$PKI/server_enc.crt" -enc_key "$PKI/server_enc.key" -verify 1 -CAfile "$PKI/ca.crt") ;;
	tls13sm) args+=(-tls1_3 -enable_sm_tls13_strict -ciphersuites "TLS_SM4_GCM_SM3:TLS_SM4_CCM_SM3" -cert "$PKI/server_sign.crt" -key "$PKI/server_sign.key") ;;
	esac
	(cd "$docroot" && exec "$GMPROXY_TONGSUO_BIN" "${args[@]}" </dev/null >"$WORK/tongsuo-$mode.log" 2>&1) &
	TONGSUO_PID=$!
	PIDS+=("$TONGSUO_PID")
}

run_tongsuo() {
	local docroot=$WORK/docroot port pid proto suite mode
	mkdir -p "$docroot"
	head -c 1024 /dev/zero >"$docroot/1k"
	head -c 1048576 /dev/zero >"$docroot/1m"
	for proto in $BENCH_PROTOCOLS; do
		case $proto in
		tlcp)
			for suite in $BENCH_SUITES_TLCP; do
				mode=ntls
				local extra=()
				if [[ $suite == ECDHE* ]]; then
					mode=ntls-auth
					read -ra extra <<<"$(client_auth_args)"
				fi
				port=$(free_port)
				start_tongsuo "$mode" "$port" "$docroot"
				pid=$TONGSUO_PID
				wait_port "$port" 10 || die "Tongsuo s_server did not start (see $WORK/tongsuo-$mode.log)"
				run_suite tongsuo "$pid" tlcp "$suite" -ntls -CAfile "$PKI/ca.crt" -cipher "$suite" "${extra[@]}" -connect "127.0.0.1:$port" -servername localhost
				if [[ $suite == "${BENCH_SUITES_TLCP%% *}" ]]; then
					measure tongsuo "$pid" tlcp default keepalive_1k -- -ntls -new -keepalive -www /1k -c "$BENCH_CONC" -connect "127.0.0.1:$port" -servername localhost
					measure tongsuo "$pid" tlcp default download_1m -- -ntls -new -download -www /1m -c 1 -connect "127.0.0.1:$port" -servername localhost
				fi
				kill "$pid" 2>/dev/null || true
				wait "$pid" 2>/dev/null || true
			done
			;;
		tls13sm)
			port=$(free_port)
			start_tongsuo tls13sm "$port" "$docroot"
			pid=$TONGSUO_PID
			wait_port "$port" 10 || die "Tongsuo s_server did not start (see $WORK/tongsuo-tls13sm.log)"
			for suite in $BENCH_SUITES_TLS13SM; do
				run_suite tongsuo "$pid" tls13sm "$suite" -tls13sm -CAfile "$PKI/ca.crt" -cipher "$suite" -connect "127.0.0.1:$port" -servername localhost
			done
			measure tongsuo "$pid" tls13sm default keepalive_1k -- -tls13sm -new -keepalive -www /1k -c "$BENCH_CONC" -connect "127.0.0.1:$port" -servername localhost
			measure tongsuo "$pid" tls13sm default download_1m -- -tls13sm -new -download -www /1m -c 1 -connect "127.0.0.1:$port" -servername localhost
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			;;
		esac
	done
}

BENCH_SERVERS=${BENCH_SERVERS:-"gmproxy tongsuo"}
if [[ " $BENCH_SERVERS " == *" gmproxy "* ]]; then
	run_gmproxy
fi
if [[ " $BENCH_SERVERS " == *" tongsuo "* && -n ${GMPROXY_TONGSUO_BIN:-} ]]; then
	[[ -x $GMPROXY_TONGSUO_BIN ]] || die "GMPROXY_TONGSUO_BIN=$GMPROXY_TONGSUO_BIN is not executable"
	run_tongsuo
fi

# ---- report ----
jq -s --arg time "$BENCH_TIME" --arg conc "$BENCH_CONC" --arg date "$(date -u +%FT%TZ)" \
	--arg host "$(uname -srm), $(getconf _NPROCESSORS_ONLN) CPUs" \
	'{date:$date, host:$host, seconds_per_measurement:($time|tonumber), concurrency:($conc|tonumber), results:.}' \
	"$RESULTS" >"$OUT/results.json"
"$ROOT/bench/report.sh" "$OUT/results.json" >"$OUT/results.md"
cat "$OUT/results.md"
echo
echo '```json'
cat "$OUT/results.json"
echo '```'
