"""GPU sharing end to end (seed 003): real egsd, a real egs-agent over a mock node of two GPUs, the local
backend's state file as the proof of what was attached with which shares, and
GET /api/v1/nodes/{node}/gpu-alloc-map as the allocation map."""
import json
from datetime import datetime

import pytest

from conftest import wait_for
from fakeagent import FakeAgent

TWO = {"instanceType": "g5.12xlarge", "gpuModel": "NVIDIA-A10G", "gpuCount": 2, "memoryMiB": 24576}
MAP = "/api/v1/nodes/%s/gpu-alloc-map"


def ts(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").timestamp()


def shared(cluster, ws, gpus, duration="1h", **kw):
    return cluster.gpr(sliceName=ws, gpuSharingMode="Shared", numberOfGPUs=gpus, exitDuration=duration, **kw)


def node_uuids(cluster, name, cluster_name="worker-1"):
    for n in cluster.admin.get("/api/v1/inventory/list")["items"]:
        if n["gpuNodeName"] == name and n["clusterName"] == cluster_name:
            return {g["uuid"] for g in n["gpus"]}
    raise AssertionError("no node " + name)


def alloc_map(api, node="share-1", query=""):
    return api.get(MAP % node + query)


def setup_pool(cluster):
    agent = cluster.add_cluster("worker-1", [("share-1", TWO)])
    for w in ("wa", "wb", "wc", "wd"):
        cluster.workspace(w, ["worker-1"])
    return agent


def shared_attachments(agent):
    return {a["gprId"]: a["shares"] for a in agent.attach_state().get("shared", [])}


def test_seed_scenario_waiting_share_and_dedicated(cluster):
    agent = setup_pool(cluster)
    uuids = node_uuids(cluster, "share-1")
    assert alloc_map(cluster.admin) == {u: "0.00" for u in uuids}

    a = shared(cluster, "wa", 0.2, "1h")
    sa = cluster.wait_state(a, "Provisioned")
    b = shared(cluster, "wb", 1.2, "2h")
    sb = cluster.wait_state(b, "Provisioned")
    # Both on the one node: 0.2 on one device, then 1.2 spread 0.60 + 0.60: 0.80 and 0.60.
    assert sa["status"]["nodes"] == sb["status"]["nodes"] == ["share-1"]
    amap = alloc_map(cluster.admin)
    assert set(amap) == uuids and sorted(amap.values()) == ["0.60", "0.80"]
    assert sa["numberOfGPUs"] == 0.2 and sa["gpuSharingMode"] == "Shared" and sa["status"]["numGpusAllocated"] == 0.2
    assert sb["numberOfGPUs"] == 1.2
    # The agent attached both to the node with exactly those shares.
    atts = wait_for(lambda: len(shared_attachments(agent)) == 2 and shared_attachments(agent), what="shares")
    assert sorted(atts[a].values()) == ["0.20"] and sorted(atts[b].values()) == ["0.60", "0.60"]
    assert set(atts[b]) == uuids
    inv = [n for n in cluster.admin.get("/api/v1/inventory/list")["items"] if n["gpuNodeName"] == "share-1"][0]
    assert inv["availableGPUs"] == 0 and inv["gpuNodeStatus"] == "NODE_RESERVED"
    assert sorted(x["totalGPUsAllocated"] for x in inv["allocation"]) == [0.2, 1.2]

    # 0.5 fits neither one device (0.20 and 0.40 free) nor two (0.25 each): it waits for the earliest
    # exit that makes room, A's; a dedicated GPR waits until every share has left the node.
    c = shared(cluster, "wc", 0.5, "1h")
    d = cluster.gpr(sliceName="wd", numberOfGPUs=1, exitDuration="1h")
    sc, sd = cluster.status(c), cluster.status(d)
    assert sc["status"]["provisioningStatus"] == "Queued" and sd["status"]["provisioningStatus"] == "Queued"
    assert sc["estimatedStartTime"] == sa["status"]["exitTimestamp"]
    assert sd["estimatedStartTime"] == sb["status"]["exitTimestamp"]

    # At A's exit C starts, exactly then: 0.25 + 0.25 beside B's 0.60 + 0.60.
    cluster.advance("1h")
    cluster.wait_state(a, "Complete")
    sc = cluster.wait_state(c, "Provisioned")
    assert sc["status"]["startTimestamp"] == sa["status"]["exitTimestamp"]
    amap = alloc_map(cluster.admin)
    assert sorted(amap.values()) == ["0.85", "0.85"]
    wait_for(lambda: set(shared_attachments(agent)) == {b, c}, what="A detached, C attached")
    assert cluster.status(d)["status"]["provisioningStatus"] == "Queued"

    # egsd restarts: the map and the plan are the same.
    cluster.egsd.stop()
    cluster.egsd.start()
    assert alloc_map(cluster.admin) == amap
    # The agent tells the new egsd again that it speaks sharing (registration or heartbeat).
    wait_for(lambda: cluster.status(d)["estimatedStartTime"] == sb["status"]["exitTimestamp"], what="D's estimate")
    assert set(shared_attachments(agent)) == {b, c}

    # Releases free exactly their shares; once the last share left, the dedicated GPR starts.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": b, "earlyRelease": True})
    cluster.wait_state(b, "Complete")
    assert sorted(alloc_map(cluster.admin).values()) == ["0.25", "0.25"]
    assert cluster.status(d)["status"]["provisioningStatus"] == "Queued"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": c, "earlyRelease": True})
    cluster.wait_state(c, "Complete")
    cluster.wait_state(d, "Provisioned")
    assert alloc_map(cluster.admin) == {u: "1.00" for u in uuids}
    wait_for(lambda: not shared_attachments(agent), what="every share detached")
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": d, "earlyRelease": True})
    cluster.wait_state(d, "Complete")
    assert alloc_map(cluster.admin) == {u: "0.00" for u in uuids}


def test_refused_when_nothing_could_ever_hold_it(cluster):
    setup_pool(cluster)
    status, doc = cluster.admin.call("POST", "/api/v1/gpr", {
        "gprName": "big", "sliceName": "wa", "gpuSharingMode": "Shared", "numberOfGPUs": 3.0,
        "numberOfGPUNodes": 1, "exitDuration": "1h"})
    assert status == 422 and doc["error"]["data"]["field"] == "numberOfGPUs", doc
    assert cluster.admin.get("/api/v1/gpr/list")["items"] == []
    # 2.0 is the whole node: accepted, and spread 1.00 + 1.00.
    g = shared(cluster, "wa", 2)
    st = cluster.wait_state(g, "Provisioned")
    assert st["numberOfGPUs"] == 2 and sorted(alloc_map(cluster.admin).values()) == ["1.00", "1.00"]


BASE = {"gprName": "h", "sliceName": "wa", "gpuSharingMode": "Shared", "numberOfGPUs": 0.5, "numberOfGPUNodes": 1,
        "exitDuration": "1h"}
HOSTILE = [
    ("string", dict(BASE, numberOfGPUs="0.2"), "numberOfGPUs"),
    ("negative", dict(BASE, numberOfGPUs=-0.2), "numberOfGPUs"),
    ("zero", dict(BASE, numberOfGPUs=0), "numberOfGPUs"),
    ("thousandth", dict(BASE, numberOfGPUs=0.001), "numberOfGPUs"),
    ("three-decimals", dict(BASE, numberOfGPUs=0.125), "numberOfGPUs"),
    ("huge", dict(BASE, numberOfGPUs=1e9), "numberOfGPUs"),
    ("nan-string", dict(BASE, numberOfGPUs="NaN"), "numberOfGPUs"),
    ("bool", dict(BASE, numberOfGPUs=True), "numberOfGPUs"),
    ("list", dict(BASE, numberOfGPUs=[0.5]), "numberOfGPUs"),
    ("mode-int", dict(BASE, gpuSharingMode=5), "gpuSharingMode"),
    ("mode-weird", dict(BASE, gpuSharingMode="weird"), "gpuSharingMode"),
    ("two-nodes", dict(BASE, numberOfGPUNodes=2), "numberOfGPUNodes"),
    ("dedicated-fraction", dict(BASE, gpuSharingMode="Dedicated", numberOfGPUs=1.5), "numberOfGPUs"),
    ("default-mode-fraction", {k: v for k, v in dict(BASE, numberOfGPUs=0.5).items() if k != "gpuSharingMode"},
     "numberOfGPUs"),
]


@pytest.mark.parametrize("name,body,field", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_inputs_name_the_field_and_change_nothing(cluster, name, body, field):
    setup_pool(cluster)
    before = cluster.admin.get("/api/v1/gpr/list")["items"]
    for path in ("/api/v1/gpr", "/api/v1/gpr/waittime"):
        status, doc = cluster.admin.call("POST", path, body)
        assert status == 422, (path, status, doc)
        assert doc["error"]["data"]["field"] == field and field in doc["error"]["message"], doc
    assert cluster.admin.get("/api/v1/gpr/list")["items"] == before


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_json_numbers_are_malformed(cluster, raw):
    setup_pool(cluster)
    body = json.dumps(dict(BASE, numberOfGPUs=123456)).replace("123456", raw)
    status, doc = cluster.admin.call("POST", "/api/v1/gpr", body)
    assert status == 400 and doc["error"]["errorKey"] == "MALFORMED_JSON", (status, doc)
    assert cluster.admin.get("/api/v1/gpr/list")["items"] == []


def test_update_of_a_queued_shared_gpr_is_revalidated(cluster):
    setup_pool(cluster)
    hold = shared(cluster, "wa", 2, "3h")
    cluster.wait_state(hold, "Provisioned")
    g = shared(cluster, "wb", 0.5)
    assert cluster.status(g)["status"]["provisioningStatus"] == "Queued"
    for body, field in (({"numberOfGPUs": 0.001}, "numberOfGPUs"), ({"gpuSharingMode": "Dedicated"}, "numberOfGPUs"),
                        ({"numberOfGPUNodes": 2}, "numberOfGPUNodes"), ({"numberOfGPUs": 2.5}, "numberOfGPUs"),
                        ({"gpuSharingMode": "half"}, "gpuSharingMode")):
        status, doc = cluster.admin.call("PUT", "/api/v1/gpr", dict(body, gprId=g))
        assert status == 422 and doc["error"]["data"]["field"] == field, (body, doc)
    st = cluster.status(g)
    assert st["numberOfGPUs"] == 0.5 and st["gpuSharingMode"] == "Shared"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "numberOfGPUs": 1.25})
    assert cluster.status(g)["numberOfGPUs"] == 1.25
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "gpuSharingMode": "Dedicated", "numberOfGPUs": 1})
    st = cluster.status(g)
    assert st["numberOfGPUs"] == 1 and st["gpuSharingMode"] == "Dedicated"
    # waittime for a shared request: after the whole-node share and then the dedicated GPR queued
    # ahead of it (1h); once that is cancelled, when the whole-node share ends.
    hold_exit = cluster.status(hold)["status"]["exitTimestamp"]
    wt = cluster.admin.ok("POST", "/api/v1/gpr/waittime", dict(BASE, sliceName="wc"))
    assert ts(wt["estimatedStartTime"]) - ts(hold_exit) == 3600
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": g})
    wt = cluster.admin.ok("POST", "/api/v1/gpr/waittime", dict(BASE, sliceName="wc"))
    assert wt["estimatedStartTime"] == hold_exit and wt["items"][0]["clusterName"] == "worker-1"


