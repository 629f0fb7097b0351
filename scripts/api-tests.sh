#!/bin/sh
# Runs the whole API suite twice at once: against egsd on SQLite (the default) and on PostgreSQL
# (EGS_TEST_STORE=postgres: one throwaway server per pytest process, tests/api/pgserver.py).  The
# PostgreSQL run's output goes to build/api-postgres.log and is printed when it fails.  Extra
# arguments go to both pytest runs (e.g. a test file).  Exits non-zero when either run failed.
#
# Each run spreads its test files over EGS_TEST_WORKERS pytest-xdist workers (default 4; Debian's
# python3-pytest-xdist, installed by scripts/deps.sh; without it each run is one process as before).
# A file stays on one worker (--dist loadfile), so module fixtures and a file's order hold.  The
# tests mostly wait (for egsd, agents, fsyncs and timers: a run uses about a tenth of a core), so
# eight workers on two cores cut the suite's wall time about three times.
#
# Ports: the PostgreSQL run draws from 20000-30999, the SQLite run from 10000-19999, so the two never
# share one, nor meet a port of an outgoing connection (the kernel's ephemeral range, 32768 and up,
# which the portal tests that `make test` runs beside this draw from); the workers of one run split
# its range (tests/api/ports.py).
set -u
cd "$(dirname "$0")/.."
mkdir -p build
log=build/api-postgres.log
par="-x"
if /usr/bin/python3 -c "import xdist" 2>/dev/null; then
	# Without -x: xdist stops a failed run by killing the workers still busy after 10 s, and the
	# egsd, agents and PostgreSQL servers of their tests would outlive them.
	par="-n ${EGS_TEST_WORKERS:-4} --dist loadfile"
elif [ -n "${EGS_TEST_WORKERS:-}" ]; then
	echo "api-tests.sh: EGS_TEST_WORKERS is set but pytest-xdist is missing (apt-get install python3-pytest-xdist)" >&2
fi
# shellcheck disable=SC2086  # $par is split on purpose
(cd tests/api && EGS_TEST_STORE=postgres EGS_TEST_PORT_RANGE=20000-30999 \
	/usr/bin/python3 -m pytest -q -p no:cacheprovider $par "$@" . >"../../$log" 2>&1) &
pg=$!
# shellcheck disable=SC2086
(cd tests/api && EGS_TEST_PORT_RANGE=10000-19999 /usr/bin/python3 -m pytest -q -p no:cacheprovider $par "$@" .)
sqlite_rc=$?
wait $pg
pg_rc=$?
echo "== API tests on PostgreSQL (exit $pg_rc):"
if [ $pg_rc -ne 0 ]; then cat "$log"; else tail -n 1 "$log"; fi
[ $sqlite_rc -eq 0 ] && [ $pg_rc -eq 0 ]
