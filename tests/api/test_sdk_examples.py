"""Every code example of seed 000 (the SDK reference), run verbatim against a real egsd and real
agents: only the URL and the API key are substituted.  Each example runs twice, on a fresh server:
once with the inventory free and once with every matching node busy, and the results and the
documented exceptions are checked."""
import os
import re

import pytest

from conftest import H100, A100, Cluster, ROOT, wait_for

# A verbatim copy of ../shared/seeds/000_8585d0f41d0f79a3.txt, so CI needs nothing outside the repo.
SEED = os.path.join(ROOT, "tests", "api", "data", "seed000_sdk_reference.txt")
EXAMPLE_URL = "https://egs-core-apis.example.com"
EXAMPLE_KEY = "5067bd55-1aef-4c84-8987-3e966e917f07"
CODE_LINE = re.compile(r"^(import |[A-Za-z_][A-Za-z0-9_]* *=|egs\.)")


def examples():
    """(section title, code) for each "Example" block of the seed, in order."""
    lines = open(SEED, encoding="utf-8").read().splitlines()
    out, title = [], None
    for i, line in enumerate(lines):
        if len(line) < 60 and any(n.startswith("Use this API") for n in lines[i + 1:i + 4]):
            title = line.strip()
        if line.strip() == "Example":
            code = []
            for nxt in lines[i + 1:]:
                if not CODE_LINE.match(nxt):
                    break
                code.append(nxt)
            out.append((title, "\n".join(code)))
    return out


EXAMPLES = examples()


def test_seed_has_all_examples():
    titles = [t for t, _ in EXAMPLES]
    assert titles == ["Create a GPU Request", "Cancel GPU Request", "Update GPU Request", "Update GPU Request Name",
                      "Release GPU", "GPU Request Status", "GPU Request Status by Workspace Name"], titles


def run_example(env, code):
    import egs
    import egs.exceptions  # noqa: F401  (the examples name exceptions through the package)
    code = code.replace(EXAMPLE_URL, env.egsd.url).replace(EXAMPLE_KEY, env.egsd.admin_key)
    ns = {}
    exc = None
    try:
        exec(compile(code, "<seed-000 example>", "exec"), ns)
    except Exception as e:  # the documented exceptions are part of what we check
        exc = e
    return ns, exc


@pytest.fixture(params=["free", "busy"])
def env(request, tmpdir_path):
    c = Cluster(tmpdir_path)
    c.add_cluster("worker-1", [("h100-node-1", H100), ("h100-node-2", H100)])
    c.add_cluster("worker-2", [("a100-node-1", A100)])
    c.busy = request.param == "busy"
    if c.busy:  # other teams hold every worker-1 node for a day
        for i, node in enumerate(("h100-node-1", "h100-node-2")):
            ws = c.workspace("other-%d" % i, ["worker-1"])
            c.wait_state(c.gpr(sliceName=ws, clusterName="worker-1", exitDuration="24h"), "Provisioned")
    yield c
    c.close()


def example(title):
    return [code for t, code in EXAMPLES if t == title][0]


def gprs_of(env, ws="llm-gpt-4o"):
    return env.admin.get("/api/v1/gpr/list?sliceName=" + ws)["items"]


def test_create(env):
    ns, exc = run_example(env, example("Create a GPU Request"))
    assert exc is None, repr(exc)
    assert ns["inventory"][0].cluster_name == "worker-1" and ns["inventory"][0].memory >= 81920
    assert ns["workspace_name"] == "llm-gpt-4o"
    gid = ns["gpu_request_id"]
    assert re.match(r"^gpr-[0-9a-f]{8}-[0-9a-f]{4}$", gid)
    st = env.status(gid)
    assert st["gprName"] == "gpt-4o-workload" and st["priority"] == 201 and st["exitDuration"] == "6h0m0s"
    assert st["numberOfGPUs"] == 1 and st["memoryPerGpu"] == 81920
    if env.busy:
        assert st["status"]["provisioningStatus"] == "Queued"
        assert st["estimatedWaitTime"] in ("24h0m0s", "23h59m59s", "23h59m58s")
    else:
        env.wait_state(gid, "Provisioned")


