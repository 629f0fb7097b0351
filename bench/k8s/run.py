#!/usr/bin/python3
"""bench/k8s/run.py: egs-agent --backend kubernetes over 1,000 GPU nodes in the fake API server.

Measures (issue 11, item 9; targets in brackets):
  - discovery: from the agent's start to its log line "serving N managed GPU nodes" (list + device view)
    [under 2 s], and to egsd listing all N nodes Healthy (registration included);
  - the attach of one 64-node GPR: agent wall time from the first attach action starting to the last one
    reported, and the agent's CPU time from the GPR's creation to Provisioned (all threads), also less what
    the idle agent spends in as long (measured just before) [under 1 s of agent time];
  - the agent's peak resident set (VmHWM) at the end [under 30 MiB].
Prints a table and exits 1 when a target is missed.  Knobs: NODES (1000), GPR_NODES (64), KEEP=1 keeps the
temp dir.  The fake is Python: its own time is in the wall times, not in the agent's CPU time."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fake-k8s"))
from conftest import BIN, Egsd, wait_for  # noqa: E402
from fakek8s import FakeK8s  # noqa: E402

NODES = int(os.environ.get("NODES", "1000"))
GPR_NODES = int(os.environ.get("GPR_NODES", "64"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime of all threads


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def log_time(line):
    m = re.match(r"(\d+-\d+-\d+T\d+:\d+:\d+\.\d+)Z", line)
    t = time.strptime(m.group(1).split(".")[0], "%Y-%m-%dT%H:%M:%S")
    return time.mktime(t) - time.timezone + float("0." + m.group(1).split(".")[1])


def main():
    tmp = tempfile.mkdtemp(prefix="egs-bench-k8s-")
    fake = FakeK8s(directory=os.path.join(tmp, "k8s"), history=NODES * 4 + 1000)
    egsd = agent = None
    try:
        t0 = time.time()
        for i in range(NODES):
            fake.add_gpu_node("gpu-%04d" % i)
        setup_s = time.time() - t0
        egsd = Egsd(os.path.join(tmp, "egsd")).start()
        admin = egsd.api()
        token = admin.ok("POST", "/api/v1/clusters", {"clusterName": "k1"})["agentToken"]
        with open(os.path.join(tmp, "token"), "w") as f:
            f.write(token)
        os.chmod(os.path.join(tmp, "token"), 0o600)
        log_path = os.path.join(tmp, "agent.log")
        log = open(log_path, "wb")
        start = time.time()
        agent = subprocess.Popen([os.path.join(BIN, "egs-agent"), "--server", egsd.url, "--cluster", "k1",
                                  "--token-file", os.path.join(tmp, "token"), "--backend", "kubernetes",
                                  "--kubeconfig", fake.kubeconfig, "--state-dir", os.path.join(tmp, "state"),
                                  "--pre-checks", "node-health", "--post-checks", "node-health"],
                                 stdout=log, stderr=subprocess.STDOUT)

        def logs():
            with open(log_path, errors="replace") as f:
                return f.read()
        serving = wait_for(lambda: [l for l in logs().splitlines() if "managed GPU nodes" in l], timeout=60,
                           what="the device view")[0]
        discovery_s = log_time(serving) - start
        wait_for(lambda: sum(n["nodeHealth"] == "Healthy" for n in admin.get("/api/v1/inventory/list")["items"])
                 == NODES, timeout=120, interval=0.2, what="all nodes in egsd")
        registered_s = time.time() - start
        # Let the taint reconciler finish its first pass (one patch per node) before measuring the attach.
        wait_for(lambda: logs().count("added the taint") >= NODES, timeout=600, interval=0.5, what="the taints")
        admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "ws", "clusters": ["k1"], "namespaces": ["ws-a"],
                                                     "username": "u", "email": "u@example.com"})
        idle0, t_idle = cpu_seconds(agent.pid), time.time()
        time.sleep(5)
        idle_rate = (cpu_seconds(agent.pid) - idle0) / (time.time() - t_idle)  # sampling 1,000 nodes every second
        cpu0, t_cpu0 = cpu_seconds(agent.pid), time.time()
        gid = admin.ok("POST", "/api/v1/gpr", {"gprName": "big", "sliceName": "ws", "numberOfGPUs": 8,
                                               "numberOfGPUNodes": GPR_NODES, "exitDuration": "1h", "priority": 101})
        gid = gid["gprId"]
        wait_for(lambda: admin.get("/api/v1/gpr?gprId=" + gid)["status"]["provisioningStatus"] == "Provisioned",
                 timeout=300, interval=0.2, what="the GPR")
        attach_cpu_s = cpu_seconds(agent.pid) - cpu0
        above_idle_s = attach_cpu_s - idle_rate * (time.time() - t_cpu0)
        lines = [l for l in logs().splitlines() if "action attach:" in l]
        first = min(log_time(l) for l in lines if "starting" in l)
        last = max(log_time(l) for l in lines if ": ok:" in l)
        attach_wall_s = last - first
        labelled = sum(1 for n in fake.get("/api/v1/nodes?labelSelector=kubeslice.io%2Fgpr")[1]["items"])
        rss = vm(agent.pid, "VmHWM")
        rows = [("nodes in the fake", NODES, ""), ("creating them (the fake, Python)", "%.1f s" % setup_s, ""),
                ("discovery: start to device view", "%.2f s" % discovery_s, "< 2 s"),
                ("discovery: start to all Healthy in egsd", "%.2f s" % registered_s, ""),
                ("attach of a %d-node GPR: agent wall time" % GPR_NODES, "%.2f s" % attach_wall_s, ""),
                ("attach of a %d-node GPR: agent CPU time" % GPR_NODES, "%.2f s" % attach_cpu_s, ""),
                ("  of which above the idle agent", "%.2f s" % above_idle_s, "< 1 s"),
                ("idle agent (1,000 nodes sampled every second)", "%.1f %% of a core" % (idle_rate * 100), ""),
                ("nodes labelled for the GPR", labelled, "= %d" % GPR_NODES),
                ("agent peak RSS (VmHWM)", "%.1f MiB" % rss, "< 30 MiB")]
        print("| measure | value | target |\n| --- | --- | --- |")
        for r in rows:
            print("| %s | %s | %s |" % r)
        ok = discovery_s < 2 and above_idle_s < 1 and rss < 30 and labelled == GPR_NODES
        print(json.dumps({"discovery_s": round(discovery_s, 3), "registered_s": round(registered_s, 3),
                          "attach_wall_s": round(attach_wall_s, 3), "attach_cpu_s": round(attach_cpu_s, 3),
                          "above_idle_s": round(above_idle_s, 3), "idle_core_pct": round(idle_rate * 100, 1),
                          "rss_mib": round(rss, 1), "ok": ok}))
        return 0 if ok else 1
    finally:
        if agent:
            agent.terminate()
            agent.wait(30)
        if egsd:
            egsd.stop()
        fake.close()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp)


if __name__ == "__main__":
    sys.exit(main())
