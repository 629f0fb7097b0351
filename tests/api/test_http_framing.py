"""HTTP/1.1 framing by RFC 9112 over raw sockets (src/server/frame.c, conn.c).

Each request whose length is ambiguous (two Content-Lengths, Content-Length with Transfer-Encoding, a
transfer coding other than chunked, a body on HEAD) or whose credentials are (two Authorization
headers) gets 400 in the JSON envelope, and the connection ends: nothing sent after it on that
connection runs.  Requests evhttp would refuse with its own HTML page (body or head over the bound,
malformed request line, unknown method) get the envelope too, and a client still sending a body it
was refused for reads the 413 instead of a broken pipe."""
import http.client
import json
import socket
import tempfile
import time

import pytest

from conftest import Egsd

ENVELOPE = {"statusCode", "status", "message", "data", "error"}


@pytest.fixture(scope="module")
def srv():
    with tempfile.TemporaryDirectory(prefix="egs-framing-") as tmp:
        e = Egsd(tmp).start()
        try:
            yield e
        finally:
            e.stop()


def parse_responses(data):
    """Splits the bytes of pipelined responses into [(status, headers dict, body bytes)]."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, "a truncated response: %r" % data[:200]
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        hdrs = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            hdrs[k.strip().lower().decode()] = v.strip().decode()
        n = int(hdrs.get("content-length", "0"))
        out.append((status, hdrs, rest[:n]))
        data = rest[n:]
    return out


def read_until_closed(s, timeout=20):
    """The bytes s receives until the peer closes it (or resets it)."""
    s.settimeout(timeout)
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        got += b
    return got


def exchange(port, data, timeout=3.0):
    """Sends data; returns (responses, closed): closed is True when egsd ended the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got, closed = b"", False
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not b:
                closed = True
                break
            got += b
    finally:
        s.close()
    return parse_responses(got), closed


def assert_envelope(resp, status, key):
    st, hdrs, body = resp
    assert st == status, (st, body)
    assert hdrs.get("content-type") == "application/json", hdrs
    doc = json.loads(body)
    assert set(doc) == ENVELOPE and doc["statusCode"] == status and doc["status"] == "Error", doc
    assert doc["error"]["errorKey"] == key, doc
    return doc


def project_names(srv):
    return {p["projectName"] if "projectName" in p else p.get("name") for p in srv.api().get("/api/v1/projects")["items"]}


