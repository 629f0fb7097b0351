"""Kubernetes-style events: every GPR transition, the 25/50/75% marks and the exit warning, the filters
and paging of GET /api/v1/events, the server-sent event stream, scoping to the caller's workspaces,
aggregation of repeats, and bounded retention."""

from conftest import store_query, wait_for
from fakeagent import EventStream, FakeAgent, events, provisioned, reasons


def test_window_marks_exit_warning_and_completion(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w", exitDuration="1h")
    gid = st["gprId"]
    assert reasons(cluster.admin, "gprId=" + gid)[::-1][:3] == ["Queued", "Provisioning", "Provisioned"]
    cluster.advance("15m")
    assert "Progress25" in reasons(cluster.admin, "gprId=" + gid)
    cluster.advance("34m")  # 49 minutes in: the 75% mark, not yet the exit warning (10 minutes before)
    got = reasons(cluster.admin, "gprId=" + gid)
    assert "Progress50" in got and "Progress75" in got and "ExitWarning" not in got
    cluster.advance("1m")
    warn = [e for e in events(cluster.admin, "gprId=" + gid) if e["reason"] == "ExitWarning"]
    assert len(warn) == 1 and warn[0]["type"] == "Warning"
    assert "10m" in warn[0]["message"] and st["status"]["exitTimestamp"] in warn[0]["message"]
    assert warn[0]["involvedObject"] == {"kind": "GPR", "name": gid} and warn[0]["workspace"] == "w"
    assert warn[0]["count"] == 1 and warn[0]["firstTimestamp"] == warn[0]["lastTimestamp"]
    cluster.advance("5m")  # warned once only
    assert reasons(cluster.admin, "gprId=" + gid).count("ExitWarning") == 1
    cluster.advance("5m")
    wait_for(lambda: agent.serve() or cluster.status(gid)["status"]["provisioningStatus"] == "Complete",
             what="complete")
    got = reasons(cluster.admin, "gprId=" + gid)
    assert got[0] == "Complete" and got.index("Exit") > 0
    assert got.index("ExitWarning") > got.index("Exit")  # newest first


def test_exit_warning_lead_time_is_configurable(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    s = cluster.admin.ok("PUT", "/api/v1/settings/observability", {"exitWarning": "30m"})
    assert s["exitWarning"] == "0h30m0s"
    gid = provisioned(cluster, agent, sliceName="w", exitDuration="2h")["gprId"]
    cluster.advance("1h29m")
    assert "ExitWarning" not in reasons(cluster.admin, "gprId=" + gid)
    cluster.advance("1m")
    assert "ExitWarning" in reasons(cluster.admin, "gprId=" + gid)
    # "off" turns it off; bad values name the field.
    assert cluster.admin.ok("PUT", "/api/v1/settings/observability", {"exitWarning": "off"})["exitWarning"] == "off"
    status, doc = cluster.admin.call("PUT", "/api/v1/settings/observability", {"exitWarning": "soon"})
    assert status == 422 and doc["error"]["data"]["field"] == "exitWarning"
    for bad in (5, 200.5, "200"):
        status, doc = cluster.admin.call("PUT", "/api/v1/settings/observability", {"eventRetention": bad})
        assert status == 422 and doc["error"]["data"]["field"] == "eventRetention"
    status, doc = cluster.admin.call("PUT", "/api/v1/settings/observability", {"bogus": 1})
    assert status == 422


def test_filters_paging_and_validation(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("a", ["c1"])
    cluster.workspace("b", ["c1"])
    ga = provisioned(cluster, agent, sliceName="a")["gprId"]
    gb = provisioned(cluster, agent, sliceName="b")["gprId"]
    t_mid = cluster.advance("1h")["now"]
    agent.sample("n1", gpu=2, tempC=95)  # an alert on a's node
    agent.heartbeat()
    held_a = cluster.status(ga)["status"]["nodes"][0]
    a_events = events(cluster.admin, "workspace=a")
    assert a_events and all(e["workspace"] == "a" for e in a_events)
    assert {e["reason"] for e in events(cluster.admin, "sliceName=b")} >= {"Queued", "Provisioned"}
    by_gpr = events(cluster.admin, "gprId=" + ga)
    assert all(e["involvedObject"]["name"] == ga or ga in e["message"] for e in by_gpr)
    warn = events(cluster.admin, "type=Warning")
    assert warn and all(e["type"] == "Warning" for e in warn)
    if held_a == "n1":
        assert any(e["reason"] == "GPUTemperatureHigh" for e in by_gpr)  # alerts on its nodes count too
    node_ev = events(cluster.admin, "node=n1&clusterName=c1")
    assert node_ev and all(e["involvedObject"] == {"kind": "Node", "name": "c1/n1"} for e in node_ev)
    assert all(e["involvedObject"]["kind"] == "GPR" for e in events(cluster.admin, "kind=GPR"))
    assert [e["reason"] for e in events(cluster.admin, "reason=Provisioned")] == ["Provisioned", "Provisioned"]
    later = events(cluster.admin, "since=" + t_mid)
    assert later and all(e["lastTimestamp"] >= t_mid for e in later)
    assert all(e["lastTimestamp"] < t_mid for e in events(cluster.admin, "until=" + t_mid))
    assert events(cluster.admin, "since=1s&reason=Queued") == []
    # Paging: pages of 3 cover the whole list once, newest first.
    whole = [e["id"] for e in events(cluster.admin)]
    seen, token = [], None
    while True:
        page = cluster.admin.get("/api/v1/events?limit=3" + ("&continue=" + token if token else ""))
        assert len(page["items"]) <= 3
        seen += [e["id"] for e in page["items"]]
        token = page["continue"]
        if token is None:
            break
    assert seen == whole and whole == sorted(whole, reverse=True)
    for q, field in (("type=Info", "type"), ("since=yesterday", "since"), ("continue=x", "continue"),
                     ("limit=0", "limit"), ("workspace=" + "x" * 80, "workspace")):
        status, doc = cluster.admin.call("GET", "/api/v1/events?" + q)
        assert status == 422 and doc["error"]["data"]["field"] == field, (q, doc)


def test_users_see_only_their_workspace_events(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("a", ["c1"])
    cluster.workspace("b", ["c1"])
    user_a = cluster.egsd.api(cluster.key("Viewer", "a"))
    stream = EventStream(cluster.egsd.port, cluster.key("Owner", "a"))
    assert stream.status == 200 and "text/event-stream" in stream.headers
    gb = provisioned(cluster, agent, sliceName="b")["gprId"]
    ga = provisioned(cluster, agent, sliceName="a")["gprId"]
    mine = events(user_a)
    assert mine and {e["workspace"] for e in mine} == {"a"}
    assert events(user_a, "workspace=b") == [] and events(user_a, "gprId=" + gb) == []
    assert not any(e["reason"] == "NodeRegistered" for e in mine)  # cluster-level: admins only
    assert any(e["reason"] == "NodeRegistered" for e in events(cluster.admin))
    # The stream carries a's events only: the first is a's Queued, though b's came before it.
    _, first = stream.next()
    assert first["workspace"] == "a" and first["involvedObject"]["name"] == ga and first["reason"] == "Queued"
    stream.close()
    status, _ = agent.api.call("GET", "/api/v1/events")
    assert status == 403  # agents have no business here


def test_event_stream_live_replay_and_filters(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    key = cluster.egsd.admin_key
    live = EventStream(cluster.egsd.port, key, "workspace=w")
    warn_only = EventStream(cluster.egsd.port, key, "type=Warning")
    gid = provisioned(cluster, agent, sliceName="w", exitDuration="1h")["gprId"]
    got = [live.next() for _ in range(3)]
    assert [d["reason"] for _, d in got] == ["Queued", "Provisioning", "Provisioned"]
    assert got[0][0] < got[1][0] < got[2][0] and all(d["involvedObject"]["name"] == gid for _, d in got)
    cluster.advance("50m")
    seen = [live.next()[1]["reason"] for _ in range(4)]
    assert seen == ["Progress25", "Progress50", "Progress75", "ExitWarning"]
    assert warn_only.next()[1]["reason"] == "ExitWarning"  # Normal events skipped
    # A reconnecting client resumes after the last id it saw.
    replay = EventStream(cluster.egsd.port, key, "workspace=w", last_id=got[1][0])
    assert [replay.next()[1]["reason"] for _ in range(2)] == ["Provisioned", "Progress25"]
    for s in (live, warn_only, replay):
        s.close()
    # Closed streams are dropped from the server's list.
    wait_for(lambda: "egs_event_streams 0" in cluster.admin.raw("GET", "/metrics")[1].decode(), what="streams dropped")
    status, doc = cluster.admin.call("GET", "/api/v1/events/watch?type=Nope")
    assert status == 422 and doc["error"]["data"]["field"] == "type"


def test_repeated_alerts_aggregate_into_one_event(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    for temp in (95, 60, 96, 60):
        agent.sample("n1", gpu=0, tempC=temp)
        agent.heartbeat()
    high = [e for e in events(cluster.admin, "reason=GPUTemperatureHigh")]
    assert len(high) == 1 and high[0]["count"] == 2 and "96 C" in high[0]["message"]
    assert high[0]["firstTimestamp"] <= high[0]["lastTimestamp"]
    normal = events(cluster.admin, "reason=GPUTemperatureNormal")
    assert len(normal) == 1 and normal[0]["count"] == 2
    # Past the ten-minute window a repeat is a new event; counts survive a restart.
    cluster.advance("11m")
    agent.sample("n1", gpu=0, tempC=97)
    agent.heartbeat()
    assert [e["count"] for e in events(cluster.admin, "reason=GPUTemperatureHigh")] == [1, 2]
    cluster.egsd.stop()
    cluster.egsd.start()
    assert [e["count"] for e in events(cluster.admin, "reason=GPUTemperatureHigh")] == [1, 2]


def test_retention_is_bounded_and_configurable(cluster):
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    cluster.admin.ok("PUT", "/api/v1/settings/observability", {"eventRetention": 128, "eventTTL": "2h"})
    cluster.gpr(sliceName="w", gprName="holder")  # holds the node, so the others wait
    ids = [cluster.gpr(sliceName="w", gprName="g%d" % i) for i in range(70)]  # Queued + Cancelled each
    for gid in ids:
        cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": gid})
    listed = events(cluster.admin)
    assert len(listed) == 128 and listed[0]["reason"] == "Cancelled" and listed[0]["involvedObject"]["name"] == ids[-1]
    # The bound holds across a restart (the store is pruned too), and old events age out.
    cluster.egsd.stop()
    cluster.egsd.start()
    assert cluster.admin.get("/api/v1/settings/observability")["eventRetention"] == 128
    before = {e["id"] for e in events(cluster.admin)}
    assert len(before) == 128

    def stored():
        return int(store_query(cluster.egsd, "SELECT COUNT(*) FROM events")[0][0])
    wait_for(lambda: stored() <= 128, what="the store pruned to the retention")
    cluster.advance("3h")
    assert before.isdisjoint(e["id"] for e in events(cluster.admin))
