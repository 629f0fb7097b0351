"""egs-agent against a real egsd: pre-provisioning checks that send a GPR to other nodes or to Error,
post-exit checks after the drain, scripted GPU failures (a GPU off the bus, a node that stops
answering), the NVML backend over the fake libnvidia-ml.so, connectivity between agents, and
convergence after egsd restarts or with a stale attachment in the agent's state file."""
import json
import os
import subprocess

from conftest import ROOT, free_port, wait_for

SHAPE = """    instanceType: p5.48xlarge
    gpuModel: NVIDIA-H100-80GB-HBM3
    gpuCount: 8
    memoryMiB: 81920
"""


def node_yaml(name, extra=""):
    return "  - name: %s\n%s%s" % (name, SHAPE, extra)


def start_agent(cluster, name, nodes_yaml, extra=(), wait_nodes=(), env=None):
    """An agent of cluster `name` over the given devices YAML (a list of node_yaml() entries)."""
    agent = cluster.add_cluster(name, [], start=False, extra=list(extra))
    with open(agent.devices, "w") as f:
        f.write("nodes:\n" + "".join(nodes_yaml))
    old = dict(os.environ)
    os.environ.update(env or {})
    try:
        agent.start()
    finally:
        os.environ.clear()
        os.environ.update(old)
    if wait_nodes:
        wait_for(lambda: set(wait_nodes) <= {n["gpuNodeName"] for n in cluster.schedulable_nodes(name)},
                 what="nodes %s" % (wait_nodes,))
    return agent


def inventory_node(cluster, name):
    return [n for n in cluster.admin.get("/api/v1/inventory/list")["items"] if n["gpuNodeName"] == name][0]


def events(cluster, reason):
    return [e for e in cluster.admin.get("/api/v1/events?limit=500")["items"] if e["reason"] == reason]


def check_log(agent, gpr_id):
    path = os.path.join(agent.state_dir, "checks", gpr_id + ".jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f]


STRAY = "    gpus:\n      - timeline: [{at: 0, processes: [{pid: 4242, name: python, memUsedMiB: 2048}]}]\n" + \
        "".join("      - {}\n" for _ in range(7))


def test_stray_process_fails_precheck_and_gpr_lands_on_another_node(cluster):
    # Ties go to the first name: h100-a is tried first, and a process runs on its GPU 0.
    agent = start_agent(cluster, "worker-1", [node_yaml("h100-a", STRAY), node_yaml("h100-b")],
                        wait_nodes=("h100-a", "h100-b"))
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w")
    st = cluster.wait_state(gid, "Provisioned")
    assert st["status"]["nodes"] == ["h100-b"] and st["status"]["retryCount"] == 1
    why = st["status"]["failureReason"]
    assert "pre-check gpu-processes failed: GPU 0 runs pid 4242 (python, 2048 MiB)" in why, why
    assert inventory_node(cluster, "h100-a")["nodeHealth"] == "Unhealthy"
    failed = [e for e in events(cluster, "PrecheckFailed") if e["involvedObject"]["name"].endswith("h100-a")]
    assert failed and "gpu-processes" in failed[0]["message"]
    # The full output of both runs stays with the GPR on the agent's host.
    runs = check_log(agent, gid)
    assert [(r["node"], r["phase"], r["ok"]) for r in runs] == [("h100-a", "pre", False), ("h100-b", "pre", True)]
    names = [c["name"] for c in runs[1]["checks"]]
    assert names == ["node-health", "gpu-inventory", "gpu-processes", "storage", "connectivity", "nccl"]
    assert {c["status"] for c in runs[1]["checks"][:3]} == {"passed"}
    # The agent keeps reporting the node Unhealthy (its quarantine), so it stays out of scheduling.
    wait_for(lambda: inventory_node(cluster, "h100-a")["lastHeartbeat"] is not None)
    assert inventory_node(cluster, "h100-a")["nodeHealth"] == "Unhealthy"


def test_every_node_failing_its_precheck_ends_in_error(cluster):
    nodes = [node_yaml("h100-%d" % i, STRAY) for i in range(1, 4)]
    start_agent(cluster, "worker-1", nodes, wait_nodes=("h100-1", "h100-2", "h100-3"))
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w")
    st = cluster.wait_state(gid, "Error", timeout=30)
    assert st["status"]["retryCount"] == 3
    assert "gpu-processes failed" in st["status"]["failureReason"]
    assert {inventory_node(cluster, "h100-%d" % i)["nodeHealth"] for i in range(1, 4)} == {"Unhealthy"}


def test_post_exit_check_after_drain_marks_the_node(cluster, tmpdir_path):
    # The drain (on-detach hook) breaks the node's storage: the post-exit storage check must catch it.
    store = os.path.join(tmpdir_path, "storage")
    os.makedirs(os.path.join(store, "h100-1"))
    os.makedirs(os.path.join(store, "h100-2"))
    agent = start_agent(cluster, "worker-1", [node_yaml("h100-1"), node_yaml("h100-2")],
                        extra=["--check-storage", store + "/{node}", "--on-detach", 'rm -rf "%s/$EGS_NODE"' % store],
                        wait_nodes=("h100-1", "h100-2"))
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w")
    st = cluster.wait_state(gid, "Provisioned")
    assert st["status"]["nodes"] == ["h100-1"]
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    cluster.wait_state(gid, "Complete")
    failed = wait_for(lambda: events(cluster, "PostExitCheckFailed"), what="PostExitCheckFailed event")
    assert events(cluster, "DetachFailed") == []
    assert "post-check storage failed: %s/h100-1: No such file or directory" % store in \
        failed[0]["message"], failed[0]["message"]
    wait_for(lambda: inventory_node(cluster, "h100-1")["nodeHealth"] == "Unhealthy", what="h100-1 Unhealthy")
    assert agent.attach_state()["nodes"] == {}
    runs = check_log(agent, gid)
    assert [(r["node"], r["phase"], r["ok"]) for r in runs] == [("h100-1", "pre", True), ("h100-1", "post", False)]
    # A new GPR goes to the healthy node, never to the one that failed its post-exit check.
    gid2 = cluster.gpr(sliceName="w")
    assert cluster.wait_state(gid2, "Provisioned")["status"]["nodes"] == ["h100-2"]


def test_scripted_failures_gpu_off_the_bus_and_silent_node(cluster):
    lost = "    gpus:\n" + "".join("      - {}\n" for _ in range(7)) + "      - timeline: [{at: 4, lost: true}]\n"
    silent = "    timeline: [{at: 4, silent: true}]\n"
    start_agent(cluster, "worker-1", [node_yaml("h100-a", lost), node_yaml("h100-b", silent), node_yaml("h100-c")],
                wait_nodes=("h100-a", "h100-b", "h100-c"))
    # The GPU falls off the bus: the next sample sees it and a heartbeat goes out at once.
    wait_for(lambda: inventory_node(cluster, "h100-a")["nodeHealth"] == "Unhealthy", timeout=10,
             what="h100-a Unhealthy")
    # h100-b stops answering: it drops out of heartbeats and egsd times it out like a dead host.
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "1m", "keepHeartbeats": False})
    wait_for(lambda: inventory_node(cluster, "h100-c")["nodeHealth"] == "Healthy", timeout=10, what="h100-c back")
    assert inventory_node(cluster, "h100-b")["nodeHealth"] == "Unschedulable"
    assert inventory_node(cluster, "h100-a")["nodeHealth"] == "Unhealthy"


