"""egsd's GPR transitions mirrored into the cluster as Kubernetes Events (docs/kubernetes.md, "Events"): a real
egsd, a real egs-agent --backend kubernetes and the fake API server, read back with the real kubectl."""
import json

from conftest import wait_for
from test_k8s_backend import env, healthy, provision  # noqa: F401  (env is a fixture)


def kube_events(fake, ns):
    r = fake.kubectl("get", "events", "-n", ns, "-o", "json")
    assert r.returncode == 0, r.stderr
    return {e["reason"]: e for e in json.loads(r.stdout)["items"]}


def test_gpr_transitions_become_kubernetes_events(env):  # noqa: F811
    """Provisioned, 25 % of the window, node replaced (twice: one Event object whose count goes to 2), early
    release and released show in `kubectl get events -n <slice namespace>` with the GPR's label, the namespace
    as involved object, egsd's message and type; an agent token cannot read another cluster's (none here) and a
    bad cursor is a 422."""
    fake, cluster, start_agent = env
    for n in ("gpu-1", "gpu-2", "gpu-3"):
        fake.add_gpu_node(n)
    agent = start_agent()
    wait_for(lambda: healthy(cluster) == {"gpu-1", "gpu-2", "gpu-3"}, timeout=20, what="nodes")
    cluster.workspace("ws", ["k1"], namespaces=["ws-dev"])
    st = provision(cluster)
    gid = st["gprId"]
    ev = wait_for(lambda: kube_events(fake, "ws-dev").get("GPRProvisioned"), timeout=20, what="GPRProvisioned")
    assert ev["type"] == "Normal" and ev["count"] == 1 and ev["source"]["component"] == "egs-agent"
    assert ev["involvedObject"]["kind"] == "Namespace" and ev["involvedObject"]["name"] == "ws-dev"
    assert ev["metadata"]["labels"]["kubeslice.io/gpr"] == gid and ev["metadata"]["name"] == gid + ".gprprovisioned"
    assert "provisioned on 1 node" in ev["message"]

    cluster.advance("31m")
    wait_for(lambda: kube_events(fake, "ws-dev").get("GPRWindow25"), timeout=20, what="GPRWindow25")

    for _ in range(2):
        held = cluster.status(gid)["status"]["nodes"][0]
        fake.set_node_ready(held, "False")
        wait_for(lambda: cluster.status(gid)["status"]["nodes"] not in ([held], []), timeout=30,
                 what="the node to be replaced")
    ev = wait_for(lambda: (kube_events(fake, "ws-dev").get("GPRNodeReplaced") or {}).get("count") == 2
                  and kube_events(fake, "ws-dev")["GPRNodeReplaced"], timeout=20, what="two NodeReplaced in one Event")
    assert ev["type"] == "Warning" or ev["type"] == "Normal"
    assert ev["lastTimestamp"] >= ev["firstTimestamp"]

    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    cluster.wait_state(gid, "Complete", timeout=30)
    got = wait_for(lambda: {"GPREarlyRelease", "GPRReleased"} <= set(kube_events(fake, "ws-dev"))
                   and kube_events(fake, "ws-dev"), timeout=20, what="the release events")
    assert got["GPRReleased"]["metadata"]["labels"]["kubeslice.io/gpr"] == gid
    r = fake.kubectl("get", "events", "-n", "ws-dev", "--field-selector", "reason=GPRWindow25")
    assert r.returncode == 0 and "GPRWindow25" in r.stdout, r.stderr

    # The route: role Agent only, a bad cursor is refused.
    assert cluster.admin.call("GET", "/api/v1/agent/events")[0] == 403
    token = open(agent.token_file).read().strip()
    api = cluster.egsd.api(token)
    assert api.call("GET", "/api/v1/agent/events?after=x")[0] == 422
    assert api.call("GET", "/api/v1/agent/events?after=0&limit=501")[0] == 422
    data = api.get("/api/v1/agent/events?after=0&limit=500")
    assert data["last"] >= max(e["id"] for e in data["events"])
    assert all(e["gprId"] == gid and e["namespaces"] == ["ws-dev"] for e in data["events"])
