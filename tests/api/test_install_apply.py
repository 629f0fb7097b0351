"""deploy/kubernetes applied with the real `kubectl apply -k` to the fake Kubernetes API server
(tests/fake-k8s, which enforces RBAC), and a kubeconfig from egsd that works there: the agent's ClusterRole
grants what docs/kubernetes-install.md lists and refuses the rest, the GPR custom resource is served with
its printer columns, and a slice ServiceAccount bound to egs-slice-user (the agent's job, done here by hand;
test_slice_access_k8s.py has the agent do it) gives a kubeconfig from egsd that lists pods in the slice's
namespace and is refused elsewhere."""
import base64
import os
import shutil
import sys

import pytest
import yaml

from conftest import ROOT, Api, Cluster

sys.path.insert(0, os.path.join(ROOT, "tests", "fake-k8s"))
from fakek8s import FakeK8s  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")


def ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def k8s():
    k = FakeK8s(terminate_seconds=0.3)
    yield k
    k.close()


def test_apply_both_bases_and_the_agents_rbac(k8s, tmp_path):
    out = ok(k8s.kubectl("apply", "-k", os.path.join(ROOT, "deploy", "kubernetes", "worker")))
    assert "customresourcedefinition.apiextensions.k8s.io/gpuprovisioningrequests.egs.kubeslice.io created" in out
    assert "clusterrole.rbac.authorization.k8s.io/egs-agent created" in out
    assert "mutatingwebhookconfiguration.admissionregistration.k8s.io/egs-agent created" in out
    ok(k8s.kubectl("apply", "-k", os.path.join(ROOT, "deploy", "kubernetes", "controller")))
    assert "egsd" in ok(k8s.kubectl("get", "statefulset", "-n", "egs-system"))
    assert "unchanged" in ok(k8s.kubectl("apply", "-k", os.path.join(ROOT, "deploy", "kubernetes", "worker")))
    # The agent's ServiceAccount can do what the table says, and not more.
    token = k8s.service_account_token("egs-system", "egs-agent")
    assert token
    kc = k8s.kubeconfig_for(token, str(tmp_path / "agent.kubeconfig"))
    def can(*args):
        return k8s.kubectl("auth", "can-i", *args, kubeconfig=kc).stdout.strip()
    for args in (("patch", "nodes"), ("watch", "pods", "-A"), ("create", "pods", "--subresource=eviction", "-n", "x"),
                 ("create", "serviceaccounts", "--subresource=token", "-n", "x"), ("create", "rolebindings", "-n", "x"),
                 ("bind", "clusterroles/egs-slice-user"), ("patch", "gpuprovisioningrequests.egs.kubeslice.io", "--subresource=status", "-n", "x"),
                 ("create", "deployments.apps", "-n", "x"), ("delete", "services", "-n", "x")):
        assert can(*args) == "yes", args
    for args in (("get", "secrets", "-n", "x"), ("create", "pods", "-n", "x"), ("delete", "nodes"),
                 ("update", "deployments.apps", "-n", "x"), ("list", "configmaps", "-n", "x"),
                 ("bind", "clusterroles/cluster-admin"), ("create", "clusterrolebindings"), ("create", "roles", "-n", "x")):
        assert can(*args) == "no", args


def test_gpr_custom_resource_and_a_working_kubeconfig_from_egsd(k8s, tmp_path):
    ok(k8s.kubectl("apply", "-k", os.path.join(ROOT, "deploy", "kubernetes", "worker")))
    # What the agent's sliceAccess action does (docs/internals/agent-protocol.md, section 5), by hand.
    # (kubectl apply sends JSON; the fake refuses the protobuf bodies of typed `kubectl create`.)
    ok(k8s.kubectl("apply", "-f", "-", input="""
apiVersion: v1
kind: Namespace
metadata: {name: team-a-dev, labels: {kubeslice.io/slice: team-a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b-dev, labels: {kubeslice.io/slice: team-b}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: egs-slice-team-a, namespace: team-a-dev}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: egs-slice-user, namespace: team-a-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: egs-slice-user}
subjects: [{kind: ServiceAccount, name: egs-slice-team-a, namespace: team-a-dev}]
"""))
    sa_token = k8s.service_account_token("team-a-dev", "egs-slice-team-a")
    c = Cluster(str(tmp_path / "egs"))
    try:
        data = c.admin.ok("POST", "/api/v1/clusters", {"clusterName": "worker-1", "apiServer": k8s.url,
                                                      "caData": k8s.ca_bundle()})
        agent = Api(c.egsd.port, data["agentToken"])
        c.workspace("team-a", ["worker-1"], ["team-a-dev"])
        agent.ok("POST", "/api/v1/agent/slice-access", {"workspace": "team-a", "generation": 1, "ok": True,
                                                        "token": sa_token, "expiresAt": "2099-01-01T00:00:00Z"})
        owner = Api(c.egsd.port, c.key("Owner", "team-a"))
        path = tmp_path / "team-a.kubeconfig"
        path.write_text(owner.ok("POST", "/api/v1/slice-workspace/kube-config",
                                 {"workspaceName": "team-a", "clusterName": "worker-1"})["kubeConfig"])
    finally:
        c.close()
    kc = str(path)
    assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["certificate-authority-data"] == k8s.ca_bundle()
    assert base64.b64decode(k8s.ca_bundle())
    r = k8s.kubectl("get", "pods", kubeconfig=kc)  # the context's namespace: team-a-dev
    assert r.returncode == 0, r.stderr
    gpr = ("apiVersion: egs.kubeslice.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: train-llm}\n"
           "spec: {sliceName: team-a, numberOfGPUNodes: 1, numberOfGPUs: 8, exitDuration: 6h, priority: 201}\n")
    assert "created" in ok(k8s.kubectl("apply", "-f", "-", kubeconfig=kc, input=gpr))
    head = ok(k8s.kubectl("get", "gpr", kubeconfig=kc)).splitlines()[0].split()
    assert head[:4] == ["NAME", "STATE", "ESTIMATE", "NODES"], head
    r = k8s.kubectl("get", "pods", "-n", "team-b-dev", kubeconfig=kc)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower()
    r = k8s.kubectl("get", "nodes", kubeconfig=kc)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower()
    r = k8s.kubectl("get", "secrets", "-n", "egs-system", kubeconfig=kc)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower()