def fake_nvml(tmpdir_path, text):
    subprocess.run(["make", "-s", "build/lib/libnvidia-ml-fake.so"], cwd=ROOT, check=True)
    state = os.path.join(tmpdir_path, "fake-nvml.state")
    write_fake_state(state, text)
    return {"EGS_NVML_LIBRARY": os.path.join(ROOT, "build", "lib", "libnvidia-ml-fake.so"),
            "EGS_FAKE_NVML_STATE": state}


def write_fake_state(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def test_nvml_backend_over_the_fake_library(cluster, tmpdir_path):
    env = fake_nvml(tmpdir_path, "gpus 8\ngpu all name NVIDIA H100 80GB HBM3\n")
    agent = cluster.add_cluster("gpu-1", [], start=False,
                                extra=["--node-name", "gpu-host-1", "--instance-type", "p5.48xlarge"])
    agent.devices = "nvml"
    old = dict(os.environ)
    os.environ.update(env)
    try:
        agent.start()
    finally:
        os.environ.clear()
        os.environ.update(old)
    wait_for(lambda: [n for n in cluster.schedulable_nodes("gpu-1") if n["gpuNodeName"] == "gpu-host-1"],
             what="gpu-host-1")
    n = inventory_node(cluster, "gpu-host-1")
    assert n["gpuCount"] == 8 and n["memory"] == 81559 and n["instanceType"] == "p5.48xlarge"
    cluster.workspace("w", ["gpu-1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUs=8)
    assert cluster.wait_state(gid, "Provisioned")["status"]["nodes"] == ["gpu-host-1"]
    # GPU 3 falls off the bus: the node turns Unhealthy within a sample and a heartbeat.
    write_fake_state(env["EGS_FAKE_NVML_STATE"], "gpus 8\ngpu all name NVIDIA H100 80GB HBM3\ngpu 3 lost 1\n")
    wait_for(lambda: inventory_node(cluster, "gpu-host-1")["nodeHealth"] == "Unhealthy", timeout=10,
             what="gpu-host-1 Unhealthy")


def test_nvml_real_script_runs_against_the_fake(tmpdir_path):
    env = dict(os.environ)
    env.update(fake_nvml(tmpdir_path, "gpus 3\ngpu 1 proc %d 512\ngpu 2 temp_c 71\n" % os.getpid()))
    out = subprocess.run([os.path.join(ROOT, "tests", "nvml-real.sh")], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    assert [l["index"] for l in lines] == [0, 1, 2]
    assert lines[2]["tempC"] == 71 and lines[0]["memTotalMiB"] == 81559 and lines[0]["health"] == "Healthy"
    procs = lines[1]["processes"]
    assert [(p["pid"], p["memUsedMiB"]) for p in procs] == [(os.getpid(), 512)] and procs[0]["name"] != "?"


def test_connectivity_between_the_nodes_of_a_gpr(cluster):
    port = free_port()
    dead = free_port()
    # Nodes served by this agent stand for remote hosts through their `address`: h100-a's agent answers
    # on the check port, h100-c's address has nobody listening.
    nodes = [node_yaml("h100-a", "    address: 127.0.0.1:%d\n" % port),
             node_yaml("h100-b", "    address: 127.0.0.1:%d\n" % port),
             node_yaml("h100-c", "    address: 127.0.0.1:%d\n" % dead),
             node_yaml("h100-d", "    address: 127.0.0.1:%d\n" % dead)]
    agent = start_agent(cluster, "worker-1", nodes, extra=["--check-port", str(port), "--advertise-host", "127.0.0.1"],
                        wait_nodes=("h100-a", "h100-b", "h100-c", "h100-d"))
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUNodes=2, numberOfGPUs=8)
    st = cluster.wait_state(gid, "Provisioned")
    assert st["status"]["nodes"] == ["h100-a", "h100-b"]
    conn = [c for c in check_log(agent, gid)[0]["checks"] if c["name"] == "connectivity"][0]
    assert conn["status"] == "passed" and "reached 1 peer agent(s)" in conn["output"], conn
    # gid keeps h100-a and h100-b: only h100-c and h100-d are free, and they cannot reach each other's
    # agents.
    cluster.workspace("w2", ["worker-1"])
    gid2 = cluster.gpr(sliceName="w2", numberOfGPUNodes=2, numberOfGPUs=8)
    st = wait_for(lambda: cluster.status(gid2)["status"]["retryCount"] >= 1 and cluster.status(gid2), timeout=30,
                  what="a failed attempt")
    assert "pre-check connectivity failed: cannot reach the agent of h100-" in st["status"]["failureReason"], st


def test_stale_attachment_in_the_state_file_is_reconciled(cluster):
    agent = cluster.add_cluster("worker-1", [], start=False)
    with open(agent.devices, "w") as f:
        f.write("nodes:\n" + node_yaml("h100-1"))
    os.makedirs(agent.state_dir, exist_ok=True)
    with open(os.path.join(agent.state_dir, "attach-state.json"), "w") as f:
        json.dump({"version": 1, "cluster": "worker-1", "nodes": {"h100-1": {
            "gprId": "gpr-deadbeef-0000", "workspace": "gone", "namespaces": [],
            "startTime": "", "exitTime": "", "attachedAt": ""}}}, f)
    agent.start()
    # egsd does not know that GPR: it asks for a detach, and the node comes back to the pool.
    wait_for(lambda: agent.attach_state()["nodes"] == {}, timeout=20, what="the stale attachment detached")
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w")
    assert cluster.wait_state(gid, "Provisioned")["status"]["nodes"] == ["h100-1"]


def test_agent_reconverges_after_egsd_restart_with_what_changed_meanwhile(cluster):
    lost = "    gpus:\n" + "".join("      - {}\n" for _ in range(7)) + "      - timeline: [{at: 4, lost: true}]\n"
    agent = start_agent(cluster, "worker-1", [node_yaml("h100-a", lost), node_yaml("h100-b")],
                        wait_nodes=("h100-a", "h100-b"))
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUNodes=1)
    cluster.wait_state(gid, "Provisioned")
    cluster.egsd.stop(sig="kill")
    import time
    time.sleep(5)  # the GPU falls off the bus while egsd is down
    cluster.egsd.start()
    cluster.admin = cluster.egsd.api()
    # The agent registers again by itself and reports what it holds and what broke.
    wait_for(lambda: inventory_node(cluster, "h100-a")["nodeHealth"] == "Unhealthy", timeout=30,
             what="h100-a reported Unhealthy after the restart")
    assert inventory_node(cluster, "h100-b")["lastHeartbeat"] is not None
    assert agent.proc.poll() is None


def test_temperature_ramp_raises_and_clears_an_alert(cluster):
    # GPU 2 heats from 40 C to 95 C in 3 s, holds, and cools back to 40 C from 8 s to 10 s.
    ramp = "    gpus:\n      - {}\n      - {}\n" \
           "      - timeline: [{at: 0, tempC: 40}, {at: 3, tempC: 95}, {at: 8, tempC: 95}, {at: 10, tempC: 40}]\n" + \
           "".join("      - {}\n" for _ in range(5))
    start_agent(cluster, "worker-1", [node_yaml("h100-1", ramp)], wait_nodes=("h100-1",))
    high = wait_for(lambda: events(cluster, "GPUTemperatureHigh"), timeout=20, what="GPUTemperatureHigh")
    assert "GPU 2" in high[0]["message"] and "h100-1" in high[0]["message"], high[0]
    normal = wait_for(lambda: events(cluster, "GPUTemperatureNormal"), timeout=25, what="GPUTemperatureNormal")
    assert "GPU 2" in normal[0]["message"]
    assert len(events(cluster, "GPUTemperatureHigh")) == 1  # one event per crossing, not per sample
