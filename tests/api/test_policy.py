"""Workspace policies and the global limits, against a real egsd: hard limits refuse a GPR with a 422
that names the limit and its value (and create nothing), soft limits send it to Pending with the reason
on the GPR, an admin approves (it is then provisioned) or rejects it; limits apply to updates of a
waiting GPR too; the global maxNodesPerGpr binds everyone; policies survive a restart; only admins
write them, owners and viewers of the workspace read them; hostile bodies change nothing.

Policies are the workspace's: the admin's own GPRs below obey them like anyone's."""
import json

import pytest

from conftest import A100, H100, Api, wait_for
from fakeagent import FakeAgent

ENVELOPE = {"statusCode", "status", "message", "data", "error"}
WS_POLICY = "/api/v1/slice-workspace/policy"
GLOBAL = "/api/v1/settings/policy"


@pytest.fixture
def pool(cluster):
    """Two fake clusters: h100 (four H100 nodes) and a100 (two A100 nodes); workspace team-a on both,
    team-b on h100."""
    c = cluster
    c.h100 = FakeAgent(c, "h100", ["h1", "h2", "h3", "h4"], H100)
    c.a100 = FakeAgent(c, "a100", ["a1", "a2"], A100)
    c.workspace("team-a", ["h100", "a100"])
    c.workspace("team-b", ["h100"])
    return c


def put_policy(c, ws, **policy):
    return c.admin.ok("PUT", WS_POLICY, dict(policy, workspaceName=ws))


def get_policy(c, ws, api=None):
    return (api or c.admin).get(WS_POLICY + "?workspaceName=" + ws)


def refused(status, doc, want, key=None, field=None):
    assert status == want, (status, doc)
    assert isinstance(doc, dict) and set(doc) == ENVELOPE and doc["data"] is None, doc
    if key:
        assert doc["error"]["errorKey"] == key, doc
    if field:
        assert (doc["error"]["data"] or {}).get("field") == field, doc
    return doc["error"]


def gpr_body(ws="team-a", **kw):
    b = {"gprName": "job", "sliceName": ws, "numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h",
         "priority": 101}
    b.update(kw)
    return b


def gpr_ids(c, ws="team-a"):
    return sorted(g["gprId"] for g in c.admin.get("/api/v1/gpr/list?sliceName=" + ws)["items"])


def state(c, gid):
    return c.status(gid)["status"]["provisioningStatus"]


def events(c, gid, reason):
    return [e for e in c.admin.get("/api/v1/events?gprId=%s&reason=%s" % (gid, reason))["items"]]


def provision(c, agent, gid):
    wait_for(lambda: agent.serve() or state(c, gid) == "Provisioned", what="%s provisioned" % gid)


# ---------------------------------------------------------------------------------------------------
# the policy object
# ---------------------------------------------------------------------------------------------------

FULL = {"maxGPRs": 4, "maxExitDurationPerGPR": "0d12h0m", "priorityRange": {"min": 1, "max": 300},
        "gpuShapes": [H100["gpuModel"], A100["gpuModel"]], "maxGPUPerGpr": 16, "maxMemoryPerGpr": 1280,
        "concurrentGpuQuota": 16, "maxNodesPerGpr": 2, "enableAutoEviction": False, "requeueOnFailure": True,
        "softLimits": {"maxExitDurationPerGPR": "6h", "priorityRange": {"min": 1, "max": 200}, "maxGPUPerGpr": 8}}


