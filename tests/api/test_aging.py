"""Finished GPRs leave memory by age (egsd --finished-retention): under the dev clock, a Complete and a
Cancelled GPR older than the retention leave memory (the egs_gprs_in_memory gauge falls, egs_gprs still
counts them), while a Provisioned and a Queued one stay however old; the aged ones still answer by id,
in filtered, paged and whole lists and in the usage report with the very bytes they answered in memory;
writes to them are refused as before; and a restart does not load them, yet still answers for them.
Runs on SQLite and, with EGS_TEST_STORE=postgres, on PostgreSQL."""
import re
import time

from conftest import Cluster, wait_for
from fakeagent import FakeAgent, provisioned


def metric(cluster, name):
    status, data, _ = cluster.admin.raw("GET", "/metrics")
    assert status == 200
    m = re.search(r"^%s (\d+)$" % re.escape(name), data.decode(), re.M)
    assert m, name
    return int(m.group(1))


def raw_ok(api, path):
    status, data, _ = api.raw("GET", path)
    assert status == 200, (path, status, data)
    return data


def test_finished_gprs_leave_memory_and_stay_readable(tmpdir_path):
    c = Cluster(tmpdir_path, extra=["--finished-retention", "1h"])
    started = time.time()  # at or after the dev clock's start, where every GPR here finishes
    try:
        agent = FakeAgent(c, "c1", ["n1", "n2"])
        c.workspace("a", ["c1"])
        # Complete: provisioned on one node, released early, detached by the agent.
        done = provisioned(c, agent, sliceName="a", gprName="done")["gprId"]
        c.admin.ok("PUT", "/api/v1/gpr", {"gprId": done, "earlyRelease": True})
        wait_for(lambda: agent.serve() is not None and c.status(done)["status"]["provisioningStatus"] == "Complete",
                 what="done to complete")
        agent.heartbeat()
        # Active and queued GPRs never age: keep holds both nodes for 10 days, two wait behind it.
        keep = provisioned(c, agent, sliceName="a", gprName="keep", numberOfGPUNodes=2, exitDuration="10d")["gprId"]
        cancelled = c.gpr(sliceName="a", gprName="cancelled")
        queued = c.gpr(sliceName="a", gprName="queued")
        c.admin.ok("DELETE", "/api/v1/gpr", {"gprId": cancelled})
        assert metric(c, "egs_gprs_in_memory") == 4

        until = c.advance("1s")["now"]
        finished = (done, cancelled)
        paths = ["/api/v1/gpr?gprId=" + g for g in finished] + [
            "/api/v1/gpr/list?status=Complete", "/api/v1/gpr/list?sliceName=a&status=Cancelled",
            "/api/v1/gpr/list?status=Cancelled&limit=1", "/api/v1/gpr/list?sliceName=a&limit=1",
            "/api/v1/gpr/list?status=Cancelled&limit=1&continue=" + done, "/api/v1/gpr/list?limit=1"]
        before = {p: raw_ok(c.admin, p) for p in paths}
        whole = {g["gprId"]: g for g in c.admin.get("/api/v1/gpr/list")["items"]}
        usage = "/api/v1/usage?sliceName=a&since=1d&until=" + until
        usage_before = c.admin.get(usage)
        refused = c.admin.call("DELETE", "/api/v1/gpr", {"gprId": done})

        c.advance("2h")
        wait_for(lambda: metric(c, "egs_gprs_in_memory") == 2, what="the finished GPRs to leave memory")
        assert metric(c, 'egs_gprs{state="Complete"}') == 1 and metric(c, 'egs_gprs{state="Cancelled"}') == 1
        for p in paths:
            assert raw_ok(c.admin, p) == before[p], p
        after = {g["gprId"]: g for g in c.admin.get("/api/v1/gpr/list")["items"]}
        assert set(after) == {done, keep, cancelled, queued}
        assert all(after[g] == whole[g] for g in finished)
        assert after[queued]["status"]["provisioningStatus"] == "Queued"
        assert after[keep]["status"]["provisioningStatus"] == "Provisioned"
        got = c.admin.get(usage)
        by_id = lambda u: sorted(u["items"][0]["items"], key=lambda i: i["gprId"])  # noqa: E731
        assert by_id(got) == by_id(usage_before) and got["items"][0]["gpuHours"] == usage_before["items"][0]["gpuHours"]
        assert c.admin.call("DELETE", "/api/v1/gpr", {"gprId": done}) == refused
        # Scope still holds for aged GPRs: a key of another workspace does not see them.
        c.workspace("b", ["c1"])
        other = c.egsd.api(c.key("Viewer", "b"))
        assert other.call("GET", "/api/v1/gpr?gprId=" + done)[0] in (403, 404)
        assert done not in {g["gprId"] for g in other.get("/api/v1/gpr/list")["items"]}

        # A restart does not load them (the dev clock starts again at the real time, so the restart
        # asks for a retention of 1s, which their completion, at the first start's clock, is past).
        c.egsd.stop()
        wait_for(lambda: time.time() > started + 3, what="a second past the retention")
        c.egsd.extra = ["--finished-retention", "1s"]
        c.egsd.start()
        c.admin = c.egsd.api()
        assert metric(c, "egs_gprs_in_memory") == 2
        assert metric(c, 'egs_gprs{state="Complete"}') == 1
        for p in paths:
            assert raw_ok(c.admin, p) == before[p], p
        assert c.status(queued)["status"]["provisioningStatus"] == "Queued"
    finally:
        c.close()
