"""Workspaces, projects, clusters, kubeconfig and the admin listings of nodes and GPUs."""
import yaml

from conftest import H100, A100, T4, wait_for


def test_workspace_crud_and_update(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.add_cluster("worker-2", [("a100-1", A100)])
    a = cluster.admin
    a.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "llm", "clusters": ["worker-1"],
                                              "namespaces": ["llm-dev"], "username": "John Doe",
                                              "email": "john@example.com"})
    status, doc = a.call("POST", "/api/v1/slice-workspace", {"workspaceName": "llm", "clusters": ["worker-1"]})
    assert status == 409 and doc["error"]["errorKey"] == "WORKSPACE_ALREADY_EXISTS"
    status, doc = a.call("POST", "/api/v1/slice-workspace", {"workspaceName": "nocl", "clusters": []})
    assert status == 422 and doc["error"]["data"]["field"] == "clusters"
    status, doc = a.call("POST", "/api/v1/slice-workspace", {"workspaceName": "x", "clusters": ["nope"]})
    assert status == 422 and doc["error"]["errorKey"] == "CLUSTER_NOT_FOUND"
    data = a.get("/api/v1/slice-workspace/list")
    assert list(data) == ["workspaces"]
    ws = data["workspaces"][0]
    assert ws["name"] == "llm" and ws["clusters"] == ["worker-1"]
    assert ws["namespaces"] == [{"namespace": "llm-dev", "clusters": ["worker-1"]}]
    assert set(ws) == {"name", "overlayNetworkDeploymentMode", "maxClusters", "sliceDescription", "clusters",
                       "namespaces"}
    a.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "llm", "addClusters": ["worker-2"],
                                             "addNamespaces": ["llm-prod"], "removeNamespaces": ["llm-dev"],
                                             "addUsers": [{"username": "ann", "email": "ann@example.com"}],
                                             "removeUsers": ["John Doe"]})
    got = a.get("/api/v1/slice-workspace?workspaceName=llm")
    assert got["clusters"] == ["worker-1", "worker-2"]
    assert got["namespaces"] == [{"namespace": "llm-prod", "clusters": ["worker-1", "worker-2"]}]
    assert got["users"] == [{"username": "ann", "email": "ann@example.com"}]
    status, doc = a.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "llm",
                                                            "removeClusters": ["worker-1", "worker-2"]})
    assert status == 422 and doc["error"]["data"]["field"] == "removeClusters"
    # A workspace holding a GPR cannot lose that cluster, nor be deleted.
    gid = cluster.gpr(sliceName="llm", clusterName="worker-1")
    cluster.wait_state(gid, "Provisioned")
    status, doc = a.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "llm", "removeClusters": ["worker-1"]})
    assert status == 409 and doc["error"]["errorKey"] == "WORKSPACE_HAS_ACTIVE_GPR"
    status, doc = a.call("DELETE", "/api/v1/slice-workspace", {"workspaceName": "llm"})
    assert status == 409 and doc["error"]["errorKey"] == "WORKSPACE_HAS_ACTIVE_GPR"
    queued = cluster.gpr(sliceName="llm", clusterName="worker-1")
    a.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    cluster.wait_state(gid, "Complete")
    cluster.wait_state(queued, "Provisioned")
    a.ok("PUT", "/api/v1/gpr", {"gprId": queued, "earlyRelease": True})
    cluster.wait_state(queued, "Complete")
    waiting = cluster.gpr(sliceName="llm", clusterName="worker-2", exitDuration="1h")
    # delete cancels what still waits (the A100 node is free, so wait until it is not provisioning)
    cluster.wait_state(waiting, "Provisioned")
    a.ok("PUT", "/api/v1/gpr", {"gprId": waiting, "earlyRelease": True})
    cluster.wait_state(waiting, "Complete")
    a.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "llm"})
    assert a.get("/api/v1/slice-workspace/list")["workspaces"] == []
    status, doc = a.call("GET", "/api/v1/gpr/list?sliceName=llm")
    assert status == 404 and doc["error"]["errorKey"] == "WORKSPACE_NOT_FOUND"
    assert doc["error"]["message"].startswith("Slice Workspace Not Found")


def test_delete_workspace_cancels_waiting_gprs(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.workspace("busy", ["worker-1"])
    cluster.workspace("w", ["worker-1"])
    cluster.wait_state(cluster.gpr(sliceName="busy"), "Provisioned")
    q = cluster.gpr(sliceName="w")
    cluster.admin.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "w"})
    assert cluster.status(q)["status"]["provisioningStatus"] == "Cancelled"


