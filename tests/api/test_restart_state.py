"""State that must survive a restart of egsd (issue 14, item 5): active alerts, the webhook outbox and
the planner's held early releases are in the store. Each test restarts egsd (SIGTERM, and kill -9
where it costs little) between the two halves of what it checks: raise and resolve, queue and
delivery, hold and apply."""
import json

import pytest

from conftest import Cluster, store_query, wait_for
from fakeagent import FakeAgent, Receiver, free_port, provisioned


@pytest.fixture
def cluster(tmpdir_path):
    """The receivers here listen on 127.0.0.1, which egsd refuses unless told otherwise."""
    c = Cluster(tmpdir_path, extra=["--allow-private-webhooks"])
    yield c
    c.close()


def restart(cluster, sig):
    cluster.egsd.stop(sig)
    cluster.egsd.start()


def rows(cluster, sql):
    return store_query(cluster.egsd, sql)


def count(cluster, table):
    return int(rows(cluster, "SELECT count(*) FROM " + table)[0][0])


def alert_events(cluster, reason):
    items = cluster.admin.get("/api/v1/events?limit=1000")["items"]
    return [e for e in items if e["reason"] == reason]


@pytest.mark.parametrize("sig", ["term", "kill"])
def test_an_alert_raised_before_a_restart_resolves_after_it_once(cluster, sig):
    rx = Receiver()
    try:
        agent = FakeAgent(cluster, "c1", ["n1"])
        cluster.workspace("w", ["c1"])
        cluster.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": rx.url})
        node = provisioned(cluster, agent, sliceName="w")["status"]["nodes"][0]
        agent.sample(node, 0, tempC=95)
        agent.heartbeat()
        wait_for(lambda: "GPUTemperatureHigh" in rx.reasons(), what="the raise notification")
        before = cluster.admin.get("/api/v1/alerts")["items"]
        assert [a["reason"] for a in before] == ["GPUTemperatureHigh"] and before[0]["peak"] == 95
        agent.sample(node, 0, tempC=97)  # a higher peak is stored too
        agent.heartbeat()
        assert count(cluster, "alerts") == 1

        restart(cluster, sig)
        after = cluster.admin.get("/api/v1/alerts")["items"]
        assert len(after) == 1 and after[0]["id"] == before[0]["id"] and after[0]["since"] == before[0]["since"]
        assert after[0]["peak"] == 97 and after[0]["gprId"] == before[0]["gprId"]
        # Still hot after the restart: not raised a second time.
        agent.heartbeat()
        assert len(alert_events(cluster, "GPUTemperatureHigh")) == 1

        agent.sample(node, 0, tempC=40)
        agent.heartbeat()
        wait_for(lambda: "GPUTemperatureNormal" in rx.reasons(), what="the resolve notification")
        assert cluster.admin.get("/api/v1/alerts")["items"] == []
        assert count(cluster, "alerts") == 0
        normal = alert_events(cluster, "GPUTemperatureNormal")
        assert len(normal) == 1 and "peak 97" in normal[0]["message"], normal
        agent.heartbeat()  # and resolved only once
        wait_for(lambda: count(cluster, "webhook_outbox") == 0, what="the outbox to drain")
        assert rx.reasons().count("GPUTemperatureHigh") == 1 and rx.reasons().count("GPUTemperatureNormal") == 1
        assert len(alert_events(cluster, "GPUTemperatureNormal")) == 1
    finally:
        rx.close()


def outbox(cluster):
    """name -> spec of every stored webhook message."""
    return {r[0]: json.loads(r[1]) for r in rows(cluster, "SELECT name, spec FROM webhook_outbox")}