def test_put_get_delete_round_trip_and_idempotence(pool):
    c = pool
    assert get_policy(c, "team-a") == {"workspaceName": "team-a"}
    got = put_policy(c, "team-a", **FULL)
    want = dict(FULL, workspaceName="team-a", maxExitDurationPerGPR="12h0m0s",
                softLimits=dict(FULL["softLimits"], maxExitDurationPerGPR="6h0m0s"))
    assert got == want
    assert get_policy(c, "team-a") == want
    assert get_policy(c, "team-b") == {"workspaceName": "team-b"}
    updated = c.admin.get("/api/v1/events?workspace=team-a&reason=PolicyUpdated")["items"]
    assert len(updated) == 1 and "12h0m0s" in updated[0]["message"]
    # The same body again (durations spelled differently) changes nothing and writes no event.
    put_policy(c, "team-a", **dict(FULL, maxExitDurationPerGPR="12h"))
    assert len(c.admin.get("/api/v1/events?workspace=team-a&reason=PolicyUpdated")["items"]) == 1
    # PUT replaces the whole policy: what is left out is unset; null is "not set" too.
    assert put_policy(c, "team-a", maxGPRs=3, gpuShapes=None, softLimits=None) == {"workspaceName": "team-a",
                                                                                  "maxGPRs": 3}
    assert c.admin.ok("DELETE", WS_POLICY, {"workspaceName": "team-a"}) == {"workspaceName": "team-a"}
    assert get_policy(c, "team-a") == {"workspaceName": "team-a"}
    assert c.admin.get("/api/v1/events?workspace=team-a&reason=PolicyDeleted")["items"]
    refused(*c.admin.call("DELETE", WS_POLICY, {"workspaceName": "team-a"}), 404, "POLICY_NOT_FOUND", "workspaceName")
    refused(*c.admin.call("GET", WS_POLICY + "?workspaceName=nope"), 404, "WORKSPACE_NOT_FOUND", "workspaceName")
    refused(*c.admin.call("PUT", WS_POLICY, {"workspaceName": "nope", "maxGPRs": 1}), 404, "WORKSPACE_NOT_FOUND")
    # An empty policy is no policy.
    put_policy(c, "team-a", maxGPRs=3)
    assert put_policy(c, "team-a") == {"workspaceName": "team-a"}
    refused(*c.admin.call("DELETE", WS_POLICY, {"workspaceName": "team-a"}), 404, "POLICY_NOT_FOUND")


def test_deleting_the_workspace_deletes_its_policy(pool):
    c = pool
    put_policy(c, "team-b", maxGPRs=1)
    c.admin.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "team-b"})
    c.workspace("team-b", ["h100"])
    assert get_policy(c, "team-b") == {"workspaceName": "team-b"}


# ---------------------------------------------------------------------------------------------------
# hard limits: 422 naming the limit and its value, nothing created
# ---------------------------------------------------------------------------------------------------

HARD = [
    # (policy, request, field, words the message must hold)
    ({"maxExitDurationPerGPR": "6h"}, {"exitDuration": "8h"}, "exitDuration",
     ["maxExitDurationPerGPR", "6h0m0s", "8h0m0s"]),
    ({"priorityRange": {"min": 1, "max": 200}}, {"priority": 250}, "priority", ["priorityRange", "1-200", "250"]),
    ({"priorityRange": {"min": 50, "max": 200}}, {"priority": 10}, "priority", ["priorityRange", "50-200"]),
    ({"gpuShapes": [A100["gpuModel"]]}, {"gpuShape": H100["gpuModel"]}, "gpuShape",
     ["gpuShapes", A100["gpuModel"], H100["gpuModel"]]),
    # no shape named: it could land on an H100, which the policy does not allow
    ({"gpuShapes": [A100["gpuModel"]]}, {}, "gpuShape", ["gpuShapes", H100["gpuModel"]]),
    ({"maxGPUPerGpr": 8}, {"numberOfGPUs": 8, "numberOfGPUNodes": 2}, "numberOfGPUs", ["maxGPUPerGpr", "8", "16 GPUs"]),
    ({"maxMemoryPerGpr": 320}, {"numberOfGPUs": 8, "gpuShape": H100["gpuModel"]}, "memoryPerGpu",
     ["maxMemoryPerGpr", "320GB", "640GB"]),
    ({"concurrentGpuQuota": 4}, {"numberOfGPUs": 8}, "numberOfGPUs", ["concurrentGpuQuota", "4", "8 GPUs"]),
    ({"maxNodesPerGpr": 1}, {"numberOfGPUNodes": 2}, "numberOfGPUNodes", ["maxNodesPerGpr", "1"]),
]


