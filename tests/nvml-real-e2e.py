#!/usr/bin/env python3
"""tests/nvml-real-e2e.py: the GPR lifecycle on this host's real NVIDIA GPUs.

What tests/api/test_lifecycle.py does over mock devices, here over `egs-agent --devices nvml`: a real egsd
(temporary port, data directory and SQLite file, its development clock), one cluster whose agent reads
this host's GPUs through the driver's libnvidia-ml.so.1, a workspace, and a GPR for every GPU of the host.
It checks that

  - the host registers as one Healthy node with the GPU count, model and memory NVML reports;
  - the GPR is Provisioned on that node and the agent's local backend attached it to the workspace;
  - the GPU table shows every GPU of the node with a memory reading, and, while a load runs on the GPUs
    (LOAD_CMD, e.g. a PyTorch matrix loop; optional), a utilization above zero on at least one;
  - at the end of the window the GPR is Complete and the node detached.

Run on a machine with NVIDIA GPUs and a driver, after `make all` (or with EGS_BIN naming the binaries):

    /usr/bin/python3 tests/nvml-real-e2e.py
    LOAD_CMD='python3 -c "import torch; ..."' python3 tests/nvml-real-e2e.py

It prints one JSON line per step and exits 0 when every check held.  tests/nvml-real.sh is the smaller
probe (what the agent reads, no egsd).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "api"))
from conftest import BIN, Agent, Cluster, wait_for  # noqa: E402


class NvmlAgent(Agent):
    """egs-agent over this host's GPUs (one node), with the local backend's state file as the proof of attach."""

    def __init__(self, egsd, cluster, token, workdir, node, expect):
        super().__init__(egsd, cluster, token, [], workdir)
        self.node = node
        self.expect = expect

    def start(self):
        self.log = open(os.path.join(self.workdir, "agent.log"), "ab")
        args = [os.path.join(BIN, "egs-agent"), "--server", self.egsd.url, "--cluster", self.cluster,
                "--token-file", self.token_file, "--devices", "nvml", "--node-name", self.node,
                "--backend", "local", "--state-dir", self.state_dir]
        if self.expect:
            args += ["--expect-gpus", str(self.expect)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        return self


def step(name, **kw):
    print(json.dumps(dict(step=name, **kw)), flush=True)


def main():
    expect = int(os.environ.get("EXPECT_GPUS", "0"))
    failures = []
    with tempfile.TemporaryDirectory(prefix="egs-nvml-e2e-") as tmp:
        c = Cluster(tmp)
        agent = load = None
        try:
            token = c.admin.ok("POST", "/api/v1/clusters", {"clusterName": "gpu-host"})["agentToken"]
            agent = NvmlAgent(c.egsd, "gpu-host", token, os.path.join(tmp, "agent"), "gpu-host-1", expect).start()
            node = wait_for(lambda: next((n for n in c.admin.get("/api/v1/inventory/list")["items"]
                                          if n["clusterName"] == "gpu-host"), None), timeout=30, what="the node")
            step("registered", node=node)
            if node["nodeHealth"] != "Healthy":
                failures.append("node is %s: %s" % (node["nodeHealth"], node.get("healthReason")))
            gpus = node.get("gpuCount") or node.get("totalGpus") or 0
            if expect and gpus != expect:
                failures.append("node has %s GPUs, expected %d" % (gpus, expect))
            ws = c.workspace("team-gpu", ["gpu-host"], ["team-gpu-ns"])
            gid = c.gpr(gprName="real", sliceName=ws, numberOfGPUs=gpus or 1, exitDuration="1h")
            st = c.wait_state(gid, "Provisioned", timeout=60)
            step("provisioned", gprId=gid, nodes=st["status"]["nodes"], gpus=st["status"]["numGpusAllocated"])
            wait_for(lambda: gid in str(agent.attach_state()), timeout=30, what="the agent's attach")
            load_cmd = os.environ.get("LOAD_CMD")
            if load_cmd:
                load = subprocess.Popen(load_cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

            def table():
                return c.admin.get("/api/v1/gpus/table?gprId=" + gid)

            rows = wait_for(lambda: (t := table())["items"] and all(r.get("memTotalMiB") for r in t["items"]) and t,
                            timeout=30, what="GPU readings")["items"]
            step("gpus", rows=[{k: r.get(k) for k in ("uuid", "index", "powerW", "tempC", "utilPct", "memUsedMiB",
                                                      "memTotalMiB")} for r in rows])
            if len(rows) != gpus:
                failures.append("GPU table has %d rows for %s GPUs" % (len(rows), gpus))
            if load:
                try:
                    busy = wait_for(lambda: [r for r in table()["items"] if (r.get("utilPct") or 0) > 0],
                                    timeout=60, interval=1, what="utilization above zero")
                    step("under load", busy=[{k: r.get(k) for k in ("uuid", "utilPct", "powerW", "memUsedMiB")}
                                             for r in busy],
                         workloads=c.admin.get("/api/v1/workloads?gprId=" + gid)["items"])
                except AssertionError as e:
                    failures.append(str(e))
            c.advance("1h")
            st = c.wait_state(gid, "Complete", timeout=60)
            wait_for(lambda: gid not in str(agent.attach_state()), timeout=30, what="the agent's detach")
            step("complete", internalState=st["status"]["internalState"])
        except Exception as e:  # a failed wait or call: report it with the logs' ends
            failures.append("%s: %s" % (type(e).__name__, e))
            for path in (c.egsd.log_path, os.path.join(tmp, "agent", "agent.log")):
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        step("log", path=os.path.basename(path), tail=f.read()[-3000:])
        finally:
            if load and load.poll() is None:
                load.terminate()
            if agent:
                agent.stop()
            c.egsd.stop()
    step("result", ok=not failures, failures=failures, bin=BIN, load=shlex.split(os.environ.get("LOAD_CMD", ""))[:1])
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
