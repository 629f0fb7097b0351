#!/usr/bin/python3
"""fake-k8s: a Kubernetes API server for tests, in one Python process (stdlib only).

Usage: fake_k8s.py --listen 127.0.0.1:PORT --dir DIR [--state FILE] [--terminate-seconds S]
                   [--history N] [--schedule-delay S] [--bookmark-seconds S] [--verbose]

It serves HTTPS with a test CA (DIR/ca.crt), accepts bearer tokens only (DIR/admin.token is in
system:masters; ServiceAccount tokens from TokenRequest or token Secrets are authorized by the
stored RBAC objects), writes DIR/kubeconfig, prints `ready` once serving, and with --state saves its
objects on SIGTERM and every two seconds and loads them at start.

What it does, with the semantics of a real API server (see tests/fake-k8s/README.md for the list):
legacy discovery, a minimal OpenAPI v3, Table output for kubectl get, the built-in resources of
k8s_meta.BUILTIN and the resources of stored CRDs (status subresource, printer columns),
resourceVersion/uid/generation, 409 on stale writes, label and field selectors, limit/continue,
JSON merge, strategic merge, JSON and (simplified) apply patches, watches with bookmarks and
410 Gone, graceful pod deletion, namespace termination, eviction with PodDisruptionBudgets,
admission webhooks, RBAC, and the control loops of k8s_sim (scheduler, kubelet, deployments).

What it does NOT do: protobuf or CBOR (requests in them get 415 but for the review kinds and
TokenRequest, which kubectl sends only in protobuf; responses are always JSON),
aggregated discovery (clients fall back), OpenAPI schemas (both documents list no schemas) and
therefore schema validation of unknown fields, server-side apply field ownership and conflicts, exec/attach/
port-forward/proxy, cluster networking (every pod IP is 127.0.0.1), real containers, HTTP/2, list
snapshots at an older resourceVersion (lists and continue tokens read the current state),
client-certificate and anonymous authentication (only /healthz, /livez, /readyz are open)."""
import argparse
import base64
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import k8s_api  # noqa: E402
import k8s_auth  # noqa: E402
import k8s_meta  # noqa: E402
import k8s_objects as ko  # noqa: E402
import k8s_proto  # noqa: E402
import k8s_sim  # noqa: E402
import k8s_subres  # noqa: E402
import k8s_workloads  # noqa: E402
from k8s_meta import REVIEWS, dumps, gv_string  # noqa: E402
from k8s_objects import ApiError  # noqa: E402
from k8s_store import Store  # noqa: E402
from k8s_watch import serve_watch  # noqa: E402

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "gitCommit": "0" * 40,
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0",
           "compiler": "gc", "platform": "linux/amd64"}
BODY_LIMIT = 16 << 20


class Server(ThreadingHTTPServer):
    """HTTPS server whose TLS handshakes run in the per-connection thread, not the accept loop."""
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, ctx, app):
        super().__init__(addr, Handler)
        self.ctx, self.app = ctx, app

    def finish_request(self, request, client_address):
        request.settimeout(30)
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        tls.settimeout(600)
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass


class App:
    """Everything one server holds: options, store, registry, auth, verbs and loops."""

    def __init__(self, args):
        self.args = args
        self.host, port = args.listen.rsplit(":", 1)
        self.port = int(port)
        os.makedirs(args.dir, exist_ok=True)
        self.auth = k8s_auth.Auth(args.dir)
        self.store = Store(args.history)
        self.reg = k8s_meta.Registry()
        if args.state and os.path.exists(args.state):
            self.store.load(args.state)
        self.api = k8s_api.Api(self.store, self.reg, self.auth, args)
        with self.store.lock:
            self.reg.sync_crds(self.store.items("apiextensions.k8s.io", "customresourcedefinitions"))
            self.bootstrap()
        self.sim = k8s_sim.Sim(self.api, args.schedule_delay, args.terminate_seconds)
        self.sim.work = k8s_workloads.Workloads(self.sim)
        self.write_kubeconfig()

    def bootstrap(self):
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            if self.store.get("", "namespaces", "", ns) is None:
                obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
                res = self.reg.lookup("", "v1", "namespaces")
                ko.new_metadata(obj, None)
                ko.default_object(res, obj, None)
                self.api.put_locked(res, obj, None)
                self.api._after_create(res, obj)
        res = self.reg.lookup("rbac.authorization.k8s.io", "v1", "clusterroles")
        for name, rules in k8s_auth.DEFAULT_CLUSTER_ROLES.items():
            if self.store.get(res.group, res.resource, "", name) is None:
                obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                       "rules": rules}
                ko.new_metadata(obj, None)
                self.api.put_locked(res, obj, None)

    def write_kubeconfig(self):
        ca = base64.b64encode(self.auth.ca_pem).decode()
        text = ("apiVersion: v1\nkind: Config\nclusters:\n- name: fake-k8s\n  cluster:\n"
                "    server: https://%s:%d\n    certificate-authority-data: %s\nusers:\n- name: admin\n  user:\n"
                "    token: %s\ncontexts:\n- name: fake-k8s\n  context:\n    cluster: fake-k8s\n    user: admin\n"
                "current-context: fake-k8s\npreferences: {}\n") % (self.host, self.port, ca, self.auth.admin_token)
        path = os.path.join(self.args.dir, "kubeconfig")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)

    def loop(self):
        """Runs the control loops when something changed, a timer is due, or at least once a second."""
        last_save = last_tick = time.monotonic()
        seen_rv = -1
        while True:
            time.sleep(0.05)
            try:
                with self.store.lock:
                    now = time.monotonic()
                    if self.store.rv != seen_rv or self.sim.timers_pending() or now - last_tick > 1.0:
                        self.sim.tick()
                        seen_rv, last_tick = self.store.rv, now
                    if self.args.state and self.store.dirty and time.monotonic() - last_save > 2:
                        self.store.save(self.args.state)
                        last_save = time.monotonic()
                self.sim.run_deferred()
            except Exception as e:  # a bug in a loop must show, not kill the loops
                sys.stderr.write("fake-k8s: control loop error: %r\n" % (e,))

    def stop(self):
        with self.store.lock:
            if self.args.state:
                self.store.save(self.args.state)
        sys.stderr.flush()
        os._exit(0)


