#!/usr/bin/env bash
# bench/edge.sh: gmproxy side by side with Tengine (+ Tongsuo NTLS) as an
# edge proxy: same PKI, same Go backend, same client (`gmproxy s_time`),
# rounds alternating between the servers, server CPU (utime+stime of every
# process of the server) per operation and the kernel's share of it (stime),
# ratios gmproxy / Tengine, and system calls per operation under
# `strace -c -f`. See bench/README.md.
#
# Environment (all optional):
#   GMPROXY_TENGINE_BIN=PATH  Tengine's nginx built with ngx_tongsuo_ntls; unset: gmproxy only
#   GMPROXY_BASE_BIN=PATH     a second gmproxy (e.g. built from main) measured as "gmproxy-base"
#   BENCH_ROUNDS=3            rounds; each round measures every operation on each server
#   BENCH_TIME=4              seconds per measurement (upper bound)
#   BENCH_N=3000              operations per measurement (upper bound; downloads: N/30)
#   BENCH_REQ_FACTOR=10       keep-alive measurements make BENCH_N times this many requests
#   BENCH_RESUMED_FACTOR=3    resumed-handshake measurements make BENCH_N times this many
#   BENCH_CONC=2              client workers (s_time -c); downloads use 1
#   BENCH_OPS="..."           subset of the operation names (see OPS below)
#   BENCH_STRACE=auto         1: count system calls (needs strace), 0: skip, auto: when strace exists
#   BENCH_STRACE_N=500        operations per strace run
#   BENCH_PKI, BENCH_OUT, GMPROXY_BIN as for bench/run.sh
#   GMPROXY_EXTRA_YAML        top-level YAML appended to gmproxy's configuration
#   GMPROXY_BASE_EXTRA_YAML   the same for gmproxy-base (default: GMPROXY_EXTRA_YAML), e.g.
#                             "workers: 1" against GMPROXY_EXTRA_YAML="workers: auto" with
#                             GMPROXY_BASE_BIN set to the same binary
#   GMPROXY_ENV               extra environment for gmproxy, e.g. "GOMAXPROCS=1"
#   GMPROXY_LISTENER_YAML     one more key of gmproxy's listener, e.g. "defer_accept: 0s"
#   GMPROXY_ADMIN_YAML        one more key of gmproxy's admin listener, e.g. "pprof: true"
#   BENCH_TENGINE_LISTEN      more parameters of Tengine's listen directives, e.g. "deferred"
#   BENCH_PIN=S:C             pin the servers to CPUs S and the client and backend to CPUs C
#                             (taskset lists, e.g. 0:1); unset: no pinning
#   BENCH_LATENCY=0           1: also measure handshake latency at BENCH_LATENCY_LOAD (0.8) of
#                             each server's peak rate, and at that share of the lowest peak
#                             for every server (the same rate), with how busy the server's and
#                             the client's CPUs were: handshakes only (no GET), from s_time
#                             -loadgen, a client that skips verification and SM2 encryption so
#                             that the server, not the client, sets the peak; before them,
#                             bench/wakeup measures how late the machine wakes a sleeping
#                             thread on the servers' and the client's CPUs (the floor under
#                             every server's tail)
#   BENCH_LATENCY_OPS="..."   the operations measured so (default: new and resumed TLCP ECC and
#                             TLS 1.3-SM handshakes)
#   BENCH_PERF=0              1: split each server's CPU per operation by where the kernel spent it
#                             (system call, waking other tasks) and its user time by part (SM
#                             crypto, TLS library, HTTP code, runtime), from `perf record -g` on the
#                             server's processes during one bounded run per operation and server,
#                             read by bench/kernelsplit (needs perf and the right to profile)
#   BENCH_PERF_OPS="..."      the operations measured so (default: new TLCP ECC-GCM, resumed TLCP
#                             by session ID, keep-alive over TLCP)
#   BENCH_PGO_OUT=FILE        instead of measuring: profile gmproxy (one process with one P, as
#                             one worker of `workers: auto`) for BENCH_TIME seconds under each
#                             operation and write the merged CPU profile to FILE, the input of
#                             profile-guided optimisation (go build -pgo=FILE); needs curl
set -euo pipefail

BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_TIME=${BENCH_TIME:-4}
BENCH_N=${BENCH_N:-3000}
BENCH_REQ_FACTOR=${BENCH_REQ_FACTOR:-10}
BENCH_RESUMED_FACTOR=${BENCH_RESUMED_FACTOR:-3}
BENCH_CONC=${BENCH_CONC:-2}
BENCH_STRACE=${BENCH_STRACE:-auto}
BENCH_STRACE_N=${BENCH_STRACE_N:-500}
BENCH_LATENCY=${BENCH_LATENCY:-0}
BENCH_LATENCY_LOAD=${BENCH_LATENCY_LOAD:-0.8}
BENCH_LATENCY_OPS=${BENCH_LATENCY_OPS:-tlcp_ecc_gcm_new tls13sm_new tlcp_resumed_id tls13sm_resumed}
BENCH_PERF=${BENCH_PERF:-0}
BENCH_PERF_OPS=${BENCH_PERF_OPS:-tlcp_ecc_gcm_new tlcp_resumed_id tlcp_keepalive_1k}
BENCH_PIN=${BENCH_PIN:-}
BENCH_PGO_OUT=${BENCH_PGO_OUT:-}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gmproxy-edge.XXXXXX")
OUT=${BENCH_OUT:-$WORK}
mkdir -p "$OUT"
CLK_TCK=$(getconf CLK_TCK)
PIDS=()
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

