"""The commit's fsync overlapped with the next turn (src/server/durable.c, docs/internals/http.md): egsd
commits a turn with SQLite's synchronous=NORMAL and fdatasyncs the WAL on a thread while it reads more
requests.  No reply may leave before the fsync that covers what it saw.

The fsync is slowed with EGS_TEST_FSYNC_DELAY_MS (the thread sleeps that long before each fdatasync) so
that "before" is wide enough to observe; EGS_TEST_FSYNC_FAIL_IF_EXISTS makes an fdatasync fail (EIO)
while the named file exists.  Both are read when the store opens; SQLite only (PostgreSQL's commits are
durable when COMMIT returns)."""
import http.client
import json
import os
import threading
import time

import pytest

from conftest import H100, Egsd, sqlite_only, wait_for

pytestmark = sqlite_only
DELAY = 1.0  # seconds each fdatasync is held back


@pytest.fixture
def knobs():
    """Sets environment variables for the egsd processes the test starts, and restores them."""
    saved = {}

    def put(name, value):
        saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    yield put
    for name, old in saved.items():
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def slow_egsd(tmpdir_path, knobs, extra_env=()):
    knobs("EGS_TEST_FSYNC_DELAY_MS", str(int(DELAY * 1000)))
    for k, v in extra_env:
        knobs(k, v)
    return cluster_egsd(tmpdir_path)


def cluster_egsd(tmpdir_path):
    """egsd with cluster c1 of two 8-GPU nodes and workspace w (its fsyncs as the environment sets them)."""
    egsd = Egsd(os.path.join(tmpdir_path, "egsd")).start()
    admin = egsd.api()
    token = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    egsd.api(token).ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
        dict(name="n%d" % i, **H100) for i in range(2)]})
    admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["c1"], "namespaces": ["w"]})
    return egsd


def kill_mid_fsync(egsd, pool, stop, acked, lock, what):
    """Starts the threads of pool; once acked() (read under lock) holds 8 acknowledgement times, kills egsd
    with SIGKILL half-way through the fsync held after the last of them; then sets stop and joins pool."""
    for th in pool:
        th.start()
    try:
        wait_for(lambda: len(acked()) >= 8, timeout=60, interval=0.01, what=what)
        with lock:
            last = max(acked())
        time.sleep(max(0.0, last + DELAY / 2 - time.monotonic()))
        egsd.proc.kill()
    finally:
        stop.set()
        for th in pool:
            th.join(30)
        egsd.stop()


def gpr(name):
    return {"gprName": name, "sliceName": "w", "numberOfGPUNodes": 1, "numberOfGPUs": 1, "exitDuration": "1h"}


