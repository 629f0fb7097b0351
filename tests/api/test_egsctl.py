"""egsctl, the real binary, against a real egsd and egs-agents: contexts (two servers), get/describe/
create/waittime/release/delete, apply -f (idempotent, errors with file:line, every kind), delete -f,
wait with --timeout (met and timed out, driven by the dev clock), progress as plain lines when piped
and as a live line on a terminal, -o json/yaml parsed back, and the documented exit codes."""
import json
import os
import pty
import re
import stat
import subprocess
import tempfile
import time

import pytest
import yaml

from conftest import BIN, H100, T4, Api, Cluster, Egsd, wait_for

import egs  # sdk/python, put on sys.path by conftest

EGSCTL = os.path.join(BIN, "egsctl")

# The documented exit codes (docs/egsctl.md).
OK, FAILED, USAGE, NOT_FOUND, AUTH, UNREACHABLE, TIMEOUT, CONFLICT, NEVER = 0, 1, 2, 3, 4, 5, 6, 7, 8


class Ctl:
    """Runs egsctl with its own config file."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.config = os.path.join(tmp, "egs", "config")

    def __call__(self, *args, stdin=None, timeout=60, env=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("EGS_")}
        e["EGS_CONFIG"] = self.config
        e.update(env or {})
        return subprocess.run([EGSCTL] + [str(a) for a in args], input=stdin, capture_output=True, text=True,
                              timeout=timeout, env=e)

    def ok(self, *args, **kw):
        p = self(*args, **kw)
        assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
        return p

    def json(self, *args):
        return json.loads(self.ok(*args, "-o", "json").stdout)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path


@pytest.fixture(scope="module")
def env():
    """One egsd with two clusters of mock GPUs, an admin context, shared by the module's tests
    (each test uses its own workspaces)."""
    with tempfile.TemporaryDirectory(prefix="egs-ctl-") as tmp:
        c = Cluster(tmp)
        c.add_cluster("worker-1", [("h100-%d" % i, H100) for i in range(1, 5)])
        c.add_cluster("worker-2", [("t4-1", T4)])
        ctl = Ctl(tmp)
        ctl.ok("login", c.egsd.url, "--key-file", os.path.join(c.egsd.data_dir, "admin.key"), "--name", "main")
        try:
            yield c, ctl
        finally:
            c.close()


def manifest(*docs):
    return "---\n".join(docs)


def ws_doc(name, clusters=("worker-1",), namespaces=None, extra=""):
    ns = "  namespaces: [%s]\n" % ", ".join(namespaces) if namespaces else ""
    return ("apiVersion: egs.avesha.io/v1\nkind: SliceWorkspace\nmetadata:\n  name: %s\nspec:\n"
            "  clusters: [%s]\n%s  username: ann\n  email: ann@example.com\n%s" % (name, ", ".join(clusters), ns, extra))


def gpr_doc(name, ws, priority=101, duration="1h", gpus=1, extra=""):
    return ("apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata:\n  name: %s\nspec:\n"
            "  sliceName: %s\n  numberOfGPUNodes: 1\n  numberOfGPUs: %d\n  exitDuration: %s\n  priority: %d\n%s"
            % (name, ws, gpus, duration, priority, extra))


def on_terminal(ctl, *args):
    """Runs egsctl with stderr on a pseudo-terminal; returns (exit code, what it wrote there)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([EGSCTL] + list(args), stdout=subprocess.DEVNULL, stderr=slave,
                         env=dict(os.environ, EGS_CONFIG=ctl.config))
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO once the child has closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(10), out.decode()


def state(c, gid):
    return c.status(gid)["status"]["provisioningStatus"]


def live(c, ws, name):
    items = c.admin.get("/api/v1/gpr/list?sliceName=" + ws)["items"]
    return [g for g in items if g["gprName"] == name and g["status"]["provisioningStatus"] not in
            ("Complete", "Cancelled", "Rejected", "Error")]


# ---- help, usage and exit codes ----

def test_help_on_every_command(env):
    _, ctl = env
    top = ctl.ok("--help").stdout
    assert "usage: egsctl" in top and "exit codes" in top
    for cmd in ("login", "config", "get", "describe", "create", "waittime", "wait", "release", "delete", "apply"):
        p = ctl(cmd, "--help")
        assert p.returncode == OK and p.stdout.startswith("usage: egsctl " + cmd), (cmd, p.stdout, p.stderr)
        assert ctl("help", cmd).stdout == p.stdout
    p = ctl("frobnicate")
    assert p.returncode == USAGE and "unknown command 'frobnicate'" in p.stderr
    p = ctl("get", "gprs", "--colour")
    assert p.returncode == USAGE and "unknown option --colour" in p.stderr and "--help" in p.stderr
    p = ctl("get", "pods")
    assert p.returncode == USAGE and "unknown resource 'pods'" in p.stderr
    p = ctl("get", "gprs", "-o", "xml")
    assert p.returncode == USAGE and "table, wide, json, yaml or name" in p.stderr
    assert ctl("create", "gpr", "x", "-w", "ws").returncode == USAGE  # --duration missing
    assert ctl("wait", "gpr", "gpr-x", "--timeout", "ten").returncode == USAGE
    assert ctl("version").stdout.startswith("egsctl ")