@pytest.mark.parametrize("policy,request_,field,words", HARD, ids=[h[2] + "-" + list(h[0])[0] for h in HARD])
def test_hard_limit_refuses_with_422(pool, policy, request_, field, words):
    c = pool
    put_policy(c, "team-a", **policy)
    before = gpr_ids(c)
    err = refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(**request_)), 422, "POLICY_LIMIT_EXCEEDED", field)
    for w in words:
        assert w in err["message"], (w, err["message"])
    assert "team-a" in err["message"]
    assert gpr_ids(c) == before  # nothing created
    # Within the limit the same workspace gets its GPR; another workspace is not bound at all.
    assert state(c, c.gpr(sliceName="team-b", **request_)) in ("Queued", "Provisioning")


def test_max_gprs_counts_only_unfinished_gprs(pool):
    c = pool
    put_policy(c, "team-a", maxGPRs=2)
    first = c.gpr(sliceName="team-a", clusterName="h100", exitDuration="2h")
    provision(c, c.h100, first)
    second = c.gpr(sliceName="team-a")  # queued behind it (one provisioned GPR per workspace)
    assert state(c, second) == "Queued"
    err = refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body()), 422, "POLICY_LIMIT_EXCEEDED", "sliceName")
    assert "maxGPRs 2" in err["message"] and "3 unfinished" in err["message"]
    c.admin.ok("DELETE", "/api/v1/gpr", {"gprId": second})  # cancelled: finished
    third = c.gpr(sliceName="team-a")
    refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body()), 422, "POLICY_LIMIT_EXCEEDED")
    c.admin.ok("PUT", "/api/v1/gpr", {"gprId": first, "earlyRelease": True})  # released: finished too
    wait_for(lambda: c.h100.serve() is not None and state(c, first) == "Complete", what="first complete")
    fourth = c.gpr(sliceName="team-a")
    assert {state(c, third), state(c, fourth)} <= {"Queued", "Provisioning", "Provisioned"}
    # A Pending GPR counts: it is not finished.
    put_policy(c, "team-a", maxGPRs=3, softLimits={"maxExitDurationPerGPR": "2h"})
    pending = c.gpr(sliceName="team-a", exitDuration="3h")
    assert state(c, pending) == "Pending"
    refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body()), 422, "POLICY_LIMIT_EXCEEDED", "sliceName")
    c.admin.ok("POST", "/api/v1/gpr/reject", {"gprId": pending, "reason": "no"})
    c.gpr(sliceName="team-a")


def test_concurrent_quota_counts_what_the_workspace_holds(pool):
    c = pool
    put_policy(c, "team-a", concurrentGpuQuota=12)
    held = c.gpr(sliceName="team-a", clusterName="h100", numberOfGPUs=8, exitDuration="2h")
    provision(c, c.h100, held)
    err = refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(numberOfGPUs=8)), 422, "POLICY_LIMIT_EXCEEDED",
                  "numberOfGPUs")
    assert "16 GPUs at once (8 held, 8 asked)" in err["message"] and "concurrentGpuQuota 12" in err["message"], err
    assert state(c, c.gpr(sliceName="team-a", numberOfGPUs=4)) == "Queued"


def test_global_limit_and_workspace_limit_both_apply(pool):
    c = pool
    put_policy(c, "team-a", maxNodesPerGpr=4)
    c.admin.ok("PUT", GLOBAL, {"maxNodesPerGpr": 2})
    err = refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(numberOfGPUNodes=3)), 422, "POLICY_LIMIT_EXCEEDED",
                  "numberOfGPUNodes")
    assert "maxNodesPerGpr 2 of the global policy" in err["message"], err


# ---------------------------------------------------------------------------------------------------
# soft limits: Pending with the reason, then approve or reject
# ---------------------------------------------------------------------------------------------------

