"""Slack-compatible webhooks per workspace: lifecycle and alert events delivered in order by a worker
thread, retried with backoff while the receiver is down, never slowing the API; permanent failures
reported as a workspace event; the URL validated, masked when shown, and kept across restarts."""
import tempfile
import time

import pytest

from conftest import Cluster, wait_for
from fakeagent import FakeAgent, Receiver, events, free_port, provisioned

LIFECYCLE = ["Queued", "Provisioning", "Provisioned"]


@pytest.fixture
def cluster(tmpdir_path):
    """The receivers of this file listen on 127.0.0.1, which egsd refuses unless told otherwise."""
    c = Cluster(tmpdir_path, extra=["--allow-private-webhooks"])
    yield c
    c.close()


def set_hook(cluster, ws, url):
    return cluster.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": ws, "webhookUrl": url})


def test_lifecycle_and_alerts_reach_the_workspace_webhook(cluster):
    rx, other = Receiver(), Receiver()
    try:
        agent = FakeAgent(cluster, "c1", ["n1", "n2"])
        cluster.workspace("w", ["c1"])
        cluster.workspace("v", ["c1"])
        set_hook(cluster, "w", rx.url)
        set_hook(cluster, "v", other.url)
        st = provisioned(cluster, agent, sliceName="w", exitDuration="1h")
        wait_for(lambda: rx.reasons() == LIFECYCLE, what="lifecycle notifications")
        body = rx.bodies[2]
        assert "Provisioned" in body["text"] and st["gprId"] in body["text"]
        assert body["attachments"][0]["color"] == "good" and body["attachments"][0]["title"] == "Provisioned"
        assert body["egsEvent"]["involvedObject"] == {"kind": "GPR", "name": st["gprId"]}
        node = st["status"]["nodes"][0]
        agent.sample(node, 0, tempC=95)
        agent.heartbeat()
        cluster.advance("50m")
        wait_for(lambda: rx.reasons()[3:] == ["GPUTemperatureHigh", "Progress25", "Progress50", "Progress75",
                                              "ExitWarning"], what="alert and window notifications")
        assert rx.bodies[3]["attachments"][0]["color"] == "danger"
        # Other workspaces' events and cluster-level events go elsewhere or nowhere.
        assert other.bodies == [] and all(b["egsEvent"]["workspace"] == "w" for b in rx.bodies)
        # The receiver has a body before egsd has its 200 and counts the delivery: wait for the count.
        shown = wait_for(lambda: (lambda s: s["delivered"] == 8 and s)(
            cluster.admin.get("/api/v1/notifications?sliceName=w")), what="8 deliveries counted")
        assert shown["webhookConfigured"] and shown["delivered"] == 8 and shown["failed"] == 0
        assert "secret-token" not in shown["webhookUrl"] and "127.0.0.1" in shown["webhookUrl"]
        status, _ = cluster.egsd.api(cluster.key("Viewer", "v")).call("GET", "/api/v1/notifications?sliceName=w")
        assert status == 404
        # Cleared with "": nothing more is sent.
        set_hook(cluster, "w", "")
        cluster.gpr(sliceName="w")
        time.sleep(0.3)
        assert len(rx.bodies) == 8 and not cluster.admin.get("/api/v1/notifications?sliceName=w")["webhookConfigured"]
    finally:
        rx.close()
        other.close()


def test_receiver_down_then_back_gets_everything_in_order(cluster):
    port = free_port()
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    set_hook(cluster, "w", "http://127.0.0.1:%d/hook" % port)
    t0 = time.time()
    gid = provisioned(cluster, agent, sliceName="w")["gprId"]
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": gid, "earlyRelease": True})
    agent.serve()
    assert time.time() - t0 < 2  # the API never waits for the dead receiver
    time.sleep(1.5)
    rx = Receiver(port)
    try:
        want = LIFECYCLE + ["EarlyRelease", "Complete"]
        wait_for(lambda: rx.reasons() == want, timeout=20, what="delivery after the receiver came back")
        # The delivery thread counts a delivery when the receiver's reply is in, a moment after the
        # receiver has the body: wait for the counter rather than read it once.
        delivered = 'egs_webhook_deliveries_total{outcome="delivered"} 5'
        text = wait_for(lambda: (lambda t: delivered in t and t)(cluster.admin.raw("GET", "/metrics")[1].decode()),
                        timeout=5, what="the delivered counter at 5")
        retries = [l for l in text.splitlines() if l.startswith("egs_webhook_retries_total ")]
        assert retries and float(retries[0].split()[1]) >= 1
    finally:
        rx.close()