def test_contexts_on_two_servers(env, tmp_path):
    c, _ = env
    ctl = Ctl(str(tmp_path))
    other = Egsd(os.path.join(str(tmp_path), "egsd2")).start()
    try:
        # Not logged in yet: a clear message and the "credentials" exit code.
        p = ctl("get", "gprs")
        assert p.returncode == AUTH and "not logged in" in p.stderr
        key1 = os.path.join(c.egsd.data_dir, "admin.key")
        key2 = os.path.join(other.data_dir, "admin.key")
        # A wrong key is refused before anything is saved.
        bad = ctl.write("bad.key", "00000000-0000-4000-8000-000000000000\n")
        p = ctl("login", c.egsd.url, "--key-file", bad)
        assert p.returncode == AUTH and "refused the API key" in p.stderr
        assert not os.path.exists(ctl.config)
        ctl.ok("login", c.egsd.url, "--key-file", key1, "--name", "one")
        p = ctl.ok("login", other.url, "--key-file", key2)  # default name: host:port
        assert "127.0.0.1:%d" % other.port in p.stdout
        assert stat.S_IMODE(os.stat(ctl.config).st_mode) == 0o600
        lines = ctl.ok("config", "get-contexts").stdout.splitlines()
        assert re.match(r"CURRENT\s+NAME\s+SERVER", lines[0])
        assert re.match(r"\*\s+127\.0\.0\.1:%d\s+%s" % (other.port, re.escape(other.url)), lines[2])
        # The second server has no clusters; the first has two: contexts pick the server.
        assert ctl.json("get", "clusters")["items"] == []
        assert len(ctl.json("get", "clusters", "--context", "one")["items"]) == 2
        ctl.ok("config", "use-context", "one")
        assert ctl.ok("config", "current-context").stdout.strip() == "one"
        assert len(ctl.json("get", "clusters")["items"]) == 2
        view = yaml.safe_load(ctl.ok("config", "view").stdout)
        assert {x["apiKey"] for x in view["contexts"]} == {"REDACTED"}
        assert ctl("config", "use-context", "nope").returncode == NOT_FOUND
        assert ctl("get", "gprs", "--context", "nope").returncode == USAGE
        ctl.ok("config", "delete-context", "127.0.0.1:%d" % other.port)
        assert len(yaml.safe_load(open(ctl.config))["contexts"]) == 1
        # Flags alone work without any context, and an unreachable server says so.
        p = ctl("get", "clusters", "--server", other.url, "--key-file", key2, "--config", "/nonexistent/cfg")
        assert p.returncode == OK
        other.stop()
        p = ctl("get", "clusters", "--server", other.url, "--key-file", key2)
        assert p.returncode == UNREACHABLE and "cannot reach " + other.url in p.stderr
    finally:
        other.stop()


# ---- get and describe, every output format ----

def test_get_every_resource_and_format(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("get-ws.yaml", ws_doc("get-ws", namespaces=["get-ns"])))
    gid = c.gpr(sliceName="get-ws", gprName="getter")
    c.wait_state(gid, "Provisioned")
    for res in ("gprs", "workspaces", "nodes", "gpus", "clusters", "events", "queue"):
        as_json = ctl.json("get", res)
        as_yaml = yaml.safe_load(ctl.ok("get", res, "-o", "yaml").stdout)
        assert as_yaml == as_json, res  # YAML round-trips: timestamps and "0h2m0s" stay strings
        assert isinstance(as_json["items"], list)
        ctl.ok("get", res)
        ctl.ok("get", res, "-o", "wide")
    table = ctl.ok("get", "gprs", "-w", "get-ws").stdout.splitlines()
    assert re.match(r"ID\s+NAME\s+WORKSPACE\s+STATUS\s+PRIORITY\s+GPUS\s+WAIT", table[0])
    assert re.match(r"%s\s+getter\s+get-ws\s+Provisioned\s+101\s+1x1\s+-" % gid, table[1])
    assert ctl.ok("get", "gprs", "-w", "get-ws", "-o", "name").stdout == "gpr/%s\n" % gid
    one = ctl.json("get", "gpr", gid)  # one named object: the object itself
    assert one["gprId"] == gid and one["status"]["provisioningStatus"] == "Provisioned"
    assert yaml.safe_load(ctl.ok("get", "gpr", gid, "-o", "yaml").stdout) == one
    nodes = ctl.ok("get", "nodes", "--cluster", "worker-2").stdout
    assert "t4-1" in nodes and "h100" not in nodes
    ws = ctl.json("get", "workspaces", "get-ws")
    assert ws["name"] == "get-ws" and ws["namespaces"][0]["namespace"] == "get-ns"
    assert ctl("get", "workspaces", "nope").returncode == NOT_FOUND
    ev = ctl.json("get", "events", "--gpr", gid)["items"]
    assert ev and all(e["involvedObject"]["name"] == gid for e in ev)
    assert ctl("get", "gpr", "gpr-00000000-0000").returncode == NOT_FOUND
    # gpr/ID, as create and -o name print it, wherever an id is expected (docs/egsctl.md)
    assert ctl.json("get", "gprs", "gpr/" + gid) == one
    assert ctl.json("get", "gpr/" + gid) == one
    assert ctl("get", "gprs", "workspace/" + gid).returncode == USAGE
    assert ctl("get", "nodes/" + gid).returncode == USAGE
    assert ctl("get", "gprs", "gpr/gpr-00000000-0000").returncode == NOT_FOUND
    assert ctl("get", "gprs", "--status", "Sleeping").returncode == USAGE
    text = ctl.ok("describe", "gpr", gid).stdout
    for want in ("Name:             getter", "Workspace:        get-ws", "Status:           Provisioned",
                 "Priority:         101 (medium)", "Events:", "Provisioned"):
        assert want in text, (want, text)
    assert ctl.json("describe", "gpr", gid)["gprId"] == gid
    assert "get-ns (on worker-1)" in ctl.ok("describe", "workspace", "get-ws").stdout
    assert ctl("describe", "gpr", "gpr-00000000-0000").returncode == NOT_FOUND
    ctl.ok("release", "gpr", gid)


