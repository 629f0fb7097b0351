"""Every field of every JSON body, sent with a wrong JSON type, is a 422 VALIDATION_FAILED naming it, and
nothing stored changes (issue 14 item 6).

The table of routes and fields is not written here: it is read from GET /api/v1/openapi.json, whose
request schemas test_openapi.py keeps true to the route tables.  What this file adds per route is one
valid base body (BASES) and the credential to send it with; a route with a body that has no base here
fails test_every_body_route_has_a_base.  For each field (nested ones too: `nodes[0].name`) the base is
sent with the field replaced by each value of the wrong JSON types, and the answer must be 422 naming
exactly that field.  The rules the server follows (docs/api.md, "Wrong types"):

- a string, number, integer, boolean, list or object where another type is expected: 422 naming it;
- null for a required field: 422 naming it; null for an optional field means "not given" (the public
  SDK sends null for unset options, so that stays);
- a key given twice in one object: 422 naming it; an unknown key: 422 naming it;
- two spellings of one field (gprName/requestName, memoryPerGPU/memoryPerGpu) that disagree: 422
  naming the second spelling.
"""
import json

import pytest

from conftest import STORE, Api, Cluster, drop_schemas_under, store_query
from fakeagent import FakeAgent

# Wrong values per JSON schema type (null is handled apart: see the module's comment).
WRONG = {
    "string": [5, 1.5, True, ["x"], {"a": "x"}],
    "integer": ["1", 1.5, True, [1], {"a": 1}],
    "number": ["1", True, [1], {"a": 1}],
    "boolean": ["true", 1, [True], {"a": True}],
    "array": ["x", 1, True, {"a": "x"}],
    "object": ["x", 1, True, ["x"]],
}

GPR_BASE = {"gprName": "wt-job", "sliceName": "w", "clusterName": "c1", "numberOfGPUs": 1, "numberOfGPUNodes": 1,
            "instanceType": "p5.48xlarge", "gpuShape": "NVIDIA-H100-80GB-HBM3", "memoryPerGPU": 81920,
            "exitDuration": "1h", "priority": 101, "idleTimeOutDuration": "30m", "enforceIdleTimeOut": False,
            "enableEviction": False, "requeueOnFailure": False, "preferredClusters": ["c1"],
            "enableAutoClusterSelection": False, "enableAutoGpuSelection": False, "multiNode": False,
            "dedicatedNodes": False, "enableRDMA": False, "enableSecondaryNetwork": False,
            "gpuSharingMode": "Dedicated"}
LIMITS = {"maxGPRs": 10, "maxExitDurationPerGPR": "10d", "priorityRange": {"min": 1, "max": 300},
          "gpuShapes": ["NVIDIA-H100-80GB-HBM3"], "maxGPUPerGpr": 8, "maxMemoryPerGpr": 819200,
          "concurrentGpuQuota": 16, "maxNodesPerGpr": 2}
POLICY = dict(LIMITS, enableAutoEviction=False, requeueOnFailure=False, softLimits=dict(LIMITS))
TEMPLATE = {"name": "t1", "clusterName": "c1", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "memoryPerGpu": 81920,
            "gpuShape": "NVIDIA-H100-80GB-HBM3", "instanceType": "p5.48xlarge", "exitDuration": "1h",
            "priority": 101, "enforceIdleTimeOut": False, "enableEviction": False, "requeueOnFailure": False,
            "idleTimeOutDuration": "30m"}
AGENT_NODE = {"name": "n1", "instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8,
              "memoryMiB": 81920, "cloudProvider": "aws", "region": "us-east-1",
              "gpus": [{"uuid": "GPU-n1-%d" % i} for i in range(8)], "address": "10.0.0.5", "features": []}
UNMANAGED = {"name": "u1", "instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8,
             "memoryMiB": 81920, "cloudProvider": "aws", "region": "us-east-1"}

