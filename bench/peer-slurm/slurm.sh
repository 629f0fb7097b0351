#!/usr/bin/env bash
# Start and stop the localhost Slurm 22.05 peers of bench/peer-slurm, after the reference recipe
# (../shared/reference/slurm-peer.md, ../shared/peers/slurm/start.sh and stop.sh), with our own base
# directory and ports so that a peer someone started from the reference (/tmp/slurmpeer, port 6817) is
# left alone.  No systemd, no cgroups, no slurmdbd; fake GPUs are character devices nothing opens.
#
#   slurm.sh install                 apt-get the reference's packages when sbatch/slurmctld are missing
#   slurm.sh start single|multi      generate the config, start munged (if not running), slurmctld, slurmd(s)
#   slurm.sh stop single|multi       kill the daemons of that setup by their pid files
#   slurm.sh stop-munge              kill munged, only if this script started it (marker file)
#   slurm.sh env single|multi        print `export SLURM_CONF=...`
#
# single: one node with 8 GPUs (single.conf.in); multi: 8 nodes with 1 GPU each, one slurmd per node
# (multi.conf.in).  Environment: SLURM_BASE [/tmp/egs-peer-slurm], SINGLE_PORT [16817] (slurmctld;
# slurmd on +1), MULTI_PORT [16827] (slurmctld; slurmd gN on 17100+N), SCHED_PARAMS [the reference's].
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE=${SLURM_BASE:-/tmp/egs-peer-slurm}
SINGLE_PORT=${SINGLE_PORT:-16817}
MULTI_PORT=${MULTI_PORT:-16827}
MULTI_NODE_PORT=${MULTI_NODE_PORT:-17100}
SCHED_PARAMS=${SCHED_PARAMS:-bf_window=43200,bf_max_job_test=3000,bf_resolution=60,bf_interval=10,bf_continue}
HOST=$(hostname -s)

die() { echo "slurm.sh: $*" >&2; exit 1; }

dir_of() { echo "$BASE/$1"; }
nodes_of() { if [ "$1" = single ]; then echo "$HOST"; else echo g0 g1 g2 g3 g4 g5 g6 g7; fi; }

install() {
	if command -v sbatch >/dev/null && [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/munged ]; then
		return 0
	fi
	local sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	echo "== installing Slurm (apt-get install slurm-wlm slurmctld slurmd slurm-client munge)" >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		slurm-wlm slurmctld slurmd slurm-client munge >&2 ||
		{ "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
			--no-install-recommends slurm-wlm slurmctld slurmd slurm-client munge >&2; }
}