def test_create_waittime_release_delete(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("life.yaml", ws_doc("life-ws")))
    p = ctl.ok("create", "gpr", "first", "-w", "life-ws", "--gpus", "2", "--duration", "2h", "--priority", "201",
               "--gpu-shape", "NVIDIA-H100-80GB-HBM3", "--memory", "80", "--enable-eviction")
    gid = re.match(r"gpr/(gpr-\S+) created \(first: ", p.stdout).group(1)
    g = c.status(gid)
    assert (g["numberOfGPUs"], g["priority"], g["memoryPerGpu"], g["enableEviction"]) == (2, 201, 81920, True)
    c.wait_state(gid, "Provisioned")
    # The second GPR of the workspace waits for the first (one provisioned GPR per workspace).
    second = ctl.ok("create", "gpr", "second", "-w", "life-ws", "--duration", "1h", "-o", "name").stdout.strip()
    assert second.startswith("gpr/gpr-")
    second = second[4:]
    assert state(c, second) == "Queued"
    wt = ctl.json("waittime", "-w", "life-ws", "--gpus", "8", "--duration", "1h")
    assert wt["items"] and wt["items"][0]["clusterName"] == "worker-1"
    assert re.match(r"CLUSTER\s+SHAPE\s+INSTANCE", ctl.ok("waittime", "-w", "life-ws", "--duration", "1h").stdout)
    # Conflicts exit 7 with a hint; the right verb works.
    p = ctl("release", "gpr", second)
    assert p.returncode == CONFLICT and "egsctl delete gpr %s" % second in p.stderr
    p = ctl("delete", "gpr", gid)
    assert p.returncode == CONFLICT and "egsctl release gpr %s" % gid in p.stderr
    assert ctl.ok("delete", "gpr", second).stdout == "gpr/%s cancelled\n" % second
    assert ctl("delete", "gpr", second).returncode == CONFLICT
    assert ctl.ok("release", "gpr/" + gid).stdout == "gpr/%s released\n" % gid
    # Refusals by the server: unknown workspace (3), unsatisfiable (1, with the reason), bad value (1).
    p = ctl("create", "gpr", "x", "-w", "no-such-ws", "--duration", "1h")
    assert p.returncode == NOT_FOUND and "Slice Workspace Not Found" in p.stderr
    p = ctl("create", "gpr", "x", "-w", "life-ws", "--duration", "1h", "--gpus", "64")
    assert p.returncode == FAILED and "no node in the inventory could ever satisfy" in p.stderr
    assert ctl("create", "gpr", "x", "-w", "life-ws", "--duration", "1h", "--priority", "0").returncode == USAGE


def test_roles_map_to_exit_codes(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("role.yaml", ws_doc("role-ws")))
    keyfile = ctl.write("viewer.key", c.key("Viewer", "role-ws") + "\n")
    p = ctl("create", "gpr", "x", "-w", "role-ws", "--duration", "1h", "--key-file", keyfile, "--server", c.egsd.url)
    assert p.returncode == AUTH and "Viewer" in p.stderr
    assert ctl("get", "gprs", "-w", "role-ws", "--key-file", keyfile, "--server", c.egsd.url).returncode == OK


# ---- apply and delete -f ----

