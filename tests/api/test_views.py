"""The user guide's views: the GPU table hottest first, per-GPU time series, AI workloads with their GPUs,
model details, and the threshold alerts behind the hotspots (raised once, hysteresis, resolution, per-node
thresholds and the configured defaults)."""
from datetime import datetime, timedelta, timezone

from conftest import store_query, wait_for
from fakeagent import FakeAgent, events, provisioned

LLAMA = {"egs.io/model": "llama-3-70b", "egs.io/model-config": "tp=4,pp=2", "egs.io/job-type": "fine-tuning"}


def busy_workspace(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2", "n3"])
    cluster.workspace("w", ["c1"], ["w-dev"])
    cluster.workspace("v", ["c1"], ["v-dev"])
    st = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, numberOfGPUNodes=2)
    other = provisioned(cluster, agent, sliceName="v", numberOfGPUs=8)
    a, b = sorted(st["status"]["nodes"])
    for i in range(8):
        agent.sample(a, i, powerW=300 + i, tempC=60 + i, utilPct=80.0, memUsedMiB=1000 * i)
        agent.sample(b, i, powerW=200 + i, tempC=70 - i, utilPct=40.0, memUsedMiB=500)
    agent.sample(b, 5, powerW=650, tempC=83)  # the hotspot: highest power, 83 C is within 10% of 85 C
    agent.nodes[a]["workloads"] = [
        {"name": "trainer-0", "namespace": "w-dev", "gpus": [FakeAgent.uuid(a, i) for i in range(8)], "labels": LLAMA},
        {"name": "kube-proxy", "namespace": "kube-system", "gpus": []},  # not the workspace's: hidden
        {"name": "python3", "namespace": "", "pid": 4242, "gpus": [FakeAgent.uuid(a, 0), "GPU-not-on-this-node"]}]
    agent.nodes[b]["workloads"] = [
        {"name": "trainer-1", "namespace": "w-dev", "gpus": [FakeAgent.uuid(b, i) for i in range(8)], "labels": LLAMA}]
    agent.heartbeat()
    return agent, st, other, a, b


def test_gpu_table_workloads_and_model_details(cluster):
    agent, st, other, a, b = busy_workspace(cluster)
    table = cluster.admin.get("/api/v1/gpus/table?sliceName=w")
    rows = table["items"]
    assert len(rows) == 16 and {r["sliceName"] for r in rows} == {"w"}
    assert rows[0]["uuid"] == FakeAgent.uuid(b, 5) and rows[0]["hotspot"] is True  # hottest first
    assert [r["powerW"] for r in rows] == sorted((r["powerW"] for r in rows), reverse=True)
    assert sum(r["hotspot"] for r in rows) == table["summary"]["hotspots"] == 1
    assert table["summary"]["highestPowerGpu"]["uuid"] == FakeAgent.uuid(b, 5)
    by_temp = cluster.admin.get("/api/v1/gpus/table?sliceName=w&sort=temperature")["items"]
    assert by_temp[0]["uuid"] == FakeAgent.uuid(b, 5) and by_temp[1]["tempC"] == 70
    assert [r["tempC"] for r in by_temp] == sorted((r["tempC"] for r in by_temp), reverse=True)
    only = cluster.admin.get("/api/v1/gpus/table?sliceName=w&workload=trainer-1")["items"]
    assert {r["gpuNodeName"] for r in only} == {b} and all(r["workloads"] == ["w-dev/trainer-1"] for r in only)
    assert len(cluster.admin.get("/api/v1/gpus/table?gprId=" + other["gprId"])["items"]) == 8
    # Workloads: the workspace's pods and processes with their GPUs; other namespaces are not shown.
    wls = cluster.admin.get("/api/v1/workloads?sliceName=w")["items"]
    assert sorted((x["namespace"], x["name"]) for x in wls) == [("", "python3"), ("w-dev", "trainer-0"),
                                                                 ("w-dev", "trainer-1")]
    proc = [x for x in wls if x["name"] == "python3"][0]
    assert [g["uuid"] for g in proc["gpus"]] == [FakeAgent.uuid(a, 0)] and proc["model"] == "python3"
    t0 = [x for x in wls if x["name"] == "trainer-0"][0]
    assert t0["model"] == "llama-3-70b" and t0["modelConfig"] == "tp=4,pp=2" and t0["jobType"] == "fine-tuning"
    assert t0["gprId"] == st["gprId"] and t0["summary"]["gpus"] == 8 and t0["summary"]["avgUtilPct"] == 80
    # Model details: both pods of the model, 16 GPUs committed, the hottest GPUs, average utilisation.
    models = {m["model"]: m for m in cluster.admin.get("/api/v1/models?sliceName=w")["items"]}
    m = models["llama-3-70b"]
    assert m["gpusCommitted"] == 16 and sorted(m["workloads"]) == ["w-dev/trainer-0", "w-dev/trainer-1"]
    assert m["highestPowerGpu"]["uuid"] == FakeAgent.uuid(b, 5) and m["highestPowerGpu"]["powerW"] == 650
    assert m["highestTempGpu"]["uuid"] == FakeAgent.uuid(b, 5) and m["highestTempGpu"]["tempC"] == 83
    assert m["avgUtilPct"] == 60 and m["gprIds"] == [st["gprId"]] and m["modelConfig"] == "tp=4,pp=2"
    assert cluster.admin.get("/api/v1/models?sliceName=w&model=nope")["items"] == []