def test_alloc_map_access_and_lookup(cluster):
    setup_pool(cluster)
    # A second cluster with a node of the same name, served by an agent without the sharing feature.
    FakeAgent(cluster, "worker-2", ["share-1"], shape=TWO)
    cluster.workspace("wx", ["worker-2"])
    a = shared(cluster, "wa", 0.2)
    cluster.wait_state(a, "Provisioned")
    admin = cluster.admin
    # The name is ambiguous for an admin: clusterName picks one.
    status, doc = admin.call("GET", MAP % "share-1")
    assert status == 422 and doc["error"]["data"]["field"] == "clusterName", doc
    assert sorted(alloc_map(admin, query="?clusterName=worker-1").values()) == ["0.00", "0.20"]
    assert alloc_map(admin, query="?clusterName=worker-2") == {FakeAgent.uuid("share-1", i): "0.00" for i in range(2)}
    status, doc = admin.call("GET", MAP % "share-1" + "?clusterName=worker-9")
    assert status == 404 and doc["error"]["errorKey"] == "NODE_NOT_FOUND" and doc["error"]["data"]["field"] == "node"
    for bad in ("nope", "%ff", "a" * 70, "..", "share-1%2fx"):
        status, doc = admin.call("GET", MAP % bad)
        assert status == 404 and doc["error"]["data"]["field"] == "node", (bad, doc)
    # Owners and viewers of wa see worker-1's node only (no ambiguity for them), worker-2's is 404.
    for role in ("Owner", "Viewer"):
        api = admin.with_token(admin.ok("POST", "/api/v1/auth", {"apiKey": cluster.key(role, "wa")})["token"])
        assert sorted(alloc_map(api).values()) == ["0.00", "0.20"]
        status, doc = api.call("GET", MAP % "share-1" + "?clusterName=worker-2")
        assert status == 404 and doc["error"]["errorKey"] == "NODE_NOT_FOUND", doc
        assert "worker-2" not in json.dumps(doc)
    wx = admin.with_token(admin.ok("POST", "/api/v1/auth", {"apiKey": cluster.key("Viewer", "wx")})["token"])
    assert alloc_map(wx) == {FakeAgent.uuid("share-1", i): "0.00" for i in range(2)}
    # Agents and anonymous callers may not read it.
    agent_api = admin.with_token(cluster.tokens["worker-1"])
    status, doc = agent_api.call("GET", MAP % "share-1")
    assert status == 403, doc
    status, doc = admin.with_token("").call("GET", MAP % "share-1")
    assert status == 401, doc
    status, _ = admin.call("POST", MAP % "share-1", {})
    assert status == 405


