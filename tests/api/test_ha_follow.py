"""A follower applies only what the leader changed (docs/ha.md): the leader writes one change-log row per
committed turn (the kinds and keys of what it wrote), and a follower reads the rows of those keys and
applies them to its model instead of loading the whole store.

- After a burst of mixed changes (GPRs created, provisioned, edited, released, cancelled; nodes
  allocated, freed and given new thresholds; templates, bindings, workspaces and keys created, changed, deleted) the
  follower that applied them row by row answers every read route as a fresh egsd that loaded the
  store in full does, and it loaded nothing in full meanwhile.
- A gap in the log (rows pruned) makes the follower load in full, and it is right again.
- That full load runs off the follower's loop: while it waits for a table another session keeps
  locked, the follower answers reads at once, from its old model, and says it is loading; once the
  lock goes, the new model is in."""
import json
import os
import signal
import time

import pytest

from conftest import H100, STORE, pg_server, wait_for
from ha_pair import ha_pair, hold_table_lock
from test_ha import cluster_with_agent, follower_of, health

pytestmark = pytest.mark.skipif(STORE != "postgres", reason="leadership is PostgreSQL's (SQLite: one process per file)")

# Fields that move with each egsd's own clock or runtime (agents' contact, samples), not with the store.
VOLATILE = {"agentConnected", "lastHeartbeat", "remainingDuration", "estimatedWaitTime", "estimatedStartTime",
            "now", "syncedAgoMs", "age", "uptimeSeconds", "lastSeen", "gpuUtilization", "power", "temperature",
            "memoryUsed", "series", "requestId", "generatedAt"}


