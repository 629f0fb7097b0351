#!/usr/bin/env python3
"""Slurm 22.05 and egsd in the same run: estimate accuracy and submission rates (bench/peer-slurm).

Run it through run.sh (which installs Slurm when missing and builds the binaries); this file assumes
both are there.  It starts everything it measures, stops everything it started, and prints markdown.

Phases (each prints progress on stderr):
  1. egsd --dev-clock: the accuracy workload as GPRs, the clock driven in 1 s steps; then the big case
     (BIG GPRs of 10 minutes on 8 one-GPU nodes; the last one's estimate against its start).
  2. Real time, all at once: the same workload as sbatch jobs to Slurm with 1 node x 8 GPUs and to
     Slurm with 8 nodes x 1 GPU, and as GPRs to an egsd on the real clock with a real egs-agent.
     Estimates: `squeue --start` after a backfill pass; estimatedStartTime.  Actual starts: each job's
     own `date +%s.%N`; the agent's --on-attach hook's `date +%s.%N`.
  3. Submission rates: sbatch against curl, egsctl, a keep-alive http.client loop and the SDK.
"""
import argparse
import calendar
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("EGS_BIN", os.path.join(ROOT, "build", "bin"))
SLURM_SH = os.path.join(HERE, "slurm.sh")
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

DEFAULT_SCHED = "bf_window=43200,bf_max_job_test=3000,bf_resolution=60,bf_interval=10,bf_continue"  # slurm.sh's
PROCS = []  # every process we started and must stop


