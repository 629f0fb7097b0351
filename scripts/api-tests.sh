#!/bin/sh
# Runs the whole API suite twice at once: against egsd on SQLite (the default) and on PostgreSQL
# (EGS_TEST_STORE=postgres: one throwaway server for the run, tests/api/pgserver.py).  The
# PostgreSQL run's output goes to build/api-postgres.log and is printed when it fails.  Extra
# arguments go to both pytest runs (e.g. a test file).  The PostgreSQL run draws its ports from
# 20000-30999, the SQLite run from the kernel's ephemeral range, so the two never share one
# (tests/api/ports.py).  Exits non-zero when either run failed.
set -u
cd "$(dirname "$0")/.."
mkdir -p build
log=build/api-postgres.log
(cd tests/api && EGS_TEST_STORE=postgres EGS_TEST_PORT_RANGE=20000-30999 /usr/bin/python3 -m pytest -q -x -p no:cacheprovider "$@" . >"../../$log" 2>&1) &
pg=$!
(cd tests/api && /usr/bin/python3 -m pytest -q -x -p no:cacheprovider "$@" .)
sqlite_rc=$?
wait $pg
pg_rc=$?
echo "== API tests on PostgreSQL (exit $pg_rc):"
if [ $pg_rc -ne 0 ]; then cat "$log"; else tail -n 1 "$log"; fi
[ $sqlite_rc -eq 0 ] && [ $pg_rc -eq 0 ]
