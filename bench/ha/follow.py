#!/usr/bin/env python3
"""A follower under a create burst on the leader (docs/ha.md): its CPU per committed leader turn and how
far behind the leader it is, for this build and, with BASE_EGSD=path, another egsd binary in the same
invocation (e.g. main's build before the change log: a full load per leader turn).

    make all && BASE_EGSD=/path/to/old/egsd /usr/bin/python3 bench/ha/follow.py

Per binary and round, on a database of its own in one throwaway PostgreSQL (tests/api/pgserver.py):
a leader with a cluster of 8 nodes and a workspace, STORE GPRs copied into the store by SQL (Complete,
finished now: in memory under the default retention) and loaded by a restart, and a follower.  Then wrk
(bench/api/create.lua, CONNS connections, DURATION) creates GPRs on the leader while a probe creates
one GPR on the leader every 250 ms and times how long until the follower answers it (lag).  Reported:
the leader's committed turns (meta leader.turn), the follower's CPU seconds over the burst and until
it caught up (utime + stime from /proc), CPU per turn, the probe's lag (median, max), the time from
the end of the burst until the follower had every turn, and its full loads and catch-ups (/healthz).

Knobs: STORE [20000], DURATION [10s], CONNS [16], ROUNDS [2], BASE_EGSD, BENCH_TMP [/var/tmp].
"""
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import ROOT, Egsd, call, health, log  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
from pgserver import PgServer  # noqa: E402

