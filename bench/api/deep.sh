#!/usr/bin/env bash
# The deep-queue case of the HTTP API benchmark (issue 16): egsd with NODES nodes of 20 shapes in 4
# clusters and DEPTH GPRs queued at priorities uniform over 1-300, then wrk at 64 connections with
# creates at random priorities mixed 1:1 with status reads.  Reports creates/s (counted in the
# store: each one durable), reads/s, p50/p99 of all requests, and the longest the scheduler held the
# loop in one go (egs_scheduler_slice_max_seconds) and its longest single step with what it did
# (egs_scheduler_step_max_cpu_seconds); for the mixed phase also egsd's CPU per request (all its
# threads, /proc/PID/stat) split into the loop thread's planner (egs_scheduler_cpu_seconds_total),
# store commits (egs_store_commit_cpu_seconds_total) and the rest (the requests), and the other
# threads (the store's fsyncs); and the scheduler runs that ended, with their mean wall time from
# begin to end (an estimate is at most about two runs old; a build without these metrics shows
# 0 for them); the slices of the mixed phase that held the loop over 5 ms, wall and CPU
# (egs_scheduler_slice_seconds: the maxima above count since egsd started, the fill included),
# and its steps over 5 ms of CPU by what they did (egs_scheduler_slow_steps_total);
# and the loop's CPU per GET /metrics, timed after the mixed phase (the bench's own scrapes all
# come before or after wrk, never inside its window); for the mixed phase also egsd's own view of its
# latency (requests over 25 and 50 ms, egs_api_request_duration_seconds: wrk's max includes wrk's own
# waits for a core; and creates and reads apart, the share over 1, 2.5 and 5 ms: wrk's p99 is of both
# together, so about the creates' p98) and the store's (egs_store_*: fdatasyncs of the WAL over 5 and 20 ms,
# checkpoints over 20 ms, catch-ups and WAL restarts, with the longest of each since egsd started).  With EGSD_BASE=path, the same case runs against
# that binary too, in the same invocation (a baseline; compare ratios, the machine is shared).
#
#   ./bench/api/deep.sh            (or `make bench-deep`, which builds first)
#
# Knobs [defaults]: NODES [10000], DEPTH [100000], WORKSPACES [16], DURATION [10s], THREADS [2],
# CONNS [64], READ_IDS [16], EGSD [build/bin/egsd], EGSD_BASE [none], FILL_ROUNDS [300: the most
# 1 s wrk rounds the fill may take], BENCH_TMP [/var/tmp], KEEP [0], RESULTS [file to copy the table to],
# SCRAPES [10: GET /metrics after the mixed phase, to time one].
# egsd runs with --dev-clock (time stands still), so the nodes need no heartbeats during the run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/api
NODES=${NODES:-10000}
DEPTH=${DEPTH:-100000}
WORKSPACES=${WORKSPACES:-16}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
READ_IDS=${READ_IDS:-16}
EGSD=${EGSD:-$ROOT/build/bin/egsd}
EGSD_BASE=${EGSD_BASE:-}
FILL_ROUNDS=${FILL_ROUNDS:-300}
KEEP=${KEEP:-0}
RESULTS=${RESULTS:-}
SCRAPES=${SCRAPES:-10}
SHAPES=20
CLUSTERS=4
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

