"""Offline tests of the public EGS SDK's call style on our SDK: the bodies and queries its functions send
(keyword arguments of that SDK, templates, bindings, API keys) and the shapes they return, against the
in-process stub of test_sdk_offline.py."""

import pytest

import egs
from egs import exceptions
from test_sdk_offline import err, no_default_session, ok, session, stub  # noqa: F401  (fixtures)

NODE = {"gpuNodeName": "n1", "availableGPUs": 0, "allocation": [
    {"gprName": "g", "sliceName": "ws", "totalGPUsAllocated": 8,
     "allocationTimeStamp": {"seconds": 1795615222, "nanos": 0}}]}


def test_inventory_takes_the_session_first(stub, session):
    stub.on("GET", "/api/v1/inventory/list", ok({"managedNodes": [NODE], "unmanagedNodes": [], "items": []}))
    inv = egs.inventory(session)
    assert stub.api_calls()[0].query == {}  # no sliceName: the session is not a workspace name
    node = inv.managed_nodes[0]
    assert node.availableGPUs == 0 and node.available_gpus == 0 and inv[0] is not None
    stamp = node.allocation[0].allocation_timestamp
    assert (stamp.seconds, stamp.nanos, str(stamp)) == (1795615222, 0, "2026-11-25T14:00:22Z")


def test_seed_text_timestamps_also_read_as_seconds(stub, session):
    node = dict(NODE, allocation=[dict(NODE["allocation"][0], allocationTimeStamp="2026-11-25T14:00:22Z")])
    stub.on("GET", "/api/v1/inventory/list", ok({"items": [node]}))
    assert egs.inventory(None, session)[0].allocation[0].allocation_timestamp.seconds == 1795615222


def test_request_gpu_with_public_keywords(stub, session):
    stub.on("POST", "/api/v1/gpr", ok({"gprId": "gpr-1"}))
    gid = egs.request_gpu_with_auto_gpu_selection(
        request_name="r", workspace_name="ws", node_count=1, gpu_per_node_count=2, memory_per_gpu=40,
        exit_duration="1h", priority=150, idle_timeout_duration="30m", enforce_idle_timeout=True,
        preferred_clusters=["worker-2"], enable_eviction=True, authenticated_session=session)
    body = stub.api_calls()[0].body
    assert gid == "gpr-1"
    assert (body["enableAutoGpuSelection"], body["enableAutoClusterSelection"], body["preferredClusters"]) == (
        True, False, ["worker-2"])
    assert (body["idleTimeOutDuration"], body["enforceIdleTimeOut"], body["enableEviction"]) == ("30m", True, True)
    assert body["requeueOnFailure"] is None and body["gpuShape"] == "" and body["priority"] == 150
    with pytest.raises(ValueError):
        egs.request_gpu(request_name="r", workspace_name="ws", node_count=1, gpu_per_node_count=1,
                        exit_duration="1h", enforce_idle_timeout=True, authenticated_session=session)


def test_request_gpu_from_a_template_sends_only_names(stub, session):
    stub.on("POST", "/api/v1/gpr", ok({"gprId": "gpr-2"}))
    egs.request_gpu(workspace_name="ws", template_name="train", authenticated_session=session)
    assert stub.api_calls()[0].body == {"templateName": "train", "sliceName": "ws"}
    with pytest.raises(TypeError):  # neither a shape nor a template
        egs.request_gpu(request_name="r", workspace_name="ws", authenticated_session=session)


def test_priority_by_either_keyword(stub, session):
    stub.on("PUT", "/api/v1/gpr", ok(None))
    egs.update_gpu_request_priority("gpr-1", new_priority=250, authenticated_session=session)
    egs.update_gpu_request_priority("gpr-1", 260, session)
    assert [c.body["priority"] for c in stub.api_calls()] == [250, 260]
    with pytest.raises(TypeError):
        egs.update_gpu_request_priority("gpr-1", 1, session, new_priority=2)


def test_api_key_refusals_are_value_errors_too(stub, session):
    stub.on("POST", "/api/v1/api-key", err(422, "VALIDATION_FAILED", "validity must be a duration", {"field": "validity"}))
    with pytest.raises(ValueError) as e:
        egs.create_api_key("k", "Owner", "never", authenticated_session=session)
    assert isinstance(e.value, exceptions.BadParameters) and e.value.data == {"field": "validity"}
    stub.on("DELETE", "/api/v1/api-key", ok({"keyId": "key-1"}))
    stub.on("GET", "/api/v1/api-key/list", ok({"items": []}))
    assert egs.delete_api_key("5067bd55-1aef-4c84-8987-3e966e917f07", session) == {"keyId": "key-1"}
    assert egs.list_api_keys("ws", session) == {"items": []}
    delete, listing = stub.api_calls()[1:]
    assert delete.body == {"apiKey": "5067bd55-1aef-4c84-8987-3e966e917f07"}
    assert listing.query == {"workspaceName": ["ws"]}


def test_templates_and_bindings_wire(stub, session):
    tmpl = {"name": "t", "clusterName": "c", "numberOfGPUs": 2, "numberOfGPUNodes": 1, "memoryPerGpu": 40960,
            "gpuShape": "s", "instanceType": "i", "exitDuration": "1h0m0s", "priority": 101,
            "enforceIdleTimeOut": False, "enableEviction": False, "requeueOnFailure": False, "idleTimeOutDuration": ""}
    stub.on("POST", "/api/v1/gpr-template", ok({"gprTemplateName": "t"}))
    stub.on("GET", "/api/v1/gpr-template/list", ok({"items": [tmpl]}))
    assert egs.create_gpr_template("t", "c", 2, 1, 40, "s", "i", "1h", 101, authenticated_session=session) == "t"
    assert egs.list_gpr_templates(session).items[0].number_of_gpus == 2
    sent = stub.api_calls()[0].body
    assert (sent["numberOfGPUs"], sent["numberOfGPUNodes"], sent["memoryPerGpu"]) == (2, 1, 40)
    cluster = {"clusterName": "c", "defaultTemplateName": "t", "templates": ["t"], "defaultTemplateStatus": "Ready",
               "templateStatus": {"t": "Ready"}}
    stub.on("POST", "/api/v1/gpr-template-binding",
            ok({"name": "ws", "namespace": "kubeslice-default", "clusters": [cluster], "enableAutoGPR": True}))
    b = egs.create_gpr_template_binding("ws", [{"clusterName": "c", "defaultTemplateName": "t", "templates": ["t"]}],
                                        True, session)
    assert stub.api_calls()[-1].body == {"workspaceName": "ws", "enableAutoGPR": True, "clusters": [
        {"clusterName": "c", "defaultTemplateName": "t", "templates": ["t"]}]}
    assert (b.namespace, b.clusters[0].clusterName, b.clusters[0].cluster_name, b.clusters[0].templateStatus) == (
        "kubeslice-default", "c", "c", {"t": "Ready"})
