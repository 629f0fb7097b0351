"""GPR templates and template bindings as the public EGS Python SDK sends and reads them (its ten template
functions), then what they mean in egsd: a GPR created from a bound template, refused when the binding
or the workspace's policy says no, and both kinds surviving a restart.  Real egsd and agents."""
import pytest

from conftest import H100, A100, Cluster
from test_sdk_wire import Sdk

SHAPE = H100["gpuModel"]
# GetGprTemplateResponse(**data) requires these; the binding classes take exactly these keys.
TEMPLATE_KEYS = {"name", "clusterName", "numberOfGPUs", "numberOfGPUNodes", "memoryPerGpu", "gpuShape", "instanceType",
                 "exitDuration", "priority", "enforceIdleTimeOut", "enableEviction", "requeueOnFailure"}
BINDING_GET_KEYS = {"name", "clusters", "enableAutoGPR"}
BINDING_ANSWER_KEYS = BINDING_GET_KEYS | {"namespace"}
CLUSTER_KEYS = {"clusterName", "defaultTemplateName", "templates", "defaultTemplateStatus", "templateStatus"}


def template_body(name, cluster="worker-1", gpus=1, nodes=1, memory=40, priority=101, exit_duration="1h",
                  enforce=False, idle=None, evict=False, requeue=False):
    """The body of create_gpr_template(...) / update_gpr_template(...)."""
    body = {"name": name, "clusterName": cluster, "numberOfGPUs": gpus, "numberOfGPUNodes": nodes,
            "memoryPerGpu": memory, "gpuShape": SHAPE, "instanceType": H100["instanceType"],
            "exitDuration": exit_duration, "priority": priority, "enforceIdleTimeOut": enforce,
            "enableEviction": evict, "requeueOnFailure": requeue}
    if enforce:
        body["idleTimeOutDuration"] = idle
    return body


def binding_body(ws, clusters, auto=False):
    return {"workspaceName": ws, "enableAutoGPR": auto,
            "clusters": [{"clusterName": c, "defaultTemplateName": d, "templates": t} for c, d, t in clusters]}


@pytest.fixture
def env(tmpdir_path):
    c = Cluster(tmpdir_path)
    c.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    c.add_cluster("worker-2", [("a100-1", A100)])
    c.workspace("team-a", ["worker-1", "worker-2"])
    c.workspace("team-b", ["worker-1"])
    c.sdk = Sdk(c.egsd.port, c.egsd.admin_key)
    yield c
    c.close()


