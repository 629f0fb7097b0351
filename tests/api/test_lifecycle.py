"""The GPR lifecycle end to end: real egsd, real egs-agents over mock devices, the local backend's
state file as the proof of what was attached where and when."""
import os

from conftest import H100, A100, T4, wait_for


def test_provision_window_and_exit(cluster):
    agent = cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    ws = cluster.workspace("team-a", ["worker-1"], ["team-a-dev"])
    gid = cluster.gpr(gprName="train", sliceName=ws, numberOfGPUs=8, exitDuration="0d6h0m", memoryPerGpu=80)
    st = cluster.wait_state(gid, "Provisioned")
    assert st["status"]["numGpusAllocated"] == 8
    assert st["exitDuration"] == "6h0m0s"
    node = st["status"]["nodes"][0]
    # The agent attached exactly that node to the workspace, with the exit time of the window.
    state = wait_for(lambda: agent.attach_state().get(node) or agent.attach_state().get("nodes", {}).get(node),
                     what="attach state")
    assert gid in str(state) and "team-a" in str(state)
    start, exit_ts = st["status"]["startTimestamp"], st["status"]["exitTimestamp"]
    from datetime import datetime
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    assert (datetime.strptime(exit_ts, fmt) - datetime.strptime(start, fmt)).total_seconds() == 6 * 3600
    inv = cluster.admin.get("/api/v1/inventory?sliceName=" + ws)["items"]
    assert inv and inv[0]["nodeName"] == [node] and inv[0]["totalGpus"] == 8
    # One second before the exit it is still provisioned; at the exit it is taken back.
    cluster.advance("5h59m59s")
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned"
    cluster.advance("1s")
    st = cluster.wait_state(gid, "Complete")
    assert st["status"]["internalState"] == "Released"
    assert st["status"]["completionTimestamp"] == exit_ts
    wait_for(lambda: gid not in str(agent.attach_state()), what="agent detach")
    assert cluster.admin.get("/api/v1/inventory?sliceName=" + ws)["items"] == []
    reasons = [e["reason"] for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"]]
    for r in ("Queued", "Provisioning", "Provisioned", "Progress25", "Progress50", "Progress75", "Exit", "Complete"):
        assert r in reasons, (r, reasons)


def test_one_provisioned_gpr_per_workspace_and_estimates(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    ws = cluster.workspace("team-a", ["worker-1"])
    first = cluster.gpr(sliceName=ws, exitDuration="2h")
    second = cluster.gpr(sliceName=ws, exitDuration="1h")
    st1 = cluster.wait_state(first, "Provisioned")
    st2 = cluster.status(second)
    assert st2["status"]["provisioningStatus"] == "Queued"  # a free node exists, but the workspace is busy
    assert st2["estimatedStartTime"] == st1["status"]["exitTimestamp"]
    assert st2["estimatedWaitTime"] in ("2h0m0s", "1h59m59s")
    # Early release of the first moves the second in at once.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": first, "earlyRelease": True})
    cluster.wait_state(first, "Complete")
    cluster.wait_state(second, "Provisioned")
    assert cluster.status(first)["earlyRelease"] is True


def test_priority_order_and_busy_inventory(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    for w in ("a", "b", "c"):
        cluster.workspace(w, ["worker-1"])
    running = cluster.gpr(sliceName="a", exitDuration="1h")
    cluster.wait_state(running, "Provisioned")
    low = cluster.gpr(sliceName="b", exitDuration="1h", priority=50)
    high = cluster.gpr(sliceName="c", exitDuration="1h", priority=250)
    assert cluster.status(high)["estimatedStartTime"] < cluster.status(low)["estimatedStartTime"]
    # Raising the low one above the high one reorders the queue.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": low, "priority": 301})
    assert cluster.status(low)["estimatedStartTime"] < cluster.status(high)["estimatedStartTime"]
    cluster.advance("1h")
    cluster.wait_state(low, "Provisioned")
    assert cluster.status(high)["status"]["provisioningStatus"] == "Queued"


def test_unsatisfiable_request_refused_with_reason(cluster):
    cluster.add_cluster("worker-1", [("t4-1", T4)])
    cluster.add_cluster("worker-2", [("a100-1", A100)])
    cluster.workspace("w", ["worker-1", "worker-2"])
    cases = [
        ({"numberOfGPUs": 8, "clusterName": "worker-1"}, "numberOfGPUs"),
        ({"gpuShape": "NVIDIA-B200"}, "gpuShape"),
        ({"memoryPerGpu": 80}, "memoryPerGpu"),
        ({"numberOfGPUNodes": 2}, "numberOfGPUNodes"),
        ({"instanceType": "p5.48xlarge"}, "instanceType"),
    ]
    for extra, field in cases:
        body = {"gprName": "x", "sliceName": "w", "numberOfGPUNodes": 1, "exitDuration": "1h"}
        body.update(extra)
        status, doc = cluster.admin.call("POST", "/api/v1/gpr", body)
        assert status == 422, (extra, doc)
        assert doc["error"]["errorKey"] == "GPR_UNSATISFIABLE"
        assert doc["error"]["data"]["field"] == field, (extra, doc)
    assert cluster.admin.get("/api/v1/gpr/list?sliceName=w")["items"] == []
    # 15 GB on the T4 (16 GB) is fine: memory below 1024 means GB.
    cluster.gpr(sliceName="w", memoryPerGpu=15, clusterName="worker-1")


def test_cancel_release_and_state_errors(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.workspace("a", ["worker-1"])
    cluster.workspace("b", ["worker-1"])
    run = cluster.gpr(sliceName="a")
    cluster.wait_state(run, "Provisioned")
    waiting = cluster.gpr(sliceName="b")

    def err(method, body):
        status, doc = cluster.admin.call(method, "/api/v1/gpr", body)
        assert status == 409, doc
        return doc["error"]["errorKey"], doc["error"]["message"]

    assert err("DELETE", {"gprId": run})[0] == "GPR_ALREADY_PROVISIONED"
    assert err("PUT", {"gprId": run, "priority": 200})[0] == "GPR_ALREADY_PROVISIONED"
    assert err("PUT", {"gprId": run, "gprName": "renamed"})[0] == "GPR_ALREADY_PROVISIONED"
    key, msg = err("PUT", {"gprId": waiting, "earlyRelease": True})
    assert key == "GPR_NOT_PROVISIONED" and "cancel" in msg
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": waiting, "gprName": "renamed", "priority": 150})
    st = cluster.status(waiting)
    assert st["gprName"] == "renamed" and st["priority"] == 150
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": waiting})
    assert cluster.status(waiting)["status"]["provisioningStatus"] == "Cancelled"
    assert err("DELETE", {"gprId": waiting})[0] == "GPR_ALREADY_FINISHED"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": run, "earlyRelease": True})
    cluster.wait_state(run, "Complete")
    assert err("PUT", {"gprId": run, "earlyRelease": True})[0] == "GPR_ALREADY_RELEASED"


def test_edit_queued_gpr_is_revalidated(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.workspace("a", ["worker-1"])
    cluster.workspace("b", ["worker-1"])
    cluster.wait_state(cluster.gpr(sliceName="a"), "Provisioned")
    q = cluster.gpr(sliceName="b", exitDuration="1h")
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": q, "exitDuration": "3h", "numberOfGPUs": 4})
    st = cluster.status(q)
    assert st["exitDuration"] == "3h0m0s" and st["numberOfGPUs"] == 4
    status, doc = cluster.admin.call("PUT", "/api/v1/gpr", {"gprId": q, "numberOfGPUs": 16})
    assert status == 422
    status, doc = cluster.admin.call("PUT", "/api/v1/gpr", {"gprId": q, "numberOfGPUNodes": 2, "exitDuration": "2h"})
    assert status == 422 and doc["error"]["data"]["field"] == "numberOfGPUNodes"
    st2 = cluster.status(q)
    assert st2["exitDuration"] == "3h0m0s" and st2["numberOfGPUNodes"] == 1  # nothing changed


def test_edit_of_a_queued_gprs_shape_and_preferred_clusters_is_planned(cluster):
    """A queued GPR asking for a busy H100 is edited to ask for the free A100: the planner must plan the
    new shape (it caches which node pools a GPR matches) and start it there. And preferredClusters
    edited to another list of the same length is an edit too."""
    cluster.add_cluster("worker-1", [("h100-1", H100), ("a100-1", A100)])
    cluster.add_cluster("worker-2", [("h100-9", H100)])
    cluster.workspace("a", ["worker-1", "worker-2"])
    cluster.workspace("b", ["worker-1", "worker-2"])
    cluster.workspace("c", ["worker-1", "worker-2"])
    for ws, cl in (("a", "worker-1"), ("c", "worker-2")):
        cluster.wait_state(cluster.gpr(sliceName=ws, clusterName=cl, numberOfGPUs=8, gpuShape=H100["gpuModel"],
                                       exitDuration="5h"), "Provisioned")
    q = cluster.gpr(sliceName="b", numberOfGPUs=8, gpuShape=H100["gpuModel"], exitDuration="1h",
                    preferredClusters=["worker-1"])
    assert cluster.status(q)["status"]["provisioningStatus"] == "Queued"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": q, "preferredClusters": ["worker-2"]})
    assert cluster.status(q)["preferredClusters"] == ["worker-2"]
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": q, "gpuShape": A100["gpuModel"]})
    st = cluster.wait_state(q, "Provisioned")
    assert st["status"]["nodes"] == ["a100-1"] and st["gpuShape"] == A100["gpuModel"], st


def test_waittime_lists_every_matching_shape_sorted(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("a100-1", A100)])
    cluster.add_cluster("worker-2", [("h100-9", H100)])
    cluster.workspace("w", ["worker-1", "worker-2"])
    cluster.workspace("busy", ["worker-1"])
    cluster.wait_state(cluster.gpr(sliceName="busy", gpuShape="NVIDIA-H100-80GB-HBM3", clusterName="worker-1",
                                   exitDuration="3h"), "Provisioned")
    data = cluster.admin.ok("POST", "/api/v1/gpr/waittime",
                            {"gprName": "probe", "sliceName": "w", "numberOfGPUNodes": 1, "exitDuration": "1h"})
    items = data["items"]
    combos = {(i["clusterName"], i["gpuShape"]) for i in items}
    assert combos == {("worker-1", "NVIDIA-H100-80GB-HBM3"), ("worker-1", "NVIDIA-A100-SXM4-40GB"),
                      ("worker-2", "NVIDIA-H100-80GB-HBM3")}
    starts = [i["estimatedStartTime"] for i in items]
    assert starts == sorted(starts)
    busy = [i for i in items if i["clusterName"] == "worker-1" and i["gpuShape"].startswith("NVIDIA-H100")][0]
    assert busy["freeNodes"] == 0 and busy["totalNodes"] == 1 and busy["estimatedWaitTime"] in ("3h0m0s", "2h59m59s")
    assert items[0]["estimatedWaitTime"] == "0h0m0s"
    assert data["estimatedWaitTime"] == "0h0m0s"


def test_attach_and_detach_hooks_get_the_window(cluster, tmpdir_path):
    import json as _json
    log = os.path.join(tmpdir_path, "hooks.log")
    hook = ("python3 -c 'import json,os; open(\"%s\",\"a\").write(json.dumps({k: v for k, v in os.environ.items() "
            "if k.startswith(\"EGS_\")})+\"\\n\")'" % log)
    cluster.add_cluster("worker-1", [("h100-1", H100)], extra=["--on-attach", hook, "--on-detach", hook])
    cluster.workspace("team-a", ["worker-1"], ["ns-one", "ns-two"])
    gid = cluster.gpr(sliceName="team-a", exitDuration="90m")
    st = cluster.wait_state(gid, "Provisioned")
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    cluster.wait_state(gid, "Complete")
    lines = [_json.loads(l) for l in open(log).read().splitlines()]
    assert [l["EGS_ACTION"] for l in lines] == ["attach", "detach"]
    a = lines[0]
    assert a["EGS_NODE"] == "h100-1" and a["EGS_CLUSTER"] == "worker-1" and a["EGS_GPR_ID"] == gid
    assert a["EGS_WORKSPACE"] == "team-a" and a["EGS_NAMESPACES"] == "ns-one,ns-two"
    from datetime import datetime
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    span = datetime.strptime(a["EGS_EXIT_TIME"], fmt) - datetime.strptime(a["EGS_START_TIME"], fmt)
    assert span.total_seconds() == 90 * 60
    assert "EGS_TOKEN" not in a and cluster.tokens["worker-1"] not in open(log).read()


def test_failed_attach_hook_retries_on_another_node(cluster, tmpdir_path):
    # The hook refuses node h100-1: the GPR must come back to the queue and land on h100-2.
    hook = 'test "$EGS_NODE" != h100-1 || { echo "nvidia-smi: GPU 3 fell off the bus"; exit 1; }'
    cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)], extra=["--on-attach", hook])
    cluster.workspace("w", ["worker-1"])
    gid = cluster.gpr(sliceName="w")
    st = cluster.wait_state(gid, "Provisioned")
    assert st["status"]["nodes"] == ["h100-2"] and st["status"]["retryCount"] == 1
    assert "fell off the bus" in st["status"]["failureReason"]
    bad = [n for n in cluster.admin.get("/api/v1/inventory/list")["items"] if n["gpuNodeName"] == "h100-1"][0]
    assert bad["nodeHealth"] == "Unhealthy"