def test_apply_is_idempotent(env):
    c, ctl = env
    tokens = os.path.join(ctl.tmp, "tokens")
    os.makedirs(tokens, exist_ok=True)
    cluster = "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata:\n  name: edge-1\nspec:\n  apiServer: https://10.9.0.1:6443\n"
    path = ctl.write("idem.yaml", manifest(gpr_doc("hold", "idem-ws", duration="3h"), ws_doc("idem-ws"), cluster,
                                           gpr_doc("waiter", "idem-ws", priority=150)))
    p = ctl.ok("apply", "-f", path, "--token-dir", tokens)
    lines = p.stdout.splitlines()
    # Dependency order, whatever the file's order: clusters, workspaces, then GPRs as written.
    assert lines[0] == "cluster/edge-1 created (agent token written to %s/edge-1.token)" % tokens
    assert lines[1] == "workspace/idem-ws created"
    assert lines[2].startswith("gpr/hold created (gpr-") and lines[3].startswith("gpr/waiter created (gpr-")
    token = open(os.path.join(tokens, "edge-1.token")).read().strip()
    assert len(token) >= 32 and stat.S_IMODE(os.stat(os.path.join(tokens, "edge-1.token")).st_mode) == 0o600
    assert token not in p.stdout + p.stderr
    # The second apply changes nothing and says so for every object.
    p = ctl.ok("apply", "-f", path)
    assert [l.split(" ")[:2] for l in p.stdout.splitlines()] == [
        ["cluster/edge-1", "unchanged"], ["workspace/idem-ws", "unchanged"], ["gpr/hold", "unchanged"],
        ["gpr/waiter", "unchanged"]]
    assert len(live(c, "idem-ws", "hold")) == 1 and len(live(c, "idem-ws", "waiter")) == 1
    # A change to the waiting GPR is applied; the provisioned one is left alone with a message.
    c.wait_state(live(c, "idem-ws", "hold")[0]["gprId"], "Provisioned")
    path = ctl.write("idem.yaml", manifest(gpr_doc("hold", "idem-ws", duration="4h"), ws_doc("idem-ws", ("worker-1", "worker-2")),
                                           cluster, gpr_doc("waiter", "idem-ws", priority=180, duration="2h")))
    out = json.loads(ctl.ok("apply", "-f", path, "-o", "json").stdout)["items"]
    actions = {(i["kind"], i["name"]): i for i in out}
    assert actions[("SliceWorkspace", "idem-ws")]["action"] == "configured"
    assert actions[("GPUProvisioningRequest", "waiter")]["action"] == "configured"
    assert "exitDuration" in actions[("GPUProvisioningRequest", "waiter")]["message"]
    hold = actions[("GPUProvisioningRequest", "hold")]
    assert hold["action"] == "unchanged" and "changes only while it waits" in hold["message"]
    w = c.status(actions[("GPUProvisioningRequest", "waiter")]["gprId"])
    assert (w["priority"], w["exitDuration"]) == (180, "2h0m0s")
    assert sorted(c.admin.get("/api/v1/slice-workspace?workspaceName=idem-ws")["clusters"]) == ["worker-1", "worker-2"]
    assert "unchanged" in ctl.ok("apply", "-f", path).stdout.splitlines()[1]
    # Standard input and a directory work too.
    assert ctl.ok("apply", "-f", "-", stdin=open(path).read()).stdout.count("unchanged") == 4
    d = os.path.join(ctl.tmp, "idem-dir")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "a.yaml"), "w") as f:
        f.write(ws_doc("idem-ws", ("worker-1", "worker-2")))
    assert ctl.ok("apply", "-f", d).stdout == "workspace/idem-ws unchanged\n"
    ctl.ok("delete", "-f", path, "--release")


def test_apply_errors_name_file_and_line(env):
    c, ctl = env
    bad = ctl.write("typo.yaml", manifest(ws_doc("typo-ws"), gpr_doc("job", "typo-ws", extra="  priorty: 5\n")))
    p = ctl("apply", "-f", bad)
    assert p.returncode == USAGE
    assert "%s:20: spec.priorty: unknown field (did you mean priority?)" % bad in p.stderr
    assert "nothing was changed" in p.stderr
    assert ctl("get", "workspaces", "typo-ws").returncode == NOT_FOUND  # the good document was not applied
    p = ctl("apply", "-f", ctl.write("type.yaml", gpr_doc("job", "typo-ws").replace("numberOfGPUNodes: 1",
                                                                                   'numberOfGPUNodes: "1"')))
    assert p.returncode == USAGE and 'type.yaml:7: spec.numberOfGPUNodes: expected an integer, got the string "1"' in p.stderr
    p = ctl("apply", "-f", os.path.join(ctl.tmp, "missing.yaml"))
    assert p.returncode == USAGE and "missing.yaml: No such file or directory" in p.stderr
    # The server's refusal points at the line of the field it names.
    path = ctl.write("server.yaml", manifest(ws_doc("srv-ws"), gpr_doc("job", "srv-ws", priority=5000)))
    p = ctl("apply", "-f", path)
    assert p.returncode == FAILED
    assert "%s:19: gpr/job: create: priority must be between 1 and 1000" % path in p.stderr
    assert "workspace/srv-ws created" in p.stdout  # the other objects were applied
    # A WorkspacePolicy the server refuses points at the line of the member it names.
    policy = ("apiVersion: egs.avesha.io/v1\nkind: WorkspacePolicy\nmetadata: {name: srv-ws}\nspec:\n  maxGPRs: 2\n"
              "  softLimits:\n    maxGPRs: 3\n")
    path = ctl.write("policy.yaml", manifest(ws_doc("srv-ws"), policy))
    p = ctl("apply", "-f", path)
    assert p.returncode == FAILED and "%s:15: workspacepolicy/srv-ws: set: softLimits.maxGPRs 3 is beyond the hard " \
                                      "maxGPRs 2" % path in p.stderr, p.stderr
    assert p.stdout == "workspace/srv-ws unchanged\n"


