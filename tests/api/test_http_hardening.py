"""Descriptor exhaustion (src/server/conn.c): egsd keeps serving /healthz and authenticated clients while
thousands of idle connections are open, closes the least recently active idle connection for a new one
at --max-connections, never the busy ones (an event stream), and when accept() runs out of descriptors
it pauses instead of spinning, with at most one log line a second."""
import os
import resource
import socket
import tempfile
import time

import pytest

from conftest import Egsd


def limit_nofile(n):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return pre


class LimitedEgsd(Egsd):
    """egsd started under `ulimit -n <nofile>`."""

    def __init__(self, data_dir, nofile, extra=()):
        super().__init__(data_dir, extra=extra)
        self.nofile = nofile

    def start(self):
        import subprocess
        real = subprocess.Popen

        def popen(*a, **kw):
            kw["preexec_fn"] = limit_nofile(self.nofile)
            return real(*a, **kw)
        subprocess.Popen = popen
        try:
            return super().start()
        finally:
            subprocess.Popen = real


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
    return socks


def served(e, deadline_s=15):
    """/healthz on a new connection and an authenticated call both answer within the deadline."""
    t0 = time.time()
    api = e.api()
    api.conn = None
    while time.time() - t0 < deadline_s:
        try:
            status, doc = api.call("GET", "/api/v1/projects")
            if status == 200:
                break
        except OSError:
            api.conn = None
            time.sleep(0.05)
    else:
        return False
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=deadline_s)
    c.request("GET", "/healthz")
    return c.getresponse().status == 200


@pytest.fixture
def raise_own_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 12000)
    if want < 11000:
        pytest.skip("the hard descriptor limit (%d) is too low for 10,000 connections" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_descriptors_run_out_egsd_pauses_and_keeps_serving(raise_own_limit):
    """ulimit -n 128 and --max-connections above it: accept() fails with EMFILE; egsd closes idle
    connections, pauses accepting, logs at most once a second, and does not spin."""
    with tempfile.TemporaryDirectory(prefix="egs-fd-") as tmp:
        e = LimitedEgsd(tmp, 128, extra=["--max-connections", "5000", "--quiet"]).start()
        try:
            t0 = time.time()
            socks = open_idle(e.port, 600)
            time.sleep(1.0)
            assert served(e), "healthz or an authenticated call was not served"
            cpu0 = cpu_seconds(e.proc.pid)
            time.sleep(1.0)
            assert cpu_seconds(e.proc.pid) - cpu0 < 0.5, "egsd spins while descriptors are exhausted"
            elapsed = time.time() - t0
            lines = [l for l in e.logs().splitlines() if "accept failed" in l]
            assert lines, "accept() never failed: the test did not exhaust descriptors"
            assert len(lines) <= elapsed + 2, (len(lines), elapsed)
            assert "failures=" in lines[0] and "Too many open files" in lines[0], lines[0]
            for s in socks:
                s.close()
            assert e.proc.poll() is None
        finally:
            e.stop()


def test_ten_thousand_idle_connections(raise_own_limit):
    with tempfile.TemporaryDirectory(prefix="egs-fd-") as tmp:
        e = LimitedEgsd(tmp, 11000, extra=["--quiet"]).start()
        try:
            socks = [socket.create_connection(("127.0.0.1", e.port), timeout=10) for _ in range(10000)]
            fds = lambda: len(os.listdir("/proc/%d/fd" % e.proc.pid))
            deadline = time.time() + 20
            while fds() < 10000 and time.time() < deadline:
                time.sleep(0.1)
            assert fds() >= 10000, "egsd holds %d descriptors: the idle connections were not all accepted" % fds()
            t0 = time.time()
            assert served(e, deadline_s=10)
            assert time.time() - t0 < 2, time.time() - t0
            for s in socks:
                s.close()
        finally:
            e.stop()


def test_max_connections_closes_oldest_idle_not_busy():
    with tempfile.TemporaryDirectory(prefix="egs-fd-") as tmp:
        e = Egsd(tmp, extra=["--max-connections", "32", "--quiet"]).start()
        try:
            stream = socket.create_connection(("127.0.0.1", e.port), timeout=5)
            stream.sendall(b"GET /api/v1/events/watch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           e.admin_key.encode() + b"\r\n\r\n")
            assert stream.recv(4096).startswith(b"HTTP/1.1 200"), "the event stream did not start"
            socks = []
            for _ in range(100):
                s = socket.create_connection(("127.0.0.1", e.port), timeout=5)
                socks.append(s)
                time.sleep(0.002)
            assert served(e)
            time.sleep(0.3)
            closed = 0
            for s in socks[:40]:
                s.settimeout(0.5)
                try:
                    closed += s.recv(1) == b""
                except (socket.timeout, ConnectionResetError):
                    pass
            assert closed >= 30, "only %d of the 40 oldest idle connections were closed" % closed
            # The busy stream survived every eviction: it still gets events.
            stream.settimeout(5)
            e.api().ok("POST", "/api/v1/clusters", {"clusterName": "after-evictions"})
            got = b""
            while b"after-evictions" not in got:
                b = stream.recv(65536)
                assert b, "the event stream was closed as idle"
                got += b
            for s in socks:
                s.close()
            stream.close()
        finally:
            e.stop()
