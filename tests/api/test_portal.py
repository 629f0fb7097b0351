"""The portal as egsd serves it (src/server/portal.c) and the two routes it reads (api_portal.c):
GET /api/v1/auth/whoami and the admin's GET /api/v1/schedule.  The portal's screens are tested in a
real browser by tests/portal."""
import gzip
import os
import re
import subprocess

from conftest import BIN, H100, Api, Egsd, wait_for

CSP_MUST = ["default-src 'self'", "script-src 'self'", "object-src 'none'", "frame-ancestors 'none'"]


def get(egsd, path, headers=None, method="GET"):
    status, data, resp = Api(egsd.port).raw(method, path, None, headers)
    return status, data, resp


def test_index_assets_and_fallback(egsd):
    status, html, resp = get(egsd, "/")
    assert status == 200 and resp.getheader("Content-Type") == "text/html; charset=utf-8"
    assert resp.getheader("Cache-Control") == "no-cache"
    csp = resp.getheader("Content-Security-Policy")
    for part in CSP_MUST:
        assert part in csp, csp
    assert "unsafe-inline" not in csp and "http" not in csp
    assert resp.getheader("X-Content-Type-Options") == "nosniff"
    text = html.decode()
    assert "<script>" not in text and "<style" not in text, "no inline script or style (the CSP would block them)"
    assets = re.findall(r'(?:src|href)="(/assets/[^"]+)"', text)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets), assets
    for a in assets:
        status, body, r = get(egsd, a, {"Accept-Encoding": "gzip, deflate"})
        assert status == 200 and r.getheader("Cache-Control") == "public, max-age=31536000, immutable"
        assert r.getheader("Content-Encoding") == "gzip" and r.getheader("Vary") == "Accept-Encoding"
        plain_status, plain, r2 = get(egsd, a)
        assert plain_status == 200 and r2.getheader("Content-Encoding") is None
        assert gzip.decompress(body) == plain and len(body) < len(plain)
        want = "text/javascript; charset=utf-8" if a.endswith(".js") else "text/css; charset=utf-8"
        assert r.getheader("Content-Type") == want
    # gzip;q=0 means "not gzip"
    _, _, r = get(egsd, assets[0], {"Accept-Encoding": "gzip;q=0, identity"})
    assert r.getheader("Content-Encoding") is None
    # The portal's own routes survive a reload: unknown paths outside /api answer index.html...
    for path in ("/gprs/team-a", "/admin/schedule/worker-1", "/events?type=Warning"):
        status, body, r = get(egsd, path)
        assert status == 200 and body == html and r.getheader("Cache-Control") == "no-cache", path
    status, body, r = get(egsd, "/", method="HEAD")
    assert status == 200 and body == b""
    # ...but never for a missing file, the API, or a path that is not clean.
    for path in ("/assets/missing-ABC.js", "/favicon.ico", "/api/v1/nope", "/API/v1/gpr/list", "/.env",
                 "/a/../index.html", "/a//b", "/%2e%2e/etc/passwd"):
        status, body, r = get(egsd, path)
        assert status in (400, 404) and r.getheader("Content-Type") == "application/json", (path, status)
    status, _, _ = Api(egsd.port).raw("POST", "/gprs/x", b"{}")
    assert status == 404, "only GET and HEAD reach the portal"
    assert "/metrics" not in html.decode()
    status, _, r = get(egsd, "/healthz")
    assert status == 200 and r.getheader("Content-Type") == "application/json", "routes win over the portal"