def policy_doc(ws, body, name_in_spec=False):
    meta = "metadata: {name: %s}\nspec:\n" % ws if not name_in_spec else "metadata: {}\nspec:\n  sliceName: %s\n" % ws
    return "apiVersion: egs.avesha.io/v1\nkind: WorkspacePolicy\n" + meta + body


def test_apply_workspace_policy(env):
    c, ctl = env
    body = ("  maxGPRs: 4\n  maxExitDurationPerGPR: 2d\n  priorityRange: {min: 1, max: 200}\n"
            "  gpuShapes: [NVIDIA-H100-80GB-HBM3, NVIDIA-H100-80GB-HBM3]\n  maxGPUPerGpr: 16\n  maxMemoryPerGpr: 1280\n"
            "  concurrentGpuQuota: 16\n  enableAutoEviction: false\n  requeueOnFailure: true\n"
            "  softLimits:\n    maxExitDurationPerGPR: 6h\n    priorityRange: {max: 150, min: 1}\n")
    path = ctl.write("pol.yaml", manifest(ws_doc("pol-ws"), policy_doc("pol-ws", body)))
    assert ctl.ok("apply", "-f", path).stdout == "workspace/pol-ws created\nworkspacepolicy/pol-ws created\n"
    got = c.admin.get("/api/v1/slice-workspace/policy?workspaceName=pol-ws")
    assert got["maxExitDurationPerGPR"] == "48h0m0s" and got["gpuShapes"] == [H100["gpuModel"]], got
    assert got["softLimits"] == {"maxExitDurationPerGPR": "6h0m0s", "priorityRange": {"min": 1, "max": 150}}
    # Idempotent: the same manifest (spelled differently) changes nothing.
    assert ctl.ok("apply", "-f", path).stdout == "workspace/pol-ws unchanged\nworkspacepolicy/pol-ws unchanged\n"
    assert ctl.ok("apply", "-f", ctl.write("pol2.yaml", policy_doc("pol-ws", body.replace("2d", "48h0m0s"),
                                                                   name_in_spec=True))).stdout == \
        "workspacepolicy/pol-ws unchanged\n"
    # The whole policy is the manifest's: a limit left out is cleared.
    smaller = body.replace("  maxGPRs: 4\n", "")
    assert ctl.ok("apply", "-f", ctl.write("pol3.yaml", policy_doc("pol-ws", smaller))).stdout == \
        "workspacepolicy/pol-ws configured\n"
    assert "maxGPRs" not in c.admin.get("/api/v1/slice-workspace/policy?workspaceName=pol-ws")
    # get and describe show it.
    table = ctl.ok("get", "policy", "pol-ws").stdout
    assert re.search(r"pol-ws\s+priorityRange\s+1-200\s+1-150", table), table
    assert re.search(r"pol-ws\s+maxMemoryPerGpr\s+1280GB\s+-", table), table
    assert ctl.json("get", "policy", "pol-ws")["concurrentGpuQuota"] == 16
    everything = ctl.ok("get", "policies").stdout
    assert re.search(r"\* \(global\)\s+maxNodesPerGpr\s+64", everything) and "pol-ws" in everything, everything
    assert "softLimits.maxExitDurationPerGPR: \"6h0m0s\"" in ctl.ok("describe", "workspace", "pol-ws").stdout
    # A GPR manifest over a hard limit: the server's 422 points at the line of the field it names;
    # over a soft one it is created Pending.
    p = ctl("apply", "-f", ctl.write("pol-gpr.yaml", gpr_doc("big", "pol-ws", priority=250)))
    assert p.returncode == FAILED and "pol-gpr.yaml:10: gpr/big: create: priority 250 is outside the limit " \
                                      "priorityRange 1-200 of workspace pol-ws's policy" in p.stderr, p.stderr
    ctl.ok("apply", "-f", ctl.write("pol-gpr2.yaml", gpr_doc("long", "pol-ws", duration="8h")))
    assert state(c, live(c, "pol-ws", "long")[0]["gprId"]) == "Pending"
    # delete -f removes the policy (and, after it, the workspace); a second time it is not found.
    out = ctl.ok("delete", "-f", path).stdout
    assert "workspacepolicy/pol-ws deleted" in out and "workspace/pol-ws deleted" in out, out
    p = ctl("delete", "-f", path)
    assert p.returncode == NOT_FOUND and "workspacepolicy/pol-ws: not found" in p.stderr