def test_templates_as_the_sdk_sends_them(env):
    sdk = env.sdk
    assert sdk.ok("POST", "/api/v1/gpr-template", template_body("small")) == {"gprTemplateName": "small"}
    sdk.ok("POST", "/api/v1/gpr-template", template_body("big", gpus=8, nodes=2, priority=150, enforce=True,
                                                          idle="30m", evict=True, requeue=True))
    got = sdk.ok("GET", "/api/v1/gpr-template?gprTemplateName=big")
    assert TEMPLATE_KEYS <= set(got)
    assert (got["numberOfGPUs"], got["numberOfGPUNodes"], got["priority"], got["memoryPerGpu"]) == (8, 2, 150, 40960)
    assert got["enforceIdleTimeOut"] and got["idleTimeOutDuration"] == "0h30m0s" and got["exitDuration"] == "1h0m0s"
    # list_gpr_templates sends a GET with an empty JSON object as its body
    assert [t["name"] for t in sdk.ok("GET", "/api/v1/gpr-template/list", {})["items"]] == ["big", "small"]
    sdk.ok("PUT", "/api/v1/gpr-template", template_body("small", gpus=2, exit_duration="3h", priority=120))
    got = sdk.ok("GET", "/api/v1/gpr-template?gprTemplateName=small")
    assert (got["numberOfGPUs"], got["exitDuration"], got["priority"]) == (2, "3h0m0s", 120)
    sdk.ok("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "small"})
    status, doc = sdk.call("GET", "/api/v1/gpr-template?gprTemplateName=small")
    assert status == 404 and doc["error"]["errorKey"] == "GPR_TEMPLATE_NOT_FOUND"


@pytest.mark.parametrize("change,field", [
    ({"name": "Bad_Name"}, "name"),
    ({"clusterName": "nowhere"}, "clusterName"),
    ({"numberOfGPUs": 0}, "numberOfGPUs"),
    ({"numberOfGPUNodes": "two"}, "numberOfGPUNodes"),
    ({"exitDuration": ""}, "exitDuration"),
    ({"exitDuration": "forever"}, "exitDuration"),
    ({"priority": 5000}, "priority"),
    ({"enforceIdleTimeOut": True}, "idleTimeOutDuration"),
    ({"enableEviction": "yes"}, "enableEviction"),
    ({"gpuSharingMode": "Shared"}, "gpuSharingMode"),
])
def test_template_refusals_name_the_field(env, change, field):
    body = dict(template_body("t"), **change)
    status, doc = env.sdk.call("POST", "/api/v1/gpr-template", body)
    assert status in (404, 422) and doc["error"]["data"]["field"] == field, doc
    assert env.sdk.ok("GET", "/api/v1/gpr-template/list")["items"] == []


def test_only_admins_write_templates_and_bindings(env):
    env.sdk.ok("POST", "/api/v1/gpr-template", template_body("t"))
    owner = Sdk(env.egsd.port, env.key("Owner", "team-a"))
    viewer = Sdk(env.egsd.port, env.key("Viewer", "team-b"))
    for who in (owner, viewer):
        assert who.call("POST", "/api/v1/gpr-template", template_body("t2"))[0] == 403
        assert who.call("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "t"})[0] == 403
        assert who.call("POST", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "t", ["t"])]))[0] == 403
        assert who.ok("GET", "/api/v1/gpr-template?gprTemplateName=t")["name"] == "t"
    env.sdk.ok("POST", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "t", ["t"])]))
    assert [b["name"] for b in owner.ok("GET", "/api/v1/gpr-template-binding/list")["templateBindings"]] == ["team-a"]
    assert viewer.ok("GET", "/api/v1/gpr-template-binding/list")["templateBindings"] == []  # not its workspace
    assert viewer.call("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-a")[0] in (403, 404)


