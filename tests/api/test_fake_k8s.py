"""The fake Kubernetes API server (tests/fake-k8s) speaks Kubernetes: driven by the real kubectl
through its generated kubeconfig, and over HTTP for the semantics kubectl does not show (409 on a
stale write, watch bookmarks and 410 Gone, the patch formats, eviction refusals, the scheduler)."""
import os
import shutil
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake-k8s"))
from fakek8s import FakeK8s  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def k8s():
    k = FakeK8s(terminate_seconds=0.3)
    yield k
    k.close()


def wait_for(fn, timeout=10.0, every=0.05):
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise AssertionError("condition not reached in %.1fs" % timeout)
        time.sleep(every)


def ok(r):
    assert r.returncode == 0, (r.args, r.stdout, r.stderr)
    return r.stdout


def make_ns(k, name, labels=None):
    code, doc = k.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name, "labels": labels or {}}})
    assert code == 201, doc
    return doc


def pod_body(name, gpus=0, labels=None, **spec):
    c = {"name": "main", "image": "busybox:1.36"}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": dict({"containers": [c]}, **spec)}


def test_discovery_and_authentication(k8s):
    code, doc = k8s.get("/api/v1")
    assert code == 200 and doc["kind"] == "APIResourceList"
    names = {r["name"]: r for r in doc["resources"]}
    assert names["pods/eviction"]["group"] == "policy" and names["pods/eviction"]["kind"] == "Eviction"
    assert names["nodes"]["shortNames"] == ["no"] and names["nodes"]["namespaced"] is False
    code, doc = k8s.get("/apis")
    assert {"apps", "policy", "rbac.authorization.k8s.io", "apiextensions.k8s.io"} <= {g["name"] for g in doc["groups"]}
    code, doc = k8s.get("/api/v1/nodes", token="")
    assert code == 401 and doc["kind"] == "Status" and doc["reason"] == "Unauthorized"
    code, doc = k8s.get("/api/v1/nodes", token="not-a-token")
    assert code == 401
    out = ok(k8s.kubectl("api-resources"))
    assert "poddisruptionbudgets" in out and "pdb" in out
    code, doc = k8s.get("/api/v1/nodes?fieldSelector=spec.bogus%3Dx")
    assert code == 400 and "field label not supported: spec.bogus" in doc["message"]


def test_kubectl_nodes_label_taint_cordon(k8s):
    assert k8s.add_gpu_node("kn-gpu-1")[0] == 201
    assert k8s.add_gpu_node("kn-gpu-2", gpus=4)[0] == 201
    out = ok(k8s.kubectl("get", "no"))
    assert "kn-gpu-1" in out and "kn-gpu-2" in out and "Ready" in out
    ok(k8s.kubectl("label", "node", "kn-gpu-1", "team=ml"))
    ok(k8s.kubectl("annotate", "node", "kn-gpu-1", "note=hello"))
    ok(k8s.kubectl("taint", "node", "kn-gpu-1", "kubeslice.io/egs=dedicated-node:NoSchedule"))
    _, n = k8s.get("/api/v1/nodes/kn-gpu-1")
    assert n["metadata"]["labels"]["team"] == "ml" and n["metadata"]["annotations"]["note"] == "hello"
    assert n["spec"]["taints"] == [{"key": "kubeslice.io/egs", "value": "dedicated-node", "effect": "NoSchedule"}]
    ok(k8s.kubectl("label", "node", "kn-gpu-1", "team-"))
    ok(k8s.kubectl("taint", "node", "kn-gpu-1", "kubeslice.io/egs-"))
    _, n = k8s.get("/api/v1/nodes/kn-gpu-1")
    assert "team" not in n["metadata"]["labels"] and not n["spec"].get("taints")
    ok(k8s.kubectl("cordon", "kn-gpu-2"))
    assert "SchedulingDisabled" in ok(k8s.kubectl("get", "node", "kn-gpu-2"))
    # As the node lifecycle controller does, a cordoned node gets the unschedulable taint.
    wait_for(lambda: any(t["key"] == "node.kubernetes.io/unschedulable"
                         for t in k8s.get("/api/v1/nodes/kn-gpu-2")[1]["spec"].get("taints", [])))
    ok(k8s.kubectl("uncordon", "kn-gpu-2"))
    wait_for(lambda: not k8s.get("/api/v1/nodes/kn-gpu-2")[1]["spec"].get("taints"))
    assert not k8s.get("/api/v1/nodes/kn-gpu-2")[1]["spec"].get("unschedulable")


MANIFEST = """apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: demo
data:
  mode: %s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: demo
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {demo-node: "yes"}
      containers:
      - name: web
        image: nginx:1.27
        env:
        - {name: A, value: "1"}
"""


def test_kubectl_apply_manifest(k8s, tmp_path):
    k8s.add_gpu_node("demo-n1", gpus=0, labels={"demo-node": "yes"})
    f = tmp_path / "app.yaml"
    f.write_text(MANIFEST % "fast")
    out = ok(k8s.kubectl("apply", "-f", str(f)))
    for what in ("namespace/demo", "configmap/settings", "deployment.apps/web"):
        assert what + " created" in out
    out = ok(k8s.kubectl("apply", "-f", str(f)))
    for what in ("namespace/demo", "configmap/settings", "deployment.apps/web"):
        assert what + " unchanged" in out
    f.write_text(MANIFEST % "slow")
    out = ok(k8s.kubectl("apply", "-f", str(f)))
    assert "configmap/settings configured" in out and "deployment.apps/web unchanged" in out
    assert k8s.get("/api/v1/namespaces/demo/configmaps/settings")[1]["data"] == {"mode": "slow"}
    # The deployment controller runs its pods; the scheduler honours the nodeSelector.
    wait_for(lambda: k8s.get("/apis/apps/v1/namespaces/demo/deployments/web")[1].get("status", {}).get(
        "readyReplicas") == 2)
    assert ok(k8s.kubectl("get", "pods", "-n", "demo")).count("Running") == 2
    _, pods = k8s.get("/api/v1/namespaces/demo/pods?labelSelector=app%3Dweb")
    assert {p["spec"]["nodeName"] for p in pods["items"]} == {"demo-n1"}
    assert all(p["status"]["podIP"] == "127.0.0.1" for p in pods["items"])
    assert "2/2" in ok(k8s.kubectl("get", "deploy", "web", "-n", "demo"))