def test_delete_files(env):
    c, ctl = env
    path = ctl.write("del.yaml", manifest(ws_doc("del-ws"), gpr_doc("a", "del-ws", duration="2h"), gpr_doc("b", "del-ws")))
    ctl.ok("apply", "-f", path)
    a = live(c, "del-ws", "a")[0]["gprId"]
    b = live(c, "del-ws", "b")[0]["gprId"]
    c.wait_state(a, "Provisioned")
    p = ctl("delete", "-f", path)
    assert p.returncode == CONFLICT and "add --release" in p.stderr
    assert "gpr/b cancelled (%s)" % b in p.stdout and state(c, b) == "Cancelled"
    # b is gone already: like kubectl, that is an error unless --ignore-not-found.
    p = ctl("delete", "-f", path, "--release")
    assert p.returncode == NOT_FOUND and "del.yaml:21: gpr/b: not found" in p.stderr
    assert "gpr/a released (%s)" % a in p.stdout and "workspace/del-ws deleted" in p.stdout
    assert ctl.ok("delete", "-f", path, "--ignore-not-found").stdout.count("not found") == 3


# ---- waiting ----

def test_wait_times_out_then_succeeds(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("wait.yaml", ws_doc("wait-ws")))
    first = c.gpr(sliceName="wait-ws", gprName="first", exitDuration="2h")
    c.wait_state(first, "Provisioned")
    second = c.gpr(sliceName="wait-ws", gprName="second")
    t0 = time.time()
    p = ctl("wait", "gpr", second, "--for=Provisioned", "--timeout=2s")
    assert p.returncode == TIMEOUT and 1.5 < time.time() - t0 < 10
    assert "timed out after 2s waiting for gpr %s to be Provisioned (it is Queued)" % second in p.stderr
    # Piped, progress is plain lines: the position and estimate, once (nothing changed meanwhile).
    lines = [l for l in p.stderr.splitlines() if "gpr/%s (second)" % second in l]
    assert len(lines) == 1, p.stderr
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ gpr/%s \(second\) Queued: position \d+ of \d+, estimated start "
                    r"\S+Z \(in (1h59m|2h)\)$" % second, lines[0]), lines[0]
    assert "\r" not in p.stderr and "\033" not in p.stderr
    # Now wait for real, and let the first GPR's window end: the second starts.
    w = subprocess.Popen([EGSCTL, "wait", "gpr/" + second, "--timeout=60s"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, EGS_CONFIG=ctl.config))
    time.sleep(1.5)
    c.advance("2h1m")
    out, err = w.communicate(timeout=30)
    assert w.returncode == OK, err
    assert out == "gpr/%s condition met: Provisioned\n" % second
    states = [re.search(r"\(second\) (\w+)", l).group(1) for l in err.splitlines() if "(second)" in l]
    assert states[0] == "Queued" and states[-1] == "Provisioned", err
    # A GPR that can no longer get there ends the wait at once with its own code.
    third = c.gpr(sliceName="wait-ws", gprName="third")
    ctl.ok("delete", "gpr", third)
    p = ctl("wait", "gpr", third, "--timeout=30s")
    assert p.returncode == NEVER and "is Cancelled and can no longer become Provisioned" in p.stderr
    assert ctl("wait", "gpr", "gpr-00000000-0000", "--timeout=5s").returncode == NOT_FOUND
    ctl.ok("wait", "gpr", third, "--for=cancelled", "--timeout=5s")
    ctl.ok("release", "gpr", second)


def test_apply_wait_shows_progress(env):
    c, ctl = env
    path = ctl.write("aw.yaml", manifest(ws_doc("aw-ws", ("worker-2",)), gpr_doc("t4-job", "aw-ws", extra="  gpuShape: Tesla-T4\n")))
    p = ctl("apply", "-f", path, "--wait", "--timeout", "30s")
    assert p.returncode == OK, p.stderr
    gid = live(c, "aw-ws", "t4-job")[0]["gprId"]
    assert "gpr/%s condition met: Provisioned" % gid in p.stdout
    assert re.search(r"Z gpr/%s \(t4-job\) Provisioned: 1 GPUs until \S+Z" % gid, p.stderr), p.stderr
    # Applied again with --wait: unchanged, and already there.
    p = ctl.ok("apply", "-f", path, "--wait")
    assert "gpr/t4-job unchanged" in p.stdout and "condition met" in p.stdout
    # --timeout without --wait is a usage error.
    assert ctl("apply", "-f", path, "--timeout", "5s").returncode == USAGE
    ctl.ok("release", "gpr", gid)


