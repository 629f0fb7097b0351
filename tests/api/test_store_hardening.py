"""Disk full or an I/O error on commit (src/server/reload.c): the writes of that turn get 507 STORAGE_FULL in
the envelope, nothing of them stays in memory, reads keep working, writes succeed again once space is back
without a restart, and egsd starts on a full disk and serves reads.

The failure is injected through EGS_STORE_FAIL_IF_EXISTS (every commit fails as on a full disk while the
named file exists, after writing its rows and before COMMIT: docs/internals/store.md), and, where this
machine lets the test mount one, on a real full tmpfs."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import Cluster, sqlite_only
from fakeagent import FakeAgent

ENVELOPE = {"statusCode", "status", "message", "data", "error"}
GPR = {"sliceName": "w", "clusterName": "c1", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h"}


def refused_full(status, doc):
    assert status == 507, (status, doc)
    assert set(doc) == ENVELOPE and doc["statusCode"] == 507 and doc["error"]["errorKey"] == "STORAGE_FULL", doc


def names(c):
    return sorted(g["gprName"] for g in c.admin.get("/api/v1/gpr/list?sliceName=w")["items"])


def workspaces(c):
    return sorted(w["name"] for w in c.admin.get("/api/v1/slice-workspace/list")["workspaces"])


@pytest.fixture
def failing(tmpdir_path):
    """A cluster whose egsd (and every restart of it in the test) has the failure injection armed."""
    flag = os.path.join(tmpdir_path, "store-full")
    old = os.environ.get("EGS_STORE_FAIL_IF_EXISTS")
    os.environ["EGS_STORE_FAIL_IF_EXISTS"] = flag
    c = None
    try:
        c = Cluster(tmpdir_path)
        c.flag = flag
        yield c
    finally:
        if c:
            c.close()
        if old is None:
            del os.environ["EGS_STORE_FAIL_IF_EXISTS"]
        else:
            os.environ["EGS_STORE_FAIL_IF_EXISTS"] = old


def test_failed_commit_refuses_the_turn_and_keeps_serving(failing):
    c = failing
    agent = FakeAgent(c, "c1", ["n1", "n2"])
    c.workspace("w", ["c1"])
    c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="before"))
    gid = c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="queued"))["gprId"]  # waits: one at a time per workspace
    prio = c.admin.get("/api/v1/gpr?gprId=" + gid)["priority"]
    open(c.flag, "w").close()
    t0 = time.time()
    refused_full(*c.admin.call("POST", "/api/v1/gpr", dict(GPR, gprName="during")))
    refused_full(*c.admin.call("POST", "/api/v1/slice-workspace", {"workspaceName": "v", "clusters": ["c1"],
                                                                   "namespaces": ["v-ns"]}))
    refused_full(*c.admin.call("PUT", "/api/v1/gpr", {"gprId": gid, "priority": 250}))
    # Reads keep working and show nothing of the refused writes (nothing half-applied in memory).
    assert names(c) == ["before", "queued"] and workspaces(c) == ["w"]
    assert c.admin.get("/api/v1/gpr?gprId=" + gid)["priority"] == prio != 250
    assert c.admin.get("/healthz")["status"] == "ok"
    agent.heartbeat()  # an agent's call during the failure does not kill egsd either
    time.sleep(1.2)
    assert c.egsd.proc.poll() is None
    lines = [l for l in c.egsd.logs().splitlines() if "store commit failed" in l]
    assert lines and len(lines) <= time.time() - t0 + 2, lines
    # Space is back: writes succeed again without a restart.
    os.unlink(c.flag)
    c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="after"))
    c.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "priority": 250})
    assert names(c) == ["after", "before", "queued"]
    c.egsd.stop()
    c.egsd.start()
    assert names(c) == ["after", "before", "queued"]
    assert c.admin.get("/api/v1/gpr?gprId=" + gid)["priority"] == 250


def test_egsd_starts_on_a_full_store_and_serves_reads(failing):
    c = failing
    FakeAgent(c, "c1", ["n1"])
    c.workspace("w", ["c1"])
    c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="kept"))
    c.egsd.stop()
    open(c.flag, "w").close()
    c.egsd.start()
    assert names(c) == ["kept"]
    refused_full(*c.admin.call("POST", "/api/v1/gpr", dict(GPR, gprName="refused")))
    assert names(c) == ["kept"]
    os.unlink(c.flag)
    c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="later"))
    assert names(c) == ["kept", "later"]


@sqlite_only
def test_a_real_full_disk():
    """The same on a 4 MiB tmpfs filled up with a file (skipped where mount is not allowed)."""
    mnt = tempfile.mkdtemp(prefix="egs-tmpfs-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt], capture_output=True).returncode:
        os.rmdir(mnt)
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        c = Cluster(mnt)
        try:
            FakeAgent(c, "c1", ["n1"])
            c.workspace("w", ["c1"])
            c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="first"))
            filler = os.path.join(mnt, "filler")
            with open(filler, "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            statuses = set()
            for i in range(300):  # the WAL may still have room from before: write until it is full
                status, doc = c.admin.call("POST", "/api/v1/gpr", dict(GPR, gprName="fill-%d" % i))
                statuses.add(status)
                if status == 507:
                    refused_full(status, doc)
                    break
            assert 507 in statuses, statuses
            listed = names(c)
            assert "first" in listed and "fill-%d" % i not in listed
            os.unlink(filler)
            c.admin.ok("POST", "/api/v1/gpr", dict(GPR, gprName="after-space"))
            assert "after-space" in names(c)
        finally:
            c.close()
    finally:
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(mnt, ignore_errors=True)