def test_soft_limit_pending_then_approved_and_provisioned(pool):
    c = pool
    put_policy(c, "team-a", maxExitDurationPerGPR="12h", softLimits={"maxExitDurationPerGPR": "6h"})
    gid = c.gpr(sliceName="team-a", clusterName="h100", exitDuration="8h")
    g = c.status(gid)
    reason = g["status"]["pendingReason"]
    assert g["status"]["provisioningStatus"] == "Pending", g
    assert reason == ("exitDuration 8h0m0s exceeds the soft limit maxExitDurationPerGPR 6h0m0s of workspace "
                      "team-a's policy: waits for an admin's approval"), reason
    ev = events(c, gid, "PendingApproval")
    assert len(ev) == 1 and reason in ev[0]["message"]
    queue = c.admin.get("/api/v1/queue")["items"]
    assert [q.get("pendingReason") for q in queue if q["gprId"] == gid] == [reason]
    # It waits however long: the scheduler leaves it alone.
    c.advance("1h")
    c.h100.serve()
    assert state(c, gid) == "Pending"
    # Over the hard limit it is refused, not held.
    refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(exitDuration="13h")), 422, "POLICY_LIMIT_EXCEEDED",
            "exitDuration")
    c.admin.ok("POST", "/api/v1/gpr/approve", {"gprId": gid})
    assert events(c, gid, "Approved")
    provision(c, c.h100, gid)
    g = c.status(gid)
    assert g["status"]["pendingReason"] is None and g["exitDuration"] == "8h0m0s"


def test_approval_rechecks_the_hard_limits_of_the_policy_as_it_is_now(pool):
    """A GPR held for approval under one policy is not approved past a hard limit set since: the
    approval is refused with the limit, the GPR stays Pending (nothing changes), and it is approved once
    the limit allows it again."""
    c = pool
    put_policy(c, "team-a", softLimits={"maxExitDurationPerGPR": "6h"})
    gid = c.gpr(sliceName="team-a", clusterName="h100", exitDuration="8h", numberOfGPUs=2)
    assert state(c, gid) == "Pending"
    put_policy(c, "team-a", maxExitDurationPerGPR="7h", softLimits={"maxExitDurationPerGPR": "6h"})
    before = c.status(gid)
    err = refused(*c.admin.call("POST", "/api/v1/gpr/approve", {"gprId": gid}), 422, "POLICY_LIMIT_EXCEEDED",
                  "exitDuration")
    assert "cannot be approved" in err["message"] and "maxExitDurationPerGPR 7h0m0s" in err["message"], err
    assert c.status(gid) == before
    assert not events(c, gid, "Approved")
    # The global policy's hard limits count too.
    put_policy(c, "team-a", softLimits={"maxExitDurationPerGPR": "6h"})
    c.admin.ok("PUT", GLOBAL, {"maxGPUPerGpr": 1, "maxNodesPerGpr": 64})
    refused(*c.admin.call("POST", "/api/v1/gpr/approve", {"gprId": gid}), 422, "POLICY_LIMIT_EXCEEDED", "numberOfGPUs")
    assert state(c, gid) == "Pending"
    c.admin.ok("PUT", GLOBAL, {"maxNodesPerGpr": 64})
    c.admin.ok("POST", "/api/v1/gpr/approve", {"gprId": gid})
    assert state(c, gid) != "Pending" and events(c, gid, "Approved")


def test_soft_limit_pending_then_rejected(pool):
    c = pool
    put_policy(c, "team-a", softLimits={"priorityRange": {"min": 1, "max": 150}, "maxGPUPerGpr": 4})
    gid = c.gpr(sliceName="team-a", priority=180, numberOfGPUs=8)
    reason = c.status(gid)["status"]["pendingReason"]
    # every soft limit exceeded is named
    assert "priority 180 is outside the soft limit priorityRange 1-150" in reason, reason
    assert "8 GPUs (numberOfGPUs x numberOfGPUNodes) exceeds the soft limit maxGPUPerGpr 4" in reason, reason
    owner = c.egsd.api(c.key("Owner", "team-a"))
    refused(*owner.call("POST", "/api/v1/gpr/reject", {"gprId": gid}), 403, "FORBIDDEN")
    assert state(c, gid) == "Pending"
    c.admin.ok("POST", "/api/v1/gpr/reject", {"gprId": gid, "reason": "too big for this team"})
    g = c.status(gid)
    assert g["status"]["provisioningStatus"] == "Rejected" and g["status"]["failureReason"] == "too big for this team"
    ev = events(c, gid, "Rejected")
    assert len(ev) == 1 and ev[0]["type"] == "Warning" and "too big for this team" in ev[0]["message"]
    refused(*c.admin.call("POST", "/api/v1/gpr/approve", {"gprId": gid}), 409)


