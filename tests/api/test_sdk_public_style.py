"""Our Python SDK (sdk/python/egs) run the way programs written for the public EGS SDK call it: its 36
functions with that SDK's keyword names, argument order and the attributes its return values have,
against a real egsd and real agents.  (Seed 000's examples, the other style, run verbatim in
test_sdk_examples.py.)"""
import pytest

from conftest import H100, A100, Cluster

import egs  # sdk/python, put on sys.path by conftest
from egs import exceptions
from egs.gpr_template import create_gpr_template, list_gpr_templates  # the public SDK's module layout
from egs.gpr_template_binding import create_gpr_template_binding
from egs.internal.inference_endpoint.create_inference_endpoint_data import GpuSpec, ModelSpec

SHAPE, ITYPE = H100["gpuModel"], H100["instanceType"]


@pytest.fixture
def env(tmpdir_path):
    c = Cluster(tmpdir_path)
    c.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    c.add_cluster("worker-2", [("a100-1", A100)])
    c.auth = egs.authenticate(c.egsd.url, c.egsd.admin_key, sdk_default=False)
    yield c
    c.auth.close()
    c.close()


def common(auth, **kw):
    """The keyword arguments every public-SDK request_gpu* call passes."""
    args = dict(workspace_name="ws1", node_count=1, gpu_per_node_count=1, memory_per_gpu=40, exit_duration="1h",
                priority=101, idle_timeout_duration="", enforce_idle_timeout=False, authenticated_session=auth)
    args.update(kw)
    return args


def test_keys_workspaces_and_gprs_in_the_public_style(env):
    auth = env.auth
    assert egs.create_workspace("ws1", ["worker-1", "worker-2"], ["ns1"], "u", "u@example.com", auth) == "ws1"
    assert [w.name for w in egs.list_workspaces(auth).workspaces] == ["ws1"]
    env.slice_token("ws1", "worker-1")
    assert egs.get_workspace_kubeconfig("ws1", "worker-1", auth).startswith("apiVersion: v1")

    key = egs.create_api_key("ed", "Editor", "30d", workspace_name="ws1", authenticated_session=auth)
    with pytest.raises(ValueError):  # the public SDK checks this before sending
        egs.create_api_key("ed2", "Editor", "30d", authenticated_session=auth)
    with pytest.raises(ValueError) as refused:  # a refusal is a ValueError there, and ours too
        egs.create_api_key("bad", "Owner", "never", authenticated_session=auth)
    assert isinstance(refused.value, exceptions.BadParameters) and refused.value.data["field"] == "validity"
    assert [k["name"] for k in egs.list_api_keys("ws1", authenticated_session=auth)["items"]] == ["ed"]
    editor = egs.authenticate(env.egsd.url, key, sdk_default=False)

    g1 = egs.request_gpu(request_name="r1", cluster_name="worker-1", instance_type=ITYPE, gpu_shape=SHAPE,
                         **common(editor))
    g2 = egs.request_gpu_with_auto_selection(request_name="r2", **common(editor, gpu_per_node_count=8))
    g3 = egs.request_gpu_with_auto_gpu_selection(request_name="r3", preferred_clusters=["worker-2"],
                                                 **common(editor, gpu_per_node_count=8, exit_duration="2h"))
    g4 = egs.request_gpu_with_auto_cluster(request_name="r4", instance_type=ITYPE, gpu_shape=SHAPE,
                                           **common(editor, enable_eviction=True))
    g5 = egs.request_gpu_with_manual_selection(request_name="r5", cluster_name="worker-1", instance_type=ITYPE,
                                               gpu_shape=SHAPE, **common(editor, enforce_idle_timeout=True,
                                                                         idle_timeout_duration="30m"))
    env.wait_state(g1, "Provisioned")
    st = egs.gpu_request_status(g3, editor)
    assert st.gpr_id == g3 and st.slice_name == "ws1" and st.number_of_gp_us == 8
    assert st.status.provisioning_status == "Queued" and st.dedicated_nodes is True
    egs.update_gpu_request_priority(g3, new_priority=150, authenticated_session=editor)
    egs.update_gpu_request_name(g3, "r3b", editor)
    assert egs.gpu_request_status(g3, editor).priority == 150
    assert egs.gpu_request_status(g4, editor).to_dict()["gprName"] == "r4"
    assert egs.gpu_request_status(g5, editor).gpr_name == "r5"
    listed = egs.gpu_request_status_for_workspace("ws1", editor)
    assert {g.gpr_id for g in listed.items} == {g1, g2, g3, g4, g5}
    egs.cancel_gpu_request(g3, editor)
    with pytest.raises(exceptions.GpuAlreadyProvisioned):
        egs.cancel_gpu_request(g1, editor)

    inv = egs.inventory(editor)  # the public SDK's only argument is the session
    held = [n for n in inv.managed_nodes if n.allocation]
    assert len(held) == 1 and held[0].availableGPUs == 0 and inv.unmanaged_nodes == []
    stamp = held[0].allocation[0].allocation_timestamp
    assert isinstance(stamp.seconds, int) and stamp.nanos == 0 and stamp.endswith("Z")  # and a str for seed 000
    usage = egs.workspace_inventory("ws1", editor).workspace_inventory
    assert [(u.cluster_name, u.gpu_per_node, u.total_gpu_nodes, u.memory_per_gpu) for u in usage] == [
        ("worker-1", 8, 1, H100["memoryMiB"])]

    egs.release_gpu(g1, editor)
    with pytest.raises(exceptions.GpuAlreadyReleased):
        egs.release_gpu(g1, editor)
    egs.delete_api_key(key, authenticated_session=auth)
    with pytest.raises(exceptions.ApiKeyNotFound):
        egs.authenticate(env.egsd.url, key, sdk_default=False)
    editor.close()