def test_bindings_as_the_sdk_sends_them(env):
    sdk = env.sdk
    for name, cluster in (("t1", "worker-1"), ("t2", "worker-1"), ("a1", "worker-2")):
        sdk.ok("POST", "/api/v1/gpr-template", template_body(name, cluster=cluster))
    made = sdk.ok("POST", "/api/v1/gpr-template-binding",
                  binding_body("team-a", [("worker-1", "t1", ["t1", "t2"]), ("worker-2", "a1", ["a1"])]))
    assert set(made) == BINDING_ANSWER_KEYS and made["name"] == "team-a" and made["namespace"] == "kubeslice-default"
    assert all(set(c) == CLUSTER_KEYS for c in made["clusters"])
    got = sdk.ok("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-a")
    assert set(got) == BINDING_GET_KEYS and got["enableAutoGPR"] is False
    c1 = got["clusters"][0]
    assert (c1["clusterName"], c1["defaultTemplateName"], c1["templates"]) == ("worker-1", "t1", ["t1", "t2"])
    assert c1["templateStatus"] == {"t1": "Ready", "t2": "Ready"} and c1["defaultTemplateStatus"] == "Ready"
    listed = sdk.ok("GET", "/api/v1/gpr-template-binding/list", {})["templateBindings"]
    assert [b["name"] for b in listed] == ["team-a"]
    updated = sdk.ok("PUT", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "t2", ["t2"])], True))
    assert set(updated) == BINDING_ANSWER_KEYS and updated["enableAutoGPR"] is True
    assert [(c["clusterName"], c["templates"]) for c in updated["clusters"]] == [("worker-1", ["t2"])]
    status, doc = sdk.call("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "t2"})
    assert status == 409 and doc["error"]["errorKey"] == "GPR_TEMPLATE_IN_USE"
    status, doc = sdk.call("PUT", "/api/v1/gpr-template", template_body("t2", cluster="worker-2"))
    assert status == 409 and doc["error"]["data"]["field"] == "clusterName"
    sdk.ok("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "t1"})  # no longer bound
    sdk.ok("DELETE", "/api/v1/gpr-template-binding", {"gprTemplateBindingName": "team-a"})
    assert sdk.call("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-a")[0] == 404
    sdk.ok("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "t2"})


@pytest.mark.parametrize("clusters,field", [
    ([("worker-2", "t1", ["t1"])], "clusters[0].templates"),            # t1 is a worker-1 template
    ([("worker-1", "nope", ["nope"])], "clusters[0].templates"),         # no such template
    ([("worker-1", "t2", ["t1"])], "clusters[0].defaultTemplateName"),   # default not among its templates
    ([("worker-9", "t1", ["t1"])], "clusters[0].clusterName"),           # not a cluster of the workspace
    ([("worker-1", "t1", ["t1"]), ("worker-1", "t1", ["t1"])], "clusters"),
])
def test_binding_refusals_name_the_field(env, clusters, field):
    for name in ("t1", "t2"):
        env.sdk.ok("POST", "/api/v1/gpr-template", template_body(name))
    status, doc = env.sdk.call("POST", "/api/v1/gpr-template-binding", binding_body("team-a", clusters))
    assert status == 422 and doc["error"]["data"]["field"] == field, doc
    assert env.sdk.ok("GET", "/api/v1/gpr-template-binding/list")["templateBindings"] == []
    status, doc = env.sdk.call("POST", "/api/v1/gpr-template-binding", binding_body("nope", []))
    assert status == 404 and doc["error"]["errorKey"] == "WORKSPACE_NOT_FOUND"


def test_gpr_from_a_bound_template(env):
    sdk = env.sdk
    sdk.ok("POST", "/api/v1/gpr-template", template_body("train", gpus=4, priority=150, exit_duration="2h",
                                                          evict=True))
    owner = Sdk(env.egsd.port, env.key("Owner", "team-a"))
    req = {"templateName": "train", "sliceName": "team-a"}
    status, doc = owner.call("POST", "/api/v1/gpr", req)  # not bound yet
    assert status == 422 and doc["error"]["errorKey"] == "GPR_TEMPLATE_NOT_BOUND"
    sdk.ok("POST", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "train", ["train"])]))
    status, doc = owner.call("POST", "/api/v1/gpr", dict(req, numberOfGPUs=8))  # a template fixes the shape
    assert status == 422 and doc["error"]["data"]["field"] == "numberOfGPUs"
    status, doc = owner.call("POST", "/api/v1/gpr", dict(req, sliceName="team-b"))  # bound to team-a only
    assert status in (404, 422)
    assert sdk.ok("GET", "/api/v1/gpr/list?sliceName=team-a")["items"] == []
    # the fields the public SDK sends unset (null, "", false) are no override
    gid = owner.ok("POST", "/api/v1/gpr", dict(req, gprName="run-1", clusterName="", instanceType="",
                                                preferredClusters=None, requeueOnFailure=None, numberOfGPUs=4))["gprId"]
    g = env.wait_state(gid, "Provisioned")
    assert (g["gprName"], g["clusterName"], g["numberOfGPUs"], g["priority"], g["exitDuration"]) == (
        "run-1", "worker-1", 4, 150, "2h0m0s")
    assert g["enableEviction"] is True and g["gpuShape"] == SHAPE
    wait = owner.ok("POST", "/api/v1/gpr/waittime", req)  # a question about the same shape
    assert wait


