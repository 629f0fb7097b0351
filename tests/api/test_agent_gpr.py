"""POST/DELETE/GET /api/v1/agent/gprs: the routes egs-agent's GPUProvisioningRequest controller uses
(src/server/api_agent_gpr.c), called here directly with agent tokens of real clusters: who may call them,
which namespaces an agent may act in, the user API's validation and policies, idempotence per CR uid and
generation, cancel and release on delete, and the link surviving an egsd restart (SQLite, or PostgreSQL
with EGS_TEST_STORE=postgres)."""
from conftest import H100, Api, wait_for

ROUTE = "/api/v1/agent/gprs"
UID = "5f0c2c55-8a4e-4c4b-9a43-6c1f0e8b2d11"


def apply_body(ns="ws-dev", name="train", uid=UID, generation=1, **spec):
    body = {"numberOfGPUNodes": 1, "numberOfGPUs": 1, "exitDuration": "1h"}
    body.update(spec)
    return {"namespace": ns, "name": name, "uid": uid, "generation": generation, "spec": body}


def refused(resp, status, field=None, key=None):
    code, doc = resp
    assert code == status, doc
    if field:
        assert doc["error"]["data"]["field"] == field, doc
    if key:
        assert doc["error"]["errorKey"] == key, doc
    return doc["error"]["message"]


def make_env(cluster):
    cluster.add_cluster("k1", [("n1", H100)])
    cluster.add_cluster("k2", [("m1", H100)])
    cluster.workspace("ws", ["k1"], namespaces=["ws-dev"])
    cluster.workspace("ws2", ["k2"], namespaces=["ws2-dev"])
    cluster.workspace("other", ["k1"], namespaces=["other-dev"])
    return Api(cluster.egsd.port, cluster.tokens["k1"]), Api(cluster.egsd.port, cluster.tokens["k2"])