def test_an_owners_gpr_and_an_admins_alike(pool):
    c = pool
    owner = c.egsd.api(c.key("Owner", "team-a"))
    put_policy(c, "team-a", priorityRange={"min": 1, "max": 200}, softLimits={"priorityRange": {"min": 1, "max": 120}})
    for api in (owner, c.admin):
        refused(*api.call("POST", "/api/v1/gpr", gpr_body(priority=201)), 422, "POLICY_LIMIT_EXCEEDED", "priority")
        gid = api.ok("POST", "/api/v1/gpr", gpr_body(priority=150))["gprId"]
        assert state(c, gid) == "Pending"
    refused(*owner.call("POST", "/api/v1/gpr/approve", {"gprId": gid}), 403, "FORBIDDEN")


# ---------------------------------------------------------------------------------------------------
# updates of a waiting GPR
# ---------------------------------------------------------------------------------------------------

def test_update_of_a_queued_gpr_is_checked(pool):
    c = pool
    blocker = c.gpr(sliceName="team-a", clusterName="h100", exitDuration="4h")
    provision(c, c.h100, blocker)
    gid = c.gpr(sliceName="team-a", priority=101)
    assert state(c, gid) == "Queued"
    put_policy(c, "team-a", priorityRange={"min": 1, "max": 200}, maxExitDurationPerGPR="6h",
               softLimits={"priorityRange": {"min": 1, "max": 150}})
    err = refused(*c.admin.call("PUT", "/api/v1/gpr", {"gprId": gid, "priority": 250}), 422, "POLICY_LIMIT_EXCEEDED",
                  "priority")
    assert "priorityRange 1-200" in err["message"]
    refused(*c.admin.call("PUT", "/api/v1/gpr", {"gprId": gid, "gprName": "x", "exitDuration": "7h"}), 422,
            "POLICY_LIMIT_EXCEEDED", "exitDuration")
    g = c.status(gid)
    assert (g["priority"], g["gprName"], g["exitDuration"], g["status"]["provisioningStatus"]) == \
        (101, "job", "1h0m0s", "Queued")  # nothing changed
    # Within the hard limit but over the soft one: back to approval.
    c.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "priority": 180})
    g = c.status(gid)
    assert g["priority"] == 180 and g["status"]["provisioningStatus"] == "Pending"
    assert "priority 180 is outside the soft limit priorityRange 1-150" in g["status"]["pendingReason"]
    c.admin.ok("POST", "/api/v1/gpr/approve", {"gprId": gid})
    assert state(c, gid) == "Queued"
    # An approved GPR is not sent back for changes the limits do not read (or that stay within them).
    c.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "gprName": "renamed", "exitDuration": "2h"})
    assert state(c, gid) == "Queued"
    # Limits that were set after creation apply to the fields a change touches only.
    put_policy(c, "team-a", maxGPUPerGpr=4)
    refused(*c.admin.call("PUT", "/api/v1/gpr", {"gprId": gid, "numberOfGPUs": 8}), 422, "POLICY_LIMIT_EXCEEDED",
            "numberOfGPUs")
    c.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "numberOfGPUs": 4})
    assert c.status(gid)["numberOfGPUs"] == 4


def test_queue_top_is_admin_queue_management_and_not_bound(pool):
    c = pool
    blocker = c.gpr(sliceName="team-a", clusterName="h100", exitDuration="4h")
    provision(c, c.h100, blocker)
    other = c.gpr(sliceName="team-b", clusterName="h100", priority=250, numberOfGPUs=8, numberOfGPUNodes=4)
    gid = c.gpr(sliceName="team-a", priority=101)
    put_policy(c, "team-a", priorityRange={"min": 1, "max": 200})
    assert c.admin.ok("POST", "/api/v1/queue/top", {"gprId": gid})["priority"] == 251
    assert state(c, other) == "Queued"


# ---------------------------------------------------------------------------------------------------
# defaults, the global policy, restarts
# ---------------------------------------------------------------------------------------------------

