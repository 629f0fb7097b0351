#!/usr/bin/env bash
# Slurm 22.05 as a peer, in the same run as egsd: estimate accuracy and submission rates.
#
#   ./bench/peer-slurm/run.sh          (or `make bench-slurm`, which builds first)
#
# One invocation: installs Slurm from Debian when missing (the packages of the reference recipe), builds
# egsd/egs-agent/egsctl when missing, then peer.py runs, in order,
#   devclock  the accuracy workload as GPRs on egsd --dev-clock with a real egs-agent, clock in 1 s steps
#   big       BIG one-GPU 10-minute GPRs on 8 one-GPU nodes, dev clock: the last one's estimate vs its start
#   realtime  the accuracy workload, at the same moment, as sbatch jobs to Slurm (1 node x 8 GPUs and
#             8 nodes x 1 GPU, two slurmctld) and as GPRs to egsd on the real clock with a real egs-agent
#   rates     RATE_N submissions each: sbatch, curl, egsctl (1/4/8 parallel submitters), a keep-alive
#             http.client loop and the SDK's request_gpu loop
# and prints a markdown table (also to $RESULTS if set).  Every daemon it started is stopped at the end
# (munged only if it started it), also on Ctrl-C.  About 12 minutes with the defaults.
#
# Environment (defaults in brackets): JOBS [32] accuracy jobs, BIG [2000] (0 skips), RATE_N [2000],
# PARS ["1 4 8"] parallel submitters, MODES ["single multi"] Slurm setups for accuracy, RATE_MODE
# [single] the Slurm setup for rates, PHASES ["devclock big realtime rates"], SLURM_BASE
# [/tmp/egs-peer-slurm], SINGLE_PORT [16817], MULTI_PORT [16827], KEEP [unset; 1 keeps the work dir].
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/peer-slurm
die() { echo "run.sh: $*" >&2; exit 1; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)

"$HERE/slurm.sh" install
for b in egsd egs-agent egsctl; do
	if [ ! -x "$ROOT/build/bin/$b" ]; then
		echo "== building ($ROOT/build/bin/$b missing)" >&2
		nice make -C "$ROOT" -s all >&2
		break
	fi
done
command -v curl >/dev/null || die "curl not found"

cleanup() {
	local rc=$?
	"$HERE/slurm.sh" stop single >/dev/null 2>&1 || true
	"$HERE/slurm.sh" stop multi >/dev/null 2>&1 || true
	"$HERE/slurm.sh" stop-munge >/dev/null 2>&1 || true
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "$ROOT" status --porcelain -- src 2>/dev/null || true)" ]; then build+="+dirty src"; fi
build+=" built $(date -u -r "$ROOT/build/bin/egsd" '+%Y-%m-%d %H:%M UTC')"
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), kernel $(uname -r), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
slurm="Slurm $(dpkg-query -W -f '${Version}' slurmctld 2>/dev/null || echo ?) (Debian package), localhost, munge auth, no slurmdbd"
"$PY" "$HERE/peer.py" --build "$build" --machine "$machine" --slurm-version "$slurm" "$@"
