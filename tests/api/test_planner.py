"""The planner through the real API: preemption by a high-priority request, fairness among equal
priorities (the workspace that used fewer GPU-hours goes first)."""
import os
import subprocess

from conftest import BIN, H100, Cluster


def events(cluster, gid, reason):
    return [e for e in cluster.admin.get("/api/v1/events?gprId=" + gid)["items"] if e["reason"] == reason]


def test_high_priority_preempts_the_opted_in_gpr_that_ran_least(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
    for w in ("lo1", "lo2", "keep", "hi", "mid"):
        cluster.workspace(w, ["worker-1"])
    lo1 = cluster.gpr(sliceName="lo1", exitDuration="5h", priority=50, enableEviction=True)
    cluster.wait_state(lo1, "Provisioned")
    cluster.advance("5m")
    lo2 = cluster.gpr(sliceName="lo2", exitDuration="5h", priority=50, enableEviction=True, requeueOnFailure=True)
    cluster.wait_state(lo2, "Provisioned")
    # A medium-band request never preempts; a high one does not evict a GPR that ran under 10 minutes.
    mid = cluster.gpr(sliceName="mid", priority=200)
    cluster.advance("6m")  # lo1 has run 11 minutes, lo2 6
    assert cluster.status(mid)["status"]["provisioningStatus"] == "Queued"
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": mid})
    cluster.advance("4m")  # lo1 15 minutes, lo2 10: lo2 lost less work
    hi = cluster.gpr(sliceName="hi", priority=250)
    st = cluster.wait_state(hi, "Provisioned")
    ev = cluster.status(lo2)
    assert ev["status"]["evictedBy"] == hi
    assert ev["status"]["provisioningStatus"] == "Queued"  # it asked to be requeued
    assert "preempted by GPR job (priority 250)" in ev["status"]["failureReason"]
    assert cluster.status(lo1)["status"]["provisioningStatus"] == "Provisioned"
    assert cluster.status(lo1)["status"]["evictedBy"] is None
    lo2_node = [n for n in cluster.admin.get("/api/v1/inventory/list")["items"]
                if any(a["gprId"] == hi for a in n["allocation"])]
    assert [n["gpuNodeName"] for n in lo2_node] == st["status"]["nodes"]
    assert events(cluster, hi, "Preempting") and events(cluster, lo2, "Evicted")
    # An owner sees evictedBy on its own GPR.
    owner = cluster.admin.with_token(cluster.key("Owner", "lo2"))
    assert owner.get("/api/v1/gpr?gprId=" + lo2)["status"]["evictedBy"] == hi


def test_gprs_that_did_not_opt_in_are_never_preempted(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    for w in ("lo", "hi"):
        cluster.workspace(w, ["worker-1"])
    lo = cluster.gpr(sliceName="lo", exitDuration="2h", priority=1)
    cluster.wait_state(lo, "Provisioned")
    cluster.advance("30m")
    hi = cluster.gpr(sliceName="hi", priority=300)
    cluster.advance("1m")
    st = cluster.status(hi)
    assert st["status"]["provisioningStatus"] == "Queued"
    assert cluster.status(lo)["status"]["provisioningStatus"] == "Provisioned"
    # It starts when lo's window ends, as estimated.
    assert st["estimatedStartTime"] == cluster.status(lo)["status"]["exitTimestamp"]


def test_equal_priorities_go_to_the_workspace_that_used_less(cluster):
    cluster.add_cluster("worker-1", [("h100-1", H100)])
    for w in ("heavy", "light", "other"):
        cluster.workspace(w, ["worker-1"])
    used = cluster.gpr(sliceName="heavy", numberOfGPUs=8, exitDuration="1h")
    cluster.wait_state(used, "Provisioned")
    cluster.advance("1h")
    cluster.wait_state(used, "Complete")  # heavy has used 8 GPU-hours
    busy = cluster.gpr(sliceName="other", exitDuration="2h")
    cluster.wait_state(busy, "Provisioned")
    h = cluster.gpr(sliceName="heavy")
    l = cluster.gpr(sliceName="light")  # asked later, same priority
    items = cluster.admin.get("/api/v1/queue")["items"]
    assert [i["gprId"] for i in items] == [l, h]
    usage = {i["gprId"]: i["workspaceRecentGpuHours"] for i in items}
    assert usage[l] == 0 and abs(usage[h] - 8.0) < 0.01
    assert cluster.status(l)["estimatedStartTime"] < cluster.status(h)["estimatedStartTime"]
    cluster.advance("2h")
    cluster.wait_state(l, "Provisioned")
    assert cluster.status(h)["status"]["provisioningStatus"] == "Queued"


def test_planner_flags_are_checked(tmpdir_path):
    """egsd refuses a malformed --fair-half-life or --preempt-min-runtime at start (exit 2, naming the
    flag) instead of running with a silently different planner."""
    for flag in ("--fair-half-life", "--preempt-min-runtime"):
        for bad in ("abc", "-5", "", "1e3", "99999999999999999999", "10s"):
            p = subprocess.run([os.path.join(BIN, "egsd"), "--data", os.path.join(tmpdir_path, "d"), flag, bad],
                               capture_output=True, text=True, timeout=10)
            assert p.returncode == 2 and flag in p.stderr, (flag, bad, p.returncode, p.stderr)
    assert not os.path.exists(os.path.join(tmpdir_path, "d", "egs.db"))


def test_fair_share_off_is_first_come_first_served(tmpdir_path):
    c = Cluster(tmpdir_path, extra=["--fair-half-life", "0"])
    try:
        c.add_cluster("worker-1", [("h100-1", H100)])
        for w in ("heavy", "light", "other"):
            c.workspace(w, ["worker-1"])
        used = c.gpr(sliceName="heavy", numberOfGPUs=8, exitDuration="1h")
        c.wait_state(used, "Provisioned")
        c.advance("1h")
        c.wait_state(used, "Complete")
        c.wait_state(c.gpr(sliceName="other", exitDuration="2h"), "Provisioned")
        h = c.gpr(sliceName="heavy")
        l = c.gpr(sliceName="light")
        items = c.admin.get("/api/v1/queue")["items"]
        assert [i["gprId"] for i in items] == [h, l]
        assert all(i["workspaceRecentGpuHours"] == 0 for i in items)
    finally:
        c.close()


def test_an_early_release_that_would_delay_someone_is_held(cluster):
    """The unit test's two-cluster case through real egsd and agents: c1 frees at +50m and +1000m, c2 at
    +60m and +65m; A (one node, any cluster) is planned on c1 at +50m, B (two nodes of one cluster) on c2
    at +65m. The holder of c2's first node releases early at +10m. Handed over at once, that node would
    let A start on c2 and keep c2 from B until +110m; the release is held instead (core/held.h): neither
    estimate moves, and both start exactly as first promised."""
    holds, a, b, start = cluster.held_release_setup()
    exits = {i: cluster.status(h)["status"]["exitTimestamp"] for i, h in enumerate(holds)}
    assert start[a] == exits[0] and start[b] == exits[3], (start, exits)
    cluster.advance("10m")
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": holds[2], "earlyRelease": True})
    cluster.wait_state(holds[2], "Complete")
    cluster.advance("1m")
    for g in (a, b):
        st = cluster.status(g)
        assert st["status"]["provisioningStatus"] == "Queued", st
        assert st["estimatedStartTime"] == start[g], (g, st["estimatedStartTime"], start[g])
        assert st["status"]["delayedCount"] == 0
    cluster.advance("39m")  # +50m: hold0 exits and A starts on c1
    st = cluster.wait_state(a, "Provisioned")
    assert st["status"]["startTimestamp"] == start[a] and st["clusterName"] == "c1", st
    cluster.advance("15m")  # +65m: hold3 exits and B starts on c2
    st = cluster.wait_state(b, "Provisioned")
    assert st["status"]["startTimestamp"] == start[b] and st["clusterName"] == "c2", st