die() { echo "deep.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
command -v wrk >/dev/null || die "wrk not found (./scripts/deps.sh installs it)"
command -v sqlite3 >/dev/null || die "sqlite3 not found (./scripts/deps.sh installs it)"
[ -x "$EGSD" ] || die "$EGSD not built (make build/bin/egsd)"

WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/egs-deep.XXXXXX")
PIDS=()
cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ "$KEEP" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json_field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }
field() { sed -n "s/^BENCH .*\\b$1=\\([^ ]*\\).*/\\1/p" "$2"; }
ms() { awk -v us="$1" 'BEGIN { printf "%.2f ms", us / 1000 }'; }
api() { # METHOD PATH [BODY|@file] [TOKEN] -> body; fails unless 200
	local out code
	out=$(curl -s -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer ${4:-$ADMIN_KEY}" \
		-H 'Content-Type: application/json' ${3:+--data-binary "$3"} "$URL$2")
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	[ "$code" = 200 ] || die "$1 $2 -> $code: ${out:0:300}"
	printf '%s\n' "$out"
}
gprs_stored() { sqlite3 "$DATA/egs.db" 'PRAGMA busy_timeout=5000; SELECT count(*) FROM gprs' | tail -1; }
proc_cpu() { # STATFILE -> the CPU time (user + system) in seconds it reports
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz }' "$1"
}
# egsd's CPU in seconds: all threads, the loop thread (the main one), the planner's and the store
# commits' parts of the loop's (from /metrics): four numbers
cpu_split() {
	echo "$(proc_cpu "/proc/$EGSD_PID/stat") $(proc_cpu "/proc/$EGSD_PID/task/$EGSD_PID/stat")" \
		"$(metric egs_scheduler_cpu_seconds_total) $(metric egs_store_commit_cpu_seconds_total)"
}
# Slices (histograms egs_scheduler_slice_seconds, _cpu_seconds): "all over-5ms-wall over-5ms-CPU"
slices() {
	curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" | awk '
		$1 == "egs_scheduler_slice_seconds_count" { n = $2 }
		$1 == "egs_scheduler_slice_seconds_bucket{le=\"0.005\"}" { w = $2 }
		$1 == "egs_scheduler_slice_cpu_seconds_bucket{le=\"0.005\"}" { c = $2 }
		END { printf "%d %d %d\n", n, n - w, n - c }'
}
# Steps over 5 ms of CPU by piece (egs_scheduler_slow_steps_total), one "count<TAB>piece" a line
slow_steps() {
	curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" |
		sed -n 's/^egs_scheduler_slow_steps_total{piece="\([^"]*\)"} \(.*\)/\2\t\1/p'
}
# The loop thread's CPU per GET /metrics, in ms (SCRAPES scrapes; /proc counts in 10 ms ticks)
scrape_cpu() {
	local c0 c1 i
	c0=$(proc_cpu "/proc/$EGSD_PID/task/$EGSD_PID/stat")
	for ((i = 0; i < SCRAPES; i++)); do
		curl -s -o /dev/null -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics"
	done
	c1=$(proc_cpu "/proc/$EGSD_PID/task/$EGSD_PID/stat")
	awk -v a="$c0" -v b="$c1" -v n="$SCRAPES" 'BEGIN { printf "%.1f ms", (b - a) * 1000 / n }'
}
# egsd's requests and the store's timings (histograms of /metrics): eleven counts, 0 for a build
# without them: requests to /api/v1/gpr (wrk's, not the bench's scrapes), over 25 ms, over 50 ms; fdatasyncs, over 5 ms, over 20 ms; checkpoints,
# over 20 ms; catch-ups, their ms; WAL restarts
store_counts() {
	curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" | awk '
		function le(n, b) { return $1 ~ ("^" n "_bucket\\{(.*,)?le=\"" b "\"\\}$") }
		$1 ~ /^egs_api_request_duration_seconds_count/ && index($1, "route=\"/api/v1/gpr\"") { r += $2 }
		le("egs_api_request_duration_seconds", "0.025") && index($1, "route=\"/api/v1/gpr\"") { r25 += $2 }
		le("egs_api_request_duration_seconds", "0.05") && index($1, "route=\"/api/v1/gpr\"") { r50 += $2 }
		$1 == "egs_store_fsync_seconds_count" { f = $2; has = 1 }
		le("egs_store_fsync_seconds", "0.005") { f5 = $2 }
		le("egs_store_fsync_seconds", "0.02") { f20 = $2 }
		$1 == "egs_store_checkpoint_seconds_count" { c = $2 }
		le("egs_store_checkpoint_seconds", "0.02") { c20 = $2 }
		$1 == "egs_store_catch_up_seconds_count" { k = $2 }
		$1 == "egs_store_catch_up_seconds_sum" { ks = $2 * 1000 }
		$1 == "egs_store_wal_restarts_total" { w = $2 }
		END { printf "%d %d %d %d %d %d %d %d %d %.1f %d\n", r, r - r25, r - r50, f, f - f5, f - f20, c, c - c20, k, ks, w }'
}
# egsd's view of /api/v1/gpr's latency by method (egs_api_request_duration_seconds: from the request
# read to its reply handed to the connection, so the fsync it waited for included, the wait to be
# read and the reply's write not): "count le-1ms le-2.5ms le-5ms" for POST (creates), then for GET
lat_counts() {
	curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" | awk '
		function hit(m, b) { return index($1, "egs_api_request_duration_seconds_" b) == 1 &&
			index($1, "method=\"" m "\"") && index($1, "route=\"/api/v1/gpr\"") }
		hit("POST", "count") { pc = $2 } hit("GET", "count") { gc = $2 }
		hit("POST", "bucket") && index($1, "le=\"0.001\"") { p1 = $2 }
		hit("POST", "bucket") && index($1, "le=\"0.0025\"") { p2 = $2 }
		hit("POST", "bucket") && index($1, "le=\"0.005\"") { p5 = $2 }
		hit("GET", "bucket") && index($1, "le=\"0.001\"") { g1 = $2 }
		hit("GET", "bucket") && index($1, "le=\"0.0025\"") { g2 = $2 }
		hit("GET", "bucket") && index($1, "le=\"0.005\"") { g5 = $2 }
		END { printf "%d %d %d %d %d %d %d %d\n", pc, p1, p2, p5, gc, g1, g2, g5 }'
}
# The mixed phase's share of creates, then of reads, over 1 / 2.5 / 5 ms from two lat_counts lines
lat_cell() {
	echo "$1 $2" | awk 'function pct(n, all) { return all > 0 ? 100 * n / all : 0 }
		{ pc = $9 - $1; gc = $13 - $5
		  printf "%.1f / %.2f / %.3f%% | %.1f / %.2f / %.3f%%", pct(pc - ($10 - $2), pc), pct(pc - ($11 - $3), pc),
			pct(pc - ($12 - $4), pc), pct(gc - ($14 - $6), gc), pct(gc - ($15 - $7), gc), pct(gc - ($16 - $8), gc) }'
}
# The mixed phase's store figures from two store_counts lines (before, after) and the maxima since
# start: "fdatasyncs N (over 5 ms / 20 ms; longest) | checkpoints ... | catch-ups ... | restarts"
store_cell() {
	echo "$1 $2 $(metric egs_store_fsync_max_seconds) $(metric egs_store_checkpoint_max_seconds) $(metric egs_store_catch_up_max_seconds)" |
		awk '{ printf "%d fdatasyncs (%d / %d over 5 / 20 ms; longest %.1f ms), %d checkpoints (%d over 20 ms; longest %.1f ms), %d catch-ups (%.1f ms in all; longest %.1f ms), %d WAL restarts",
			$15 - $4, $16 - $5, $17 - $6, $23 * 1000, $18 - $7, $19 - $8, $24 * 1000, $20 - $9, $21 - $10, $25 * 1000, $22 - $11 }'
}
metric() { # NAME -> the sum of its samples in /metrics
	curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" |
		awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}

