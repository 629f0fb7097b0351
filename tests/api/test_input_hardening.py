"""Smaller hardening items of issue 14: a duplicate field's wrong type is a 422 naming it (requestName
beside gprName), and the access log escapes what a client sends (no terminal escapes, no forged lines)."""
import socket
import time

from fakeagent import FakeAgent

BASE = {"sliceName": "w", "clusterName": "c1", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h"}


def gpr_names(cluster):
    return sorted(g["gprName"] for g in cluster.admin.get("/api/v1/gpr/list?sliceName=w")["items"])


def test_request_name_is_checked_beside_gpr_name(cluster):
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    for bad in (5, ["x"], {"a": 1}, True, "a/b"):
        status, doc = cluster.admin.call("POST", "/api/v1/gpr", dict(BASE, gprName="job", requestName=bad))
        assert status == 422 and doc["error"]["data"]["field"] == "requestName", (bad, status, doc)
    status, doc = cluster.admin.call("POST", "/api/v1/gpr", dict(BASE, gprName="job", requestName="other"))
    assert status == 422 and doc["error"]["data"]["field"] == "requestName", doc
    assert "differ" in doc["error"]["message"]
    assert gpr_names(cluster) == []
    cluster.admin.ok("POST", "/api/v1/gpr", dict(BASE, gprName="same", requestName="same"))
    cluster.admin.ok("POST", "/api/v1/gpr", dict(BASE, requestName="alias-only"))
    cluster.admin.ok("POST", "/api/v1/gpr", dict(BASE, gprName="plain", requestName=None))
    assert gpr_names(cluster) == ["alias-only", "plain", "same"]


def test_access_log_escapes_client_bytes(cluster):
    port = cluster.egsd.port
    for path in (b"/api/v1/%1b[31mred%0a2026-01-01T00:00:00Z%20level=info%20msg=forged", b"/a\x1b[31m",
                 b"/x\"y\\z", b"/\xff"):
        s = socket.create_connection(("127.0.0.1", port), timeout=3)
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while s.recv(65536):
            pass
        s.close()
    time.sleep(1.3)  # egsd flushes its log once a second
    with open(cluster.egsd.log_path, "rb") as f:
        log = f.read()
    assert b"\x1b" not in log and b"\xff" not in log
    assert all(32 <= c < 127 for line in log.split(b"\n") for c in line), "a control byte in the log"
    assert not any(line.startswith(b"2026-01-01T00:00:00Z") for line in log.split(b"\n")), "a forged log line"
    assert b"path=/api/v1/%1b[31mred%0a2026" in log  # percent-encoded bytes stay encoded
    assert b"path=/x\\x22y\\x5cz" in log
