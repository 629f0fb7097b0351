#!/bin/bash
# steps.sh: the instructions of every step of the runs egsd makes in the deep queue, counted by
# callgrind one step at a time (a step's CPU time on this shared virtual machine also counts the
# host's jumps of the thread CPU clock: bench/planner/cpu_clock.c; its instructions do not).
# bench_plan's step-runs mode makes the first walk, then RUNS runs after CREATES (64) creates at random
# priorities each, in steps of at most 256 GPRs (egsd's largest), each step a call of one_step();
# callgrind counts only inside one_step and dumps after each call, so dump n is step n.
# Usage: bench/planner/steps.sh [RUNS (8)]; knobs NODES [10000], QUEUED [100000], WORKSPACES [16]
# (deep.sh's), CREATES [64] a run, BENCH_PLAN [build/bench/bench_plan] (`make build/bench/bench_plan` first).
# Prints, per kind of step, how many, the median and the most instructions, then the 5 largest steps.
set -euo pipefail
RUNS=${1:-8}
BIN=${BENCH_PLAN:-build/bench/bench_plan}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg" --toggle-collect=one_step --dump-after=one_step \
	--dump-instr=no "$BIN" "${NODES:-10000}" "${QUEUED:-100000}" 20 1 "${WORKSPACES:-16}" "$RUNS" "${CREATES:-64}" \
	>"$DIR/pieces" 2>"$DIR/valgrind.log"
n=$(wc -l <"$DIR/pieces")
for ((i = 1; i <= n; i++)); do
	printf '%s\t%s\n' "$(sed -n 's/^totals: //p' "$DIR/cg.$i")" "$(sed -n "${i}p" "$DIR/pieces" | cut -d' ' -f3-)"
done >"$DIR/steps"
echo "$n steps of $RUNS runs after ${CREATES:-64} creates each (bench_plan ${NODES:-10000} ${QUEUED:-100000} 20 1 ${WORKSPACES:-16}), instructions per step:"
printf '  %-48s %6s %12s %12s\n' kind steps median most
cut -f2 "$DIR/steps" | sort -u | while IFS= read -r kind; do
	awk -F'\t' -v k="$kind" '$2 == k { print $1 }' "$DIR/steps" | sort -n |
		awk -v k="$kind" '{ v[NR] = $1 } END { printf "  %-48s %6d %12d %12d\n", k, NR, v[int((NR + 1) / 2)], v[NR] }'
done
echo "the 5 largest steps (step, instructions, kind):"
awk -F'\t' '{ printf "%d\t%s\t%s\n", NR, $1, $2 }' "$DIR/steps" | sort -t$'\t' -k2,2nr | head -5 | sed 's/^/  /'