@pytest.mark.parametrize("sig", ["term", "kill"])
def test_undelivered_notifications_survive_a_restart_and_arrive_once_with_their_key(cluster, sig):
    port = free_port()
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    cluster.admin.ok("PUT", "/api/v1/slice-workspace",
                     {"workspaceName": "w", "webhookUrl": "http://127.0.0.1:%d/hook" % port})
    gid = provisioned(cluster, agent, sliceName="w")["gprId"]
    # The receiver is down: each message is stored; the first is tried and stored again with its
    # attempt count and next try, and holds back the others (one URL's messages go out in order).
    stored = wait_for(lambda: (lambda o: len(o) == 3 and max(m["attempts"] for m in o.values()) >= 2 and o)(
        outbox(cluster)), timeout=20, what="three stored messages, the first tried twice")
    first = min(stored.values(), key=lambda m: m["eventId"])
    assert first["attempts"] >= 2 and sorted(m["attempts"] for m in stored.values())[:2] == [0, 0]
    for key, m in stored.items():
        body = json.loads(m["payload"])
        assert body["idempotencyKey"] == key and body["egsEvent"]["involvedObject"]["name"] == gid
        assert m["url"].endswith("/hook") and m["workspace"] == "w" and m["nextTry"] > 0

    restart(cluster, sig)
    again = outbox(cluster)  # (the silent fake agent may add NodeFailed after the restart)
    assert set(stored) <= set(again) and all(again[k]["attempts"] >= stored[k]["attempts"] for k in stored)
    order = sorted(stored, key=lambda k: stored[k]["eventId"])
    rx = Receiver(port)
    try:
        wait_for(lambda: set(order) <= set(rx.keys) and count(cluster, "webhook_outbox") == 0, timeout=30,
                 what="delivery after the restart")
        assert rx.keys[:3] == order, (rx.keys, order)  # the stored keys first, in the order of their events
        assert len(set(rx.keys)) == len(rx.keys)  # each key once
        assert [b["idempotencyKey"] for b in rx.bodies] == rx.keys
        assert rx.reasons()[:3] == ["Queued", "Provisioning", "Provisioned"]
        shown = cluster.admin.get("/api/v1/notifications?sliceName=w")
        assert shown["delivered"] >= 3 and shown["failed"] == 0, shown
        n = len(rx.keys)
        # Another restart sends nothing again: delivered messages left the store.
        restart(cluster, "term")
        cluster.gpr(sliceName="w", gprName="after")
        wait_for(lambda: "Queued" in rx.reasons()[n:], what="the next notification")
        assert len(set(rx.keys)) == len(rx.keys) and not set(rx.keys[n:]) & set(rx.keys[:n])
    finally:
        rx.close()


def held(cluster, gid):
    return rows(cluster, "SELECT held FROM gprs WHERE id = '%s'" % gid)[0][0] or None


def test_a_held_early_release_survives_kill9_and_is_applied_at_its_time(cluster):
    """test_planner's held release, released at once and with egsd killed while it is held: c1 frees
    at +50m and +1000m, c2 at +60m and +65m; A (one node, any cluster) is planned on c1 at +50m, B
    (two nodes of one cluster) on c2 at +65m. c2's first holder releases early: handed over, its node
    would start A on c2 at once and delay B. The hold is stored with the GPR, so after a kill -9 A
    still waits with the same estimate; it ends at the holder's exit."""
    holds, a, b, start = cluster.held_release_setup()
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": holds[2], "earlyRelease": True})
    cluster.wait_state(holds[2], "Complete")
    stored = wait_for(lambda: held(cluster, holds[2]), what="the hold in the store")
    hold = json.loads(stored)
    assert hold["ghost"] is False and hold["nodes"] == ["c2/c2-n1"], hold
    assert cluster.status(a)["status"]["provisioningStatus"] == "Queued"

    cluster.egsd.stop("kill")
    cluster.egsd.start()
    # Both agents are back and every node schedulable: without its hold, c2-n1 would start A now.
    wait_for(lambda: len(cluster.schedulable_nodes()) == 4, timeout=30, what="the agents to report again")
    assert cluster.status(a)["status"]["provisioningStatus"] == "Queued"
    cluster.advance("1m")  # past the heartbeat period after the start: the planner weighs the hold again
    for g in (a, b):
        st = cluster.status(g)
        assert st["status"]["provisioningStatus"] == "Queued", st
        assert st["estimatedStartTime"] == start[g], (g, st["estimatedStartTime"], start[g])
    assert json.loads(held(cluster, holds[2]))["until"] == hold["until"]

    cluster.advance("50m")  # past +50m: hold0 exits and A starts on c1, as promised
    st = cluster.wait_state(a, "Provisioned")
    assert st["clusterName"] == "c1", st
    cluster.advance("10m")  # past +60m, the released GPR's exit: its hold is applied and leaves the store
    wait_for(lambda: held(cluster, holds[2]) is None, what="the hold to be applied")
    cluster.advance("5m")  # past +65m: hold3 exits and B starts on c2
    st = cluster.wait_state(b, "Provisioned")
    assert st["clusterName"] == "c2", st
