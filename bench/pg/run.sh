#!/usr/bin/env bash
# Durable GPR creates per second with egsd on PostgreSQL, and on SQLite in the same run beside it.
#
#   ./bench/pg/run.sh            (make bench-pg builds first)
#
# One throwaway PostgreSQL (tests/api/pgserver.py: initdb and pg_ctl in the work directory, unix
# socket, fsync and synchronous_commit on: its defaults) serves the whole run.  For each store, in
# ROUNDS alternating rounds: a fresh egsd --quiet (SQLite in its data dir, or PostgreSQL database
# "egs" emptied first), a cluster of NODES nodes and a workspace, then wrk POST /api/v1/gpr
# (bench/api/create.lua) at CONNS connections for DURATION.  egsd is then killed with SIGKILL and the
# GPRs in the store are counted: every create acknowledged with 200 must be there.  For PostgreSQL
# the run also counts committed transactions (pg_stat_database), i.e. creates per group commit, rows
# written and WAL bytes and full-page images per create (pg_stat_database, pg_stat_wal).
# A markdown table goes to stdout, with the CPU that egsd and its PostgreSQL backend spent per
# acknowledged create (utime + stime from /proc/PID/stat, before and after wrk).
#
# EGSD_BASE=path adds, in each round, a row "postgres-base": the same PostgreSQL run with another
# egsd binary (e.g. one built from the commit before a change), so the two are compared under the
# same load; the order of the two alternates from round to round.  PG_STMTS=1 loads
# pg_stat_statements into the server and adds statements per create (the extension costs the
# server a little per statement, so leave it out of runs whose rates you report).
#
# PostgreSQL runs with its stock settings (shared_buffers=64MB as pgserver.py sets).  PG_COMPARE=1
# adds, in each round, a row "postgres-tuned" with PG_TUNED below (more shared and WAL buffers,
# checkpoints spread out: what a production deployment might set, docs/ha.md), the server restarted
# between the two, so the settings' effect is measured under the same load.  Either way fsync,
# synchronous_commit and full_page_writes stay on (checked after each start).
#
# PG_TURN_DELAY_MS=n makes every committed turn of egsd take n ms longer in the server (a trigger on
# the turn counter's UPDATE sleeps; added once egsd has created its tables, before wrk): a database
# farther away than this machine's unix socket (a network round trip, a synchronous standby's
# flush), where egsd's loop would otherwise idle for that long per turn.
#
# Knobs [defaults]: DURATION [10s], THREADS [2], CONNS [64], NODES [8], ROUNDS [2], PG_COMPARE [0],
# EGSD_BASE [none], PG_STMTS [0], PG_TURN_DELAY_MS [0], SQLITE [1: 0 leaves SQLite out], BENCH_TMP [/var/tmp; must be a disk, not tmpfs, and enterable by the postgres user], KEEP [0].
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
NODES=${NODES:-8}
ROUNDS=${ROUNDS:-2}
PG_COMPARE=${PG_COMPARE:-0}
EGSD_BASE=${EGSD_BASE:-}
PG_STMTS=${PG_STMTS:-0}
PG_TURN_DELAY_MS=${PG_TURN_DELAY_MS:-0}
SQLITE=${SQLITE:-1}
PG_EXTRA=()
[ "$PG_STMTS" = 1 ] && PG_EXTRA=(shared_preload_libraries=pg_stat_statements)
# PG_COMPARE's "postgres-tuned" rows (docs/ha.md "PostgreSQL settings"), durability untouched.
PG_TUNED=(shared_buffers=512MB wal_buffers=64MB max_wal_size=8GB checkpoint_timeout=30min
	checkpoint_completion_target=0.9)
KEEP=${KEEP:-0}
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

