#!/bin/sh
# tests/nvml-real.sh: build egs-agent and print what its NVML backend reads on this machine, one JSON
# line per GPU (name, UUID, memory, power and limit, temperature, utilization, ECC, XIDs, processes,
# node health).  Meant for a machine with NVIDIA GPUs and a driver; nothing else is needed (no CUDA).
#
#   tests/nvml-real.sh                     # the driver's libnvidia-ml.so.1
#   EGS_NVML_LIBRARY=/path/libnvidia-ml.so.1 tests/nvml-real.sh
#   tests/nvml-real.sh --fake              # against tests/fake-nvml (what the unit tests use)
#
# Exit status 0 when every GPU was read (at least its memory), 1 otherwise.  XIDs are counted from the
# probe's start, as NVML delivers events only to a set registered before they happen.
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fake" ]; then
	make -s build/lib/libnvidia-ml-fake.so >&2
	EGS_NVML_LIBRARY="$PWD/build/lib/libnvidia-ml-fake.so"
	export EGS_NVML_LIBRARY
fi
if ! pkg-config --exists libevent jansson sqlite3 libsodium libcurl yaml-0.1 libpq 2>/dev/null; then
	./scripts/deps.sh >&2
fi
make -s build/bin/egs-agent >&2
echo "# nvidia-smi: $(command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 || echo absent)" >&2
out=$(./build/bin/egs-agent --devices nvml --probe --log-level warn)
printf '%s\n' "$out"
# Every line must name a GPU UUID and hold at least the memory reading.
printf '%s\n' "$out" | python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin if l.strip()]
bad = [l["uuid"] for l in lines if "memTotalMiB" not in l and not l.get("lost")]
print("# %d GPUs read; missing memory on: %s" % (len(lines), bad or "none"), file=sys.stderr)
sys.exit(1 if not lines or bad else 0)'