def test_roles_scope_validation_and_idempotence(cluster):
    """Only agents may call the routes (an Owner or an Admin gets 403); an agent acts only in namespaces its
    workspace lists on the agent's own cluster (403 naming namespace) and sees and ends only its own links;
    sliceName must be the namespace's workspace; the spec goes through the user API's validation (422 naming
    the field, nothing stored) and policies (maxGPRs); the same uid and generation never make a second GPR,
    and a higher generation updates the GPR."""
    k1, k2 = make_env(cluster)
    owner = cluster.admin.with_token(cluster.key("Owner", "ws"))
    for api in (owner, cluster.admin):
        refused(api.call("POST", ROUTE, apply_body()), 403)
        refused(api.call("GET", ROUTE), 403)
        refused(api.call("DELETE", ROUTE, {"uid": UID}), 403)

    refused(k2.call("POST", ROUTE, apply_body()), 403, "namespace")  # ws-dev is a namespace of ws on k1 only
    refused(k1.call("POST", ROUTE, apply_body(ns="nowhere")), 403, "namespace")
    refused(k1.call("POST", ROUTE, apply_body(sliceName="other")), 422, "sliceName")
    refused(k1.call("POST", ROUTE, apply_body(numberOfGPUs=0)), 422, "numberOfGPUs")
    refused(k1.call("POST", ROUTE, apply_body(gpuShape="NVIDIA-B200")), 422, "gpuShape")
    refused(k1.call("POST", ROUTE, apply_body(colour="blue")), 422, "colour")
    refused(k1.call("POST", ROUTE, apply_body(uid="a/b")), 422, "uid")
    refused(k1.call("POST", ROUTE, apply_body(name="Train")), 422, "name")
    refused(k1.call("POST", ROUTE, dict(apply_body(), spec=[1])), 422, "spec")
    refused(k1.call("POST", ROUTE, dict(apply_body(), extra=1)), 422, "extra")
    refused(k1.call("POST", ROUTE, dict(apply_body(), generation=0)), 422, "generation")
    assert cluster.admin.get("/api/v1/gpr/list")["items"] == [] and k1.get(ROUTE)["items"] == []

    gid = k1.ok("POST", ROUTE, apply_body(priority=120))["gprId"]
    assert k1.ok("POST", ROUTE, apply_body(priority=120))["gprId"] == gid
    assert k1.ok("POST", ROUTE, apply_body(priority=999))["gprId"] == gid  # same generation: nothing changes
    g = cluster.status(gid)
    assert (g["gprName"], g["sliceName"], g["priority"]) == ("train", "ws", 120)
    assert len(cluster.admin.get("/api/v1/gpr/list")["items"]) == 1
    wait_for(lambda: cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned", what="provisioned")

    # Another cluster's agent neither sees nor ends the link, nor reuses its uid.
    assert k2.get(ROUTE)["items"] == []
    refused(k2.call("DELETE", ROUTE, {"uid": UID}), 404, "uid", "GPR_LINK_NOT_FOUND")
    refused(k2.call("POST", ROUTE, apply_body(ns="ws2-dev")), 409, "uid")
    [link] = k1.get(ROUTE)["items"]
    assert (link["uid"], link["namespace"], link["name"], link["generation"], link["gprId"]) == \
        (UID, "ws-dev", "train", 1, gid)
    assert link["gpr"]["status"]["provisioningStatus"] == "Provisioned" and link["gpr"]["status"]["nodes"] == ["n1"]
    assert [e["reason"] for e in link["events"]][-1] == "Provisioned"

    # A second CR waits behind the first; its new generation changes the waiting GPR.
    uid2 = "5f0c2c55-8a4e-4c4b-9a43-6c1f0e8b2d12"
    g2 = k1.ok("POST", ROUTE, apply_body(name="second", uid=uid2))["gprId"]
    k1.ok("POST", ROUTE, apply_body(name="second", uid=uid2, generation=2, priority=250))
    assert cluster.status(g2)["priority"] == 250
    # A new generation of the provisioned one that asks for a change is refused as the user API does.
    refused(k1.call("POST", ROUTE, apply_body(generation=2, numberOfGPUs=2)), 409, "gprId")
    assert [i["generation"] for i in k1.get(ROUTE)["items"] if i["uid"] == UID] == [1]

    # Policies apply: with maxGPRs 2 a third CR is refused.
    cluster.admin.ok("PUT", "/api/v1/slice-workspace/policy", {"workspaceName": "ws", "maxGPRs": 2})
    refused(k1.call("POST", ROUTE, apply_body(name="third", uid="third-uid")), 422, key="POLICY_LIMIT_EXCEEDED")


def test_delete_cancels_or_releases_and_links_survive_a_restart(cluster):
    """DELETE cancels a waiting GPR and releases a provisioned one (earlyRelease in a new generation does the
    same), forgets the link (a second DELETE is 404); links are stored: after an egsd restart the same uid and
    generation answer the same GPR instead of a new one."""
    k1, _ = make_env(cluster)
    running = k1.ok("POST", ROUTE, apply_body())["gprId"]
    waiting = k1.ok("POST", ROUTE, apply_body(name="w", uid="uid-waiting"))["gprId"]
    wait_for(lambda: cluster.status(running)["status"]["provisioningStatus"] == "Provisioned", what="provisioned")

    cluster.egsd.stop()
    cluster.egsd.start()
    k1 = Api(cluster.egsd.port, cluster.tokens["k1"])
    assert k1.ok("POST", ROUTE, apply_body(name="w", uid="uid-waiting"))["gprId"] == waiting
    assert len(cluster.admin.get("/api/v1/gpr/list")["items"]) == 2

    assert k1.ok("DELETE", ROUTE, {"uid": "uid-waiting"}) == {"gprId": waiting, "provisioningStatus": "Cancelled"}
    refused(k1.call("DELETE", ROUTE, {"uid": "uid-waiting"}), 404, "uid")
    refused(k1.call("DELETE", ROUTE, {}), 422, "uid")

    k1.ok("POST", ROUTE, apply_body(generation=2, earlyRelease=True))
    assert cluster.status(running)["status"]["provisioningStatus"] in ("Releasing", "Complete")
    k1.ok("POST", ROUTE, apply_body(generation=3, earlyRelease=True))  # released already: no error
    ended = k1.ok("DELETE", ROUTE, {"uid": UID})
    assert ended["gprId"] == running and ended["provisioningStatus"] in ("Releasing", "Complete")
    assert k1.get(ROUTE)["items"] == []