def test_templates_bindings_and_inference_in_the_public_style(env):
    auth = env.auth
    egs.create_workspace("ws1", ["worker-1"], ["ns1"], "u", "u@example.com", auth)
    assert create_gpr_template("t1", "worker-1", 2, 1, 40, SHAPE, ITYPE, "1h", 150, False, True, False,
                               authenticated_session=auth) == "t1"
    egs.create_gpr_template("t2", "worker-1", 1, 1, 40, SHAPE, ITYPE, "2h", 101, True, False, True, "30m",
                            authenticated_session=auth)
    t = egs.get_gpr_template("t2", auth)
    assert (t.name, t.cluster_name, t.number_of_gpus, t.exit_duration, t.enforce_idle_timeout,
            t.idle_timeout_duration) == ("t2", "worker-1", 1, "2h0m0s", True, "0h30m0s")
    assert [x.name for x in list_gpr_templates(auth).items] == ["t1", "t2"]
    egs.update_gpr_template("t2", "worker-1", 4, ITYPE, "3h", 1, 120, 40, SHAPE, False, False, False,
                            authenticated_session=auth)
    assert egs.get_gpr_template("t2", auth).number_of_gpus == 4

    made = create_gpr_template_binding("ws1", [{"clusterName": "worker-1", "defaultTemplateName": "t1",
                                                "templates": ["t1", "t2"]}], False, auth)
    assert made.name == "ws1" and made.namespace == "kubeslice-default" and made.enable_auto_gpr is False
    assert made.clusters[0].clusterName == "worker-1" and made.clusters[0].templates == ["t1", "t2"]
    got = egs.get_gpr_template_binding("ws1", auth)
    assert got.clusters[0].defaultTemplateName == "t1" and got.clusters[0].templateStatus == {"t1": "Ready",
                                                                                              "t2": "Ready"}
    assert [b.name for b in egs.list_gpr_template_bindings(auth).templateBindings] == ["ws1"]
    egs.update_gpr_template_binding("ws1", [{"clusterName": "worker-1", "defaultTemplateName": "t2",
                                             "templates": ["t2"]}], True, auth)
    assert egs.get_gpr_template_binding("ws1", auth).enable_auto_gpr is True

    gid = egs.request_gpu(request_name="from-template", workspace_name="ws1", template_name="t2",
                          authenticated_session=auth)
    g = egs.gpu_request_status(gid, auth)
    assert (g.gpr_name, g.number_of_gpus, g.priority, g.exit_duration) == ("from-template", 4, 120, "3h0m0s")
    with pytest.raises(exceptions.BadParameters):  # t1 is no longer bound
        egs.request_gpu(workspace_name="ws1", template_name="t1", authenticated_session=auth)
    with pytest.raises(exceptions.EgsException) as in_use:
        egs.delete_gpr_template("t2", auth)
    assert in_use.value.error_key == "GPR_TEMPLATE_IN_USE"
    egs.delete_gpr_template_binding("ws1", auth)
    egs.delete_gpr_template("t2", auth)

    spec = GpuSpec(SHAPE, ITYPE, 40, 1, 1, "1h", 101)
    made = egs.create_inference_endpoint("worker-1", "ep", "ws1", ModelSpec("huggingface", "hf://org/model"), spec,
                                         auth)
    assert made["endpointName"] == "ep"
    with pytest.raises(exceptions.BadParameters):  # "kind: X" is no Kubernetes object an endpoint may hold
        egs.create_inference_endpoint_with_custom_model_spec("worker-1", "ep2", "ws1", "kind: X", spec, auth)
    [brief] = egs.list_inference_endpoint("ws1", auth)["endpoints"]
    assert (brief["endpointName"], brief["modelName"], brief["namespace"]) == ("ep", "huggingface", "ns1")
    d = egs.describe_inference_endpoint("ws1", "ep", "worker-1", auth)["endpoint"]
    assert d["endpoint"] == "http://ep.ns1.svc.cluster.local" and d["gpuRequests"][0]["gprName"] == "ep"
    assert egs.delete_inference_endpoint("ws1", "ep", "worker-1", auth) == {}
