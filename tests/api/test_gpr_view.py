"""The kept status views of GET /api/v1/gpr?gprId= (src/server/gpr_view.c): a status read is answered
from bytes kept since the last change of what the view shows, so each kind of change must show at once.  Before
every change the view is read until egsd serves it from its kept bytes (egs_gpr_views_total{result=
"kept"} moves), then the change is made and the next status read must equal the view that
GET /api/v1/gpr/list builds afresh, and show the change itself."""
import re

from conftest import wait_for
from fakeagent import FakeAgent, provisioned

SHAPE = "NVIDIA-H100-80GB-HBM3"


def kept(cluster):
    text = cluster.admin.raw("GET", "/metrics")[1].decode()
    m = re.search(r'^egs_gpr_views_total\{result="kept"\} (\d+)$', text, re.M)
    assert m, "egs_gpr_views_total missing from /metrics"
    return int(m.group(1))


def warm(cluster, gid, api=None):
    """Reads gid's status until a read is served from the kept view; returns that view."""
    seen = {}

    def served_kept():
        before = kept(cluster)
        seen["view"] = cluster.status(gid, api)
        return kept(cluster) > before
    wait_for(served_kept, what="a kept view of " + gid)
    return seen["view"]


def fresh(cluster, gid, workspace="w"):
    items = cluster.admin.get("/api/v1/gpr/list?sliceName=" + workspace)["items"]
    return [g for g in items if g["gprId"] == gid][0]


def check(cluster, gid, workspace="w"):
    """The status read equals the freshly built view (same dev-clock second: they must be equal)."""
    now = cluster.status(gid)
    assert now == fresh(cluster, gid, workspace)
    return now


def test_every_change_shows_in_the_next_status_read(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    running = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, gprName="running", exitDuration="2h")["gprId"]
    waiting = cluster.gpr(sliceName="w", numberOfGPUs=8, gprName="waiting", priority=100)

    # update: the priority and the name
    before = warm(cluster, waiting)
    assert before["priority"] == 100
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": waiting, "priority": 150, "gprName": "renamed"})
    after = check(cluster, waiting)
    assert after["priority"] == 150 and after["gprName"] == "renamed"

    # the planner alone: a GPR queued ahead moves the waiting one's estimate (no write touches it)
    est = warm(cluster, waiting)["estimatedStartTime"]
    ahead = cluster.gpr(sliceName="w", numberOfGPUs=8, gprName="ahead", priority=300, exitDuration="3h")
    moved = check(cluster, waiting)
    assert moved["estimatedStartTime"] != est and moved["estimatedStartTime"] > est

    # cancel
    assert warm(cluster, ahead)["status"]["provisioningStatus"] == "Queued"
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": ahead})
    assert check(cluster, ahead)["status"]["provisioningStatus"] != "Queued"
    assert check(cluster, waiting)["estimatedStartTime"] == est  # and the estimate comes back

    # time: the dev clock moves the remaining duration
    left = warm(cluster, running)["status"]["remainingDuration"]
    cluster.advance("10m")
    assert check(cluster, running)["status"]["remainingDuration"] != left

    # price: the cost of a running GPR follows the admin's price
    assert warm(cluster, running)["status"]["cost"] == "0.00"
    cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 3})
    cluster.advance("1h")
    assert float(check(cluster, running)["status"]["cost"]) > 0

    # release, then the waiting GPR starts provisioning and is provisioned (agent actions)
    assert warm(cluster, running)["earlyRelease"] is False
    assert warm(cluster, waiting)["status"]["provisioningStatus"] == "Queued"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": running, "earlyRelease": True})
    assert check(cluster, running)["earlyRelease"] is True
    warm(cluster, waiting)
    wait_for(lambda: [agent.serve(), agent.heartbeat()] and
             cluster.status(waiting)["status"]["provisioningStatus"] == "Provisioned", what="waiting provisioned")
    assert check(cluster, waiting)["status"]["nodes"] == ["n1"]
    assert check(cluster, running)["status"]["provisioningStatus"] != "Provisioned"

    # node failure reported by the agent: the GPR's node is replaced (another cluster, two nodes)
    other = FakeAgent(cluster, "c2", ["m1", "m2"])
    cluster.workspace("f", ["c2"])
    gid = provisioned(cluster, other, sliceName="f", numberOfGPUs=8)["gprId"]
    wait_for(lambda: [other.serve(), other.heartbeat()] and
             cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned", what="provisioned on c2")
    nodes = warm(cluster, gid)["status"]["nodes"]
    assert len(nodes) == 1
    other.nodes[nodes[0]]["health"] = "Unhealthy"
    other.heartbeat()
    replaced = check(cluster, gid, "f")["status"]["nodes"]
    assert len(replaced) == 1 and replaced != nodes


def test_kept_views_keep_access_checks(cluster):
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    cluster.workspace("v", ["c1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUs=1)
    view = warm(cluster, gid)
    # The same kept bytes for a viewer of w; a key of another workspace gets 403, every time.
    viewer = cluster.egsd.api(cluster.key("Viewer", "w"))
    assert cluster.status(gid, viewer) == view
    other = cluster.egsd.api(cluster.key("Owner", "v"))
    for _ in range(3):
        status, doc = other.call("GET", "/api/v1/gpr?gprId=" + gid)
        assert status == 403 and doc["error"]["errorKey"] == "FORBIDDEN"
    status, doc = cluster.egsd.api("not-a-key").call("GET", "/api/v1/gpr?gprId=" + gid)
    assert status == 401


def test_date_header_and_access_log_time(cluster):
    """egsd formats the Date header and the access log's time once a second (http.c): both must be
    the real time, in their formats, on every reply."""
    from datetime import datetime, timezone
    from email.utils import parsedate_to_datetime
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    gid = cluster.gpr(sliceName="w", numberOfGPUs=1)
    for path in ("/api/v1/gpr?gprId=" + gid, "/api/v1/gpr?gprId=" + gid, "/api/v1/no-such-route"):
        status, body, resp = cluster.admin.raw("GET", path)
        date = resp.getheader("Date")
        assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                            r"\d{4} \d\d:\d\d:\d\d GMT", date), date
        skew = abs((parsedate_to_datetime(date) - datetime.now(timezone.utc)).total_seconds())
        assert skew < 120, (date, skew)
        assert parsedate_to_datetime(date).strftime("%a") == date[:3]  # the weekday of that date
        assert len(resp.getheaders()) == len({k.lower() for k, _ in resp.getheaders()})  # one Date, not two
        assert int(resp.getheader("Content-Length")) == len(body)
    lines = wait_for(lambda: [x for x in cluster.egsd.logs().splitlines() if "msg=request" in x and "no-such-route" in x],
                     what="the access log line (flushed each second)")
    line = lines[-1]
    logged = datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((logged - datetime.now(timezone.utc)).total_seconds()) < 120, line
