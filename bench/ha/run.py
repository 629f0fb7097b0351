#!/usr/bin/env python3
"""Several egsd over one PostgreSQL database (docs/ha.md): read throughput on a follower beside the
leader's in the same run, and failover time over KILLS kills.

    make all && /usr/bin/python3 bench/ha/run.py

One throwaway PostgreSQL (tests/api/pgserver.py: initdb and pg_ctl in the work directory, unix
socket, fsync and synchronous_commit on) serves the run.

Reads: a leader and a follower on database "egs", a cluster of 8 nodes (registered as an agent
would), a workspace and GPRS GPRs created through the leader; once the follower has caught up
(/healthz behindTurns 0), wrk GET /api/v1/gpr?gprId=... (bench/api/read.lua, rotating over the
ids) for DURATION at CONNS connections, against the leader, then the follower, ROUNDS times.

Failover: two egsd, each under a loop of this script that restarts it when it dies (a supervisor).
KILLS times: kill -9 whichever leads, and time from the kill to the first write (POST
/api/v1/clusters, sent to the other egsd every 10 ms; it forwards while it follows and answers 503
while nobody leads) that is acknowledged with 200.  The killed egsd is restarted (it follows) before
the next kill.  Prints the median and the maximum.

Knobs (environment): DURATION [10s], CONNS [32], THREADS [2], GPRS [200], ROUNDS [2], KILLS [20],
BENCH_TMP [/var/tmp: a disk the postgres user can enter].
"""
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
from pgserver import PgServer  # noqa: E402