def test_kubeconfig_is_valid_yaml_for_the_workspace_namespace(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)], api_server="https://k8s.worker-1.example:6443")
    cluster.add_cluster("worker-2", [("a100-1", A100)], api_server=None)
    cluster.admin.ok("PUT", "/api/v1/clusters", {"clusterName": "worker-1", "caData": "TFMwdExTMUNSVWRKVGc9PQ=="})
    cluster.workspace("llm", ["worker-1", "worker-2"], ["llm-dev"])
    minted = cluster.slice_token("llm", "worker-1")  # as the cluster's agent reports it (test_slice_access.py)
    for method in ("POST", "GET"):  # clients send the body with a GET too
        kc = cluster.admin.ok(method, "/api/v1/slice-workspace/kube-config",
                              {"workspaceName": "llm", "clusterName": "worker-1"})["kubeConfig"]
        doc = yaml.safe_load(kc)
        assert doc["kind"] == "Config" and doc["current-context"] == doc["contexts"][0]["name"]
        assert doc["clusters"][0]["cluster"]["server"] == "https://k8s.worker-1.example:6443"
        assert doc["clusters"][0]["cluster"]["certificate-authority-data"] == "TFMwdExTMUNSVWRKVGc9PQ=="
        assert doc["contexts"][0]["context"]["namespace"] == "llm-dev"
        token = doc["users"][0]["user"]["token"]
        assert token == minted
    other = cluster.workspace("other", ["worker-1"])
    cluster.slice_token(other, "worker-1")
    kc2 = yaml.safe_load(cluster.admin.ok("POST", "/api/v1/slice-workspace/kube-config",
                                          {"workspaceName": other, "clusterName": "worker-1"})["kubeConfig"])
    assert kc2["users"][0]["user"]["token"] != token  # credentials are per workspace
    status, doc = cluster.admin.call("POST", "/api/v1/slice-workspace/kube-config",
                                     {"workspaceName": "llm", "clusterName": "worker-2"})
    assert status == 409 and doc["error"]["errorKey"] == "CLUSTER_HAS_NO_API_SERVER"
    status, doc = cluster.admin.call("POST", "/api/v1/slice-workspace/kube-config",
                                     {"workspaceName": "other", "clusterName": "worker-2"})
    assert status == 404 and doc["error"]["errorKey"] == "CLUSTER_NOT_FOUND"
    status, doc = cluster.admin.call("PUT", "/api/v1/clusters", {"clusterName": "worker-1",
                                                                 "apiServer": "https://x\"\ninjected: 1"})
    assert status == 422 and doc["error"]["data"]["field"] == "apiServer"


def test_clusters_nodes_gpus_listings(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("t4-1", T4)])
    status, doc = cluster.admin.call("POST", "/api/v1/clusters", {"clusterName": "worker-1"})
    assert status == 409 and doc["error"]["errorKey"] == "CLUSTER_ALREADY_EXISTS"
    cl = cluster.admin.get("/api/v1/clusters")["items"]
    assert cl == [dict(cl[0], clusterName="worker-1", projectName="default", agentConnected=True, nodes=2, gpus=12)]
    nodes = cluster.admin.get("/api/v1/nodes")["items"]
    assert [n["gpuNodeName"] for n in nodes] == ["h100-1", "t4-1"]
    gpus = cluster.admin.get("/api/v1/gpus")["items"]
    assert len(gpus) == 12 and len({g["uuid"] for g in gpus}) == 12
    assert all(g["uuid"].startswith("GPU-") for g in gpus)
    inv = cluster.admin.get("/api/v1/inventory/list")
    assert inv["items"] == inv["managedNodes"] and inv["unmanagedNodes"] == []
    t4 = [n for n in inv["items"] if n["gpuNodeName"] == "t4-1"][0]
    assert t4["memory"] == 16384 and t4["gpuCount"] == 4 and t4["availableGPUs"] == 4
    assert t4["gpuNodeStatus"] == "NODE_AVAILABLE" and t4["allocation"] == []
    # Heartbeats stop: the cluster shows disconnected and its nodes unschedulable, after the timeout.
    cluster.agents["worker-1"].stop(sig="kill")
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "20s", "keepHeartbeats": False})
    assert cluster.admin.get("/api/v1/clusters")["items"][0]["agentConnected"] is False
    nodes = cluster.admin.get("/api/v1/inventory/list")["items"]
    assert {n["nodeHealth"] for n in nodes} == {"Unschedulable"}


def test_projects_scope_clusters_and_workspaces(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    cluster.admin.ok("POST", "/api/v1/projects", {"projectName": "research"})
    status, doc = cluster.admin.call("POST", "/api/v1/projects", {"projectName": "research"})
    assert status == 409
    names = [p["projectName"] for p in cluster.admin.get("/api/v1/projects")["items"]]
    assert sorted(names) == ["default", "research"]
    cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "r-1", "projectName": "research"})
    # A workspace of one project cannot use another project's cluster.
    status, doc = cluster.admin.call("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["r-1"]})
    assert status == 422 and doc["error"]["errorKey"] == "CLUSTER_NOT_FOUND"
    cluster.admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["r-1"],
                                                          "projectName": "research"})
    key = cluster.admin.ok("POST", "/api/v1/api-key", {"name": "research-admin", "role": "Admin",
                                                        "projectName": "research"})["apiKey"]
    radmin = cluster.admin.with_token(key)
    assert [c["clusterName"] for c in radmin.get("/api/v1/clusters")["items"]] == ["r-1"]
    assert [w["name"] for w in radmin.get("/api/v1/slice-workspace/list")["workspaces"]] == ["w"]
    status, doc = radmin.call("POST", "/api/v1/slice-workspace", {"workspaceName": "x", "clusters": ["worker-1"]})
    assert status == 422  # worker-1 is not in project research
    status, doc = radmin.call("POST", "/api/v1/projects", {"projectName": "more"})
    assert status == 403
