"""GET /metrics: the Prometheus text format checked by promtool, GPU series under the DCGM exporter's
names and labels plus cluster/workspace/gpr, control-plane series (queue per shape, GPRs by state,
estimate error, API latency histograms), and scoping to the caller."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

import pytest

from conftest import H100, ROOT, STORE, T4, Cluster
from fakeagent import FakeAgent, provisioned

LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})? (\S+)$')


def scrape(api):
    status, body, resp = api.raw("GET", "/metrics")
    assert status == 200, body
    assert resp.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    return body.decode()


def samples(text):
    """[(name, {label: value}, float)] of every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, line
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def find(text, name, **want):
    return [(l, v) for n, l, v in samples(text) if n == name and all(l.get(k) == x for k, x in want.items())]


def promtool(text):
    """Runs promtool check metrics; returns its complaints.  Parse errors fail the test; the lint's only
    allowed complaint is the DCGM exporter's camelCase label (modelName), kept for dashboard compatibility."""
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (Debian package prometheus; scripts/deps.sh installs it)")
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode()
    assert p.returncode in (0, 3), out  # 1 = the text does not parse
    problems = [l for l in out.splitlines() if l.strip()]
    for l in problems:
        assert l.startswith("DCGM_FI_DEV_") and "label names should be written in 'snake_case'" in l, l
    return problems


def test_dcgm_series_and_promtool(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"], ["w-dev"])
    st = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8)
    node = st["status"]["nodes"][0]
    agent.sample(node, 3, tempC=71.5, powerW=455.25, utilPct=93, memUsedMiB=40960)
    agent.nodes[node]["workloads"] = [{"name": "trainer-0", "namespace": "w-dev", "gpus": [FakeAgent.uuid(node, 3)]}]
    agent.heartbeat()
    text = scrape(cluster.admin)
    want = dict(gpu="3", UUID=FakeAgent.uuid(node, 3), Hostname=node, modelName=H100["gpuModel"], cluster="c1",
                workspace="w", gpr=st["gprId"], device="nvidia3", namespace="w-dev", pod="trainer-0")
    assert [v for _, v in find(text, "DCGM_FI_DEV_GPU_TEMP", **want)] == [71.5]
    assert [v for _, v in find(text, "DCGM_FI_DEV_POWER_USAGE", **want)] == [455.25]
    assert [v for _, v in find(text, "DCGM_FI_DEV_GPU_UTIL", **want)] == [93]
    assert [v for _, v in find(text, "DCGM_FI_DEV_FB_USED", **want)] == [40960]
    assert [v for _, v in find(text, "DCGM_FI_DEV_FB_FREE", **want)] == [H100["memoryMiB"] - 40960]
    free = "n2" if node == "n1" else "n1"
    assert [l["workspace"] for l, _ in find(text, "DCGM_FI_DEV_GPU_TEMP", Hostname=free)] == [""] * 8
    assert len(find(text, "DCGM_FI_DEV_GPU_TEMP")) == 16
    assert "# TYPE DCGM_FI_DEV_GPU_TEMP gauge" in text
    promtool(text)
    # Stale samples are not exported: an agent that stopped reporting leaves no frozen values behind.
    cluster.admin.ok("POST", "/api/v1/debug/clock", {"advance": "2m", "keepHeartbeats": False})
    assert find(scrape(cluster.admin), "DCGM_FI_DEV_GPU_TEMP") == []


def test_label_values_escaped(cluster):
    """A label value's backslash, quote and newline are escaped (a workload's name as the agent sent it)."""
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"], ["w-dev"])
    st = provisioned(cluster, agent, sliceName="w", gpuShape=H100["gpuModel"], exitDuration="1h")
    node = st["status"]["nodes"][0]
    agent.sample(node, 0, tempC=50)
    agent.nodes[node]["workloads"] = [{"name": 'job"1\\a\nb', "namespace": "w-dev", "gpus": [FakeAgent.uuid(node, 0)]}]
    agent.heartbeat()
    text = scrape(cluster.admin)
    assert [l["pod"] for l, _ in find(text, "DCGM_FI_DEV_GPU_TEMP", gpu="0")] == ['job\\"1\\\\a\\nb']
    promtool(text)


