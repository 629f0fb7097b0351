#!/usr/bin/env bash
# TLS cost of egsd's reads: wrk GET /api/v1/gpr?gprId=ID (read.lua) against one egsd served over plain
# HTTP and then over HTTPS (--tls-cert/--tls-key, a CA and certificate made here with openssl), the
# same binary and data directory, alternating ROUNDS times, and the ratio TLS/plain of each round.
#
#   ./bench/api/tls.sh            (or `make bench-tls`, which builds first)
#
# Two kinds of run per scheme: "keep-alive" (CONNS connections reused: the cost of the record layer)
# and "new connection" (Connection: close on every request: a full handshake per request, ECDSA P-256,
# TLS 1.3).  egsd runs with --quiet.  Besides requests/s (which wrk, itself doing TLS on the same
# cores, and any other load on the machine hold down), egsd's own CPU time per request is measured
# (utime + stime from /proc over the run): the cost TLS adds to egsd, whatever the machine's load.
# A markdown table goes to stdout at the end.
#
# Environment knobs [defaults]: DURATION [5s], THREADS [2], CONNS [64], ROUNDS [2], READ_IDS [16],
# EGSD [build/bin/egsd], BENCH_TMP [/var/tmp], KEEP [0; 1 keeps the work directory].
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/api
DURATION=${DURATION:-5s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
ROUNDS=${ROUNDS:-2}
READ_IDS=${READ_IDS:-16}
EGSD=${EGSD:-$ROOT/build/bin/egsd}
KEEP=${KEEP:-0}

die() { echo "tls.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
command -v wrk >/dev/null || die "wrk not found (./scripts/deps.sh installs it)"
command -v openssl >/dev/null || die "openssl not found"
[ -x "$EGSD" ] || die "$EGSD not built (make build/bin/egsd)"

WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/egs-bench-tls.XXXXXX")
cp "$EGSD" "$WORK/egsd"
EGSD_BUILD="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
EGSD=$WORK/egsd
EGSD_PID=
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	local rc=$?
	if [ -n "$EGSD_PID" ]; then kill "$EGSD_PID" 2>/dev/null || true; wait "$EGSD_PID" 2>/dev/null || true; fi
	if [ "$KEEP" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- a CA and a certificate for 127.0.0.1 ----
PKI=$WORK/pki
mkdir -p "$PKI"
ossl() { openssl "$@" >/dev/null 2>&1 || die "openssl $1 failed"; }
ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
	-keyout "$PKI/ca.key" -out "$PKI/ca.pem"
ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=egsd -keyout "$PKI/egsd.key" \
	-out "$PKI/egsd.csr"
echo "subjectAltName=IP:127.0.0.1" >"$PKI/ext"
ossl x509 -req -in "$PKI/egsd.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial -days 1 \
	-extfile "$PKI/ext" -out "$PKI/egsd.pem"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DATA=$WORK/data
start_egsd() { # SCHEME
	local tls=() i
	[ "$1" = https ] && tls=(--tls-cert "$PKI/egsd.pem" --tls-key "$PKI/egsd.key")
	"$EGSD" --listen "127.0.0.1:$PORT" --data "$DATA" --quiet "${tls[@]}" >>"$WORK/egsd.log" 2>&1 &
	EGSD_PID=$!
	URL=$1://127.0.0.1:$PORT
	for i in $(seq 100); do
		curl -s -o /dev/null --cacert "$PKI/ca.pem" "$URL/healthz" && return 0
		sleep 0.1
	done
	die "egsd did not start: $(cat "$WORK/egsd.log")"
}
stop_egsd() {
	kill "$EGSD_PID" && wait "$EGSD_PID" || true
	EGSD_PID=
}
api() { # METHOD PATH BODY [TOKEN] -> body; fails unless 200
	local out
	out=$(curl -sf --cacert "$PKI/ca.pem" -X "$1" -H "Authorization: Bearer ${4:-$KEY}" \
		-H 'Content-Type: application/json' --data "$3" "$URL$2") || die "$1 $2 failed"
	printf '%s\n' "$out"
}
field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

# ---- the data: a cluster, 8 nodes, a workspace, READ_IDS GPRs ----
start_egsd http
KEY=$(cat "$DATA/admin.key")
token=$(api POST /api/v1/clusters '{"clusterName":"bench-1"}' | field agentToken)
nodes=""
for i in $(seq 8); do
	nodes+="${nodes:+,}{\"name\":\"n$i\",\"instanceType\":\"p5.48xlarge\",\"gpuModel\":\"NVIDIA-H100-80GB-HBM3\",\"gpuCount\":8,\"memoryMiB\":81920}"
done
api POST /api/v1/agent/register "{\"clusterName\":\"bench-1\",\"nodes\":[$nodes]}" "$token" >/dev/null
api POST /api/v1/slice-workspace '{"workspaceName":"bench","clusters":["bench-1"],"namespaces":["bench"]}' >/dev/null
IDS=()
for i in $(seq "$READ_IDS"); do
	IDS+=("$(api POST /api/v1/gpr "{\"gprName\":\"read-$i\",\"sliceName\":\"bench\",\"clusterName\":\"bench-1\",\"numberOfGPUs\":1,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\",\"priority\":101}" | field gprId)")
done
SIZE=$(api GET "/api/v1/gpr?gprId=${IDS[0]}" '' | wc -c)
stop_egsd

log "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
log "egsd $EGSD_BUILD; wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2); $DURATION per run, $THREADS threads, $CONNS connections; status body $SIZE bytes"

rps() { sed -n 's/^BENCH .*\brps=\([^ ]*\).*/\1/p' "$1"; }
p99() { sed -n 's/^BENCH .*\bp99_us=\([^ ]*\).*/\1/p' "$1" | awk '{ printf "%.2f ms", $1 / 1000 }'; }
check() { # OUT: every answer 200, no socket errors
	grep -q '^BENCH .*non200=0 errors=0 ' "$1" || die "non-200 answers or socket errors: $(grep '^BENCH' "$1")"
}
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$EGSD_PID/stat"; }
run() { # SCHEME MODE -> sets R (req/s), P (p99), C (egsd CPU microseconds per request)
	local out=$WORK/wrk-$1-$2.txt hdr=() t0 t1 n
	[ "$2" = close ] && hdr=(-H "Connection: close")
	t0=$(cpu_ticks)
	wrk -t "$THREADS" -c "$CONNS" -d "$DURATION" --latency "${hdr[@]}" -H "Authorization: Bearer $KEY" \
		-s "$HERE/read.lua" "$URL" -- "${IDS[@]}" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
	t1=$(cpu_ticks)
	check "$out"
	R=$(rps "$out")
	P=$(p99 "$out")
	n=$(sed -n 's/^BENCH requests=\([0-9]*\).*/\1/p' "$out")
	C=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
}

ROWS=()
for round in $(seq "$ROUNDS"); do
	for mode in keepalive close; do
		start_egsd http
		run http "$mode"
		hr=$R hp=$P hc=$C
		stop_egsd
		start_egsd https
		run https "$mode"
		sr=$R sp=$P sc=$C
		stop_egsd
		ratio=$(awk -v a="$sr" -v b="$hr" 'BEGIN { printf "%.0f%%", 100 * a / b }')
		cratio=$(awk -v a="$sc" -v b="$hc" 'BEGIN { printf "%.2f", a / b }')
		name=$([ "$mode" = close ] && echo "new connection per request" || echo "keep-alive")
		log "round $round $name: http $hr req/s (p99 $hp, $hc us CPU/req), https $sr req/s (p99 $sp, $sc us CPU/req): $ratio, CPU x$cratio"
		ROWS+=("| $round | $name | $hr ($hp) | $sr ($sp) | $ratio | $hc | $sc | $cratio |")
	done
done

echo
echo "egsd $EGSD_BUILD, GET /api/v1/gpr?gprId= ($SIZE bytes), $CONNS connections, $DURATION each, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| round | connections | http req/s (p99) | https req/s (p99) | https / http | egsd CPU/req http (us) | https (us) | CPU https / http |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
