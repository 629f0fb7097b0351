"""egsd's own HTTP/1.1 front (src/server/conn.c, conn_reply.c) over raw sockets: pipelined requests
sent in arbitrary pieces are each answered once and in order, even when a later answer is ready first
(a create's answer waits for its commit, the reads behind it do not overtake it); keep-alive and
close as HTTP/1.0 and 1.1 define them; HEAD has no body; a head that trickles in is cut off
(slowloris); a client that pipelines without reading cannot make egsd buffer without bound."""
import http.client
import json
import os
import threading
import random
import signal
import socket
import tempfile
import time

import pytest

from conftest import Egsd, wait_for
from test_http_framing import parse_responses, read_until_closed


@pytest.fixture(scope="module")
def srv():
    os.environ["EGS_TEST_HEAD_TIMEOUT_S"] = "2"
    try:
        with tempfile.TemporaryDirectory(prefix="egs-front-") as tmp:
            e = Egsd(tmp).start()
            try:
                yield e
            finally:
                e.stop()
    finally:
        del os.environ["EGS_TEST_HEAD_TIMEOUT_S"]


def read_n(s, n, timeout=20):
    """Reads until n complete responses arrived; returns them."""
    s.settimeout(timeout)
    got = b""
    while True:
        try:
            resps = parse_responses(got)
            if len(resps) >= n:
                return resps
        except (AssertionError, ValueError, IndexError):
            pass
        b = s.recv(65536)
        assert b, "egsd closed the connection after %r" % got[-200:]
        got += b


def project_req(key, name):
    body = json.dumps({"projectName": name}).encode()
    return (b"POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode() +
            b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def list_req(key):
    return b"GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode() + b"\r\n\r\n"


def test_pipelined_in_random_pieces_answered_once_in_order(srv):
    """Writes and reads pipelined on one connection, sent in random pieces (1-40 bytes): each gets one
    answer, in request order, and every read sees the writes sent before it (the answer of a read
    behind a create waits for the create's, which waits for its commit)."""
    rnd = random.Random(16)
    reqs, names = [], []
    for i in range(12):
        name = "front-%d" % i
        names.append(name)
        reqs.append(project_req(srv.admin_key, name))
        reqs.append(list_req(srv.admin_key))
        reqs.append(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b"".join(reqs)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    at = 0
    while at < len(data):
        n = rnd.randint(1, 40)
        s.sendall(data[at:at + n])
        at += n
        if rnd.random() < 0.05:
            time.sleep(0.01)
    resps = read_n(s, len(reqs))
    s.close()
    assert len(resps) == len(reqs)
    for i in range(12):
        create, listing, health = resps[3 * i:3 * i + 3]
        assert create[0] == 200, create
        doc = json.loads(create[2])
        assert doc["statusCode"] == 200 and doc["data"], doc
        assert listing[0] == 200
        shown = {p.get("projectName", p.get("name")) for p in json.loads(listing[2])["data"]["items"]}
        assert set(names[:i + 1]) <= shown, (i, shown)  # this read came after these creates
        if i + 1 < 12:
            assert names[i + 1] not in shown, (i, shown)  # ... and before this one
        assert health[0] == 200, health


def test_http10_and_close_semantics(srv):
    # HTTP/1.0 without keep-alive: the answer, then the end of the connection
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
    got = read_until_closed(s)
    assert got.startswith(b"HTTP/1.0 200 "), got[:100]
    head, _, body = got.partition(b"\r\n\r\n")
    assert json.loads(body)  # the whole body came before the end
    s.close()
    # HTTP/1.0 with keep-alive: kept, and said so
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    (st, hdrs, _), = read_n(s, 1)
    assert st == 200 and hdrs.get("connection") == "keep-alive" and "content-length" in hdrs, hdrs
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert read_n(s, 1)[0][0] == 200
    s.close()
    # HTTP/1.1 Connection: close: said so, then closed; what follows it is not run
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + project_req(srv.admin_key, "after-close"))
    resps = parse_responses(read_until_closed(s))
    assert len(resps) == 1 and resps[0][1].get("connection") == "close", resps
    s.close()
    assert "after-close" not in {p.get("projectName", p.get("name"))
                                 for p in srv.api().get("/api/v1/projects")["items"]}


def test_head_has_no_body(srv):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = read_until_closed(s)
    s.close()
    first, _, rest = got.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 "), got[:80]
    assert rest.startswith(b"HTTP/1.1 200"), rest[:80]  # no body between the two answers


def test_slow_head_is_cut_off_complete_idle_is_kept(srv):
    """A head trickling in a byte at a time is closed after the (test-shortened, 2 s) bound; a
    keep-alive connection idle between requests is not."""
    idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_n(idle, 1)[0][0] == 200
    slow = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    t0, closed = time.time(), False
    for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200:
        try:
            slow.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        slow.settimeout(0.2)
        try:
            if slow.recv(1) == b"":
                closed = True
                break
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed = True
            break
        if time.time() - t0 > 30:
            break
    assert closed, "a head trickling for %.1f s was not cut off" % (time.time() - t0)
    assert time.time() - t0 < 15
    slow.close()
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_n(idle, 1)[0][0] == 200, "the idle keep-alive connection was closed"
    idle.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def answered_openapi(srv):
    import re
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % srv.port,
                                 headers={"Authorization": "Bearer " + srv.admin_key})
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    m = re.search(r'egs_api_requests_total\{method="GET",route="/api/v1/openapi.json",code="2xx"\} (\d+)', text)
    return int(m.group(1)) if m else 0


