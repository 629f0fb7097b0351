"""What egs-agent --backend kubernetes observes in the cluster: GPU metrics scraped from dcgm-exporter, the
slice's GPU pods as workloads, and the GPU pods that wait for a GPR (docs/kubernetes.md, "GPU metrics and
workloads").  A real egsd, a real egs-agent and the fake API server of tests/fake-k8s.

The dcgm-exporter is a small HTTP server in this test serving the exporter's text format (the labels and
metric names of dcgm-exporter 3.x).  In the first test it is found the way a cluster has it: a pod labelled
app.kubernetes.io/name=dcgm-exporter on the node, whose container port "metrics" is the test server's port
(the fake's kubelet gives every pod the IP 127.0.0.1).  The second test passes --dcgm-exporter URL instead,
where the label Hostname names the node."""
import http.server
import os
import threading

from conftest import free_port, wait_for
from test_k8s_backend import K8sAgent, env, healthy, inventory  # noqa: F401  (env is a fixture)

GPU_METRICS = ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
               "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS")


class Exporter:
    """An HTTP server answering GET /metrics with what gpus holds: {node: {index: {metric: value, "pod": (ns,
    name)}}}, in dcgm-exporter's format (HELP and TYPE lines, labels gpu, UUID, device, modelName, Hostname,
    and container, namespace, pod on a GPU a pod uses)."""

    def __init__(self):
        self.gpus = {}
        self.scrapes = 0
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                exporter.scrapes += 1
                body = exporter.text().encode() if self.path == "/metrics" else b"not found\n"
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d/metrics" % self.port

    def set(self, node, index, **values):
        self.gpus.setdefault(node, {}).setdefault(index, {}).update(values)

    def text(self):
        out = []
        for metric in GPU_METRICS:
            out.append("# HELP %s %s\n# TYPE %s gauge" % (metric, "from the test's exporter", metric))
            for node, gpus in sorted(self.gpus.items()):
                for index, g in sorted(gpus.items()):
                    if metric not in g:
                        continue
                    labels = ('gpu="%d",UUID="GPU-real-%s-%d",device="nvidia%d",modelName="NVIDIA H100 80GB HBM3",'
                              'Hostname="%s",DCGM_FI_DRIVER_VERSION="550.54.15"' % (index, node, index, index, node))
                    if g.get("pod"):
                        labels += ',container="main",namespace="%s",pod="%s"' % g["pod"]
                    out.append("%s{%s} %s" % (metric, labels, g[metric]))
        return "\n".join(out) + "\n"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def busy(exporter, node, gpus=8, util=50):
    for i in range(gpus):
        exporter.set(node, i, DCGM_FI_DEV_GPU_TEMP=40, DCGM_FI_DEV_POWER_USAGE=100.0, DCGM_FI_DEV_GPU_UTIL=util,
                     DCGM_FI_DEV_FB_USED=0, DCGM_FI_DEV_FB_FREE=81559, DCGM_FI_DEV_XID_ERRORS=0)


def gpu_rows(cluster, node):
    items = cluster.admin.get("/api/v1/gpus/table")["items"]
    return {r["index"]: r for r in items if r["gpuNodeName"] == node}


def dcgm_pod(node, port):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nvidia-dcgm-exporter-" + node, "namespace": "gpu-operator",
                         "labels": {"app.kubernetes.io/name": "dcgm-exporter"}},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5",
                                     "ports": [{"name": "metrics", "containerPort": port}]}]}}


