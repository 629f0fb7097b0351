"""The agent protocol's wire additions on egsd's side (docs/internals/agent-protocol.md, "Checks and
peers"): check results in action results and GPR status, the post-exit failure, lenient attachedGpr
at registration, node addresses and gprNodes.  The agent is this test speaking the protocol."""
from conftest import H100, wait_for


def node_body(name, **extra):
    body = dict(name=name, gpus=[{"uuid": "GPU-%s-%d" % (name, i)} for i in range(8)], **H100)
    body.update(extra)
    return body


class WireAgent:
    def __init__(self, cluster, name, nodes, addresses=None):
        self.name = name
        token = cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": name})["agentToken"]
        self.api = cluster.egsd.api(token)
        self.attached = {n: "" for n in nodes}
        addresses = addresses or {}
        self.registered = self.api.ok("POST", "/api/v1/agent/register", {"clusterName": name, "nodes": [
            node_body(n, **({"address": addresses[n]} if n in addresses else {})) for n in nodes]})
        self.heartbeat()

    def heartbeat(self, health="Healthy"):
        nodes = [{"name": n, "health": health, "attachedGpr": a} for n, a in self.attached.items()]
        return self.api.call("POST", "/api/v1/agent/heartbeat", {"clusterName": self.name, "nodes": nodes})

    def actions(self):
        return self.api.get("/api/v1/agent/actions?wait=0")["actions"]

    def result(self, a, ok=True, checks=None, message="", expect=200):
        body = {"actionId": a["actionId"], "type": a["type"], "gprId": a["gprId"], "node": a["node"], "ok": ok,
                "message": message}
        if checks is not None:
            body["checks"] = checks
        status, doc = self.api.call("POST", "/api/v1/agent/actions/result", body)
        assert status == expect, (status, doc)
        if ok and status == 200:
            self.attached[a["node"]] = a["gprId"] if a["type"] == "attach" else ""
        return doc


def check(name, phase="pre", status="passed", output="fine", ms=12):
    return {"name": name, "phase": phase, "status": status, "output": output, "durationMs": ms}


def provision(cluster, agent, checks=None, **kw):
    gid = cluster.gpr(sliceName="w", **kw)
    def step():
        for a in agent.actions():
            agent.result(a, checks=checks)
        return cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned"
    wait_for(step, what="provisioned")
    return gid


def events(cluster, reason):
    return [e for e in cluster.admin.get("/api/v1/events?reason=" + reason)["items"] if e["reason"] == reason]