def test_kubectl_drain_with_pdb(k8s):
    make_ns(k8s, "drain")
    k8s.add_gpu_node("drain-a", gpus=0, labels={"pool": "drain"})
    # Pods of a controller (kubectl drain refuses bare pods without --force), pinned to the node.
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"replicas": 2, "podManagementPolicy": "Parallel", "selector": {"matchLabels": {"app": "db"}},
                    "serviceName": "db", "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                        "nodeSelector": {"pool": "drain"}, "containers": [{"name": "db", "image": "postgres:16"}]}}}}
    assert k8s.post("/apis/apps/v1/namespaces/drain/statefulsets", sts)[0] == 201
    wait_for(lambda: sorted((p["metadata"]["name"], p["status"]["phase"]) for p in k8s.get(
        "/api/v1/namespaces/drain/pods")[1]["items"]) == [("db-0", "Running"), ("db-1", "Running")])
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}}
    assert k8s.post("/apis/policy/v1/namespaces/drain/poddisruptionbudgets", pdb)[0] == 201
    # The eviction API refuses as a real server does: 429 with the DisruptionBudget cause.
    code, st = k8s.post("/api/v1/namespaces/drain/pods/db-0/eviction",
                        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0"}})
    assert code == 429 and st["reason"] == "TooManyRequests"
    assert st["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "needs 2 healthy pods and has 2 currently" in st["details"]["causes"][0]["message"]
    r = k8s.kubectl("drain", "drain-a", "--ignore-daemonsets", "--timeout=2s")
    assert r.returncode != 0 and "disruption budget" in r.stdout + r.stderr
    assert len(k8s.get("/api/v1/namespaces/drain/pods")[1]["items"]) == 2
    ok(k8s.kubectl("patch", "pdb", "db", "-n", "drain", "--type=merge",
                   "-p", '{"spec":{"minAvailable":null,"maxUnavailable":2}}'))
    out = ok(k8s.kubectl("drain", "drain-a", "--ignore-daemonsets", "--timeout=20s"))
    assert "pod/db-0 evicted" in out and "pod/db-1 evicted" in out
    # Their StatefulSet recreates them, and they wait: the only node of their pool is cordoned.
    pods = wait_for(lambda: k8s.get("/api/v1/namespaces/drain/pods")[1]["items"])
    assert all(not p["spec"].get("nodeName") for p in pods)


def test_kubectl_events(k8s):
    make_ns(k8s, "evns")
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "gpr-1.provisioned"},
          "involvedObject": {"kind": "Namespace", "name": "evns", "apiVersion": "v1"},
          "reason": "Provisioned", "message": "GPR gpr-1 provisioned 2 nodes", "type": "Normal",
          "source": {"component": "egs-agent"}, "firstTimestamp": "2026-01-01T00:00:00Z",
          "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1}
    assert k8s.post("/api/v1/namespaces/evns/events", ev)[0] == 201
    out = ok(k8s.kubectl("get", "events", "-n", "evns"))
    assert "Provisioned" in out and "GPR gpr-1 provisioned 2 nodes" in out
    _, lst = k8s.get("/api/v1/namespaces/evns/events?fieldSelector=reason%3DProvisioned")
    assert [e["metadata"]["name"] for e in lst["items"]] == ["gpr-1.provisioned"]


def test_conflicts_and_not_found(k8s):
    make_ns(k8s, "occ")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    code, c1 = k8s.post("/api/v1/namespaces/occ/configmaps", cm)
    assert code == 201 and c1["metadata"]["uid"] and c1["metadata"]["creationTimestamp"]
    code, st = k8s.post("/api/v1/namespaces/occ/configmaps", cm)
    assert code == 409 and st["reason"] == "AlreadyExists" and st["message"] == 'configmaps "c" already exists'
    c2 = dict(c1, data={"a": "2"})
    code, c2 = k8s.put("/api/v1/namespaces/occ/configmaps/c", c2)
    assert code == 200 and int(c2["metadata"]["resourceVersion"]) > int(c1["metadata"]["resourceVersion"])
    code, st = k8s.put("/api/v1/namespaces/occ/configmaps/c", dict(c1, data={"a": "3"}))
    assert code == 409 and st["reason"] == "Conflict" and "the object has been modified" in st["message"]
    code, st = k8s.patch("/api/v1/namespaces/occ/configmaps/c",
                         {"metadata": {"resourceVersion": c1["metadata"]["resourceVersion"]}, "data": {"a": "4"}})
    assert code == 409 and st["reason"] == "Conflict"
    assert k8s.get("/api/v1/namespaces/occ/configmaps/c")[1]["data"] == {"a": "2"}
    code, st = k8s.get("/api/v1/namespaces/occ/configmaps/nope")
    assert code == 404 and st["reason"] == "NotFound" and st["details"] == {"name": "nope", "group": "",
                                                                              "kind": "configmaps"}
    code, st = k8s.post("/api/v1/namespaces/nons/configmaps", cm)
    assert code == 404 and st["message"] == 'namespaces "nons" not found'
    code, st = k8s.post("/api/v1/namespaces/occ/configmaps", dict(cm, metadata={"name": "Bad_Name"}))
    assert code == 422 and st["reason"] == "Invalid" and st["details"]["causes"][0]["field"] == "metadata.name"
    code, st = k8s.post("/api/v1/namespaces/occ/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                                        "spec": {"containers": []}})
    assert code == 422 and "spec.containers: Required value" in st["message"]


def test_patch_formats(k8s):
    make_ns(k8s, "patch")
    pod = pod_body("pp", tolerations=[{"key": "a", "operator": "Exists"}])
    pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    pod["spec"]["schedulingGates"] = [{"name": "hold"}]  # keeps it unscheduled, so the spec stays ours
    assert k8s.post("/api/v1/namespaces/patch/pods", pod)[0] == 201
    # Strategic merge: containers and env merge by name.
    code, p = k8s.patch("/api/v1/namespaces/patch/pods/pp", {"metadata": {"labels": {"x": "y"}}, "spec": {
        "containers": [{"name": "main", "image": "busybox:1.37"}]}}, "strategic")
    assert code == 200, p
    c = p["spec"]["containers"][0]
    assert c["image"] == "busybox:1.37" and [e["name"] for e in c["env"]] == ["A", "B"]
    # Pod specs are immutable but for images and added tolerations, as real.
    code, st = k8s.patch("/api/v1/namespaces/patch/pods/pp", {"spec": {"containers": [
        {"name": "main", "env": [{"name": "A", "$patch": "delete"}]}]}}, "strategic")
    assert code == 422 and "pod updates may not change fields" in st["message"]
    code, st = k8s.patch("/api/v1/namespaces/patch/pods/pp", {"spec": {"tolerations": [
        {"key": "b", "operator": "Exists"}]}}, "strategic")
    assert code == 422 and "existing toleration can not be modified" in st["message"]
    # JSON merge patch: null deletes.
    code, p = k8s.patch("/api/v1/namespaces/patch/pods/pp", {"metadata": {"labels": {"x": None}}})
    assert code == 200 and "x" not in p["metadata"].get("labels", {})
    # JSON patch with a failing test op changes nothing.
    rv = p["metadata"]["resourceVersion"]
    code, st = k8s.patch("/api/v1/namespaces/patch/pods/pp", [
        {"op": "test", "path": "/metadata/name", "value": "other"},
        {"op": "add", "path": "/metadata/labels/z", "value": "1"}], "json")
    assert code == 422 and "test failed" in st["message"]
    code, p = k8s.patch("/api/v1/namespaces/patch/pods/pp", [
        {"op": "add", "path": "/metadata/labels/z", "value": "1"}], "json")
    assert code == 200 and p["metadata"]["labels"]["z"] == "1" and p["metadata"]["resourceVersion"] != rv
    code, st = k8s.patch("/api/v1/namespaces/patch/pods/pp", "{not json", "merge")
    assert code == 400 and st["reason"] == "BadRequest"
    # Strategic merge with merge keys on a deployment's env (not immutable there).
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                   {"name": "c", "image": "i:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}}
    code, d = k8s.post("/apis/apps/v1/namespaces/patch/deployments", dep)
    assert code == 201 and d["metadata"]["generation"] == 1
    code, d = k8s.patch("/apis/apps/v1/namespaces/patch/deployments/d", {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "env": [{"name": "A", "$patch": "delete"}, {"name": "C", "value": "3"}]}]}}}},
        "strategic")
    assert code == 200 and d["metadata"]["generation"] == 2
    assert d["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"},
                                                                      {"name": "C", "value": "3"}]
    # A PodDisruptionBudget's selector has patchStrategy replace.
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
           "spec": {"maxUnavailable": 1, "selector": {"matchExpressions": [
               {"key": "a", "operator": "Exists"}]}}}
    assert k8s.post("/apis/policy/v1/namespaces/patch/poddisruptionbudgets", pdb)[0] == 201
    code, b = k8s.patch("/apis/policy/v1/namespaces/patch/poddisruptionbudgets/b",
                        {"spec": {"selector": {"matchLabels": {"a": "b"}}}}, "strategic")
    assert code == 200 and b["spec"]["selector"] == {"matchLabels": {"a": "b"}}
    # Tolerations have no merge key: a strategic patch replaces the list.
    code, d = k8s.patch("/apis/apps/v1/namespaces/patch/deployments/d", {"spec": {"template": {"spec": {
        "tolerations": [{"key": "a", "operator": "Exists"}]}}}}, "strategic")
    code, d = k8s.patch("/apis/apps/v1/namespaces/patch/deployments/d", {"spec": {"template": {"spec": {
        "tolerations": [{"key": "b", "operator": "Exists"}]}}}}, "strategic")
    assert code == 200 and d["spec"]["template"]["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_watch_bookmarks_selectors(k8s):
    make_ns(k8s, "watch")
    _, lst = k8s.get("/api/v1/namespaces/watch/configmaps")
    rv = lst["metadata"]["resourceVersion"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "labels": {"sel": "yes"}}}
    assert k8s.post("/api/v1/namespaces/watch/configmaps", cm)[0] == 201
    assert k8s.post("/api/v1/namespaces/watch/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}})[0] == 201
    k8s.patch("/api/v1/namespaces/watch/configmaps/w", {"data": {"k": "v"}})
    k8s.patch("/api/v1/namespaces/watch/configmaps/w", {"metadata": {"labels": {"sel": "no"}}})
    seen = []
    for ev in k8s.watch("/api/v1/namespaces/watch/configmaps", resource_version=rv, timeout=3,
                        labelSelector="sel=yes"):
        seen.append(ev)
        if ev["type"] == "BOOKMARK":
            break
    types = [(e["type"], e["object"]["metadata"].get("name")) for e in seen]
    # Leaving the selection is a DELETED event for this watcher; "other" never matched.
    assert types[:3] == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")], types
    assert types[3][0] == "BOOKMARK"
    assert int(seen[3]["object"]["metadata"]["resourceVersion"]) >= int(seen[2]["object"]["metadata"]["resourceVersion"])
    # Without a resourceVersion a watch starts with the current state as ADDED events.
    first = next(iter(k8s.watch("/api/v1/namespaces/watch/configmaps", timeout=3, bookmarks=False)))
    assert first["type"] == "ADDED"


def test_history_gone_and_restart(tmp_path):
    k = FakeK8s(history=5, bookmark_seconds=0.3)
    try:
        make_ns(k, "hist")
        _, lst = k.get("/api/v1/namespaces/hist/configmaps")
        old_rv = lst["metadata"]["resourceVersion"]
        for i in range(8):
            assert k.post("/api/v1/namespaces/hist/configmaps",
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i}})[0] == 201
        evs = list(k.watch("/api/v1/namespaces/hist/configmaps", resource_version=old_rv, timeout=3))
        assert evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410
        assert evs[0]["object"]["reason"] == "Expired" and "too old resource version" in evs[0]["object"]["message"]
        _, lst = k.get("/api/v1/namespaces/hist/configmaps")
        rv = int(lst["metadata"]["resourceVersion"])
        k.stop()
        with pytest.raises(ConnectionRefusedError):
            k.get("/api/v1/namespaces")
        k.start()
        _, lst = k.get("/api/v1/namespaces/hist/configmaps")
        assert len(lst["items"]) == 8 and int(lst["metadata"]["resourceVersion"]) >= rv
        # The watch cache starts empty: an older resourceVersion is gone, the current one resumes.
        evs = list(k.watch("/api/v1/namespaces/hist/configmaps", resource_version=str(rv - 1), timeout=3))
        assert evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410
        code, c = k.post("/api/v1/namespaces/hist/configmaps",
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}})
        assert code == 201 and int(c["metadata"]["resourceVersion"]) > rv
        evs = []
        for ev in k.watch("/api/v1/namespaces/hist/configmaps", resource_version=str(rv), timeout=3):
            evs.append(ev)
            if ev["type"] == "BOOKMARK":
                break
        assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "after"
    finally:
        k.close()