STORE = int(os.environ.get("STORE", "20000"))
DURATION = os.environ.get("DURATION", "10s")
CONNS = int(os.environ.get("CONNS", "16"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fill(pg, db, n):
    """n Complete GPRs, copies of the store's one GPR with their own ids, names and sequence numbers."""
    pg.psql("INSERT INTO gprs SELECT (jsonb_populate_record(g, jsonb_build_object("
            "'id', 'gpr-' || lpad(to_hex(1000000 + i), 8, '0') || '-00', 'name', 'bulk-' || i, "
            "'seq', 1000000 + i, 'state', 'Complete', 'start_ts', g.created_at, "
            "'completion_ts', g.created_at + 60))).* FROM gprs g, generate_series(1, %d) i" % n, db=db)


def setup(leader):
    key = leader.key
    token = call(leader.port, "POST", "/api/v1/clusters", key, {"clusterName": "bench-1"})[1]["data"]["agentToken"]
    nodes = [{"name": "n%d" % i, "instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8,
              "memoryMiB": 81920} for i in range(8)]
    assert call(leader.port, "POST", "/api/v1/agent/register", token, {"clusterName": "bench-1", "nodes": nodes})[0] == 200
    assert call(leader.port, "POST", "/api/v1/slice-workspace", key,
                {"workspaceName": "bench", "clusters": ["bench-1"], "namespaces": ["bench"]})[0] == 200
    assert call(leader.port, "POST", "/api/v1/gpr", key, {"gprName": "seed", "sliceName": "bench", "numberOfGPUNodes": 1,
                                                           "numberOfGPUs": 8, "exitDuration": "1h"})[0] == 200


def caught_up(follower, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        h = health(follower.port)
        if h and h.get("behindTurns") == 0 and h.get("syncedAgoMs", 9999) < 500:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise RuntimeError("the follower did not catch up")


def probe(leader, follower, key, stop, lags):
    i = 0
    while not stop.is_set():
        i += 1
        try:
            status, doc = call(leader.port, "POST", "/api/v1/gpr", key, {"gprName": "probe-%d" % i, "sliceName": "bench",
                                                                         "numberOfGPUNodes": 1, "numberOfGPUs": 1,
                                                                         "exitDuration": "1h"}, timeout=30)
            if status != 200:
                continue
            t0, gid = time.monotonic(), doc["data"]["gprId"]
            while call(follower.port, "GET", "/api/v1/gpr?gprId=" + gid, key, timeout=30)[0] != 200:
                time.sleep(0.005)
            lags.append(time.monotonic() - t0)
        except OSError:
            pass
        stop.wait(0.25)


@contextlib.contextmanager
def filled_pair(pg, work, prefix, name, binary, rnd, store):
    """A leader over a fresh database filled with store GPRs (restarted, so it loaded them) and a caught-up
    follower: yields (db, leader, follower), then kills both and drops the database."""
    db = "%s_%s_%d" % (prefix, name, rnd)
    url = pg.create_db(db)
    leader = Egsd(work, "%s%d-a" % (name, rnd), url, binary=binary).start()
    follower = None
    try:
        setup(leader)
        fill(pg, db, store)
        leader.kill()
        leader.start()  # loads the filled store
        follower = Egsd(work, "%s%d-b" % (name, rnd), url, key_from=leader.data, binary=binary).start()
        caught_up(follower)
        yield db, leader, follower
    finally:
        if follower:
            follower.kill()
        leader.kill()
        pg.psql('DROP DATABASE "%s"' % db)


def one(pg, work, name, binary, rnd):
    with filled_pair(pg, work, "f", name, binary, rnd, STORE) as (db, leader, follower):
        turn0 = int(pg.psql("SELECT value FROM meta WHERE key = 'leader.turn'", db=db))
        cpu0 = cpu_s(follower.proc.pid)
        stop, lags = threading.Event(), []
        th = threading.Thread(target=probe, args=(leader, follower, leader.key, stop, lags))
        th.start()
        out = subprocess.run(["wrk", "-t2", "-c%d" % CONNS, "-d" + DURATION, "-H", "Authorization: Bearer " + leader.key,
                              "-s", os.path.join(ROOT, "bench", "api", "create.lua"),
                              "http://127.0.0.1:%d/api/v1/gpr" % leader.port],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
        stop.set()
        th.join(60)
        tail = caught_up(follower)
        cpu = cpu_s(follower.proc.pid) - cpu0
        turns = int(pg.psql("SELECT value FROM meta WHERE key = 'leader.turn'", db=db)) - turn0
        h = health(follower.port)
        rps = next((l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec")), "?")
        return {"egsd": name, "round": rnd, "creates_s": rps, "turns": turns, "cpu_s": cpu,
                "cpu_ms_turn": 1000 * cpu / max(turns, 1), "lag_med": statistics.median(lags) if lags else -1,
                "lag_max": max(lags) if lags else -1, "probes": len(lags), "tail_s": tail,
                "full": h.get("fullLoads", "-"), "applied": h.get("appliedCatchUps", "-")}


def rounds(prefix, one, n):
    """Runs one(pg, work, name, binary, round) for this build (and BASE_EGSD's, alternating which goes
    first) n times over one throwaway PostgreSQL; returns the rows it gave, in order."""
    work = tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("BENCH_TMP", "/var/tmp"))
    os.chmod(work, 0o755)
    binaries = [("this", shutil.copy(os.path.join(ROOT, "build", "bin", "egsd"), os.path.join(work, "egsd")))]
    if os.environ.get("BASE_EGSD"):
        binaries.append(("base", shutil.copy(os.environ["BASE_EGSD"], os.path.join(work, "egsd-base"))))
    pg = PgServer(base=os.path.join(work, "pg"))
    os.makedirs(pg.base)
    rows = []
    try:
        pg.start()
        for rnd in range(1, n + 1):
            for name, binary in (binaries if rnd % 2 else binaries[::-1]):
                r = one(pg, work, name, binary, rnd)
                log(str(r))
                rows.append(r)
    finally:
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main():
    rows = rounds("egs-bench-follow.", one, ROUNDS)
    print("| egsd | round | creates/s | leader turns | follower CPU s | CPU ms per turn | lag median / max s "
          "| caught up after the burst s | full loads / catch-ups |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %d | %s | %d | %.2f | %.2f | %.3f / %.3f (%d probes) | %.2f | %s / %s |" % (
            r["egsd"], r["round"], r["creates_s"], r["turns"], r["cpu_s"], r["cpu_ms_turn"], r["lag_med"], r["lag_max"],
            r["probes"], r["tail_s"], r["full"], r["applied"]))
    print("\n%d GPRs in the store; wrk -c%d -d%s; load average %s" % (
        STORE, CONNS, DURATION, " ".join(open("/proc/loadavg").read().split()[:3])))


if __name__ == "__main__":
    main()