# (method, path) -> (who sends it, base body).  "{gpr}" and friends are filled in from the world.
BASES = {
    ("POST", "/api/v1/auth"): ("anon", {"apiKey": "{admin_key}"}),
    ("POST", "/api/v1/api-key"): ("admin", {"name": "wt-key", "userName": "u", "description": "d", "role": "Owner",
                                            "validity": "90d", "workspaceName": "w", "projectName": "default"}),
    ("DELETE", "/api/v1/api-key"): ("admin", {"keyId": "{key_id}", "name": "victim", "projectName": "default",
                                              "apiKey": "{victim_key}"}),
    ("POST", "/api/v1/projects"): ("admin", {"projectName": "wt-project"}),
    ("POST", "/api/v1/clusters"): ("admin", {"clusterName": "wt-c", "projectName": "default",
                                             "apiServer": "https://10.0.0.1:6443", "caData": "Y2E="}),
    ("PUT", "/api/v1/clusters"): ("admin", {"clusterName": "c1", "apiServer": "https://10.0.0.2:6443",
                                            "caData": "Y2E="}),
    ("POST", "/api/v1/slice-workspace"): ("admin", {"workspaceName": "wt-w", "clusters": ["c1"],
                                                    "namespaces": ["wt-ns"], "username": "u", "email": "u@x.io",
                                                    "projectName": "default", "description": "d"}),
    ("PUT", "/api/v1/slice-workspace"): ("admin", {"workspaceName": "w", "addNamespaces": ["a-ns"],
                                                   "removeNamespaces": ["w-ns"], "addClusters": ["c1"],
                                                   "removeClusters": [], "addUsers": [{"username": "v", "email": "v@x.io"}],
                                                   "removeUsers": ["user"], "description": "d",
                                                   "webhookUrl": "https://hooks.example.com/x"}),
    ("DELETE", "/api/v1/slice-workspace"): ("admin", {"workspaceName": "w"}),
    ("POST", "/api/v1/slice-workspace/kube-config"): ("admin", {"workspaceName": "w", "clusterName": "c1"}),
    ("POST", "/api/v1/slice-workspace/kube-config/regenerate"): ("admin", {"workspaceName": "w", "clusterName": "c1"}),
    ("PUT", "/api/v1/slice-workspace/policy"): ("admin", dict(POLICY, workspaceName="w")),
    ("DELETE", "/api/v1/slice-workspace/policy"): ("admin", {"workspaceName": "w"}),
    ("PUT", "/api/v1/settings/policy"): ("admin", POLICY),
    ("PUT", "/api/v1/nodes/thresholds"): ("admin", {"clusterName": "c1", "gpuNodeName": "n1", "gpuTempThreshold": 80.5,
                                                    "gpuPowerThreshold": 500}),
    ("POST", "/api/v1/gpr"): ("admin", dict(GPR_BASE, requestName="wt-job", memoryPerGpu=81920)),
    ("PUT", "/api/v1/gpr"): ("admin", dict({k: v for k, v in GPR_BASE.items() if k != "sliceName"}, gprId="{queued}",
                                           requestName="wt-job", memoryPerGpu=81920, earlyRelease=False,
                                           extendBy="1h", templateName="t1")),
    ("DELETE", "/api/v1/gpr"): ("admin", {"gprId": "{queued}"}),
    ("POST", "/api/v1/gpr/waittime"): ("admin", dict(GPR_BASE, requestName="wt-job", memoryPerGpu=81920)),
    ("POST", "/api/v1/gpr/approve"): ("admin", {"gprId": "{queued}"}),
    ("POST", "/api/v1/gpr/reject"): ("admin", {"gprId": "{queued}", "reason": "no"}),
    ("POST", "/api/v1/gpr/evict"): ("admin", {"gprId": "{provisioned}", "reason": "no"}),
    ("POST", "/api/v1/queue/top"): ("admin", {"gprId": "{queued}"}),
    ("PUT", "/api/v1/settings/observability"): ("admin", {
        "exitWarning": "10m", "eventRetention": 1000, "eventTTL": "7d", "defaultGpuTempThreshold": 85.0,
        "defaultGpuPowerThreshold": 700, "gpuUtilThreshold": 5, "tempHysteresis": 2, "powerHysteresis": 10,
        "utilHysteresis": 1, "seriesStep": "1m", "seriesPoints": 60}),
    ("PUT", "/api/v1/prices"): ("admin", {"gpuShape": "NVIDIA-H100-80GB-HBM3", "pricePerGpuHour": 2.5,
                                          "currency": "USD"}),
    ("POST", "/api/v1/gpr-template"): ("admin", dict(TEMPLATE, name="wt-t")),
    ("PUT", "/api/v1/gpr-template"): ("admin", TEMPLATE),
    ("DELETE", "/api/v1/gpr-template"): ("admin", {"gprTemplateName": "t1"}),
    ("POST", "/api/v1/gpr-template-binding"): ("admin", {"workspaceName": "w2", "enableAutoGPR": False, "clusters": [
        {"clusterName": "c1", "defaultTemplateName": "t1", "templates": ["t1"]}]}),
    ("PUT", "/api/v1/gpr-template-binding"): ("admin", {"workspaceName": "w", "enableAutoGPR": False, "clusters": [
        {"clusterName": "c1", "defaultTemplateName": "t1", "templates": ["t1"]}]}),
    ("DELETE", "/api/v1/gpr-template-binding"): ("admin", {"gprTemplateBindingName": "w"}),
    ("POST", "/api/v1/debug/clock"): ("admin", {"advance": "1s", "keepHeartbeats": True}),
    ("POST", "/api/v1/agent/register"): ("agent", {"clusterName": "c1", "agentVersion": "1", "features": [],
                                                   "nodes": [AGENT_NODE], "unmanagedNodes": [UNMANAGED]}),
    ("POST", "/api/v1/agent/heartbeat"): ("agent", {"clusterName": "c1", "nodes": [
        {"name": "n1", "health": "Healthy", "attachedGpr": "", "attachedShared": [], "workloads": [],
         "gpus": [{"uuid": "GPU-n1-0", "index": 0, "tempC": 40.0, "powerW": 100.0, "utilPct": 0.0,
                   "memUsedMiB": 0}]}]}),
    ("POST", "/api/v1/agent/actions/result"): ("agent", {
        "clusterName": "c1", "actionId": "{action}", "type": "attach", "gprId": "{provisioned}", "node": "n1",
        "ok": True, "message": "m", "checks": [{"name": "gpu", "phase": "pre", "status": "passed", "output": "o",
                                               "durationMs": 5}]}),
    ("POST", "/api/v1/agent/slice-access"): ("agent", {
        "clusterName": "c1", "actionId": "a-1", "workspace": "w", "generation": 1, "ok": True,
        "token": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "expiresAt": "2099-01-01T00:00:00Z",
        "serviceAccount": "egs-w", "namespaces": ["w-ns"], "message": "m"}),
    ("POST", "/api/v1/agent/slice-namespaces"): ("agent", {
        "clusterName": "c1", "namespaces": [{"name": "w-ns", "workspace": "w", "createdByAgent": True,
                                             "runningPods": 0}]}),
    ("POST", "/api/v1/agent/gprs"): ("agent", {"namespace": "w-ns", "name": "wt-cr", "uid": "wt-uid-1",
                                               "generation": 1, "spec": {"numberOfGPUNodes": 1}}),
    ("DELETE", "/api/v1/agent/gprs"): ("agent", {"uid": "wt-uid-1"}),
    ("POST", "/api/v1/inference-endpoint"): ("admin", {
        "clusterName": "c1", "endpointName": "wt-ep", "workspace": "w",
        "modelSpec": {"modelName": "huggingface", "storageURI": "hf://m"}, "rawModelSpec": None,
        "gpuSpec": {"numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h"}}),
    ("DELETE", "/api/v1/inference-endpoint"): ("admin", {"endpoint": "wt-ep", "workspace": "w", "cluster": "c1"}),
    ("POST", "/api/v1/agent/inference-endpoints"): ("agent", {"id": "iep-0", "present": True, "ready": True,
                                                              "readyReplicas": 1, "replicas": 1, "message": "m"}),
}
# POST/PUT/DELETE routes that take no JSON body (their answers do not depend on one).
NO_BODY = set()
# Fields whose type is free (any JSON value the agent sends is checked by hand): skipped.
FREE = {"attachedGpr", "attachedShared"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("wrong-types"))
    c = Cluster(tmp)
    agent = FakeAgent(c, "c1", ["n1", "n2"])
    c.workspace("w", ["c1"])
    c.workspace("w2", ["c1"])
    c.admin.ok("POST", "/api/v1/gpr-template", TEMPLATE)
    c.admin.ok("POST", "/api/v1/gpr-template-binding", {"workspaceName": "w", "clusters": [
        {"clusterName": "c1", "defaultTemplateName": "t1", "templates": ["t1"]}]})
    provisioned = c.gpr(sliceName="w", clusterName="c1", numberOfGPUs=8, numberOfGPUNodes=2, gprName="big")
    queued = c.gpr(sliceName="w", clusterName="c1", numberOfGPUs=8, numberOfGPUNodes=1, gprName="waiting")
    actions = agent.api.get("/api/v1/agent/actions?wait=0")["actions"]
    victim = c.admin.ok("POST", "/api/v1/api-key", {"name": "victim", "role": "Viewer", "userName": "v"})
    values = {"admin_key": c.egsd.admin_key, "key_id": victim["keyId"], "victim_key": victim["apiKey"],
              "queued": queued, "provisioned": provisioned,
              "action": actions[0]["actionId"] if actions else "act-none"}
    creds = {"anon": Api(c.egsd.port), "admin": c.admin, "agent": agent.api}
    status, doc = c.admin.call("GET", "/api/v1/openapi.json")
    assert status == 200
    yield {"cluster": c, "values": values, "creds": creds, "doc": doc}
    c.close()
    if STORE == "postgres":
        drop_schemas_under(tmp)


