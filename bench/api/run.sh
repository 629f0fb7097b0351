#!/usr/bin/env bash
# HTTP API benchmark of egsd: wrk against GPR status read and GPR create at 64 connections, with a
# single-worker nginx serving the byte-identical status body as the ceiling, all in one invocation.
#
#   ./bench/api/run.sh            (or `make bench`, which builds first)
#
# Two passes, each against a fresh egsd and data directory:
#   quiet   egsd --quiet (no access log)             vs nginx with access_log off
#   logged  egsd with its access log (to a file)     vs nginx with access_log to a file
# Each pass runs, for DURATION each: (a) nginx static, (b) egsd GET /api/v1/gpr?gprId=ID rotating
# over READ_IDS ids, (c) egsd POST /api/v1/gpr.  nginx gets the same requests through the same wrk
# script and answers each id with the exact bytes egsd returned for it.  After the create test egsd is
# killed with SIGKILL and the GPRs in its SQLite file are counted: every acknowledged create must be
# there.  A markdown table goes to stdout at the end (and to $RESULTS if set).
#
# With EGSD_BASE=path (another egsd binary, e.g. main's before a change), each pass runs the egsd
# tests against both builds, alternating their order over ROUNDS rounds (nginx once per round), so a
# before/after comparison shares one invocation and the machine's load of the moment.  Every egsd
# row also reports egsd's CPU time (utime + stime from /proc) per request, which moves much less
# with other load on the machine than req/s does, wrk's own CPU per request (wrk shares the cores:
# with its Lua response hook it spends more per request than egsd does), and how often a second the
# server's main thread was preempted (nonvoluntary_ctxt_switches): where the p99 and max come from
# when the cores are short.
#
# Latency: with THREADS=2 on a 2-core machine wrk's two threads and the server's one share two cores,
# so the p99 of every server there (nginx's too: 1.1-3.0 ms on the same runs) is mostly how long one of
# three busy threads waits for a core.  So the status read is also run with wrk at LAT_THREADS threads
# (default 1: wrk and the server each on a core; the same 64 connections), against nginx the same way,
# and issue 16's read p99 (< 2 ms at 64 connections) is judged on that row; both rows are reported.
#
# Environment knobs (defaults in brackets): DURATION [10s], THREADS [2], LAT_THREADS [1; empty: no
# latency rows], CONNS [64], NODES [8],
# READ_IDS [16], PASSES ["quiet logged"], EGSD [build/bin/egsd], EGSD_BASE [none], ROUNDS [1; 2 with
# EGSD_BASE], NGINX [nginx from PATH],
# NGINX_TUNED [0; 1 adds open_file_cache and unlimited keep-alive requests], PROFILE [0; 1 runs
# `perf record -g` on egsd during the quiet read and create tests and prints the top symbols; KEEP=1
# keeps the perf.data files], BENCH_TMP [/var/tmp],
# KEEP [0; 1 keeps the work directory], RESULTS [file to copy the table to], STRICT [0; 1 exits 1 when
# a performance target is missed; the script always exits 1 on lost GPRs, non-200s or socket errors].
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/api
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
LAT_THREADS=${LAT_THREADS-1}
[ "$LAT_THREADS" != "$THREADS" ] || LAT_THREADS=
CONNS=${CONNS:-64}
NODES=${NODES:-8}
READ_IDS=${READ_IDS:-16}
PASSES=${PASSES:-quiet logged}
EGSD=${EGSD:-$ROOT/build/bin/egsd}
EGSD_BASE=${EGSD_BASE:-}
ROUNDS=${ROUNDS:-$([ -n "$EGSD_BASE" ] && echo 2 || echo 1)}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
NGINX_TUNED=${NGINX_TUNED:-0}
PROFILE=${PROFILE:-0}
KEEP=${KEEP:-0}
RESULTS=${RESULTS:-}

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }

command -v wrk >/dev/null || die "wrk not found (./scripts/deps.sh installs it)"
[ -x "$NGINX" ] || die "nginx not found (./scripts/deps.sh installs nginx-light)"
command -v curl >/dev/null || die "curl not found"
[ -x "$EGSD" ] || die "$EGSD not built (make build/bin/egsd)"
[ -z "$EGSD_BASE" ] || [ -x "$EGSD_BASE" ] || die "EGSD_BASE=$EGSD_BASE is not an executable"

WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/egs-bench.XXXXXX")
# Run a private copy, so a rebuild during the run cannot swap the binary between passes.
cp "$EGSD" "$WORK/egsd"
EGSD_BUILD="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$ROOT" status --porcelain -- src 2>/dev/null || true)" ]; then EGSD_BUILD+="+dirty src"; fi
EGSD_BUILD+=" built $(date -u -r "$EGSD" '+%Y-%m-%d %H:%M UTC')"
EGSD=$WORK/egsd
BUILDS=(new)
if [ -n "$EGSD_BASE" ]; then
	cp "$EGSD_BASE" "$WORK/egsd-base"
	BASE_BUILD="$EGSD_BASE, built $(date -u -r "$EGSD_BASE" '+%Y-%m-%d %H:%M UTC')"
	BUILDS=(base new)
fi
egsd_bin() { if [ "$1" = base ]; then echo "$WORK/egsd-base"; else echo "$EGSD"; fi; }
PIDS=()
# shellcheck disable=SC2317 # called through the EXIT trap
cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ "$KEEP" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Forget a pid we stopped ourselves, so cleanup does not signal a recycled pid later.
forget() {
	local keep=() p
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}
stop() { # stop PID [SIGNAL]
	kill "-${2:-TERM}" "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	forget "$1"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_http() { # URL: wait up to 10 s for any HTTP answer
	local i
	for i in $(seq 100); do
		curl -s -o /dev/null "$1" && return 0
		sleep 0.1
	done
	return 1
}
json_field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }
# "BENCH k=v ..." line from stats.lua -> value of key
field() { sed -n "s/^BENCH .*\\b$1=\\([^ ]*\\).*/\\1/p" "$2"; }
ms() { awk -v us="$1" 'BEGIN { printf "%.2f ms", us / 1000 }'; }

fstype=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), kernel $(uname -r)"
log "machine: $machine; data on $fstype ($WORK); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$fstype" = tmpfs ]; then echo "warning: $WORK is on tmpfs, so fsync costs nothing; set BENCH_TMP to a disk" >&2; fi
log "egsd $EGSD_BUILD"
log "wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2), $("$NGINX" -v 2>&1 | cut -d' ' -f3), $DURATION per test, $THREADS threads, $CONNS connections"

# ---- nginx: one worker, foreground, generated config; started per pass (access log differs) ----
NGX=$WORK/nginx
mkdir -p "$NGX/www/gpr" "$NGX/tmp"
chmod 755 "$WORK" "$NGX" "$NGX/www" "$NGX/www/gpr" # the worker may run as another user
NGINX_PORT=$(free_port)
NGINX_PID=
start_nginx() { # ACCESS_LOG (path or off)
	local conf=$NGX/nginx.conf
	sed -e "s#@DIR@#$NGX#g" -e "s#@PORT@#$NGINX_PORT#" -e "s#@USER@#$(id -un)#" \
		-e "s#@ACCESS_LOG@#$1#" "$HERE/nginx.conf.in" >"$conf"
	if [ "$NGINX_TUNED" = 1 ]; then
		sed -i -e 's|^\(\s*\)sendfile on;|&\n\1open_file_cache max=10000 inactive=60s;\n\1open_file_cache_valid 60s;\n\1keepalive_requests 1000000;|' "$conf"
	fi
	"$NGINX" -e "$NGX/error.log" -p "$NGX" -c "$conf" &
	NGINX_PID=$!
	PIDS+=("$NGINX_PID")
	wait_http "http://127.0.0.1:$NGINX_PORT/" || die "nginx did not start: $(cat "$NGX/error.log")"
}