def test_cancel(env):
    import egs
    ns, exc = run_example(env, example("Cancel GPU Request"))
    gid = ns["gpu_request_id"]
    if env.busy:
        assert exc is None, repr(exc)
        assert env.status(gid)["status"]["provisioningStatus"] == "Cancelled"
    else:  # documented: the GPU was provisioned already
        assert isinstance(exc, egs.exceptions.GpuAlreadyProvisioned), repr(exc)
        assert env.status(gid)["status"]["provisioningStatus"] in ("Provisioning", "Provisioned")


def test_update_priority(env):
    import egs
    ns, exc = run_example(env, example("Update GPU Request"))
    gid = ns["gpu_request_id"]
    if env.busy:
        assert exc is None, repr(exc)
        assert env.status(gid)["priority"] == 301
    else:
        assert isinstance(exc, egs.exceptions.GpuAlreadyProvisioned), repr(exc)
        assert env.status(gid)["priority"] == 201


def test_update_name_example_runs(env):
    ns, exc = run_example(env, example("Update GPU Request Name"))
    assert exc is None, repr(exc)
    assert len(ns["inventory"]) == 3
    # The seed's example stops before the call; the function itself, as documented:
    import egs
    ws = egs.create_workspace("names", ["worker-1"], ["names-dev"], "J", "j@x.io", ns["auth"])
    gid = egs.request_gpu("a", ws, "worker-1", 1, 1, 80, "", "", "1h", 101, ns["auth"])
    if env.busy:
        egs.update_gpu_request_name(gid, "b", ns["auth"])
        assert env.status(gid)["gprName"] == "b"
    else:
        with pytest.raises(egs.exceptions.GpuAlreadyProvisioned):
            egs.update_gpu_request_name(gid, "b", ns["auth"])


def test_release(env):
    import egs
    ns, exc = run_example(env, example("Release GPU"))
    gid = ns["gpu_request_id"]
    if env.busy:  # still queued: not provisioned, cancel is the way
        assert isinstance(exc, egs.exceptions.GpuNotProvisioned), repr(exc)
        assert env.status(gid)["status"]["provisioningStatus"] == "Queued"
    else:
        assert exc is None, repr(exc)
        env.wait_state(gid, "Complete")
        assert env.status(gid)["earlyRelease"] is True
        with pytest.raises(egs.exceptions.GpuAlreadyReleased):  # documented: released already
            egs.release_gpu(gid, ns["auth"])


def test_status(env):
    ns, exc = run_example(env, example("GPU Request Status"))
    assert exc is None, repr(exc)
    g = ns["gpu__request"]
    assert g.request_id == ns["gpu_request_id"] and g.workspace_name == "llm-gpt-4o"
    assert g.cluster_name == "worker-1" and g.number_of_gpus == 1 and g.number_of_gpu_nodes == 1
    assert g.priority == 201 and g.gpr_name == "gpt-4o-workload" and g.exit_duration == "6h0m0s"
    assert g.gpu_shape == "NVIDIA-H100-80GB-HBM3" and g.instance_type == "p5.48xlarge"
    assert g.estimated_start_time
    if env.busy:
        assert g.status.provisioning_status == "Queued" and g.status.nodes == []
        assert g.status.internal_state == "Queued"
    else:
        assert g.status.provisioning_status in ("Provisioning", "Provisioned")
        assert g.status.nodes and g.status.nodes[0].startswith("h100-node-")


def test_status_for_workspace(env):
    ns, exc = run_example(env, example("GPU Request Status by Workspace Name"))
    assert exc is None, repr(exc)
    reqs = ns["gpu_requests"]
    assert [r.request_id for r in reqs] == [ns["gpu_request_id"]]
    assert reqs[0].status.provisioning_status in (("Queued",) if env.busy else ("Provisioning", "Provisioned"))


def test_examples_twice_on_one_server_raise_workspace_exists(env):
    import egs
    run_example(env, example("Create a GPU Request"))
    ns, exc = run_example(env, example("Create a GPU Request"))
    assert isinstance(exc, egs.exceptions.WorkspaceAlreadyExists), repr(exc)
    assert len(gprs_of(env)) == 1