def test_policy_defaults_for_eviction_and_requeue(pool):
    c = pool
    put_policy(c, "team-a", enableAutoEviction=True, requeueOnFailure=True)
    g = c.status(c.gpr(sliceName="team-a"))
    assert g["enableEviction"] is True and g["requeueOnFailure"] is True
    g = c.status(c.gpr(sliceName="team-a", enableEviction=False, requeueOnFailure=None))
    assert g["enableEviction"] is False and g["requeueOnFailure"] is True
    g = c.status(c.gpr(sliceName="team-b"))
    assert g["enableEviction"] is False and g["requeueOnFailure"] is False


def test_global_max_nodes_per_gpr(pool):
    c = pool
    assert c.admin.get(GLOBAL) == {"maxNodesPerGpr": 64}  # the embedded default
    c.egsd.stop()
    c.egsd.extra = ["--max-nodes-per-gpr", "2"]
    c.egsd.start()
    c.h100.heartbeat()
    assert c.admin.get(GLOBAL) == {"maxNodesPerGpr": 2}
    for ws in ("team-a", "team-b"):
        err = refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(ws, numberOfGPUNodes=3, clusterName="h100")), 422,
                      "POLICY_LIMIT_EXCEEDED", "numberOfGPUNodes")
        assert "numberOfGPUNodes 3 exceeds the limit maxNodesPerGpr 2 of the global policy" in err["message"], err
    # An admin of every project raises it, with a soft threshold for approval (the seeds' "GPU nodes
    # limit per GPR").
    got = c.admin.ok("PUT", GLOBAL, {"maxNodesPerGpr": 4, "softLimits": {"maxNodesPerGpr": 2}})
    assert got == {"maxNodesPerGpr": 4, "softLimits": {"maxNodesPerGpr": 2}}
    gid = c.gpr(sliceName="team-b", numberOfGPUNodes=3, clusterName="h100")
    g = c.status(gid)
    assert g["status"]["provisioningStatus"] == "Pending"
    assert "numberOfGPUNodes 3 exceeds the soft limit maxNodesPerGpr 2 of the global policy" in \
        g["status"]["pendingReason"]
    assert c.admin.get("/api/v1/events?reason=PolicyUpdated&kind=Policy")["items"]
    # A soft limit beyond the default hard one is refused; {} restores the flag's default.
    refused(*c.admin.call("PUT", GLOBAL, {"softLimits": {"maxNodesPerGpr": 3}}), 422, "VALIDATION_FAILED",
            "softLimits.maxNodesPerGpr")
    assert c.admin.ok("PUT", GLOBAL, {}) == {"maxNodesPerGpr": 2}
    # Who may: every role reads it, only an admin of every project writes it.
    owner = c.egsd.api(c.key("Owner", "team-a"))
    assert owner.get(GLOBAL) == {"maxNodesPerGpr": 2}
    refused(*owner.call("PUT", GLOBAL, {"maxNodesPerGpr": 1024}), 403, "FORBIDDEN")
    c.admin.ok("POST", "/api/v1/projects", {"projectName": "px"})
    padmin = c.egsd.api(c.admin.ok("POST", "/api/v1/api-key", {"name": "padm", "role": "Admin",
                                                                "projectName": "px"})["apiKey"])
    refused(*padmin.call("PUT", GLOBAL, {"maxNodesPerGpr": 1024}), 403, "FORBIDDEN")
    assert c.admin.get(GLOBAL) == {"maxNodesPerGpr": 2}


def test_policies_survive_a_restart(pool):
    c = pool
    put_policy(c, "team-a", **FULL)
    c.admin.ok("PUT", GLOBAL, {"maxNodesPerGpr": 3, "maxExitDurationPerGPR": "2d"})
    pending = c.gpr(sliceName="team-a", exitDuration="7h")
    reason = c.status(pending)["status"]["pendingReason"]
    before = (get_policy(c, "team-a"), c.admin.get(GLOBAL))
    for sig in ("term", "kill"):
        c.egsd.stop(sig)
        c.egsd.start()
        assert (get_policy(c, "team-a"), c.admin.get(GLOBAL)) == before
        g = c.status(pending)
        assert g["status"]["provisioningStatus"] == "Pending" and g["status"]["pendingReason"] == reason
        refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body(exitDuration="13h")), 422, "POLICY_LIMIT_EXCEEDED",
                "exitDuration")
        refused(*c.admin.call("POST", "/api/v1/gpr", gpr_body("team-b", exitDuration="3d")), 422,
                "POLICY_LIMIT_EXCEEDED", "exitDuration")


