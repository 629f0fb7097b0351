#!/usr/bin/env python3
"""A follower's full load and its reads meanwhile (docs/ha.md): a gap in the change log makes a follower
load the whole store; this measures how long that takes and how its reads fare in the meantime, for
this build and, with BASE_EGSD=path, another egsd binary in the same invocation (e.g. main's build
before the load moved off the follower's loop).

    make all && BASE_EGSD=/path/to/old/egsd /usr/bin/python3 bench/ha/gap.py

Per binary and round, on a database of its own in one throwaway PostgreSQL (tests/api/pgserver.py):
a leader with a cluster, a workspace and STORE GPRs copied into the store by SQL (Complete, finished
now: in memory under the default retention), loaded by a restart, and a follower that caught up.
The follower is stopped (SIGSTOP) while the leader commits two turns and the change log loses the
first of them, then continued: its next look finds the gap and loads in full.  From the continue on,
a reader sends GET /api/v1/clusters to the follower, one at a time (10 ms apart), until /healthz
counts the full load.  Reported: the time from the continue until the load was in, how many reads
were answered meanwhile, their median and longest latency (a load on the loop holds every read
until it ends), when the longest was sent (s after the continue) and how many took over 100 ms.

Knobs: STORE [200000], ROUNDS [2], BASE_EGSD, BENCH_TMP [/var/tmp].
"""
import os
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from follow import filled_pair, rounds  # noqa: E402
from run import call, health  # noqa: E402

STORE = int(os.environ.get("STORE", "200000"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))


def reader(follower, key, stop, out):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            status = call(follower.port, "GET", "/api/v1/clusters", key, timeout=300)[0]
        except OSError:
            status = -1
        out.append((t0, time.monotonic() - t0, status))
        stop.wait(0.01)


def full_loads(follower):
    h = health(follower.port)
    return h.get("fullLoads", -1) if h else -1


def one(pg, work, name, binary, rnd):
    with filled_pair(pg, work, "g", name, binary, rnd, STORE) as (db, leader, follower):
        loads = full_loads(follower)
        follower.proc.send_signal(signal.SIGSTOP)
        try:
            first = int(pg.psql("SELECT value FROM meta WHERE key = 'leader.turn'", db=db)) + 1
            for i in range(2):
                assert call(leader.port, "POST", "/api/v1/clusters", leader.key, {"clusterName": "gap-%d" % i})[0] == 200
            pg.psql("DELETE FROM changes WHERE turn = %d" % first, db=db)
        finally:
            follower.proc.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        stop, reads = threading.Event(), []
        th = threading.Thread(target=reader, args=(follower, leader.key, stop, reads))
        th.start()
        while full_loads(follower) <= loads:
            assert time.monotonic() - t0 < 300, "the follower did not load"
            time.sleep(0.01)
        took = time.monotonic() - t0
        stop.set()
        th.join(300)
        during = [(t, lat, st) for (t, lat, st) in reads if t < t0 + took]
        lats = [lat for _, lat, _ in during]
        worst = max(during, key=lambda r: r[1]) if during else (t0, -1, 0)
        return {"egsd": name, "round": rnd, "load_s": took, "reads": len(during),
                "non200": sum(1 for _, _, st in during if st != 200),
                "p50_ms": 1000 * statistics.median(lats) if lats else -1, "max_ms": 1000 * max(lats) if lats else -1,
                "max_at_s": worst[0] - t0, "over_100ms": sum(1 for lat in lats if lat > 0.1)}


def main():
    rows = rounds("egs-bench-gap.", one, ROUNDS)
    print("| egsd | round | gap to loaded s | reads answered meanwhile | read median / max ms | the max sent at s "
          "| reads over 100 ms | non-200 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %d | %.2f | %d | %.1f / %.1f | %.2f | %d | %d |" % (
            r["egsd"], r["round"], r["load_s"], r["reads"], r["p50_ms"], r["max_ms"], r["max_at_s"], r["over_100ms"],
            r["non200"]))
    print("\n%d GPRs in the store; load average %s" % (STORE, " ".join(open("/proc/loadavg").read().split()[:3])))


if __name__ == "__main__":
    main()
