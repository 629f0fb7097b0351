"""GET /api/v1/queue: queue order, positions per cluster and shape, estimates, scope."""
from conftest import H100, A100


def test_queue_positions_groups_and_scope(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("a100-1", A100)])
    for w in ("busy-h", "busy-a", "a", "b"):
        cluster.workspace(w, ["worker-1"])
    h, a = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"
    cluster.wait_state(cluster.gpr(sliceName="busy-h", gpuShape=h, exitDuration="2h"), "Provisioned")
    cluster.wait_state(cluster.gpr(sliceName="busy-a", gpuShape=a, exitDuration="1h"), "Provisioned")
    q1 = cluster.gpr(sliceName="a", gpuShape=h, priority=100)
    q2 = cluster.gpr(sliceName="b", gpuShape=a, priority=200)
    q3 = cluster.gpr(sliceName="b", gpuShape=h, priority=250)
    data = cluster.admin.get("/api/v1/queue")
    assert data["queueLength"] == 3
    got = [(i["gprId"], i["position"], i["positionInGroup"]) for i in data["items"]]
    assert got == [(q3, 1, 1), (q2, 2, 1), (q1, 3, 2)]
    est = {i["gprId"]: i["estimatedStartTime"] for i in data["items"]}
    assert est[q3] < est[q1]  # same shape: the higher priority goes first
    assert est[q2] == cluster.status(q2)["estimatedStartTime"]
    groups = {(g["gpuShape"], g["queued"]) for g in data["groups"]}
    assert groups == {(h, 2), (a, 1)}
    only_a = cluster.admin.get("/api/v1/queue?gpuShape=" + a)["items"]
    assert [i["gprId"] for i in only_a] == [q2]
    # An owner of workspace a sees its own entry only, at its global position.
    owner = cluster.admin.with_token(cluster.key("Owner", "a"))
    mine = owner.get("/api/v1/queue")["items"]
    assert [(i["gprId"], i["position"]) for i in mine] == [(q1, 3)]
    # Raising q1 above everything moves it to the front.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": q1, "priority": 300})
    assert cluster.admin.get("/api/v1/queue")["items"][0]["gprId"] == q1
    status, doc = cluster.admin.with_token(cluster.tokens["worker-1"]).call("GET", "/api/v1/queue")
    assert status == 403 and doc["error"]["errorKey"] == "FORBIDDEN"


def test_move_to_top_and_evict(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    for w in ("run", "a", "b"):
        cluster.workspace(w, ["worker-1"])
    run = cluster.gpr(sliceName="run", exitDuration="3h", requeueOnFailure=True)
    cluster.wait_state(run, "Provisioned")
    a = cluster.gpr(sliceName="a", priority=250)
    b = cluster.gpr(sliceName="b", priority=50)
    top = cluster.admin.ok("POST", "/api/v1/queue/top", {"gprId": b})
    assert top["priority"] == 251
    assert [i["gprId"] for i in cluster.admin.get("/api/v1/queue")["items"]] == [b, a]
    owner = cluster.admin.with_token(cluster.key("Owner", "b"))
    status, doc = owner.call("POST", "/api/v1/queue/top", {"gprId": b})
    assert status == 403
    # Evict the running GPR: it asked to be requeued, so it waits again, and b gets the node.
    status, doc = cluster.admin.call("POST", "/api/v1/gpr/evict", {"gprId": run})
    assert status == 422 and doc["error"]["data"]["field"] == "reason"
    cluster.admin.ok("POST", "/api/v1/gpr/evict", {"gprId": run, "reason": "maintenance of rack 4"})
    st = cluster.status(run)
    assert st["status"]["provisioningStatus"] == "Queued" and "rack 4" in st["status"]["failureReason"]
    cluster.wait_state(b, "Provisioned")
    status, doc = cluster.admin.call("POST", "/api/v1/gpr/evict", {"gprId": a, "reason": "x"})
    assert status == 409 and doc["error"]["errorKey"] == "GPR_NOT_PROVISIONED"
    reasons = [e["reason"] for e in cluster.admin.get("/api/v1/events?gprId=" + run)["items"]]
    assert "Evicted" in reasons


def test_extend_only_when_it_delays_no_one(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    for w in ("a", "b"):
        cluster.workspace(w, ["worker-1"])
    g = cluster.gpr(sliceName="a", exitDuration="2h")
    st = cluster.wait_state(g, "Provisioned")
    # Nobody waits: a grace period is granted.
    data = cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "extendBy": "30m"})
    assert data["exitTimestamp"] > st["status"]["exitTimestamp"]
    assert cluster.status(g)["exitDuration"] == "2h30m0s"
    # Workspace b holds the other node for 4h and queues a 2-node GPR: it needs g's node at 2h30m.
    other = cluster.gpr(sliceName="b", exitDuration="4h")
    cluster.wait_state(other, "Provisioned")
    waiting = cluster.gpr(sliceName="b", numberOfGPUNodes=2, exitDuration="1h")
    before = cluster.status(waiting)["estimatedStartTime"]
    # It starts when b's own GPR ends (4h): extending g by 1h (to 3h30m) delays no one...
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "extendBy": "1h"})
    # ...but by 1h more (to 4h30m) it would.
    status, doc = cluster.admin.call("PUT", "/api/v1/gpr", {"gprId": g, "extendBy": "1h"})
    assert status == 409 and doc["error"]["errorKey"] == "GPR_EXTENSION_DELAYS_OTHERS"
    assert waiting in doc["error"]["message"]
    assert cluster.status(g)["exitDuration"] == "3h30m0s"
    assert cluster.status(waiting)["estimatedStartTime"] == before
    status, doc = cluster.admin.call("PUT", "/api/v1/gpr", {"gprId": waiting, "extendBy": "1h"})
    assert status == 409 and doc["error"]["errorKey"] == "GPR_NOT_PROVISIONED"
    status, doc = cluster.admin.call("PUT", "/api/v1/gpr", {"gprId": g, "extendBy": "1x"})
    assert status == 422 and doc["error"]["data"]["field"] == "extendBy"