def strip(v):
    """v without the volatile fields, its lists in a canonical order (a list built from a map follows
    insertion order, which a running egsd and a fresh load need not share)."""
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in VOLATILE}
    if isinstance(v, list):
        return sorted((strip(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    return v


def read_routes(api):
    """Every parameterless read route of the OpenAPI document that answers from the model."""
    paths = json.loads(api.raw("GET", "/api/v1/openapi.json")[1])["paths"]
    skip = ("/healthz", "/agent/", "/watch", "/metrics", "/audit", "/gpus", "/insights", "/usage", "/debug", "/openapi",
            "/auth/whoami", "/notifications", "/prices", "/settings/observability", "/alerts")
    return sorted(p for p, ops in paths.items() if "get" in ops and "{" not in p and not any(s in p for s in skip))


def same_reads(b, c, key):
    """b's and c's answers to every read route, as (path, b's, c's) for those that differ."""
    bapi, capi = b.api(key), c.api(key)
    diffs = []
    for p in read_routes(bapi) + ["/api/v1/gpr/list?sliceName=w", "/api/v1/gpr/list?sliceName=w2",
                                  "/api/v1/inventory/list", "/api/v1/events?limit=500"]:
        sb, db = bapi.call("GET", p)
        sc, dc = capi.call("GET", p)
        if (sb, strip(db)) != (sc, strip(dc)):
            diffs.append((p, sb, db, sc, dc))
    return diffs


def caught_up(b):
    h = health(b)
    return h and h["behindTurns"] == 0 and h["syncedAgoMs"] < 1000 and h


def mixed_burst(a, b):
    """Changes of every kind, half of them sent through the follower (forwarded)."""
    la, fb = a.api(), b.api(a.admin_key)
    gids = []
    for i in range(12):
        api = la if i % 2 else fb
        gids.append(api.ok("POST", "/api/v1/gpr", {"gprName": "m%d" % i, "sliceName": "w", "numberOfGPUNodes": 1,
                                                   "numberOfGPUs": 8, "exitDuration": "1h",
                                                   "priority": 100 + i})["gprId"])
    wait_for(lambda: sum(g["status"]["provisioningStatus"] == "Provisioned"
                         for g in la.get("/api/v1/gpr/list?sliceName=w")["items"]) >= 1, what="a provisioned GPR")
    queued = [g["gprId"] for g in la.get("/api/v1/gpr/list?sliceName=w")["items"]
              if g["status"]["provisioningStatus"] == "Queued"]
    la.ok("PUT", "/api/v1/gpr", {"gprId": queued[0], "priority": 250, "gprName": "renamed"})
    fb.ok("DELETE", "/api/v1/gpr", {"gprId": queued[1]})  # cancelled while queued
    running = [g["gprId"] for g in la.get("/api/v1/gpr/list?sliceName=w")["items"]
               if g["status"]["provisioningStatus"] == "Provisioned"]
    fb.ok("PUT", "/api/v1/gpr", {"gprId": running[0], "earlyRelease": True})  # released: the next one starts
    la.ok("PUT", "/api/v1/nodes/thresholds", {"clusterName": "c1", "gpuTempThreshold": 91})
    la.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w2", "clusters": ["c1"], "namespaces": ["w2"]})
    fb.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "w2", "description": "second"})
    la.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w3", "clusters": ["c1"], "namespaces": ["w3"]})
    fb.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "w3"})
    tpl = {"name": "t1", "clusterName": "c1", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "memoryPerGpu": 40,
           "gpuShape": H100["gpuModel"], "instanceType": H100["instanceType"], "exitDuration": "1h",
           "priority": 101, "enforceIdleTimeOut": False, "enableEviction": False, "requeueOnFailure": False}
    la.ok("POST", "/api/v1/gpr-template", tpl)
    fb.ok("PUT", "/api/v1/gpr-template", dict(tpl, priority=120))
    la.ok("POST", "/api/v1/gpr-template", dict(tpl, name="t2"))
    fb.ok("DELETE", "/api/v1/gpr-template", {"gprTemplateName": "t2"})
    la.ok("POST", "/api/v1/gpr-template-binding",
          {"workspaceName": "w2", "enableAutoGPR": False,
           "clusters": [{"clusterName": "c1", "defaultTemplateName": "t1", "templates": ["t1"]}]})
    k1 = la.ok("POST", "/api/v1/api-key", {"name": "k1", "role": "Viewer"})
    fb.ok("POST", "/api/v1/api-key", {"name": "k2", "role": "Admin"})
    fb.ok("DELETE", "/api/v1/api-key", {"keyId": k1["keyId"]})
    fb.ok("POST", "/api/v1/gpr", {"gprName": "in-w2", "sliceName": "w2", "numberOfGPUNodes": 1, "numberOfGPUs": 8,
                                  "exitDuration": "2h"})
    return gids


def test_a_follower_applies_changed_rows_and_equals_a_fresh_load(tmpdir_path):
    with ha_pair(tmpdir_path) as p:
        a, b = p.a, p.b
        agent = cluster_with_agent(a, b, tmpdir_path, nodes=3)
        p.also.append(agent)
        wait_for(lambda: caught_up(b), what="the follower to catch up")
        before = health(b)
        mixed_burst(a, b)
        # Waits for a catch-up too: right after the burst, behindTurns can read 0 before the follower has
        # seen the burst's turns at all (it counts from the leader's turn as last read), so "caught up"
        # alone was once read with nothing of the burst applied.  A follower that never applies them
        # row by row still fails here (the wait times out) or below (a full load instead).
        h = wait_for(lambda: (lambda h: h and h["appliedCatchUps"] > before["appliedCatchUps"] and h)(caught_up(b)),
                     what="the follower to catch up after the burst")
        assert h["fullLoads"] == before["fullLoads"], h  # every turn applied row by row
        # A fresh egsd on the same store loads it in full; the two followers answer alike.
        c = follower_of(a, os.path.join(tmpdir_path, "c"))
        p.also.append(c)
        wait_for(lambda: caught_up(b) and caught_up(c), what="both followers current")
        # A follower learns of the leader's last turn by NOTIFY: "caught up" may be read a moment before
        # it arrives, so the two are compared until they agree (a wrong apply never agrees).
        diffs = []

        def alike():
            diffs[:] = same_reads(b, c, a.admin_key)
            return not diffs

        try:
            wait_for(alike, timeout=10, what="the applied and the loaded follower to answer alike")
        except AssertionError:
            pass
        assert not diffs, "\n".join("%s: applied %s %s\nloaded %s %s" % d for d in diffs[:3])