# Starts egsd ($1) on a fresh data directory and builds the inventory, workspaces and read ids.
setup() {
	local bin=$1 tag=$2
	DATA=$WORK/data-$tag
	mkdir -p "$DATA"
	PORT=$(free_port)
	URL=http://127.0.0.1:$PORT
	cp "$bin" "$WORK/egsd-$tag"
	"$WORK/egsd-$tag" --listen "127.0.0.1:$PORT" --data "$DATA" --dev-clock --quiet >"$WORK/egsd-$tag.log" 2>&1 &
	EGSD_PID=$!
	PIDS+=("$EGSD_PID")
	for _ in $(seq 100); do curl -s -o /dev/null "$URL/healthz" && break; sleep 0.1; done
	ADMIN_KEY=$(cat "$DATA/admin.key")
	local c token
	for ((c = 0; c < CLUSTERS; c++)); do
		token=$(api POST /api/v1/clusters "{\"clusterName\":\"c$c\"}" | json_field agentToken)
		# node i is of shape i % 20, in cluster (i % 20) % 4
		"$PY" - "$c" "$NODES" "$SHAPES" "$CLUSTERS" >"$WORK/register-$c.json" <<'PYEOF'
import json, sys
c, nodes, shapes, clusters = map(int, sys.argv[1:])
out = [{"name": "n%d" % i, "instanceType": "it-%d" % (i % shapes), "gpuModel": "gpu-%d" % (i % shapes),
        "gpuCount": 8, "memoryMiB": 81920} for i in range(nodes) if (i % shapes) % clusters == c]
print(json.dumps({"clusterName": "c%d" % c, "nodes": out}))
PYEOF
		api POST /api/v1/agent/register "@$WORK/register-$c.json" "$token" >/dev/null
	done
	local w
	for ((w = 0; w < WORKSPACES; w++)); do
		api POST /api/v1/slice-workspace \
			"{\"workspaceName\":\"ws-$w\",\"clusters\":[\"c0\",\"c1\",\"c2\",\"c3\"],\"namespaces\":[\"ns-$w\"]}" >/dev/null
	done
	IDS=()
	for ((w = 0; w < READ_IDS; w++)); do
		IDS+=("$(api POST /api/v1/gpr "{\"gprName\":\"read-$w\",\"sliceName\":\"ws-$((w % WORKSPACES))\",\"gpuShape\":\"gpu-$((w % SHAPES))\",\"numberOfGPUs\":1,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\",\"priority\":$((1 + w * 17 % 300))}" | json_field gprId)")
	done
}

ROWS=()
run_case() { # BINARY TAG
	local tag=$2 t0 t1 before after out quota
	log "$tag: egsd $(basename "$1"), $NODES nodes, $WORKSPACES workspaces"
	setup "$1" "$tag"
	log "$tag: filling the queue with $DEPTH GPRs at priorities 1-300 (wrk, creates only, 1 s rounds)"
	out=$WORK/wrk-$tag-fill.txt
	local filled=$READ_IDS rounds=0 fill_s=0 fill_n=0 d
	while [ "$filled" -lt "$DEPTH" ]; do
		rounds=$((rounds + 1))
		[ "$rounds" -le "$FILL_ROUNDS" ] || die "the fill took more than $FILL_ROUNDS rounds ($filled GPRs)"
		quota=$(((DEPTH - filled + THREADS - 1) / THREADS))
		t0=$(date +%s.%N)
		wrk -t"$THREADS" -c"$CONNS" -d1s --latency -H "Authorization: Bearer $ADMIN_KEY" \
			-s "$HERE/deep.lua" "$URL/api/v1/gpr" -- fill "$WORKSPACES" "$SHAPES" "$quota" >"$out" 2>&1 ||
			die "wrk failed: $(cat "$out")"
		t1=$(date +%s.%N)
		[ "$(field non200 "$out")" = 0 ] || die "fill: non-200 replies: $(grep BENCH "$out")"
		d=$(gprs_stored)
		if [ "$d" -lt $((DEPTH - 1)) ]; then # a full round: its rate counts
			fill_s=$(awk -v a="$fill_s" -v x="$t0" -v y="$t1" 'BEGIN { print a + y - x }')
			fill_n=$((fill_n + d - filled))
		fi
		filled=$d
	done
	local fill_rps queued
	fill_rps=$(awk -v n="$fill_n" -v s="$fill_s" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "-" }')
	queued=$(metric egs_gpr_queue_length)
	log "$tag: $filled GPRs stored, $queued waiting, after $rounds rounds"
	out=$WORK/wrk-$tag-mixed.txt
	local cpu0 runs0 wall0 sl0 slow0 sc0 sc1 lc0 lc1
	sc0=$(store_counts)
	lc0=$(lat_counts)
	sl0=$(slices)
	slow0=$(slow_steps)
	cpu0=$(cpu_split)
	runs0=$(metric egs_scheduler_runs_total)
	wall0=$(metric egs_scheduler_run_seconds_total)
	before=$(gprs_stored)
	log "$tag: wrk -t$THREADS -c$CONNS -d$DURATION: creates at priorities 1-300, 1:1 with status reads"
	t0=$(date +%s.%N)
	wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $ADMIN_KEY" \
		-s "$HERE/deep.lua" "$URL/api/v1/gpr" -- mixed "$WORKSPACES" "$SHAPES" 0 "${IDS[@]}" >"$out" 2>&1 ||
		die "wrk failed: $(cat "$out")"
	t1=$(date +%s.%N)
	after=$(gprs_stored)
	local cpu1 runs1 wall1 sl1 scrape slow
	cpu1=$(cpu_split)
	sc1=$(store_counts)
	lc1=$(lat_counts)
	sl1=$(slices)
	# the mixed phase's steps over 5 ms: the counts' growth, by piece
	slow=$( (echo "$slow0" | sed 's/^/-/'; slow_steps) | awk -F '\t' 'NF == 2 { n[$2] += $1 }
		END { for (k in n) if (n[k] > 0) { printf "%s%d %s", sep, n[k], k; sep = ", " } }')
	scrape=$(scrape_cpu)
	runs1=$(metric egs_scheduler_runs_total)
	wall1=$(metric egs_scheduler_run_seconds_total)
	sed -e '/^BENCH /d' "$out" >&2
	local req secs creates reads bad slice slice_cpu step
	req=$(field requests "$out")
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
	creates=$(awk -v n="$((after - before))" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	reads=$(awk -v r="$req" -v n="$((after - before))" -v s="$secs" 'BEGIN { printf "%.0f", (r - n) / s }')
	bad="$(field non200 "$out") / $(field errors "$out")"
	slice=$(metric egs_scheduler_slice_max_seconds)
	slice_cpu=$(metric egs_scheduler_slice_max_cpu_seconds)
	step=$(curl -s -H "Authorization: Bearer $ADMIN_KEY" "$URL/metrics" |
		sed -n 's/^egs_scheduler_step_max_cpu_seconds{piece="\([^"]*\)"} \(.*\)/\2 \1/p' |
		awk '{ v = $1; $1 = ""; printf "%.1f ms (%s)", v * 1000, substr($0, 2) }')
	# egsd's CPU per request: all threads, and the loop's planner / commits / the rest (requests,
	# views, observability), then the other threads (the store's fsyncs); the runs and their mean wall
	local split
	split=$(echo "$cpu0 $cpu1" | awk -v r="$req" -v n="$((runs1 - runs0))" -v w="$(awk -v a="$wall0" -v b="$wall1" 'BEGIN { print b - a }')" \
		'{ all = $5 - $1; loop = $6 - $2; plan = $7 - $3; commit = $8 - $4; u = r > 0 ? 1e6 / r : 0
		   printf "%.1f us (loop: planner %.1f, commits %.1f, rest %.1f; other threads %.1f) | %d, %.0f ms",
			all * u, plan * u, commit * u, (loop - plan - commit) * u, (all - loop) * u, n, (n > 0 ? w * 1000 / n : 0) }')
	ROWS+=("| $tag | $queued | $fill_rps | $creates | $reads | $(ms "$(field p50_us "$out")") | $(ms "$(field p99_us "$out")") | $(ms "$(field max_us "$out")") | $split | $(awk -v s="$slice" -v c="$slice_cpu" 'BEGIN { printf "%.1f ms (CPU %.1f ms)", s * 1000, c * 1000 }') | ${step:--} | $(echo "$sl0 $sl1" | awk '{ printf "%d / %d of %d", $5 - $2, $6 - $3, $4 - $1 }') | $(echo "$slow0" | awk -F '\t' 'NF == 2 { printf "%s%d %s", sep, $1, $2; sep = ", " } END { if (!sep) printf "none" }') / ${slow:-none} | $scrape | $bad | $(echo "$sc0 $sc1" | awk '{ printf "%d / %d of %d", $13 - $2, $14 - $3, $12 - $1 }') | $(lat_cell "$lc0" "$lc1") | $(store_cell "$sc0" "$sc1") |")
	log "row: ${ROWS[-1]}"
	kill "$EGSD_PID" 2>/dev/null || true
	wait "$EGSD_PID" 2>/dev/null || true
}

run_case "$EGSD" this
if [ -n "$EGSD_BASE" ]; then run_case "$EGSD_BASE" base; fi

{
	echo
	echo "### egsd deep-queue case, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "$NODES nodes of $SHAPES shapes in $CLUSTERS clusters, $WORKSPACES workspaces, $DEPTH GPRs queued at priorities 1-300;"
	echo "wrk -t$THREADS -c$CONNS -d$DURATION, creates at priorities 1-300 mixed 1:1 with status reads. $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| egsd | waiting after fill | fill creates/s | mixed: creates/s (stored) | reads/s | p50 | p99 | max | egsd CPU per request (all threads: the loop's planner, commits, rest; other threads) | scheduler runs ended, mean wall | longest scheduler slice: wall (CPU) | longest single step: CPU (what) | mixed: slices over 5 ms, wall / CPU, of all | steps over 5 ms of CPU (what): fill and set-up / mixed | GET /metrics: loop CPU each | non-200 / socket errors | mixed, egsd's view: requests over 25 / 50 ms, of all | mixed, egsd's view: creates over 1 / 2.5 / 5 ms | reads over 1 / 2.5 / 5 ms | mixed: the store's fdatasyncs, checkpoints, catch-ups (longest: since start) |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
	printf '%s\n' "${ROWS[@]}"
} | tee ${RESULTS:+"$RESULTS"}
