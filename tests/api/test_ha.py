"""Several egsd over one PostgreSQL database (docs/ha.md): one leads (it holds the leader lock on its
own session and a lease), the others follow: they serve reads from their own model, kept current from
the store, and forward writes and the agents' calls to the leader.

- A follower serves reads, forwards writes (agents included) and streams events; /healthz says role,
  epoch and how far behind it is.
- kill -9 of the leader during a burst of creates from 16 clients (half of them talking to the
  follower): the follower leads within 5 s with every acknowledged GPR; the agent (talking to the
  follower) goes on, exits still happen on time, no node is attached twice.
- A leader whose session the server ended is deposed and never commits again.
- PostgreSQL restarting under a burst of creates: the leader reconnects, nothing acknowledged is lost.
- A network stall between the leader and PostgreSQL (a TCP proxy that freezes): the leader answers
  503 and steps down before the follower takes over."""
import http.client
import json
import os
import shutil
import socket
import threading
import time

import pytest

from conftest import H100, STORE, Agent, Egsd, pg_server, store_args, wait_for

pytestmark = pytest.mark.skipif(STORE != "postgres", reason="leadership is PostgreSQL's (SQLite: one process per file)")


def health(e):
    try:
        c = http.client.HTTPSConnection("127.0.0.1", e.port, timeout=2, context=e.ssl_context) if e.tls else \
            http.client.HTTPConnection("127.0.0.1", e.port, timeout=2)
        c.request("GET", "/healthz")
        r = c.getresponse()
        return json.loads(r.read())["data"] if r.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None


def role(e):
    h = health(e)
    return h and h["role"]


def stop_all(*procs):
    """Stops every process started (None: never started), in order."""
    for p in procs:
        if p:
            p.stop()


def follower_of(leader, data_dir, url=None, tls=None):
    """A second egsd on the leader's database with the leader's admin key and slice-token key (as
    docs/ha.md says to deploy them): it follows."""
    os.makedirs(data_dir)
    for key in ("admin.key", "kubecreds.key"):
        shutil.copy(os.path.join(leader.data_dir, key), os.path.join(data_dir, key))
    b = Egsd(data_dir, extra=url or leader.extra, tls=tls).start()
    assert role(b) == "follower", health(b)
    return b


def post(port, key, path, body, timeout=10, source="127.0.0.1", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0))
    c.request("POST", path, json.dumps(body), dict({"Authorization": "Bearer " + key,
                                                    "Content-Type": "application/json"}, **(headers or {})))
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"null")


class Creators:
    """n threads creating GPRs in workspace w; thread t talks to ports[t % len(ports)] and moves to the
    next port when a connection fails (a client with a list of replicas).  acked: the acknowledged ids."""

    def __init__(self, ports, key, n=16):
        self.ports, self.key, self.acked, self.statuses = ports, key, set(), {}
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.pool = [threading.Thread(target=self.run, args=(t,)) for t in range(n)]
        for th in self.pool:
            th.start()

    def run(self, t):
        conn, i, at = None, 0, t % len(self.ports)
        while not self.stop.is_set():
            body = {"gprName": "job-%d-%d" % (t, i), "sliceName": "w", "numberOfGPUNodes": 1, "numberOfGPUs": 8,
                    "exitDuration": "1h"}
            i += 1
            try:
                conn = conn or http.client.HTTPConnection("127.0.0.1", self.ports[at], timeout=15)
                conn.request("POST", "/api/v1/gpr", json.dumps(body),
                             {"Authorization": "Bearer " + self.key, "Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException):
                conn, at = None, (at + 1) % len(self.ports)  # never acknowledged: try the next replica
                time.sleep(0.02)
                continue
            with self.lock:
                self.statuses[resp.status] = self.statuses.get(resp.status, 0) + 1
                if resp.status == 200:
                    self.acked.add(json.loads(data)["data"]["gprId"])
            if resp.status != 200:
                time.sleep(0.02)

    def count(self):
        with self.lock:
            return len(self.acked)

    def more(self, n, what, timeout=60, or_else=lambda: False):
        """Waits until n more creates than now are acknowledged (or or_else() is true)."""
        base = self.count()
        wait_for(lambda: self.count() >= base + n or or_else(), timeout=timeout, interval=0.005, what=what)

    def lost(self, api):
        """The acknowledged GPRs that api's replica does not list."""
        return self.acked - {g["gprId"] for g in api.get("/api/v1/gpr/list?sliceName=w")["items"]}

    def finish(self):
        self.stop.set()
        for th in self.pool:
            th.join(30)


def cluster_with_agent(a, b, tmpdir_path, nodes=4):
    """Cluster c1 with a real agent talking to b (the follower: its calls are forwarded), workspace w."""
    admin = a.api()
    token = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    agent = Agent(b, "c1", token, [("n%d" % i, H100) for i in range(nodes)], os.path.join(tmpdir_path, "agent")).start()
    wait_for(lambda: len([n for n in admin.get("/api/v1/inventory/list")["items"]
                          if n["nodeHealth"] == "Healthy"]) == nodes, what="%d healthy nodes" % nodes)
    admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["c1"], "namespaces": ["w"]})
    return agent


