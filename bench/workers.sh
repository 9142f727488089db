#!/usr/bin/env bash
# bench/workers.sh: gmproxy with workers: 1 against workers: N (default 2)
# in alternating rounds: server CPU per operation, summed over every
# process of each server (supervisor and workers), for keep-alive GETs of
# 1 KiB and resumed TLCP handshakes + GET (ticket and session ID). Loopback
# only; every run is bounded by BENCH_TIME seconds.
#
#   bench/workers.sh                      # 3 rounds, 4 s per measurement, N=2
#   BENCH_ROUNDS=5 BENCH_TIME=2 WORKERS=4 bench/workers.sh
set -euo pipefail
# Measure what is deployed: go.mod's toolchain (Go 1.27.3), fetched when older.
[[ ${GOTOOLCHAIN:-local} == local ]] && export GOTOOLCHAIN=auto
cd "$(dirname "$0")/.."
ROUNDS=${BENCH_ROUNDS:-3} TIME=${BENCH_TIME:-4} CONC=${BENCH_CONC:-2} N=${WORKERS:-2}
PKI=$(realpath "${BENCH_PKI:-conf/testdata/pki}")
DIR=$(mktemp -d)
trap 'kill -TERM $P1 $P2 2>/dev/null; wait; rm -rf "$DIR"' EXIT
go build -o "$DIR/gmproxy" ./cmd/gmproxy
BODY=$(head -c 1024 /dev/zero | tr '\0' a)
conf() { # workers port
	cat <<EOF2
workers: $1
listeners: [{address: "127.0.0.1:$2", protocols: [tlcp]}]
sites:
  - name: s
    server_names: [localhost]
    tlcp: {sign_cert: $PKI/server_sign.crt, sign_key: $PKI/server_sign.key, enc_cert: $PKI/server_enc.crt, enc_key: $PKI/server_enc.key}
    routes: [{respond: {status: 200, body: "$BODY"}}]
admin: {address: "off"}
access_log: {path: "off"}
EOF2
}
read -r PORT1 PORT2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
conf 1 "$PORT1" > "$DIR/w1.yaml"
conf "$N" "$PORT2" > "$DIR/wn.yaml"
"$DIR/gmproxy" run -c "$DIR/w1.yaml" 2>/dev/null & P1=$!
"$DIR/gmproxy" run -c "$DIR/wn.yaml" 2>/dev/null & P2=$!
sleep 3
ticks() { # utime+stime of a process and its children, in clock ticks
	local t=0 p
	for p in $1 $(ps -o pid= --ppid "$1"); do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done
	echo $t
}
HZ=$(getconf CLK_TCK)
echo "round workers mode cpu_us_per_op ops"
for r in $(seq "$ROUNDS"); do
	for s in 1 2; do
		if [ $s = 1 ]; then P=$P1 PORT=$PORT1 W=1; else P=$P2 PORT=$PORT2 W=$N; fi
		for mode in keepalive ticket session_id; do
			case $mode in
			keepalive) args=(-keepalive -www /) key=requests ;;
			ticket) args=(-reuse -www /) key=connections ;;
			session_id) args=(-reuse -no_ticket -www /) key=connections ;;
			esac
			c0=$(ticks $P)
			ops=$("$DIR/gmproxy" s_time -connect "127.0.0.1:$PORT" -servername localhost "${args[@]}" -c "$CONC" -time "$TIME" -json 2>/dev/null |
				python3 -c "import json,sys; print(json.load(sys.stdin)['runs'][-1]['$key'])")
			c1=$(ticks $P)
			echo "$r $W $mode $(((c1 - c0) * 1000000 / HZ / ops)) $ops"
		done
	done
done