def test_portal_dir_flag(tmp_path):
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><title>dev</title>")
    (site / "assets" / "app-1.js").write_text("console.log(1)")
    e = Egsd(str(tmp_path / "d"), extra=["--portal", str(site)]).start()
    try:
        status, body, r = get(e, "/")
        assert status == 200 and body == b"<!doctype html><title>dev</title>"
        (site / "index.html").write_text("<!doctype html><title>edited</title>")
        assert get(e, "/some/route")[1] == b"<!doctype html><title>edited</title>", "read at each request"
        status, body, r = get(e, "/assets/app-1.js", {"Accept-Encoding": "gzip"})
        assert status == 200 and body == b"console.log(1)" and r.getheader("Content-Type").startswith("text/javascript")
        assert "immutable" in r.getheader("Cache-Control")
    finally:
        e.stop()
    p = subprocess.run([os.path.join(BIN, "egsd"), "--portal", str(tmp_path / "nope"), "--data", str(tmp_path / "d2")],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "--portal" in p.stderr and "index.html" in p.stderr


def test_whoami(cluster):
    cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})
    ws = cluster.workspace("team-a", ["c1"])
    owner = cluster.egsd.api(cluster.key("Owner", ws, name="alice-key"))
    me = owner.get("/api/v1/auth/whoami")
    assert me["role"] == "Owner" and me["workspaceName"] == "team-a" and me["name"] == "alice-key"
    assert "apiKey" not in me and isinstance(me["serverTime"], int)
    assert cluster.admin.get("/api/v1/auth/whoami")["role"] == "Admin"
    status, doc = Api(cluster.egsd.port).call("GET", "/api/v1/auth/whoami")
    assert status == 401
    agent = cluster.egsd.api(cluster.admin.ok("POST", "/api/v1/clusters", {"clusterName": "c9"})["agentToken"])
    assert agent.call("GET", "/api/v1/auth/whoami")[0] == 403


def test_schedule_shows_holders_and_plan(cluster):
    cluster.add_cluster("worker-1", [("n1", H100), ("n2", H100)])
    cluster.workspace("a", ["worker-1"])
    cluster.workspace("b", ["worker-1"])
    cluster.workspace("c", ["worker-1"])
    big = cluster.gpr(gprName="big", sliceName="a", numberOfGPUs=8, numberOfGPUNodes=2, exitDuration="2h")
    cluster.wait_state(big, "Provisioned")
    nxt = cluster.gpr(gprName="next", sliceName="b", numberOfGPUs=8, numberOfGPUNodes=1, exitDuration="1h")
    last = cluster.gpr(gprName="last", sliceName="c", numberOfGPUs=8, numberOfGPUNodes=2, exitDuration="1h")
    d = cluster.admin.get("/api/v1/schedule?clusterName=worker-1")
    assert [n["gpuNodeName"] for n in d["nodes"]] == ["n1", "n2"] and d["queueLength"] == 2 and d["unplaced"] == []
    est = {g: cluster.status(g)["estimatedStartTime"] for g in (nxt, last)}
    for n in d["nodes"]:
        held = n["slots"][0]
        assert held["gprId"] == big and held["kind"] == "Provisioned" and held["end"] == cluster.status(big)["status"]["exitTimestamp"]
    planned = [(n["gpuNodeName"], s["gprId"], s["start"]) for n in d["nodes"] for s in n["slots"] if s["kind"] == "Planned"]
    # "next" takes one node when "big" exits; "last" needs both, so it follows "next" on both.
    assert (("n1", nxt, est[nxt]) in planned) and ("n1", last, est[last]) in planned and ("n2", last, est[last]) in planned
    assert len(planned) == 3 and est[last] > est[nxt]
    # Admin only; a cluster that does not exist is a 404 naming the field.
    ws_owner = cluster.egsd.api(cluster.key("Owner", "a"))
    assert ws_owner.call("GET", "/api/v1/schedule")[0] == 403
    assert cluster.egsd.api(cluster.key("Viewer")).call("GET", "/api/v1/schedule")[0] == 403
    status, doc = cluster.admin.call("GET", "/api/v1/schedule?clusterName=nope")
    assert status == 404 and doc["error"]["data"]["field"] == "clusterName"
    assert len(cluster.admin.get("/api/v1/schedule")["nodes"]) == 2