def test_a_follower_serves_reads_forwards_writes_and_streams_events(tmpdir_path):
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url).start()
    b = agent = None
    try:
        b = follower_of(a, os.path.join(tmpdir_path, "b"))
        ha, hb = health(a), health(b)
        assert ha["role"] == "leader" and hb["epoch"] == ha["epoch"] >= 1
        assert hb["leader"] == "127.0.0.1:%d" % a.port and hb["syncedAgoMs"] < 5000
        agent = cluster_with_agent(a, b, tmpdir_path, nodes=2)  # the agent registers through the follower
        # Events reach a stream on the follower.
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        s.sendall(b"GET /api/v1/events/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                  a.admin_key.encode() + b"\r\n\r\n")
        # A write to the follower is the leader's: acknowledged, then readable on both.
        fb = b.api(a.admin_key)
        created = fb.ok("POST", "/api/v1/gpr", {"gprName": "via-follower", "sliceName": "w", "numberOfGPUNodes": 1,
                                                "numberOfGPUs": 8, "exitDuration": "1h"})
        gid = created["gprId"]
        assert a.api().get("/api/v1/gpr?gprId=" + gid)["gprName"] == "via-follower"
        wait_for(lambda: fb.call("GET", "/api/v1/gpr?gprId=" + gid)[0] == 200, what="the follower to see the GPR")
        wait_for(lambda: health(b)["behindTurns"] == 0, what="the follower to catch up")
        # A rejected write is the leader's refusal, unchanged, and nothing is stored.
        status, doc = fb.call("POST", "/api/v1/gpr", {"gprName": "bad", "sliceName": "w", "numberOfGPUs": -1})
        assert 400 <= status < 500 and doc["error"]["errorKey"], doc
        status, doc = b.api("not-a-key").call("POST", "/api/v1/clusters", {"clusterName": "x"})
        assert status == 401, doc
        # The stream on the follower delivered the GPR's events.
        buf, deadline = b"", time.time() + 15
        while gid.encode() not in buf and time.time() < deadline:
            buf += s.recv(65536)
        assert gid.encode() in buf, buf[-500:]
        s.close()
        # The agent's calls went through the follower to the leader: the GPR is provisioned by it.
        wait_for(lambda: fb.get("/api/v1/gpr?gprId=" + gid)["status"]["provisioningStatus"] == "Provisioned",
                 what="the GPR provisioned through the follower's forwarding")
        assert fb.get("/api/v1/gpr/list?sliceName=w")["items"][0]["gprId"] == gid
        # Every read route answers on the follower from its own model: none changes state (a follower
        # would refuse that turn with 503 NOT_LEADER) or needs the leader.
        paths = [p for p, ops in json.loads(fb.raw("GET", "/api/v1/openapi.json")[1])["paths"].items()
                 if "get" in ops and "{" not in p and "/agent/" not in p and not p.endswith("/watch")]
        assert len(paths) > 20, paths
        for p in paths:
            status, doc = fb.call("GET", p)
            assert status not in (500, 501, 502, 503), (p, status, doc)
    finally:
        stop_all(agent, a, b)


def test_a_write_through_a_follower_is_audited_under_the_clients_address(tmpdir_path):
    """The follower proves the client's address to the leader (an HMAC under a key derived from the
    shared kubecreds.key); a client's own claim, to either replica, is never believed."""
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url).start()
    b = None
    try:
        b = follower_of(a, os.path.join(tmpdir_path, "b"))
        forged = {"X-EGS-Client": "10.9.9.9", "X-EGS-Client-Proof": "00" * 32}
        assert post(b.port, a.admin_key, "/api/v1/clusters", {"clusterName": "via-b"}, source="127.0.0.2")[0] == 200
        assert post(b.port, a.admin_key, "/api/v1/clusters", {"clusterName": "forged-via-b"}, source="127.0.0.2",
                    headers=forged)[0] == 200
        assert post(a.port, a.admin_key, "/api/v1/clusters", {"clusterName": "forged-at-a"}, source="127.0.0.3",
                    headers=dict(forged, **{"X-EGS-Forwarded": "127.0.0.1:%d" % b.port}))[0] == 200
        peers = {e["target"]: e["peer"] for e in a.api().get("/api/v1/audit?limit=100")["items"]}
        via = "127.0.0.2 via 127.0.0.1:%d" % b.port
        assert peers["via-b"] == via and peers["forged-via-b"] == via, peers
        assert peers["forged-at-a"] == "127.0.0.3", peers
    finally:
        stop_all(a, b)