def test_get_queue_is_in_start_order(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("q.yaml", ws_doc("q-ws", ("worker-2",))))
    hold = c.gpr(sliceName="q-ws", gprName="hold", exitDuration="1h", gpuShape="Tesla-T4")
    c.wait_state(hold, "Provisioned")
    low = c.gpr(sliceName="q-ws", gprName="low", priority=50, gpuShape="Tesla-T4")
    high = c.gpr(sliceName="q-ws", gprName="high", priority=250, gpuShape="Tesla-T4")
    q = ctl.json("get", "queue", "-w", "q-ws")
    items = q["items"]
    assert [g["gprId"] for g in items] == [high, low]
    assert 1 <= items[0]["position"] < items[1]["position"] <= q["queueLength"]
    assert items[0]["estimatedStartTime"] <= items[1]["estimatedStartTime"]
    table = ctl.ok("get", "queue", "-w", "q-ws").stdout.splitlines()
    assert re.match(r"POS\s+ID\s+NAME", table[0])
    assert re.match(r"%d\s+%s\s+high" % (items[0]["position"], high), table[1])
    assert re.match(r"%d\s+%s\s+low" % (items[1]["position"], low), table[2])
    # wait shows the same position; on a terminal as a live line redrawn in place.
    rc, err = on_terminal(ctl, "wait", "gpr", low, "--timeout=2s")
    assert rc == TIMEOUT
    assert "Queued: position %d of %d" % (items[1]["position"], q["queueLength"]) in err
    assert "\r\033[K" in err and err.count("gpr/%s (low) Queued" % low) >= 2, repr(err)
    for g in (low, high):
        ctl.ok("delete", "gpr", g)
    ctl.ok("release", "gpr", hold)
    assert ctl.json("get", "queue", "-w", "q-ws")["items"] == []


def test_create_shared_fraction_of_a_gpu(env):
    c, ctl = env
    ctl.ok("apply", "-f", ctl.write("share.yaml", ws_doc("share-ws")))
    p = ctl.ok("create", "gpr", "tiny", "-w", "share-ws", "--shared", "--gpus", "0.25", "--duration", "1h",
               "-o", "name")
    gid = p.stdout.strip()[4:]
    g = c.status(gid)
    assert (g["gpuSharingMode"], g["numberOfGPUs"], g["numberOfGPUNodes"]) == ("Shared", 0.25, 1)
    assert re.search(r"\b1x0\.25\b", ctl.ok("get", "gprs", "-w", "share-ws").stdout)
    assert "1 node(s) x 0.25 GPU(s), shared" in ctl.ok("describe", "gpr", gid).stdout
    for bad in ("0.001", "0", "65", "1e-1", "x", "1.2.3", "-1"):
        p = ctl("create", "gpr", "bad", "-w", "share-ws", "--shared", "--gpus", bad, "--duration", "1h")
        assert p.returncode == USAGE and "--gpus" in p.stderr, (bad, p.stderr)
    # Without --shared a fraction is refused by the client, as before.
    assert ctl("create", "gpr", "bad", "-w", "share-ws", "--gpus", "0.5", "--duration", "1h").returncode == USAGE



def template_doc(name, cluster="worker-1", gpus=2, duration="2h", priority=150):
    return ("apiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata:\n  name: %s\nspec:\n  clusterName: %s\n"
            "  numberOfGPUs: %d\n  numberOfGPUNodes: 1\n  memoryPerGpu: 40\n  exitDuration: %s\n  priority: %d\n"
            % (name, cluster, gpus, duration, priority))


def binding_doc(ws, default, templates, cluster="worker-1"):
    return ("apiVersion: egs.avesha.io/v1\nkind: GPRTemplateBinding\nmetadata:\n  name: %s\nspec:\n  clusters:\n"
            "    - clusterName: %s\n      defaultTemplateName: %s\n      templates: [%s]\n"
            % (ws, cluster, default, ", ".join(templates)))