# ---- egsd: fresh data dir, cluster, NODES nodes, a workspace, READ_IDS GPRs ----
start_egsd() { # PASS BUILD ROUND
	local pass=$1 data=$WORK/egsd-$1-$2-$3
	EGSD_PORT=$(free_port)
	EGSD_DATA=$data
	EGSD_URL=http://127.0.0.1:$EGSD_PORT
	mkdir -p "$data"
	local quiet=(--quiet)
	[ "$pass" = logged ] && quiet=()
	EGSD_LOG=$WORK/egsd-$pass-$2-$3.log
	"$(egsd_bin "$2")" --listen "127.0.0.1:$EGSD_PORT" --data "$data" "${quiet[@]}" >"$EGSD_LOG" 2>&1 &
	EGSD_PID=$!
	PIDS+=("$EGSD_PID")
	wait_http "$EGSD_URL/healthz" || die "egsd did not start: $(cat "$EGSD_LOG")"
	ADMIN_KEY=$(cat "$data/admin.key")
}
api() { # METHOD PATH [BODY] [TOKEN] -> body on stdout; fails unless 200
	local out code
	out=$(curl -s -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer ${4:-$ADMIN_KEY}" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "$EGSD_URL$2")
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	[ "$code" = 200 ] || die "$1 $2 -> $code: $out"
	printf '%s\n' "$out"
}
setup_egsd() {
	local token nodes="" i
	token=$(api POST /api/v1/clusters '{"clusterName":"bench-1"}' | json_field agentToken)
	[ -n "$token" ] || die "no agentToken"
	for i in $(seq "$NODES"); do
		nodes+="${nodes:+,}{\"name\":\"n$i\",\"instanceType\":\"p5.48xlarge\",\"gpuModel\":\"NVIDIA-H100-80GB-HBM3\",\"gpuCount\":8,\"memoryMiB\":81920}"
	done
	api POST /api/v1/agent/register "{\"clusterName\":\"bench-1\",\"nodes\":[$nodes]}" "$token" >/dev/null
	api POST /api/v1/slice-workspace \
		'{"workspaceName":"bench","clusters":["bench-1"],"namespaces":["bench"]}' >/dev/null
	IDS=()
	for i in $(seq "$READ_IDS"); do
		IDS+=("$(api POST /api/v1/gpr "{\"gprName\":\"read-$i\",\"sliceName\":\"bench\",\"clusterName\":\"bench-1\",\"numberOfGPUs\":1,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\",\"priority\":101}" | json_field gprId)")
	done
	# nginx answers each id with the exact body egsd gives for it now.
	local sizes=()
	for i in "${IDS[@]}"; do
		curl -sf -o "$NGX/www/gpr/$i.json" -H "Authorization: Bearer $ADMIN_KEY" "$EGSD_URL/api/v1/gpr?gprId=$i" ||
			die "GET gpr $i failed"
		chmod 644 "$NGX/www/gpr/$i.json"
		sizes+=("$(stat -c %s "$NGX/www/gpr/$i.json")")
	done
	BODY_SIZES=$(printf '%s\n' "${sizes[@]}" | sort -n | awk '{ s += $1; a[NR] = $1 } END { printf "%d-%d bytes (mean %.0f)", a[1], a[NR], s / NR }')
	# check that the static copy is what egsd serves
	local a b
	a=$(curl -s -H "Authorization: Bearer $ADMIN_KEY" "$EGSD_URL/api/v1/gpr?gprId=${IDS[0]}" | wc -c)
	if [ -n "$NGINX_PID" ]; then
		b=$(curl -s "http://127.0.0.1:$NGINX_PORT/api/v1/gpr?gprId=${IDS[0]}" | wc -c)
		log "status body sizes: $BODY_SIZES; egsd $a bytes, nginx $b bytes for ${IDS[0]}"
	fi
}

# PROFILE=1: perf record (cpu-clock, call graphs) on egsd during the quiet read and create tests.
PERF_PID=
prof_start() { # NAME
	PERF_NAME=$1-$BUILD-$ROUND
	[ "$PROFILE" = 1 ] && [ "$pass" = quiet ] || return 0
	perf record -e cpu-clock -F 999 -g -o "$WORK/perf-$PERF_NAME.data" -p "$EGSD_PID" >"$WORK/perf-$PERF_NAME.log" 2>&1 &
	PERF_PID=$!
	PIDS+=("$PERF_PID")
}
prof_stop() {
	[ -n "$PERF_PID" ] || return 0
	stop "$PERF_PID" INT
	PERF_PID=
	log "perf: egsd self time during $PERF_NAME (perf report -i $WORK/perf-$PERF_NAME.data)"
	local data=$WORK/perf-$PERF_NAME.data
	{
		perf report -i "$data" --no-children --stdio -g none --sort dso 2>/dev/null |
			grep -v -e '^#' -e '^$' | head -8
		perf report -i "$data" --no-children --percent-limit 1 --stdio -g none --sort dso,symbol 2>/dev/null |
			grep -v -e '^#' -e '^$' | head -30
	} >&2 || true
}

# Reply-after-fsync order: strace egsd (all its threads: the WAL's fdatasync runs on the store's own
# thread, the replies on the loop's) while three creates go through one at a time, and check that no
# "HTTP/1.1 200" reply is written while a WAL write (pwrite64) made before it is not yet covered by an
# fdatasync that began after that write and returned (strace -f splits a call that another thread
# interleaves into "<unfinished ...>" and "<... resumed>": a sync counts only at its return).
check_order() {
	ORDER_NOTE="reply-after-fsync order not checked (no strace)"
	command -v strace >/dev/null || return 0
	local st=$WORK/strace-$1.txt spid i
	strace -f -qq -p "$EGSD_PID" -e trace=pwrite64,fdatasync,fsync,writev,write -s 16 -o "$st" 2>/dev/null &
	spid=$!
	PIDS+=("$spid")
	sleep 0.5
	for i in 1 2 3; do
		api POST /api/v1/gpr "{\"gprName\":\"order-$i\",\"sliceName\":\"bench\",\"clusterName\":\"bench-1\",\"numberOfGPUs\":1,\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\",\"priority\":101}" >/dev/null
	done
	sleep 0.2
	stop "$spid" TERM
	ORDER_NOTE=$(awk '
		{ sub(/^(\[pid +)?[0-9]+\]? +/, "") } # the thread id strace -f puts first
		/^pwrite64\(/ { w++; if (!/unfinished/) writes++ }
		/^f(data)?sync\(/ { from[++n] = w; if (/\) += 0/) { if (w > synced) syncs++; synced = w } }
		/^<\.\.\. f(data)?sync resumed>/ { if (/ = 0/ && from[n] > synced) { syncs++; synced = from[n] } }
		/^writev?\(.*HTTP\/1\.1 200/ { replies++; if (w > synced) bad++ }
		END {
			if (replies < 3 || writes == 0) print "reply-after-fsync order not checked (strace saw " replies + 0 " replies, " writes + 0 " WAL writes)"
			else if (bad) print "reply-after-fsync order VIOLATED: " bad " of " replies " replies written before the fsync of their WAL writes"
			else print "reply-after-fsync order: ok (strace -f: " replies " create replies, each written after an fdatasync that began after its WAL writes had returned)"
		}' "$st")
}

# Other load on the machine (another wrk or nginx not started here, a compiler, tests) makes every
# number lower: warn about foreign wrk/nginx before each test and measure the CPU others used during it.
FOREIGN=0
NOISY=()
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
proc_ticks() { # PID... -> their utime + stime in ticks
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
nonvol() { # PID... -> the involuntary context switches of their main threads (egsd's loop, nginx's worker)
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
child_ticks() { # CPU of this shell's reaped children (wrk), from `times`, in ticks; not in a subshell
	times >"$WORK/times"
	awk -v hz="$HZ" 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d\n", t * hz }' "$WORK/times" >"$WORK/ticks"
}
foreign_load() {
	local n=0 pid ppid
	for pid in $(pgrep -x wrk; pgrep -x nginx); do
		ppid=$(ps -o ppid= -p "$pid" | tr -d ' ') || continue # gone since pgrep (another run's wrk ended)
		[ "$pid" = "${NGINX_PID:-}" ] || [ "$ppid" = "${NGINX_PID:-}" ] || n=$((n + 1))
	done
	if [ "$n" -gt 0 ]; then
		echo "warning: $n other wrk/nginx processes are running on this machine" >&2
		FOREIGN=$((FOREIGN + 1))
	fi
}

ROWS=()
declare -A NGINX_RPS
run_wrk() { # PASS TEST URL SCRIPT [ARGS...]  (WRK_T=N: wrk's threads, THREADS by default)
	local pass=$1 test=$2 url=$3 script=$4 out threads=${WRK_T:-$THREADS}
	shift 4
	[ "$threads" = "$THREADS" ] || test+=" (wrk -t$threads)"
	out=$WORK/wrk-$pass-${test// /}-$BUILD-$ROUND.txt
	foreign_load
	local server=("$EGSD_PID") b0 s0 w0 t0 b1 s1 w1 t1 other n0 n1
	if [[ $test == nginx-static* ]]; then
		mapfile -t server < <(echo "$NGINX_PID"; pgrep -P "$NGINX_PID")
	fi
	log "$pass / $test${BUILD_TAG:+ ($BUILD_TAG)}: wrk -t$threads -c$CONNS -d$DURATION --latency -s $script $url"
	child_ticks
	n0=$(nonvol "${server[@]}")
	b0=$(busy_ticks) s0=$(proc_ticks "${server[@]}") w0=$(cat "$WORK/ticks") t0=$(date +%s.%N)
	wrk -t"$threads" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $ADMIN_KEY" \
		-s "$HERE/$script" "$url" ${1:+--} "$@" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
	child_ticks
	b1=$(busy_ticks) s1=$(proc_ticks "${server[@]}") w1=$(cat "$WORK/ticks") t1=$(date +%s.%N)
	n1=$(nonvol "${server[@]}")
	# CPU (in cores) that neither the server under test nor wrk used during the test
	other=$(awk -v b=$((b1 - b0)) -v s=$((s1 - s0)) -v w=$((w1 - w0)) -v hz="$HZ" -v t0="$t0" -v t1="$t1" \
		'BEGIN { o = (b - s - w) / hz / (t1 - t0); if (o < 0) o = 0; printf "%.2f", o }')
	if awk -v o="$other" 'BEGIN { exit !(o > 0.15) }'; then NOISY+=("$pass/$test ($other cores)"); fi
	sed -e '/^BENCH /d' "$out" >&2
	local rps p50 p99 pmax non200 errors codes requests ratio cpu wcpu preempt
	rps=$(field rps "$out")
	[ -n "$rps" ] || die "no BENCH line in $out"
	requests=$(field requests "$out")
	p50=$(field p50_us "$out")
	p99=$(field p99_us "$out")
	pmax=$(field max_us "$out")
	non200=$(field non200 "$out")
	errors=$(field errors "$out")
	codes=$(field codes "$out")
	if [[ $test == nginx-static* ]]; then NGINX_RPS[$threads]=$rps; fi
	ratio=$(awk -v a="$rps" -v b="${NGINX_RPS[$threads]}" 'BEGIN { printf "%.1f%%", 100 * a / b }')
	# the server's own CPU time per request (egsd, or nginx's worker and master), in microseconds
	cpu=$(awk -v t=$((s1 - s0)) -v hz="$HZ" -v n="$requests" 'BEGIN { if (n > 0) printf "%.1f us", t * 1e6 / hz / n; else print "-" }')
	# wrk's own CPU per request (it shares the cores), and how often the server was preempted
	wcpu=$(awk -v t=$((w1 - w0)) -v hz="$HZ" -v n="$requests" 'BEGIN { if (n > 0) printf "%.1f us", t * 1e6 / hz / n; else print "-" }')
	preempt=$(awk -v c=$((n1 - n0)) -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.0f/s", c / (t1 - t0) }')
	LAST_OK=$((requests - non200))
	if [ "$codes" = - ]; then codes=""; else codes=" (status $codes)"; fi
	local label=$test
	[[ $test == nginx-static* ]] || [ -z "$BUILD_TAG" ] || label="$test ($BUILD_TAG)"
	ROWS+=("| $pass | $ROUND | $label | $rps | $(ms "$p50") | $(ms "$p99") | $(ms "$pmax") | $ratio | $cpu | $wcpu | $preempt | $non200$codes / $errors | $other |")
	CHECK_BAD[$pass/$test/$BUILD/$ROUND]=$((non200 + errors))
	[ "$BUILD" = new ] || [[ $test == nginx-static* ]] || return 0
	CHECK_RPS[$pass/$test]=$rps
	CHECK_P99[$pass/$test]=$p99
}
declare -A CHECK_RPS CHECK_P99 CHECK_BAD
NOTES=()
BROKEN=0 # correctness failures: lost acknowledged GPRs, reply before fsync, non-200s, socket errors

# The egsd tests of one pass against the egsd just set up: read, create, then the durability check.
egsd_tests() { # PASS
	local pass=$1 tag=${BUILD_TAG:+ ($BUILD_TAG)}
	prof_start quiet-read
	run_wrk "$pass" gpr-status-read "$EGSD_URL/api/v1/gpr" read.lua "${IDS[@]}"
	prof_stop
	[ -z "$LAT_THREADS" ] || WRK_T=$LAT_THREADS run_wrk "$pass" gpr-status-read "$EGSD_URL/api/v1/gpr" read.lua "${IDS[@]}"

	# fsync count during the create test (kernel tracepoints; skipped when perf cannot count them)
	# (and on the loop thread alone: an fsync there holds every request, e.g. a checkpoint in a COMMIT)
	local fsync_pid="" fsyncs="" csv=$WORK/fsync-$pass-$BUILD-$ROUND.csv loop_pid="" loop_fsyncs=""
	local loop_csv=$WORK/fsync-loop-$pass-$BUILD-$ROUND.csv
	if command -v perf >/dev/null &&
		perf stat -e syscalls:sys_enter_fdatasync true >/dev/null 2>&1; then
		perf stat -x, -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p "$EGSD_PID" \
			-o "$csv" >/dev/null 2>&1 &
		fsync_pid=$!
		PIDS+=("$fsync_pid")
		perf stat -x, -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -t "$EGSD_PID" \
			-o "$loop_csv" >/dev/null 2>&1 &
		loop_pid=$!
		PIDS+=("$loop_pid")
	fi
	check_order "$pass"
	READ_IDS_DONE=$((READ_IDS + 3)) # set-up GPRs incl. the three of check_order
	prof_start quiet-create
	run_wrk "$pass" gpr-create "$EGSD_URL/api/v1/gpr" create.lua
	prof_stop
	local acked=$((LAST_OK + READ_IDS_DONE)) on_disk status note
	if [ -n "$fsync_pid" ]; then
		stop "$fsync_pid" INT
		fsyncs=$(awk -F, '/sys_enter_f(data)?sync/ { n += $1 } END { print n + 0 }' "$csv")
		stop "$loop_pid" INT
		loop_fsyncs=$(awk -F, '/sys_enter_f(data)?sync/ { n += $1 } END { print n + 0 }' "$loop_csv")
	fi

	# Durability: SIGKILL (no shutdown path runs), then count what is on disk.
	stop "$EGSD_PID" KILL
	if command -v sqlite3 >/dev/null; then
		on_disk=$(sqlite3 "$EGSD_DATA/egs.db" 'SELECT count(*) FROM gprs')
	else
		on_disk=unknown
	fi
	status=ok
	if [ "$on_disk" = unknown ]; then
		status="not checked (no sqlite3)"
	elif [ "$on_disk" -lt "$acked" ]; then
		status="LOST $((acked - on_disk))"
		BROKEN=1
	fi
	if [[ $ORDER_NOTE == *VIOLATED* ]]; then BROKEN=1; fi
	note="$pass$tag: $acked GPRs acknowledged with 200 ($READ_IDS_DONE set up + $LAST_OK by wrk), $on_disk in egs.db after SIGKILL: $status"
	if [ -n "$fsyncs" ]; then
		note+="; $fsyncs fsync/fdatasync calls during the create test ($(awk -v a="$LAST_OK" -v b="$fsyncs" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "n/a" }') creates per fsync), $loop_fsyncs of them on the loop thread"
	fi
	NOTES+=("$note" "$pass$tag: $ORDER_NOTE")
	if [ "$pass" = logged ]; then
		NOTES+=("logged$tag: egsd wrote $(wc -l <"$EGSD_LOG") access-log lines ($(du -h "$EGSD_LOG" | cut -f1)) to a file")
	fi
}

for pass in $PASSES; do
	case $pass in
	quiet) ngx_log=off ;;
	logged) ngx_log=$NGX/access.log ;;
	*) die "unknown pass $pass (quiet, logged)" ;;
	esac
	for ROUND in $(seq "$ROUNDS"); do
		order=("${BUILDS[@]}")
		if [ "${#BUILDS[@]}" = 2 ] && [ $((ROUND % 2)) = 0 ]; then order=(new base); fi
		for BUILD in "${order[@]}"; do
			BUILD_TAG=
			[ -z "$EGSD_BASE" ] || BUILD_TAG=$BUILD
			log "pass $pass, round $ROUND: starting egsd${BUILD_TAG:+ ($BUILD_TAG)}"
			start_egsd "$pass" "$BUILD" "$ROUND"
			if [ "$BUILD" = "${order[0]}" ]; then # nginx once per round, serving this egsd's bodies
				start_nginx "$ngx_log"
				setup_egsd
				run_wrk "$pass" nginx-static "http://127.0.0.1:$NGINX_PORT/api/v1/gpr" read.lua "${IDS[@]}"
				[ -z "$LAT_THREADS" ] ||
					WRK_T=$LAT_THREADS run_wrk "$pass" nginx-static "http://127.0.0.1:$NGINX_PORT/api/v1/gpr" read.lua "${IDS[@]}"
				stop "$NGINX_PID" QUIT
				NGINX_PID=
			else
				setup_egsd
			fi
			egsd_tests "$pass"
		done
	done
done

# ---- report ----
verdict() { if [ "$1" = 1 ]; then echo PASS; else echo MISS; fi; }
report() {
	echo
	echo "### egsd HTTP API benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "egsd: $EGSD_BUILD${EGSD_BASE:+; base: $BASE_BUILD; $ROUNDS rounds, alternating their order}. Machine: $machine. wrk -t$THREADS${LAT_THREADS:+ (status reads also -t$LAT_THREADS)} -c$CONNS -d$DURATION --latency; nginx 1 worker$([ "$NGINX_TUNED" = 1 ] && echo ", tuned"); status body $BODY_SIZES."
	echo
	echo "| pass | round | test | req/s | p50 | p99 | max | ratio to nginx | server CPU/request | wrk CPU/request | server preempted | non-200 / socket errors | other CPU (cores) |"
	echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	printf '%s\n' "${ROWS[@]}"
	echo
	printf -- '- %s\n' "${NOTES[@]}"
	if [ "${#NOISY[@]}" -gt 0 ]; then
		echo "- warning: other processes used CPU during ${NOISY[*]}: those numbers are low"
	fi
	if [ "$FOREIGN" -gt 0 ]; then
		echo "- warning: other wrk/nginx processes were running before $FOREIGN of the tests: numbers are low"
	fi
	echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	local p=quiet
	[[ " $PASSES " == *" quiet "* ]] || p=${PASSES%% *}
	if [ -n "${CHECK_RPS[$p/gpr-status-read]:-}" ]; then
		local r n c p99r p99c
		r=${CHECK_RPS[$p/gpr-status-read]}
		n=${CHECK_RPS[$p/nginx-static]}
		c=${CHECK_RPS[$p/gpr-create]}
		p99r=${CHECK_P99[$p/gpr-status-read]}
		local lt=${LAT_THREADS:+$p/gpr-status-read (wrk -t$LAT_THREADS)} p99t=
		[ -z "$lt" ] || p99t=${CHECK_P99[$lt]:-}
		p99c=${CHECK_P99[$p/gpr-create]}
		echo
		echo "Targets (issue 16; $p pass${EGSD_BASE:+, this build}, round $ROUNDS):"
		echo "- reads >= 80% of nginx: $(verdict $((r * 5 >= n * 4))) ($(awk -v a="$r" -v b="$n" 'BEGIN { printf "%.1f%%", 100 * a / b }'))"
		echo "- creates >= 20,000/s, durable: $(verdict $((c >= 20000 && BROKEN == 0))) ($c/s)"
		if [ -n "$p99t" ]; then
			echo "- p99: read < 2 ms (wrk -t$LAT_THREADS, 64 connections) $(verdict $((p99t < 2000))) ($(ms "$p99t"); with wrk -t$THREADS $(ms "$p99r"), nginx's own $(ms "${CHECK_P99[$p/nginx-static]}") there), create < 5 ms $(verdict $((p99c < 5000))) ($(ms "$p99c"))"
			p99r=$p99t
		else
			echo "- p99: read < 2 ms $(verdict $((p99r < 2000))) ($(ms "$p99r")), create < 5 ms $(verdict $((p99c < 5000))) ($(ms "$p99c"))"
		fi
		local bad=0 k
		for k in "${!CHECK_BAD[@]}"; do bad=$((bad + CHECK_BAD[$k])); done
		echo "- non-200 responses and socket errors, all tests: $bad"
		if [ "$bad" -gt 0 ]; then BROKEN=1; fi
		MISSED=$((r * 5 < n * 4 || c < 20000 || p99r >= 2000 || p99c >= 5000))
	fi
	echo "BROKEN=$BROKEN MISSED=${MISSED:-0}" >"$WORK/verdict"
}
report | tee ${RESULTS:+"$RESULTS"}
# Exit status: 1 on a correctness failure; with STRICT=1 also when a performance target is missed.
# shellcheck source=/dev/null
. "$WORK/verdict"
if [ "$BROKEN" = 1 ]; then exit 1; fi
if [ "${STRICT:-0}" = 1 ] && [ "$MISSED" = 1 ]; then exit 1; fi
exit 0
