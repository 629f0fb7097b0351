"""Fixtures for the API tests: a real egsd on a temporary port and data directory, real
egs-agents over mock devices, and a small JSON client.  Nothing here is mocked except the GPUs
(the agents read mock device files, because the test machine has no GPU)."""
import atexit
import hashlib
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
import http.client

import pytest
from ports import free_port  # noqa: E402  (one picker for every test process)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("EGS_BIN", os.path.join(ROOT, "build", "bin"))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
# Which store every egsd of this run uses: "sqlite" (DIR/egs.db, the default) or "postgres" (one
# PostgreSQL server for the whole run, tests/api/pgserver.py, and a schema of its own per data dir).
STORE = os.environ.get("EGS_TEST_STORE", "sqlite")
# Every egsd of the run renders each kept status view again when it serves it and aborts if the
# bytes differ (src/server/gpr_view.c): a change that a kept view misses fails the test that makes it.
os.environ.setdefault("EGSD_VIEW_CHECK", "1")
sqlite_only = pytest.mark.skipif(STORE != "sqlite", reason="reads or damages the SQLite file itself")
_pg = None


def pg_server():
    """The run's PostgreSQL server, started on first use and stopped at exit."""
    global _pg
    if _pg is None:
        from pgserver import PgServer
        _pg = PgServer().start()
        atexit.register(_pg.cleanup)
    return _pg


def pg_schema(data_dir):
    return "egs_" + hashlib.sha1(os.path.abspath(data_dir).encode()).hexdigest()[:24]


def store_args(data_dir):
    """egsd's store flags for data_dir: none for SQLite; for PostgreSQL a URL whose schema is derived
    from the data dir, so an egsd restarted on the same dir finds its state again."""
    if STORE != "postgres":
        return []
    _schemas.add(pg_schema(data_dir))
    return ["--store-url", pg_server().schema_url(pg_schema(data_dir))]


_schemas = set()


def drop_schemas_under(tmp):
    """Drops the schemas of the data dirs under tmp (their egsd have stopped), so that the run's
    catalog does not grow by a dozen tables per test."""
    gone = [pg_schema(os.path.join(d, sub)) for d, subs, _ in os.walk(tmp) for sub in subs]
    for schema in _schemas.intersection(gone):
        try:
            pg_server().psql("DROP SCHEMA IF EXISTS %s CASCADE" % schema)
        except subprocess.CalledProcessError:
            pass  # housekeeping only: the schema stays until the server goes
        _schemas.discard(schema)