# ---------------------------------------------------------------------------------------------------
# who may
# ---------------------------------------------------------------------------------------------------

def test_who_may_read_and_write_policies(pool):
    c = pool
    put_policy(c, "team-a", maxGPRs=3)
    want = {"workspaceName": "team-a", "maxGPRs": 3}
    owner_a = c.egsd.api(c.key("Owner", "team-a"))
    viewer_a = c.egsd.api(c.key("Viewer", "team-a"))
    owner_b = c.egsd.api(c.key("Owner", "team-b"))
    for api in (owner_a, viewer_a):
        assert get_policy(c, "team-a", api) == want
        refused(*api.call("PUT", WS_POLICY, {"workspaceName": "team-a", "maxGPRs": 100}), 403, "FORBIDDEN")
        refused(*api.call("DELETE", WS_POLICY, {"workspaceName": "team-a"}), 403, "FORBIDDEN")
        refused(*api.call("PUT", GLOBAL, {"maxNodesPerGpr": 1024}), 403, "FORBIDDEN")
    status, doc = owner_b.call("GET", WS_POLICY + "?workspaceName=team-a")
    assert status in (403, 404), (status, doc)
    refused(status, doc, status)
    refused(*owner_b.call("PUT", WS_POLICY, {"workspaceName": "team-a"}), 403, "FORBIDDEN")
    agent = c.h100.api
    refused(*agent.call("GET", WS_POLICY + "?workspaceName=team-a"), 403, "FORBIDDEN")
    refused(*agent.call("GET", GLOBAL), 403, "FORBIDDEN")
    anon = Api(c.egsd.port)
    for method, path, body in (("GET", WS_POLICY + "?workspaceName=team-a", None),
                               ("PUT", WS_POLICY, {"workspaceName": "team-a"}),
                               ("DELETE", WS_POLICY, {"workspaceName": "team-a"}), ("GET", GLOBAL, None),
                               ("PUT", GLOBAL, {})):
        refused(*anon.call(method, path, body), 401, "UNAUTHENTICATED")
    # An admin of another project does not see the workspace at all.
    c.admin.ok("POST", "/api/v1/projects", {"projectName": "px"})
    padmin = c.egsd.api(c.admin.ok("POST", "/api/v1/api-key", {"name": "padm", "role": "Admin",
                                                                "projectName": "px"})["apiKey"])
    refused(*padmin.call("GET", WS_POLICY + "?workspaceName=team-a"), 404, "WORKSPACE_NOT_FOUND")
    refused(*padmin.call("PUT", WS_POLICY, {"workspaceName": "team-a", "maxGPRs": 100}), 404, "WORKSPACE_NOT_FOUND")
    assert get_policy(c, "team-a") == want


# ---------------------------------------------------------------------------------------------------
# hostile bodies: a 422 naming the member, and nothing changes
# ---------------------------------------------------------------------------------------------------

