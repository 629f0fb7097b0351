"""Slice access end to end (docs/internals/agent-protocol.md section 5): a real egsd, a real
`egs-agent --backend kubernetes` running as the ServiceAccount of deploy/kubernetes/worker (its
least-privilege ClusterRole, enforced by the fake API server of tests/fake-k8s), and the real kubectl with
the kubeconfig egsd hands out.  The agent makes the slice's namespaces, ServiceAccount and RoleBindings and
mints the token; the kubeconfig then works in the slice's namespaces and nowhere else, dies at
regeneration, and what the agent made goes when the workspace (or a namespace, or a cluster) does, while a
namespace that existed before only loses the slice's label and bindings."""
import base64
import json
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, ROOT, wait_for
from k8sfix import K8sAgent, k8s_env

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")

KC = "/api/v1/slice-workspace/kube-config"
WS = "/api/v1/slice-workspace"
TTL_S = 3600
CREATED = "egs.kubeslice.io/created-by"
ADOPTED = "egs.kubeslice.io/adopted-by"


def apply_worker_rbac(fake):
    """The agent's ServiceAccount and ClusterRole and the ClusterRole egs-slice-user, as installed."""
    assert fake.post("/api/v1/namespaces", {"metadata": {"name": "egs-system"}})[0] == 201
    for f in ("rbac.yaml", "slice-user-role.yaml"):
        for doc in yaml.safe_load_all(open(os.path.join(ROOT, "deploy", "kubernetes", "worker", f))):
            kind = doc["kind"]
            if kind == "ServiceAccount":
                path = "/api/v1/namespaces/egs-system/serviceaccounts"
            else:
                path = "/apis/rbac.authorization.k8s.io/v1/%ss" % kind.lower()
            code, body = fake.post(path, doc)
            assert code == 201, body


class Env:
    """egsd (--slice-token-ttl), the fake API server with the worker's RBAC installed, cluster worker-2
    (not reachable) and worker-1 with a minimal egs-agent running as the egs-agent ServiceAccount."""

    def __init__(self, tmp, fake, cluster, agents):
        self.tmp = tmp
        self.fake = fake
        apply_worker_rbac(fake)
        self.egs = cluster
        self.admin = cluster.admin
        self.admin.ok("POST", "/api/v1/clusters", {"clusterName": "worker-2", "apiServer": "https://w2.example:6443"})
        agent_kc = fake.kubeconfig_for(fake.service_account_token("egs-system", "egs-agent", 36000),
                                       os.path.join(tmp, "agent.kubeconfig"))
        agent = K8sAgent(cluster, fake, "worker-1", kubeconfig=agent_kc, ca_data=fake.ca_bundle(), minimal=True)
        agents.append(agent.start())  # k8s_env stops it and prints its log
        self.log_path = agent.log_path

    def kubeconfig(self, ws, name, timeout=30):
        """Waits until egsd hands out ws's kubeconfig on worker-1; writes it to name, returns the path."""
        got = {}

        def ready():
            st, doc = self.admin.call("POST", KC, {"workspaceName": ws, "clusterName": "worker-1"})
            got["doc"] = doc
            return st == 200
        wait_for(ready, timeout=timeout, interval=0.2, what="the kubeconfig of %s (%s)" % (ws, got.get("doc")))
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(got["doc"]["data"]["kubeConfig"])
        return path

    def kubectl(self, kc, *args):
        return self.fake.kubectl(*args, kubeconfig=kc)

    def ns(self, name):
        code, doc = self.fake.get("/api/v1/namespaces/" + name)
        return doc if code == 200 and not doc["metadata"].get("deletionTimestamp") else None

    def labels(self, ns):
        """ns's labels but the one Kubernetes sets on every namespace."""
        return {k: v for k, v in self.ns(ns)["metadata"]["labels"].items() if k != "kubernetes.io/metadata.name"}

    def gone(self, path):
        return self.fake.get(path)[0] == 404

    def pods_seen(self, ws, ns, n):
        items = self.admin.get(WS + "?workspaceName=" + ws)["sliceNamespaces"]
        return any(x["namespace"] == ns and x["runningPods"] == n for x in items)


@pytest.fixture
def env(tmpdir_path):
    with k8s_env(tmpdir_path, terminate_seconds=0.3, egsd_extra=("--slice-token-ttl", str(TTL_S))) as (
            fake, cluster, agents):
        yield Env(tmpdir_path, fake, cluster, agents)