def test_a_gap_in_the_change_log_makes_a_follower_load_in_full(tmpdir_path):
    with ha_pair(tmpdir_path) as p:
        a, b = p.a, p.b
        la = a.api()
        la.ok("POST", "/api/v1/clusters", {"clusterName": "x1"})
        h = wait_for(lambda: caught_up(b), what="the follower to catch up")
        loads = h["fullLoads"]
        # The follower stops looking (SIGSTOP) while the leader commits two turns and the log loses one
        # of them: on waking, its log has a gap.
        gap_while_stopped(b, la, p.schema, ["x2", "x3"])
        # Right after SIGCONT the follower may still report its state from before the stop (behind by
        # nothing, synced under a second ago): wait for the full load itself, then check it was one.
        h = wait_for(lambda: (lambda h: h and h["fullLoads"] > loads and h)(caught_up(b)),
                     what="the follower to load in full after the gap")
        assert h["fullLoads"] == loads + 1, h
        names = {x["clusterName"] for x in b.api(a.admin_key).get("/api/v1/clusters")["items"]}
        assert {"x1", "x2", "x3"} <= names, names
        # And it goes on row by row afterwards.
        applied = h["appliedCatchUps"]
        la.ok("POST", "/api/v1/clusters", {"clusterName": "x4"})
        h = wait_for(lambda: (lambda h: h and h["appliedCatchUps"] > applied and h)(caught_up(b)),
                     what="a catch-up from the log")
        assert h["fullLoads"] == loads + 1, h
        assert "x4" in {x["clusterName"] for x in b.api(a.admin_key).get("/api/v1/clusters")["items"]}


def gap_while_stopped(b, la, schema, names, db="postgres", then=None):
    """Creates clusters `names` on the leader while follower b is stopped (SIGSTOP), and prunes the
    change log's row of the first of those turns: b's log then has a gap.  then(), when given, runs
    before b goes on."""
    b.proc.send_signal(signal.SIGSTOP)
    try:
        turn = 'SELECT value FROM "%s".meta WHERE key = \'leader.turn\'' % schema
        first = int(pg_server().psql(turn, db)) + 1
        for n in names:
            la.ok("POST", "/api/v1/clusters", {"clusterName": n})
        pg_server().psql('DELETE FROM "%s".changes WHERE turn = %d' % (schema, first), db)
        if then:
            then()
    finally:
        b.proc.send_signal(signal.SIGCONT)


