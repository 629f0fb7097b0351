#!/usr/bin/env python3
"""Footprint of egs-agent: resident memory and CPU of one agent serving 8 GPUs sampled every second,
against a real egsd, for DURATION seconds after a warm-up.

    ./bench/agent/run.sh                  # builds, then runs this (DURATION=60 by default)
    DURATION=300 ./bench/agent/run.sh

The GPUs come from tests/fake-nvml (the machines this runs on have no GPU), so the numbers are the
agent's own cost: its threads, libcurl, jansson and the NVML backend's calls (7 per GPU per sample,
plus XID draining and the process list at each heartbeat).  A real libnvidia-ml.so adds its own memory
and the driver's time per call; tests/nvml-real.sh is the tool for a GPU machine.

The same is measured with the mock backend (one 8-GPU node), to show the NVML path costs no more.
REAL_NVML=1 uses the driver's libnvidia-ml.so.1 instead of the fake (on a GPU host).
Targets: under 20 MiB RSS (peak, VmHWM) and under 1 % of one core (the CPU time of all its threads
over the window, from /proc/PID/task/*/schedstat).
Exit status 1 when a target is missed.  A markdown table goes to stdout.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("EGS_BIN", os.path.join(ROOT, "build", "bin"))
FAKE = os.path.join(ROOT, "build", "lib", "libnvidia-ml-fake.so")
DURATION = float(os.environ.get("DURATION", "60"))
WARMUP = float(os.environ.get("WARMUP", "5"))
RSS_LIMIT_MIB = 20.0
CPU_LIMIT_PCT = 1.0

# Busy GPUs: every metric present, two compute processes, one application XID.
FAKE_STATE = "gpus 8\ngpu all name NVIDIA H100 80GB HBM3\ngpu all util 87\ngpu all temp_c 64\n" \
             "gpu all power_mw 612000\ngpu all mem_used_mib 60000\ngpu 0 proc 1 4096\ngpu 5 proc 1 2048\n" \
             "gpu 2 xid 13 1\n"
MOCK = """nodes:
  - name: bench-node
    instanceType: p5.48xlarge
    gpuModel: NVIDIA-H100-80GB-HBM3
    gpuCount: 8
    memoryMiB: 81920
    gpus:
      - timeline: [{at: 0, tempC: 40, utilPct: 10, processes: [{pid: 1, name: train, memUsedMiB: 4096}]},
                   {at: 600, tempC: 80, utilPct: 100}]
      - {}
      - {}
      - {}
      - {}
      - {}
      - {}
      - {}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(url, key, method, path, body=None):
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)["data"]


def proc_cpu_ns(pid):
    """CPU time of every thread of pid in ns (schedstat: clock ticks are too coarse for < 1 %)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])
    return out


def run_agent(work, url, token_file, cluster, devices, env):
    log = open(os.path.join(work, "agent-%s.log" % cluster), "wb")
    args = [os.path.join(BIN, "egs-agent"), "--server", url, "--cluster", cluster, "--token-file", token_file,
            "--devices", devices, "--state-dir", os.path.join(work, "state-" + cluster),
            "--sample-interval", "1", "--log-level", "debug"]
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    time.sleep(WARMUP)
    if p.poll() is not None:
        raise RuntimeError("egs-agent exited: " + open(log.name).read())
    t0, c0 = time.monotonic(), proc_cpu_ns(p.pid)
    peak_rss = 0
    while time.monotonic() - t0 < DURATION:
        time.sleep(1)
        peak_rss = max(peak_rss, proc_status(p.pid)["VmRSS"])
    t1, c1 = time.monotonic(), proc_cpu_ns(p.pid)
    st = proc_status(p.pid)
    p.send_signal(signal.SIGTERM)
    p.wait(15)
    log.close()
    heartbeats = open(log.name).read().count("heartbeat sent")
    return {"rss_mib": st["VmRSS"] / 1024, "hwm_mib": st["VmHWM"] / 1024, "threads": st["Threads"],
            "cpu_pct": 100.0 * (c1 - c0) / 1e9 / (t1 - t0), "seconds": t1 - t0, "heartbeats": heartbeats,
            "exit": p.returncode}


def main():
    work = tempfile.mkdtemp(prefix="egs-bench-agent-")
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    egsd = subprocess.Popen([os.path.join(BIN, "egsd"), "--listen", "127.0.0.1:%d" % port, "--data",
                             os.path.join(work, "egsd"), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "egsd.log"), "wb"))
    results = {}
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        key = open(os.path.join(work, "egsd", "admin.key")).read().strip()
        state = os.path.join(work, "fake-nvml.state")
        with open(state, "w") as f:
            f.write(FAKE_STATE)
        mock = os.path.join(work, "mock.yaml")
        with open(mock, "w") as f:
            f.write(MOCK)
        for cluster, devices in (("bench-nvml", "nvml"), ("bench-mock", mock)):
            token = call(url, key, "POST", "/api/v1/clusters", {"clusterName": cluster})["agentToken"]
            token_file = os.path.join(work, cluster + ".token")
            with open(token_file, "w") as f:
                f.write(token)
            os.chmod(token_file, 0o600)
            env = dict(os.environ)
            if os.environ.get("REAL_NVML") != "1":  # REAL_NVML=1: the driver's library, on a GPU host
                env.update(EGS_NVML_LIBRARY=FAKE, EGS_FAKE_NVML_STATE=state)
            results[devices if devices == "nvml" else "mock"] = run_agent(work, url, token_file, cluster, devices, env)
    finally:
        egsd.terminate()
        egsd.wait(10)
    ok = True
    print("| devices | GPUs | sample every | window | peak RSS (VmHWM) | RSS at end | CPU (one core) | threads | heartbeats |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        print("| %s | 8 | 1 s | %.0f s | %.1f MiB | %.1f MiB | %.3f %% | %d | %d |" % (
            name, r["seconds"], r["hwm_mib"], r["rss_mib"], r["cpu_pct"], r["threads"], r["heartbeats"]))
        ok &= r["hwm_mib"] < RSS_LIMIT_MIB and r["cpu_pct"] < CPU_LIMIT_PCT and r["exit"] == 0
    print("\ntargets: peak RSS < %.0f MiB, CPU < %.1f %% of a core: %s" % (RSS_LIMIT_MIB, CPU_LIMIT_PCT,
                                                                            "met" if ok else "MISSED"))
    if os.environ.get("KEEP") == "1":
        print("work directory kept: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
