"""An agent played by the test itself over the agent protocol, so that GPU samples, node health and
workloads are exactly what each observability test needs (the real egs-agent's sampling is tested with
its mock devices elsewhere)."""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import H100, wait_for
from ports import free_port  # noqa: E402  (one picker for every test process)


class FakeAgent:
    def __init__(self, cluster, name, nodes, shape=H100):
        self.name = name
        self.cluster = cluster
        token = cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": name})["agentToken"]
        self.api = cluster.egsd.api(token)
        self.gpus = shape["gpuCount"]
        self.nodes = {n: {"health": "Healthy", "attached": "", "workloads": [],
                          "gpus": [{"tempC": 40.0, "powerW": 100.0, "utilPct": 0.0, "memUsedMiB": 0}
                                   for _ in range(self.gpus)]} for n in nodes}
        self.api.ok("POST", "/api/v1/agent/register", {"clusterName": name, "nodes": [
            dict(name=n, gpus=[{"uuid": self.uuid(n, i)} for i in range(self.gpus)], **shape) for n in nodes]})
        self.heartbeat()

    @staticmethod
    def uuid(node, i):
        return "GPU-%s-%d" % (node, i)

    def sample(self, node, gpu=None, **values):
        """Sets the next heartbeat's samples of one GPU (or every GPU of the node)."""
        for i in ([gpu] if gpu is not None else range(self.gpus)):
            self.nodes[node]["gpus"][i].update(values)

    def heartbeat(self):
        nodes = [{"name": n, "health": s["health"], "attachedGpr": s["attached"], "workloads": s["workloads"],
                  "gpus": [dict(uuid=self.uuid(n, i), index=i, **g) for i, g in enumerate(s["gpus"])]}
                 for n, s in self.nodes.items()]
        status, doc = self.api.call("POST", "/api/v1/agent/heartbeat", {"clusterName": self.name, "nodes": nodes})
        assert status == 200, doc
        return doc

    def serve(self):
        """Carries out every pending action at once; returns them."""
        acts = self.api.get("/api/v1/agent/actions?wait=0")["actions"]
        for a in acts:
            self.nodes[a["node"]]["attached"] = a["gprId"] if a["type"] == "attach" else ""
            self.api.ok("POST", "/api/v1/agent/actions/result", {"actionId": a["actionId"], "type": a["type"],
                                                                "gprId": a["gprId"], "node": a["node"], "ok": True})
        return acts


def provisioned(cluster, agent, **body):
    """Creates a GPR and has agent (anything with serve()) carry out actions until the GPR is Provisioned;
    returns its status then.  Serving some actions is not enough: they may be another GPR's."""
    gid = cluster.gpr(**body)

    def done():
        agent.serve()
        st = cluster.status(gid)
        return st["status"]["provisioningStatus"] == "Provisioned" and st

    return wait_for(done, what="%s provisioned" % gid)


def events(api, query=""):
    return api.get("/api/v1/events?limit=1000" + ("&" + query if query else ""))["items"]


def reasons(api, query=""):
    return [e["reason"] for e in events(api, query)]


class Receiver:
    """A local Slack-style incoming webhook: records each JSON body; `status` is what it answers."""

    def __init__(self, port=0, status=200):
        self.bodies = []
        self.keys = []  # the Idempotency-Key header of each recorded body
        self.status = status
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                with outer.lock:
                    if outer.status == 200:
                        outer.bodies.append(json.loads(body))
                        outer.keys.append(self.headers.get("Idempotency-Key"))
                self.send_response(outer.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/services/T000/B000/secret-token" % self.port

    def reasons(self):
        with self.lock:
            return [b["egsEvent"]["reason"] for b in self.bodies]

    def close(self):
        self.server.shutdown()
        self.server.server_close()



class EventStream:
    """A raw server-sent event client: GET /api/v1/events/watch, parsed event by event."""

    def __init__(self, port, token, query="", last_id=None, ssl_context=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if ssl_context:  # an egsd with --tls-cert
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname="127.0.0.1")
        hdrs = "Authorization: Bearer %s\r\n" % token
        if last_id is not None:
            hdrs += "Last-Event-ID: %s\r\n" % last_id
        self.sock.sendall(("GET /api/v1/events/watch%s HTTP/1.1\r\nHost: x\r\n%s\r\n" %
                           ("?" + query if query else "", hdrs)).encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.headers = head.decode("latin-1").lower()
        self.chunked = "transfer-encoding: chunked" in self.headers
        self.text = ""

    def _until(self, sep, deadline=None):
        while sep not in self.buf:
            if deadline and time.time() > deadline:
                raise TimeoutError
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.buf += data
        out, self.buf = self.buf.split(sep, 1)
        return out

    def _more(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.time()))
        if self.chunked:
            size = int(self._until(b"\r\n", deadline), 16)
            if size == 0:
                raise EOFError
            while len(self.buf) < size + 2:
                data = self.sock.recv(65536)
                if not data:
                    raise EOFError
                self.buf += data
            self.text += self.buf[:size].decode()
            self.buf = self.buf[size + 2:]
        else:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError
            self.text += data.decode()

    def next(self, timeout=10):
        """The next event as (id, data dict); comments and retry lines are skipped."""
        deadline = time.time() + timeout
        while True:
            while "\n\n" in self.text:
                block, self.text = self.text.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":")
                              and ": " in line)
                if "data" in fields:
                    return int(fields["id"]), json.loads(fields["data"])
            if time.time() > deadline:
                raise TimeoutError("no event within %ss" % timeout)
            try:
                self._more(deadline)
            except socket.timeout:
                raise TimeoutError("no event within %ss" % timeout)

    def close(self):
        self.sock.close()