def fill(body, values):
    text = json.dumps(body)
    for k, v in values.items():
        text = text.replace("{%s}" % k, v)
    return json.loads(text)


def resolve(doc, schema):
    """The schema behind $ref / allOf wrappers."""
    while True:
        if "$ref" in schema:
            schema = doc["components"]["schemas"][schema["$ref"].split("/")[-1]]
        elif "allOf" in schema:
            schema = schema["allOf"][0]
        else:
            return schema


def body_schema(doc, method, path):
    op = doc["paths"][path][method.lower()]
    rb = op.get("requestBody")
    return resolve(doc, rb["content"]["application/json"]["schema"]) if rb else None


def cases(doc, schema, base, prefix=""):
    """(field name expected in the 422, path into the body, wrong value) for every field of schema: a
    field base lacks is added to it; those base holds are walked into (objects, and the first element
    of lists of objects).  A list also gets one wrong element."""
    out = []
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        if name in FREE:
            continue
        sub = resolve(doc, sub)
        field = prefix + name
        typ = sub.get("type")
        if typ in WRONG:
            out += [(field, [name], v) for v in WRONG[typ]]
        if name in required:
            out.append((field, [name], None))
        item_type = resolve(doc, sub["items"]).get("type") if typ == "array" else None
        if item_type in WRONG:  # one wrong element: a list of objects names it, a list of names the list
            out.append((field + "[0]" if item_type == "object" else field, [name], [WRONG[item_type][-1]]))
        if name not in base:
            continue
        if typ == "object" and "properties" in sub and isinstance(base[name], dict):
            out += [(f, [name] + p, v) for f, p, v in cases(doc, sub, base[name], field + ".")]
        if typ == "array" and isinstance(base[name], list) and base[name] and isinstance(base[name][0], dict):
            item = resolve(doc, sub["items"])
            if "properties" in item:
                out += [(f, [name, 0] + p, v) for f, p, v in cases(doc, item, base[name][0], "%s[0]." % field)]
    return out