def log(msg):
    sys.stderr.write("== %s %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rfc3339(s):
    """'2026-11-23T04:03:48Z' (fractions allowed) -> epoch seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$", s or "")
    if not m:
        return None
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + float(m.group(2) or 0)


def slurm_time(s):
    """squeue's %S '2026-11-23T04:05:46' (local time) -> epoch seconds; None for N/A."""
    try:
        return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


# ---------------------------------------------------------------- egsd, egs-agent and a JSON client

class Api:
    """One keep-alive HTTP/1.1 connection with a bearer credential."""

    def __init__(self, port, token):
        self.port, self.token, self.conn = port, token, None

    def call(self, method, path, body=None):
        hdrs = {"Content-Type": "application/json", "Authorization": "Bearer " + self.token}
        data = json.dumps(body) if body is not None else None
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                self.conn.request(method, path, body=data, headers=hdrs)
                resp = self.conn.getresponse()
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def ok(self, method, path, body=None):
        status, doc = self.call(method, path, body)
        if status != 200:
            raise RuntimeError("%s %s -> %s %s" % (method, path, status, doc))
        return doc["data"]


class Egs:
    """egsd (optionally --dev-clock) with one cluster 'peer' of NODES one-GPU nodes served by a real
    egs-agent over a mock devices file.  hook_file: the agent's --on-attach hook appends
    '<gprId> <node> <date +%s.%N>' there."""

    SHAPE = {"instanceType": "gpu-1x", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 1, "memoryMiB": 81920}

    def __init__(self, work, name, dev_clock, nodes=8, hook_file=None, quiet=False):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        args = [os.path.join(BIN, "egsd"), "--listen", "127.0.0.1:%d" % self.port, "--data",
                os.path.join(self.dir, "data")] + (["--dev-clock"] if dev_clock else []) + (["--quiet"] if quiet else [])
        os.makedirs(os.path.join(self.dir, "data"))
        self.egsd = spawn(args, os.path.join(self.dir, "egsd.log"))
        deadline = time.time() + 10
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.egsd.poll() is not None or time.time() > deadline:
                raise RuntimeError("egsd did not start: " + open(os.path.join(self.dir, "egsd.log")).read())
            time.sleep(0.02)
        self.key = open(os.path.join(self.dir, "data", "admin.key")).read().strip()
        self.api = Api(self.port, self.key)
        token = self.api.ok("POST", "/api/v1/clusters", {"clusterName": "peer", "apiServer": "https://127.0.0.1:6443"})["agentToken"]
        with open(os.path.join(self.dir, "token"), "w") as f:
            f.write(token + "\n")
        os.chmod(os.path.join(self.dir, "token"), 0o600)
        with open(os.path.join(self.dir, "devices.yaml"), "w") as f:
            f.write("nodes:\n")
            for i in range(nodes):
                f.write("  - name: n%d\n" % i + "".join("    %s: %s\n" % kv for kv in self.SHAPE.items()))
        args = [os.path.join(BIN, "egs-agent"), "--server", self.url, "--cluster", "peer", "--token-file",
                os.path.join(self.dir, "token"), "--devices", os.path.join(self.dir, "devices.yaml"),
                "--backend", "local", "--state-dir", os.path.join(self.dir, "agent-state"), "--log-level", "warn"]
        if hook_file:
            args += ["--on-attach", 'echo "$EGS_GPR_ID $EGS_NODE $(date +%%s.%%N)" >> %s' % hook_file]
        self.agent = spawn(args, os.path.join(self.dir, "agent.log"))
        deadline = time.time() + 20
        while True:
            items = self.api.ok("GET", "/api/v1/inventory/list")["items"]
            if sum(1 for n in items if n["nodeHealth"] == "Healthy") >= nodes:
                break
            if time.time() > deadline:
                raise RuntimeError("agent nodes not healthy: %s" % items)
            time.sleep(0.05)

    def workspaces(self, names):
        for w in names:
            self.api.ok("POST", "/api/v1/slice-workspace", {"workspaceName": w, "clusters": ["peer"],
                                                            "namespaces": [w], "username": "bench",
                                                            "email": "bench@example.com"})

    def gpr(self, name, ws, gpus_nodes, minutes, priority=101):
        return self.api.ok("POST", "/api/v1/gpr", {
            "gprName": name, "sliceName": ws, "clusterName": "peer", "numberOfGPUs": 1,
            "numberOfGPUNodes": gpus_nodes, "exitDuration": "%dm" % minutes, "priority": priority})["gprId"]

    def gprs(self, status=None):
        return self.api.ok("GET", "/api/v1/gpr/list" + ("?status=" + status if status else ""))["items"]

    def advance(self, secs):
        return rfc3339(self.api.ok("POST", "/api/v1/debug/clock", {"advance": "%ds" % secs})["now"])

    def now(self):
        return self.advance(1)  # the dev clock answers its time only when moved

    def stop(self):
        for p in (self.agent, self.egsd):
            stop_proc(p)


def spawn(args, logfile, env=None):
    f = open(logfile, "ab")
    p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    f.close()
    PROCS.append(p)
    return p


def stop_proc(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    if p in PROCS:
        PROCS.remove(p)


# ---------------------------------------------------------------- the workload

def workload(n):
    """n jobs in submission order: (name, gpus, minutes).  1- and 2-minute jobs; every 8th job (the 6th,
    14th, ...) asks for 2 GPUs, so the estimate has to place a wider job behind narrow ones."""
    minutes = [1, 2, 1, 1, 2, 2, 1, 2]
    return [("acc-%03d" % i, 2 if i % 8 == 5 else 1, minutes[(i * 3) % 8]) for i in range(n)]


def stats(rows):
    """rows: list of dict(est, actual, pending).  Metrics over the jobs pending at the snapshot."""
    pend = [r for r in rows if r["pending"]]
    est = [r for r in pend if r["est"] is not None and r["actual"] is not None]
    errs = [r["actual"] - r["est"] for r in est]
    starts = [r["actual"] for r in rows if r["actual"] is not None]
    return {
        "jobs": len(rows), "at_once": len(rows) - len(pend), "pending": len(pend), "with_est": len(est),
        "mae": sum(abs(e) for e in errs) / len(errs) if errs else None,
        "max": max((abs(e) for e in errs), default=None),
        "bias": sum(errs) / len(errs) if errs else None,
        "started": len(starts),
        "last": max(starts) if starts else None,
    }


def dump_jobs(system, rows, t0):
    """Per-job estimates and starts, in seconds after the first submission, to $JOBS_CSV if set."""
    path = os.environ.get("JOBS_CSV")
    if not path:
        return
    new = not os.path.exists(path)
    spec = {n: (g, m) for n, g, m in workload(10000)}
    rel = lambda x: "" if x is None else "%.3f" % (x - t0)
    with open(path, "a") as f:
        if new:
            f.write("system,job,gpus,minutes,pending_at_snapshot,estimate_s,actual_s,error_s\n")
        for r in sorted(rows, key=lambda r: r["name"]):
            g, m = spec[r["name"]]
            err = "" if r["est"] is None or r["actual"] is None else "%.3f" % (r["actual"] - r["est"])
            f.write("%s,%s,%d,%d,%d,%s,%s,%s\n" % (system, r["name"], g, m, r["pending"], rel(r["est"]), rel(r["actual"]), err))


# ---------------------------------------------------------------- phase 1: egsd with the dev clock

def egs_devclock_accuracy(work, jobs):
    log("egsd --dev-clock: %d GPRs on 8 one-GPU nodes, clock driven in 1 s steps" % len(jobs))
    e = Egs(work, "egs-devclock", dev_clock=True)
    try:
        e.workspaces(["ws-%s" % name for name, _, _ in jobs])
        t0 = e.now()
        ids = {}
        for name, gpus, minutes in jobs:
            ids[e.gpr(name, "ws-" + name, gpus, minutes)] = name
        snap = {g["gprId"]: g for g in e.gprs()}
        rows = {gid: {"name": ids[gid], "est": rfc3339(snap[gid]["estimatedStartTime"]),
                      "pending": snap[gid]["status"]["provisioningStatus"] == "Queued", "actual": None}
                for gid in ids}
        now, steps, settle = t0, 0, 0
        while True:
            items = e.gprs()
            if all(g["status"]["provisioningStatus"] in ("Complete", "Error", "Failed", "Cancelled") for g in items):
                break
            busy = [g for g in items if g["status"]["provisioningStatus"] in ("Provisioning", "Releasing")]
            overdue = [g for g in items if g["status"]["provisioningStatus"] == "Queued"
                       and (rfc3339(g["estimatedStartTime"]) or 1e18) <= now]
            if (busy or overdue) and settle < 2000:  # the agent is attaching or detaching: let it finish (10 s at most)
                settle += 1
                time.sleep(0.005)
                continue
            settle = 0
            now = e.advance(1)
            steps += 1
            if steps > 4 * 3600:
                raise RuntimeError("dev-clock run did not finish in 4 virtual hours")
        for g in e.gprs():
            rows[g["gprId"]]["actual"] = rfc3339(g["status"].get("startTimestamp"))
        log("egsd --dev-clock: done after %d clock steps (%d virtual s)" % (steps, now - t0))
        st = stats(list(rows.values()))
        dump_jobs("egs-devclock", list(rows.values()), t0)
        st["last"] = st["last"] - t0 if st["last"] is not None else None
        return st
    finally:
        e.stop()


def egs_devclock_big(work, n, nodes=8, minutes=10):
    log("egsd --dev-clock big case: %d GPRs of %d min on %d one-GPU nodes" % (n, minutes, nodes))
    e = Egs(work, "egs-big", dev_clock=True, nodes=nodes, quiet=True)
    try:
        names = ["big-%05d" % i for i in range(n)]
        e.workspaces(names)
        t0 = e.now()
        ids = [e.gpr(nm, nm, 1, minutes) for nm in names]
        last = ids[-1]
        est = rfc3339(e.api.ok("GET", "/api/v1/gpr?gprId=" + last)["estimatedStartTime"])
        ests = {}
        for g in e.gprs("Queued"):
            ests[g["gprId"]] = rfc3339(g["estimatedStartTime"])
        log("big case: last GPR estimated at +%.1f h; driving the clock from exit to exit" % ((est - t0) / 3600))
        now, steps, deadline = t0, 0, time.time() + 300
        actual = None
        errs = []
        started = {}  # gprId -> start, of every GPR seen provisioned
        while actual is None:
            # Wait for the agent: nothing releasing, nothing attaching, and as many GPRs provisioned as
            # there are nodes (or GPRs left).  Releasing is asked before Provisioning because a detach
            # turns the one into the other: asked the other way round, a GPR could slip between the two.
            done = sum(1 for t in started.values() if t + minutes * 60 <= now)
            want = min(nodes, n - done)
            while True:
                if not e.gprs("Releasing") and not e.gprs("Provisioning") and len(e.gprs("Provisioned")) >= want:
                    break
                time.sleep(0.005)
                if time.time() > deadline:
                    raise RuntimeError("big case: agent did not settle")
            prov = e.gprs("Provisioned")
            for g in prov:
                started[g["gprId"]] = rfc3339(g["status"]["startTimestamp"])
                if g["gprId"] in ests:
                    errs.append(rfc3339(g["status"]["startTimestamp"]) - ests.pop(g["gprId"]))
                if g["gprId"] == last:
                    actual = rfc3339(g["status"]["startTimestamp"])
            if actual is not None:
                break
            if not prov:
                raise RuntimeError("big case: nothing provisioned at +%ds" % (now - t0))
            nxt = min(rfc3339(g["status"]["startTimestamp"]) + minutes * 60 for g in prov)
            now = e.advance(max(1, int(nxt - now)))
            steps += 1
            if time.time() > deadline:
                raise RuntimeError("big case took over 300 s")
        log("big case: last GPR started at +%.2f h after %d clock jumps" % ((actual - t0) / 3600, steps))
        return {"n": n, "est": est - t0, "actual": actual - t0, "checked": len(errs),
                "mae_all": sum(abs(x) for x in errs) / len(errs) if errs else None,
                "max_all": max((abs(x) for x in errs), default=None)}
    finally:
        e.stop()


# ---------------------------------------------------------------- phase 2: real time, Slurm and egsd

def slurm_env(mode):
    out = subprocess.check_output([SLURM_SH, "env", mode], text=True).strip()
    env = dict(os.environ)
    env["SLURM_CONF"] = out.split("=", 1)[1]
    return env


def sh(args, env=None, check=True):
    return subprocess.run(args, env=env, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slurm_submit(mode, env, jobs, startdir):
    ids = {}
    for name, gpus, minutes in jobs:
        shape = ["--gres=gpu:%d" % gpus] if mode == "single" else ["-N", str(gpus), "--gres=gpu:1"]
        # the job uses its whole time limit, as a GPR holds its nodes for its whole exitDuration
        wrap = "date +%%s.%%N > %s/$SLURM_JOB_ID.start; sleep %d" % (startdir, minutes * 60)
        out = sh(["sbatch", "--parsable", "-J", name, "-o", "/dev/null", "-t", str(minutes)] + shape +
                 ["--wrap", wrap], env=env).stdout.strip()
        ids[out.split(";")[0]] = name
    return ids


def sdiag_last_cycle(env):
    """When the last backfill cycle ended (whole seconds) and how long it took (s), from sdiag."""
    sect = sh(["sdiag"], env=env).stdout.split("Backfilling stats", 1)[1]
    when = re.search(r"Last cycle when:.*\((\d+)\)", sect)
    dur = re.search(r"Last cycle:\s*(\d+)", sect)
    return (int(when.group(1)) if when else 0), (int(dur.group(1)) / 1e6 if dur else 0.0)


def slurm_snapshot(envs, ids, t_end):
    """squeue --start per job after a backfill cycle that began after the last submission (t_end), for
    every Slurm at once (the backfill runs every bf_interval=10 s when something changed).
    Returns {mode: {jobid: (state, estimated start or None)}}."""
    deadline = time.time() + 40

    def fresh(env):
        when, dur = sdiag_last_cycle(env)
        return when - dur >= t_end + 1  # `when` is truncated to the second
    while time.time() < deadline and not all(fresh(env) for env in envs.values()):
        time.sleep(0.2)
    snaps = {}
    for m, env in envs.items():
        if not fresh(env):
            log("Slurm %s: no backfill cycle since the submissions within 40 s" % m)
        out = sh(["squeue", "-h", "-t", "PD,R", "-o", "%i %T %S"], env=env).stdout
        snap = {}
        for line in out.splitlines():
            jid, state, start = line.split()
            if jid in ids[m]:
                snap[jid] = (state, slurm_time(start) if state == "PENDING" else None)
        snaps[m] = snap
    return snaps


def realtime_accuracy(work, jobs, modes):
    log("real time: %d jobs to %s and to egsd (real clock, real agent)" % (len(jobs), " and ".join("Slurm " + m for m in modes)))
    hook = os.path.join(work, "egs-rt-attach.txt")
    e = Egs(work, "egs-realtime", dev_clock=False, hook_file=hook)
    try:
        e.workspaces(["ws-%s" % name for name, _, _ in jobs])
        envs = {m: slurm_env(m) for m in modes}
        startdirs = {}
        for m in modes:
            startdirs[m] = os.path.join(work, "starts-" + m)
            os.makedirs(startdirs[m])
        # submit: egsd first (milliseconds), then each Slurm
        t_sub = {}
        t0 = time.time()
        eids = {}
        for name, gpus, minutes in jobs:
            eids[e.gpr(name, "ws-" + name, gpus, minutes)] = name
        t_sub["egs"] = (t0, time.time())
        esnap = {g["gprId"]: g for g in e.gprs()}
        sids = {}
        for m in modes:
            t1 = time.time()
            sids[m] = slurm_submit(m, envs[m], jobs, startdirs[m])
            t_sub[m] = (t1, time.time())
        ssnap = slurm_snapshot(envs, sids, max(t[1] for t in t_sub.values()))
        for m in modes:
            pend = sum(1 for s, _ in ssnap[m].values() if s == "PENDING")
            got = sum(1 for s, t in ssnap[m].values() if s == "PENDING" and t is not None)
            log("Slurm %s: snapshot after backfill: %d running, %d pending, %d with a start estimate"
                % (m, len(ssnap[m]) - pend, pend, got))
        # wait for everything to finish
        total_min = sum(g * m for _, g, m in jobs) / 8.0
        log("waiting for both systems to run the workload (about %.1f min)" % total_min)
        deadline = time.time() + total_min * 60 * 2 + 180
        while True:
            left = {m: sh(["squeue", "-h", "-o", "%i"], env=envs[m]).stdout.split() for m in modes}
            eleft = [g for g in e.gprs() if g["status"]["provisioningStatus"] not in ("Complete", "Error")]
            if not eleft and not any(left.values()):
                break
            if time.time() > deadline:
                raise RuntimeError("real-time workload did not finish: %s %d GPRs" % (left, len(eleft)))
            time.sleep(2)
        # results
        out = {}
        for m in modes:
            rows = []
            for jid in sids[m]:
                state, est = ssnap[m].get(jid, ("GONE", None))
                p = os.path.join(startdirs[m], jid + ".start")
                actual = float(open(p).read().strip()) if os.path.exists(p) else None
                rows.append({"name": sids[m][jid], "est": est, "actual": actual, "pending": state == "PENDING"})
            st = stats(rows)
            dump_jobs("slurm-" + m, rows, t_sub[m][0])
            st["last"] = st["last"] - t_sub[m][0] if st["last"] is not None else None
            st["submit_s"] = t_sub[m][1] - t_sub[m][0]
            out["slurm-" + m] = st
        hooks = {}
        if os.path.exists(hook):
            for line in open(hook):
                gid, _node, ts = line.split()
                hooks[gid] = min(float(ts), hooks.get(gid, 1e18))
        final = {g["gprId"]: g for g in e.gprs()}
        rows, rows_api = [], []
        for gid in eids:
            est = rfc3339(esnap[gid]["estimatedStartTime"])
            pending = esnap[gid]["status"]["provisioningStatus"] == "Queued"
            rows.append({"name": eids[gid], "est": est, "actual": hooks.get(gid), "pending": pending})
            rows_api.append({"est": est, "actual": rfc3339(final[gid]["status"].get("startTimestamp")), "pending": pending})
        st = stats(rows)
        dump_jobs("egs-realtime", rows, t_sub["egs"][0])
        st["last"] = st["last"] - t_sub["egs"][0] if st["last"] is not None else None
        st["submit_s"] = t_sub["egs"][1] - t_sub["egs"][0]
        st["api"] = stats(rows_api)
        out["egs-realtime"] = st
        return out
    finally:
        e.stop()


# ---------------------------------------------------------------- phase 3: submission rates

GPR_BODY = '{"gprName":"r@@","sliceName":"bench","clusterName":"peer","numberOfGPUs":1,"numberOfGPUNodes":1,"exitDuration":"10m","priority":101}'


def loadavg():
    return open("/proc/loadavg").read().split()[0]


HAVE_PERF = None


def fsync_start(pid):
    """Count the fsync and fdatasync calls of process pid (perf stat on the syscall tracepoints, which
    does not slow the process the way strace would); None when perf cannot."""
    global HAVE_PERF
    if HAVE_PERF is None:
        HAVE_PERF = shutil.which("perf") is not None and subprocess.run(
            ["perf", "stat", "-e", "syscalls:sys_enter_fdatasync", "true"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL).returncode == 0
    if not HAVE_PERF or not pid:
        return None
    out = tempfile.NamedTemporaryFile(delete=False).name
    p = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync",
                          "-p", str(pid), "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return p, out


def fsync_stop(h):
    if h is None:
        return None
    p, out = h
    p.send_signal(signal.SIGINT)
    p.wait(10)
    n = 0
    for line in open(out):
        f = line.split(",")
        if len(f) > 2 and "sys_enter_f" in f[2] and f[0].strip().isdigit():
            n += int(f[0])
    os.unlink(out)
    return n


def cli_rate(label, argv, n, par, env, count_ok, server_pid=None):
    """n submissions, one process each, par at a time (xargs -P), lines 1..n substituted for @@."""
    fs = fsync_start(server_pid)
    outp = tempfile.NamedTemporaryFile("w+", delete=False)
    errp = tempfile.NamedTemporaryFile("w+", delete=False)
    data = "".join("%d\n" % i for i in range(1, n + 1))
    la = loadavg()
    t0 = time.perf_counter()
    p = subprocess.run(["xargs", "-P", str(par), "-I@@"] + argv, input=data, text=True, env=env,
                       stdout=outp, stderr=errp)
    dt = time.perf_counter() - t0
    fsyncs = fsync_stop(fs)
    outp.seek(0)
    ok = count_ok(outp.read())
    errp.seek(0)
    err = errp.read()
    os.unlink(outp.name)
    os.unlink(errp.name)
    if ok != n:
        log("%s: %d of %d succeeded (xargs rc %d): %s" % (label, ok, n, p.returncode, err[-300:]))
    log("%s, %d submitter(s): %d in %.2f s = %.0f/s (load %s)" % (label, par, ok, dt, ok / dt, la))
    return {"label": label, "par": par, "n": n, "ok": ok, "secs": dt, "rate": ok / dt, "load": la, "fsyncs": fsyncs}


def py_rate(label, fn, n, server_pid=None):
    fs = fsync_start(server_pid)
    la = loadavg()
    t0 = time.perf_counter()
    ok = fn(n)
    dt = time.perf_counter() - t0
    fsyncs = fsync_stop(fs)
    log("%s: %d in %.2f s = %.0f/s (load %s)" % (label, ok, dt, ok / dt, la))
    return {"label": label, "par": 1, "n": n, "ok": ok, "secs": dt, "rate": ok / dt, "load": la, "fsyncs": fsyncs}


def slurm_empty(env):
    sh(["scancel", "--user=" + os.environ.get("USER", "root"), "--quiet"], env=env, check=False)
    deadline = time.time() + 60
    while sh(["squeue", "-h", "-o", "%i"], env=env).stdout.strip() and time.time() < deadline:
        time.sleep(0.5)


def egs_empty(e):
    for g in e.gprs("Queued"):
        e.api.ok("DELETE", "/api/v1/gpr", {"gprId": g["gprId"]})


def rates(work, n, pars, mode):
    out = []
    env = slurm_env(mode)
    slurm_empty(env)
    try:
        base = os.environ.get("SLURM_BASE", "/tmp/egs-peer-slurm")
        ctld_pid = int(open(os.path.join(base, mode, "run", "slurmctld.pid")).read())
    except (OSError, ValueError):
        ctld_pid = None
    count_ids = lambda s: sum(1 for line in s.splitlines() if re.match(r"^\d+(;\S+)?$", line))
    for par in pars:
        out.append(cli_rate("sbatch", ["sbatch", "--parsable", "-J", "r@@", "-o", "/dev/null", "--gres=gpu:1",
                                       "-t", "10", "--wrap", "sleep 600"], n, par, env, count_ids, ctld_pid))
        slurm_empty(env)
    # what starting each client process costs by itself (no request), serially
    nb = min(n, 500)
    count_any = lambda s: sum(1 for line in s.splitlines() if line.strip())
    starts = [cli_rate("start only: sbatch --version", ["sbatch", "--version"], nb, 1, env, count_any),
              cli_rate("start only: curl --version", ["curl", "--version"], nb, 1, None, lambda s: s.count("\ncurl ") + s.startswith("curl ")),
              cli_rate("start only: egsctl version", [os.path.join(BIN, "egsctl"), "version"], nb, 1, None, count_any)]
    e = Egs(work, "egs-rates", dev_clock=False)
    try:
        e.workspaces(["bench"])
        url = e.url + "/api/v1/gpr"
        count_200 = lambda s: sum(1 for line in s.splitlines() if line.strip() == "200")
        for par in pars:
            out.append(cli_rate("curl", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}\\n", "-H",
                                         "Authorization: Bearer " + e.key, "-H", "Content-Type: application/json",
                                         "--data", GPR_BODY, url], n, par, None, count_200, e.egsd.pid))
            egs_empty(e)
        cenv = dict(os.environ, EGS_SERVER=e.url, EGS_API_KEY=e.key, EGS_CONFIG=os.path.join(work, "egsctl-config"))
        count_names = lambda s: sum(1 for line in s.splitlines() if line.startswith("gpr/"))
        for par in pars:
            out.append(cli_rate("egsctl", [os.path.join(BIN, "egsctl"), "create", "gpr", "r@@", "-w", "bench",
                                           "--cluster", "peer", "--gpus", "1", "--nodes", "1", "--duration", "10m",
                                           "-o", "name"], n, par, cenv, count_names, e.egsd.pid))
            egs_empty(e)

        def keepalive(n):
            c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=30)
            hdrs = {"Authorization": "Bearer " + e.key, "Content-Type": "application/json"}
            ok = 0
            for i in range(1, n + 1):
                c.request("POST", "/api/v1/gpr", body=GPR_BODY.replace("@@", str(i)), headers=hdrs)
                r = c.getresponse()
                r.read()
                ok += r.status == 200
            c.close()
            return ok
        out.append(py_rate("http.client keep-alive", keepalive, n, e.egsd.pid))
        egs_empty(e)

        import egs

        def sdk(n):
            auth = egs.authenticate(e.url, e.key)
            ok = 0
            for i in range(1, n + 1):
                if egs.request_gpu("s%d" % i, "bench", "peer", 1, 1, 81920, "gpu-1x",
                                   "NVIDIA-H100-80GB-HBM3", "0d0h10m", 101, auth):
                    ok += 1
            auth.close()
            return ok
        out.append(py_rate("SDK request_gpu", sdk, n, e.egsd.pid))
        egs_empty(e)
    finally:
        e.stop()
    return out, starts


# ---------------------------------------------------------------- report

def fmt_s(x, digits=1):
    return "n/a" if x is None else ("%.*f s" % (digits, x))


def report(args, acc, dev, big, rts, starts, machine):
    L = []
    p = L.append
    p("### bench/peer-slurm: Slurm 22.05 and egsd in the same run, %s" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    p("")
    p("Machine: %s. egsd %s. Slurm: %s, SchedulerParameters=%s." % (
        machine, args.build, args.slurm_version, os.environ.get("SCHED_PARAMS", DEFAULT_SCHED)))
    p("")
    if acc or dev:
        jobs = workload(args.jobs)
        gm = sum(g * m for _, g, m in jobs)
        p("#### Estimate accuracy: %d jobs (%d of 1 min, %d of 2 min; %d ask for 2 GPUs), %d GPU-minutes on 8 GPUs"
          % (len(jobs), sum(1 for j in jobs if j[2] == 1), sum(1 for j in jobs if j[2] == 2),
             sum(1 for j in jobs if j[1] == 2), gm))
        p("")
        p("Estimate: `squeue --start` after a backfill pass that began after the last sbatch; egsd's "
          "`estimatedStartTime` right after the last create. Actual: the job's own `date +%s.%N` at its start; "
          "the agent's `--on-attach` hook's `date +%s.%N` (real clock) or `status.startTimestamp` (dev clock). "
          "Error = actual - estimate, over the jobs still pending at the snapshot.")
        p("")
        p("| system | capacity | jobs | started at once | pending | pending with an estimate | mean abs error | max abs error | mean signed error | last start after first submit |")
        p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        cap = {"slurm-single": "1 node x 8 GPUs", "slurm-multi": "8 nodes x 1 GPU", "egs-realtime": "8 nodes x 1 GPU",
               "egs-devclock": "8 nodes x 1 GPU"}
        name = {"slurm-single": "Slurm 22.05, real time", "slurm-multi": "Slurm 22.05, real time",
                "egs-realtime": "egsd + egs-agent, real clock", "egs-devclock": "egsd + egs-agent, --dev-clock (1 s steps)"}
        rows = dict(acc or {})
        if dev:
            rows["egs-devclock"] = dev
        for k in ("slurm-single", "slurm-multi", "egs-realtime", "egs-devclock"):
            if k not in rows:
                continue
            s = rows[k]
            p("| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s |" % (
                name[k], cap[k], s["jobs"], s["at_once"], s["pending"], s["with_est"], fmt_s(s["mae"], 2),
                fmt_s(s["max"], 2), ("%+.2f s" % s["bias"]) if s["bias"] is not None else "n/a", fmt_s(s["last"], 0)))
        p("")
        if acc and "egs-realtime" in acc:
            a = acc["egs-realtime"]["api"]
            p("- egsd real clock against its own `status.startTimestamp` (whole seconds) instead of the hook: "
              "mean abs error %s, max %s." % (fmt_s(a["mae"], 2), fmt_s(a["max"], 2)))
        p("- Ratio of mean absolute errors, Slurm / egsd (real clock): %s." % ", ".join(
            "%s %s" % (cap[k], ("%.0fx" % (rows[k]["mae"] / rows["egs-realtime"]["mae"]))
                       if rows.get("egs-realtime", {}).get("mae") else
                       ("%.2f s vs %s" % (rows[k]["mae"], fmt_s(rows.get("egs-realtime", {}).get("mae"), 2))))
            for k in ("slurm-single", "slurm-multi") if k in rows and rows[k]["mae"] is not None) or "n/a")
        p("- Modelling: a GPR in the default dedicated mode takes whole nodes, so the 8 GPUs are 8 one-GPU nodes for egsd "
          "(a 2-GPU job is a GPR of 2 nodes x 1 GPU); Slurm runs the same jobs on one 8-GPU node and on 8 one-GPU nodes "
          "(a 2-GPU job is `--gres=gpu:2`, resp. `-N 2 --gres=gpu:1`). Each GPR has its own workspace (one provisioned GPR "
          "per workspace). Jobs use their whole time limit (`sleep` = `-t`), as a GPR holds its nodes for its whole exitDuration.")
        p("")
    if big:
        p("#### Far estimates: %d one-GPU 10-minute requests on 8 one-GPU nodes" % big["n"])
        p("")
        p("| system | estimate for the last | its actual start | error |")
        p("| --- | ---: | ---: | ---: |")
        p("| egsd --dev-clock (measured here) | +%.2f h | +%.2f h | %s |" % (
            big["est"] / 3600, big["actual"] / 3600, fmt_s(big["actual"] - big["est"], 0)))
        p("| Slurm 22.05, 1 node x 8 GPUs (quoted from the reference, not re-measured) | +13.8 days | +41.5 h | -12.1 days (the estimate 8x too far out) |")
        p("| Slurm 22.05, 8 nodes x 1 GPU (quoted from the reference, not re-measured) | exact to the minute | | |")
        p("")
        p("- egsd: every one of the %d GPRs queued at submission checked: mean abs error %s, max %s." % (
            big["checked"], fmt_s(big["mae_all"], 2), fmt_s(big["max_all"], 2)))
        p("")
    if rts:
        p("#### Submission rates: %d submissions per test, 1-GPU 10-minute jobs/GPRs, queue emptied between tests" % args.rate_n)
        p("")
        p("| client | how | submitters | submissions/s | ratio to sbatch, 1 submitter | ratio to sbatch, same submitters | server fsyncs | load avg before |")
        p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        base = {r["par"]: r["rate"] for r in rts if r["label"] == "sbatch"}
        how = {"sbatch": "one process per job (`sbatch --gres=gpu:1 -t 10 --wrap 'sleep 600'`)",
               "curl": "one `curl` process per POST /api/v1/gpr",
               "egsctl": "one `egsctl create gpr` process per GPR (2 requests: auth + create)",
               "http.client keep-alive": "one Python process, one connection",
               "SDK request_gpu": "one Python process, `egs.request_gpu` in a loop"}
        for r in rts:
            b1 = base.get(1)
            bp = base.get(r["par"])
            p("| %s | %s | %d | %.0f | %s | %s | %s | %s |" % (
                r["label"], how[r["label"]], r["par"], r["rate"], ("%.2fx" % (r["rate"] / b1)) if b1 else "n/a",
                ("%.2fx" % (r["rate"] / bp)) if bp else "n/a",
                "n/a" if r.get("fsyncs") is None else r["fsyncs"], r["load"]))
        p("")
        p("What starting the client process alone costs (%d runs, serially, no request sent):" % starts[0]["n"])
        p("")
        p("| command | runs/s | ms per process |")
        p("| --- | ---: | ---: |")
        for r in starts:
            p("| `%s` | %.0f | %.2f |" % (r["label"].split(": ", 1)[1], r["rate"], 1000.0 / r["rate"]))
        bad = [r for r in rts if r["ok"] != r["n"]]
        p("")
        p("- Failed submissions: %s." % (", ".join("%s/%d: %d" % (r["label"], r["par"], r["n"] - r["ok"]) for r in bad) or "none"))
        p("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 32)))
    ap.add_argument("--big", type=int, default=int(os.environ.get("BIG", 2000)))
    ap.add_argument("--rate-n", type=int, default=int(os.environ.get("RATE_N", 2000)))
    ap.add_argument("--pars", default=os.environ.get("PARS", "1 4 8"))
    ap.add_argument("--modes", default=os.environ.get("MODES", "single multi"))
    ap.add_argument("--rate-mode", default=os.environ.get("RATE_MODE", "single"))
    ap.add_argument("--phases", default=os.environ.get("PHASES", "devclock big realtime rates"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--build", default="?")
    ap.add_argument("--slurm-version", default="?")
    ap.add_argument("--machine", default="?")
    ap.add_argument("--results", default=os.environ.get("RESULTS"))
    args = ap.parse_args()
    t_start = time.time()
    work = args.work or tempfile.mkdtemp(prefix="egs-peer-slurm.", dir="/var/tmp")
    phases = args.phases.split()
    modes = args.modes.split()
    jobs = workload(args.jobs)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    dev = big = acc = rts = starts = None
    try:
        if "devclock" in phases:
            dev = egs_devclock_accuracy(work, jobs)
        if "big" in phases and args.big > 0:
            big = egs_devclock_big(work, args.big)
        if "realtime" in phases or "rates" in phases:
            for m in sorted(set(modes + ([args.rate_mode] if "rates" in phases else []))):
                log("starting Slurm (%s)" % m)
                sh([SLURM_SH, "start", m])
        if "realtime" in phases:
            acc = realtime_accuracy(work, jobs, modes)
        if "rates" in phases:
            for m in modes:
                if m != args.rate_mode:
                    sh([SLURM_SH, "stop", m], check=False)
            rts, starts = rates(work, args.rate_n, [int(x) for x in args.pars.split()], args.rate_mode)
    finally:
        for p in list(PROCS):
            stop_proc(p)
        for m in ("single", "multi"):
            sh([SLURM_SH, "stop", m], check=False)
    text = report(args, acc, dev, big, rts, starts, args.machine)
    text += "\nWhole run (peer.py, Slurm start and stop included): %.1f min; load average at the end: %s.\n" % (
        (time.time() - t_start) / 60, " ".join(open("/proc/loadavg").read().split()[:3]))
    print(text)
    if args.results:
        with open(args.results, "w") as f:
            f.write(text + "\n")
    if not os.environ.get("KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("work directory kept: " + work)


if __name__ == "__main__":
    main()