def test_rejected_webhook_is_reported_and_url_is_validated(cluster):
    rx = Receiver(status=404)  # e.g. a revoked Slack webhook
    try:
        FakeAgent(cluster, "c1", ["n1"])
        cluster.workspace("w", ["c1"])
        set_hook(cluster, "w", rx.url)
        cluster.gpr(sliceName="w")
        wait_for(lambda: "NotificationFailed" in [e["reason"] for e in events(cluster.admin, "workspace=w")],
                 what="failure event")
        ev = [e for e in events(cluster.admin, "workspace=w") if e["reason"] == "NotificationFailed"][0]
        assert ev["type"] == "Warning" and "404" in ev["message"] and "1 attempt" in ev["message"]
        st = cluster.admin.get("/api/v1/notifications?sliceName=w")
        assert st["failed"] >= 1 and "404" in st["lastError"]
    finally:
        rx.close()
    for url in ("ftp://example.com/x", "http://", "https://exa mple.com", "http://x/" + "a" * 600, 42):
        status, doc = cluster.admin.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": url})
        assert status == 422 and doc["error"]["data"]["field"] == "webhookUrl", (url, doc)
    owner = cluster.egsd.api(cluster.key("Owner", "w"))
    status, _ = owner.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": "https://h.example/x"})
    assert status == 403  # set by an admin
    set_hook(cluster, "w", "https://hooks.example.com/services/T/B/XYZ")
    cluster.egsd.stop()
    cluster.egsd.start()
    st = cluster.admin.get("/api/v1/notifications?sliceName=w")
    assert st["webhookConfigured"] and st["webhookUrl"] == "https://hooks.example.com/..."


PRIVATE_URLS = ["http://127.0.0.1:9/hook", "http://127.1/x", "http://2130706433/x", "http://0x7f.0.0.1/x",
                "http://localhost:8080/x", "http://api.localhost/x", "http://LOCALHOST./x", "http://[::1]/x",
                "http://[::ffff:127.0.0.1]/x", "http://169.254.169.254/latest/meta-data/",
                "http://metadata.google.internal/computeMetadata/v1/", "http://[fd00:ec2::254]/x",
                "http://[fe80::1]/x", "http://0.0.0.0:80/x", "http://user@169.254.169.254/x",
                "http://100.100.100.200/x"]


def test_private_webhook_urls_refused_by_default():
    """Loopback, link-local and metadata addresses, in every form curl accepts, are refused (422 naming
    webhookUrl) and nothing is stored; a public name is accepted."""
    with tempfile.TemporaryDirectory(prefix="egs-test-") as tmp:
        c = Cluster(tmp)
        try:
            c.admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})
            c.workspace("w", ["c1"])
            for url in PRIVATE_URLS:
                status, doc = c.admin.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": url})
                assert status == 422 and doc["error"]["data"]["field"] == "webhookUrl", (url, doc)
                assert "--allow-private-webhooks" in doc["error"]["message"]
                assert not c.admin.get("/api/v1/notifications?sliceName=w")["webhookConfigured"], url
            c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": "https://hooks.example.com/x"})
            assert c.admin.get("/api/v1/notifications?sliceName=w")["webhookConfigured"]
        finally:
            c.close()


def test_a_name_resolving_to_loopback_is_refused_at_connect_time():
    """A DNS name is checked where curl connects: a receiver on 127.0.0.1 reached through a name that is
    not "localhost" gets nothing, and the failure is reported once, without retries."""
    rx = Receiver()
    with tempfile.TemporaryDirectory(prefix="egs-test-") as tmp:
        c = Cluster(tmp)
        try:
            agent = FakeAgent(c, "c1", ["n1"])
            c.workspace("w", ["c1"])
            # "localtest.me"-style names need DNS; /etc/hosts names do not: "ip6-localhost" and the
            # machine's own name resolve locally on Debian.  Use the first that resolves to loopback.
            import socket
            name = None
            for cand in ("ip6-loopback", "ip6-localhost", socket.gethostname()):
                try:
                    if socket.gethostbyname(cand).startswith("127."):
                        name = cand
                        break
                except OSError:
                    continue
            if name is None:
                pytest.skip("no name other than localhost resolves to 127.0.0.0/8 here")
            url = rx.url.replace("127.0.0.1", name)
            c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "w", "webhookUrl": url})
            c.gpr(sliceName="w")
            wait_for(lambda: "NotificationFailed" in [e["reason"] for e in events(c.admin, "workspace=w")],
                     what="failure event")
            ev = [e for e in events(c.admin, "workspace=w") if e["reason"] == "NotificationFailed"][0]
            assert "loopback, link-local or metadata" in ev["message"] and "1 attempt" in ev["message"], ev
            assert rx.bodies == []
            del agent
        finally:
            c.close()
            rx.close()
