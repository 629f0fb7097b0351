"""The wire as the public EGS Python SDK (github: kubeslice-ent/egs-sdk) speaks it, against a real egsd and
real agents.  Each request below is built the way that SDK builds it (JSON with sorted keys, a fresh
POST /api/v1/auth before every call, a body on DELETE and on some GETs), and each answer is checked for
what that SDK reads from it: the keys its classes take as required keyword arguments, and the status
and top-level `message` it maps to its exceptions.  The SDK's code itself is not part of this project."""
import json
import time
from datetime import datetime, timezone

import pytest

from conftest import H100, Api, Cluster, wait_for

# The envelope is built with ApiResponse(**response): any other top-level key raises TypeError.
ENVELOPE = {"statusCode", "status", "message", "data", "error"}
# GpuRequestData(**data) and GpuRequestStatus(**status) require these keys.
GPR_KEYS = {"gprId", "sliceName", "clusterName", "numberOfGPUs", "numberOfGPUNodes", "instanceType", "memoryPerGPU",
            "priority", "gpuSharingMode", "estimatedStartTime", "estimatedWaitTime", "exitDuration", "earlyRelease",
            "gprName", "gpuShape", "multiNode", "dedicatedNodes", "enableRDMA", "enableSecondaryNetwork", "status"}
GPR_STATUS_KEYS = {"provisioningStatus", "failureReason", "numGpusAllocated", "startTimestamp", "completionTimestamp",
                   "cost", "nodes", "internalState", "retryCount", "delayedCount"}
# InventoryUsage(**item) of workspace_inventory().
USAGE_KEYS = {"instanceType", "gpuShape", "memoryPerGpu", "gpuPerNode", "totalGpuNodes", "clusterName"}
SHAPE = H100["gpuModel"]


class Sdk:
    """What the public SDK's client does for one API key: authenticate, then one call, per operation."""

    def __init__(self, port, key):
        self.port, self.key = port, key

    def auth(self):
        """(status, envelope) of POST /api/v1/auth as the SDK sends it."""
        return Api(self.port).call("POST", "/api/v1/auth", json.dumps({"apiKey": self.key}, sort_keys=True))

    def call(self, method, path, body=None):
        status, doc = self.auth()
        assert status == 200, doc
        api = Api(self.port, doc["data"]["token"])
        payload = None if body is None else json.dumps(body, sort_keys=True)
        status, doc = api.call(method, path, payload)
        assert set(doc) <= ENVELOPE, doc
        assert doc["statusCode"] == status
        return status, doc

    def ok(self, method, path, body=None):
        status, doc = self.call(method, path, body)
        assert status == 200, (method, path, doc)
        return doc["data"]


def gpr_body(name, ws, **kw):
    """The body of request_gpu(...) of the public SDK, unset options as it sends them."""
    body = {"gprName": name, "sliceName": ws, "clusterName": "", "preferredClusters": None,
            "enableAutoClusterSelection": False, "enableAutoGpuSelection": False, "numberOfGPUs": 1,
            "instanceType": "", "exitDuration": "1h", "numberOfGPUNodes": 1, "priority": 101, "memoryPerGpu": 40,
            "gpuShape": "", "idleTimeOutDuration": "", "enforceIdleTimeOut": False, "enableEviction": None,
            "requeueOnFailure": None}
    body.update(kw)
    return body


@pytest.fixture
def env(tmpdir_path):
    c = Cluster(tmpdir_path)
    c.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    c.workspace("team-a", ["worker-1"])
    c.workspace("team-b", ["worker-1"])
    c.sdk = Sdk(c.egsd.port, c.egsd.admin_key)
    yield c
    c.close()


def test_auth_answers_map_to_the_sdk_exceptions(env):
    sdk = env.sdk
    status, doc = sdk.auth()
    assert status == 200 and set(doc["data"]) == {"token"}
    # 400 -> ApiKeyInvalid
    assert Sdk(env.egsd.port, "not-a-key").auth()[0] == 400
    # 401 with another message -> ApiKeyNotFound
    status, doc = Sdk(env.egsd.port, "5067bd55-1aef-4c84-8987-3e966e917f07").auth()
    assert status == 401 and doc["message"] != "Api Key has expired"
    # 401 with the top-level message "Api Key has expired" -> ApiKeyExpired
    key = sdk.ok("POST", "/api/v1/api-key", {"name": "short", "userName": "admin", "description": "",
                                              "role": "Viewer", "validity": "30m", "workspaceName": "team-a"})["apiKey"]
    assert Sdk(env.egsd.port, key).auth()[0] == 200
    env.advance("31m")
    status, doc = Sdk(env.egsd.port, key).auth()
    assert status == 401 and doc["message"] == "Api Key has expired"
    assert doc["error"]["errorKey"] == "API_KEY_EXPIRED"
    status, doc = Api(env.egsd.port, key).call("GET", "/api/v1/gpr/list?sliceName=team-a")
    assert status == 401 and doc["message"] == "Api Key has expired"


