"""TLS everywhere (egsd --tls-cert/--tls-key; src/server/tls.c, conn.c): a CA and certificates made here
with the openssl command line; egsd serves HTTPS, and each client (the Python SDK, egsctl, egs-agent)
verifies it against the CA file it is given, refuses a server its CA did not sign or whose certificate
does not name the host, and never falls back to plain HTTP.  The connection front's own writes (the
framing filter's refusals) travel inside TLS, a plain-HTTP client gets no answer, and the event stream
and the portal work over TLS."""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

from conftest import BIN, H100, Cluster, Egsd, wait_for
from fakeagent import EventStream
from test_http_framing import assert_envelope, parse_responses

import egs
from egs.exceptions import ServerUnreachable

EGSCTL = os.path.join(BIN, "egsctl")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=" + name, "-keyout", name + ".key", "-out", name + ".pem", cwd=d)
    return os.path.join(d, name + ".pem")


def make_cert(d, ca, name, san):
    """A server certificate for san ("IP:127.0.0.1,DNS:localhost") signed by ca; returns (cert, key)."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % san)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=" + name,
            "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-CAcreateserial",
            "-days", "2", "-extfile", name + ".ext", "-out", name + ".pem", cwd=d)
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")


@pytest.fixture(scope="module")
def env():
    """One HTTPS egsd with a real agent over TLS; the CA that signed it and another one."""
    with tempfile.TemporaryDirectory(prefix="egs-tls-") as tmp:
        pki = os.path.join(tmp, "pki")
        os.makedirs(pki)
        ca = make_ca(pki, "ca")
        other_ca = make_ca(pki, "other-ca")
        cert, key = make_cert(pki, "ca", "egsd", "IP:127.0.0.1,DNS:localhost")
        c = Cluster(tmp, tls=(cert, key, ca))
        try:
            yield {"cluster": c, "tmp": tmp, "pki": pki, "ca": ca, "other_ca": other_ca, "cert": cert, "key": key}
        finally:
            c.close()


def ctl(tmp, *args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("EGS_")}
    e["EGS_CONFIG"] = os.path.join(tmp, "egs", "config")
    e.update(env or {})
    return subprocess.run([EGSCTL] + list(args), capture_output=True, text=True, timeout=60, env=e)


def test_agent_over_tls_registers_and_a_gpr_is_provisioned(env):
    c = env["cluster"]
    assert c.egsd.url.startswith("https://")
    assert "scheme=https" in c.egsd.logs()
    c.add_cluster("worker-1", [("h100-1", H100)])  # the agent runs with --ca-file and registers
    ws = c.workspace("team-tls", ["worker-1"])
    gid = c.gpr(gprName="tls-job", sliceName=ws)
    st = c.wait_state(gid, "Provisioned")
    assert st["status"]["nodes"] == ["h100-1"], st["status"]
    # An agent that trusts another CA never registers, and says why in its log.
    other = c.add_cluster("worker-bad", [("bad-1", H100)], start=False, extra=["--ca-file", env["other_ca"]])
    other.start()  # the last --ca-file counts
    log = os.path.join(other.workdir, "agent.log")
    wait_for(lambda: "certificate" in open(log, errors="replace").read(), timeout=30, what="the agent's TLS error")
    other.stop()
    assert "bad-1" not in {n["gpuNodeName"] for n in c.admin.get("/api/v1/inventory/list")["items"]}


def test_sdk_verifies_with_ca_file(env):
    c = env["cluster"]
    c.workspace("team-sdk", ["worker-1"])
    s = egs.authenticate(c.egsd.url, c.egsd.admin_key, sdk_default=False, ca_file=env["ca"])
    assert "team-sdk" in [w.name for w in egs.list_workspaces(authenticated_session=s).workspaces]
    # The name in the URL is checked too: localhost is in the certificate.
    egs.authenticate("https://localhost:%d" % c.egsd.port, c.egsd.admin_key, sdk_default=False, ca_file=env["ca"])
    for bad in (env["other_ca"], None):  # another CA, and the system store
        with pytest.raises(ServerUnreachable) as e:
            egs.authenticate(c.egsd.url, c.egsd.admin_key, sdk_default=False, ca_file=bad)
        assert "CERTIFICATE_VERIFY_FAILED" in str(e.value), e.value


def test_egsctl_verifies_with_ca_file_or_the_context(env):
    c, tmp = env["cluster"], env["tmp"]
    key_file = os.path.join(c.egsd.data_dir, "admin.key")
    p = ctl(tmp, "get", "clusters", "--server", c.egsd.url, "--key-file", key_file, "--ca-file", env["ca"])
    assert p.returncode == 0 and "worker-1" in p.stdout, (p.returncode, p.stdout, p.stderr)
    # Without --ca-file the system store does not know the test CA: refused, exit 5, and it says why.
    p = ctl(tmp, "get", "clusters", "--server", c.egsd.url, "--key-file", key_file)
    assert p.returncode == 5, (p.returncode, p.stdout, p.stderr)
    assert "TLS failed" in p.stderr and "certificate" in p.stderr and "--ca-file" in p.stderr, p.stderr
    p = ctl(tmp, "get", "clusters", "--server", c.egsd.url, "--key-file", key_file, "--ca-file", env["other_ca"])
    assert p.returncode == 5 and "certificate" in p.stderr, p.stderr
    # $EGS_CA_FILE beside $EGS_SERVER and $EGS_API_KEY: a CI job with no config file; the flag wins.
    with open(key_file) as f:
        ci = {"EGS_SERVER": c.egsd.url, "EGS_API_KEY": f.readline().strip(), "EGS_CA_FILE": env["ca"]}
    p = ctl(tmp, "get", "clusters", env=ci)
    assert p.returncode == 0 and "worker-1" in p.stdout, (p.returncode, p.stdout, p.stderr)
    p = ctl(tmp, "get", "clusters", "--ca-file", env["other_ca"], env=ci)
    assert p.returncode == 5 and "certificate" in p.stderr, p.stderr
    p = ctl(tmp, "get", "clusters", env=dict(ci, EGS_CA_FILE=env["other_ca"]))
    assert p.returncode == 5 and "certificate" in p.stderr, p.stderr
    # An http:// URL to the TLS port does not work either (no answer), and nothing falls back.
    p = ctl(tmp, "get", "clusters", "--server", c.egsd.url.replace("https", "http"), "--key-file", key_file)
    assert p.returncode == 5, (p.returncode, p.stderr)
    # login --ca-file saves the CA, as an absolute path, in the context; later runs use it.
    rel = os.path.relpath(env["ca"])
    p = ctl(tmp, "login", c.egsd.url, "--key-file", key_file, "--name", "tls", "--ca-file", rel)
    assert p.returncode == 0, p.stderr
    view = json.loads(ctl(tmp, "config", "view", "-o", "json").stdout)
    assert view["contexts"][0]["certificate-authority"] == os.path.abspath(env["ca"]), view
    p = ctl(tmp, "get", "clusters")
    assert p.returncode == 0 and "worker-1" in p.stdout, p.stderr
    p = ctl(tmp, "get", "clusters", "--ca-file", env["other_ca"])  # the flag overrides the context
    assert p.returncode == 5, p.stderr
    p = ctl(tmp, "get", "clusters", "--ca-file", os.path.join(tmp, "missing.pem"))
    assert p.returncode == 2 and "missing.pem" in p.stderr, p.stderr


def test_sighup_reloads_the_certificate_for_new_connections(env):
    """A renewed certificate (here: signed by another CA) is served after SIGHUP without a restart; a
    connection opened before keeps working; files that do not load keep the previous pair."""
    pki, tmp = env["pki"], env["tmp"]
    d = os.path.join(tmp, "reload")
    os.makedirs(d)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    for src, dst in zip(make_cert(pki, "ca", "r1", "IP:127.0.0.1"), (cert, key)):
        shutil.copy(src, dst)
    e = Egsd(os.path.join(tmp, "reload-egsd"), tls=(cert, key, env["ca"])).start()
    try:
        def answers(ca):
            try:
                ctx = ssl.create_default_context(cafile=ca)
                with socket.create_connection(("127.0.0.1", e.port), timeout=10) as s:
                    with ctx.wrap_socket(s, server_hostname="127.0.0.1"):
                        return True
            except ssl.SSLError:
                return False
        old = ssl.create_default_context(cafile=env["ca"]).wrap_socket(
            socket.create_connection(("127.0.0.1", e.port), timeout=10), server_hostname="127.0.0.1")
        assert answers(env["ca"]) and not answers(env["other_ca"])
        for src, dst in zip(make_cert(pki, "other-ca", "r2", "IP:127.0.0.1"), (cert, key)):
            shutil.copy(src, dst)
        e.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS certificate reloaded" in e.logs(), what="the reload")
        assert answers(env["other_ca"]) and not answers(env["ca"])
        old.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # opened before: still served
        assert old.recv(65536).startswith(b"HTTP/1.1 200")
        old.close()
        with open(key, "w") as f:
            f.write("not a key\n")
        e.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "not reloaded" in e.logs(), what="the refused reload")
        assert answers(env["other_ca"]) and e.proc.poll() is None
    finally:
        e.stop()


def test_certificate_must_name_the_host(env):
    """A certificate from the right CA that names another host is refused by every client."""
    pki, tmp = env["pki"], env["tmp"]
    cert, key = make_cert(pki, "ca", "elsewhere", "DNS:elsewhere.example")
    e = Egsd(os.path.join(tmp, "egsd-elsewhere"), tls=(cert, key, env["ca"]))
    e.ssl_context.check_hostname = False  # the fixture's own readiness probe only
    e.start()
    try:
        with pytest.raises(ServerUnreachable) as err:
            egs.authenticate(e.url, e.admin_key, sdk_default=False, ca_file=env["ca"])
        assert "CERTIFICATE_VERIFY_FAILED" in str(err.value) or "match" in str(err.value), err.value
        p = ctl(tmp, "get", "clusters", "--server", e.url, "--key-file", os.path.join(e.data_dir, "admin.key"),
                "--ca-file", env["ca"])
        assert p.returncode == 5 and "127.0.0.1" in p.stderr and "TLS failed" in p.stderr, p.stderr
    finally:
        e.stop()


def egsd_cpu_s(e):
    with open("/proc/%d/stat" % e.proc.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_plain_http_to_the_tls_port_gets_no_answer(env):
    e = env["cluster"].egsd
    cpu0 = egsd_cpu_s(e)
    for req in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"POST /api/v1/auth HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{"):
        s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
        s.sendall(req)
        got = b""
        try:
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
        except ConnectionResetError:
            pass
        s.close()
        assert not got.startswith(b"HTTP/"), got[:100]  # at most a TLS alert, then the end
    time.sleep(1)
    assert egsd_cpu_s(e) - cpu0 < 0.5, "egsd keeps a core busy after plain HTTP on its TLS port"
    assert e.proc.poll() is None
    assert e.api().get("/healthz")["status"] == "ok"


def tls_socket(e):
    s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
    return e.ssl_context.wrap_socket(s, server_hostname="127.0.0.1")


def read_to_end(s):
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            return got
        got += b


def test_framing_refusal_travels_inside_tls_and_ends_the_connection(env):
    e = env["cluster"].egsd
    s = tls_socket(e)
    s.sendall(b"POST /api/v1/auth HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}" +
              b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    got = read_to_end(s)  # decrypted by the ssl module: the answer was TLS records, and then close_notify
    s.close()
    resps = parse_responses(got)
    assert len(resps) == 1, got[:300]  # the request after the refused one did not run
    doc = assert_envelope(resps[0], 400, "BAD_REQUEST")
    assert "Content-Length is given more than once" in doc["error"]["message"]
    # A request over a keep-alive TLS connection is answered in full, twice, on one connection.
    s = tls_socket(e)
    big = b"GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"
    s.sendall(big + big[:-2] + b"Connection: close\r\n\r\n")
    resps = parse_responses(read_to_end(s))
    s.close()
    assert [r[0] for r in resps] == [200, 200] and resps[0][2] == resps[1][2]
    assert len(resps[0][2]) > 16384 and json.loads(resps[0][2])["openapi"].startswith("3.")


def test_slow_reader_gets_large_answers_whole(env):
    """Output that the socket cannot take at once waits, and a TLS write that met a full socket is
    repeated as it was (OpenSSL's rule): about 3 MB of portal script to a reader with a small window."""
    e = env["cluster"].egsd
    status, page, _ = e.api().raw("GET", "/")
    script = re.search(rb'src="(/assets/[^"]+[.]js)"', page).group(1)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(30)
    raw.connect(("127.0.0.1", e.port))
    s = e.ssl_context.wrap_socket(raw, server_hostname="127.0.0.1")
    req = b"GET " + script + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    s.sendall(req * 39 + req[:-2] + b"Connection: close\r\n\r\n")
    time.sleep(0.5)  # egsd's writes meet a full socket meanwhile
    resps = parse_responses(read_to_end(s))
    s.close()
    assert [r[0] for r in resps] == [200] * 40
    assert len({r[2] for r in resps}) == 1 and len(resps[0][2]) > 16384


def test_event_stream_and_portal_over_tls(env):
    c = env["cluster"]
    token = c.admin.ok("POST", "/api/v1/auth", {"apiKey": c.egsd.admin_key})["token"]
    stream = EventStream(c.egsd.port, token, ssl_context=c.egsd.ssl_context)
    try:
        assert stream.status == 200 and "text/event-stream" in stream.headers
        gid = c.gpr(gprName="sse-over-tls", sliceName="team-tls")
        deadline = time.time() + 20
        while True:
            _, ev = stream.next(timeout=max(1, deadline - time.time()))
            if ev.get("involvedObject", {}).get("name") == gid:
                break
        assert ev["reason"] in ("Queued", "Provisioning", "Created"), ev
    finally:
        stream.close()
    status, body, resp = c.admin.raw("GET", "/")
    assert status == 200 and resp.getheader("Content-Type", "").startswith("text/html")
    assert re.search(rb"<script", body)


def test_https_url_to_a_plain_egsd_fails_without_falling_back(env):
    """An https:// URL never degrades to http: against a plain-HTTP egsd every client fails, and egsd
    never sees a request (its access log stays empty of them)."""
    tmp = env["tmp"]
    e = Egsd(os.path.join(tmp, "egsd-plain")).start()
    try:
        url = "https://127.0.0.1:%d" % e.port
        p = ctl(tmp, "get", "clusters", "--server", url, "--key-file", os.path.join(e.data_dir, "admin.key"),
                "--ca-file", env["ca"])
        assert p.returncode == 5 and "TLS failed" in p.stderr, p.stderr
        with pytest.raises(ServerUnreachable):
            egs.authenticate(url, e.admin_key, sdk_default=False, ca_file=env["ca"])
        time.sleep(1.2)  # egsd flushes its log once a second
        assert "path=/api/v1/auth" not in e.logs(), e.logs()[-500:]
        assert e.api().get("/healthz")["status"] == "ok"
    finally:
        e.stop()