def test_scheduler_gpu_pods(k8s):
    make_ns(k8s, "sched")
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubeslice.io/slice", "operator": "In", "values": ["s1"]}]}]}}}
    tol = [{"key": "kubeslice.io/egs", "operator": "Equal", "value": "dedicated-node", "effect": "NoSchedule"}]
    assert k8s.post("/api/v1/namespaces/sched/pods", pod_body("train", gpus=4, affinity=aff, tolerations=tol))[0] == 201
    assert k8s.post("/api/v1/namespaces/sched/pods", pod_body("big", gpus=16, affinity=aff, tolerations=tol))[0] == 201

    def cond(name):
        p = k8s.get("/api/v1/namespaces/sched/pods/" + name)[1]
        return next((c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"), None)
    c = wait_for(lambda: cond("train"))
    assert c["status"] == "False" and c["reason"] == "Unschedulable" and "nodes are available" in c["message"]
    k8s.add_gpu_node("sched-gpu", gpus=8, taints=[{"key": "kubeslice.io/egs", "value": "dedicated-node",
                                                  "effect": "NoSchedule"}])
    time.sleep(0.3)
    assert not k8s.get("/api/v1/namespaces/sched/pods/train")[1]["spec"].get("nodeName")
    # The slice label arrives (an attach): the pending GPU pod starts there.
    k8s.patch("/api/v1/nodes/sched-gpu", {"metadata": {"labels": {"kubeslice.io/slice": "s1"}}})
    p = wait_for(lambda: (lambda p: p if p["status"].get("phase") == "Running" else None)(
        k8s.get("/api/v1/namespaces/sched/pods/train")[1]))
    assert p["spec"]["nodeName"] == "sched-gpu" and p["status"]["podIP"] == "127.0.0.1"
    assert p["status"]["containerStatuses"][0]["ready"] is True
    c = wait_for(lambda: (lambda c: c if "Insufficient nvidia.com/gpu" in c.get("message", "") else None)(cond("big")))
    assert c["status"] == "False"
    # Graceful deletion: Terminating (held here by a finalizer), then gone.
    k8s.patch("/api/v1/namespaces/sched/pods/train", {"metadata": {"finalizers": ["example.com/hold"]}})
    code, p = k8s.delete("/api/v1/namespaces/sched/pods/train", {"gracePeriodSeconds": 30})
    assert code == 200 and p["metadata"]["deletionTimestamp"] and p["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "Terminating" in ok(k8s.kubectl("get", "pod", "train", "-n", "sched"))
    assert k8s.get("/api/v1/namespaces/sched/pods/train")[0] == 200
    k8s.patch("/api/v1/namespaces/sched/pods/train", {"metadata": {"finalizers": None}})
    wait_for(lambda: k8s.get("/api/v1/namespaces/sched/pods/train")[0] == 404)


def test_namespace_deletion_removes_contents(k8s):
    make_ns(k8s, "gone")
    k8s.add_gpu_node("gone-n", gpus=0, labels={"gone": "y"})
    assert k8s.post("/api/v1/namespaces/gone/pods", pod_body("p", nodeSelector={"gone": "y"}))[0] == 201
    assert k8s.post("/api/v1/namespaces/gone/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})[0] == 201
    wait_for(lambda: k8s.get("/api/v1/namespaces/gone/pods/p")[1]["status"].get("phase") == "Running")
    code, ns = k8s.delete("/api/v1/namespaces/gone")
    assert code == 200 and ns["status"]["phase"] == "Terminating"
    code, st = k8s.post("/api/v1/namespaces/gone/configmaps",
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})
    assert code == 403 and "being terminated" in st["message"]
    wait_for(lambda: k8s.get("/api/v1/namespaces/gone")[0] == 404)
    assert k8s.get("/api/v1/namespaces/gone/configmaps")[1]["items"] == []


def sa_with_role(k, ns, sa, rules):
    assert k.post("/api/v1/namespaces/%s/serviceaccounts" % ns,
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})[0] == 201
    rb = "rbac.authorization.k8s.io"
    assert k.post("/apis/%s/v1/namespaces/%s/roles" % (rb, ns), {
        "apiVersion": rb + "/v1", "kind": "Role", "metadata": {"name": sa}, "rules": rules})[0] == 201
    assert k.post("/apis/%s/v1/namespaces/%s/rolebindings" % (rb, ns), {
        "apiVersion": rb + "/v1", "kind": "RoleBinding", "metadata": {"name": sa},
        "roleRef": {"apiGroup": rb, "kind": "Role", "name": sa},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})[0] == 201


def test_rbac_serviceaccount_tokens(k8s, tmp_path):
    make_ns(k8s, "team-a")
    make_ns(k8s, "team-b")
    sa_with_role(k8s, "team-a", "user", [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                                          "verbs": ["get", "list", "watch", "create", "delete"]}])
    code, st = k8s.post("/api/v1/namespaces/team-a/serviceaccounts/user/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 60}})
    assert code == 422 and "less than 10 minutes" in st["message"]
    code, tr = k8s.post("/api/v1/namespaces/team-a/serviceaccounts/user/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}})
    assert code == 201 and tr["status"]["expirationTimestamp"]
    kc = k8s.kubeconfig_for(tr["status"]["token"], str(tmp_path / "sa.kubeconfig"), "team-a")
    assert "No resources found" in k8s.kubectl("get", "pods", kubeconfig=kc).stderr
    assert k8s.kubectl("get", "pods", kubeconfig=kc).returncode == 0
    ok(k8s.kubectl("run", "p1", "--image=busybox:1.36", kubeconfig=kc))
    r = k8s.kubectl("get", "pods", "-n", "team-b", kubeconfig=kc)
    assert r.returncode != 0 and ('pods is forbidden: User "system:serviceaccount:team-a:user" cannot list '
                                  'resource "pods" in API group "" in the namespace "team-b"') in r.stderr
    r = k8s.kubectl("get", "nodes", kubeconfig=kc)
    assert r.returncode != 0 and 'cannot list resource "nodes" in API group "" at the cluster scope' in r.stderr
    r = k8s.kubectl("get", "configmaps", kubeconfig=kc)
    assert r.returncode != 0 and "forbidden" in r.stderr
    assert ok(k8s.kubectl("auth", "can-i", "create", "pods", kubeconfig=kc)).strip() == "yes"
    assert k8s.kubectl("auth", "can-i", "create", "pods", "-n", "team-b", kubeconfig=kc).stdout.strip() == "no"
    # The escalation check: a ServiceAccount may only grant what it holds itself.
    rb = "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/"
    sa_with_role(k8s, "team-a", "lead", [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
    lead = k8s.post("/api/v1/namespaces/team-a/serviceaccounts/lead/token", {"spec": {}})[1]["status"]["token"]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r1"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "delete"]}]}
    code, st = k8s.post(rb + "roles", role, token=lead)
    assert code == 403 and "is attempting to grant RBAC permissions not currently held" in st["message"]
    role["rules"][0]["verbs"] = ["get"]
    assert k8s.post(rb + "roles", role, token=lead)[0] == 201
    code, st = k8s.post(rb + "rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                              "metadata": {"name": "b1"}, "roleRef": {"kind": "Role", "name": "r1"},
                                              "subjects": []}, token=lead)
    assert code == 403 and 'cannot create resource "rolebindings"' in st["message"]
    # A token Secret works the same; deleting it, or the ServiceAccount, revokes the tokens.
    sec = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
           "metadata": {"name": "user-token", "annotations": {"kubernetes.io/service-account.name": "user"}}}
    assert k8s.post("/api/v1/namespaces/team-a/secrets", sec)[0] == 201
    import base64
    s = k8s.get("/api/v1/namespaces/team-a/secrets/user-token")[1]
    tok2 = base64.b64decode(s["data"]["token"]).decode()
    assert base64.b64decode(s["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    assert k8s.get("/api/v1/namespaces/team-a/pods", token=tok2)[0] == 200
    assert k8s.delete("/api/v1/namespaces/team-a/secrets/user-token")[0] == 200
    code, st = k8s.get("/api/v1/namespaces/team-a/pods", token=tok2)
    assert code == 401 and st["reason"] == "Unauthorized"
    assert k8s.delete("/api/v1/namespaces/team-a/serviceaccounts/user")[0] == 200
    r = k8s.kubectl("get", "pods", kubeconfig=kc)
    assert r.returncode != 0 and "Unauthorized" in r.stderr


WEBHOOK_PATCH = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"},
                 {"op": "add", "path": "/spec/tolerations/-", "value": {
                     "key": "kubeslice.io/egs", "operator": "Exists", "effect": "NoSchedule"}}]


def start_webhook(k8s):
    """A tiny HTTPS admission webhook: /mutate adds a label and a toleration, /validate refuses
    pods labelled deny=yes; it records the AdmissionReviews it gets."""
    import base64
    import http.server
    import json
    import ssl
    import threading
    crt, key = k8s.issue_cert("webhook", ["127.0.0.1", "hook.hooked.svc"])
    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = review["request"]
            seen.append((self.path, req))
            resp = {"uid": req["uid"], "allowed": True}
            if self.path == "/mutate":
                resp.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(WEBHOOK_PATCH).encode()).decode())
            elif (req["object"]["metadata"].get("labels") or {}).get("deny") == "yes":
                resp = {"uid": req["uid"], "allowed": False, "status": {"code": 403, "message": "no queue jumping"}}
            data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": resp}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def webhook_config(kind, name, url, ca, policy="Fail", ns_label="hooked"):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": name + ".egs.example.com", "clientConfig": {"url": url, "caBundle": ca},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"], "scope": "Namespaced"}],
                          "namespaceSelector": {"matchLabels": {ns_label: "yes"}},
                          "failurePolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "timeoutSeconds": 3}]}


def test_admission_webhooks(k8s):
    srv, seen = start_webhook(k8s)
    base = "https://127.0.0.1:%d" % srv.server_address[1]
    ar = "/apis/admissionregistration.k8s.io/v1/"
    try:
        code, st = k8s.post(ar + "mutatingwebhookconfigurations", dict(
            webhook_config("MutatingWebhookConfiguration", "m", base + "/mutate", k8s.ca_bundle()),
            webhooks=[{"name": "bad", "clientConfig": {"url": base}}]))
        assert code == 422 and "webhooks[0].name" in st["message"] and "sideEffects" in st["message"]
        assert k8s.post(ar + "mutatingwebhookconfigurations", webhook_config(
            "MutatingWebhookConfiguration", "m", base + "/mutate", k8s.ca_bundle()))[0] == 201
        assert k8s.post(ar + "validatingwebhookconfigurations", webhook_config(
            "ValidatingWebhookConfiguration", "v", base + "/validate", k8s.ca_bundle()))[0] == 201
        make_ns(k8s, "hooked", {"hooked": "yes"})
        make_ns(k8s, "plain")
        code, p = k8s.post("/api/v1/namespaces/hooked/pods", pod_body("a"))
        assert code == 201 and p["metadata"]["labels"]["mutated"] == "yes"
        assert {"key": "kubeslice.io/egs", "operator": "Exists", "effect": "NoSchedule"} in p["spec"]["tolerations"]
        path, req = seen[0]
        assert path == "/mutate" and req["operation"] == "CREATE" and req["namespace"] == "hooked"
        assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
        assert req["userInfo"]["username"] == "kubernetes-admin"
        # The validating webhook sees the mutated object and may refuse it with its message.
        assert seen[1][0] == "/validate" and seen[1][1]["object"]["metadata"]["labels"]["mutated"] == "yes"
        code, st = k8s.post("/api/v1/namespaces/hooked/pods", pod_body("b", labels={"deny": "yes"}))
        assert code == 403 and st["message"] == 'admission webhook "v.egs.example.com" denied the request: ' \
                                                 'no queue jumping'
        assert k8s.get("/api/v1/namespaces/hooked/pods/b")[0] == 404
        n = len(seen)
        code, p = k8s.post("/api/v1/namespaces/plain/pods", pod_body("c", labels={"deny": "yes"}))
        assert code == 201 and "mutated" not in p["metadata"]["labels"] and len(seen) == n
        # clientConfig.service: the Service's targetPort on 127.0.0.1, certificate checked for hook.hooked.svc.
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
               "spec": {"ports": [{"port": 443, "targetPort": srv.server_address[1]}]}}
        assert k8s.post("/api/v1/namespaces/hooked/services", svc)[0] == 201
        cfg = webhook_config("ValidatingWebhookConfiguration", "s", "", k8s.ca_bundle(), ns_label="svchook")
        cfg["webhooks"][0]["clientConfig"] = {"service": {"namespace": "hooked", "name": "hook", "path": "/validate"},
                                              "caBundle": k8s.ca_bundle()}
        assert k8s.post(ar + "validatingwebhookconfigurations", cfg)[0] == 201
        make_ns(k8s, "svchooked", {"svchook": "yes"})
        code, st = k8s.post("/api/v1/namespaces/svchooked/pods", pod_body("e", labels={"deny": "yes"}))
        assert code == 403 and 'admission webhook "s.egs.example.com" denied' in st["message"]
        assert k8s.delete(ar + "validatingwebhookconfigurations/s")[0] == 200
        # A webhook that cannot be reached: Fail refuses (500), Ignore lets the request through.
        dead = "https://127.0.0.1:%d/x" % srv.server_address[1]
        srv.shutdown()
        srv.server_close()
        code, st = k8s.post("/api/v1/namespaces/hooked/pods", pod_body("d"))
        assert code == 500 and 'failed calling webhook "m.egs.example.com"' in st["message"]
        for kind, plural in (("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
                             ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations")):
            name = "m" if kind.startswith("M") else "v"
            assert k8s.put(ar + plural + "/" + name, webhook_config(kind, name, dead, k8s.ca_bundle(), "Ignore"))[0] \
                == 200
        assert k8s.post("/api/v1/namespaces/hooked/pods", pod_body("d"))[0] == 201
    finally:
        k8s.delete(ar + "mutatingwebhookconfigurations/m")
        k8s.delete(ar + "validatingwebhookconfigurations/v")


GPR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gpuprovisioningrequests.egs.example.com"},
    "spec": {"group": "egs.example.com", "scope": "Namespaced",
             "names": {"plural": "gpuprovisioningrequests", "singular": "gpuprovisioningrequest",
                       "kind": "GPUProvisioningRequest", "shortNames": ["gpr"]},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}},
                           "additionalPrinterColumns": [
                               {"name": "GPUs", "type": "integer", "jsonPath": ".spec.gpusPerNode"},
                               {"name": "State", "type": "string", "jsonPath": ".status.state"},
                               {"name": "Estimate", "type": "string", "jsonPath": ".status.estimatedStart"}]}]}}

