"""Cost and usage: hourly prices per GPU shape set by an admin, status.cost accumulating while a GPR is
provisioned (following price changes, stopping at release), usage per workspace over a period; and the
queue insights: demand against capacity, wait times, the shapes most waited for, early-release rates."""
from datetime import datetime, timedelta

from conftest import H100, T4, wait_for
from fakeagent import FakeAgent, provisioned

SHAPE = H100["gpuModel"]


def cost(cluster, gid):
    return float(cluster.status(gid)["status"]["cost"])


def test_cost_follows_prices_and_stops_at_release(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"])
    cluster.workspace("v", ["c1"])
    p = cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 2.5})
    assert p["pricePerGpuHour"] == 2.5 and p["currency"] == "USD"
    queued = cluster.gpr(sliceName="w", numberOfGPUs=8, gprName="later")
    assert cluster.status(queued)["status"]["cost"] == "0.00"
    st = provisioned(cluster, agent, sliceName="v", numberOfGPUs=4, exitDuration="4h")
    gid = st["gprId"]
    cluster.advance("30m")
    assert cost(cluster, gid) == 4 * 0.5 * 2.5  # 4 GPUs, half an hour
    cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 4})
    cluster.advance("1h")
    assert cost(cluster, gid) == 5.0 + 4 * 1 * 4.0  # the new price from its change on
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    agent.serve()
    cluster.advance("1h")
    assert cost(cluster, gid) == 21.0  # released: no more cost
    prices = cluster.admin.get("/api/v1/prices")
    item = [i for i in prices["items"] if i["gpuShape"] == SHAPE][0]
    assert item["pricePerGpuHour"] == 4 and [h["pricePerGpuHour"] for h in item["history"]] == [2.5, 4]
    # Prices are the admin's; everyone may read them; bad input names the field.
    owner = cluster.egsd.api(cluster.key("Owner", "w"))
    assert owner.get("/api/v1/prices")["items"]
    status, _ = owner.call("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 0})
    assert status == 403
    for body, field in (({"gpuShape": SHAPE, "pricePerGpuHour": -1}, "pricePerGpuHour"),
                        ({"gpuShape": SHAPE, "pricePerGpuHour": "2"}, "pricePerGpuHour"),
                        ({"gpuShape": "bad shape", "pricePerGpuHour": 1}, "gpuShape"),
                        ({"gpuShape": SHAPE, "pricePerGpuHour": 1, "currency": "dollars"}, "currency")):
        status, doc = cluster.admin.call("PUT", "/api/v1/prices", body)
        assert status == 422 and doc["error"]["data"]["field"] == field, (body, doc)
    # Prices survive a restart, and so does the cost they give.
    cluster.egsd.stop()
    cluster.egsd.start()
    assert cost(cluster, gid) == 21.0


def test_usage_report_per_workspace_and_period(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    FakeAgent(cluster, "c2", ["t1"], shape=T4)
    cluster.workspace("w", ["c1", "c2"])
    cluster.workspace("v", ["c1"])
    cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 3})
    cluster.admin.ok("PUT", "/api/v1/prices", {"gpuShape": T4["gpuModel"], "pricePerGpuHour": 0.5})
    t0 = cluster.advance("1s")["now"]
    a = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, exitDuration="2h", clusterName="c1")
    b = provisioned(cluster, agent, sliceName="v", numberOfGPUs=2, exitDuration="1h")
    t1 = cluster.advance("2h")["now"]
    agent.serve()
    rep = cluster.admin.get("/api/v1/usage?since=" + t0 + "&until=" + t1)
    by = {i["sliceName"]: i for i in rep["items"]}
    assert by["w"]["gpuHours"] == 16 and by["w"]["cost"] == 48 and by["w"]["gprs"] == 1
    assert by["v"]["gpuHours"] == 2 and by["v"]["cost"] == 6
    assert by["w"]["byShape"] == [{"gpuShape": SHAPE, "gpuHours": 16.0, "cost": 48.0}]
    assert by["w"]["items"][0]["gprId"] == a["gprId"] and rep["currency"] == "USD"
    # A period that covers the first hour only.
    start = datetime.strptime(a["status"]["startTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    hour = (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    half = cluster.admin.get("/api/v1/usage?sliceName=w&since=%s&until=%s" % (t0, hour))["items"]
    assert [(i["sliceName"], i["gpuHours"], i["cost"]) for i in half] == [("w", 8, 24)]
    one = cluster.admin.get("/api/v1/usage?sliceName=v&since=" + t0)["items"][0]
    assert one["gpuHours"] == 2 and one["items"][0]["gprId"] == b["gprId"]
    # Owners see their own workspace only.
    owner = cluster.egsd.api(cluster.key("Owner", "v"))
    assert [i["sliceName"] for i in owner.get("/api/v1/usage?since=" + t0)["items"]] == ["v"]
    status, _ = owner.call("GET", "/api/v1/usage?sliceName=w")
    assert status == 404
    for q, field in (("since=never", "since"), ("until=x", "until"), ("since=%s&until=%s" % (t1, t0), "since")):
        status, doc = cluster.admin.call("GET", "/api/v1/usage?" + q)
        assert status == 422 and doc["error"]["data"]["field"] == field, (q, doc)


def served_until(cluster, agent, gid):
    """Serves agent's actions until gid is Provisioned: the plan run that places it after an early
    release or a clock step may span several loop slices (server.c), so one round of actions is
    not always all there is yet."""
    wait_for(lambda: agent.serve() is not None and
             cluster.status(gid)["status"]["provisioningStatus"] == "Provisioned", what="%s provisioned" % gid)


def test_queue_insights(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("a", ["c1"])
    cluster.workspace("b", ["c1"])
    cluster.workspace("c", ["c1"])
    t0 = cluster.advance("1s")["now"]
    first = provisioned(cluster, agent, sliceName="a", gpuShape=SHAPE, numberOfGPUs=8, exitDuration="2h")
    second = cluster.gpr(sliceName="b", gpuShape=SHAPE, numberOfGPUs=8, exitDuration="1h")
    third = cluster.gpr(sliceName="c", gpuShape=SHAPE, numberOfGPUs=8, exitDuration="1h")
    cluster.advance("1h")
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": first["gprId"], "earlyRelease": True})  # one hour early
    served_until(cluster, agent, second)  # waited an hour
    cluster.advance("1h")
    served_until(cluster, agent, third)  # waited two hours
    ins = cluster.admin.get("/api/v1/insights/queue?bucket=1h&since=" + t0)
    assert ins["bucket"] == "1h0m0s"
    s = [x for x in ins["series"] if x["gpuShape"] == SHAPE and x["clusterName"] == "c1"][0]
    assert s["capacityGpus"] == 8 and all(p["capacityGpuHours"] == 8 for p in s["points"])
    assert s["points"][0]["demandGpuHours"] == 32 and s["points"][0]["requests"] == 3  # 16 + 8 + 8
    assert s["points"][0]["usedGpuHours"] == 8 and s["points"][1]["usedGpuHours"] == 8
    waits = [w for w in ins["waitTimes"] if w["count"]]
    assert sum(w["count"] for w in waits) == 3
    shapes = ins["mostWaitedShapes"]
    assert shapes[0]["gpuShape"] == SHAPE and shapes[0]["requests"] == 3
    assert shapes[0]["medianSeconds"] == 3600 and shapes[0]["p95Seconds"] == 7200
    early = {e["sliceName"]: e for e in ins["earlyRelease"]}
    assert early["a"]["provisioned"] == 1 and early["a"]["earlyReleased"] == 1 and early["a"]["rate"] == 1
    assert early["a"]["gpuHoursReturned"] == 8 and early["b"]["rate"] == 0
    # A user sees the insight of their own workspace's requests.
    mine = cluster.egsd.api(cluster.key("Viewer", "b")).get("/api/v1/insights/queue?since=" + t0)
    assert [e["sliceName"] for e in mine["earlyRelease"]] == ["b"]
    for q, field in (("bucket=1s", "bucket"), ("bucket=1m&since=30d", "bucket"), ("since=soon", "since")):
        status, doc = cluster.admin.call("GET", "/api/v1/insights/queue?" + q)
        assert status == 422 and doc["error"]["data"]["field"] == field, (q, doc)
