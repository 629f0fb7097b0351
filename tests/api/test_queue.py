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
