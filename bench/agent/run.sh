#!/bin/sh
# Footprint benchmark of egs-agent (bench/agent/footprint.py): builds egsd, egs-agent and the fake
# libnvidia-ml.so, then measures one agent with 8 GPUs sampled every second.  DURATION (seconds,
# default 60), WARMUP (5) and KEEP=1 (keep the work directory) are passed through.
set -eu
cd "$(dirname "$0")/../.."
make -s all build/lib/libnvidia-ml-fake.so >&2
exec python3 bench/agent/footprint.py