def smuggle_target(srv, name):
    """An authenticated request that would create a project if egsd ran it."""
    body = json.dumps({"projectName": name}).encode()
    return (b"POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + srv.admin_key.encode() +
            b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


CASES = [
    # (id, head lines after the request line, body, expected message fragment)
    ("two-content-lengths", [b"Content-Length: 2", b"Content-Length: %(n)d"], b"{}", "Content-Length is given more than once"),
    ("same-content-length-twice", [b"Content-Length: 2", b"Content-Length: 2"], b"{}", "more than once"),
    ("content-length-and-chunked", [b"Content-Length: 2", b"Transfer-Encoding: chunked"], b"{}", "must not be given together"),
    ("chunked-and-content-length", [b"Transfer-Encoding: chunked", b"Content-Length: 2"], b"{}", "must not be given together"),
    ("unknown-transfer-coding", [b"Transfer-Encoding: gzip"], b"{}", "only transfer coding accepted is chunked"),
    ("gzip-then-chunked", [b"Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n", "only transfer coding"),
    ("two-transfer-encodings", [b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"], b"0\r\n\r\n", "only transfer coding"),
    ("content-length-not-a-number", [b"Content-Length: 2x"], b"{}", "decimal number"),
    ("content-length-negative", [b"Content-Length: -1"], b"{}", "decimal number"),
    ("content-length-list", [b"Content-Length: 2, 2"], b"{}", "decimal number"),
    ("space-before-colon", [b"Content-Length : 2"], b"{}", "header line is malformed"),
    ("obsolete-line-folding", [b"X-A: a", b" folded"], b"", "header line is malformed"),
    ("header-without-colon", [b"Bad Header Line"], b"", "header line is malformed"),
    ("two-hosts", [b"Host: y"], b"", "Host is given more than once"),
]


@pytest.mark.parametrize("case_id,lines,body,fragment", CASES, ids=[c[0] for c in CASES])
def test_ambiguous_framing_is_refused_and_nothing_after_it_runs(srv, case_id, lines, body, fragment):
    """The bytes after the request (a smuggled authenticated write) must not run, and the connection ends."""
    name = "smuggled-" + case_id
    smuggled = smuggle_target(srv, name)
    n = len(body) + len(smuggled)
    head = b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\n" + b"".join((l % {b"n": n} if b"%(n)" in l else l) + b"\r\n"
                                                                   for l in lines) + b"\r\n"
    resps, closed = exchange(srv.port, head + body + smuggled)
    assert len(resps) == 1, [r[0] for r in resps]
    doc = assert_envelope(resps[0], 400, "BAD_REQUEST")
    assert fragment in doc["error"]["message"], doc
    assert closed, "the connection must end after a framing error"
    assert name not in project_names(srv)


def test_a_byte_that_cannot_start_a_method_is_refused_at_once(srv):
    """A TLS ClientHello sent to the plain port has no line end to wait for: the first byte that cannot
    be in a method token refuses it (the client fails at once instead of at its timeout)."""
    t0 = time.time()
    resps, closed = exchange(srv.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", timeout=10)
    assert len(resps) == 1 and closed
    assert_envelope(resps[0], 400, "BAD_REQUEST")
    assert time.time() - t0 < 5
    # A request line that arrives in pieces still waits for the rest.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        for piece in (b"\r\nGE", b"T", b" /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
            s.sendall(piece)
            time.sleep(0.05)
        got = read_until_closed(s)
    finally:
        s.close()
    assert parse_responses(got)[0][0] == 200


def test_two_authorization_headers_refused(srv):
    key = srv.admin_key.encode()
    for first in (b"Bearer " + key, b"Bearer not-a-key"):  # the same key twice is refused too
        req = (b"GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: " + first +
               b"\r\nAuthorization: Bearer " + key + b"\r\n\r\n")
        resps, closed = exchange(srv.port, req)
        assert len(resps) == 1 and closed
        doc = assert_envelope(resps[0], 400, "BAD_REQUEST")
        assert "Authorization is given more than once" in doc["error"]["message"]


def test_head_with_body_refused(srv):
    resps, closed = exchange(srv.port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nGET /")
    assert len(resps) == 1 and closed
    assert resps[0][0] == 400  # a HEAD answer has no body to carry the envelope


def test_transfer_encoding_on_http10_refused(srv):
    resps, closed = exchange(srv.port, b"POST /api/v1/auth HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert len(resps) == 1 and closed
    assert_envelope(resps[0], 400, "BAD_REQUEST")


def chunked(body, sizes):
    out, i = b"", 0
    for n in sizes:
        out += b"%x\r\n" % n + body[i:i + n] + b"\r\n"
        i += n
    return out + b"0\r\n\r\n"


def test_chunked_body_is_read_whole(srv):
    """A valid chunked body reaches the handler as one body (here: a real key gets a token)."""
    body = json.dumps({"apiKey": srv.admin_key}).encode()
    req = (b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
           chunked(body, [3, 10, len(body) - 13]))
    resps, closed = exchange(srv.port, req + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert [r[0] for r in resps] == [200, 200], resps
    assert json.loads(resps[0][2])["data"]["token"]


@pytest.mark.parametrize("bad", [b"zz\r\nxx\r\n0\r\n\r\n", b"3\r\nabcX\r\n0\r\n\r\n", b"-1\r\n\r\n",
                                 b"1" * 2000 + b"\r\n"], ids=["not-hex", "no-crlf-after-data", "negative", "huge-size-line"])
def test_malformed_chunked_body_refused(srv, bad):
    req = b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + bad
    resps, closed = exchange(srv.port, req)
    assert len(resps) == 1 and closed
    assert resps[0][0] in (400, 413)
    assert_envelope(resps[0], resps[0][0], "BAD_REQUEST" if resps[0][0] == 400 else "REQUEST_TOO_LARGE")


def test_chunked_body_over_limit_refused(srv):
    req = b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"100000\r\n" + b"a" * 0x100000
    resps, closed = exchange(srv.port, req + b"\r\n1\r\na\r\n0\r\n\r\n")
    assert len(resps) == 1 and closed
    assert_envelope(resps[0], 413, "REQUEST_TOO_LARGE")


def test_pipelined_requests_answered_in_order_until_the_refused_one(srv):
    ok = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    bad = b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}"
    resps, closed = exchange(srv.port, ok + ok + bad + ok)
    assert [r[0] for r in resps] == [200, 200, 400] and closed


# ---- issue 15 item 4: what evhttp refused with an HTML page gets the envelope ----

@pytest.mark.parametrize("line,status,key", [
    (b"GARBAGE\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /healthz\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET  /healthz HTTP/1.1\r\n\r\n", 400, "BAD_REQUEST"),
    (b"GET /a\x1b[31m HTTP/1.1\r\nHost: x\r\n\r\n", 400, "BAD_REQUEST"),
    (b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", 405, "METHOD_NOT_ALLOWED"),
    (b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n", 405, "METHOD_NOT_ALLOWED"),
    (b"GET / HTTP/1.1\r\nX-A: \x01\r\n\r\n", 400, "BAD_REQUEST"),
], ids=["garbage", "version", "no-version", "double-space", "escape-in-path", "trace", "unknown-method", "control-in-header"])
def test_malformed_request_gets_the_envelope(srv, line, status, key):
    resps, closed = exchange(srv.port, line)
    assert len(resps) == 1 and closed
    assert_envelope(resps[0], status, key)


def test_head_over_bound_gets_413_envelope(srv):
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    resps, closed = exchange(srv.port, req)
    assert len(resps) == 1 and closed
    assert_envelope(resps[0], 413, "REQUEST_TOO_LARGE")


@pytest.mark.parametrize("size", [1024 * 1024 + 1, 6 * 1024 * 1024])
def test_client_still_sending_a_large_body_reads_the_413(srv, size):
    """http.client sends the whole body before it reads: it must see the status, not a broken pipe."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    c.request("POST", "/api/v1/auth", body=b"a" * size, headers={"Content-Type": "application/json"})
    resp = c.getresponse()
    doc = json.loads(resp.read())
    assert resp.status == 413 and doc["error"]["errorKey"] == "REQUEST_TOO_LARGE", doc
    c.close()


def test_server_still_serves_after_all_of_it(srv):
    assert srv.api().get("/api/v1/projects") is not None
    assert srv.proc.poll() is None


def test_the_smuggled_request_alone_does_run(srv):
    """Control for the cases above: the same bytes sent as a request of their own create the project."""
    resps, _ = exchange(srv.port, smuggle_target(srv, "control-project"), timeout=1)
    assert resps[0][0] == 200, resps
    assert "control-project" in project_names(srv)