def store_query(egsd, sql):
    """Rows of sql, run on egsd's store behind its back, as tuples (text on PostgreSQL)."""
    if STORE == "postgres":
        out = pg_server().psql("SET search_path TO %s; %s" % (pg_schema(egsd.data_dir), sql))
        return [tuple(line.split("|")) for line in out.splitlines()]
    conn = sqlite3.connect("file:%s?mode=ro" % os.path.join(egsd.data_dir, "egs.db"), uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()



class Api:
    """A JSON client for one bearer credential; returns (status, body) and never raises on 4xx."""

    def __init__(self, port, token=None, ssl_context=None):
        self.port = port
        self.token = token
        self.ssl_context = ssl_context  # HTTPS with this context (an egsd with --tls-cert); None: HTTP
        self.conn = None

    def with_token(self, token):
        return Api(self.port, token, self.ssl_context)

    def connect(self, timeout=30):
        if self.ssl_context:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def raw(self, method, path, body=None, headers=None):
        hdrs = {"Content-Type": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        hdrs.update(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        for attempt in range(2):
            if self.conn is None:
                self.conn = self.connect()
            try:
                self.conn.request(method, path, body=body, headers=hdrs)
                resp = self.conn.getresponse()
                data = resp.read()
                return resp.status, data, resp
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def call(self, method, path, body=None, headers=None):
        status, data, _ = self.raw(method, path, body, headers)
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            doc = {"_raw": data.decode("utf-8", "replace")}
        return status, doc

    def ok(self, method, path, body=None):
        status, doc = self.call(method, path, body)
        assert status == 200, (method, path, body, status, doc)
        assert doc["statusCode"] == 200 and doc["status"] == "OK"
        return doc["data"]

    def get(self, path):
        return self.ok("GET", path)


class Egsd:
    """One egsd process on a free port with its own data directory.  With tls=(cert, key, ca_file)
    it serves HTTPS (--tls-cert/--tls-key) and the fixtures' clients trust ca_file."""

    def __init__(self, data_dir, dev_clock=True, extra=(), tls=None):
        self.data_dir = data_dir
        self.tls = tls
        self.ssl_context = None
        if tls:
            import ssl
            self.ssl_context = ssl.create_default_context(cafile=tls[2])
            extra = list(extra) + ["--tls-cert", tls[0], "--tls-key", tls[1]]
        self.port = free_port()
        self.dev_clock = dev_clock
        self.extra = list(extra)
        self.proc = None
        self.log_path = os.path.join(data_dir, "egsd.log")

    def start(self):
        os.makedirs(self.data_dir, exist_ok=True)
        args = [os.path.join(BIN, "egsd"), "--listen", "127.0.0.1:%d" % self.port, "--data", self.data_dir]
        if self.dev_clock:
            args.append("--dev-clock")
        self.log = open(self.log_path, "ab")
        if "--store-url" not in self.extra:
            args += store_args(self.data_dir)
        self.proc = subprocess.Popen(args + self.extra, stdout=self.log, stderr=subprocess.STDOUT)
        # PostgreSQL: a new schema takes a dozen commits to migrate, slow on a busy shared machine.
        deadline = time.time() + (10 if STORE == "sqlite" else 30)
        while time.time() < deadline:
            try:
                c = Api(self.port, ssl_context=self.ssl_context).connect(timeout=1)
                c.request("GET", "/healthz")
                resp = c.getresponse()
                if resp.status == 200:
                    store = json.loads(resp.read())["data"].get("store")
                    assert "--store-url" in self.extra or store == STORE, (store, STORE)
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("egsd exited: " + open(self.log_path).read())
            time.sleep(0.02)
        raise RuntimeError("egsd did not become ready")

    def stop(self, sig="term"):
        if self.proc and self.proc.poll() is None:
            if sig == "kill":
                self.proc.kill()
            else:
                self.proc.terminate()
            self.proc.wait(10)
        self.log.close()

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    @property
    def admin_key(self):
        with open(os.path.join(self.data_dir, "admin.key")) as f:
            return f.read().strip()

    def api(self, token=None):
        return Api(self.port, token if token is not None else self.admin_key, self.ssl_context)

    def logs(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


H100 = {"instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8, "memoryMiB": 81920}
A100 = {"instanceType": "p4d.24xlarge", "gpuModel": "NVIDIA-A100-SXM4-40GB", "gpuCount": 8, "memoryMiB": 40960}
T4 = {"instanceType": "g4dn.12xlarge", "gpuModel": "Tesla-T4", "gpuCount": 4, "memoryMiB": 16384}


def devices_yaml(path, nodes):
    lines = ["nodes:"]
    for name, shape in nodes:
        lines.append("  - name: %s" % name)
        for k in ("instanceType", "gpuModel", "gpuCount", "memoryMiB"):
            lines.append("    %s: %s" % (k, shape[k]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


class Agent:
    """A real egs-agent process for one cluster, over a mock devices file."""

    def __init__(self, egsd, cluster, token, nodes, workdir, extra=()):
        self.egsd = egsd
        self.cluster = cluster
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.token_file = os.path.join(workdir, "token")
        with open(self.token_file, "w") as f:
            f.write(token + "\n")
        self.devices = devices_yaml(os.path.join(workdir, "devices.yaml"), nodes)
        self.state_dir = os.path.join(workdir, "state")
        self.extra = list(extra)
        self.proc = None

    def start(self):
        self.log = open(os.path.join(self.workdir, "agent.log"), "ab")
        args = [os.path.join(BIN, "egs-agent"), "--server", self.egsd.url, "--cluster", self.cluster,
                "--token-file", self.token_file, "--devices", self.devices, "--backend", "local",
                "--state-dir", self.state_dir] + self.extra
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def stop(self, sig="term"):
        if self.proc and self.proc.poll() is None:
            if sig == "kill":
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

    def attach_state(self):
        p = os.path.join(self.state_dir, "attach-state.json")
        if not os.path.exists(p):
            return {}
        with open(p) as f:
            return json.load(f)


def wait_for(pred, timeout=15.0, interval=0.05, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def fake_sa_token():
    """A token shaped like the API server's (a JWT: three base64url parts), different every call."""
    return "eyJhbGciOiJSUzI1NiIsImtpZCI6ImVncyJ9." + secrets.token_urlsafe(96) + "." + secrets.token_urlsafe(64)


class Cluster:
    """egsd plus agents; the fixture most tests use."""

    def __init__(self, tmp, extra=(), tls=None):
        self.tmp = tmp
        self.egsd = Egsd(os.path.join(tmp, "egsd"), extra=extra, tls=tls).start()
        self.admin = self.egsd.api()
        self.agents = {}
        self.tokens = {}

    def add_cluster(self, name, nodes, start=True, api_server="https://10.0.0.1:6443", extra=()):
        body = {"clusterName": name}
        if api_server:
            body["apiServer"] = api_server
        data = self.admin.ok("POST", "/api/v1/clusters", body)
        self.tokens[name] = data["agentToken"]
        if self.egsd.tls:  # agents verify egsd with the CA the fixtures trust
            extra = ["--ca-file", self.egsd.tls[2]] + list(extra)
        agent = Agent(self.egsd, name, data["agentToken"], nodes, os.path.join(self.tmp, "agent-" + name), extra)
        self.agents[name] = agent
        if start:
            agent.start()
            names = {n for n, _ in nodes}
            wait_for(lambda: names <= {n["gpuNodeName"] for n in self.schedulable_nodes(name)}, what="nodes of " + name)
        return agent

    def schedulable_nodes(self, cluster=None):
        items = self.admin.get("/api/v1/inventory/list")["items"]
        return [n for n in items if n["nodeHealth"] == "Healthy" and (cluster is None or n["clusterName"] == cluster)]

    def workspace(self, name, clusters, namespaces=None):
        self.admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": name, "clusters": clusters,
                                                          "namespaces": namespaces or [name + "-ns"],
                                                          "username": "user", "email": "user@example.com"})
        return name

    def key(self, role, workspace=None, name=None):
        body = {"name": name or ("k-%s-%s-%d" % (role.lower(), workspace or "all", int(time.time() * 1e6) % 10**9)),
                "role": role, "userName": "someone"}
        if workspace:
            body["workspaceName"] = workspace
        return self.admin.ok("POST", "/api/v1/api-key", body)["apiKey"]

    def gpr(self, api=None, **kw):
        body = {"gprName": "job", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h", "priority": 101}
        body.update(kw)
        return (api or self.admin).ok("POST", "/api/v1/gpr", body)["gprId"]

    def status(self, gpr_id, api=None):
        return (api or self.admin).get("/api/v1/gpr?gprId=" + gpr_id)

    def wait_state(self, gpr_id, state, timeout=15):
        return wait_for(lambda: self.status(gpr_id)["status"]["provisioningStatus"] == state and self.status(gpr_id),
                        timeout=timeout, what="%s to be %s" % (gpr_id, state))

    def slice_token(self, workspace, cluster, generation=1, expires="2099-01-01T00:00:00Z"):
        """Reports a ServiceAccount token of workspace on cluster as that cluster's agent does once it has
        minted one (POST /api/v1/agent/slice-access); returns the token."""
        token = fake_sa_token()
        Api(self.egsd.port, self.tokens[cluster], self.egsd.ssl_context).ok("POST", "/api/v1/agent/slice-access", {
            "workspace": workspace, "generation": generation, "ok": True, "token": token, "expiresAt": expires})
        return token

    def held_release_setup(self):
        """The held early release's world (test_planner, test_restart_state): two clusters of two nodes,
        four 8-GPU holders at priority 300 exiting at +50m, +1000m (c1) and +60m, +65m (c2), then A (one
        node, any cluster, priority 200, 100m) and B (two nodes of one cluster, priority 100, 10m), both
        queued. Returns (holders, A, B, {A: estimate, B: estimate})."""
        self.add_cluster("c1", [("c1-n1", H100), ("c1-n2", H100)])
        self.add_cluster("c2", [("c2-n1", H100), ("c2-n2", H100)])
        holds = []
        for i, (cl, dur) in enumerate([("c1", "50m"), ("c1", "1000m"), ("c2", "60m"), ("c2", "65m")]):
            self.workspace("hold%d" % i, ["c1", "c2"])
            holds.append(self.gpr(sliceName="hold%d" % i, clusterName=cl, numberOfGPUs=8, exitDuration=dur,
                                  priority=300))
        for g in holds:
            self.wait_state(g, "Provisioned")
        self.workspace("wa", ["c1", "c2"])
        self.workspace("wb", ["c1", "c2"])
        a = self.gpr(sliceName="wa", numberOfGPUs=8, exitDuration="100m", priority=200)
        b = self.gpr(sliceName="wb", numberOfGPUs=8, numberOfGPUNodes=2, exitDuration="10m", priority=100)
        return holds, a, b, {g: self.status(g)["estimatedStartTime"] for g in (a, b)}

    def advance(self, duration):
        return self.admin.ok("POST", "/api/v1/debug/clock", {"advance": duration})

    def close(self):
        for a in self.agents.values():
            a.stop()
        self.egsd.stop()


@pytest.fixture
def tmpdir_path():
    with tempfile.TemporaryDirectory(prefix="egs-test-") as d:
        yield d
        if STORE == "postgres":
            drop_schemas_under(d)


@pytest.fixture
def egsd(tmpdir_path):
    e = Egsd(os.path.join(tmpdir_path, "egsd")).start()
    yield e
    e.stop()


@pytest.fixture
def cluster(tmpdir_path):
    c = Cluster(tmpdir_path)
    yield c
    c.close()
