"""egsd's side of `pendingPods` (docs/internals/agent-protocol.md, heartbeat): the GPU pods of a slice that
wait for a GPR's nodes, as a kubernetes agent reports them.  The agent is this test speaking the protocol
(tests/api/test_k8s_obs.py runs the real agent against the fake API server)."""
from conftest import wait_for
from test_agent_wire import WireAgent


def pod(name="train", ns="w-dev", ws="w", gpus=2, **extra):
    body = {"name": name, "namespace": ns, "workspace": ws, "gpuRequest": gpus, "phase": "Pending",
            "reason": "Unschedulable", "message": "0/1 nodes are available", "since": "2026-11-25T10:00:00Z"}
    body.update(extra)
    return body


def beat(agent, pods):
    return agent.api.call("POST", "/api/v1/agent/heartbeat", {"clusterName": agent.name, "nodes": [
        {"name": n, "health": "Healthy", "attachedGpr": a} for n, a in agent.attached.items()], "pendingPods": pods})


def waiting(api, ws=None):
    items = api.get("/api/v1/workloads" + ("?sliceName=" + ws if ws else ""))["items"]
    return [w for w in items if w.get("gpuNodeName") is None]


def test_pending_pods_are_shown_with_the_gpr_they_wait_for(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    WireAgent(cluster, "c2", ["m1"])
    cluster.workspace("w", ["c1"], namespaces=["w-dev"])
    cluster.workspace("v", ["c1"], namespaces=["v-dev"])
    status, doc = beat(agent, [pod(), pod("stray", ns="x-dev"), pod("other-ws", ns="v-dev", ws="v")])
    assert status == 200, doc
    [w] = waiting(cluster.admin, "w")
    assert w["name"] == "train" and w["namespace"] == "w-dev" and w["gpuRequest"] == 2 and w["phase"] == "Pending"
    assert w["clusterName"] == "c1" and w["sliceName"] == "w" and w["waitingForGpr"] is None and w["gpus"] == []
    assert w["reason"] == "Unschedulable" and w["since"] == "2026-11-25T10:00:00Z"
    # A namespace the workspace does not hold is not shown, to anyone.
    assert sorted(x["name"] for x in waiting(cluster.admin)) == ["other-ws", "train"]
    # Scope: a viewer of v sees v's pod only, and gets 404 for w.
    viewer = cluster.egsd.api(cluster.key("Viewer", "v"))
    assert [x["name"] for x in waiting(viewer)] == ["other-ws"]
    assert viewer.call("GET", "/api/v1/workloads?sliceName=w")[0] == 404
    # The agent token cannot read the views.
    assert agent.api.call("GET", "/api/v1/workloads")[0] == 403
    # A queued GPR of the workspace is what the pod waits for (the one node is held by v).
    cluster.gpr(sliceName="v")
    for a in agent.actions():
        agent.result(a)
    gid = cluster.gpr(sliceName="w")
    beat(agent, [pod()])
    assert waiting(cluster.admin, "w")[0]["waitingForGpr"] == {"gprId": gid, "state": "Queued"}
    # A heartbeat without the field keeps the list; an empty list clears it.
    status, _ = agent.api.call("POST", "/api/v1/agent/heartbeat", {"clusterName": "c1", "nodes": []})
    assert status == 200 and len(waiting(cluster.admin, "w")) == 1
    assert beat(agent, None)[0] == 200 and len(waiting(cluster.admin, "w")) == 1  # null: not given
    assert beat(agent, [])[0] == 200
    assert waiting(cluster.admin, "w") == []


def test_a_pod_reported_by_a_cluster_outside_the_workspace_is_not_shown(cluster):
    WireAgent(cluster, "c1", ["n1"])
    other = WireAgent(cluster, "c2", ["m1"])
    cluster.workspace("w", ["c1"], namespaces=["w-dev"])
    assert beat(other, [pod()])[0] == 200
    assert waiting(cluster.admin, "w") == []


def test_bad_pending_pods_are_refused_whole(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"], namespaces=["w-dev"])
    assert beat(agent, [pod()])[0] == 200
    bad = [
        ("x", "pendingPods"),
        ([pod()] * 1001, "pendingPods"),
        ([pod(), 7], "pendingPods[1]"),
        ([pod(gpus=0)], "pendingPods[0].gpuRequest"),
        ([pod(gpus="2")], "pendingPods[0].gpuRequest"),
        ([pod(name="")], "pendingPods[0].name"),
        ([pod(ns="n" * 64)], "pendingPods[0].namespace"),
        ([pod(ws=None)], "pendingPods[0].workspace"),
        ([pod(), pod(message="bell\x07")], "pendingPods[1].message"),
        ([pod(reason=5)], "pendingPods[0].reason"),
    ]
    for body, field in bad:
        status, doc = beat(agent, body)
        assert status == 422, (field, status, doc)
        assert doc["error"]["data"]["field"] == field, (field, doc)
        # Nothing changed: the good list is still the one shown.
        assert [w["name"] for w in waiting(cluster.admin, "w")] == ["train"]