def test_template_cannot_grant_what_the_policy_forbids(env):
    sdk = env.sdk
    sdk.ok("POST", "/api/v1/gpr-template", template_body("urgent", priority=250))
    sdk.ok("POST", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "urgent", ["urgent"])]))
    sdk.ok("PUT", "/api/v1/slice-workspace/policy", {"workspaceName": "team-a", "priorityRange": {"min": 1, "max": 200}})
    status, doc = sdk.call("POST", "/api/v1/gpr", {"templateName": "urgent", "sliceName": "team-a"})
    assert status == 422 and doc["error"]["errorKey"] == "POLICY_LIMIT_EXCEEDED"
    assert doc["error"]["data"]["field"] == "priority"
    assert sdk.ok("GET", "/api/v1/gpr/list?sliceName=team-a")["items"] == []


def test_templates_survive_a_restart_and_bindings_go_with_their_workspace(env):
    sdk = env.sdk
    sdk.ok("POST", "/api/v1/gpr-template", template_body("keep", gpus=2))
    sdk.ok("POST", "/api/v1/gpr-template-binding", binding_body("team-b", [("worker-1", "keep", ["keep"])]))
    before = (sdk.ok("GET", "/api/v1/gpr-template?gprTemplateName=keep"),
              sdk.ok("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-b"))
    env.egsd.stop()
    env.egsd.start()
    after = (sdk.ok("GET", "/api/v1/gpr-template?gprTemplateName=keep"),
             sdk.ok("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-b"))
    assert after == before
    sdk.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "team-b"})
    assert sdk.ok("GET", "/api/v1/gpr-template-binding/list")["templateBindings"] == []
    env.workspace("team-b", ["worker-1"])  # a new workspace of that name starts without a binding
    assert sdk.call("GET", "/api/v1/gpr-template-binding?gprTemplateBindingName=team-b")[0] == 404
    sdk.ok("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "keep"})  # no longer bound


def test_a_gpr_without_a_shape_takes_the_default_template(env):
    sdk = env.sdk
    sdk.ok("POST", "/api/v1/gpr-template", template_body("small", gpus=2, exit_duration="45m"))
    sdk.ok("POST", "/api/v1/gpr-template", dict(template_body("a100", cluster="worker-2", gpus=1), gpuShape="",
                                                 instanceType=""))
    status, doc = sdk.call("POST", "/api/v1/gpr", {"gprName": "plain", "sliceName": "team-a"})  # no binding yet
    assert status == 422 and doc["error"]["data"]["field"] == "numberOfGPUNodes"
    sdk.ok("POST", "/api/v1/gpr-template-binding", binding_body("team-a", [("worker-1", "small", ["small"]),
                                                                           ("worker-2", "a100", ["a100"])]))
    status, doc = sdk.call("POST", "/api/v1/gpr", {"gprName": "plain", "sliceName": "team-a"})  # which default?
    assert status == 422 and doc["error"]["data"]["field"] == "numberOfGPUNodes"
    gid = sdk.ok("POST", "/api/v1/gpr", {"gprName": "plain", "sliceName": "team-a", "clusterName": "worker-1"})["gprId"]
    g = sdk.ok("GET", "/api/v1/gpr?gprId=" + gid)
    assert (g["gprName"], g["clusterName"], g["numberOfGPUs"], g["exitDuration"]) == ("plain", "worker-1", 2, "0h45m0s")
    # a request that gives its own shape is an ordinary GPR, binding or not
    gid = sdk.ok("POST", "/api/v1/gpr", {"gprName": "own", "sliceName": "team-a", "numberOfGPUNodes": 1,
                                         "numberOfGPUs": 8, "exitDuration": "1h"})["gprId"]
    assert sdk.ok("GET", "/api/v1/gpr?gprId=" + gid)["numberOfGPUs"] == 8