def test_forwarding_over_tls_verifies_the_leader(tmpdir_path):
    """With --tls-cert a follower forwards over HTTPS and verifies the leader's certificate: replicas
    sharing one certificate trust each other; one whose certificate chains elsewhere refuses (503)."""
    from test_tls import make_ca, make_cert
    pki = os.path.join(tmpdir_path, "pki")
    os.makedirs(pki)
    ca, other_ca = make_ca(pki, "ca"), make_ca(pki, "other-ca")
    cert, key = make_cert(pki, "ca", "egsd", "IP:127.0.0.1,DNS:localhost")
    stranger = make_cert(pki, "other-ca", "stranger", "IP:127.0.0.1,DNS:localhost")
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url, tls=(cert, key, ca)).start()
    b = c = None
    try:
        b = follower_of(a, os.path.join(tmpdir_path, "b"), url=url, tls=(cert, key, ca))
        status, doc = b.api(a.admin_key).call("POST", "/api/v1/clusters", {"clusterName": "via-tls"})
        assert status == 200, doc
        assert "via-tls" in [x["clusterName"] for x in a.api().get("/api/v1/clusters")["items"]]
        c = follower_of(a, os.path.join(tmpdir_path, "c"), url=url, tls=(stranger[0], stranger[1], other_ca))
        status, doc = c.api(a.admin_key).call("POST", "/api/v1/clusters", {"clusterName": "unverified"})
        assert status == 503 and doc["error"]["errorKey"] == "LEADER_UNAVAILABLE", doc
        assert "unverified" not in [x["clusterName"] for x in a.api().get("/api/v1/clusters")["items"]]
    finally:
        stop_all(a, b, c)


def test_kill9_of_the_leader_hands_over_with_every_acknowledged_gpr(tmpdir_path):
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url).start()
    b = agent = creators = None
    try:
        b = follower_of(a, os.path.join(tmpdir_path, "b"))
        agent = cluster_with_agent(a, b, tmpdir_path)
        creators = Creators([a.port, b.port], a.admin_key)
        creators.more(300, "300 acknowledged creates")
        a.proc.kill()
        killed_at = time.time()
        wait_for(lambda: role(b) == "leader", timeout=5, interval=0.02, what="the follower to lead within 5 s")
        print("failover: %.2f s" % (time.time() - killed_at))
        creators.more(100, "100 creates on the new leader", timeout=30)
        creators.finish()
        a.stop()

        api = b.api(a.admin_key)
        missing = creators.lost(api)
        assert not missing, "%d acknowledged GPRs lost, e.g. %s" % (len(missing), sorted(missing)[:3])
        # The agent (it talked to the follower all along) goes on with the new leader, and windows go
        # on: the one provisioned GPR exits an hour later and the next takes a node.  No node is ever
        # held by two GPRs.
        wait_for(lambda: [c for c in api.get("/api/v1/clusters")["items"] if c["clusterName"] == "c1"][0]["agentConnected"],
                 what="the agent to reach the new leader")

        def provisioned():
            nodes = api.get("/api/v1/inventory/list")["items"]
            assert all(len(n.get("allocation") or []) <= 1 for n in nodes), nodes
            gs = api.get("/api/v1/gpr/list?sliceName=w")["items"]
            return [g["gprId"] for g in gs if g["status"]["provisioningStatus"] == "Provisioned"]
        first = wait_for(provisioned, what="a provisioned GPR on the new leader")
        assert len(first) == 1  # one GPR of a workspace at a time
        api.ok("POST", "/api/v1/debug/clock", {"advance": "61m"})
        wait_for(lambda: api.get("/api/v1/gpr?gprId=" + first[0])["status"]["provisioningStatus"] == "Complete",
                 timeout=30, what="the first GPR to exit on time")
        wait_for(lambda: provisioned() and provisioned() != first, timeout=30, what="the next GPR provisioned")
    finally:
        if creators:
            creators.finish()
        stop_all(agent, a, b)


def leader_lock_sql(url):
    schema = url[1].split("search_path%3D")[1]
    return ("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = 471650172 AND objsubid = 2 "
            "AND objid::text::bigint = (hashtext('%s')::bigint & 4294967295)" % schema)