def test_editor_key_writes_only_its_workspace(env):
    sdk = env.sdk
    body = {"name": "ed", "userName": "admin", "description": "", "role": "Editor", "validity": "30d"}
    status, doc = sdk.call("POST", "/api/v1/api-key", body)  # the SDK requires workspaceName for Editor too
    assert status == 422 and doc["error"]["data"]["field"] == "workspaceName"
    assert [k for k in sdk.ok("GET", "/api/v1/api-key/list")["items"] if k["name"] == "ed"] == []
    key = sdk.ok("POST", "/api/v1/api-key", dict(body, workspaceName="team-a"))["apiKey"]
    listed = [k for k in sdk.ok("GET", "/api/v1/api-key/list")["items"] if k["name"] == "ed"]
    assert [(k["role"], k["workspaceName"]) for k in listed] == [("Editor", "team-a")]
    editor = Sdk(env.egsd.port, key)
    gid = editor.ok("POST", "/api/v1/gpr", gpr_body("mine", "team-a"))["gprId"]
    env.wait_state(gid, "Provisioned")
    editor.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    status, _ = editor.call("POST", "/api/v1/gpr", gpr_body("theirs", "team-b"))
    assert status in (403, 404)
    assert [g["gprName"] for g in sdk.ok("GET", "/api/v1/gpr/list?sliceName=team-b")["items"]] == []
    status, _ = editor.call("POST", "/api/v1/api-key", dict(body, name="ed2", workspaceName="team-a"))
    assert status == 403  # an Editor is no admin


def test_list_api_keys_filters_by_workspace(env):
    sdk = env.sdk
    for name, ws in (("ka", "team-a"), ("kb", "team-b")):
        sdk.ok("POST", "/api/v1/api-key", {"name": name, "userName": "admin", "description": "", "role": "Viewer",
                                           "validity": "30d", "workspaceName": ws})
    assert {k["name"] for k in sdk.ok("GET", "/api/v1/api-key/list?workspaceName=team-a")["items"]} == {"ka"}
    assert {"ka", "kb", "bootstrap-admin"} <= {k["name"] for k in sdk.ok("GET", "/api/v1/api-key/list")["items"]}
    status, doc = sdk.call("GET", "/api/v1/api-key/list?workspaceName=nope")
    assert status == 404 and doc["error"]["data"]["field"] == "workspaceName"


def test_delete_api_key_by_its_text(env):
    sdk = env.sdk
    key = sdk.ok("POST", "/api/v1/api-key", {"name": "gone", "userName": "admin", "description": "",
                                              "role": "Owner", "validity": "30d"})["apiKey"]
    token = Sdk(env.egsd.port, key).auth()[1]["data"]["token"]
    before = sdk.ok("GET", "/api/v1/api-key/list")["items"]
    status, doc = sdk.call("DELETE", "/api/v1/api-key", {"apiKey": "not-a-key"})
    assert status == 422 and doc["error"]["data"]["field"] == "apiKey"
    status, doc = sdk.call("DELETE", "/api/v1/api-key", {"apiKey": "5067bd55-1aef-4c84-8987-3e966e917f07"})
    assert status == 404 and doc["error"]["errorKey"] == "API_KEY_NOT_FOUND"
    assert sdk.ok("GET", "/api/v1/api-key/list")["items"] == before
    status, doc = sdk.call("DELETE", "/api/v1/api-key", {"apiKey": env.egsd.admin_key})
    assert status == 409  # a key cannot delete itself
    sdk.ok("DELETE", "/api/v1/api-key", {"apiKey": key})
    assert Sdk(env.egsd.port, key).auth()[0] == 401
    assert Api(env.egsd.port, token).call("GET", "/api/v1/inventory/list")[0] == 401
    assert env.egsd.logs().count(key) == 0


def test_inventory_timestamps_for_both_readers(env):
    sdk = env.sdk
    gid = sdk.ok("POST", "/api/v1/gpr", gpr_body("run", "team-a", clusterName="worker-1",
                                                  instanceType=H100["instanceType"], gpuShape=SHAPE))["gprId"]
    env.wait_state(gid, "Provisioned")
    data = sdk.ok("GET", "/api/v1/inventory/list")
    held = [n for n in data["managedNodes"] if n["allocation"]]
    assert len(held) == 1 and held[0]["availableGPUs"] == 0
    alloc = held[0]["allocation"][0]
    assert alloc["gprName"] == "run" and alloc["sliceName"] == "team-a" and alloc["totalGPUsAllocated"] == 1
    ts = alloc["allocationTimeStamp"]
    assert set(ts) == {"seconds", "nanos"} and ts["nanos"] == 0
    # items keep the RFC 3339 text of the API document, for the same instant
    text = [n for n in data["items"] if n["allocation"]][0]["allocation"][0]["allocationTimeStamp"]
    assert datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp() == ts["seconds"]
    assert data["unmanagedNodes"] == []
    usage = sdk.ok("GET", "/api/v1/inventory?sliceName=team-a")["items"]
    assert len(usage) == 1 and USAGE_KEYS <= set(usage[0])
    assert (usage[0]["gpuPerNode"], usage[0]["totalGpuNodes"], usage[0]["memoryPerGpu"]) == (8, 1, H100["memoryMiB"])
    assert (usage[0]["instanceType"], usage[0]["gpuShape"], usage[0]["clusterName"]) == (H100["instanceType"], SHAPE,
                                                                                         "worker-1")
    assert sdk.ok("GET", "/api/v1/inventory?sliceName=team-b")["items"] == []