def with_value(body, path, value):
    body = json.loads(json.dumps(body))
    o = body
    for p in path[:-1]:
        o = o[p]
    o[path[-1]] = value
    return body


def snapshot(egsd):
    """Every row of every table of egsd's store, as text (what 'nothing stored changed' compares)."""
    if STORE == "postgres":
        tables = [r[0] for r in store_query(egsd, "SELECT table_name FROM information_schema.tables "
                                                  "WHERE table_schema = current_schema() ORDER BY 1")]
    else:
        tables = [r[0] for r in store_query(egsd, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]
    # meta's leader.* rows (PostgreSQL: the lease, renewed every second, and the commit counter) are
    # leadership, not stored state; the audit log records each refused write by design (test_audit.py), and
    # PostgreSQL's followers' change log (table changes) one row per committed turn, that audit entry's included.
    return {t: sorted(map(repr, store_query(egsd, "SELECT * FROM %s" % t +
                                           (" WHERE key NOT LIKE 'leader.%'" if t == "meta" else ""))))
            for t in tables if t not in ("audit", "changes")}


def refused(status, doc, field, what):
    assert status == 422, (what, status, doc)
    assert doc["error"]["errorKey"] == "VALIDATION_FAILED", (what, doc)
    assert (doc["error"]["data"] or {}).get("field") == field, (what, doc)


def test_every_body_route_has_a_base(world):
    doc = world["doc"]
    writes = {(m.upper(), p) for p, item in doc["paths"].items() for m in item if m in ("post", "put", "delete", "patch")}
    with_body = {(m, p) for m, p in writes if body_schema(doc, m, p)}
    assert with_body - set(BASES) == set(), "routes with a body missing from BASES"
    assert set(BASES) - with_body == set(), "BASES names routes without a body schema"
    assert writes - with_body == NO_BODY, "a write route without a body schema"
    assert len(with_body) >= 35


@pytest.mark.parametrize("route", sorted(BASES), ids=lambda r: "%s %s" % r)
def test_wrong_types_are_422_naming_the_field(world, route):
    method, path = route
    who, base = BASES[route]
    base = fill(base, world["values"])
    api = world["creds"][who]
    schema = body_schema(world["doc"], method, path)
    todo = cases(world["doc"], schema, base)
    assert todo, "no field of %s %s tested" % route
    fields = {f for f, _, _ in todo}
    assert set(base) <= fields | FREE, "a base field with no case"
    egsd = world["cluster"].egsd
    before = snapshot(egsd)
    first = next(iter(base))
    dup = json.dumps(base)[:-1] + ", %s: %s}" % (json.dumps(first), json.dumps(base[first]))
    todo += [(first, None, dup), ("zzUnknown", None, dict(base, zzUnknown=1))]
    wrong = []
    for field, p, value in todo:
        body = with_value(base, p, value) if p else value
        status, doc = api.call(method, path, body)
        if status != 422 or doc["error"]["errorKey"] != "VALIDATION_FAILED" or \
                (doc["error"]["data"] or {}).get("field") != field:
            wrong.append("%s=%s -> %s %s" % (field, json.dumps(value)[:40], status, json.dumps(doc.get("error"))[:160]))
    assert not wrong, "\n".join(wrong)
    assert snapshot(egsd) == before, "a refused request changed the store"


SPELLINGS = [
    ("POST", "/api/v1/gpr", dict(GPR_BASE), ("gprName", "requestName", "other-name")),
    ("POST", "/api/v1/gpr", dict(GPR_BASE), ("memoryPerGPU", "memoryPerGpu", 40960)),
    ("POST", "/api/v1/gpr/waittime", dict(GPR_BASE), ("gprName", "requestName", "other-name")),
    ("PUT", "/api/v1/gpr", {"gprId": "{queued}", "gprName": "renamed"}, ("gprName", "requestName", "other-name")),
    ("PUT", "/api/v1/gpr", {"gprId": "{queued}", "memoryPerGPU": 81920}, ("memoryPerGPU", "memoryPerGpu", 40960)),
    ("POST", "/api/v1/gpr-template", dict(TEMPLATE, name="wt-t2", memoryPerGPU=81920),
     ("memoryPerGPU", "memoryPerGpu", 40960)),
    ("PUT", "/api/v1/gpr-template", dict(TEMPLATE, memoryPerGPU=81920), ("memoryPerGPU", "memoryPerGpu", 40960)),
]


@pytest.mark.parametrize("method,path,base,pair", SPELLINGS, ids=lambda x: x if isinstance(x, str) else "-")
def test_two_spellings_that_disagree(world, method, path, base, pair):
    """Two spellings of one field that disagree: 422 naming the second; nothing stored changes."""
    a, b, other = pair
    base = fill(base, world["values"])
    egsd = world["cluster"].egsd
    before = snapshot(egsd)
    status, doc = world["creds"]["admin"].call(method, path, dict(base, **{b: other}))
    refused(status, doc, b, (a, b))
    assert a in doc["error"]["message"] and b in doc["error"]["message"], doc
    assert snapshot(egsd) == before
