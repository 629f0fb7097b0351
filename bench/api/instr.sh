#!/usr/bin/env bash
# Instructions per request of egsd, by callgrind: a load-independent measure of the read and create
# paths (the shared machine moves req/s and even CPU per request with other work; instruction counts
# do not).  egsd runs under `valgrind --tool=callgrind` with instrumentation off during start-up and
# set-up (8 nodes, a workspace, one GPR), then on for DURATION seconds of `wrk -t1 -c$CONNS` status
# reads of that one GPR (so the kept view is rendered about once a second, not per read) or creates.
# The count is the program total of that window over the requests wrk completed, event loop included.
#
#   ./bench/api/instr.sh [read|create] [--]         (EGSD=build/bin/egsd)
#   EGSD_BASE=/path/to/old/egsd ./bench/api/instr.sh read   (both builds, one after the other)
#
# Knobs: EGSD, EGSD_BASE, DURATION [5], CONNS [8], KEEP [0; 1 keeps the callgrind files and prints
# where]. Needs valgrind (callgrind_control, callgrind_annotate), wrk, curl and python3.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MODE=${1:-read}
EGSD=${EGSD:-$ROOT/build/bin/egsd}
DURATION=${DURATION:-5}
CONNS=${CONNS:-8}
KEEP=${KEEP:-0}
case $MODE in read | create) ;; *) echo "usage: $0 [read|create]" >&2; exit 2 ;; esac
for t in valgrind callgrind_control callgrind_annotate wrk curl python3; do
	command -v "$t" >/dev/null || { echo "instr.sh: $t not found" >&2; exit 1; }
done
WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/egs-instr.XXXXXX")
PID=
cleanup() {
	[ -z "$PID" ] || { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	if [ "$KEEP" = 1 ]; then echo "kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

measure() { # LABEL BINARY
	local label=$1 bin=$2 port url key tok nodes="" i id n total
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	url=http://127.0.0.1:$port
	valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/cg-$label.out" \
		"$bin" --listen "127.0.0.1:$port" --data "$WORK/data-$label" --quiet >"$WORK/egsd-$label.log" 2>&1 &
	PID=$!
	for i in $(seq 300); do curl -s -o /dev/null "$url/healthz" && break; sleep 0.1; done
	key=$(cat "$WORK/data-$label/admin.key")
	api() { curl -sf -X "$1" -H "Authorization: Bearer ${4:-$key}" -H 'Content-Type: application/json' ${3:+--data "$3"} "$url$2"; }
	tok=$(api POST /api/v1/clusters '{"clusterName":"bench-1"}' | sed -n 's/.*"agentToken":"\([^"]*\)".*/\1/p')
	for i in $(seq 8); do
		nodes+="${nodes:+,}{\"name\":\"n$i\",\"instanceType\":\"p5.48xlarge\",\"gpuModel\":\"NVIDIA-H100-80GB-HBM3\",\"gpuCount\":8,\"memoryMiB\":81920}"
	done
	api POST /api/v1/agent/register "{\"clusterName\":\"bench-1\",\"nodes\":[$nodes]}" "$tok" >/dev/null
	api POST /api/v1/slice-workspace '{"workspaceName":"bench","clusters":["bench-1"],"namespaces":["bench"]}' >/dev/null
	id=$(api POST /api/v1/gpr '{"gprName":"read-1","sliceName":"bench","clusterName":"bench-1","numberOfGPUs":1,"numberOfGPUNodes":1,"exitDuration":"1h","priority":101}' |
		sed -n 's/.*"gprId":"\([^"]*\)".*/\1/p')
	local script=read.lua args=("$id")
	[ "$MODE" = read ] || { script=create.lua; args=(); }
	# a short warm-up outside the window (connections, the kept view, the credential cache)
	wrk -t1 -c"$CONNS" -d1s -H "Authorization: Bearer $key" -s "$ROOT/bench/api/$script" "$url/api/v1/gpr" -- "${args[@]}" >/dev/null 2>&1
	callgrind_control -i on "$PID" >/dev/null
	wrk -t1 -c"$CONNS" -d"${DURATION}s" -H "Authorization: Bearer $key" -s "$ROOT/bench/api/$script" \
		"$url/api/v1/gpr" -- "${args[@]}" >"$WORK/wrk-$label.txt" 2>&1
	callgrind_control -d "$PID" >/dev/null
	kill "$PID"
	wait "$PID" 2>/dev/null || true
	PID=
	n=$(sed -n 's/^BENCH .*\brequests=\([0-9]*\).*/\1/p' "$WORK/wrk-$label.txt")
	total=$(callgrind_annotate "$WORK/cg-$label.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !t { gsub(",", ""); t = $1 } END { print t }')
	if [ -z "$n" ] || [ "$n" -eq 0 ] || [ -z "$total" ]; then
		echo "instr.sh: no measurement for $label ($WORK/wrk-$label.txt)" >&2
		exit 1
	fi
	printf '%s: %s %s requests, %s instructions each (%s)\n' "$label" "$n" "$MODE" "$((total / n))" "$bin"
}

[ -z "${EGSD_BASE:-}" ] || measure base "$EGSD_BASE"
measure new "$EGSD"
