"""Monitoring and remediation, and the idle timeout, on the control plane's side.  The agent here is
this test itself speaking the agent protocol, so that node health and GPU utilisation are exactly
what each step needs (the real agent's own detection is tested with its scripted mock devices)."""
from conftest import H100, wait_for
from fakeagent import provisioned


class ScriptedAgent:
    def __init__(self, cluster, name, nodes):
        self.name = name
        token = cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": name})["agentToken"]
        self.api = cluster.egsd.api(token)
        self.nodes = {n: {"health": "Healthy", "util": 0.0, "attached": ""} for n in nodes}
        self.api.ok("POST", "/api/v1/agent/register", {"clusterName": name, "nodes": [
            dict(name=n, gpus=[{"uuid": "GPU-%s-%d" % (n, i)} for i in range(8)], **H100) for n in nodes]})
        self.heartbeat()

    def heartbeat(self):
        nodes = [{"name": n, "health": s["health"], "attachedGpr": s["attached"],
                  "gpus": [{"uuid": "GPU-%s-%d" % (n, i), "utilPct": s["util"], "tempC": 40, "powerW": 90}
                           for i in range(8)]} for n, s in self.nodes.items()]
        return self.api.call("POST", "/api/v1/agent/heartbeat", {"clusterName": self.name, "nodes": nodes})

    def serve(self):
        """Carries out every pending action at once; returns them."""
        acts = self.api.get("/api/v1/agent/actions?wait=0")["actions"]
        for a in acts:
            node = self.nodes[a["node"]]
            node["attached"] = a["gprId"] if a["type"] == "attach" else ""
            self.api.ok("POST", "/api/v1/agent/actions/result", {"actionId": a["actionId"], "type": a["type"],
                                                                "gprId": a["gprId"], "node": a["node"], "ok": True})
        return acts


def test_unhealthy_node_is_replaced(cluster):
    agent = ScriptedAgent(cluster, "c1", ["n1", "n2", "n3"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w", numberOfGPUNodes=2, exitDuration="4h")
    held = st["status"]["nodes"]
    assert sorted(held) == ["n1", "n2"]
    agent.nodes["n1"]["health"] = "Unhealthy"  # e.g. XID 79: the GPU fell off the bus
    agent.heartbeat()
    st = cluster.status(st["gprId"])
    assert sorted(st["status"]["nodes"]) == ["n2", "n3"]
    assert st["status"]["provisioningStatus"] == "Provisioned"
    acts = {(a["type"], a["node"]) for a in agent.serve()}
    assert acts == {("attach", "n3"), ("detach", "n1")}
    ev = [e for e in cluster.admin.get("/api/v1/events?gprId=" + st["gprId"])["items"] if e["reason"] == "NodeReplaced"]
    assert len(ev) == 1 and ev[0]["type"] == "Warning" and "n1" in ev[0]["message"] and "n3" in ev[0]["message"]
    # The window is untouched by the swap.
    assert cluster.status(st["gprId"])["status"]["exitTimestamp"] == st["status"]["exitTimestamp"]


def test_no_replacement_keeps_the_rest_with_one_warning(cluster):
    agent = ScriptedAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w", numberOfGPUNodes=2)
    agent.nodes["n2"]["health"] = "Unhealthy"
    for _ in range(3):
        agent.heartbeat()
    st2 = cluster.status(st["gprId"])
    assert st2["status"]["provisioningStatus"] == "Provisioned" and sorted(st2["status"]["nodes"]) == ["n1", "n2"]
    ev = [e for e in cluster.admin.get("/api/v1/events?gprId=" + st["gprId"])["items"] if e["reason"] == "NodeFailed"]
    assert len(ev) == 1 and ev[0]["type"] == "Warning"
    # The node comes back healthy: nothing to swap, and no new warning.
    agent.nodes["n2"]["health"] = "Healthy"
    agent.heartbeat()
    assert [e for e in cluster.admin.get("/api/v1/events?gprId=" + st["gprId"])["items"]
            if e["reason"] in ("NodeFailed", "NodeReplaced")] == ev


def test_silent_node_is_replaced_by_another_clusters_node_never(cluster):
    a1 = ScriptedAgent(cluster, "c1", ["n1", "n2"])
    a2 = ScriptedAgent(cluster, "c2", ["m1"])
    cluster.workspace("w", ["c1", "c2"])
    st = provisioned(cluster, a1, sliceName="w", clusterName="c1")
    # c1's agent goes silent: its nodes become unschedulable, and no c2 node may stand in.
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "30s", "keepHeartbeats": False})
    a2.heartbeat()
    st2 = cluster.status(st["gprId"])
    assert st2["status"]["nodes"] == st["status"]["nodes"]
    reasons = [e["reason"] for e in cluster.admin.get("/api/v1/events?gprId=" + st["gprId"])["items"]]
    assert "NodeFailed" in reasons and "NodeReplaced" not in reasons
    # A new GPR is never provisioned onto the silent cluster.
    cluster.workspace("v", ["c1"])
    q = cluster.gpr(sliceName="v")
    assert cluster.status(q)["status"]["provisioningStatus"] == "Queued"
    assert cluster.status(q)["estimatedStartTime"] is None