def test_register_advertises_checks(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    assert agent.registered["features"] == ["checks", "sharing", "pods"]


def test_checks_are_shown_latest_per_node_and_phase(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = provision(cluster, agent, checks=[check("node-health"), check("storage", status="skipped", output="")])
    runs = cluster.status(gid)["status"]["checks"]
    assert len(runs) == 1
    run = runs[0]
    assert run["node"] == "n1" and run["phase"] == "pre" and run["ok"] is True and run["time"].endswith("Z")
    assert run["checks"] == [check("node-health"), check("storage", status="skipped", output="")]
    # A repeat of the attach result replaces the run instead of adding one.
    a = {"actionId": "attach:%s:n1" % gid, "type": "attach", "gprId": gid, "node": "n1"}
    agent.result(a, checks=[check("gpu-processes", output="no processes")])
    runs = cluster.status(gid)["status"]["checks"]
    assert [r["checks"][0]["name"] for r in runs] == ["gpu-processes"]
    # The detach's post checks come as a second run.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    for d in agent.actions():
        assert d["type"] == "detach" and "gprNodes" not in d
        agent.result(d, checks=[check("storage", phase="post", output="/scratch writable")])
    st = cluster.status(gid)["status"]
    assert st["provisioningStatus"] == "Complete"
    assert [(r["phase"], r["ok"]) for r in st["checks"]] == [("pre", True), ("post", True)]


def test_bad_checks_are_refused_naming_the_field(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = cluster.gpr(sliceName="w")
    a = wait_for(lambda: agent.actions(), what="attach")[0]
    good = check("node-health")
    cases = [
        ("x", "checks"),
        ([good] * 17, "checks"),
        ([good, good, dict(good, status="broken")], "checks[2].status"),
        ([dict(good, phase="during")], "checks[0].phase"),
        ([dict(good, name="")], "checks[0].name"),
        ([dict(good, name="a b")], "checks[0].name"),
        ([dict(good, output="x" * 256)], "checks[0].output"),
        ([dict(good, output="line\nbreak")], "checks[0].output"),
        ([dict(good, durationMs=-1)], "checks[0].durationMs"),
        ([dict(good, durationMs="12")], "checks[0].durationMs"),
        ([dict(good, extra=1)], "checks[0].extra"),  # an unknown key: named with its path (body_check.c)
        (["node-health"], "checks[0]"),
    ]
    for checks, field in cases:
        doc = agent.result(a, checks=checks, expect=422)
        assert doc["error"]["data"]["field"] == field and field in doc["error"]["message"], (field, doc)
    # Nothing of a refused result was applied.
    st = cluster.status(gid)["status"]
    assert st["provisioningStatus"] == "Provisioning" and "checks" not in st
    agent.result(a, checks=[dict(good, output="é" * 127)])
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned"


def test_failed_pre_check_is_shown_on_the_requeued_gpr(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = cluster.gpr(sliceName="w")
    a = wait_for(lambda: agent.actions(), what="attach")[0]
    agent.result(a, ok=False, message="pre-check gpu-processes failed",
                 checks=[check("gpu-processes", status="failed", output="GPU 0 runs pid 4242")])
    st = cluster.status(gid)["status"]
    assert st["provisioningStatus"] == "Queued" and st["retryCount"] == 1
    assert st["checks"][0]["ok"] is False and st["checks"][0]["checks"][0]["status"] == "failed"


def test_failed_post_exit_check_frees_and_quarantines_the_node(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = provision(cluster, agent)
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    d = agent.actions()[0]
    assert d["type"] == "detach"
    # The agent detached, then its storage check failed; it still reports the node as attached
    # in no heartbeat (none is sent here): egsd must not wait for one.
    agent.result(d, ok=False, message="detached, but post-check storage failed: /scratch read-only",
                 checks=[check("node-health", phase="post"),
                         check("storage", phase="post", status="failed", output="/scratch read-only")])
    st = cluster.status(gid)["status"]
    assert st["provisioningStatus"] == "Complete"
    assert st["checks"][-1]["phase"] == "post" and st["checks"][-1]["ok"] is False
    node = [n for n in cluster.admin.get("/api/v1/inventory/list")["items"] if n["gpuNodeName"] == "n1"][0]
    assert node["nodeHealth"] == "Unhealthy"
    ev = events(cluster, "PostExitCheckFailed")
    assert len(ev) == 1 and ev[0]["type"] == "Warning" and "n1" in ev[0]["message"] and "read-only" in ev[0]["message"]
    assert events(cluster, "DetachFailed") == []
    # Quarantined: a Healthy heartbeat does not bring it back, so a new GPR waits.
    agent.attached["n1"] = ""
    agent.heartbeat("Healthy")
    node = [n for n in cluster.admin.get("/api/v1/inventory/list")["items"] if n["gpuNodeName"] == "n1"][0]
    assert node["nodeHealth"] == "Unhealthy"
    g2 = cluster.gpr(sliceName="w")
    assert agent.actions() == [] and cluster.status(g2)["status"]["provisioningStatus"] == "Queued"
    # After the quarantine it does.
    cluster.advance("301s")
    agent.heartbeat("Healthy")
    wait_for(lambda: [a for a in agent.actions() if a["type"] == "attach"], what="attach after quarantine")


def test_failed_detach_without_post_check_failure_is_still_detach_failed(cluster):
    agent = WireAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = provision(cluster, agent)
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    d = agent.actions()[0]
    agent.result(d, ok=False, message="on-detach hook failed", checks=[check("storage", phase="post")])
    assert len(events(cluster, "DetachFailed")) == 1 and events(cluster, "PostExitCheckFailed") == []
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Releasing"


def test_malformed_attached_gpr_is_ignored_with_a_warning(cluster):
    token = cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    api = cluster.egsd.api(token)
    for bad in (42, "x" * 40, "../../etc", "gpr\u0001"):
        data = api.ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
            node_body("n1", attachedGpr=bad), node_body("n2", attachedGpr="")]})
        assert data["nodes"] == 2
    ev = events(cluster, "AttachedGprIgnored")
    assert ev and all(e["type"] == "Warning" and e["involvedObject"]["name"] == "c1/n1" for e in ev)
    names = {n["gpuNodeName"] for n in cluster.admin.get("/api/v1/inventory/list")["items"]}
    assert names == {"n1", "n2"}
    # The node counts as free: a GPR gets an attach for it, not a detach of the garbage.
    cluster.workspace("w", ["c1"])
    cluster.gpr(sliceName="w", numberOfGPUNodes=2)
    assert {a["type"] for a in api.get("/api/v1/agent/actions?wait=0")["actions"]} == {"attach"}
    # A well-formed but unknown GPR id is no warning: it is reconciled with a detach.
    n = len(events(cluster, "AttachedGprIgnored"))
    api.ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
        node_body("n1", attachedGpr="gpr-00000000-0000"), node_body("n2")]})
    assert len(events(cluster, "AttachedGprIgnored")) == n


