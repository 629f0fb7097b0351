"""Kept status views keyed per GPR (src/server/gpr_view.c): a view survives changes of other GPRs,
nodes and workspaces that do not move what it shows, and is built again as soon as something it
shows moves, whether a request touched the GPR or only the planner moved its estimate.  Every egsd
of the API tests also runs with EGSD_VIEW_CHECK=1 (conftest.py): each kept view served is rendered
again and compared, so a stale view aborts egsd in whichever test makes the change it missed."""
import re

from conftest import H100, wait_for
from fakeagent import FakeAgent, provisioned


def counts(cluster):
    text = cluster.admin.raw("GET", "/metrics")[1].decode()
    got = dict(re.findall(r'^egs_gpr_views_total\{result="(kept|built)"\} (\d+)$', text, re.M))
    return int(got["kept"]), int(got["built"])


def read(cluster, gid):
    """Reads gid's status; returns (view, whether it was served from the kept view)."""
    kept = counts(cluster)[0]
    view = cluster.status(gid)
    return view, counts(cluster)[0] == kept + 1


def warm(cluster, gid):
    """Reads gid until its view is kept; returns the view."""
    seen = {}

    def served_kept():
        seen["view"], was_kept = read(cluster, gid)
        return was_kept
    wait_for(served_kept, what="a kept view of " + gid)
    return seen["view"]


def fresh(cluster, gid, workspace):
    items = cluster.admin.get("/api/v1/gpr/list?sliceName=" + workspace)["items"]
    return [g for g in items if g["gprId"] == gid][0]


def test_views_survive_unrelated_changes(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"])
    running = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, gprName="running", exitDuration="2h")["gprId"]
    waiting = cluster.gpr(sliceName="w", numberOfGPUs=8, numberOfGPUNodes=2, gprName="waiting", priority=200)
    assert cluster.status(waiting)["estimatedStartTime"] is not None
    other = FakeAgent(cluster, "c2", ["m1"], shape=dict(H100, gpuModel="NVIDIA-A100-80GB"))
    cluster.workspace("v", ["c2"])
    views = {g: warm(cluster, g) for g in (running, waiting)}

    def unchanged_and_kept(what):
        for g, before in views.items():
            view, was_kept = read(cluster, g)
            assert view == before, what
            assert was_kept, "%s dropped the kept view of %s" % (what, g)

    # a create in another cluster and shape, at the end of the queue: nothing of these two moves
    tail = cluster.gpr(sliceName="v", numberOfGPUs=8, gprName="tail", priority=1)
    wait_for(lambda: [other.serve()] and cluster.status(tail)["status"]["provisioningStatus"] == "Provisioned",
             what="tail provisioned")
    behind = cluster.gpr(sliceName="v", numberOfGPUs=8, gprName="behind", priority=1)
    unchanged_and_kept("creates elsewhere")
    # an update of another GPR, heartbeats, a new workspace and key: writes that do not touch them
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": behind, "gprName": "renamed", "priority": 2})
    agent.heartbeat()
    other.heartbeat()
    cluster.workspace("u", ["c1", "c2"])
    cluster.key("Viewer", "w")
    unchanged_and_kept("unrelated writes")

    # and what does move them still shows at once: the running GPR released, the waiting one starts
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": running, "earlyRelease": True})
    view, was_kept = read(cluster, running)
    assert not was_kept and view["earlyRelease"] is True and view == fresh(cluster, running, "w")
    wait_for(lambda: [agent.serve(), agent.heartbeat()] and
             cluster.status(waiting)["status"]["provisioningStatus"] == "Provisioned", what="waiting provisioned")
    view = cluster.status(waiting)
    assert view["status"]["nodes"] == ["n1", "n2"] and view == fresh(cluster, waiting, "w")


def test_estimate_moved_by_the_planner_alone(cluster):
    """A node of the waiting GPR's plan goes unhealthy (a heartbeat, not a write to the GPR): the
    planner moves its estimate without touching it, and the next read shows the move."""
    agent = FakeAgent(cluster, "c1", ["n1", "n2", "n3"])
    for w in ("w", "a", "b"):  # one workspace each, so that a and b both start at once
        cluster.workspace(w, ["c1"])
    provisioned(cluster, agent, sliceName="a", numberOfGPUs=8, gprName="a", exitDuration="1h")
    provisioned(cluster, agent, sliceName="b", numberOfGPUs=8, gprName="b", exitDuration="3h")
    waiting = cluster.gpr(sliceName="w", numberOfGPUs=8, numberOfGPUNodes=2, gprName="waiting", priority=200)
    before = warm(cluster, waiting)
    assert before["estimatedStartTime"] is not None
    agent.nodes["n3"]["health"] = "Unhealthy"
    agent.heartbeat()

    def moved():
        view = cluster.status(waiting)
        return view["estimatedStartTime"] != before["estimatedStartTime"] and view
    view = wait_for(moved, what="the estimate to move off the unhealthy node")
    assert view == fresh(cluster, waiting, "w")
    assert view["status"]["provisioningStatus"] == "Queued"


def test_time_drops_only_views_that_count_from_now(cluster):
    """The dev clock moves on: a running GPR's remaining duration is built again; the view of a
    cancelled GPR (nothing in it counts from now) stays kept, and equals a fresh build."""
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    running = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, exitDuration="2h")["gprId"]
    done = cluster.gpr(sliceName="w", numberOfGPUs=8, priority=50)
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": done})
    left = warm(cluster, running)["status"]["remainingDuration"]
    before = warm(cluster, done)
    cluster.advance("10m")
    view, was_kept = read(cluster, running)
    assert not was_kept and view["status"]["remainingDuration"] != left
    assert view == fresh(cluster, running, "w")
    view, was_kept = read(cluster, done)
    assert was_kept and view == before == fresh(cluster, done, "w")