GPR_YAML = """apiVersion: egs.example.com/v1alpha1
kind: GPUProvisioningRequest
metadata:
  name: train-1
spec:
  gpusPerNode: 8
  nodeCount: 2
"""


def test_custom_resources_with_kubectl(k8s, tmp_path):
    make_ns(k8s, "crd")
    code, crd = k8s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GPR_CRD)
    assert code == 201
    bad = dict(GPR_CRD, metadata={"name": "wrong.egs.example.com"})
    assert k8s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)[0] == 422
    f = tmp_path / "gpr.yaml"
    f.write_text(GPR_YAML)
    assert "gpuprovisioningrequest.egs.example.com/train-1 created" in ok(k8s.kubectl("apply", "-n", "crd", "-f", str(f)))
    base = "/apis/egs.example.com/v1alpha1/namespaces/crd/gpuprovisioningrequests/train-1"
    code, cr = k8s.patch(base + "/status", {"status": {"state": "Queued", "estimatedStart": "5m"}})
    assert code == 200 and cr["status"]["state"] == "Queued"
    # Writes to the object leave status alone (status subresource); strategic patches are refused.
    code, cr = k8s.patch(base, {"spec": {"nodeCount": 3}, "status": {"state": "Hacked"}})
    assert code == 200 and cr["status"]["state"] == "Queued" and cr["spec"]["nodeCount"] == 3
    assert cr["metadata"]["generation"] == 2
    assert k8s.patch(base, {"spec": {"nodeCount": 4}}, "strategic")[0] == 415
    out = ok(k8s.kubectl("get", "crd", crd["metadata"]["name"]))
    assert out.split("\n")[0].split() == ["NAME", "CREATED", "AT"] and crd["metadata"]["creationTimestamp"] in out
    out = ok(k8s.kubectl("get", "gpr", "-n", "crd"))
    assert out.split("\n")[0].split() == ["NAME", "GPUS", "STATE", "ESTIMATE"]
    assert out.split("\n")[1].split() == ["train-1", "8", "Queued", "5m"]
    # Deleting the CRD removes its objects and its API.
    assert k8s.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd["metadata"]["name"])[0] == 200
    assert k8s.get(base)[0] == 404