def test_views_are_scoped_to_the_callers_workspaces(cluster):
    agent, st, other, a, b = busy_workspace(cluster)
    user = cluster.egsd.api(cluster.key("Viewer", "v"))
    rows = user.get("/api/v1/gpus/table")["items"]
    assert len(rows) == 8 and {r["sliceName"] for r in rows} == {"v"}
    for path in ("/api/v1/gpus/table?sliceName=w", "/api/v1/workloads?sliceName=w", "/api/v1/models?sliceName=w"):
        status, doc = user.call("GET", path)
        assert status == 404, (path, doc)
    status, _ = user.call("GET", "/api/v1/gpus/series?uuid=" + FakeAgent.uuid(a, 0))
    assert status == 404
    assert len(cluster.admin.get("/api/v1/gpus/table")["items"]) == 24  # admins: every GPU
    status, doc = cluster.admin.call("GET", "/api/v1/gpus/table?sort=hot")
    assert status == 422 and doc["error"]["data"]["field"] == "sort"


def test_gpu_time_series_window(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    uuid = FakeAgent.uuid("n1", 3)
    t_start = cluster.advance("1m")["now"]
    for minute in range(5):
        agent.sample("n1", 3, powerW=100 + 10 * minute, tempC=50 + minute, utilPct=20 * minute)
        agent.heartbeat()
        agent.heartbeat()  # two samples in one step are averaged into one point
        cluster.advance("1m")
    s = cluster.admin.get("/api/v1/gpus/series?uuid=%s&window=10m" % uuid)
    pts = s["points"]
    assert s["step"] == "0h1m0s" and s["gpuNodeName"] == "n1" and s["index"] == 3
    assert [p["powerW"] for p in pts[-5:]] == [100, 110, 120, 130, 140] and pts[-1]["samples"] == 2
    assert [p["t"] for p in pts] == sorted(p["t"] for p in pts)
    assert s["summary"]["powerMaxW"] == 140 and s["summary"]["tempMaxC"] == 54
    # Samples k were taken at start + k minutes; their points lie in (start + k - 1 minutes, start + k].
    start = datetime.strptime(t_start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    since = (start + timedelta(seconds=121)).strftime("%Y-%m-%dT%H:%M:%SZ")
    two = cluster.admin.get("/api/v1/gpus/series?uuid=%s&since=%s" % (uuid, since))["points"]
    assert [p["powerW"] for p in two] == [130, 140]
    early = (start - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # (the registration's own sample may share the first point's minute when egsd started on a whole
    # minute: count the points of the two-heartbeat steps)
    pts_early = cluster.admin.get("/api/v1/gpus/series?uuid=%s&since=%s" % (uuid, early))["points"]
    assert len([p for p in pts_early if p["samples"] == 2]) == 5 and len(pts_early) <= 6
    status, doc = cluster.admin.call("GET", "/api/v1/gpus/series?uuid=GPU-nope")
    assert status == 404
    status, doc = cluster.admin.call("GET", "/api/v1/gpus/series?uuid=%s&window=forever" % uuid)
    assert status == 422 and doc["error"]["data"]["field"] == "window"
    # The ring keeps seriesPoints points: older ones fall off.
    cluster.admin.ok("PUT", "/api/v1/settings/observability", {"seriesPoints": 3, "seriesStep": "30s"})
    for _ in range(5):
        agent.heartbeat()
        cluster.advance("30s")
    assert len(cluster.admin.get("/api/v1/gpus/series?uuid=%s&window=1h" % uuid)["points"]) == 3


def test_alerts_raise_once_with_hysteresis_and_resolve(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"])
    st = provisioned(cluster, agent, sliceName="w")
    held = st["status"]["nodes"][0]
    user = cluster.egsd.api(cluster.key("Viewer", "w"))
    agent.sample(held, 1, tempC=91)
    for _ in range(3):
        agent.heartbeat()  # one alert, however many samples stay above
    act = cluster.admin.get("/api/v1/alerts")["items"]
    assert len(act) == 1 and act[0]["reason"] == "GPUTemperatureHigh" and act[0]["gpuUuid"] == FakeAgent.uuid(held, 1)
    assert act[0]["threshold"] == 85 and act[0]["sliceName"] == "w" and act[0]["gprId"] == st["gprId"]
    assert [a["reason"] for a in user.get("/api/v1/alerts")["items"]] == ["GPUTemperatureHigh"]
    raised = [e for e in events(user, "reason=GPUTemperatureHigh")]
    assert len(raised) == 1 and raised[0]["type"] == "Warning" and st["gprId"] in raised[0]["message"]
    agent.sample(held, 1, tempC=82)  # below the threshold but inside the 5 C hysteresis: still active
    agent.heartbeat()
    assert len(cluster.admin.get("/api/v1/alerts")["items"]) == 1
    agent.sample(held, 1, tempC=80)
    agent.heartbeat()
    assert cluster.admin.get("/api/v1/alerts")["items"] == []
    back = events(user, "reason=GPUTemperatureNormal")
    assert len(back) == 1 and back[0]["type"] == "Normal" and "peak 91 C" in back[0]["message"]
    # Power and utilisation, and a node the agent calls Unhealthy; a free node's alerts are admins' only.
    free = "n2" if held == "n1" else "n1"
    agent.sample(held, 0, powerW=720, utilPct=99)
    agent.nodes[free]["health"] = "Unhealthy"
    agent.heartbeat()
    kinds = sorted(a["reason"] for a in cluster.admin.get("/api/v1/alerts")["items"])
    assert kinds == ["GPUPowerHigh", "GPUUtilizationHigh", "NodeUnhealthy"]
    assert sorted(a["reason"] for a in user.get("/api/v1/alerts")["items"]) == ["GPUPowerHigh", "GPUUtilizationHigh"]
    assert [a["reason"] for a in cluster.admin.get("/api/v1/alerts?node=" + free)["items"]] == ["NodeUnhealthy"]
    agent.nodes[free]["health"] = "Healthy"
    agent.heartbeat()
    assert "NodeHealthy" in [e["reason"] for e in events(cluster.admin, "node=" + free)]


def test_thresholds_per_node_and_defaults_from_settings(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    nodes = {n["gpuNodeName"]: n for n in cluster.admin.get("/api/v1/inventory/list")["items"]}
    assert nodes["n1"]["gpuTempThreshold"] == 85 and nodes["n1"]["gpuPowerThreshold"] == 700
    cluster.admin.ok("PUT", "/api/v1/nodes/thresholds", {"clusterName": "c1", "gpuNodeName": "n1",
                                                          "gpuTempThreshold": 70})
    agent.sample("n1", 0, tempC=75)
    agent.sample("n2", 0, tempC=75)
    agent.heartbeat()
    assert [a["gpuNodeName"] for a in cluster.admin.get("/api/v1/alerts")["items"]] == ["n1"]
    assert cluster.admin.ok("PUT", "/api/v1/nodes/thresholds", {"clusterName": "c1", "gpuPowerThreshold": 500})["nodes"] == 2
    for body, field in (({"clusterName": "c1", "gpuTempThreshold": -1}, "gpuTempThreshold"),
                        ({"clusterName": "c1"}, "gpuTempThreshold"),
                        ({"clusterName": "nope", "gpuTempThreshold": 80}, "clusterName"),
                        ({"clusterName": "c1", "gpuNodeName": "nope", "gpuTempThreshold": 80}, "gpuNodeName")):
        status, doc = cluster.admin.call("PUT", "/api/v1/nodes/thresholds", body)
        assert status in (404, 422) and doc["error"]["data"]["field"] == field, (body, doc)
    status, _ = cluster.egsd.api(cluster.key("Owner")).call("PUT", "/api/v1/nodes/thresholds",
                                                            {"clusterName": "c1", "gpuTempThreshold": 80})
    assert status == 403
    # New nodes take the configured defaults; the thresholds survive a restart.
    cluster.admin.ok("PUT", "/api/v1/settings/observability", {"defaultGpuTempThreshold": 78,
                                                                "defaultGpuPowerThreshold": 600, "gpuUtilThreshold": 0})
    FakeAgent(cluster, "c2", ["m1"])
    cluster.egsd.stop()
    cluster.egsd.start()
    nodes = {n["gpuNodeName"]: n for n in cluster.admin.get("/api/v1/inventory/list")["items"]}
    assert nodes["m1"]["gpuTempThreshold"] == 78 and nodes["m1"]["gpuPowerThreshold"] == 600
    assert nodes["n1"]["gpuTempThreshold"] == 70 and nodes["n1"]["gpuPowerThreshold"] == 500
    assert nodes["n2"]["gpuTempThreshold"] == 85


def test_silent_node_alert(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "1m", "keepHeartbeats": False})
    wait_for(lambda: [a["reason"] for a in cluster.admin.get("/api/v1/alerts")["items"]] == ["NodeNotReporting"],
             what="silence alert")
    # The silence grows every second: the answer's peak follows it, the stored row is not rewritten.
    stored = store_query(cluster.egsd, "SELECT updated_at, length(spec) FROM alerts")
    peak = cluster.admin.get("/api/v1/alerts")["items"][0]["peak"]
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "2m", "keepHeartbeats": False})
    wait_for(lambda: cluster.admin.get("/api/v1/alerts")["items"][0]["peak"] >= peak + 120,
             what="the peak to follow the silence")
    assert store_query(cluster.egsd, "SELECT updated_at, length(spec) FROM alerts") == stored
    agent.heartbeat()
    assert cluster.admin.get("/api/v1/alerts")["items"] == []
    got = [e["reason"] for e in events(cluster.admin, "node=n1")]
    assert got[:2] == ["NodeReporting", "NodeNotReporting"]
