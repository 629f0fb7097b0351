"""GPUProvisioningRequest custom resources end to end: the real kubectl (/usr/bin/kubectl) applies CRs to the
fake Kubernetes API server of tests/fake-k8s, a real egs-agent --backend kubernetes runs the controller of
src/agent/k8s_gprcr.c, and a real egsd holds the GPRs it makes through POST/DELETE/GET /api/v1/agent/gprs.

What each test proves is in its docstring."""
import os
import time

import pytest

from conftest import wait_for
from k8sfix import K8sAgent, k8s_env


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CRD = os.path.join(ROOT, "deploy", "kubernetes", "worker", "crd-gpuprovisioningrequest.yaml")
CRS = "/apis/egs.kubeslice.io/v1/namespaces/%s/gpuprovisioningrequests"
FINALIZER = "egs.kubeslice.io/gpr"


def ok(p):
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.fixture
def env(tmpdir_path):
    """The fake API server with the CRD and one 8-GPU node, egsd with workspace ws (namespace ws-dev on k1,
    labelled as a slice namespace) and the agent of k1."""
    with k8s_env(tmpdir_path, terminate_seconds=0.5) as (fake, cluster, agents):
        ok(fake.kubectl("apply", "-f", CRD))
        fake.add_gpu_node("gpu-1")
        for ns, labels in (("ws-dev", {"kubeslice.io/slice": "ws"}), ("plain", {})):
            code, body = fake.post("/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
            assert code == 201, body

        agents.append(K8sAgent(cluster, fake).start())
        wait_for(lambda: [n["gpuNodeName"] for n in cluster.schedulable_nodes()] == ["gpu-1"], timeout=20,
                 what="gpu-1 in the inventory")
        cluster.workspace("ws", ["k1"], namespaces=["ws-dev"])
        yield fake, cluster, agents[0]


def manifest(name, **spec):
    body = {"numberOfGPUNodes": 1, "numberOfGPUs": 1, "exitDuration": "1h"}
    body.update(spec)
    lines = ["apiVersion: egs.kubeslice.io/v1", "kind: GPUProvisioningRequest", "metadata:", "  name: " + name,
             "spec:"]
    for k, v in body.items():
        lines.append("  %s: %s" % (k, str(v).lower() if isinstance(v, bool) else v))
    return "\n".join(lines) + "\n"


def apply(fake, ns, name, **spec):
    return ok(fake.kubectl("apply", "-n", ns, "-f", "-", input=manifest(name, **spec)))


def cr(fake, ns, name):
    code, body = fake.get(CRS % ns + "/" + name)
    return body if code == 200 else None


def status(fake, ns, name):
    o = cr(fake, ns, name)
    return (o or {}).get("status") or {}


def gprs(cluster, ws="ws"):
    return cluster.admin.get("/api/v1/gpr/list?sliceName=" + ws)["items"]


def kubectl_get(fake, ns):
    """kubectl get gpr -n ns as {name: {column: cell}} (the server-side Table's printer columns)."""
    out = ok(fake.kubectl("get", "gpr", "-n", ns)).strip().split("\n")
    head = out[0].split()
    assert head[:4] == ["NAME", "STATE", "ESTIMATE", "NODES"] and head[-1] == "AGE", out[0]
    rows = {}
    for line in out[1:]:
        cells = line.split()
        # ESTIMATE holds spaces ("0h59m55s (start ...)"): name, state first; nodes and age last.
        rows[cells[0]] = {"STATE": cells[1], "ESTIMATE": " ".join(cells[2:-2]), "NODES": cells[-2]}
    return rows


def test_apply_shows_the_estimate_update_changes_the_gpr_delete_cancels_and_releases(env):
    """kubectl apply of a CR in a slice namespace creates one GPR in egsd for the slice (named after the CR,
    linked by annotation and finalizer); `kubectl get gpr` shows it Queued with its estimated wait and start
    behind a running GPR; an edit of the CR changes the GPR (priority) and observedGeneration; deleting a
    queued CR cancels its GPR and the CR goes once the finalizer is removed."""
    fake, cluster, _ = env
    first = cluster.gpr(sliceName="ws", numberOfGPUs=8, exitDuration="2h", gprName="holder")
    cluster.wait_state(first, "Provisioned", timeout=20)

    assert "gpuprovisioningrequest.egs.kubeslice.io/train created" in apply(fake, "ws-dev", "train", priority=150)
    wait_for(lambda: status(fake, "ws-dev", "train").get("provisioningStatus") == "Queued", timeout=15,
             what="the CR's status Queued")
    mine = [g for g in gprs(cluster) if g["gprId"] != first]
    assert len(mine) == 1 and mine[0]["gprName"] == "train" and mine[0]["priority"] == 150
    gid = mine[0]["gprId"]
    o = cr(fake, "ws-dev", "train")
    assert o["metadata"]["annotations"]["egs.kubeslice.io/gpr-id"] == gid
    assert FINALIZER in o["metadata"]["finalizers"]
    st = o["status"]
    assert st["gprId"] == gid and st["observedGeneration"] == 1
    assert st["estimatedStartTime"] == cluster.status(first)["status"]["exitTimestamp"]
    wait_for(lambda: "start " in kubectl_get(fake, "ws-dev").get("train", {}).get("ESTIMATE", ""),
             what="kubectl get gpr to show the estimate")
    row = kubectl_get(fake, "ws-dev")["train"]
    assert row["STATE"] == "Queued" and st["estimatedStartTime"] in row["ESTIMATE"] and row["NODES"] == "<none>"
    assert any(e["reason"] for e in st.get("events", [])), st

    apply(fake, "ws-dev", "train", priority=300)
    wait_for(lambda: cluster.status(gid)["priority"] == 300, what="the update to reach the GPR")
    wait_for(lambda: status(fake, "ws-dev", "train").get("observedGeneration") == 2, what="observedGeneration 2")
    assert len(gprs(cluster)) == 2

    ok(fake.kubectl("delete", "gpr", "train", "-n", "ws-dev", "--timeout=30s"))
    assert cr(fake, "ws-dev", "train") is None
    assert cluster.status(gid)["status"]["provisioningStatus"] == "Cancelled"
    # The audit log has the CR's create, update and delete, made with the cluster's agent key (the
    # applies authorised as an Owner of the workspace).
    log = [e for e in cluster.admin.get("/api/v1/audit?limit=1000")["items"] if e["route"] == "/api/v1/agent/gprs"]
    assert [(e["method"], e["status"], e["actor"]["role"]) for e in log] == \
        [("POST", 200, "Owner"), ("POST", 200, "Owner"), ("DELETE", 200, "Agent")], log
    assert len({e["actor"]["keyId"] for e in log}) == 1 and log[0]["actor"]["keyName"].startswith("agent-"), log
    assert [e["target"] for e in log] == [gid, gid, gid], log



def test_a_bad_spec_shows_the_reason_and_a_fix_creates_the_gpr_non_slice_namespaces_are_ignored(env):
    """A spec egsd refuses (422) shows provisioningStatus Invalid and the reason with the field in the CR's
    status (and STATE in kubectl get), no GPR exists; fixing the CR creates the GPR, which shows Provisioned
    with its node in NODES; deleting it releases the GPR.  An unknown field is refused by name.  A CR in a
    namespace that is not a slice's is ignored: no finalizer, no status, no GPR."""
    fake, cluster, _ = env
    apply(fake, "ws-dev", "bad", numberOfGPUs=99)
    wait_for(lambda: status(fake, "ws-dev", "bad").get("provisioningStatus") == "Invalid", what="Invalid status")
    st = status(fake, "ws-dev", "bad")
    assert st["message"].startswith("spec.numberOfGPUs: "), st
    assert st["observedGeneration"] == 1 and "gprId" not in st
    assert kubectl_get(fake, "ws-dev")["bad"]["STATE"] == "Invalid"
    assert gprs(cluster) == []

    apply(fake, "ws-dev", "bad", numberOfGPUs=2)
    wait_for(lambda: status(fake, "ws-dev", "bad").get("provisioningStatus") == "Provisioned", timeout=30,
             what="the fixed CR provisioned")
    st = status(fake, "ws-dev", "bad")
    assert "message" not in st and st["observedGeneration"] == 2
    assert [g["numberOfGPUs"] for g in gprs(cluster)] == [2]
    assert st["nodes"] == ["gpu-1"] and st["estimate"].startswith("started ")
    row = kubectl_get(fake, "ws-dev")["bad"]
    assert row["STATE"] == "Provisioned" and row["NODES"] == "gpu-1"

    ok(fake.kubectl("apply", "-n", "ws-dev", "-f", "-", input=manifest("typo", numberOfGPU=1)))
    wait_for(lambda: status(fake, "ws-dev", "typo").get("message", "").startswith("spec.numberOfGPU:"),
             what="the unknown field named")

    # Deleting a provisioned CR releases its GPR before the CR goes.
    ok(fake.kubectl("delete", "gpr", "bad", "-n", "ws-dev", "--timeout=30s"))
    assert cluster.status(st["gprId"])["status"]["provisioningStatus"] in ("Releasing", "Complete")
    wait_for(lambda: cluster.status(st["gprId"])["status"]["provisioningStatus"] == "Complete", timeout=30,
             what="the release to complete")

    apply(fake, "plain", "outside")
    time.sleep(3)  # several controller rounds (one a second at least, and one per change)
    o = cr(fake, "plain", "outside")
    assert "finalizers" not in o["metadata"] and not o.get("status"), o
    assert len(gprs(cluster)) == 1  # the released one
    ok(fake.kubectl("delete", "gpr", "outside", "-n", "plain", "--timeout=10s"))


def test_agent_restart_makes_no_duplicate_and_catches_up(env):
    """Restarting the agent never makes a second GPR for a CR (egsd links GPRs to CR uids); a CR applied while
    the agent is down gets its GPR once it is back, and one deleted meanwhile (held by the finalizer) has its GPR
    cancelled and goes."""
    fake, cluster, agent = env
    cluster.gpr(sliceName="ws", numberOfGPUs=8, exitDuration="2h", gprName="holder")
    apply(fake, "ws-dev", "a")
    apply(fake, "ws-dev", "b")
    wait_for(lambda: all(status(fake, "ws-dev", n).get("gprId") for n in ("a", "b")), what="both CRs linked")
    ids = {n: status(fake, "ws-dev", n)["gprId"] for n in ("a", "b")}
    agent.stop()
    apply(fake, "ws-dev", "c")
    ok(fake.kubectl("delete", "gpr", "b", "-n", "ws-dev", "--wait=false"))
    assert cr(fake, "ws-dev", "b")["metadata"].get("deletionTimestamp")  # held by the finalizer
    agent.start()
    wait_for(lambda: status(fake, "ws-dev", "c").get("gprId"), timeout=20, what="c linked after the restart")
    wait_for(lambda: cr(fake, "ws-dev", "b") is None, timeout=20, what="b gone after the restart")
    assert cluster.status(ids["b"])["status"]["provisioningStatus"] == "Cancelled"
    assert status(fake, "ws-dev", "a")["gprId"] == ids["a"]
    time.sleep(2)
    names = sorted(g["gprName"] for g in gprs(cluster))
    assert names == ["a", "b", "c", "holder"], names
