"""Names that reach a Kubernetes cluster: a workspace's name (the value of the label kubeslice.io/slice and its
default namespace) and its namespaces must be RFC 1123 labels, must not be a namespace the cluster or EGS
owns, and must not be a namespace another slice holds on the same cluster.  Each refusal is a 4xx naming
the field and the reason, before anything is stored (the workspace list and the event log are unchanged)."""
import pytest

from conftest import Cluster

HOSTILE = [("upper", "Team-A"), ("underscore", "team_a"), ("long64", "a" * 64), ("lead-dash", "-team"),
           ("trail-dash", "team-"), ("unicode", "työ"), ("empty", ""), ("dot", "team.a"), ("space", "team a"),
           ("slash", "a/b")]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("slice-names")))
    try:
        for name in ("worker-1", "worker-2"):  # registered only: names are checked before any agent is asked
            c.admin.ok("POST", "/api/v1/clusters", {"clusterName": name, "apiServer": "https://10.0.0.1:6443"})
        c.workspace("owner", ["worker-1"], ["shared-ns"])
        yield c
    finally:
        c.close()


def stored(c):
    ws = c.admin.get("/api/v1/slice-workspace/list")["workspaces"]
    return sorted(ws, key=lambda w: w["name"]), c.admin.get("/api/v1/events?limit=1")


def refused(c, method, body, status, field, reason=None, key=None):
    before = stored(c)
    got, doc = c.admin.call(method, "/api/v1/slice-workspace", body)
    assert got == status, doc
    err = doc["error"]
    assert err["data"]["field"] == field, err
    if reason:
        assert reason in err["message"], err
    if key:
        assert err["errorKey"] == key, err
    assert stored(c) == before
    return err


@pytest.mark.parametrize("label,name", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_workspace_name(env, label, name):
    refused(env, "POST", {"workspaceName": name, "clusters": ["worker-1"], "namespaces": ["ok-ns"]}, 422,
            "workspaceName")


@pytest.mark.parametrize("label,name", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_namespace(env, label, name):
    refused(env, "POST", {"workspaceName": "fresh", "clusters": ["worker-1"], "namespaces": ["ok-ns", name]}, 422,
            "namespaces")
    refused(env, "PUT", {"workspaceName": "owner", "addNamespaces": [name]}, 422, "addNamespaces")


def test_reasons_are_named(env):
    err = refused(env, "POST", {"workspaceName": "Team", "clusters": ["worker-1"]}, 422, "workspaceName")
    assert "lowercase" in err["message"]
    err = refused(env, "POST", {"workspaceName": "t", "clusters": ["worker-1"], "namespaces": ["a" * 64]}, 422,
                  "namespaces")
    assert "63" in err["message"]
    err = refused(env, "POST", {"workspaceName": "t", "clusters": ["worker-1"], "namespaces": ["-a"]}, 422,
                  "namespaces")
    assert "start and end" in err["message"]


@pytest.mark.parametrize("ns", ["kube-system", "kube-public", "kube-node-lease", "default", "egs-system"])
def test_reserved_namespaces(env, ns):
    refused(env, "POST", {"workspaceName": "grab", "clusters": ["worker-1"], "namespaces": [ns]}, 422, "namespaces",
            "reserved")
    refused(env, "PUT", {"workspaceName": "owner", "addNamespaces": [ns]}, 422, "addNamespaces", "reserved")


def test_workspace_named_like_a_reserved_namespace(env):
    # Without namespaces the workspace's name is its namespace: a slice named kube-system would own it.
    refused(env, "POST", {"workspaceName": "kube-system", "clusters": ["worker-1"]}, 422, "workspaceName", "reserved")
    refused(env, "POST", {"workspaceName": "default", "clusters": ["worker-1"]}, 422, "workspaceName", "reserved")


def test_namespace_of_another_slice(env):
    c = env
    refused(c, "POST", {"workspaceName": "thief", "clusters": ["worker-1"], "namespaces": ["shared-ns"]}, 409,
            "namespaces", "belongs to workspace owner", "NAMESPACE_IN_USE")
    # The same name on a cluster the owner does not use is another namespace: allowed.
    c.workspace("elsewhere", ["worker-2"], ["shared-ns"])
    # ...until that slice reaches into worker-1, where the name is taken.
    refused(c, "PUT", {"workspaceName": "elsewhere", "addClusters": ["worker-1"]}, 409, "addClusters",
            "belongs to workspace owner", "NAMESPACE_IN_USE")
    c.workspace("third", ["worker-1"], ["third-ns"])
    refused(c, "PUT", {"workspaceName": "third", "addNamespaces": ["shared-ns"]}, 409, "addNamespaces",
            "shared-ns", "NAMESPACE_IN_USE")
    # A workspace re-adding its own namespace, or dropping it while adding the cluster, is fine.
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "owner", "addNamespaces": ["shared-ns"]})
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "elsewhere", "addClusters": ["worker-1"],
                                                  "removeNamespaces": ["shared-ns"], "addNamespaces": ["own-ns"]})
    got = c.admin.get("/api/v1/slice-workspace?workspaceName=elsewhere")
    assert got["namespaces"] == [{"namespace": "own-ns", "clusters": ["worker-2", "worker-1"]}]
    # Once the owner lets go of the namespace, another slice may take it.
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "owner", "removeNamespaces": ["shared-ns"],
                                                  "addNamespaces": ["owner-ns"]})
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "third", "addNamespaces": ["shared-ns"]})


@pytest.mark.parametrize("name,ns", [("llm-gpt-4o", "llm-gpt-40-dev"), ("4o", "0"), ("a" * 63, "b" * 63),
                                     ("kubeflow", "kubernetes-dev")])
def test_valid_names_pass(env, name, ns):
    env.admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": name, "clusters": ["worker-1"],
                                                     "namespaces": [ns]})
    got = env.admin.get("/api/v1/slice-workspace?workspaceName=" + name)
    assert got["namespaces"] == [{"namespace": ns, "clusters": ["worker-1"]}]
