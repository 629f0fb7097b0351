"""Durability and convergence: a 2xx means committed; kill -9 at any moment loses nothing that was
acknowledged and shows nothing half-written; restarting egsd or an agent converges without
double provisioning."""
import http.client
import json
import os
import threading
import time

from conftest import H100, Cluster, Egsd, wait_for


def test_kill9_during_2000_concurrent_creates(tmpdir_path):
    egsd = Egsd(os.path.join(tmpdir_path, "egsd")).start()
    admin = egsd.api()
    token = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    agent = egsd.api(token)
    agent.ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
        dict(name="n%d" % i, **H100) for i in range(4)]})
    admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["c1"], "namespaces": ["w"]})

    acked = {}  # gprId -> index
    lock = threading.Lock()
    key = egsd.admin_key
    total, threads = 2000, 64
    killed = threading.Event()

    def worker(t):
        conn = http.client.HTTPConnection("127.0.0.1", egsd.port, timeout=10)
        for i in range(t, total, threads):
            body = {"gprName": "job-%d" % i, "sliceName": "w", "numberOfGPUNodes": 1, "numberOfGPUs": 1 + i % 8,
                    "exitDuration": "%dm" % (10 + i % 50), "priority": 1 + i % 300}
            try:
                conn.request("POST", "/api/v1/gpr", json.dumps(body),
                             {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException):
                return  # the server died under us: this request was never acknowledged
            if resp.status == 200:
                with lock:
                    acked[json.loads(data)["data"]["gprId"]] = i

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    wait_for(lambda: len(acked) >= 700, timeout=60, interval=0.001, what="700 acknowledged creates")
    egsd.proc.kill()  # SIGKILL mid-burst
    killed.set()
    for th in pool:
        th.join(30)
    egsd.stop()
    assert 700 <= len(acked) < total, len(acked)

    again = Egsd(egsd.data_dir).start()
    try:
        items = again.api().get("/api/v1/gpr/list?sliceName=w")["items"]
        by_id = {g["gprId"]: g for g in items}
        missing = [g for g in acked if g not in by_id]
        assert not missing, "%d acknowledged GPRs lost, e.g. %s" % (len(missing), missing[:3])
        # Nothing half-written: every stored GPR is exactly what some request sent.
        for g in items:
            i = int(g["gprName"].split("-")[1])
            assert g["numberOfGPUs"] == 1 + i % 8 and g["priority"] == 1 + i % 300
            assert g["exitDuration"] == "0h%dm0s" % (10 + i % 50)
            assert g["status"]["provisioningStatus"] in ("Queued", "Provisioning")
        # Requests that never got an answer may or may not have committed; at most one turn's worth.
        assert len(items) - len(acked) <= threads
        # The queue was re-derived: a new GPR still gets an estimate and an id.
        assert again.api().ok("POST", "/api/v1/gpr", {"gprName": "after", "sliceName": "w",
                                                        "numberOfGPUNodes": 1, "exitDuration": "1h"})["gprId"]
    finally:
        again.stop()


def test_egsd_restart_keeps_provisioned_gpr_and_agent_reconnects(cluster):
    agent = cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    cluster.workspace("a", ["worker-1"])
    cluster.workspace("b", ["worker-1"])
    run = cluster.gpr(sliceName="a", exitDuration="2h")
    cluster.wait_state(run, "Provisioned")
    before = cluster.status(run)
    cluster.egsd.stop(sig="kill")
    cluster.egsd.start()  # same port and data dir
    after = cluster.status(run)
    assert after["status"]["provisioningStatus"] == "Provisioned"
    assert after["status"]["nodes"] == before["status"]["nodes"]
    assert after["status"]["startTimestamp"] == before["status"]["startTimestamp"]
    # The agent re-registers by itself; a new GPR gets the other node, never the held one.
    wait_for(lambda: len(cluster.schedulable_nodes("worker-1")) == 2, timeout=30, what="agent reconnect")
    other = cluster.gpr(sliceName="b")
    st = cluster.wait_state(other, "Provisioned", timeout=30)
    assert st["status"]["nodes"] != before["status"]["nodes"]
    state = agent.attach_state()
    assert run in json.dumps(state) and other in json.dumps(state)


def test_agent_restart_converges_and_expiry_while_agent_down(cluster):
    agent = cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.workspace("a", ["worker-1"])
    cluster.workspace("b", ["worker-1"])
    run = cluster.gpr(sliceName="a", exitDuration="1h")
    cluster.wait_state(run, "Provisioned")
    agent.stop(sig="kill")
    queued = cluster.gpr(sliceName="b")
    cluster.advance("1h")  # the window ends while the agent is away
    st = cluster.wait_state(run, "Releasing")
    assert st["status"]["provisioningStatus"] == "Releasing"
    assert cluster.status(queued)["status"]["provisioningStatus"] == "Queued"  # node not back yet
    agent.start()  # reads its state file, reports the attachment, gets the detach
    cluster.wait_state(run, "Complete", timeout=30)
    cluster.wait_state(queued, "Provisioned", timeout=30)
    state = json.dumps(agent.attach_state())
    assert queued in state and run not in state


def test_sigterm_drains_and_exits_cleanly(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    proc = cluster.egsd.proc
    proc.terminate()
    assert proc.wait(10) == 0
    assert "draining" in cluster.egsd.logs()
    assert cluster.egsd.admin_key not in cluster.egsd.logs()
    assert cluster.tokens["worker-1"] not in cluster.egsd.logs()