def test_a_deposed_leader_never_commits_again(tmpdir_path):
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url).start()
    b = None
    try:
        a.api().ok("POST", "/api/v1/clusters", {"clusterName": "before"})
        b = follower_of(a, os.path.join(tmpdir_path, "b"))
        # The server ends the leader's session, as it would after a network stall: its lock goes with it.
        killed = pg_server().psql(leader_lock_sql(url))
        assert killed.split() == ["t"], killed
        wait_for(lambda: role(b) == "leader", what="the follower to take over")
        # The old leader still answers reads from memory, but its next commit finds the lock taken and a
        # newer epoch: it exits without acknowledging anything.
        try:
            status, _ = a.api().call("POST", "/api/v1/clusters", {"clusterName": "after"})
        except (OSError, http.client.HTTPException):
            status = None
        assert status != 200
        wait_for(lambda: a.proc.poll() is not None, what="the deposed leader to exit")
        assert a.proc.returncode == 70 and "deposed" in a.logs()
        names = [c["clusterName"] for c in b.api(a.admin_key).get("/api/v1/clusters")["items"]]
        assert "before" in names and "after" not in names
    finally:
        stop_all(a, b)


def test_postgresql_restarting_under_load_loses_nothing(tmpdir_path):
    url = store_args(os.path.join(tmpdir_path, "shared"))
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=url).start()
    creators = agent = None
    try:
        agent = cluster_with_agent(a, a, tmpdir_path, nodes=1)
        creators = Creators([a.port], a.admin_key, n=8)
        creators.more(100, "100 acknowledged creates")
        pg_server().restart()
        creators.more(100, "100 creates after the restart", timeout=60, or_else=lambda: a.proc.poll() is not None)
        assert a.proc.poll() is None, a.logs()[-3000:]
        creators.finish()
        assert a.proc.poll() is None and role(a) == "leader"  # recovered without a restart of egsd
        # egsd flushes its log once a tick: wait for the line rather than race the flush.
        wait_for(lambda: "reconnected to PostgreSQL" in a.logs(), timeout=10, what="the reconnect in the log")
        assert not creators.lost(a.api())
        assert creators.statuses.get(200) == len(creators.acked)
    finally:
        if creators:
            creators.finish()
        stop_all(agent, a)


class Proxy:
    """A TCP proxy to PostgreSQL's unix socket that can freeze: bytes stop flowing both ways and the
    connections stay open, as in a network partition that the kernel does not see."""

    def __init__(self, sock_path):
        self.sock_path, self.frozen = sock_path, threading.Event()
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX)
            u.connect(self.sock_path)
            for src, dst in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(src, dst), daemon=True).start()

    def pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while self.frozen.is_set():  # hold the bytes: nothing arrives, nothing fails
                    time.sleep(0.05)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.srv.close()


def test_a_stalled_leader_steps_down_before_another_leads(tmpdir_path):
    url = store_args(os.path.join(tmpdir_path, "shared"))
    pg = pg_server()
    proxy = Proxy(os.path.join(pg.sock, ".s.PGSQL.5432"))
    via_proxy = "postgres://%s@127.0.0.1:%d/postgres?options=-csearch_path%%3D%s" % (
        pg.user, proxy.port, url[1].split("search_path%3D")[1])
    a = Egsd(os.path.join(tmpdir_path, "a"), extra=["--store-url", via_proxy]).start()
    b = None
    try:
        a.api().ok("POST", "/api/v1/clusters", {"clusterName": "before"})
        b = follower_of(a, os.path.join(tmpdir_path, "b"), url=url)
        proxy.frozen.set()
        frozen_at = time.time()
        # A write to the stalled leader is refused (503), not held forever and not acknowledged.
        status, doc = post(a.port, a.admin_key, "/api/v1/clusters", {"clusterName": "during"}, timeout=30)
        refused_at = time.time()
        assert status == 503, (status, doc)
        wait_for(lambda: role(b) == "leader", timeout=30, interval=0.02, what="the follower to take over")
        led_at = time.time()
        print("stall: refused after %.2f s, new leader after %.2f s" % (refused_at - frozen_at, led_at - frozen_at))
        assert refused_at < led_at
        assert "stepping down" in a.logs() and "lease expired" in b.logs()
        wait_for(lambda: a.proc.poll() is not None, what="the old leader to exit")
        assert a.proc.returncode == 70
        names = [c["clusterName"] for c in b.api(a.admin_key).get("/api/v1/clusters")["items"]]
        assert "before" in names and "during" not in names
    finally:
        proxy.frozen.clear()
        proxy.close()
        stop_all(a, b)