def test_old_agents_never_get_shares(cluster):
    old = FakeAgent(cluster, "worker-2", ["old-1"], shape=TWO)
    cluster.workspace("wx", ["worker-2"])
    g = shared(cluster, "wx", 0.5)
    st = cluster.status(g)
    assert st["status"]["provisioningStatus"] == "Queued" and st["estimatedStartTime"] is None
    assert old.serve() == []
    # A dedicated GPR still runs there as before.
    d = cluster.gpr(sliceName="wx", numberOfGPUs=1, priority=200)
    wait_for(lambda: old.serve() or cluster.status(d)["status"]["provisioningStatus"] == "Provisioned",
             what="dedicated on the old agent")
    assert cluster.status(g)["status"]["provisioningStatus"] == "Queued"


def test_usage_cost_and_fair_share_count_the_share(cluster):
    """A 0.5 share held 2 hours is 1 GPU-hour: in the usage report, in status.cost and in the fair-share
    figure that orders its workspace's next request (not 2 GPU-hours, its GPUs rounded up)."""
    setup_pool(cluster)
    cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": TWO["gpuModel"], "pricePerGpuHour": 3})
    t0 = cluster.advance("1s")["now"]
    half = shared(cluster, "wa", 0.5, duration="2h")
    cluster.wait_state(half, "Provisioned")
    cluster.advance("2h")
    st = cluster.wait_state(half, "Complete")
    assert st["status"]["cost"] == "3.00"
    rep = cluster.admin.get("/api/v1/usage?sliceName=wa&since=" + t0)["items"][0]
    assert rep["gpuHours"] == 1 and rep["cost"] == 3 and rep["items"][0]["gpus"] == 0.5
    # The node is busy with a dedicated GPR; wa's next request queues with its 1 GPU-hour behind it.
    busy = cluster.gpr(sliceName="wb", numberOfGPUs=2)
    cluster.wait_state(busy, "Provisioned")
    nxt = cluster.gpr(sliceName="wa", numberOfGPUs=2)
    item = [i for i in cluster.admin.get("/api/v1/queue")["items"] if i["gprId"] == nxt][0]
    assert abs(item["workspaceRecentGpuHours"] - 1.0) < 0.01