def jwt_claims(token):
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_the_kubeconfig_works_in_the_slice_only_and_dies_at_regeneration(env):
    """The agent (with only deploy/kubernetes/worker's RBAC) creates the namespaces labelled for the slice,
    the ServiceAccount with its generation, a RoleBinding to egs-slice-user per namespace and a token of
    the lifetime egsd --slice-token-ttl asks; the real kubectl with the kubeconfig lists pods in both of the
    slice's namespaces, is refused (403) in another slice's namespace and on nodes, and after regeneration
    the old kubeconfig gets 401 while the new one works."""
    env.egs.workspace("team-a", ["worker-1"], ["team-a-dev", "team-a-data"])
    env.egs.workspace("team-b", ["worker-1"], ["team-b-dev"])
    kc = env.kubeconfig("team-a", "a1.kubeconfig")
    env.kubeconfig("team-b", "b1.kubeconfig")
    for ns in ("team-a-dev", "team-a-data"):
        labels = env.ns(ns)["metadata"]["labels"]
        assert labels["kubeslice.io/slice"] == "team-a" and labels[CREATED] == "egs-agent", labels
        code, rb = env.fake.get("/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings/egs-slice-user" % ns)
        assert code == 200 and rb["roleRef"]["name"] == "egs-slice-user", rb
        assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "egs-slice-team-a", "namespace": "team-a-dev"}]
    code, sa = env.fake.get("/api/v1/namespaces/team-a-dev/serviceaccounts/egs-slice-team-a")
    assert code == 200 and sa["metadata"]["annotations"]["egs.kubeslice.io/generation"] == "1", sa
    token = yaml.safe_load(open(kc))["users"][0]["user"]["token"]
    claims = jwt_claims(token)
    assert claims["exp"] - claims["iat"] == TTL_S, claims
    assert token not in open(env.log_path, errors="replace").read()  # never logged

    for args in (("get", "pods"), ("get", "pods", "-n", "team-a-data"), ("get", "configmaps")):
        r = env.kubectl(kc, *args)
        assert r.returncode == 0, (args, r.stderr)
    for args in (("get", "pods", "-n", "team-b-dev"), ("get", "nodes"), ("get", "pods", "-n", "egs-system")):
        r = env.kubectl(kc, *args)
        assert r.returncode != 0 and "forbidden" in r.stderr.lower(), (args, r.stderr)

    # The workspace's owner regenerates with egsctl; egsctl then prints the new kubeconfig.
    key_file = os.path.join(env.tmp, "owner.key")
    with open(key_file, "w") as f:
        f.write(env.egs.key("Owner", "team-a"))
    ctl = [os.path.join(BIN, "egsctl"), "--server", env.egs.egsd.url, "--key-file", key_file,
           "--config", os.path.join(env.tmp, "egsctl.config")]
    r = subprocess.run(ctl + ["regenerate", "kubeconfig", "team-a", "--cluster", "worker-1"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split("\n")[1].split() == ["worker-1", "2", "true"], (r.stdout, r.stderr)
    env.kubeconfig("team-a", "a2.kubeconfig")
    r = subprocess.run(ctl + ["kubeconfig", "team-a", "--cluster", "worker-1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    kc2 = os.path.join(env.tmp, "a2-ctl.kubeconfig")
    with open(kc2, "w") as f:
        f.write(r.stdout)
    r = env.kubectl(kc, "get", "pods")
    assert r.returncode != 0 and "unauthorized" in r.stderr.lower(), r.stderr
    r = env.kubectl(kc2, "get", "pods")
    assert r.returncode == 0, r.stderr
    code, sa2 = env.fake.get("/api/v1/namespaces/team-a-dev/serviceaccounts/egs-slice-team-a")
    assert sa2["metadata"]["annotations"]["egs.kubeslice.io/generation"] == "2"
    assert sa2["metadata"]["uid"] != sa["metadata"]["uid"]

    # And with the Python SDK, on every cluster of the workspace: the second kubeconfig dies too.
    import egs
    session = egs.authenticate(env.egs.egsd.url, env.admin.token, sdk_default=False)
    assert egs.regenerate_workspace_kubeconfig("team-a", authenticated_session=session) == [
        {"clusterName": "worker-1", "generation": 3, "agentMintsTokens": True}]
    kc3 = env.kubeconfig("team-a", "a3.kubeconfig")
    assert "unauthorized" in env.kubectl(kc2, "get", "pods").stderr.lower()
    assert env.kubectl(kc3, "get", "pods").returncode == 0


def test_edits_and_deletion_remove_what_the_agent_made_and_refuse_namespaces_running_pods(env):
    """A namespace that existed joins the slice and, when the workspace goes, only loses the slice's label,
    RoleBinding and ServiceAccount (its own objects stay); the namespaces the agent created are deleted
    when the workspace, the namespace or the cluster leaves; a namespace running pods is refused with
    409 NAMESPACE_HAS_PODS (nothing changes) unless force is given."""
    f = env.fake
    assert f.post("/api/v1/namespaces", {"metadata": {"name": "legacy", "labels": {"team": "x"}}})[0] == 201
    assert f.post("/api/v1/namespaces/legacy/configmaps", {"metadata": {"name": "keep-me"}, "data": {"a": "b"}})[0] == 201
    env.egs.workspace("team-a", ["worker-1", "worker-2"], ["legacy", "team-a-dev"])
    env.kubeconfig("team-a", "a.kubeconfig")
    labels = env.labels("legacy")
    assert labels == {"team": "x", "kubeslice.io/slice": "team-a", ADOPTED: "egs-agent"}, labels
    # The ServiceAccount lives in the first namespace: the pre-existing one.
    assert f.get("/api/v1/namespaces/legacy/serviceaccounts/egs-slice-team-a")[0] == 200

    # A namespace added later is created and bound; removed again, the agent deletes it.
    env.admin.ok("PUT", WS, {"workspaceName": "team-a", "addNamespaces": ["team-a-tmp"]})
    wait_for(lambda: f.get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a-tmp/rolebindings/egs-slice-user")[0]
             == 200, timeout=30, what="the new namespace bound")
    wait_for(lambda: env.pods_seen("team-a", "team-a-tmp", 0), timeout=30, what="the report of team-a-tmp")
    env.admin.ok("PUT", WS, {"workspaceName": "team-a", "removeNamespaces": ["team-a-tmp"]})
    wait_for(lambda: env.gone("/api/v1/namespaces/team-a-tmp"), timeout=30, what="team-a-tmp deleted")

    # A running pod holds its namespace: refused, and nothing changes.
    pod = {"metadata": {"name": "train", "namespace": "team-a-dev"},
           "spec": {"containers": [{"name": "main", "image": "cuda:12"}]}}
    assert f.post("/api/v1/namespaces/team-a-dev/pods", pod)[0] == 201
    wait_for(lambda: env.pods_seen("team-a", "team-a-dev", 1), timeout=30, what="the pod reported")
    for method, body, field in (("PUT", {"removeNamespaces": ["team-a-dev"]}, "removeNamespaces"),
                                ("PUT", {"removeClusters": ["worker-1"]}, "removeClusters"),
                                ("DELETE", {}, "workspaceName")):
        body["workspaceName"] = "team-a"
        st, doc = env.admin.call(method, WS, body)
        assert st == 409 and doc["error"]["errorKey"] == "NAMESPACE_HAS_PODS", doc
        assert doc["error"]["data"]["field"] == field and "team-a-dev" in doc["error"]["message"], doc
    st, doc = env.admin.call("PUT", WS, {"workspaceName": "team-a", "removeNamespaces": ["team-a-dev"], "force": "yes"})
    assert st == 422 and doc["error"]["data"]["field"] == "force", doc
    ws = env.admin.get(WS + "?workspaceName=team-a")
    assert sorted(n["namespace"] for n in ws["namespaces"]) == ["legacy", "team-a-dev"], ws
    assert ws["clusters"] == ["worker-1", "worker-2"]
    assert env.ns("team-a-dev") is not None

    # Forced: the workspace goes; the created namespace with it, the pre-existing one stays, unlabelled.
    env.admin.ok("DELETE", WS, {"workspaceName": "team-a", "force": True})
    wait_for(lambda: env.gone("/api/v1/namespaces/team-a-dev"), timeout=30, what="team-a-dev deleted")
    wait_for(lambda: "kubeslice.io/slice" not in env.labels("legacy"), timeout=30, what="legacy unlabelled")
    assert env.labels("legacy") == {"team": "x"}
    assert f.get("/api/v1/namespaces/legacy/configmaps/keep-me")[0] == 200
    assert env.gone("/apis/rbac.authorization.k8s.io/v1/namespaces/legacy/rolebindings/egs-slice-user")
    assert env.gone("/api/v1/namespaces/legacy/serviceaccounts/egs-slice-team-a")

    # A cluster that leaves a workspace takes the namespaces the agent made there along.
    env.egs.workspace("team-c", ["worker-1", "worker-2"], ["team-c-dev"])
    env.kubeconfig("team-c", "c.kubeconfig")
    wait_for(lambda: env.pods_seen("team-c", "team-c-dev", 0), timeout=30, what="the report of team-c-dev")
    env.admin.ok("PUT", WS, {"workspaceName": "team-c", "removeClusters": ["worker-1"]})
    wait_for(lambda: env.gone("/api/v1/namespaces/team-c-dev"), timeout=30, what="team-c-dev deleted")
    assert env.admin.get(WS + "?workspaceName=team-c")["sliceNamespaces"] == []


def test_a_namespace_of_another_slice_is_refused_with_the_reason(env):
    """A namespace labelled for another slice is never taken: the agent reports the failure and the
    kubeconfig answer is 409 KUBECONFIG_NOT_READY with the agent's message; the namespace is unchanged."""
    code, _ = env.fake.post("/api/v1/namespaces", {"metadata": {"name": "shared",
                                                               "labels": {"kubeslice.io/slice": "someone-else"}}})
    assert code == 201
    env.egs.workspace("team-a", ["worker-1"], ["shared"])
    said = {}

    def refused():
        st, doc = env.admin.call("POST", KC, {"workspaceName": "team-a", "clusterName": "worker-1"})
        said["doc"] = doc
        return st == 409 and "belongs to slice someone-else" in doc["error"]["message"]
    wait_for(refused, timeout=30, interval=0.2, what="the refusal (%s)" % said.get("doc"))
    assert said["doc"]["error"]["errorKey"] == "KUBECONFIG_NOT_READY"
    assert env.labels("shared") == {"kubeslice.io/slice": "someone-else"}
    assert env.gone("/api/v1/namespaces/shared/serviceaccounts/egs-slice-team-a")
    events = env.admin.get("/api/v1/events")["items"]
    assert any(e["reason"] == "SliceAccessFailed" and "someone-else" in e["message"] for e in events)