die() { echo "run.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
command -v wrk >/dev/null || die "wrk not found (./scripts/deps.sh installs it)"
command -v sqlite3 >/dev/null || die "sqlite3 not found"
[ -x "$PG_BIN/psql" ] || die "PostgreSQL not found (./scripts/deps.sh installs postgresql)"
[ -x "$ROOT/build/bin/egsd" ] || die "build/bin/egsd not built (make all)"
[ -z "$EGSD_BASE" ] || [ -x "$EGSD_BASE" ] || die "EGSD_BASE=$EGSD_BASE is not an executable"

WORK=$(mktemp -d "${BENCH_TMP:-/var/tmp}/egs-bench-pg.XXXXXX")
chmod 755 "$WORK" # the postgres user must enter it
cp "$ROOT/build/bin/egsd" "$WORK/egsd"
[ -n "$EGSD_BASE" ] && cp "$EGSD_BASE" "$WORK/egsd-base"
BUILD="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
EGSD_PID=
cleanup() {
	local rc=$?
	[ -n "$EGSD_PID" ] && kill -9 "$EGSD_PID" 2>/dev/null && wait "$EGSD_PID" 2>/dev/null
	/usr/bin/python3 "$ROOT/tests/api/pgserver.py" cleanup "$WORK/pg" >/dev/null 2>&1 || true
	if [ "$KEEP" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PG_URL=$(/usr/bin/python3 "$ROOT/tests/api/pgserver.py" start "$WORK/pg")
PG_SOCK=$WORK/pg/sock
PG_USER=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
psql_egs() { "$PG_BIN/psql" -X -q -At -h "$PG_SOCK" -U "$PG_USER" -d "${2:-egs}" -c "$1"; }
pg_settings() { # tuned|stock: the server restarted with them (shared_buffers and wal_buffers need it)
	/usr/bin/python3 "$ROOT/tests/api/pgserver.py" stop "$WORK/pg" >/dev/null
	EGS_PG_SETTINGS="$([ "$1" = tuned ] && echo "${PG_TUNED[*]}") ${PG_EXTRA[*]}" \
		/usr/bin/python3 "$ROOT/tests/api/pgserver.py" start "$WORK/pg" >/dev/null
	[ "$(psql_egs 'SHOW fsync'),$(psql_egs 'SHOW synchronous_commit'),$(psql_egs 'SHOW full_page_writes')" = on,on,on ] ||
		die "PostgreSQL durability settings are not all on"
	log "PostgreSQL $1: shared_buffers=$(psql_egs 'SHOW shared_buffers' postgres) wal_buffers=$(psql_egs 'SHOW wal_buffers' postgres) max_wal_size=$(psql_egs 'SHOW max_wal_size' postgres)"
}
PG_NOW=
pg_settings stock
PG_NOW=stock
log "PostgreSQL $("$PG_BIN/postgres" --version | cut -d' ' -f3) on a unix socket: fsync=$(psql_egs 'SHOW fsync'), synchronous_commit=$(psql_egs 'SHOW synchronous_commit'), wal_sync_method=$(psql_egs 'SHOW wal_sync_method')"
log "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); data on $(findmnt -n -o FSTYPE -T "$WORK")"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# commits | rows written | WAL bytes | WAL full-page images: per create in the table
PG_COUNTERS="SELECT d.xact_commit, d.tup_inserted + d.tup_updated + d.tup_deleted, w.wal_bytes, w.wal_fpi
	FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = 'egs'"
# CPU seconds (utime + stime) a process has spent so far.
TCK=$(getconf CLK_TCK)
cpu_s() { awk -v t="$TCK" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }
field() { sed -n "s/^BENCH .*\\b$1=\\([^ ]*\\).*/\\1/p" "$2"; }
api() { # METHOD PATH [BODY] [TOKEN]
	local out code
	out=$(curl -s -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer ${4:-$ADMIN_KEY}" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "$URL$2")
	code=${out##*$'\n'}
	[ "$code" = 200 ] || die "$1 $2 -> $code: ${out%$'\n'*}"
	printf '%s\n' "${out%$'\n'*}"
}

start_egsd() { # STORE ROUND
	local data=$WORK/egsd-$1-$2 port args=() bin=$WORK/egsd
	[ "$1" = postgres-base ] && bin=$WORK/egsd-base
	port=$(free_port)
	URL=http://127.0.0.1:$port
	mkdir -p "$data"
	if [ "$1" != sqlite ]; then
		local want=stock
		[ "$1" = postgres-tuned ] && want=tuned
		[ "$PG_NOW" = "$want" ] || { pg_settings "$want"; PG_NOW=$want; }
		psql_egs 'DROP DATABASE IF EXISTS egs' postgres
		psql_egs 'CREATE DATABASE egs' postgres
		[ "$PG_STMTS" = 1 ] && psql_egs 'CREATE EXTENSION pg_stat_statements'
		args=(--store-url "$PG_URL")
	fi
	"$bin" --listen "127.0.0.1:$port" --data "$data" --quiet "${args[@]}" >"$data.log" 2>&1 &
	EGSD_PID=$!
	for _ in $(seq 100); do curl -s -o /dev/null "$URL/healthz" && break; sleep 0.1; done
	ADMIN_KEY=$(cat "$data/admin.key")
	DATA=$data
	local token nodes="" i
	token=$(api POST /api/v1/clusters '{"clusterName":"bench-1"}' | sed -n 's/.*"agentToken":"\([^"]*\)".*/\1/p')
	for i in $(seq "$NODES"); do
		nodes+="${nodes:+,}{\"name\":\"n$i\",\"instanceType\":\"p5.48xlarge\",\"gpuModel\":\"NVIDIA-H100-80GB-HBM3\",\"gpuCount\":8,\"memoryMiB\":81920}"
	done
	api POST /api/v1/agent/register "{\"clusterName\":\"bench-1\",\"nodes\":[$nodes]}" "$token" >/dev/null
	api POST /api/v1/slice-workspace '{"workspaceName":"bench","clusters":["bench-1"],"namespaces":["bench"]}' >/dev/null
	if [ "$1" != sqlite ] && [ "$PG_TURN_DELAY_MS" != 0 ]; then
		psql_egs "CREATE FUNCTION bench_turn_delay() RETURNS trigger LANGUAGE plpgsql AS
			\$\$ BEGIN PERFORM pg_sleep($PG_TURN_DELAY_MS / 1000.0); RETURN NEW; END \$\$;
			CREATE TRIGGER bench_turn_delay BEFORE UPDATE ON meta FOR EACH ROW
			WHEN (NEW.key = 'leader.turn') EXECUTE FUNCTION bench_turn_delay()"
	fi
}

ROWS=()
BROKEN=0
STMTS="SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
	WHERE d.datname = 'egs' AND s.query NOT LIKE '%pg_stat%'"
for round in $(seq "$ROUNDS"); do
	stores=
	[ "$SQLITE" = 1 ] && stores=sqlite
	if [ -z "$EGSD_BASE" ]; then stores+=" postgres"
	elif [ $((round % 2)) = 1 ]; then stores+=" postgres-base postgres"
	else stores+=" postgres postgres-base"; fi
	[ "$PG_COMPARE" = 1 ] && stores+=" postgres-tuned"
	for store in $stores; do
		start_egsd "$store" "$round"
		x0=0 s0=0 backend=
		if [ "$store" != sqlite ]; then
			x0=$(psql_egs "$PG_COUNTERS")
			[ "$PG_STMTS" = 1 ] && s0=$(psql_egs "$STMTS")
			backend=$(psql_egs "SELECT pid FROM pg_stat_activity WHERE datname = 'egs' AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
			[ "$(echo "$backend" | wc -w)" = 1 ] || die "expected one PostgreSQL session of egsd, found: $backend"
		fi
		c0=$(cpu_s "$EGSD_PID") b0=$([ -n "$backend" ] && cpu_s "$backend" || echo 0)
		out=$WORK/wrk-$store-$round.txt
		log "round $round, $store: wrk -t$THREADS -c$CONNS -d$DURATION -s create.lua"
		wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "Authorization: Bearer $ADMIN_KEY" \
			-s "$ROOT/bench/api/create.lua" "$URL/api/v1/gpr" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
		ok=$(($(field requests "$out") - $(field non200 "$out")))
		c1=$(cpu_s "$EGSD_PID") b1=$([ -n "$backend" ] && cpu_s "$backend" || echo 0)
		cpu=$(awk -v a="$ok" -v c0="$c0" -v c1="$c1" -v b0="$b0" -v b1="$b1" -v pg="$backend" 'BEGIN { n = (a > 0 ? a : 1)
			printf "%.0f | %s", (c1 - c0) * 1e6 / n, (pg != "" ? sprintf("%.0f", (b1 - b0) * 1e6 / n) : "-") }')
		kill -9 "$EGSD_PID"
		wait "$EGSD_PID" 2>/dev/null || true
		EGSD_PID=
		per_commit= stmts=
		if [ "$store" != sqlite ]; then
			# A backend may hold its statistics up to 10 s; it flushes them when it exits, i.e. once
			# PostgreSQL saw egsd's connection close.
			for _ in $(seq 100); do
				[ "$(psql_egs "SELECT count(*) FROM pg_stat_activity WHERE datname = 'egs' AND pid <> pg_backend_pid()")" = 0 ] && break
				sleep 0.1
			done
			x1=$(psql_egs "$PG_COUNTERS")
			stmts=-
			[ "$PG_STMTS" = 1 ] && stmts=$(awk -v a="$ok" -v s0="$s0" -v s1="$(psql_egs "$STMTS")" 'BEGIN { printf "%.3f", (s1 - s0) / (a > 0 ? a : 1) }')
			per_commit=$(awk -v a="$ok" -v x0="$x0" -v x1="$x1" 'BEGIN { split(x0, p, "|"); split(x1, q, "|");
				d = q[1] - p[1]; n = (a > 0 ? a : 1)
				printf "%.1f | %.1f | %.0f | %.2f", (d > 0 ? a / d : 0), (q[2] - p[2]) / n, (q[3] - p[3]) / n, (q[4] - p[4]) / n }')
		fi
		if [ "$store" != sqlite ]; then
			stored=$(psql_egs "SELECT count(*) FROM gprs WHERE name = 'bench'")
		else
			stored=$(sqlite3 "$DATA/egs.db" "SELECT count(*) FROM gprs WHERE name = 'bench'")
		fi
		verdict=ok
		if [ "$stored" -lt "$ok" ]; then verdict="LOST $((ok - stored))"; BROKEN=1; fi
		ROWS+=("| $round | $store | $(field rps "$out") | $(awk -v u="$(field p50_us "$out")" 'BEGIN{printf "%.2f", u/1000}') | $(awk -v u="$(field p99_us "$out")" 'BEGIN{printf "%.2f", u/1000}') | $(field non200 "$out") / $(field errors "$out") | $ok acknowledged, $stored stored: $verdict | $cpu | ${per_commit:-- | - | - | -} | ${stmts:--} |")
	done
done

echo
echo "### durable GPR creates, SQLite and PostgreSQL, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "PostgreSQL: stock settings (shared_buffers=64MB)$([ "$PG_COMPARE" = 1 ] && echo "; postgres-tuned rows: ${PG_TUNED[*]}")$([ "$PG_TURN_DELAY_MS" != 0 ] && echo "; every turn $PG_TURN_DELAY_MS ms longer in the server (PG_TURN_DELAY_MS)")."
echo "egsd $BUILD$([ -n "$EGSD_BASE" ] && echo " (postgres-base: $EGSD_BASE)") --quiet; wrk -t$THREADS -c$CONNS -d$DURATION, POST /api/v1/gpr; $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| round | store | creates/s | p50 ms | p99 ms | non-200 / socket errors | after SIGKILL | egsd CPU us per create | PostgreSQL backend CPU us per create | creates per commit | rows per create | WAL bytes per create | full-page images per create | statements per create |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
exit "$BROKEN"