HOSTILE = [
    ({"bogus": 1}, "bogus"),
    ({"maxGPRs": -1}, "maxGPRs"), ({"maxGPRs": 2 ** 40}, "maxGPRs"), ({"maxGPRs": "3"}, "maxGPRs"),
    ({"maxGPRs": 1.5}, "maxGPRs"), ({"maxGPRs": True}, "maxGPRs"),
    ({"maxExitDurationPerGPR": "0h"}, "maxExitDurationPerGPR"), ({"maxExitDurationPerGPR": "-1h"}, "maxExitDurationPerGPR"),
    ({"maxExitDurationPerGPR": 3600}, "maxExitDurationPerGPR"), ({"maxExitDurationPerGPR": "400d"}, "maxExitDurationPerGPR"),
    ({"priorityRange": "1-200"}, "priorityRange"), ({"priorityRange": {"min": 200, "max": 1}}, "priorityRange"),
    ({"priorityRange": {"min": 0, "max": 10}}, "priorityRange.min"),
    ({"priorityRange": {"min": 1, "max": 1001}}, "priorityRange.max"),
    ({"priorityRange": {"min": 1}}, "priorityRange.max"),
    ({"priorityRange": {"min": 1, "max": 5, "step": 1}}, "priorityRange.step"),
    ({"gpuShapes": "NVIDIA-H100-80GB-HBM3"}, "gpuShapes"), ({"gpuShapes": [1]}, "gpuShapes"),
    ({"gpuShapes": ["a/b"]}, "gpuShapes"), ({"gpuShapes": ["x" * 64]}, "gpuShapes"),
    ({"gpuShapes": ["s%d" % i for i in range(65)]}, "gpuShapes"),
    ({"maxGPUPerGpr": 0}, "maxGPUPerGpr"), ({"maxGPUPerGpr": 65537}, "maxGPUPerGpr"),
    ({"maxMemoryPerGpr": -80}, "maxMemoryPerGpr"), ({"concurrentGpuQuota": -1}, "concurrentGpuQuota"),
    ({"maxNodesPerGpr": 1025}, "maxNodesPerGpr"), ({"enableAutoEviction": "yes"}, "enableAutoEviction"),
    ({"requeueOnFailure": 1}, "requeueOnFailure"),
    ({"softLimits": [1]}, "softLimits"), ({"softLimits": {"enableAutoEviction": True}}, "softLimits.enableAutoEviction"),
    ({"softLimits": {"softLimits": {}}}, "softLimits.softLimits"),
    ({"softLimits": {"maxGPRs": -1}}, "softLimits.maxGPRs"),
    ({"maxGPRs": 2, "softLimits": {"maxGPRs": 3}}, "softLimits.maxGPRs"),
    ({"maxExitDurationPerGPR": "6h", "softLimits": {"maxExitDurationPerGPR": "7h"}}, "softLimits.maxExitDurationPerGPR"),
    ({"priorityRange": {"min": 10, "max": 100}, "softLimits": {"priorityRange": {"min": 1, "max": 50}}},
     "softLimits.priorityRange"),
    ({"gpuShapes": ["A"], "softLimits": {"gpuShapes": ["A", "B"]}}, "softLimits.gpuShapes"),
    ({"softLimits": {"priorityRange": {"min": 9, "max": 1}}}, "softLimits.priorityRange"),
]


@pytest.mark.parametrize("body,field", HOSTILE, ids=["%d-%s" % (i, h[1]) for i, h in enumerate(HOSTILE)])
def test_hostile_policy_bodies_change_nothing(pool, body, field):
    c = pool
    put_policy(c, "team-a", maxGPRs=5)
    before = (get_policy(c, "team-a"), c.admin.get(GLOBAL), c.admin.get("/api/v1/events?limit=1"))
    err = refused(*c.admin.call("PUT", WS_POLICY, dict(body, workspaceName="team-a")), 422, "VALIDATION_FAILED", field)
    assert field in err["message"], err
    refused(*c.admin.call("PUT", GLOBAL, body), 422, "VALIDATION_FAILED", field)  # the same members
    assert (get_policy(c, "team-a"), c.admin.get(GLOBAL), c.admin.get("/api/v1/events?limit=1")) == before


def test_policy_routes_refuse_malformed_requests(pool):
    c = pool
    refused(*c.admin.call("PUT", WS_POLICY, b"{"), 400, "MALFORMED_JSON")
    refused(*c.admin.call("PUT", WS_POLICY, {"maxGPRs": 1}), 422, "VALIDATION_FAILED", "workspaceName")
    refused(*c.admin.call("PUT", GLOBAL, {"workspaceName": "team-a"}), 422, "VALIDATION_FAILED", "workspaceName")
    refused(*c.admin.call("GET", WS_POLICY), 422, "VALIDATION_FAILED", "workspaceName")
    refused(*c.admin.call("POST", WS_POLICY, {}), 405)
    assert get_policy(c, "team-a") == {"workspaceName": "team-a"}
