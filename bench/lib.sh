# bench/lib.sh: shell functions shared by bench/run.sh and bench/edge.sh.
# Source it after setting ROOT (the repository) and WORK (a scratch folder).

# Measure what is deployed: go.mod's toolchain (Go 1.27.3), fetched when a
# go command told to stay local (or set to nothing) is older.
[[ ${GOTOOLCHAIN:-local} == local ]] && export GOTOOLCHAIN=auto

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

# stop_started kills and reaps every process in PIDS (the servers and the
# backend a script started); scripts call it from their EXIT trap.
stop_started() {
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}

# free_port prints a loopback TCP port nobody listens on.
free_port() {
	local p i low=32768
	# Below the ephemeral range: the client's thousands of connections take
	# local ports from it, and a listener cannot bind a port one of them holds.
	read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	((low > 12000)) || low=32768
	for ((i = 0; i < 100; i++)); do
		p=$((10000 + RANDOM % (low - 10000)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free port"
}

# wait_port PORT [SECONDS]: wait until something accepts on 127.0.0.1:PORT.
wait_port() {
	local i limit=$((${2:-20} * 10))
	for ((i = 0; i < limit; i++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# cpu_ticks PID: user+system clock ticks of a process (all threads).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# tree_pids PID: PID and every live descendant (a master and its workers).
tree_pids() {
	local p c
	for p in "$@"; do
		echo "$p"
		for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
			tree_pids "$c"
		done
	done
}

# tree_ticks PID: user+system clock ticks of PID and its live descendants.
tree_ticks() {
	local user sys
	read -r user sys <<<"$(tree_ticks_split "$1")"
	echo $((user + sys))
}

# tree_ticks_split PID: "USER SYSTEM" clock ticks of PID and its live
# descendants.
tree_ticks_split() {
	local user=0 sys=0 p u s
	for p in $(tree_pids "$1"); do
		read -r u s < <(awk '{print $14, $15}' "/proc/$p/stat" 2>/dev/null) || continue
		user=$((user + u)) sys=$((sys + s))
	done
	echo "$user $sys"
}

# build_binaries: sets GMPROXY (built unless GMPROXY_BIN is given) and
# builds the backend into $WORK/backend.
build_binaries() {
	if [[ -n ${GMPROXY_BIN:-} ]]; then
		GMPROXY=$GMPROXY_BIN
	else
		log "building gmproxy and the bench backend"
		(cd "$ROOT" && go build -o "$WORK/gmproxy" ./cmd/gmproxy) || die "go build ./cmd/gmproxy failed"
		GMPROXY=$WORK/gmproxy
	fi
	(cd "$ROOT" && go build -o "$WORK/backend" ./bench/backend) || die "go build ./bench/backend failed"
}

# make_pki: sets PKI to BENCH_PKI or a throwaway development PKI, plus an
# ECDSA certificate for the ordinary TLS rows.
make_pki() {
	local port devpid i
	PKI=${BENCH_PKI:-$WORK/pki}
	if [[ ! -f $PKI/server_enc.key ]]; then
		log "creating a throwaway PKI with the development setup in $PKI"
		port=$(free_port)
		"$GMPROXY" run -dev-dir "$PKI" -listen "127.0.0.1:$port" >"$WORK/dev.log" 2>&1 &
		devpid=$!
		for ((i = 0; i < 100; i++)); do
			[[ -f $PKI/server_enc.key && -f $PKI/client_enc.key ]] && break
			sleep 0.1
		done
		wait_port "$port" 10 || true
		kill "$devpid" 2>/dev/null || true
		wait "$devpid" 2>/dev/null || true
		[[ -f $PKI/server_enc.key ]] || die "development setup made no PKI (see $WORK/dev.log)"
	fi
	if [[ ! -f $PKI/server_ecdsa.crt ]]; then
		command -v openssl >/dev/null || die "no ECDSA certificate in $PKI and no openssl to make one"
		log "making an ECDSA certificate for the tls rows"
		cp -r "$PKI" "$WORK/pki-ecdsa" && PKI=$WORK/pki-ecdsa
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
			-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
			-keyout "$PKI/server_ecdsa.key" -out "$PKI/server_ecdsa.crt" 2>/dev/null || die "openssl req failed"
	fi
}

# start_backend: starts the loopback backend, sets BACKEND (host:port).
start_backend() {
	local i
	"$WORK/backend" -listen 127.0.0.1:0 -addr-file "$WORK/backend.addr" 2>"$WORK/backend.log" &
	PIDS+=($!)
	for ((i = 0; i < 100; i++)); do
		[[ -s $WORK/backend.addr ]] && break
		sleep 0.1
	done
	BACKEND=$(cat "$WORK/backend.addr") || die "backend did not start"
}

# gmproxy_config FILE PORT ADMIN [EXTRA]: one listener for all protocols in
# front of $BACKEND, access log off; EXTRA is appended (top-level YAML).
gmproxy_config() {
	# The whole load comes from one address, with up to 64 connections at
	# once (the latency phase): the per-client limits (64 handshakes by
	# default) would refuse some of them, which Tengine does not do.
	cat >"$1" <<-YAML
		listeners:
		  - address: 127.0.0.1:$2
		    protocols: [tlcp, tls13sm, tls]
		    max_handshakes_per_client: 0
		    max_connections_per_client: 0
		    ${GMPROXY_LISTENER_YAML:-}
		sites:
		  - name: bench
		    server_names: [localhost]
		    tlcp:
		      sign_cert: $PKI/server_sign.crt
		      sign_key: $PKI/server_sign.key
		      enc_cert: $PKI/server_enc.crt
		      enc_key: $PKI/server_enc.key
		    tls13sm:
		      cert: $PKI/server_sign.crt
		      key: $PKI/server_sign.key
		    tls:
		      cert: $PKI/server_ecdsa.crt
		      key: $PKI/server_ecdsa.key
		    client_auth:
		      mode: none
		      ca: $PKI/ca.crt
		    routes:
		      - path_prefix: /
		        upstream: backend
		upstreams:
		  - name: backend
		    targets: ["$BACKEND"]
		admin:
		  address: 127.0.0.1:$3
		  ${GMPROXY_ADMIN_YAML:-}
		access_log:
		  path: "off"
		log:
		  level: warn
		${4:-}
	YAML
}

# client_auth_args: s_time flags for the PKI's TLCP client certificates.
client_auth_args() {
	echo -sign_cert "$PKI/client_sign.crt" -sign_key "$PKI/client_sign.key" -enc_cert "$PKI/client_enc.crt" -enc_key "$PKI/client_enc.key"
}
