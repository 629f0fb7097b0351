"""Status reads that show only durable changes go out at once (src/server/durable.c "Shown", gpr_view.c,
docs/internals/http.md "Reads"): while another request's commit waits for its (slowed) fdatasync, a read
of a GPR whose kept view shows nothing changed since the last durable commit is answered at once; a read
of what the waiting commit changed (the GPR updated, or whose estimate it moved) waits for that fsync;
a turn whose commit fails refuses the reads that showed its changes, and answers the others.

The fsync is slowed with EGS_TEST_FSYNC_DELAY_MS (SQLite only); the failed commit is injected with
EGS_STORE_FAIL_IF_EXISTS and runs on both stores."""
import http.client
import json
import os
import socket
import threading
import time

from conftest import H100, Cluster, Egsd, sqlite_only
from fakeagent import FakeAgent, provisioned
from test_http_framing import parse_responses, read_until_closed
from test_durable_overlap import DELAY, cluster_egsd, gpr, kill_mid_fsync, knobs, post, slow_egsd  # noqa: F401 (knobs: a fixture)

SHAPE = H100["gpuModel"]


def call(port, key, method, path, body=None, timeout=30):
    """One request on a fresh connection: (status, data or error doc, seconds taken, monotonic answer time)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        resp = conn.getresponse()
        doc = json.loads(resp.read())
        t1 = time.monotonic()
        return resp.status, doc.get("data") if resp.status == 200 else doc, t1 - t0, t1
    finally:
        conn.close()


def status_of(egsd, gid):
    return call(egsd.port, egsd.admin_key, "GET", "/api/v1/gpr?gprId=" + gid)


class Background:
    """A request sent on a thread: .sent and .answered (monotonic), .status and .data once it came."""

    def __init__(self, egsd, method, path, body):
        self.answered = None
        self.th = threading.Thread(target=self._run, args=(egsd, method, path, body))
        self.sent = time.monotonic()
        self.th.start()

    def _run(self, egsd, method, path, body):
        self.status, self.data, _, self.answered = call(egsd.port, egsd.admin_key, method, path, body)

    def join(self):
        self.th.join(30)
        assert self.status == 200, self.data
        return self.data


def big(name, priority=101):
    """Both nodes of slow_egsd's cluster, all their GPUs."""
    return dict(gpr(name), numberOfGPUNodes=2, numberOfGPUs=8, priority=priority)


@sqlite_only
def test_durable_views_go_out_while_another_change_waits_for_its_fsync(tmpdir_path, knobs):
    egsd = slow_egsd(tmpdir_path, knobs)
    try:
        # r1 holds every GPU: a and a2 wait behind it, each with an estimate.
        assert post(egsd.port, egsd.admin_key, big("r1"))[0] == 200
        made = [Background(egsd, "POST", "/api/v1/gpr", gpr(n)) for n in ("a", "a2")]
        a, a2 = (b.join()["gprId"] for b in made)
        st, seen_a, secs, _ = status_of(egsd, a)  # nothing undurable: at once, and a's view is kept
        assert st == 200 and seen_a["status"]["provisioningStatus"] == "Queued" and secs < DELAY / 2, (st, seen_a, secs)

        # b's create is committed and its fsync held back: a's kept view, and a2's view built now for
        # the first time, show nothing b changed (b queues behind them), so they go out at once.
        b = Background(egsd, "POST", "/api/v1/gpr", gpr("b"))
        time.sleep(DELAY / 4)
        st, again, secs, at = status_of(egsd, a)
        assert st == 200 and again == seen_a, (st, again)
        assert secs < DELAY / 2, "a durable view waited %.2f s for another GPR's fsync" % secs
        st, seen_a2, secs2, at2 = status_of(egsd, a2)
        assert st == 200 and seen_a2["gprName"] == "a2" and secs2 < DELAY / 2, (st, seen_a2, secs2)
        b.join()
        assert b.answered - b.sent >= DELAY * 0.95, "a create was acknowledged before its fsync"
        assert max(at, at2) < b.answered, "the reads waited for the create's fsync"

        # What a waiting commit changed waits for its fsync: a's priority ...
        put = Background(egsd, "PUT", "/api/v1/gpr", {"gprId": a, "priority": 250})
        time.sleep(DELAY / 4)
        st, upd, _, at = status_of(egsd, a)
        put.join()
        assert st == 200 and upd["priority"] == 250, (st, upd)
        assert at - put.sent >= DELAY * 0.95, "a read showed an update not yet durable"

        # ... and a2's estimate, moved by a create ahead of it (the same shape as r1, a higher priority).
        c = Background(egsd, "POST", "/api/v1/gpr", big("c", priority=300))
        time.sleep(DELAY / 4)
        st, moved, _, at = status_of(egsd, a2)
        c.join()
        assert st == 200 and moved["estimatedStartTime"] != seen_a2["estimatedStartTime"], (seen_a2, moved)
        assert at - c.sent >= DELAY * 0.95, "a read showed an estimate moved by a change not yet durable"
    finally:
        egsd.stop()