def test_addresses_and_gpr_nodes(cluster):
    a1 = WireAgent(cluster, "c1", ["n1", "n2"], addresses={"n1": "10.0.0.1:7070", "n2": "[fd00::2]:7070"})
    a2 = WireAgent(cluster, "c2", ["m1"], addresses={"m1": "host-m1.example.com:7071"})
    cluster.workspace("w", ["c1", "c2"])
    nodes = {n["gpuNodeName"]: n for n in cluster.admin.get("/api/v1/inventory/list")["items"]}
    assert nodes["n1"]["address"] == "10.0.0.1:7070" and nodes["m1"]["address"] == "host-m1.example.com:7071"
    cluster.gpr(sliceName="w", clusterName="c1", numberOfGPUNodes=2)
    acts = a1.actions()
    assert len(acts) == 2
    for a in acts:
        assert sorted(a["gprNodes"], key=lambda x: x["node"]) == [
            {"node": "n1", "cluster": "c1", "address": "10.0.0.1:7070"},
            {"node": "n2", "cluster": "c1", "address": "[fd00::2]:7070"}]
    assert a2.actions() == []
    # Registering again without an address clears it; gprNodes then says "".
    a1.api.ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [node_body("n1"), node_body("n2")]})
    nodes = {n["gpuNodeName"]: n for n in cluster.admin.get("/api/v1/inventory/list")["items"]}
    assert "address" not in nodes["n1"]
    assert {x["address"] for x in a1.actions()[0]["gprNodes"]} == {""}


def test_bad_addresses_are_refused(cluster):
    token = cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    api = cluster.egsd.api(token)
    for bad in ("10.0.0.1", "10.0.0.1:0", "10.0.0.1:65536", ":7070", "host name:1", "h:" + "1" * 6,
                "a" * 120 + ".com:7070", "[fd00::2:7070", "host:70x", 7070, "host\n:1"):
        status, doc = api.call("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
            node_body("n1"), node_body("n2", address=bad)]})
        assert status == 422 and doc["error"]["data"]["field"] == "nodes[1].address", (bad, status, doc)
    assert cluster.admin.get("/api/v1/inventory/list")["items"] == []


def test_unmanaged_nodes_are_listed_validated_and_never_scheduled(cluster):
    """Registration's unmanagedNodes: listed under inventory unmanagedNodes (only for callers who see the
    cluster), replaced by the next registration, never given a GPR; malformed ones get 422 naming the field and
    change nothing."""
    agent = WireAgent(cluster, "k1", ["n1"])
    body = {"clusterName": "k1", "nodes": [node_body("n1")],
            "unmanagedNodes": [{"name": "brownfield-1", "gpuModel": "NVIDIA-A100-SXM4-40GB", "gpuCount": 8,
                                "memoryMiB": 40960, "instanceType": "p4d.24xlarge", "region": "us-east-1"}]}
    agent.api.ok("POST", "/api/v1/agent/register", body)
    inv = cluster.admin.get("/api/v1/inventory/list")
    assert [n["gpuNodeName"] for n in inv["items"]] == ["n1"]
    (u,) = inv["unmanagedNodes"]
    assert u["gpuNodeName"] == "brownfield-1" and u["clusterName"] == "k1" and u["gpuCount"] == 8
    assert u["nodeHealth"] == "Unmanaged" and u["availableGPUs"] == 0 and u["gpuShape"] == "NVIDIA-A100-SXM4-40GB"
    for bad, field in ((["x"], "unmanagedNodes[0]"), ([{"gpuCount": 1}], "unmanagedNodes[0].name"),
                       ([{"name": "ok"}, {"name": "b", "gpuCount": -1}], "unmanagedNodes[1].gpuCount"),
                       ([{"name": "bad name"}], "unmanagedNodes[0].name"), ("x", "unmanagedNodes")):
        status, doc = agent.api.call("POST", "/api/v1/agent/register", dict(body, unmanagedNodes=bad))
        assert status == 422 and doc["error"]["data"]["field"] == field, (bad, doc)
    assert cluster.admin.get("/api/v1/inventory/list")["unmanagedNodes"] == inv["unmanagedNodes"]
    # Another workspace's owner does not see clusters outside its workspace.
    cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "k2"})
    cluster.workspace("other", ["k2"])
    owner = cluster.egsd.api(cluster.key("Owner", "other"))
    assert owner.get("/api/v1/inventory/list")["unmanagedNodes"] == []
    cluster.workspace("w", ["k1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUNodes=1)
    assert {a["node"] for a in agent.actions()} == {"n1"}
    assert "brownfield-1" not in str(cluster.status(gid))
    agent.api.ok("POST", "/api/v1/agent/register", dict(body, unmanagedNodes=[]))
    assert cluster.admin.get("/api/v1/inventory/list")["unmanagedNodes"] == []