def test_pipelining_without_reading_is_bounded(srv):
    """A client that pipelines 3,000 requests for the OpenAPI document (each answer tens of KiB) and
    reads nothing: egsd stops reading from it once 1 MiB of answers waits (plus what the kernel's
    socket buffers hold), so it neither answers them all nor holds their answers, and it keeps serving
    others meanwhile."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    c.request("GET", "/api/v1/openapi.json")
    size = len(c.getresponse().read())
    c.close()
    assert size > 40 * 1024, size  # 3,000 answers would be over 120 MiB
    before = answered_openapi(srv)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    s.setblocking(False)
    data = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 3000
    sent, t0 = 0, time.time()
    while sent < len(data) and time.time() - t0 < 5:
        try:
            sent += s.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.05)
    assert sent == len(data)  # the kernel took the requests: egsd chose not to answer them
    time.sleep(2)  # egsd answers what it read, then waits for the client
    assert srv.api().get("/api/v1/projects") is not None  # others are served
    answered = answered_openapi(srv) - before
    # 1 MiB of output plus the sockets' buffers (a few MiB on loopback): some dozens of answers
    assert answered < 1000, "egsd answered %d requests whose answers nobody reads" % answered
    s.close()


def test_answers_held_for_the_disk_reach_fresh_connections():
    """Regression (found by a stress run): an answer that waited for its fsync and then for its
    connection's write turn must never be dropped by the once-a-second sweep.  640 creates on fresh
    connections from 16 threads while every fsync takes 50 ms: each gets its 200."""
    os.environ["EGS_TEST_FSYNC_DELAY_MS"] = "50"
    try:
        with tempfile.TemporaryDirectory(prefix="egs-front-held-") as tmp:
            e = Egsd(tmp).start()
            errors = []

            def creates(k):
                for i in range(40):
                    c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=60)
                    try:
                        c.request("POST", "/api/v1/projects", body=json.dumps({"projectName": "p-%d-%d" % (k, i)}),
                                  headers={"Authorization": "Bearer " + e.admin_key,
                                           "Content-Type": "application/json"})
                        r = c.getresponse()
                        r.read()
                        if r.status != 200:
                            errors.append(r.status)
                    except (OSError, http.client.HTTPException) as ex:
                        errors.append(repr(ex))
                    finally:
                        c.close()
            try:
                threads = [threading.Thread(target=creates, args=(k,)) for k in range(16)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                e.stop()
            assert errors == [], errors[:5]
    finally:
        del os.environ["EGS_TEST_FSYNC_DELAY_MS"]


def stopped(pid):
    """Whether process pid is stopped by a signal (state T in /proc/pid/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_long_pipeline_does_not_hold_up_another_connection():
    """Fairness between connections: one client pipelines 32 reads and another sends one read, both
    ready in the same loop turn (egsd is stopped while they are sent).  egsd answers 8 of the long
    pipeline, then the other connection's read, then the rest: the access log's order shows the
    single read answered after at most 8 of the 32, not after all of them."""
    with tempfile.TemporaryDirectory(prefix="egs-front-fair-") as tmp:
        e = Egsd(tmp).start()
        try:
            key = e.admin_key
            auth = b"Host: x\r\nAuthorization: Bearer " + key.encode() + b"\r\n\r\n"
            a = socket.create_connection(("127.0.0.1", e.port), timeout=20)
            b = socket.create_connection(("127.0.0.1", e.port), timeout=20)
            for s in (a, b):  # both accepted and kept alive before the test
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_n(s, 1)[0][0] == 200
            e.proc.send_signal(signal.SIGSTOP)
            # Stopped before anything is sent: a loaded machine may run egsd's epoll_wait once more
            # between the signal and its stop, and a turn that saw only the pipeline had no other
            # connection to be fair to (this test failed so, once, with both API suites running).
            wait_for(lambda: stopped(e.proc.pid), timeout=10, interval=0.01, what="egsd stopped")
            try:
                a.sendall((b"GET /api/v1/projects HTTP/1.1\r\n" + auth) * 32)
                b.sendall(b"GET /api/v1/clusters HTTP/1.1\r\n" + auth)
                time.sleep(0.2)  # delivered to egsd's sockets (egsd is stopped: nothing is answered yet)
            finally:
                e.proc.send_signal(signal.SIGCONT)
            assert [r[0] for r in read_n(a, 32)] == [200] * 32
            assert [r[0] for r in read_n(b, 1)] == [200]
            a.close()
            b.close()
        finally:
            e.stop()  # flushes the access log
        paths = [line.split(" path=")[1].split()[0] for line in open(e.log_path)
                 if " msg=request " in line and ("path=/api/v1/projects " in line or "path=/api/v1/clusters " in line)]
        assert sorted(set(paths)) == ["/api/v1/clusters", "/api/v1/projects"], paths
        assert len(paths) == 33, paths
        before = paths.index("/api/v1/clusters")
        assert before <= 8, "the single read was answered after %d of the pipeline's 32" % before