def test_dcgm_exporter_pod_metrics_and_xid_alert(env):  # noqa: F811
    """The agent finds dcgm-exporter by its pod's label, scrapes it at the pod's IP and metrics port, and egsd's
    GPU table and /metrics show the scraped temperature, power, utilization and memory of each GPU; an XID 79
    (the GPU fell off the bus) makes the node Unhealthy with the reason and raises the NodeUnhealthy alert; a
    malformed answer is dropped whole (the metrics go stale, nothing half-parsed is kept)."""
    fake, cluster, start_agent = env
    exporter = Exporter()
    try:
        fake.add_gpu_node("gpu-1")
        busy(exporter, "gpu-1")
        exporter.set("gpu-1", 0, DCGM_FI_DEV_GPU_TEMP=61, DCGM_FI_DEV_POWER_USAGE=312.5, DCGM_FI_DEV_GPU_UTIL=87,
                     DCGM_FI_DEV_FB_USED=40211, DCGM_FI_DEV_FB_FREE=41348)
        fake.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
        code, pod = fake.post("/api/v1/namespaces/gpu-operator/pods", dcgm_pod("gpu-1", exporter.port))
        assert code == 201, pod
        agent = start_agent_with(start_agent, "--sample-interval", "1")
        wait_for(lambda: healthy(cluster) == {"gpu-1"}, timeout=20, what="the GPU node")
        row = wait_for(lambda: gpu_rows(cluster, "gpu-1").get(0, {}).get("tempC") == 61 and gpu_rows(cluster, "gpu-1")[0],
                       timeout=20, what="the scraped metrics in the GPU table")
        assert row["powerW"] == 312.5 and row["utilPct"] == 87 and row["memUsedMiB"] == 40211
        assert row["memTotalMiB"] == 40211 + 41348
        assert gpu_rows(cluster, "gpu-1")[5]["utilPct"] == 50
        status, prom, _ = cluster.admin.raw("GET", "/metrics")
        line = [x for x in prom.decode().splitlines() if x.startswith("DCGM_FI_DEV_POWER_USAGE{")
                and 'Hostname="gpu-1"' in x and 'gpu="0"' in x]
        assert status == 200 and len(line) == 1 and line[0].endswith(" 312.5"), line

        exporter.set("gpu-1", 3, DCGM_FI_DEV_XID_ERRORS=79)
        n = wait_for(lambda: [x for x in inventory(cluster)["items"] if x["gpuNodeName"] == "gpu-1"
                              and x["nodeHealth"] == "Unhealthy"], timeout=20, what="the node Unhealthy after XID 79")
        assert n
        ev = wait_for(lambda: [e for e in cluster.admin.get("/api/v1/events?reason=NodeUnhealthy")["items"]],
                      timeout=20, what="the NodeUnhealthy alert")
        assert "XID 79" in ev[0]["message"], ev[0]
        exporter.set("gpu-1", 3, DCGM_FI_DEV_XID_ERRORS=0)
        wait_for(lambda: healthy(cluster) == {"gpu-1"}, timeout=20, what="the node Healthy again")

        # A malformed answer is refused whole: the agent keeps no part of it and says so in its log.
        exporter.set("gpu-1", 0, DCGM_FI_DEV_GPU_TEMP='62 x"')
        wait_for(lambda: "dcgm-exporter http://127.0.0.1:%d/metrics: line" % exporter.port in agent.logs(),
                 timeout=20, what="the parse error in the agent's log")
        assert all(r.get("tempC") != 62 for r in gpu_rows(cluster, "gpu-1").values())
    finally:
        exporter.close()


def workload(cluster, name, ws="ws"):
    for w in cluster.admin.get("/api/v1/workloads?sliceName=" + ws)["items"]:
        if w["name"] == name:
            return w
    return None