def kubectl_minor(k8s):
    import json
    return int(json.loads(ok(k8s.kubectl("version", "--client", "-o", "json")))["clientVersion"]["minor"].rstrip("+"))


KUSTOMIZED = """apiVersion: v1
kind: ServiceAccount
metadata: {name: egs-agent}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: egs-agent-k}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list, watch, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: egs-agent-k}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: egs-agent-k}
subjects: [{kind: ServiceAccount, name: egs-agent, namespace: kz}]
---
apiVersion: v1
kind: Service
metadata: {name: egsd}
spec:
  selector: {app: egsd}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: egsd}
spec:
  serviceName: egsd
  selector: {matchLabels: {app: egsd}}
  template:
    metadata: {labels: {app: egsd}}
    spec:
      containers: [{name: egsd, image: egs/egsd:dev}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def test_kubectl_kustomize_serverside_and_tokens(k8s, tmp_path):
    make_ns(k8s, "kz")
    (tmp_path / "kustomization.yaml").write_text("namespace: kz\nresources: [all.yaml]\n")
    (tmp_path / "all.yaml").write_text(KUSTOMIZED)
    out = ok(k8s.kubectl("apply", "-k", str(tmp_path)))
    assert "statefulset.apps/egsd created" in out and "clusterrolebinding.rbac.authorization.k8s.io/egs-agent-k created" in out
    assert "configured" not in ok(k8s.kubectl("apply", "-k", str(tmp_path)))
    crb = k8s.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/egs-agent-k")[1]
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "egs-agent", "namespace": "kz"}]
    if kubectl_minor(k8s) < 27:
        return  # `create token` (1.24) and `auth whoami` (1.27) are newer than Debian's kubectl
    tok = ok(k8s.kubectl("create", "token", "egs-agent", "-n", "kz", "--duration=1h")).strip()
    assert k8s.get("/api/v1/nodes", token=tok)[0] == 200  # the ClusterRoleBinding applies
    assert k8s.get("/api/v1/namespaces/kz/secrets", token=tok)[0] == 403
    assert "kubernetes-admin" in ok(k8s.kubectl("auth", "whoami"))
    f = tmp_path / "cm.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa, namespace: kz}\ndata: {a: '1'}\n")
    assert "configmap/ssa serverside-applied" in ok(k8s.kubectl("apply", "--server-side", "-f", str(f)))
    assert k8s.get("/api/v1/namespaces/kz/configmaps/ssa")[1]["data"] == {"a": "1"}


def test_kubectl_get_watch_prints_tables(k8s):
    import subprocess
    import threading
    env = dict(os.environ, KUBECONFIG=k8s.kubeconfig, HOME=k8s.dir)
    p = subprocess.Popen(["kubectl", "get", "nodes", "-w", "-l", "watched=yes"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append(ln.split()) for ln in p.stdout if ln.strip()],
                              daemon=True)
    reader.start()
    try:
        k8s.add_gpu_node("watched-1", labels={"watched": "yes"})
        wait_for(lambda: any(ln[0] == "watched-1" for ln in lines), timeout=20)
        k8s.add_gpu_node("watched-2", labels={"watched": "yes"})
        wait_for(lambda: any(ln[0] == "watched-2" for ln in lines), timeout=20)
    finally:
        p.terminate()
        p.wait(timeout=10)
    # Server-side Table rows: the node columns, not kubectl's generic NAME/AGE fallback.
    assert ["watched-2", "Ready", "<none>"] == [ln for ln in lines if ln[0] == "watched-2"][0][:3], lines
    assert sum(1 for ln in lines if ln[0] == "NAME") == 1 and lines[0][:3] == ["NAME", "STATUS", "ROLES"], lines


def test_transport_chunked_bodies_and_media_types(k8s):
    import json
    conn = k8s.connect()
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chunked"},
                       "data": {"a": "x" * 4000}}).encode()
    conn.request("POST", "/api/v1/namespaces/default/configmaps", body=iter([body[:100], body[100:]]),
                 headers={"Authorization": "Bearer " + k8s.token, "Content-Type": "application/json",
                          "Transfer-Encoding": "chunked"}, encode_chunked=True)
    r = conn.getresponse()
    assert r.status == 201 and json.loads(r.read())["data"]["a"] == "x" * 4000
    # The same connection stays usable (keep-alive after a chunked body).
    conn.request("GET", "/api/v1/namespaces/default/configmaps/chunked", headers={"Authorization": "Bearer " +
                                                                                     k8s.token})
    r = conn.getresponse()
    assert r.status == 200 and json.loads(r.read())["metadata"]["name"] == "chunked"
    conn.close()
    code, st = k8s.request("POST", "/api/v1/namespaces/default/configmaps", b"k8s\x00\x0a\x00",
                           content_type="application/vnd.kubernetes.protobuf")
    assert code == 415 and st["reason"] == "UnsupportedMediaType"
    code, st = k8s.request("POST", "/api/v1/namespaces/default/configmaps", "kind: ConfigMap",
                           content_type="application/yaml")
    assert code == 415


def test_daemonset_and_statefulset_controllers(k8s):
    make_ns(k8s, "wl")
    taint = {"key": "kubeslice.io/egs", "value": "dedicated-node", "effect": "NoSchedule"}
    k8s.add_gpu_node("wl-gpu-1", labels={"wl": "yes"}, taints=[taint])
    k8s.add_gpu_node("wl-gpu-2", labels={"wl": "yes"})
    k8s.add_gpu_node("wl-other", labels={"wl": "no"})
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dcgm-exporter"},
          "spec": {"selector": {"matchLabels": {"app": "dcgm-exporter"}}, "template": {
              "metadata": {"labels": {"app": "dcgm-exporter"}},
              "spec": {"nodeSelector": {"wl": "yes"}, "tolerations": [{"key": "kubeslice.io/egs", "operator": "Exists"}],
                       "containers": [{"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3",
                                       "ports": [{"containerPort": 9400, "name": "metrics"}]}]}}}}
    assert k8s.post("/apis/apps/v1/namespaces/wl/daemonsets", ds)[0] == 201

    def ds_pods():
        items = k8s.get("/api/v1/namespaces/wl/pods?labelSelector=app%3Ddcgm-exporter")[1]["items"]
        return sorted((p["spec"].get("nodeName"), p["status"].get("phase")) for p in items
                      if not p["metadata"].get("deletionTimestamp"))
    wait_for(lambda: ds_pods() == [("wl-gpu-1", "Running"), ("wl-gpu-2", "Running")])
    st = wait_for(lambda: (lambda s: s if s.get("numberReady") == 2 else None)(
        k8s.get("/apis/apps/v1/namespaces/wl/daemonsets/dcgm-exporter")[1].get("status", {})))
    assert st["desiredNumberScheduled"] == 2
    # A node that stops matching loses its pod; drain leaves DaemonSet pods where they are.
    k8s.patch("/api/v1/nodes/wl-gpu-2", {"metadata": {"labels": {"wl": "no"}}})
    wait_for(lambda: ds_pods() == [("wl-gpu-1", "Running")])
    r = k8s.kubectl("drain", "wl-gpu-1", "--ignore-daemonsets", "--timeout=10s")
    assert r.returncode == 0 and "ignoring daemonset-managed pods" in (r.stdout + r.stderr).lower(), r
    assert ds_pods() == [("wl-gpu-1", "Running")]
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "egsd"},
           "spec": {"replicas": 2, "serviceName": "egsd", "selector": {"matchLabels": {"app": "egsd"}},
                    "template": {"metadata": {"labels": {"app": "egsd"}}, "spec": {
                        "containers": [{"name": "egsd", "image": "egs/egsd:dev"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}
    assert k8s.post("/apis/apps/v1/namespaces/wl/statefulsets", sts)[0] == 201

    def sts_pods():
        items = k8s.get("/api/v1/namespaces/wl/pods?labelSelector=app%3Degsd")[1]["items"]
        return sorted((p["metadata"]["name"], p["status"].get("phase")) for p in items)
    wait_for(lambda: sts_pods() == [("egsd-0", "Running"), ("egsd-1", "Running")])
    p0 = k8s.get("/api/v1/namespaces/wl/pods/egsd-0")[1]
    assert p0["spec"]["hostname"] == "egsd-0" and p0["spec"]["subdomain"] == "egsd"
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-egsd-0"}} in p0["spec"]["volumes"]
    assert k8s.get("/api/v1/namespaces/wl/persistentvolumeclaims/data-egsd-1")[1]["status"]["phase"] == "Bound"
    # A deleted member comes back under the same name, with a new uid.
    assert k8s.delete("/api/v1/namespaces/wl/pods/egsd-0", {"gracePeriodSeconds": 0})[0] == 200
    wait_for(lambda: (lambda c, p: c == 200 and p["metadata"]["uid"] != p0["metadata"]["uid"] and
                      p["status"].get("phase") == "Running")(*k8s.get("/api/v1/namespaces/wl/pods/egsd-0")))