@sqlite_only
def test_kill9_loses_nothing_a_status_read_showed(tmpdir_path, knobs):
    """Writers raise their GPR's priority one step per acknowledged update while readers read the
    statuses; egsd is killed half-way through a held fsync, when the next updates sit in memory or
    committed without a reply.  After the restart each GPR's priority is at least the highest any
    200 read showed: no read showed a change that could still be lost."""
    egsd = slow_egsd(tmpdir_path, knobs)
    assert post(egsd.port, egsd.admin_key, big("r1"))[0] == 200
    # Created at priority 1, where the writers start: a read that comes before a writer's first update
    # shows 1, not the default 101 that no update of the run reaches.
    made = [Background(egsd, "POST", "/api/v1/gpr", dict(gpr("k%d" % i), priority=1)) for i in range(4)]
    ids = [b.join()["gprId"] for b in made]
    shown, lock, stop, acked = {g: 0 for g in ids}, threading.Lock(), threading.Event(), []

    def writer(gid):
        p = 1
        while not stop.is_set():
            p += 1
            try:
                st, doc, _, at = call(egsd.port, egsd.admin_key, "PUT", "/api/v1/gpr", {"gprId": gid, "priority": p})
            except (OSError, http.client.HTTPException, ValueError):
                return  # egsd died under us: never acknowledged
            assert st == 200, doc
            with lock:
                acked.append(at)

    def reader():
        while not stop.is_set():
            for gid in ids:
                try:
                    st, doc, _, _ = status_of(egsd, gid)
                except (OSError, http.client.HTTPException, ValueError):
                    return
                assert st == 200, doc
                with lock:
                    shown[gid] = max(shown[gid], doc["priority"])

    pool = [threading.Thread(target=writer, args=(g,)) for g in ids] + [threading.Thread(target=reader) for _ in range(2)]
    kill_mid_fsync(egsd, pool, stop, lambda: acked, lock, "two rounds of acknowledged updates")
    assert max(shown.values()) > 1, shown  # the readers saw updates
    again = Egsd(egsd.data_dir).start()
    try:
        for gid in ids:
            stored = again.api().get("/api/v1/gpr?gprId=" + gid)["priority"]
            assert stored >= shown[gid], "GPR %s: a read showed priority %d, the store kept %d" % (gid, shown[gid], stored)
    finally:
        again.stop()


def pipelined(port, key, requests):
    """Sends [(method, path, body)] on one connection in one write, the last closing it; returns
    [(status, doc)] in order."""
    out = b""
    for i, (method, path, body) in enumerate(requests):
        data = json.dumps(body).encode() if body is not None else b""
        out += ("%s %s HTTP/1.1\r\nHost: egsd\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n%s\r\n" % (method, path, key, len(data),
                                                   "Connection: close\r\n" if i == len(requests) - 1 else "")).encode()
        out += data
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(out)
        got = read_until_closed(s, 30)
    finally:
        s.close()
    return [(st, json.loads(body)) for st, _, body in parse_responses(got)]