def test_slice_pods_waiting_running_and_idle_release(env):  # noqa: F811
    """A GPU pod of a slice namespace with no GPR's nodes is Pending: egsd's workloads view shows it waiting
    (no GPR yet, then the workspace's Queued GPR); once the GPR's nodes arrive it runs and shows on its node
    with the GPU that dcgm-exporter (--dcgm-exporter URL) says it uses; other workspaces do not see it; and
    GPUs idle at 0 % by dcgm take the idle-timeout path (IdleWarning, then IdleTimeout releases the GPR)."""
    fake, cluster, start_agent = env
    exporter = Exporter()
    try:
        for n in ("gpu-1", "gpu-2"):
            fake.add_gpu_node(n)
            busy(exporter, n, util=0)
        fake.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": "ws-dev", "labels": {"kubeslice.io/slice": "ws"}}})
        agent = start_agent_with(start_agent, "--dcgm-exporter", exporter.url, "--sample-interval", "1")
        cluster.workspace("ws", ["k1"], namespaces=["ws-dev"])
        cluster.workspace("other", ["k1"], namespaces=["other-dev"])
        wait_for(lambda: healthy(cluster) == {"gpu-1", "gpu-2"}, timeout=20, what="the GPU nodes")
        wait_for(lambda: "registered the admission webhook" in agent.logs(), what="webhook registration")
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "train", "namespace": "ws-dev", "labels": {"egs.io/model": "llama-3-8b"}},
               "spec": {"containers": [{"name": "main", "image": "cuda:12",
                                        "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
        code, body = fake.post("/api/v1/namespaces/ws-dev/pods", pod)
        assert code == 201, body
        w = wait_for(lambda: workload(cluster, "train"), timeout=20, what="the waiting pod in the workloads view")
        assert w["phase"] == "Pending" and w["gpuNodeName"] is None and w["gpuRequest"] == 2
        assert w["waitingForGpr"] is None and w["clusterName"] == "k1" and w["sliceName"] == "ws"
        assert w["reason"] == "Unschedulable"
        other = cluster.egsd.api(cluster.key("Viewer", "other"))
        assert all(x["name"] != "train" for x in other.get("/api/v1/workloads")["items"])
        assert other.call("GET", "/api/v1/workloads?sliceName=ws")[0] == 404

        # Another workspace holds both nodes: the workspace's GPR queues, and the pod waits for it.
        blocker = cluster.gpr(sliceName="other", numberOfGPUNodes=2, exitDuration="2h")
        cluster.wait_state(blocker, "Provisioned", timeout=30)
        gid = cluster.gpr(sliceName="ws", numberOfGPUNodes=1, exitDuration="2h", idleTimeOutDuration="10m",
                          enforceIdleTimeOut=True)
        wait_for(lambda: (workload(cluster, "train") or {}).get("waitingForGpr") == {"gprId": gid, "state": "Queued"},
                 timeout=20, what="the pod waiting for the queued GPR %s: %r" % (cluster.status(gid)["status"]["provisioningStatus"], workload(cluster, "train")))

        # A third node joins the cluster: the GPR is provisioned onto it and the pod starts there.
        fake.add_gpu_node("gpu-3")
        busy(exporter, "gpu-3", util=0)
        cluster.wait_state(gid, "Provisioned", timeout=40)
        held = wait_for(lambda: fake.get("/api/v1/namespaces/ws-dev/pods/train")[1]["spec"].get("nodeName"),
                        timeout=20, what="the pod scheduled onto a GPR node")
        exporter.set(held, 0, pod=("ws-dev", "train"))
        exporter.set(held, 1, pod=("ws-dev", "train"))
        w = wait_for(lambda: (workload(cluster, "train") or {}).get("phase") == "Running"
                     and len(workload(cluster, "train")["gpus"]) == 2 and workload(cluster, "train"),
                     timeout=20, what="the running pod with its GPUs")
        assert w["gpuNodeName"] == held and w["gprId"] == gid and w["model"] == "llama-3-8b"
        assert sorted(g["index"] for g in w["gpus"]) == [0, 1]

        # Every GPU of the GPR at 0 % (dcgm says so): warned at half the idle timeout, released at its end.
        wait_for(lambda: all(r.get("utilPct") == 0 for r in gpu_rows(cluster, held).values())
                 and len(gpu_rows(cluster, held)) == 8, timeout=20, what="the idle samples")
        cluster.advance("6m")
        wait_for(lambda: any(e["reason"] == "IdleWarning" for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"]),
                 timeout=20, what="IdleWarning")
        cluster.advance("5m")
        wait_for(lambda: any(e["reason"] == "IdleTimeout" for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"]),
                 timeout=20, what="IdleTimeout")
        assert cluster.status(gid)["status"]["provisioningStatus"] in ("Releasing", "Complete")
    finally:
        exporter.close()


def start_agent_with(start_agent, *extra):
    """start_agent() with extra arguments on the agent's command line."""
    orig = K8sAgent.start

    def start(self):
        self.args += list(extra)
        return orig(self)
    K8sAgent.start = start
    try:
        return start_agent()
    finally:
        K8sAgent.start = orig