def parse_accept(accept):
    """Returns 'Table', 'PartialObjectMetadata' or None for the representation a client asks for."""
    for part in (accept or "").split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if params.get("as") in ("Table", "PartialObjectMetadata", "PartialObjectMetadataList") and \
                params.get("g") == "meta.k8s.io":
            return "Table" if params["as"] == "Table" else "PartialObjectMetadata"
        if part.split(";")[0].strip() in ("application/json", "*/*", "application/*"):
            return None
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-k8s"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.app.args.verbose:
            sys.stderr.write("fake-k8s: %s\n" % (fmt % args))

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # --- responses ------------------------------------------------------------------------------
    def send_json(self, code, doc):
        data = dumps(doc)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(data)

    def send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self, err):
        self.send_json(err.code, err.status())

    # --- request plumbing ---------------------------------------------------------------------------
    def read_body(self):
        """The request body (Content-Length or chunked), at most BODY_LIMIT bytes."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                if len(out) + size > BODY_LIMIT:
                    self.close_connection = True
                    raise ApiError(413, "RequestEntityTooLarge", "the request body is larger than %d bytes"
                                   % BODY_LIMIT)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        if n > BODY_LIMIT:
            self.close_connection = True
            raise ApiError(413, "RequestEntityTooLarge", "the request body is larger than %d bytes" % BODY_LIMIT)
        return self.rfile.read(n) if n else b""

    def decode(self, raw, patch=False):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if ctype == "application/vnd.kubernetes.protobuf" and not patch:
            try:
                return k8s_api.JSON, k8s_proto.decode(raw)
            except k8s_proto.ProtoError as e:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               "accepted media types include: application/json (%s)" % e)
        allowed = (k8s_api.MERGE, k8s_api.STRATEGIC, k8s_api.JSONPATCH, k8s_api.APPLY) if patch else \
            (k8s_api.JSON, "*/*")
        if ctype not in allowed:
            raise ApiError(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - '
                           'accepted media types include: %s' % ", ".join(a for a in allowed if a != "*/*"))
        if not raw:
            return ctype, None
        try:
            return ctype, json.loads(raw)
        except ValueError as e:
            raise ko.bad_request("the body of the request could not be decoded as JSON: %s" % e)

    def dispatch(self, method):
        app = self.server.app
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        path = u.path.rstrip("/") or "/"
        try:
            raw = self.read_body()
            if path in ("/healthz", "/livez", "/readyz"):
                return self.send_text(200, "ok")
            hdr = self.headers.get("Authorization") or ""
            token = hdr[7:].strip() if hdr[:7].lower() == "bearer " else ""
            with app.store.lock:
                ident = app.auth.authenticate(token, app.store)
            if ident is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if self.non_resource(app, method, path, ident):
                return
            self.resource(app, method, path, q, raw, ident)
        except ApiError as e:
            self.fail(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # report server bugs as real servers do, and keep serving
            sys.stderr.write("fake-k8s: internal error on %s %s: %r\n" % (method, u.path, e))
            import traceback
            traceback.print_exc()
            self.fail(ApiError(500, "InternalError", "Internal error occurred: %r" % (e,)))

    def non_resource(self, app, method, path, ident):
        """Answers discovery, version and OpenAPI paths; returns False for resource paths."""
        parts = path.strip("/").split("/")
        doc = None
        if path == "/version":
            doc = VERSION
        elif path == "/api":
            doc = app.reg.api_versions("%s:%d" % (app.host, app.port))
        elif path == "/apis":
            with app.store.lock:
                doc = app.reg.api_groups()
        elif path == "/api/v1" or (parts[0] == "apis" and len(parts) in (2, 3)):
            with app.store.lock:
                if len(parts) == 2 and parts[0] == "apis":
                    vs = app.reg.groups().get(parts[1])
                    doc = app.reg.group_doc(parts[1], vs) if vs else None
                    if doc:
                        doc = dict(doc, kind="APIGroup", apiVersion="v1")
                else:
                    g, v = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
                    doc = app.reg.resource_list(g, v)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        elif path == "/openapi/v2":
            self.check(app, ident, {"verb": "get", "resource": None, "path": path})
            if "protobuf" in (self.headers.get("Accept") or ""):
                data = k8s_meta.openapi_v2(True)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return True
            doc = k8s_meta.openapi_v2(False)
        elif parts[0] == "openapi":
            with app.store.lock:
                if path == "/openapi/v3":
                    doc = app.reg.openapi_v3_root()
                elif path.startswith("/openapi/v3/api/") and len(parts) == 4:
                    doc = app.reg.openapi_v3_doc("", parts[3])
                elif path.startswith("/openapi/v3/apis/") and len(parts) == 5:
                    doc = app.reg.openapi_v3_doc(parts[3], parts[4])
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        else:
            return False
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        self.check(app, ident, {"verb": "get", "resource": None, "path": path})
        self.send_json(200, doc)
        return True

    def check(self, app, ident, a):
        with app.store.lock:
            ok = app.auth.authorize(ident, a, app.store)
        if not ok:
            details = {"kind": a["resource"]} if a.get("resource") else {}
            if a.get("name"):
                details["name"] = a["name"]
            if a.get("resource"):
                details["group"] = a["group"]
            raise ApiError(403, "Forbidden", k8s_auth.forbidden_message(ident, a), details or None)

    def resource(self, app, method, path, q, raw, ident):
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3 and parts[1] == "v1":
            g, v, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            g, v, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        watch_path = rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        ns = ""
        with app.store.lock:
            if len(rest) >= 3 and rest[0] == "namespaces":
                r2 = app.reg.lookup(g, v, rest[2])
                if r2 is not None and r2.namespaced:
                    ns, rest = rest[1], rest[2:]
            res = app.reg.lookup(g, v, rest[0]) if rest else None
        if res is None or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in res.subs:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced and name and not ns and res.resource != "namespaces":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        watching = watch_path or q.get("watch") in ("1", "true", "True")
        verb = self.verb(method, name, sub, watching, res)
        self.check(app, ident, {"verb": verb, "group": g, "resource": res.resource, "sub": sub, "ns": ns,
                                "name": name})
        if watching:
            if name:
                q["fieldSelector"] = ",".join(x for x in (q.get("fieldSelector"), "metadata.name=" + name) if x)
            return serve_watch(self, app, res, ns, q, parse_accept(self.headers.get("Accept")) == "Table")
        if sub:
            return self.subresource(app, method, res, ns, name, sub, q, raw, ident)
        if res.resource in REVIEWS:
            _, body = self.decode(raw)
            return self.send_json(*k8s_subres.review(app.api, res, body, ident))
        self.crud(app, method, res, ns, name, q, raw, ident)

    @staticmethod
    def verb(method, name, sub, watching, res):
        if method == "GET":
            return "watch" if watching else ("get" if name else "list")
        if method == "POST":
            if res.resource in REVIEWS or sub or not name:
                return "create"
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if not name:
            if method == "DELETE":
                return "deletecollection"
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]

    def crud(self, app, method, res, ns, name, q, raw, ident):
        api = app.api
        if method == "GET":
            if name:
                return self.send_obj(app, res, api.get(res, ns, name), 200)
            items, rv, cont = api.list(res, ns, q)
            return self.send_list(app, res, items, rv, cont)
        if method == "POST":
            _, body = self.decode(raw)
            code, obj = api.create(res, ns, body, ident, q)
        elif method == "PUT":
            _, body = self.decode(raw)
            code, obj = api.update(res, ns, name, None, body, ident, q)
        elif method == "PATCH":
            ctype, body = self.decode(raw, patch=True)
            code, obj = api.patch(res, ns, name, None, ctype, body, ident, q)
        elif name:
            _, body = self.decode(raw) if raw else (None, None)
            code, obj = api.delete(res, ns, name, body, ident, q)
        else:
            _, body = self.decode(raw) if raw else (None, None)
            code, obj = api.delete_collection(res, ns, q, body, ident)
            return self.send_json(code, obj)
        self.send_obj(app, res, obj, code)

    def subresource(self, app, method, res, ns, name, sub, q, raw, ident):
        api = app.api
        if sub == "eviction" and method == "POST":
            return self.send_json(*k8s_subres.evict(api, res, ns, name, self.decode(raw)[1]))
        if sub == "binding" and method == "POST":
            return self.send_json(*k8s_subres.bind(api, res, ns, name, self.decode(raw)[1]))
        if sub == "token" and method == "POST":
            return self.send_json(*k8s_subres.token_request(api, res, ns, name, self.decode(raw)[1]))
        if sub == "log" and method == "GET":
            return self.send_text(200, k8s_subres.pod_log(api, res, ns, name, q))
        if sub == "scale":
            return self.scale(app, method, res, ns, name, q, raw, ident)
        if sub in ("status", "finalize"):
            sub2 = "status" if sub == "status" else None
            if method == "GET":
                return self.send_obj(app, res, api.get(res, ns, name), 200)
            if method == "PUT":
                code, obj = api.update(res, ns, name, sub2, self.decode(raw)[1], ident, q)
                return self.send_obj(app, res, obj, code)
            if method == "PATCH" and sub == "status":
                ctype, body = self.decode(raw, patch=True)
                code, obj = api.patch(res, ns, name, "status", ctype, body, ident, q)
                return self.send_obj(app, res, obj, code)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def scale(self, app, method, res, ns, name, q, raw, ident):
        api = app.api
        if method == "GET":
            return self.send_json(200, k8s_subres.scale_of(api.get(res, ns, name)))
        if method == "PUT":
            body = self.decode(raw)[1] or {}
        elif method == "PATCH":
            ctype, patch = self.decode(raw, patch=True)
            cur = k8s_subres.scale_of(api.get(res, ns, name))
            body = k8s_api.k8s_patch.merge_patch(cur, patch) if ctype != k8s_api.JSONPATCH else \
                k8s_api.k8s_patch.json_patch(cur, patch)
        else:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ko.invalid(res, name, [("spec.replicas", "FieldValueInvalid", "Invalid value: must be a "
                                          "non-negative integer")])
        pre = (body.get("metadata") or {}).get("resourceVersion")
        doc = {"spec": {"replicas": replicas}}
        if pre:
            doc["metadata"] = {"resourceVersion": pre}
        _, obj = api.patch(res, ns, name, None, k8s_api.MERGE, doc, ident, q)
        self.send_json(200, k8s_subres.scale_of(obj))

    def out(self, res, obj):
        want = gv_string(res.group, res.version)
        if obj.get("apiVersion") != want:
            obj = dict(obj, apiVersion=want)
        return obj

    def send_obj(self, app, res, obj, code):
        obj = self.out(res, obj)
        mode = parse_accept(self.headers.get("Accept"))
        if mode == "Table":
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with app.store.lock:
                crd = app.reg.crd_of.get((res.group, res.resource))
            obj = k8s_meta.table(res, [obj], obj["metadata"].get("resourceVersion", ""), crd,
                                 (q.get("includeObject") or ["Metadata"])[0], _now())
        elif mode == "PartialObjectMetadata":
            obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        self.send_json(code, obj)

    def send_list(self, app, res, items, rv, cont):
        mode = parse_accept(self.headers.get("Accept"))
        items = [self.out(res, o) for o in items]
        if mode == "Table":
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with app.store.lock:
                crd = app.reg.crd_of.get((res.group, res.resource))
            doc = k8s_meta.table(res, items, rv, crd, (q.get("includeObject") or ["Metadata"])[0], _now())
        elif mode == "PartialObjectMetadata":
            doc = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"resourceVersion": str(rv)},
                   "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                              "metadata": o["metadata"]} for o in items]}
        else:
            doc = {"kind": res.kind + "List", "apiVersion": gv_string(res.group, res.version),
                   "metadata": {"resourceVersion": str(rv)}, "items": items}
        if cont:
            doc["metadata"]["continue"] = cont
        self.send_json(200, doc)


def _now():
    import datetime
    return datetime.datetime.now(datetime.timezone.utc)


def main():
    p = argparse.ArgumentParser(description="fake Kubernetes API server for tests")
    p.add_argument("--listen", required=True, help="HOST:PORT")
    p.add_argument("--dir", required=True)
    p.add_argument("--state")
    p.add_argument("--terminate-seconds", type=float, default=1.0)
    p.add_argument("--history", type=int, default=1000)
    p.add_argument("--schedule-delay", type=float, default=0.0)
    p.add_argument("--bookmark-seconds", type=float, default=5.0)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    app = App(args)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(args.dir, "server.crt"), os.path.join(args.dir, "server.key"))
    ctx.set_alpn_protocols(["http/1.1"])
    server = Server((app.host, app.port), ctx, app)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=app.stop, daemon=True).start())
    threading.Thread(target=app.loop, daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