def test_a_follower_serves_its_old_model_while_a_full_load_waits(tmpdir_path):
    with ha_pair(tmpdir_path) as p:
        a, b = p.a, p.b
        la = a.api()
        la.ok("POST", "/api/v1/clusters", {"clusterName": "x1"})
        bapi = b.api(a.admin_key)
        # Caught up and showing x1: behindTurns counts from the leader's turn as the follower last read
        # it, so right after the create it can read 0 before the follower has seen x1's turn at all.
        loads = wait_for(lambda: "x1" in {x["clusterName"] for x in bapi.get("/api/v1/clusters")["items"]}
                         and caught_up(b), what="the follower to catch up")["fullLoads"]
        # Every load now waits for the inference endpoints table (the leader's turns here write none).
        locker = p.locker = hold_table_lock(p.schema, "inference_endpoints", 120)
        gap_while_stopped(b, la, p.schema, ["x2", "x3"])
        wait_for(lambda: (health(b) or {}).get("loading"), what="the follower's full load to start")
        names = {x["clusterName"] for x in bapi.get("/api/v1/clusters")["items"]}
        gpr_list = bapi.get("/api/v1/gpr/list")
        h = health(b)
        # Answered while the load still waits for the lock (a load on the loop would have held these
        # reads until the lock went): from the old model, which has x1 but not yet x2 and x3.
        assert locker.poll() is None and h["loading"] and h["fullLoads"] == loads, h
        assert "x1" in names and not {"x2", "x3"} & names, names
        assert "items" in gpr_list
        assert h["role"] == "follower" and h["behindTurns"] >= 2, h
        pg_server().psql("SELECT pg_terminate_backend(pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                         "WHERE c.relname = 'inference_endpoints' AND l.mode = 'AccessExclusiveLock' AND l.granted")
        locker.wait(30)
        h = wait_for(lambda: (lambda h: h and h["fullLoads"] > loads and not h["loading"] and h)(caught_up(b)),
                     what="the full load to end and be swapped in")
        assert h["fullLoads"] == loads + 1, h
        assert {"x1", "x2", "x3"} <= {x["clusterName"] for x in bapi.get("/api/v1/clusters")["items"]}
        # And it follows the log again from that load's snapshot.
        applied = h["appliedCatchUps"]
        la.ok("POST", "/api/v1/clusters", {"clusterName": "x4"})
        h = wait_for(lambda: (lambda h: h and h["appliedCatchUps"] > applied and h)(caught_up(b)),
                     what="a catch-up from the log")
        assert h["fullLoads"] == loads + 1, h
        assert "x4" in {x["clusterName"] for x in bapi.get("/api/v1/clusters")["items"]}


def test_a_follower_load_that_cannot_open_its_session_retries_and_logs_few_lines(tmpdir_path):
    """The full load's own session cannot be opened (the database takes no new connections; the
    leader's and the follower's sessions stay): the load retries every 0.5 s, logs its first failure
    and then one line with the count of tries every 5 s (not two lines a try), and once the database
    takes connections again it loads and the model is the store's."""
    pg, db = pg_server(), "egs_load_open"
    pg.create_db(db)
    pg.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db)
    try:
        with ha_pair(tmpdir_path, url=["--store-url", pg.schema_url("s", db)]) as p:
            a, b = p.a, p.b
            la = a.api()
            la.ok("POST", "/api/v1/clusters", {"clusterName": "x1"})
            loads = wait_for(lambda: caught_up(b), what="the follower to catch up")["fullLoads"]
            gap_while_stopped(b, la, "s", ["x2", "x3"], db,
                              then=lambda: pg.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS false' % db))
            wait_for(lambda: "full load: cannot open a session" in b.logs(), what="the load's first failed open")
            first = time.time()
            time.sleep(2.5)  # a window for several tries (one each 0.5 s): the lines they log are counted
            pg.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db)
            window = time.time() - first
            h = wait_for(lambda: (lambda h: h and h["fullLoads"] > loads and not h["loading"] and h)(caught_up(b)),
                         what="the full load to end and be swapped in")
            logs = b.logs()
            failed = [ln for ln in logs.splitlines() if "full load: cannot open a session" in ln]
            opened = [ln for ln in logs.splitlines() if "full load: opened a session" in ln]
            assert "cannot connect to PostgreSQL" not in logs and "cannot use the PostgreSQL" not in logs, logs[-3000:]
            assert 1 <= len(failed) <= 1 + int(window / 5) + 1, failed
            assert "level=warn" in failed[0] and "tries=1 " in failed[0] and "retrying" in failed[0], failed
            assert len(opened) == 1 and int(opened[0].split("tries=")[1]) >= 3, opened
            assert h["fullLoads"] == loads + 1 and h["role"] == "follower", h
            assert {"x1", "x2", "x3"} <= {x["clusterName"] for x in b.api(a.admin_key).get("/api/v1/clusters")["items"]}
    finally:
        pg.psql('ALTER DATABASE "%s" ALLOW_CONNECTIONS true' % db)  # when the test failed before it did
        pg.psql('DROP DATABASE "%s" WITH (FORCE)' % db)
