"""Taking the lead of a large store on PostgreSQL (docs/ha.md): an egsd loads before it leads, never
under its lease, so a load of any length cannot cost it the lead.

A scaled-down case of the 1,000,000-GPR bench (bench/mem PG=1): 20,000 GPRs, and a load made longer
than the leader's lease for certain by a table that another session keeps locked (a load that would
have to wait for it under the lease would step down; a follower's load may wait).  The same lock
makes a leader's reload after a failed commit outlast its lease: it loads on a session of its own
while it renews the lease, and leads on."""
import os
import signal
import time

import pytest

from conftest import STORE, pg_server, wait_for
from ha_pair import ha_pair, hold_table_lock
from test_ha import cluster_with_agent, health, role

pytestmark = pytest.mark.skipif(STORE != "postgres", reason="leadership is PostgreSQL's (SQLite: one process per file)")

BULK = 20000


def bulk_gprs(schema, n):
    """n finished GPRs (Complete, finished now: kept in memory under the default retention), copies of
    the store's one GPR with their own ids, names and sequence numbers."""
    return ('INSERT INTO "{s}".gprs SELECT (jsonb_populate_record(g, jsonb_build_object('
            "'id', 'gpr-' || lpad(to_hex(1000000 + i), 8, '0') || '-00', 'name', 'bulk-' || i, "
            "'seq', 1000000 + i, 'state', 'Complete', 'start_ts', g.created_at, "
            "'completion_ts', g.created_at + 60))).* "
            'FROM "{s}".gprs g, generate_series(1, {n}) i').format(s=schema, n=n)


def quiet_and_caught_up(schema, b):
    """Waits until the leader committed nothing for a second and b's model has its last turn."""
    turn = 'SELECT value FROM "%s".meta WHERE key = \'leader.turn\'' % schema
    def settled():
        t0 = pg_server().psql(turn)
        time.sleep(1)
        h = health(b)
        return pg_server().psql(turn) == t0 and h and h["behindTurns"] == 0 and h["syncedAgoMs"] < 500
    wait_for(settled, timeout=30, what="a quiet leader and a follower that has its last turn")


def test_a_follower_takes_over_a_large_store_without_loading_under_its_lease(tmpdir_path):
    with ha_pair(tmpdir_path, follow=False) as p:
        a, schema = p.a, p.schema
        api = a.api()
        cluster_with_agent(a, a, tmpdir_path, nodes=1).stop()  # cluster c1, workspace w
        one = api.ok("POST", "/api/v1/gpr", {"gprName": "seed", "sliceName": "w", "numberOfGPUNodes": 1,
                                              "numberOfGPUs": 8, "exitDuration": "1h"})["gprId"]
        a.stop()
        pg_server().psql(bulk_gprs(schema, BULK))
        a.start()  # loads the 20,001 GPRs, then leads
        assert role(a) == "leader"
        b = p.follow()
        api = a.api()
        api.ok("POST", "/api/v1/clusters", {"clusterName": "c2"})  # a turn after b's load: b catches up
        quiet_and_caught_up(schema, b)

        # Every load now waits 8 s for the inference endpoints table: longer than a leader's lease
        # (it acknowledges for 4 s after its last renewal).  The leader goes; the follower must lead
        # without a load under the lease (its model is current), and serve the whole store.
        locker = p.locker = hold_table_lock(schema, "inference_endpoints", 8)
        a.proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        wait_for(lambda: role(b) == "leader", timeout=5, interval=0.02, what="the follower to lead within 5 s")
        took = time.time() - killed_at
        assert locker.poll() is None, "the table lock ended before the follower led: the test proves nothing"
        print("takeover with %d GPRs and a blocked load: %.2f s" % (BULK + 1, took))
        bapi = b.api(a.admin_key)
        bapi.ok("POST", "/api/v1/clusters", {"clusterName": "c3"})  # the new leader acknowledges writes
        locker.wait(30)
        time.sleep(1)  # well past the lock: the new leader did not step down meanwhile
        assert b.proc.poll() is None and role(b) == "leader", b.logs()[-2000:]
        assert "stepping down" not in b.logs()
        assert bapi.get("/api/v1/gpr?gprId=" + one)["gprName"] == "seed"
        assert bapi.get("/api/v1/gpr?gprId=gpr-%08x-00" % (1000000 + BULK))["gprName"] == "bulk-%d" % BULK
        assert {"c1", "c2", "c3"} <= {x["clusterName"] for x in bapi.get("/api/v1/clusters")["items"]}


def test_a_leaders_reload_that_outlasts_its_lease_keeps_the_lead(tmpdir_path):
    flag = os.path.join(tmpdir_path, "store-full")
    # a's commits fail as on a full disk while flag exists
    with ha_pair(tmpdir_path, env={"EGS_STORE_FAIL_IF_EXISTS": flag}) as p:
        a, b, schema = p.a, p.b, p.schema
        api = a.api()
        api.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})
        epoch = health(a)["epoch"]
        # The next commit fails, and the reload that follows waits 8 s for a locked table: twice
        # the 4 s a leader acknowledges after its last lease write.
        p.locker = hold_table_lock(schema, "inference_endpoints", 8)
        open(flag, "w").close()
        t0 = time.time()
        status, doc = api.call("POST", "/api/v1/clusters", {"clusterName": "c2"})
        took = time.time() - t0
        assert status == 507 and doc["error"]["errorKey"] == "STORAGE_FULL", (status, doc)
        assert took > 4, "the reply came before the reload could outlast the lease: the test proves nothing"
        os.unlink(flag)
        # It still leads under the same epoch (it never stepped down, nobody took over), and writes.
        assert a.proc.poll() is None and "stepping down" not in a.logs(), a.logs()[-2000:]
        assert health(a)["role"] == "leader" and health(a)["epoch"] == epoch, health(a)
        api.ok("POST", "/api/v1/clusters", {"clusterName": "c3"})
        names = {x["clusterName"] for x in api.get("/api/v1/clusters")["items"]}
        assert {"c1", "c3"} <= names and "c2" not in names, names
        assert role(b) == "follower"