def test_idle_timeout_warns_then_releases(cluster):
    agent = ScriptedAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w", exitDuration="8h", idleTimeOutDuration="30m",
                     enforceIdleTimeOut=True)
    gid = st["gprId"]
    assert st["idleTimeOutDuration"] == "0h30m0s" and st["enforceIdleTimeOut"] is True
    agent.nodes["n1"]["util"] = 55.0
    agent.heartbeat()
    cluster.advance("1h")  # busy: nothing happens
    agent.heartbeat()
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned"
    agent.nodes["n1"]["util"] = 0.4  # under 1%
    agent.heartbeat()
    cluster.advance("21m")  # warned 10 minutes before the end (half the timeout when that is less)
    reasons = [e["reason"] for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"]]
    assert "IdleWarning" in reasons and "IdleTimeout" not in reasons
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned"
    cluster.advance("9m")
    st = cluster.status(gid)
    assert st["status"]["provisioningStatus"] in ("Releasing", "Complete") and st["earlyRelease"] is True
    reasons = [e["reason"] for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"]]
    assert reasons.index("IdleTimeout") < reasons.index("IdleWarning")  # newest first


def test_idle_without_enforcement_is_left_alone(cluster):
    agent = ScriptedAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w", exitDuration="8h", idleTimeOutDuration="30m")
    agent.heartbeat()
    cluster.advance("2h")
    assert cluster.status(st["gprId"])["status"]["provisioningStatus"] == "Provisioned"


def test_partial_attach_failure_detaches_the_node_left_behind(cluster):
    agent = ScriptedAgent(cluster, "c1", ["n1", "n2", "n3", "n4"])
    cluster.workspace("w", ["c1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUNodes=2)
    acts = agent.api.get("/api/v1/agent/actions?wait=0")["actions"]
    assert sorted(a["node"] for a in acts) == ["n1", "n2"]
    # n1 attaches, n2 fails its pre-check: the GPR goes back to the queue and lands on n3 and n4.
    ok = {"actionId": "x", "type": "attach", "gprId": gid, "node": "n1", "ok": True}
    agent.api.ok("POST", "/api/v1/agent/actions/result", ok)
    agent.nodes["n1"]["attached"] = gid
    agent.api.ok("POST", "/api/v1/agent/actions/result", dict(ok, node="n2", ok=False, message="ECC errors"))
    st = cluster.status(gid)
    assert st["status"]["retryCount"] == 1
    acts = {(a["type"], a["node"]) for a in agent.api.get("/api/v1/agent/actions?wait=0")["actions"]}
    # Whatever the new placement, n1 (left attached to the failed attempt) must be detached and never
    # re-attached unless the GPR holds it again.
    assert ("detach", "n1") in acts or ("attach", "n1") not in acts
    agent.serve()
    wait_for(lambda: agent.serve() or cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned",
             what="provisioned on other nodes")
    held = cluster.status(gid)["status"]["nodes"]
    assert "n2" not in held
    for n in ("n1", "n2", "n3", "n4"):
        assert (agent.nodes[n]["attached"] == gid) == (n in held), (n, held, agent.nodes)
