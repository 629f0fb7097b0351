"""Test-side helper for the fake Kubernetes API server (tests/fake-k8s/fake_k8s.py).

    from fakek8s import FakeK8s
    k = FakeK8s()                      # starts it on a free port in a temp dir
    k.add_gpu_node("gpu-1", gpus=8)
    code, doc = k.get("/api/v1/nodes")
    for ev in k.watch("/api/v1/pods", resource_version=doc["metadata"]["resourceVersion"]): ...
    k.stop(); k.start()                # same port, same dir, same state (with state=True)
    k.close()                          # stops it and removes the temp dir

Every call uses the admin token unless token= is given and returns (status, decoded JSON or None);
nothing here raises on 4xx/5xx, so tests can assert on Status objects."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "fake_k8s.py")
PYTHON = "/usr/bin/python3"


sys.path.insert(0, os.path.join(HERE, "..", "api"))
from ports import free_port  # noqa: E402  (the picker of the API tests, so parallel runs never share a port)


class FakeK8s:
    """One fake API server process; see the module comment."""

    def __init__(self, terminate_seconds=1.0, history=1000, schedule_delay=0.0, bookmark_seconds=1.0,
                 state=True, port=None, directory=None, start=True, verbose=False):
        self.dir = directory or tempfile.mkdtemp(prefix="fake-k8s-")
        os.makedirs(self.dir, exist_ok=True)
        self.own_dir = directory is None
        self.port = port or free_port()
        self.state = os.path.join(self.dir, "state.json") if state else None
        self.opts = ["--terminate-seconds", str(terminate_seconds), "--history", str(history),
                     "--schedule-delay", str(schedule_delay), "--bookmark-seconds", str(bookmark_seconds)]
        if verbose:
            self.opts.append("--verbose")
        self.proc = None
        self._local = threading.local()
        if start:
            self.start()

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self):
        """Starts the server (same port, dir and state as before) and waits for `ready`."""
        args = [PYTHON, SERVER, "--listen", "127.0.0.1:%d" % self.port, "--dir", self.dir] + self.opts
        if self.state:
            args += ["--state", self.state]
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError("fake-k8s did not start: %r; see %s/server.log" % (line, self.dir))
        with open(os.path.join(self.dir, "admin.token")) as f:
            self.token = f.read().strip()
        self.ca = os.path.join(self.dir, "ca.crt")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        return self

    def stop(self):
        """SIGTERM (the server saves its state) and wait; connections are refused afterwards."""
        self._local = threading.local()  # drops kept connections (their server is going away)
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.proc.stdout.close()
            self.log.close()
        self.proc = None

    def close(self):
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    # --- HTTP ---------------------------------------------------------------------------------------
    def ssl_context(self):
        return ssl.create_default_context(cafile=self.ca)

    def connect(self, timeout=30):
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context())

    def request(self, method, path, body=None, token=None, content_type="application/json", headers=None):
        """Returns (status, decoded JSON body or text or None); keeps one connection alive per thread."""
        hdrs = {"Accept": "application/json"}
        tok = self.token if token is None else token
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        if body is not None:
            hdrs["Content-Type"] = content_type
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
        hdrs.update(headers or {})
        for attempt in (0, 1):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            conn = conn or self.connect()
            self._local.conn = None
            try:
                conn.request(method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                if not reused or attempt:  # a kept connection may have been closed by the server: retry once
                    raise
        if resp.getheader("Connection", "").lower() != "close":
            self._local.conn = conn  # kept alive for this thread's next call
        else:
            conn.close()
        if not data:
            return resp.status, None
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode("utf-8", "replace")

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, patch_type="merge", **kw):
        """patch_type: merge, strategic, json or apply (the media type is chosen from it)."""
        ctype = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
                 "json": "application/json-patch+json", "apply": "application/apply-patch+yaml"}[patch_type]
        return self.request("PATCH", path, body, content_type=ctype, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def watch(self, path, resource_version=None, timeout=10, bookmarks=True, token=None, **params):
        """Yields decoded watch events until the server ends the stream (timeoutSeconds=timeout) or the
        connection is silent for timeout seconds."""
        q = dict(params, watch="true")
        q.setdefault("timeoutSeconds", str(int(timeout)))
        if resource_version is not None:
            q["resourceVersion"] = resource_version
        if bookmarks:
            q["allowWatchBookmarks"] = "true"
        sep = "&" if "?" in path else "?"
        conn = self.connect(timeout=timeout)
        tok = self.token if token is None else token
        try:
            conn.request("GET", path + sep + urllib.parse.urlencode(q), headers={"Authorization": "Bearer " + tok})
            resp = conn.getresponse()
            if resp.status != 200:
                yield {"type": "HTTP", "status": resp.status, "object": json.loads(resp.read() or b"null")}
                return
            while True:
                try:
                    line = resp.readline()
                except (socket.timeout, TimeoutError):
                    return
                if not line:
                    return
                yield json.loads(line)
        finally:
            conn.close()

    # --- conveniences -------------------------------------------------------------------------------
    def add_gpu_node(self, name, gpus=8, product="NVIDIA-H100-80GB-HBM3", memory_mib=81559, labels=None,
                     ready=True, taints=None, instance_type="p5.48xlarge", region="us-east-1", zone="us-east-1a"):
        """Creates a Node as a kubelet with NVIDIA's device plugin and GPU feature discovery would."""
        lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
               "node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/region": region,
               "topology.kubernetes.io/zone": zone}
        if gpus:
            lab.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory_mib),
                        "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.present": "true"})
        lab.update(labels or {})
        res = {"cpu": "192", "memory": "2097152Mi", "pods": "110", "ephemeral-storage": "1000Gi"}
        if gpus:
            res["nvidia.com/gpu"] = str(gpus)
        t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
                "spec": {"taints": taints} if taints else {},
                "status": {"capacity": res, "allocatable": dict(res),
                           "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                           "reason": "KubeletReady" if ready else "KubeletNotReady",
                                           "message": "kubelet is posting ready status", "lastHeartbeatTime": t,
                                           "lastTransitionTime": t}],
                           "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                         {"type": "Hostname", "address": name}],
                           "nodeInfo": {"kubeletVersion": "v1.32.0", "containerRuntimeVersion": "containerd://1.7.0",
                                        "osImage": "Debian GNU/Linux 12 (bookworm)", "architecture": "amd64",
                                        "operatingSystem": "linux", "kernelVersion": "6.1.0"}}}
        return self.post("/api/v1/nodes", node)

    def set_node_ready(self, name, status="True"):
        """Patches the node's Ready condition ("True", "False" or "Unknown") through nodes/status."""
        t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        cond = {"type": "Ready", "status": status, "reason": "KubeletReady" if status == "True" else "KubeletNotReady",
                "lastHeartbeatTime": t, "lastTransitionTime": t}
        return self.patch("/api/v1/nodes/%s/status" % name, {"status": {"conditions": [cond]}}, "strategic")

    def service_account_token(self, namespace, name, seconds=3600):
        """A TokenRequest token for an existing ServiceAccount (None when the request fails)."""
        code, doc = self.post("/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, name),
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": seconds}})
        return doc["status"]["token"] if code == 201 else None

    def issue_cert(self, name, hosts):
        """A server certificate signed by the fake's CA (for webhooks); returns (crt, key) paths."""
        sys.path.insert(0, HERE)
        import k8s_auth
        return k8s_auth.issue_cert(self.dir, name, hosts)

    def ca_bundle(self):
        with open(self.ca, "rb") as f:
            return base64.b64encode(f.read()).decode()

    def kubeconfig_for(self, token, path, namespace=None):
        """Writes a kubeconfig for another bearer token (a ServiceAccount's) and returns its path."""
        ctx_ns = "\n    namespace: %s" % namespace if namespace else ""
        text = ("apiVersion: v1\nkind: Config\nclusters:\n- name: fake-k8s\n  cluster:\n    server: %s\n"
                "    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n"
                "- name: c\n  context:\n    cluster: fake-k8s\n    user: u%s\ncurrent-context: c\n") % (
                    self.url, self.ca_bundle(), token, ctx_ns)
        with open(path, "w") as f:
            f.write(text)
        return path

    def kubectl(self, *args, kubeconfig=None, timeout=60, input=None):
        """Runs the real kubectl against this server; returns the CompletedProcess (text)."""
        env = dict(os.environ, KUBECONFIG=kubeconfig or self.kubeconfig, HOME=self.dir)
        return subprocess.run(["kubectl"] + list(args), env=env, capture_output=True, text=True, timeout=timeout,
                              input=input)


if __name__ == "__main__":
    sys.exit("import this module from a test")