cleanup() {
	stop_started
	log "logs kept in $WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in jq awk getconf; do
	command -v "$tool" >/dev/null || die "$tool is required (apt-get install jq gawk libc-bin)"
done
if [[ $BENCH_STRACE == auto ]]; then
	BENCH_STRACE=0
	command -v strace >/dev/null && BENCH_STRACE=1
fi

# With BENCH_PIN the servers run on one set of CPUs and the client and
# backend on another, so that the servers do not compete with the load they
# are measured under (Go sizes GOMAXPROCS from the affinity mask).
SRV_RUN=()
CLI_RUN=()
if [[ -n ${BENCH_PIN:-} ]]; then
	command -v taskset >/dev/null || die "BENCH_PIN needs taskset (apt-get install util-linux)"
	[[ $BENCH_PIN == *:* ]] || die "BENCH_PIN=$BENCH_PIN: write SERVER_CPUS:CLIENT_CPUS, e.g. 0:1"
	SRV_RUN=(taskset -c "${BENCH_PIN%%:*}")
	CLI_RUN=(taskset -c "${BENCH_PIN##*:}")
fi

if [[ -n $BENCH_PGO_OUT ]]; then
	command -v curl >/dev/null || die "BENCH_PGO_OUT needs curl (apt-get install curl)"
	[[ -z ${GMPROXY_BASE_BIN:-}${GMPROXY_TENGINE_BIN:-} ]] || die "BENCH_PGO_OUT profiles gmproxy alone: unset GMPROXY_BASE_BIN and GMPROXY_TENGINE_BIN"
	# One serving process with one P, as each worker of `workers: auto`
	# runs, with pprof on its admin listener (loopback). The workers key
	# is this mode's own, so it goes after what the caller gave.
	GMPROXY_EXTRA_YAML="${GMPROXY_EXTRA_YAML:-}
workers: 1"
	GMPROXY_ADMIN_YAML="pprof: true"
	GMPROXY_ENV="${GMPROXY_ENV:-} GOMAXPROCS=1"
fi

build_binaries
make_pki
start_backend
if [[ -n ${BENCH_PIN:-} ]]; then
	taskset -apc "${BENCH_PIN##*:}" "${PIDS[-1]}" >/dev/null || die "taskset on the backend failed"
fi

# ---- servers ----
declare -A SPID SPORT SADMIN # by server name; SPORT by "name listener"
SERVERS=()

# start_gmproxy NAME BINARY EXTRA: one gmproxy listener for every protocol;
# EXTRA is appended to its configuration.
start_gmproxy() {
	local name=$1 bin=$2 extra=$3 port admin pid l
	port=$(free_port)
	admin=$(free_port)
	gmproxy_config "$WORK/$name.yaml" "$port" "$admin" "$extra"
	# shellcheck disable=SC2086
	env ${GMPROXY_ENV:-} "${SRV_RUN[@]}" "$bin" run -c "$WORK/$name.yaml" >"$WORK/$name.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait_port "$port" 30 || die "$name did not listen (see $WORK/$name.log)"
	SPID[$name]=$pid
	SADMIN[$name]=$admin
	for l in ntls ntls_auth tls13sm; do SPORT[$name $l]=$port; done
	SERVERS+=("$name")
	log "$name ($bin) pid $pid on 127.0.0.1:$port"
}

start_tengine() {
	local d=$WORK/tengine p
	mkdir -p "$d/conf" "$d/logs"
	local -A PORT_TG=([ntls]=$(free_port) [ntls_auth]=$(free_port) [tls13sm]=$(free_port))
	local ntls_certs="enable_ntls on;
        ssl_sign_certificate $PKI/server_sign.crt;
        ssl_sign_certificate_key $PKI/server_sign.key;
        ssl_enc_certificate $PKI/server_enc.crt;
        ssl_enc_certificate_key $PKI/server_enc.key;
        ssl_ciphers ECC-SM2-SM4-GCM-SM3:ECC-SM2-SM4-CBC-SM3:ECDHE-SM2-SM4-GCM-SM3:ECDHE-SM2-SM4-CBC-SM3;"
	cat >"$d/conf/nginx.conf" <<-NGINX
		worker_processes 1;
		daemon off;
		error_log $d/logs/error.log warn;
		pid $d/logs/nginx.pid;
		events { worker_connections 4096; }
		http {
		    access_log off;
		    keepalive_requests 1000000;
		    keepalive_timeout 120s;
		    ssl_session_cache shared:SSL:10m;
		    ssl_session_timeout 1h;
		    upstream backend { server $BACKEND; keepalive 32; keepalive_requests 1000000; }
		    proxy_http_version 1.1;
		    proxy_set_header Connection "";
		    server {
		        listen 127.0.0.1:${PORT_TG[ntls]} ssl${BENCH_TENGINE_LISTEN:+ $BENCH_TENGINE_LISTEN};
		        server_name localhost;
		        $ntls_certs
		        location / { proxy_pass http://backend; }
		    }
		    server {
		        listen 127.0.0.1:${PORT_TG[ntls_auth]} ssl${BENCH_TENGINE_LISTEN:+ $BENCH_TENGINE_LISTEN};
		        server_name localhost;
		        $ntls_certs
		        ssl_verify_client on;
		        ssl_client_certificate $PKI/ca.crt;
		        location / { proxy_pass http://backend; }
		    }
		    server {
		        listen 127.0.0.1:${PORT_TG[tls13sm]} ssl${BENCH_TENGINE_LISTEN:+ $BENCH_TENGINE_LISTEN};
		        server_name localhost;
		        ssl_protocols TLSv1.3;
		        ssl_certificate $PKI/server_sign.crt;
		        ssl_certificate_key $PKI/server_sign.key;
		        ssl_conf_command Ciphersuites TLS_SM4_GCM_SM3:TLS_SM4_CCM_SM3;
		        ssl_conf_command Enable_sm_tls13_strict on;
		        location / { proxy_pass http://backend; }
		    }
		}
	NGINX
	"${SRV_RUN[@]}" "$GMPROXY_TENGINE_BIN" -p "$d" -c "$d/conf/nginx.conf" >"$d/logs/stdout.log" 2>&1 &
	SPID[tengine]=$!
	PIDS+=("${SPID[tengine]}")
	for p in "${PORT_TG[@]}"; do
		wait_port "$p" 20 || die "Tengine did not listen on $p (see $d/logs/error.log: $(tail -n 3 "$d/logs/error.log" 2>/dev/null))"
	done
	for p in ntls ntls_auth tls13sm; do SPORT[tengine $p]=${PORT_TG[$p]}; done
	SERVERS+=(tengine)
	log "Tengine master pid ${SPID[tengine]} on 127.0.0.1:${PORT_TG[ntls]} (NTLS), ${PORT_TG[ntls_auth]} (NTLS, client certs), ${PORT_TG[tls13sm]} (TLS 1.3-SM)"
}

start_gmproxy gmproxy "$GMPROXY" "${GMPROXY_EXTRA_YAML:-}"
if [[ -n ${GMPROXY_BASE_BIN:-} ]]; then
	start_gmproxy gmproxy-base "$GMPROXY_BASE_BIN" "${GMPROXY_BASE_EXTRA_YAML-${GMPROXY_EXTRA_YAML:-}}"
fi
if [[ -n ${GMPROXY_TENGINE_BIN:-} ]]; then
	[[ -x $GMPROXY_TENGINE_BIN ]] || die "GMPROXY_TENGINE_BIN=$GMPROXY_TENGINE_BIN is not executable"
	start_tengine
fi

# ---- operations ----
# name|unit|listener|s_time arguments. unit: conn (per connection), req (per
# request), mib (per MiB downloaded).
AUTH="$(client_auth_args)"
OPS=(
	"tlcp_ecc_gcm_new|conn|ntls|-ntls -new -cipher ECC-SM2-SM4-GCM-SM3 -www /1k"
	"tlcp_ecc_cbc_new|conn|ntls|-ntls -new -cipher ECC-SM2-SM4-CBC-SM3 -www /1k"
	"tlcp_ecdhe_gcm_new|conn|ntls_auth|-ntls -new -cipher ECDHE-SM2-SM4-GCM-SM3 $AUTH -www /1k"
	"tls13sm_new|conn|tls13sm|-tls13sm -new -cipher TLS_SM4_GCM_SM3 -www /1k"
	"tlcp_resumed_id|conn|ntls|-ntls -reuse -no_ticket -cipher ECC-SM2-SM4-GCM-SM3 -www /1k"
	"tlcp_resumed_ticket|conn|ntls|-ntls -reuse -cipher ECC-SM2-SM4-GCM-SM3 -www /1k"
	"tls13sm_resumed|conn|tls13sm|-tls13sm -reuse -cipher TLS_SM4_GCM_SM3 -www /1k"
	"tlcp_keepalive_1k|req|ntls|-ntls -new -keepalive -cipher ECC-SM2-SM4-GCM-SM3 -www /1k"
	"tls13sm_keepalive_1k|req|tls13sm|-tls13sm -new -keepalive -cipher TLS_SM4_GCM_SM3 -www /1k"
	"tlcp_cbc_keepalive_1k|req|ntls|-ntls -new -keepalive -cipher ECC-SM2-SM4-CBC-SM3 -www /1k"
	"tlcp_gcm_1m|mib|ntls|-ntls -new -download -cipher ECC-SM2-SM4-GCM-SM3 -www /1m"
	"tls13sm_gcm_1m|mib|tls13sm|-tls13sm -new -download -cipher TLS_SM4_GCM_SM3 -www /1m"
	"tlcp_cbc_1m|mib|ntls|-ntls -new -download -cipher ECC-SM2-SM4-CBC-SM3 -www /1m"
)
declare -A LABEL=(
	[tlcp_ecc_gcm_new]="new TLCP ECC-SM4-GCM handshake + GET 1 KiB"
	[tlcp_ecc_cbc_new]="new TLCP ECC-SM4-CBC handshake + GET 1 KiB"
	[tlcp_ecdhe_gcm_new]="new TLCP ECDHE-SM4-GCM handshake (client certs) + GET 1 KiB"
	[tls13sm_new]="new TLS 1.3-SM handshake + GET 1 KiB"
	[tlcp_resumed_id]="resumed TLCP ECC-GCM (session ID) + GET"
	[tlcp_resumed_ticket]="resumed TLCP ECC-GCM (ticket offered) + GET"
	[tls13sm_resumed]="resumed TLS 1.3-SM (psk_dhe_ke) + GET"
	[tlcp_keepalive_1k]="keep-alive GET 1 KiB over TLCP-GCM"
	[tls13sm_keepalive_1k]="keep-alive GET 1 KiB over TLS 1.3-SM"
	[tlcp_cbc_keepalive_1k]="keep-alive GET 1 KiB over TLCP-CBC"
	[tlcp_gcm_1m]="1 MiB downloads, TLCP SM4-GCM"
	[tls13sm_gcm_1m]="1 MiB downloads, TLS 1.3-SM SM4-GCM"
	[tlcp_cbc_1m]="1 MiB downloads, TLCP SM4-CBC"
)
if [[ -n ${BENCH_OPS:-} ]]; then
	sel=()
	for op in "${OPS[@]}"; do
		[[ " $BENCH_OPS " == *" ${op%%|*} "* ]] && sel+=("$op")
	done
	OPS=("${sel[@]}")
fi

server_pid() { echo "${SPID[$1]}"; }
server_port() { echo "${SPORT[$1 $2]}"; }

# s_time_args OP SERVER N: the full s_time command line of one operation.
s_time_args() {
	local name unit lst args n=$3 c=$BENCH_CONC
	IFS='|' read -r name unit lst args <<<"$1"
	if [[ $unit == mib ]]; then
		n=$(((n + 29) / 30))
		c=1
	fi
	# shellcheck disable=SC2086
	echo -connect "127.0.0.1:$(server_port "$2" "$lst")" -servername localhost -CAfile "$PKI/ca.crt" -c "$c" -n "$n" $args
}

# ---- a CPU profile for profile-guided optimisation ----
# pgo_profile FILE: BENCH_TIME seconds of gmproxy's CPU profile under each
# operation (equal time each, so that every path is represented), merged.
pgo_profile() {
	local op name args profiles=() spid
	for op in "${OPS[@]}"; do
		name=${op%%|*}
		read -ra args <<<"$(s_time_args "$op" gmproxy 100000000)"
		"${CLI_RUN[@]}" "$GMPROXY" s_time -time "$((BENCH_TIME + 1))" "${args[@]}" >"$WORK/pgo-$name.s_time" 2>&1 &
		spid=$!
		sleep 0.5
		if curl -fsS -o "$WORK/pgo-$name.pprof" "http://127.0.0.1:${SADMIN[gmproxy]}/debug/pprof/profile?seconds=$BENCH_TIME"; then
			profiles+=("$WORK/pgo-$name.pprof")
			log "pgo: profiled $name"
		else
			log "pgo: no profile for $name"
		fi
		wait "$spid" || log "pgo: s_time for $name failed: $(tail -n 3 "$WORK/pgo-$name.s_time")"
	done
	((${#profiles[@]} > 0)) || die "pgo: no profiles"
	(cd "$ROOT" && go tool pprof -proto "${profiles[@]}") >"$1" 2>"$WORK/pgo.err" || die "pgo: merging the profiles failed: $(head -c 300 "$WORK/pgo.err")"
	log "pgo: wrote $1 from ${#profiles[@]} profiles"
}
if [[ -n $BENCH_PGO_OUT ]]; then
	pgo_profile "$BENCH_PGO_OUT"
	exit 0
fi

RESULTS=$WORK/edge.jsonl
: >"$RESULTS"

# measure ROUND SERVER OP: one bounded s_time run, one JSON line.
measure() {
	local round=$1 server=$2 op=$3 pid out rc=0 name unit u0 s0 u1 s1
	IFS='|' read -r name unit _ <<<"$op"
	pid=$(server_pid "$server")
	local -a args
	local n=$BENCH_N
	# A keep-alive request costs a tenth of a handshake: more of them, so
	# that the 10 ms clock tick stays a small share of the measurement.
	[[ $unit == req ]] && n=$((BENCH_N * BENCH_REQ_FACTOR))
	# So is a resumed handshake (about 100 µs against a new one's 300 or
	# more): 3000 of them were 0.3 s of CPU, where rounds spread widely.
	[[ $name == *resumed* ]] && n=$((BENCH_N * BENCH_RESUMED_FACTOR))
	read -ra args <<<"$(s_time_args "$op" "$server" "$n")"
	read -r u0 s0 <<<"$(tree_ticks_split "$pid")"
	out=$("${CLI_RUN[@]}" "$GMPROXY" s_time -json -time "$BENCH_TIME" "${args[@]}" 2>"$WORK/s_time.err") || rc=$?
	read -r u1 s1 <<<"$(tree_ticks_split "$pid")"
	local before=$((u0 + s0)) after=$((u1 + s1))
	if ! jq -e '.runs[0]' >/dev/null 2>&1 <<<"$out"; then
		log "$server $name: s_time failed (exit $rc): $(head -c 300 "$WORK/s_time.err")"
		return 0
	fi
	jq -c --arg s "$server" --arg o "$name" --arg u "$unit" --argjson r "$round" \
		--argjson cpu "$(awk -v a="$before" -v b="$after" -v t="$CLK_TCK" 'BEGIN{printf "%.4f", (b-a)/t}')" \
		--argjson sys "$(awk -v a="$s0" -v b="$s1" -v t="$CLK_TCK" 'BEGIN{printf "%.4f", (b-a)/t}')" '
		.runs[0] as $x
		| (if $u == "conn" then $x.connections elif $u == "req" then $x.requests else ($x.bytes / 1048576) end) as $ops
		| {server:$s, op:$o, unit:$u, round:$r, cpu:$cpu, ops:$ops, connections:$x.connections, resumed:$x.resumed,
		   requests:$x.requests, bytes:$x.bytes, elapsed:$x.elapsed_seconds, errors:$x.error_count,
		   us_per_op:(if $ops > 0 then $cpu * 1e6 / $ops else null end),
		   sys_us_per_op:(if $ops > 0 then $sys * 1e6 / $ops else null end)}' <<<"$out" >>"$RESULTS"
	log "round $round $server $name: $(tail -n 1 "$RESULTS" | jq -r '"\(.ops|floor) ops, resumed \(.resumed), cpu \(.cpu)s, \(.us_per_op|floor) µs/op, errors \(.errors)"')"
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= BENCH_ROUNDS; round++)); do
	for op in "${OPS[@]}"; do
		# Alternate: forward order in odd rounds, reversed in even ones.
		order=("${SERVERS[@]}")
		if ((round % 2 == 0)); then
			order=()
			for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do order+=("${SERVERS[i]}"); done
		fi
		for server in "${order[@]}"; do
			measure "$round" "$server" "$op"
		done
	done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- system calls per operation ----
SYSCALLS=$WORK/syscalls.jsonl
: >"$SYSCALLS"
# strace_op SERVER OP: strace -c -f on every process of the server during a
# bounded run; one JSON line with calls per operation and the top calls.
strace_op() {
	local server=$1 op=$2 name unit pid st out rc=0 sfile=$WORK/strace-$1-${2%%|*}.txt
	IFS='|' read -r name unit _ <<<"$op"
	pid=$(server_pid "$server")
	local -a targets=() args
	for p in $(tree_pids "$pid"); do targets+=(-p "$p"); done
	read -ra args <<<"$(s_time_args "$op" "$server" "$BENCH_STRACE_N")"
	strace -c -f -q -o "$sfile" "${targets[@]}" &
	st=$!
	sleep 1
	out=$("${CLI_RUN[@]}" "$GMPROXY" s_time -json -time 60 "${args[@]}" 2>"$WORK/s_time.err") || rc=$?
	kill -INT "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
	if ! jq -e '.runs[0]' >/dev/null 2>&1 <<<"$out"; then
		log "strace $server $name: s_time failed (exit $rc)"
		return 0
	fi
	local ops total top
	ops=$(jq -r --arg u "$unit" '.runs[0] | if $u == "req" then .requests else .connections end' <<<"$out")
	total=$(awk '/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ && $NF == "total" {print $4}' "$sfile")
	top=$(awk '/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ && $NF != "total" {print $NF, $4}' "$sfile" |
		sort -k2,2nr | head -n 8 | awk -v ops="$ops" '{printf "%s%s %.1f", (NR > 1 ? ", " : ""), $1, $2 / ops}')
	jq -nc --arg s "$server" --arg o "$name" --argjson ops "${ops:-0}" --argjson calls "${total:-0}" --arg top "$top" \
		'{server:$s, op:$o, ops:$ops, calls:$calls, per_op:(if $ops > 0 then $calls / $ops else null end), top:$top}' >>"$SYSCALLS"
	log "strace $server $name: $(tail -n 1 "$SYSCALLS")"
}
if [[ $BENCH_STRACE == 1 ]]; then
	for op in "${OPS[@]}"; do
		case ${op%%|*} in tlcp_resumed_id | tlcp_keepalive_1k | tls13sm_resumed) ;; *) continue ;; esac
		for server in "${SERVERS[@]}"; do
			strace_op "$server" "$op"
		done
	done
fi

# ---- where the kernel time goes (perf) ----
KERNEL=$WORK/kernel.jsonl
: >"$KERNEL"
PERF_HZ=2999
# perf_op SERVER OP: perf record -g on every process of the server during a
# bounded run; one JSON line from bench/kernelsplit (time per operation in
# user space and in the kernel, the kernel's by system call, and its
# wake-ups of other tasks).
perf_op() {
	local server=$1 op=$2 name unit pid pf out rc=0 ops n=$BENCH_N pids=""
	IFS='|' read -r name unit _ <<<"$op"
	pid=$(server_pid "$server")
	pf=$WORK/perf-$server-$name.data
	for p in $(tree_pids "$pid"); do pids+=${pids:+,}$p; done
	[[ $unit == req ]] && n=$((BENCH_N * BENCH_REQ_FACTOR))
	local -a args
	read -ra args <<<"$(s_time_args "$op" "$server" "$n")"
	perf record -q -e cpu-clock -F "$PERF_HZ" -g -p "$pids" -o "$pf" >/dev/null 2>"$WORK/perf.err" &
	local pp=$!
	sleep 1
	out=$("${CLI_RUN[@]}" "$GMPROXY" s_time -json -time "$BENCH_TIME" "${args[@]}" 2>"$WORK/s_time.err") || rc=$?
	kill -INT "$pp" 2>/dev/null || true
	wait "$pp" 2>/dev/null || true
	if ! jq -e '.runs[0]' >/dev/null 2>&1 <<<"$out"; then
		log "perf $server $name: s_time failed (exit $rc)"
		return 0
	fi
	ops=$(jq -r --arg u "$unit" '.runs[0] | if $u == "req" then .requests else .connections end' <<<"$out")
	if ! perf script -i "$pf" -F comm,ip,sym,dso 2>>"$WORK/perf.err" | "$WORK/kernelsplit" -ops "$ops" -hz "$PERF_HZ" |
		jq -c --arg s "$server" --arg o "$name" '{server:$s, op:$o} + .' >>"$KERNEL"; then
		log "perf $server $name: no samples ($(head -c 300 "$WORK/perf.err"))"
		return 0
	fi
	log "perf $server $name: $(tail -n 1 "$KERNEL")"
}
if [[ $BENCH_PERF == 1 ]]; then
	command -v perf >/dev/null || die "BENCH_PERF=1 needs perf (apt-get install linux-perf)"
	(cd "$ROOT" && go build -o "$WORK/kernelsplit" ./bench/kernelsplit) || die "go build ./bench/kernelsplit failed"
	for op in "${OPS[@]}"; do
		[[ " $BENCH_PERF_OPS " == *" ${op%%|*} "* ]] || continue
		for server in "${SERVERS[@]}"; do
			perf_op "$server" "$op"
		done
	done
fi

# ---- handshake latency at a share of the peak rate ----
LATENCY=$WORK/latency.jsonl
: >"$LATENCY"
# cpus_busy LIST: "BUSY TOTAL" jiffies summed over the CPUs of a taskset
# list (e.g. 0 or 0-1; empty: all CPUs), from /proc/stat.
cpus_busy() {
	awk -v list="$1" '
	BEGIN { n = split(list, parts, ","); for (i = 1; i <= n; i++) { if (split(parts[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; c++) want["cpu" c] = 1 } else if (parts[i] != "") want["cpu" parts[i]] = 1 } }
	$1 ~ /^cpu[0-9]+$/ && (list == "" || ($1 in want)) { busy += $2 + $3 + $4 + $7 + $8; total += $2 + $3 + $4 + $5 + $6 + $7 + $8 }
	END { print busy, total }' /proc/stat
}
# latency_args OP SERVER: the s_time arguments of OP's latency runs:
# handshakes only, from the load-generator client (no verification, one
# encrypted pre-master or key share), so that the server sets the peak.
latency_args() {
	local -a all args
	read -ra all <<<"$(s_time_args "$1" "$2" 1000000)"
	local i
	for ((i = 0; i < ${#all[@]}; i++)); do
		case ${all[i]} in
		-CAfile | -www) i=$((i + 1)) ;;
		*) args+=("${all[i]}") ;;
		esac
	done
	echo "${args[*]} -loadgen"
}
# latency_peak SERVER OP: the server's peak rate of OP's handshakes
# (s_time -c 4).
latency_peak() {
	local -a args
	read -ra args <<<"$(latency_args "$2" "$1")"
	"${CLI_RUN[@]}" "$GMPROXY" s_time -json -time "$BENCH_TIME" "${args[@]}" -c 4 2>/dev/null | jq -r '.runs[0].connections_per_second // 0'
}
# latency_op SERVER OP PEAK RATE BASIS: a paced run at RATE with 64
# workers: handshake p50/p99 and how busy the server's and the client's
# CPUs were (with BENCH_PIN; otherwise both are the whole machine). A
# client CPU near 100 % means the figures are the client's queueing, not
# the server's. BASIS says where RATE came from: "own" (BENCH_LATENCY_LOAD
# of this server's peak) or "common" (of the lowest peak of all servers,
# the same rate for each).
latency_op() {
	local server=$1 op=$2 peak=$3 rate=$4 basis=$5 name out sb st cb ct sb1 st1 cb1 ct1
	IFS='|' read -r name _ <<<"$op"
	local -a args
	read -ra args <<<"$(latency_args "$op" "$server")"
	if ((rate < 1)); then
		log "latency $server $name: no peak rate"
		return 0
	fi
	read -r sb st <<<"$(cpus_busy "${BENCH_PIN%%:*}")"
	read -r cb ct <<<"$(cpus_busy "${BENCH_PIN##*:}")"
	out=$("${CLI_RUN[@]}" "$GMPROXY" s_time -json -time "$BENCH_TIME" "${args[@]}" -c 64 -rate "$rate" 2>/dev/null) || true
	read -r sb1 st1 <<<"$(cpus_busy "${BENCH_PIN%%:*}")"
	read -r cb1 ct1 <<<"$(cpus_busy "${BENCH_PIN##*:}")"
	jq -e '.runs[0]' >/dev/null 2>&1 <<<"$out" || return 0
	jq -c --arg s "$server" --arg o "$name" --arg basis "$basis" --argjson peak "$peak" --argjson rate "$rate" \
		--argjson sbusy "$(awk -v a="$((sb1 - sb))" -v b="$((st1 - st))" 'BEGIN{printf "%.0f", (b > 0 ? 100 * a / b : 0)}')" \
		--argjson cbusy "$(awk -v a="$((cb1 - cb))" -v b="$((ct1 - ct))" 'BEGIN{printf "%.0f", (b > 0 ? 100 * a / b : 0)}')" \
		'.runs[0] | {server:$s, op:$o, basis:$basis, peak:$peak, rate:$rate, achieved:.connections_per_second,
		  p50:.handshake_latency.p50, p99:.handshake_latency.p99, errors:.error_count,
		  server_cpu_busy:$sbusy, client_cpu_busy:$cbusy}' <<<"$out" >>"$LATENCY"
	log "latency $server $name: $(tail -n 1 "$LATENCY")"
}
# wakeup_on ROLE CPUS: bench/wakeup on the first CPU of a taskset list (all
# CPUs when empty), one JSON line in $WAKEUP.
WAKEUP=$WORK/wakeup.jsonl
: >"$WAKEUP"
wakeup_on() {
	local cpu=${2%%[,-]*} out
	if [[ -n $cpu ]]; then
		out=$(taskset -c "$cpu" "$WORK/wakeup") || return 0
	else
		out=$("$WORK/wakeup") || return 0
	fi
	jq -c --arg role "$1" --arg cpu "${cpu:-any}" '{role:$role, cpu:$cpu} + .' <<<"$out" >>"$WAKEUP"
	log "wakeup $1: $(tail -n 1 "$WAKEUP")"
}
if [[ $BENCH_LATENCY == 1 ]]; then
	(cd "$ROOT" && go build -o "$WORK/wakeup" ./bench/wakeup) || die "go build ./bench/wakeup failed"
	wakeup_on server "${BENCH_PIN%%:*}"
	[[ -n ${BENCH_PIN:-} ]] && wakeup_on client "${BENCH_PIN##*:}"
	for op in "${OPS[@]}"; do
		[[ " $BENCH_LATENCY_OPS " == *" ${op%%|*} "* ]] || continue
		declare -A peaks=()
		low=0
		for server in "${SERVERS[@]}"; do
			peaks[$server]=$(latency_peak "$server" "$op")
			if ((${peaks[$server]%.*} > 0)) && { ((low == 0)) || ((${peaks[$server]%.*} < low)); }; then
				low=${peaks[$server]%.*}
			fi
		done
		for server in "${SERVERS[@]}"; do
			latency_op "$server" "$op" "${peaks[$server]}" "$(awk -v p="${peaks[$server]}" -v f="$BENCH_LATENCY_LOAD" 'BEGIN{printf "%d", p * f}')" own
		done
		# The same rate for every server, so that a faster server is not
		# measured at a higher rate (where the one client core is busier).
		if ((${#SERVERS[@]} > 1 && low > 0)); then
			for server in "${SERVERS[@]}"; do
				latency_op "$server" "$op" "${peaks[$server]}" "$(awk -v p="$low" -v f="$BENCH_LATENCY_LOAD" 'BEGIN{printf "%d", p * f}')" common
			done
		fi
		unset peaks
	done
fi

# ---- report ----
jq -s --arg date "$(date -u +%FT%TZ)" --arg host "$(uname -srm), $(getconf _NPROCESSORS_ONLN) CPUs" \
	--arg load "$LOAD_START -> $LOAD_END" --arg pin "${BENCH_PIN:-}" --argjson rounds "$BENCH_ROUNDS" --argjson conc "$BENCH_CONC" \
	--slurpfile sys "$SYSCALLS" --slurpfile lat "$LATENCY" --slurpfile kernel "$KERNEL" --slurpfile wakeup "$WAKEUP" --argjson labels "$(for k in "${!LABEL[@]}"; do jq -nc --arg k "$k" --arg v "${LABEL[$k]}" '{($k):$v}'; done | jq -sc add)" \
	'{date:$date, host:$host, load:$load, pin:$pin, rounds:$rounds, concurrency:$conc, labels:$labels, results:., syscalls:$sys, latency:$lat, wakeup:$wakeup, kernel:$kernel}' \
	"$RESULTS" >"$OUT/edge.json"
"$ROOT/bench/edge-report.sh" "$OUT/edge.json" | tee "$OUT/edge.md"