def test_failed_commit_refuses_the_reads_that_showed_it(tmpdir_path, knobs):
    """A turn whose commit fails (the store is full): the update and a read that shows it are refused,
    a read of another GPR whose view is durable in the same turn is answered at once with it, and
    nothing of the refused update stays.  Both stores (PostgreSQL fails the turn after it was sent)."""
    flag = os.path.join(tmpdir_path, "store-full")
    knobs("EGS_STORE_FAIL_IF_EXISTS", flag)
    egsd = cluster_egsd(tmpdir_path)
    try:
        admin = egsd.api()
        admin.ok("POST", "/api/v1/gpr", big("r1"))
        a = admin.ok("POST", "/api/v1/gpr", gpr("a"))["gprId"]
        b = admin.ok("POST", "/api/v1/gpr", gpr("b"))["gprId"]
        seen_b = admin.get("/api/v1/gpr?gprId=" + b)  # b's view is kept, and durable
        assert admin.get("/api/v1/gpr?gprId=" + a)["priority"] == 101
        open(flag, "w").close()
        got = pipelined(egsd.port, egsd.admin_key, [
            ("PUT", "/api/v1/gpr", {"gprId": a, "priority": 250}),
            ("GET", "/api/v1/gpr?gprId=" + a, None),
            ("GET", "/api/v1/gpr?gprId=" + b, None)])
        assert [st for st, _ in got][0] in (503, 507), got[0]
        st, doc = got[1]  # in the failed turn: refused; in a later one (a slow machine): without the update
        assert st in (503, 507) or (st == 200 and doc["data"]["priority"] == 101), got[1]
        assert got[2] == (200, {"statusCode": 200, "status": "OK", "message": "Success", "data": seen_b}), got[2]
        os.unlink(flag)
        assert admin.get("/api/v1/gpr?gprId=" + a)["priority"] == 101
    finally:
        egsd.stop()


@sqlite_only
def test_a_running_gprs_cost_waits_only_for_a_price_change(tmpdir_path, knobs):
    """A GPR that holds GPUs shows a cost, which moves with the (real) clock, so its view is built again
    each second: while another create waits for its fsync that view still goes out at once (the GPR
    names its GPU shape, so only its own changes and a price change move what it shows); after a price
    change whose fsync is held back, a read a second later shows the new price and waits for that fsync."""
    held = 2.0  # each fdatasync held back this long: a read a second after a change still overlaps its fsync
    c = Cluster(tmpdir_path)
    try:
        agent = FakeAgent(c, "c1", ["n1", "n2"])
        c.workspace("w", ["c1"])
        c.admin.ok("PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 3600})  # 1 a GPU-second
        gid = provisioned(c, agent, sliceName="w", numberOfGPUs=4, gpuShape=SHAPE, exitDuration="4h")["gprId"]
        c.egsd.stop()
        knobs("EGS_TEST_FSYNC_DELAY_MS", str(int(held * 1000)))
        c.egsd.dev_clock = False
        c.egsd.start()  # the same store, real time, its fsyncs held back from now on
        st, before, secs, t0 = status_of(c.egsd, gid)
        assert st == 200 and before["status"]["provisioningStatus"] == "Provisioned" and secs < held / 2, before

        b = Background(c.egsd, "POST", "/api/v1/gpr", gpr("b"))
        time.sleep(max(held / 4, t0 + 1.1 - time.monotonic()))
        st, later, secs, at = status_of(c.egsd, gid)  # a second later: its cost moved, the view is built again
        assert st == 200 and float(later["status"]["cost"]) > float(before["status"]["cost"]), (before, later)
        assert secs < held / 2, "a view showing only durable changes waited %.2f s for another GPR's fsync" % secs
        b.join()
        assert at < b.answered

        price = Background(c.egsd, "PUT", "/api/v1/prices", {"gpuShape": SHAPE, "pricePerGpuHour": 36000})
        time.sleep(1.1)
        st, priced, _, at = status_of(c.egsd, gid)
        price.join()
        assert st == 200 and float(priced["status"]["cost"]) > float(later["status"]["cost"]), priced
        assert at - price.sent >= held * 0.95, "a read showed a cost from a price change not yet durable"
    finally:
        c.close()