DURATION = os.environ.get("DURATION", "10s")
CONNS = int(os.environ.get("CONNS", "32"))
THREADS = int(os.environ.get("THREADS", "2"))
GPRS = int(os.environ.get("GPRS", "200"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
KILLS = int(os.environ.get("KILLS", "20"))


def log(msg):
    print("== " + msg, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(port, method, path, key=None, body=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hdrs = {"Content-Type": "application/json"}
    if key:
        hdrs["Authorization"] = "Bearer " + key
    c.request(method, path, json.dumps(body) if body is not None else None, hdrs)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


def health(port):
    try:
        status, doc = call(port, "GET", "/healthz", timeout=2)
        return doc["data"] if status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None


class Egsd:
    def __init__(self, work, name, url, key_from=None, binary=None):
        self.binary = binary or os.path.join(ROOT, "build", "bin", "egsd")
        self.data = os.path.join(work, name)
        self.port = free_port()
        self.url = url
        os.makedirs(self.data, exist_ok=True)
        if key_from:
            shutil.copy(os.path.join(key_from, "admin.key"), os.path.join(self.data, "admin.key"))
        self.proc = None

    def start(self):
        logf = open(self.data + ".log", "ab")
        self.proc = subprocess.Popen([self.binary, "--listen",
                                      "127.0.0.1:%d" % self.port, "--data", self.data, "--quiet",
                                      "--store-url", self.url], stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            if health(self.port):
                return self
            if self.proc.poll() is not None:
                sys.exit("egsd exited: " + open(self.data + ".log").read()[-2000:])
            time.sleep(0.02)
        sys.exit("egsd did not start")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def key(self):
        with open(os.path.join(self.data, "admin.key")) as f:
            return f.read().strip()


def setup(leader):
    key = leader.key
    status, doc = call(leader.port, "POST", "/api/v1/clusters", key, {"clusterName": "bench-1"})
    token = doc["data"]["agentToken"]
    nodes = [{"name": "n%d" % i, "instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8,
              "memoryMiB": 81920} for i in range(8)]
    assert call(leader.port, "POST", "/api/v1/agent/register", token, {"clusterName": "bench-1", "nodes": nodes})[0] == 200
    assert call(leader.port, "POST", "/api/v1/slice-workspace", key,
                {"workspaceName": "bench", "clusters": ["bench-1"], "namespaces": ["bench"]})[0] == 200
    ids = []
    for i in range(GPRS):
        status, doc = call(leader.port, "POST", "/api/v1/gpr", key,
                           {"gprName": "r%d" % i, "sliceName": "bench", "numberOfGPUNodes": 1, "numberOfGPUs": 8,
                            "exitDuration": "1h"})
        assert status == 200, doc
        ids.append(doc["data"]["gprId"])
    return ids


def wrk(port, key, ids):
    out = subprocess.run(["wrk", "-t%d" % THREADS, "-c%d" % CONNS, "-d" + DURATION, "--latency", "-H",
                          "Authorization: Bearer " + key, "-s", os.path.join(ROOT, "bench", "api", "read.lua"),
                          "http://127.0.0.1:%d/api/v1/gpr" % port, "--"] + ids,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True).stdout.decode()
    fields = dict(re.findall(r"\b(\w+)=([0-9.]+)", "".join(l for l in out.splitlines() if l.startswith("BENCH"))))
    return fields


def reads(work, url):
    leader = Egsd(work, "reads-a", url).start()
    follower = Egsd(work, "reads-b", url, key_from=leader.data).start()
    try:
        assert health(leader.port)["role"] == "leader" and health(follower.port)["role"] == "follower"
        ids = setup(leader)
        deadline = time.time() + 30
        while health(follower.port)["behindTurns"] != 0 or call(follower.port, "GET", "/api/v1/gpr?gprId=" + ids[-1],
                                                                leader.key)[0] != 200:
            assert time.time() < deadline, "the follower did not catch up"
            time.sleep(0.1)
        rows = []
        for rnd in range(1, ROUNDS + 1):
            for name, e in (("leader", leader), ("follower", follower)):
                log("reads, round %d, %s: wrk -t%d -c%d -d%s" % (rnd, name, THREADS, CONNS, DURATION))
                f = wrk(e.port, leader.key, ids)
                rows.append("| %d | %s | %s | %.2f | %.2f | %s / %s |" % (
                    rnd, name, f.get("rps"), float(f.get("p50_us", 0)) / 1000, float(f.get("p99_us", 0)) / 1000,
                    f.get("non200"), f.get("errors")))
        return rows
    finally:
        leader.kill()
        follower.kill()


def failover(work, url):
    a = Egsd(work, "fo-a", url).start()
    b = Egsd(work, "fo-b", url, key_from=a.data).start()
    pair, key, times = [a, b], a.key, []
    try:
        for i in range(KILLS):
            roles = [(health(e.port) or {}).get("role") for e in pair]
            assert sorted(roles) == ["follower", "leader"], roles
            dead, other = (pair[0], pair[1]) if roles[0] == "leader" else (pair[1], pair[0])
            dead.proc.kill()
            t0 = time.monotonic()
            while True:
                try:
                    status, _ = call(other.port, "POST", "/api/v1/clusters", key, {"clusterName": "kill-%d" % i}, timeout=5)
                except (OSError, http.client.HTTPException):
                    status = None
                if status == 200:
                    break
                assert time.monotonic() - t0 < 30, "no write acknowledged 30 s after the kill"
                time.sleep(0.01)
            times.append(time.monotonic() - t0)
            log("kill %d: a write acknowledged after %.3f s" % (i + 1, times[-1]))
            dead.proc.wait()
            dead.start()  # comes back as a follower
        return times
    finally:
        a.kill()
        b.kill()


def main():
    if not shutil.which("wrk"):
        sys.exit("wrk not found (./scripts/deps.sh installs it)")
    work = tempfile.mkdtemp(prefix="egs-bench-ha.", dir=os.environ.get("BENCH_TMP", "/var/tmp"))
    os.chmod(work, 0o755)  # the postgres user must enter it
    pg = PgServer(base=os.path.join(work, "pg"))
    os.makedirs(pg.base)
    try:
        pg.start()
        url = pg.create_db("egs")
        build = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE).stdout.decode().strip()
        rows = reads(work, url)
        pg.psql("DROP DATABASE egs")
        url = pg.create_db("egs")
        times = failover(work, url)
        load = open("/proc/loadavg").read().split()[:3]
        print("\n### egsd on PostgreSQL: reads on the leader and a follower, failover (%s)\n" %
              time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        print("egsd %s --quiet, one PostgreSQL on a unix socket; %d cores, load average at the end %s.\n" %
              (build, os.cpu_count(), " ".join(load)))
        print("Reads: wrk -t%d -c%d -d%s, GET /api/v1/gpr?gprId= over %d GPRs.\n" % (THREADS, CONNS, DURATION, GPRS))
        print("| round | replica | reads/s | p50 ms | p99 ms | non-200 / socket errors |")
        print("| ---: | --- | ---: | ---: | ---: | ---: |")
        print("\n".join(rows))
        print("\nFailover over %d kill -9 of the leader (kill to the first write acknowledged by the new one): "
              "median %.3f s, max %.3f s, min %.3f s." % (len(times), statistics.median(times), max(times), min(times)))
    finally:
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
