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


def test_query_text_is_checked_and_named(cluster):
    """The query layer (http.c): a value with a control character, DEL or bytes that are not UTF-8
    (a stray byte, an overlong form, a surrogate) is a 422 naming its key, a key given twice is one
    too; valid UTF-8 passes on to the handler. The check's printable-ASCII shortcut must not change
    which."""
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    path = "/api/v1/gpr/list?sliceName=w&"
    for q, field in (("status=Queued%01", "status"), ("status=Queued%7F", "status"), ("status=%FFx", "status"),
                     ("status=%C0%AF", "status"), ("status=%ED%A0%80", "status"), ("limit=1&limit=2", "limit")):
        status, doc = cluster.admin.call("GET", path + q)
        assert status == 422 and doc["error"]["data"]["field"] == field, (q, status, doc)
        assert ("more than once" if q.startswith("limit") else "UTF-8 text") in doc["error"]["message"], doc
    # Printable ASCII and valid UTF-8 (here an unknown status) reach the handler, which words its own answer.
    for q in ("status=Queued", "status=Qu%C3%A9ued", "status=%F0%9F%98%80"):
        status, doc = cluster.admin.call("GET", path + q)
        assert status == 200 if q == "status=Queued" else (status == 422 and doc["error"]["data"]["field"] == "status"), (q, status, doc)
        assert status == 200 or "UTF-8 text" not in doc["error"]["message"], doc