gen_conf() { # MODE
	local mode=$1 d
	d=$(dir_of "$mode")
	mkdir -p "$d/state" "$d/run" "$d/log" "$BASE/dev"
	local n
	for n in $(nodes_of "$mode"); do mkdir -p "$d/spool/$n"; done
	# fake GPU device nodes (major 195 = nvidia; nothing opens them)
	local i
	for i in 0 1 2 3 4 5 6 7; do [ -c "$BASE/dev/nvidia$i" ] || mknod "$BASE/dev/nvidia$i" c 195 "$i"; done
	if [ "$mode" = single ]; then
		sed -e "s#@DIR@#$d#g" -e "s#@HOST@#$HOST#g" -e "s#@CLUSTER@#egspeer#" \
			-e "s#@CTLD_PORT@#$SINGLE_PORT#" -e "s#@SLURMD_PORT@#$((SINGLE_PORT + 1))#" \
			-e "s#@SCHED_PARAMS@#$SCHED_PARAMS#" "$HERE/single.conf.in" >"$d/slurm.conf"
		{
			echo "AutoDetect=off"
			echo "NodeName=$HOST Name=gpu File=$BASE/dev/nvidia[0-7]"
		} >"$d/gres.conf"
	else
		local args=()
		for i in 0 1 2 3 4 5 6 7; do args+=(-e "s#@NODE_PORT_0$i@#$((MULTI_NODE_PORT + i))#"); done
		sed -e "s#@DIR@#$d#g" -e "s#@HOST@#$HOST#g" -e "s#@CLUSTER@#egspeermulti#" \
			-e "s#@CTLD_PORT@#$MULTI_PORT#" -e "s#@SLURMD_PORT@#$((MULTI_PORT + 1))#" \
			-e "s#@SCHED_PARAMS@#$SCHED_PARAMS#" "${args[@]}" "$HERE/multi.conf.in" >"$d/slurm.conf"
		{
			echo "AutoDetect=off"
			for i in 0 1 2 3 4 5 6 7; do echo "NodeName=g$i Name=gpu File=$BASE/dev/nvidia$i"; done
		} >"$d/gres.conf"
	fi
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() { # MODE
	local mode=$1 d n
	d=$(dir_of "$mode")
	stop "$mode" >/dev/null 2>&1 || true
	gen_conf "$mode"
	rm -rf "${d:?}/state"/* # a fresh controller: no jobs left from an earlier run
	export SLURM_CONF=$d/slurm.conf
	mkdir -p /run/munge
	chown munge:munge /run/munge
	if ! [ -S /run/munge/munge.socket.2 ] || ! munge -n >/dev/null 2>&1; then
		setsid runuser -u munge -- /usr/sbin/munged -F >"$BASE/munged.out" 2>&1 </dev/null &
		echo $! >"$BASE/munged.started-by-us"
		for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
		munge -n >/dev/null 2>&1 || die "munged did not start: $(cat "$BASE/munged.out")"
	fi
	setsid /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$d/log/slurmctld.out" 2>&1 </dev/null &
	for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
	scontrol ping 2>/dev/null | grep -q UP || die "slurmctld ($mode) did not come up: $(tail -5 "$d/log/slurmctld.log" 2>/dev/null)"
	for n in $(nodes_of "$mode"); do
		setsid /usr/sbin/slurmd -D -N "$n" -f "$SLURM_CONF" >"$d/log/slurmd-$n.out" 2>&1 </dev/null &
	done
	# wait until every node is idle
	local want i idle
	want=$(nodes_of "$mode" | wc -w)
	for i in $(seq 150); do
		idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
		[ "$idle" -ge "$want" ] && break
		sleep 0.2
	done
	[ "$idle" -ge "$want" ] || die "only $idle of $want nodes idle ($mode): $(sinfo -N 2>&1)"
}

stop() { # MODE
	local d f p pid
	d=$(dir_of "$1")
	# cancel every job first, so that no job step (slurmstepd and the job's processes) outlives slurmd
	if alive "$d/run/slurmctld.pid"; then
		SLURM_CONF=$d/slurm.conf scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
		for _ in $(seq 50); do
			[ -z "$(SLURM_CONF=$d/slurm.conf squeue -h -t R,CG -o %i 2>/dev/null)" ] && break
			sleep 0.2
		done
	fi
	local pids=()
	for f in "$d"/run/slurmd-*.pid "$d"/run/slurmctld.pid; do
		[ -f "$f" ] || continue
		p=$(cat "$f")
		kill "$p" 2>/dev/null && pids+=("$p")
		rm -f "$f"
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
	done
	# any job step of this setup still there (slurmd inherited SLURM_CONF=$d/slurm.conf from start):
	# kill its processes, then the step daemon
	for pid in $(pgrep -x slurmstepd || true); do
		if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_CONF=$d/slurm.conf"; then
			pkill -KILL -P "$pid" 2>/dev/null || true
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	true
}

stop_munge() {
	local f=$BASE/munged.started-by-us p
	[ -f "$f" ] || return 0
	# munged -F forks nothing; runuser is its parent.  Kill the daemon by its own pid file when there.
	p=$(cat /run/munge/munged.pid 2>/dev/null || cat "$f")
	kill "$p" 2>/dev/null || true
	rm -f "$f"
}

case ${1:-} in
install) install ;;
start) start "${2:?mode}" ;;
stop) stop "${2:?mode}" ;;
stop-munge) stop_munge ;;
env) echo "export SLURM_CONF=$(dir_of "${2:?mode}")/slurm.conf" ;;
*) die "usage: slurm.sh install|start MODE|stop MODE|stop-munge|env MODE" ;;
esac