def post(port, key, body, timeout=30):
    """One create on a fresh connection: (status, doc), or (None, None) when the connection died."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/api/v1/gpr", json.dumps(body),
                     {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    except (OSError, http.client.HTTPException):
        return None, None
    finally:
        conn.close()


def test_replies_wait_for_the_fsync_that_covers_them(tmpdir_path, knobs):
    egsd = slow_egsd(tmpdir_path, knobs)
    admin = egsd.api()
    try:
        # Nothing undurable: a read goes at once, not after a (delayed) fsync.
        t = time.monotonic()
        assert admin.get("/api/v1/gpr/list?sliceName=w")["items"] == []
        assert time.monotonic() - t < DELAY * 0.9

        done = {}

        def create():
            t0 = time.monotonic()
            done["status"], done["doc"] = post(egsd.port, egsd.admin_key, gpr("slow"))
            done["sent"], done["answered"] = t0, time.monotonic()

        th = threading.Thread(target=create)
        th.start()
        # Reads while the create is committed but its fsync is held back: one that shows the new GPR
        # must not come back before that fsync either.  (A read in the create's own turn waits with
        # it anyway; the pause lets the commit come first on all but a very slow machine.)
        time.sleep(DELAY / 4)
        seen_at = None
        while th.is_alive() and seen_at is None:
            items = admin.get("/api/v1/gpr/list?sliceName=w")["items"]
            if items:
                seen_at = time.monotonic()
        th.join(30)
        assert done["status"] == 200, done
        assert done["answered"] - done["sent"] >= DELAY * 0.95, "a create was acknowledged before its fsync"
        if seen_at is not None:  # the read saw the commit before the create's reply came
            assert seen_at - done["sent"] >= DELAY * 0.95, "a read showed a change not yet durable"
        # The status read of that GPR: durable by now, so at once.
        t = time.monotonic()
        assert admin.get("/api/v1/gpr?gprId=" + done["doc"]["data"]["gprId"])["gprName"] == "slow"
        assert time.monotonic() - t < DELAY * 0.9
    finally:
        egsd.stop()


def test_kill9_while_fsyncs_are_held_back_loses_only_unacknowledged(tmpdir_path, knobs):
    egsd = slow_egsd(tmpdir_path, knobs)
    key, acked, lock, stop = egsd.admin_key, {}, threading.Lock(), threading.Event()

    def worker(t):
        i = 0
        while not stop.is_set():
            status, doc = post(egsd.port, key, gpr("k%d-%d" % (t, i)))
            if status is None:
                return  # egsd died under us: never acknowledged
            assert status == 200, doc
            with lock:
                acked[doc["data"]["gprId"]] = time.monotonic()
            i += 1

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    # Half-way through a held fsync: the clients' next creates are committed, not yet acknowledged.
    kill_mid_fsync(egsd, pool, stop, lambda: list(acked.values()), lock, "a first fsync's acknowledgements")
    again = Egsd(egsd.data_dir).start()
    try:
        stored = {g["gprId"] for g in again.api().get("/api/v1/gpr/list?sliceName=w")["items"]}
        missing = [g for g in acked if g not in stored]
        assert not missing, "%d acknowledged GPRs lost" % len(missing)
        # The kill came while creates sat committed in the WAL without a reply: they are on disk (a kill
        # -9 keeps the page cache) and none of them was acknowledged before its fsync.
        assert len(stored) > len(acked), (len(stored), len(acked))
    finally:
        again.stop()


def test_sigterm_drains_the_last_fsync_and_its_replies(tmpdir_path, knobs):
    egsd = slow_egsd(tmpdir_path, knobs)
    done = {}
    th = threading.Thread(target=lambda: done.update(r=post(egsd.port, egsd.admin_key, gpr("last"))))
    th.start()
    time.sleep(DELAY / 3)  # committed by now (a loaded machine may be slower: then it is refused or drained)
    egsd.proc.terminate()
    assert egsd.proc.wait(20) == 0
    th.join(30)
    egsd.stop()
    status, doc = done["r"]
    again = Egsd(egsd.data_dir).start()
    try:
        names = [g["gprName"] for g in again.api().get("/api/v1/gpr/list?sliceName=w")["items"]]
        if status == 200:
            assert names == ["last"], names
        else:
            assert status is None or status >= 500, (status, doc)
    finally:
        again.stop()


def test_failed_fsync_exits_without_acknowledging(tmpdir_path, knobs):
    flag = os.path.join(tmpdir_path, "fsync-fails")
    egsd = slow_egsd(tmpdir_path, knobs, [("EGS_TEST_FSYNC_FAIL_IF_EXISTS", flag)])
    try:
        open(flag, "w").close()
        status, doc = post(egsd.port, egsd.admin_key, gpr("lost"))
        assert status is None, (status, doc)  # no reply at all, certainly no 2xx
        assert egsd.proc.wait(20) == 70
        assert "fsync of the store failed" in egsd.logs()
    finally:
        egsd.stop()
    os.unlink(flag)
    again = Egsd(egsd.data_dir).start()  # the restart loads what is on disk and serves
    try:
        assert again.api().get("/healthz")["status"] == "ok"
        again.api().ok("POST", "/api/v1/gpr", gpr("after"))
    finally:
        again.stop()