def test_templates_and_bindings_apply_get_describe_delete(env):
    c, ctl = env
    files = [ctl.write("tpl-ws.yaml", ws_doc("tpl-ws")),
             ctl.write("tpl.yaml", manifest(template_doc("tpl-a"), template_doc("tpl-b", gpus=1, duration="30m"),
                                            binding_doc("tpl-ws", "tpl-a", ["tpl-a", "tpl-b"]),
                                            "apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\n"
                                            "metadata:\n  name: from-tpl\nspec:\n  sliceName: tpl-ws\n"
                                            "  templateName: tpl-b\n  exitDuration: 30m\n"))]
    out = ctl.ok("apply", "-f", files[0], "-f", files[1]).stdout
    for line in ("gprtemplate/tpl-a created", "gprtemplate/tpl-b created", "gprtemplatebinding/tpl-ws created",
                 "gpr/from-tpl created"):
        assert line in out, out
    g = [x for x in live(c, "tpl-ws", "from-tpl")][0]
    assert (g["numberOfGPUs"], g["exitDuration"], g["priority"]) == (1, "0h30m0s", 150)
    again = ctl.ok("apply", "-f", files[1]).stdout  # idempotent: nothing is sent
    assert again.count("unchanged") == 4, again
    changed = ctl.write("tpl2.yaml", manifest(template_doc("tpl-a", gpus=4), binding_doc("tpl-ws", "tpl-b", ["tpl-b"])))
    out = ctl.ok("apply", "-f", changed).stdout
    assert "gprtemplate/tpl-a configured" in out and "gprtemplatebinding/tpl-ws configured" in out
    assert c.admin.get("/api/v1/gpr-template?gprTemplateName=tpl-a")["numberOfGPUs"] == 4

    assert [t["name"] for t in ctl.json("get", "gprtemplates")["items"]] == ["tpl-a", "tpl-b"]
    assert ctl.json("get", "gprtemplate", "tpl-b")["exitDuration"] == "0h30m0s"
    table = ctl.ok("get", "gprtemplates").stdout.splitlines()
    assert re.match(r"NAME\s+CLUSTER\s+GPUS\s+SHAPE\s+DURATION\s+PRIORITY", table[0])
    assert re.match(r"tpl-a\s+worker-1\s+1x4\s+-\s+2h0m0s\s+150", table[1]), table
    assert ctl.ok("get", "gprtemplatebindings", "-o", "name").stdout == "gprtemplatebinding/tpl-ws\n"
    assert re.search(r"tpl-ws\s+worker-1\s+tpl-b\s+tpl-b\s+false", ctl.ok("get", "templatebindings").stdout)
    text = ctl.ok("describe", "gprtemplate", "tpl-a").stdout
    assert "Cluster:          worker-1" in text and "Request:          1 node(s) x 4 GPU(s)" in text, text
    assert "worker-1: default tpl-b; templates tpl-b" in ctl.ok("describe", "gprtemplatebinding", "tpl-ws").stdout
    assert ctl("get", "gprtemplate", "nope").returncode == NOT_FOUND
    assert ctl("describe", "gprtemplatebinding", "nope").returncode == NOT_FOUND

    bad = ctl.write("tpl-bad.yaml", template_doc("tpl-c").replace("  exitDuration: 2h\n", ""))
    p = ctl("apply", "-f", bad)
    assert p.returncode == USAGE and "spec.exitDuration is required for a GPRTemplate" in p.stderr
    unbound = ctl.write("tpl-unbound.yaml", binding_doc("tpl-ws", "tpl-a", ["tpl-a"], cluster="worker-2"))
    p = ctl("apply", "-f", unbound)
    assert p.returncode != OK and "tpl-unbound.yaml:" in p.stderr, p.stderr

    ctl.ok("release", "gpr", g["gprId"])
    out = ctl.ok("delete", "-f", files[1], "--ignore-not-found").stdout
    assert "gprtemplatebinding/tpl-ws deleted" in out and "gprtemplate/tpl-a deleted" in out, out
    assert c.admin.get("/api/v1/gpr-template/list")["items"] == []


def test_force_removes_namespaces_that_run_pods(env):
    """With pods reported running in a slice namespace, `apply` of the SliceWorkspace without that namespace
    and `delete -f` are refused (exit 7, the namespace and the --force hint named) and change nothing; with --force both go
    through.  The SDK's delete_workspace takes force=True the same way."""
    c, ctl = env
    agent = Api(c.egsd.port, c.tokens["worker-1"], c.egsd.ssl_context)

    def pods_in(*namespaces):
        agent.ok("POST", "/api/v1/agent/slice-namespaces", {"namespaces": [
            {"name": ns, "workspace": ws, "createdByAgent": True, "runningPods": 2} for ws, ns in namespaces]})

    path = ctl.write("force-ws.yaml", ws_doc("force-ws", namespaces=["force-a", "force-b"]))
    ctl.ok("apply", "-f", path)
    pods_in(("force-ws", "force-a"), ("force-ws", "force-b"))
    smaller = ctl.write("force-ws-smaller.yaml", ws_doc("force-ws", namespaces=["force-a"]))
    p = ctl("apply", "-f", smaller)
    assert p.returncode == CONFLICT and "force-b on cluster worker-1 still runs 2 pods" in p.stderr, p.stderr
    assert "(egsctl: add --force)" in p.stderr
    names = lambda: [n["namespace"] for n in ctl.json("get", "workspaces", "force-ws")["namespaces"]]  # noqa: E731
    assert names() == ["force-a", "force-b"]
    ctl.ok("apply", "-f", smaller, "--force")
    assert names() == ["force-a"]
    p = ctl("delete", "-f", smaller)
    assert p.returncode == CONFLICT and "force-a" in p.stdout + p.stderr
    assert ctl.json("get", "workspaces", "force-ws")["name"] == "force-ws"
    ctl.ok("delete", "-f", smaller, "--force")
    assert ctl("get", "workspaces", "force-ws").returncode == NOT_FOUND

    auth = egs.authenticate(c.egsd.url, c.egsd.admin_key, sdk_default=False)
    egs.create_workspace("force-sdk", ["worker-1"], ["force-c"], "u", "u@example.com", auth)
    pods_in(("force-sdk", "force-c"))
    with pytest.raises(egs.exceptions.EgsException):
        egs.delete_workspace("force-sdk", auth)
    egs.delete_workspace("force-sdk", auth, force=True)
    assert "force-sdk" not in [w.name for w in egs.list_workspaces(auth).workspaces]
    agent.ok("POST", "/api/v1/agent/slice-namespaces", {"namespaces": []})
    auth.close()