def test_gpr_views_carry_what_the_sdk_reads(env):
    sdk = env.sdk
    gid = sdk.ok("POST", "/api/v1/gpr", gpr_body("auto", "team-a", enableAutoClusterSelection=True,
                                                  enableAutoGpuSelection=True))["gprId"]
    g = sdk.ok("GET", "/api/v1/gpr?gprId=" + gid)
    assert GPR_KEYS <= set(g) and GPR_STATUS_KEYS <= set(g["status"])
    assert g["dedicatedNodes"] is True and g["gpuSharingMode"] == "Dedicated"
    items = sdk.ok("GET", "/api/v1/gpr/list?sliceName=team-a")["items"]
    assert [i["gprId"] for i in items] == [gid] and GPR_KEYS <= set(items[0])
    share = sdk.ok("POST", "/api/v1/gpr", gpr_body("half", "team-b", gpuSharingMode="Shared", numberOfGPUs=0.5))["gprId"]
    g = env.wait_state(share, "Provisioned")
    assert g["gpuSharingMode"] == "Shared" and g["dedicatedNodes"] is False  # its node serves other workspaces too


def test_delayed_count_counts_each_later_estimate(env):
    sdk = env.sdk
    for ws in ("team-c", "team-d", "team-e"):
        env.workspace(ws, ["worker-1"])
    for ws in ("team-a", "team-b"):  # both nodes busy for an hour
        env.wait_state(sdk.ok("POST", "/api/v1/gpr", gpr_body("hold", ws, numberOfGPUs=8))["gprId"], "Provisioned")
    waiting = sdk.ok("POST", "/api/v1/gpr", gpr_body("wait", "team-c", numberOfGPUNodes=2, numberOfGPUs=8))["gprId"]

    def view():
        return sdk.ok("GET", "/api/v1/gpr?gprId=" + waiting)

    first = view()
    assert first["status"]["delayedCount"] == 0 and first["estimatedStartTime"]
    starts = [first["estimatedStartTime"]]
    for n, ws in enumerate(("team-d", "team-e"), 1):  # each high-priority arrival ranks ahead of it
        sdk.ok("POST", "/api/v1/gpr", gpr_body("urgent", ws, priority=250, numberOfGPUNodes=2, numberOfGPUs=8))
        g = wait_for(lambda: view()["status"]["delayedCount"] == n and view(), what="delayedCount %d" % n)
        assert g["estimatedStartTime"] > starts[-1]
        starts.append(g["estimatedStartTime"])
    sdk.ok("PUT", "/api/v1/gpr", {"gprId": waiting, "gprName": "renamed"})  # nothing moves: still 2
    assert view()["status"]["delayedCount"] == 2


def test_inference_endpoints_on_the_public_sdks_wire(env):
    """The four calls exactly as the public SDK sends them (query strings, body keys, nulls for unset
    specs): create answers {endpointName}, list and describe answer every key the SDK's classes read,
    delete answers {} (nothing was applied on the mock cluster: the endpoint goes at once); a Viewer reads
    and may not write."""
    sdk = env.sdk
    raw = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ep-config}\ndata: {a: b}\n"
    body = {"clusterName": "worker-1", "endpointName": "ep", "workspace": "team-a", "modelSpec": None,
            "rawModelSpec": raw, "gpuSpec": None}
    assert sdk.ok("POST", "/api/v1/inference-endpoint", body) == {"endpointName": "ep"}
    brief = {"endpointName", "modelName", "status", "endpoint", "clusterName", "namespace"}
    [e] = sdk.ok("GET", "/api/v1/inference-endpoint/list?workspace=team-a")["endpoints"]
    assert set(e) == brief and e["namespace"] == "team-a-ns" and e["modelName"] == "custom"
    d = sdk.ok("GET", "/api/v1/inference-endpoint?workspace=team-a&endpoint=ep&cluster=worker-1")["endpoint"]
    assert brief | {"predictStatus", "ingressStatus", "tryCommand", "dnsRecords", "gpuRequests"} <= set(d)
    viewer = Sdk(env.egsd.port, env.key("Viewer", "team-a"))
    assert viewer.call("GET", "/api/v1/inference-endpoint/list?workspace=team-a")[0] == 200
    ref = {"endpoint": "ep", "workspace": "team-a", "cluster": "worker-1"}
    assert viewer.call("DELETE", "/api/v1/inference-endpoint", ref)[0] == 403
    assert viewer.call("POST", "/api/v1/inference-endpoint", dict(body, endpointName="ep2"))[0] == 403
    assert sdk.ok("DELETE", "/api/v1/inference-endpoint", ref) == {}
    assert sdk.ok("GET", "/api/v1/inference-endpoint/list?workspace=team-a")["endpoints"] == []