def test_control_plane_series(cluster):
    agent = FakeAgent(cluster, "c1", ["n1"])
    FakeAgent(cluster, "c2", ["t1"], shape=T4)
    for w in ("a", "b", "c"):
        cluster.workspace(w, ["c1", "c2"])
    first = provisioned(cluster, agent, sliceName="a", gpuShape=H100["gpuModel"], exitDuration="1h")
    waiting = cluster.gpr(sliceName="b", gpuShape=H100["gpuModel"], clusterName="c1")
    cluster.gpr(sliceName="c", gpuShape=H100["gpuModel"], clusterName="c1")
    for _ in range(3):
        cluster.status(waiting)
    text = scrape(cluster.admin)
    assert find(text, "egs_gpr_queue_length", gpu_shape=H100["gpuModel"])[0][1] == 2
    assert find(text, "egs_gprs", state="Provisioned")[0][1] == 1
    assert find(text, "egs_gprs", state="Queued")[0][1] == 2
    assert find(text, "egs_gprs", state="Complete")[0][1] == 0
    got = find(text, "egs_api_request_duration_seconds_count", method="GET", route="/api/v1/gpr")
    assert got and got[0][1] >= 3
    inf = find(text, "egs_api_request_duration_seconds_bucket", method="GET", route="/api/v1/gpr", le="+Inf")
    assert inf[0][1] == got[0][1]
    assert find(text, "egs_api_requests_total", method="GET", route="/api/v1/gpr", code="2xx")[0][1] >= 3
    assert find(text, "egs_node_gpus", Hostname="t1", allocated="false")[0][1] == 4
    assert find(text, "egs_node_healthy", Hostname="t1", gpu_shape=T4["gpuModel"])[0][1] == 1
    assert find(text, "egs_gpr_queue_oldest_wait_seconds", gpu_shape=H100["gpuModel"])[0][1] >= 0
    # The scheduler's slices by length (wall and CPU): every slice in a bucket, both counted alike.
    slices = find(text, "egs_scheduler_slice_seconds_count")[0][1]
    assert slices >= 1 and find(text, "egs_scheduler_slice_seconds_bucket", le="+Inf")[0][1] == slices
    assert find(text, "egs_scheduler_slice_cpu_seconds_count")[0][1] == slices
    # The scheduler's totals: the runs ended (full walks here), their CPU and wall time; the loop's
    # CPU in store commits.  A create into the queue is planned by one more run.
    runs = find(text, "egs_scheduler_runs_total", walk="full")[0][1]
    assert runs >= 1 and find(text, "egs_scheduler_runs_total", walk="resumed")[0][1] == 0
    assert find(text, "egs_scheduler_cpu_seconds_total")[0][1] > 0
    assert find(text, "egs_scheduler_run_seconds_total")[0][1] >= find(text, "egs_scheduler_run_max_seconds")[0][1] > 0
    assert find(text, "egs_store_commit_cpu_seconds_total")[0][1] > 0
    # SQLite's durability thread: each create above waited for an fdatasync, each one in a bucket.
    # PostgreSQL has no such thread (its COMMIT answers when durable): no store timings.
    fsyncs = find(text, "egs_store_fsync_seconds_count")
    if STORE == "sqlite":
        assert fsyncs[0][1] >= 3 and find(text, "egs_store_fsync_seconds_bucket", le="+Inf")[0][1] == fsyncs[0][1]
        assert find(text, "egs_store_fsync_max_seconds")[0][1] > 0
        assert find(text, "egs_store_catch_up_seconds_count")[0][1] == 0  # a short WAL
        assert find(text, "egs_store_wal_restarts_total")
    else:
        assert not fsyncs and not find(text, "egs_store_wal_restarts_total")
    cluster.gpr(sliceName="c", gpuShape=H100["gpuModel"], clusterName="c1", priority=200)  # before the others
    assert sum(v for _, v in find(scrape(cluster.admin), "egs_scheduler_runs_total")) > runs
    # Unknown paths share one series, so callers cannot create series at will.
    for i in range(3):
        cluster.admin.call("GET", "/api/v1/nope-%d" % i)
    routes = {l["route"] for _, l, _ in samples(scrape(cluster.admin)) if "route" in l}
    assert "other" in routes and not any("nope" in r for r in routes)
    # The waiting GPR starts at the first GPR's exit, as estimated: the estimate error is observed.
    cluster.advance("1h")
    agent.serve()
    agent.serve()
    text = scrape(cluster.admin)
    count = find(text, "egs_gpr_start_estimate_error_seconds_count")[0][1]
    assert count >= 2  # the first GPR (no wait) and the second
    assert find(text, "egs_gpr_start_estimate_error_seconds_bucket", le="60")[0][1] == count
    assert find(text, "egs_events_total", type="Normal")[0][1] > 5
    promtool(text)
    # Every series the Grafana dashboard queries exists.
    with open(os.path.join(ROOT, "deploy", "grafana", "egs-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {re.sub(r"_bucket$", "", m) for e in exprs for m in re.findall(r"\b(DCGM_FI_[A-Z_]+|egs_[a-z_]+)", e)}
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n, _, _ in samples(scrape(cluster.admin))}
    families |= {n for n in re.findall(r"^# TYPE (\S+)", text, re.M)}
    assert used and used <= families, used - families


def test_metrics_are_scoped(cluster):
    agent = FakeAgent(cluster, "c1", ["n1", "n2"])
    cluster.workspace("w", ["c1"])
    cluster.workspace("v", ["c1"])
    st = provisioned(cluster, agent, sliceName="w")
    provisioned(cluster, agent, sliceName="v")
    agent.heartbeat()
    viewer = cluster.egsd.api(cluster.key("Viewer", "w"))
    text = scrape(viewer)
    gpus = find(text, "DCGM_FI_DEV_GPU_TEMP")
    assert len(gpus) == 8 and {l["workspace"] for l, _ in gpus} == {"w"} and {l["gpr"] for l, _ in gpus} == {st["gprId"]}
    assert "egs_gprs" not in text and "egs_api_request" not in text
    status, _, _ = cluster.egsd.api("").raw("GET", "/metrics")
    assert status == 401
    status, _, _ = agent.api.raw("GET", "/metrics")
    assert status == 403


@pytest.fixture
def pieces():
    """A cluster whose scrapes read 2 GPRs or nodes a loop turn (EGS_TEST_SCRAPE_PIECE)."""
    os.environ["EGS_TEST_SCRAPE_PIECE"] = "2"
    try:
        with tempfile.TemporaryDirectory(prefix="egs-scrape-") as tmp:
            c = Cluster(tmp)
            try:
                yield c
            finally:
                c.close()
    finally:
        del os.environ["EGS_TEST_SCRAPE_PIECE"]


def test_scrape_in_pieces(pieces):
    """An admin's scrape reads the GPRs and nodes a few a loop turn and answers after the last: the
    counts are whole, requests between the pieces are served, and scrapes side by side each get theirs."""
    agent = FakeAgent(pieces, "c1", ["n1", "n2", "n3"])
    pieces.workspace("w", ["c1"])
    pieces.workspace("v", ["c1"])
    provisioned(pieces, agent, sliceName="w", gpuShape=H100["gpuModel"], exitDuration="1h")
    for i in range(5):
        pieces.gpr(sliceName="v", gpuShape=H100["gpuModel"], numberOfGPUNodes=3, priority=10 + i)
    got, errors = [], []

    def scrape_one():
        try:
            got.append(scrape(pieces.egsd.api()))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=scrape_one) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(5):  # served while the scrapes go on
        pieces.admin.ok("GET", "/api/v1/clusters")
    for t in threads:
        t.join(60)
    assert not errors and len(got) == 3
    for text in got:
        assert find(text, "egs_gpr_queue_length", gpu_shape=H100["gpuModel"])[0][1] == 5
        assert find(text, "egs_gprs", state="Queued")[0][1] == 5
        assert find(text, "egs_gprs", state="Provisioned")[0][1] == 1
        assert sorted(l["Hostname"] for l, _ in find(text, "egs_node_healthy")) == ["n1", "n2", "n3"]
        assert len(find(text, "egs_node_gpus")) == 3
        assert text.count("# TYPE egs_node_gpus gauge") == 1
        promtool(text)
