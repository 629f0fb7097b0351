"""GET /api/v1/openapi.json describes the whole API, and stays true: every route of the server's route
tables is in it (and nothing else), every $ref resolves, and real answers validate against it: those of
a sweep over every route here, plus every answer the API tests that ran before this module in the
same session received (recorded through conftest's Api).

The validator below implements the subset of JSON Schema (OpenAPI 3.0 flavour) the document uses:
type, properties, required, additionalProperties, items, enum, nullable, $ref, allOf, format
date-time.  No external packages."""
import glob
import json
import os
import re
import time

import pytest

import conftest
from conftest import A100, H100, ROOT, wait_for
from fakeagent import FakeAgent

# ---- recording the answers of the API tests ----

RECORDED = {}  # (method, route, status) -> up to PER_KEY answers
PER_KEY = 40
SWEEP = []     # every answer of this module's sweep


def _install_recorder():
    """Wraps conftest.Api.raw so that answers of the session's API tests are kept for validation
    (up to PER_KEY per route and status).  Installed when this module is imported, i.e. at
    collection, before any test runs."""
    if getattr(conftest.Api.raw, "_openapi_recorder", False):
        return
    orig = conftest.Api.raw

    def raw(self, method, path, body=None, headers=None):
        status, data, resp = orig(self, method, path, body, headers)
        answer = (method, path, status, resp.getheader("Content-Type") or "", data)
        kept = RECORDED.setdefault((method, path.split("?")[0][:200], status), [])
        if len(kept) < PER_KEY:
            kept.append(answer)
        SWEEP.append(answer)
        return status, data, resp

    raw._openapi_recorder = True
    conftest.Api.raw = raw


_install_recorder()

# ---- the validator ----

DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


class Validator:
    def __init__(self, doc):
        self.doc = doc

    def resolve(self, ref):
        assert ref.startswith("#/"), ref
        node = self.doc
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def errors(self, schema, value, where="$"):
        """Yields 'where: problem' for every way value breaks schema."""
        if "$ref" in schema:
            yield from self.errors(self.resolve(schema["$ref"]), value, where)
            return
        if value is None:
            if not schema.get("nullable") and schema.get("type") is not None:
                yield "%s: null is not allowed" % where
            elif not schema.get("nullable") and "allOf" in schema:
                yield "%s: null is not allowed" % where
            return
        for sub in schema.get("allOf", []):
            yield from self.errors(sub, value, where)
        t = schema.get("type")
        if t is not None and not TYPES[t](value):
            yield "%s: expected %s, got %s" % (where, t, json.dumps(value)[:80])
            return
        if "enum" in schema and value not in schema["enum"]:
            yield "%s: %r is not one of %s" % (where, value, schema["enum"])
        if schema.get("format") == "date-time" and not DATE_TIME.match(value):
            yield "%s: %r is not an RFC 3339 date-time" % (where, value)
        if t == "array" and "items" in schema:
            for i, v in enumerate(value):
                yield from self.errors(schema["items"], v, "%s[%d]" % (where, i))
        if t == "object":
            yield from self.object_errors(schema, value, where)

    def object_errors(self, schema, value, where):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                yield "%s: required field %s is missing" % (where, name)
        extra = schema.get("additionalProperties", True)
        for name, v in value.items():
            if name in props:
                yield from self.errors(props[name], v, "%s.%s" % (where, name))
            elif extra is False:
                yield "%s: field %s is not in the schema" % (where, name)
            elif isinstance(extra, dict):
                yield from self.errors(extra, v, "%s.%s" % (where, name))

    def operation(self, method, path):
        """The operation of a concrete path, matching templated paths ("/api/v1/nodes/{node}/...") too."""
        paths = self.doc["paths"]
        if path in paths:
            return paths[path].get(method.lower())
        for tmpl, item in paths.items():
            if "{" in tmpl and re.fullmatch("[^/]+".join(re.escape(p) for p in re.split(r"\{[^}]+\}", tmpl)), path):
                return item.get(method.lower())
        return None

    def answer_schema(self, method, path, status):
        """The schema an answer must match, or None when the route answers something else than JSON."""
        op = self.operation(method, path)
        if op is None or status != 200:
            return {"$ref": "#/components/schemas/ErrorEnvelope"}
        content = op["responses"]["200"]["content"]
        return content["application/json"]["schema"] if "application/json" in content else None


def check_answers(v, answers):
    """Validates recorded answers; returns (checked, problems)."""
    problems, checked, seen = [], 0, set()
    for method, path, status, ctype, data in answers:
        if "application/json" not in ctype or not data:
            continue  # /metrics, event streams, libevent's own pages for unparseable requests
        route = path.split("?")[0]
        schema = v.answer_schema(method, route, status)
        if schema is None:
            continue
        body = json.loads(data)
        if route == "/api/v1/openapi.json" and status == 200:
            continue
        checked += 1
        for e in v.errors(schema, body):
            key = (method, route, status, re.sub(r"\[\d+\]", "[]", e))
            if key not in seen:
                seen.add(key)
                problems.append("%s %s -> %d: %s" % (method, route, status, e))
    return checked, problems


# ---- the document itself ----

def server_routes():
    """(method, path) of every route table entry in src/server/*.c."""
    routes = set()
    for f in glob.glob(os.path.join(ROOT, "src", "server", "*.c")):
        for m, p in re.findall(r'\{\s*EVHTTP_REQ_(\w+),\s*"(/[^"]*)"', open(f).read()):
            routes.add((m.lower(), p))
    return routes


def fetch_document(e):
    status, data, resp = e.api(token="").raw("GET", "/api/v1/openapi.json")
    assert status == 200 and resp.getheader("Content-Type") == "application/json"
    return json.loads(data)


@pytest.fixture
def document(egsd):
    return fetch_document(egsd)


def test_document_covers_every_route(document):
    doc = document
    assert doc["openapi"].startswith("3.0") and doc["info"]["title"]
    documented = {(m, p) for p, item in doc["paths"].items() for m in item}
    routes = server_routes()
    assert len(routes) > 40
    assert routes - documented == set(), "routes missing from the OpenAPI document"
    assert documented - routes == set(), "documented routes the server does not have"
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    # Every $ref resolves, and public routes say so.
    v = Validator(doc)
    for ref in re.findall(r'"\$ref": "([^"]+)"', json.dumps(doc)):
        v.resolve(ref)
    assert doc["paths"]["/api/v1/auth"]["post"]["security"] == []
    assert "security" not in doc["paths"]["/api/v1/gpr"]["post"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_validator_catches_what_it_should(document):
    v = Validator(document)
    gpr = {"$ref": "#/components/schemas/Gpr"}
    assert list(v.errors(gpr, None)) == ["$: null is not allowed"]
    assert any("required field gprId" in e for e in v.errors(gpr, {}))
    env = v.answer_schema("GET", "/api/v1/queue", 200)
    good = {"statusCode": 200, "status": "OK", "message": "Success",
            "data": {"items": [], "groups": [], "queueLength": 0}}
    assert list(v.errors(env, good)) == []
    bad = json.loads(json.dumps(good))
    bad["data"]["queueLength"] = True
    bad["data"]["surprise"] = 1
    bad["data"]["groups"] = [{"clusterName": "c", "gpuShape": "s", "queued": 1, "nextEstimatedStart": "soon"}]
    errs = list(v.errors(env, bad))
    assert "$.data.queueLength: expected integer, got true" in errs
    assert "$.data: field surprise is not in the schema" in errs
    assert "$.data.groups[0].nextEstimatedStart: 'soon' is not an RFC 3339 date-time" in errs
    assert v.answer_schema("GET", "/api/v1/nope", 404) == {"$ref": "#/components/schemas/ErrorEnvelope"}
    assert v.answer_schema("GET", "/metrics", 200) is None


# ---- real answers ----

LLAMA = {"egs.io/model": "llama-3-70b", "egs.io/model-config": "fp16", "egs.io/job-type": "fine-tuning"}


def sweep(c, api):
    """Calls every route with the answers worth having: successes with full objects, and errors."""
    a = c.admin
    a.ok("POST", "/api/v1/projects", {"projectName": "proj-x"})
    key = a.ok("POST", "/api/v1/api-key", {"name": "k1", "role": "Owner", "userName": "u", "validity": "30d"})
    a.ok("POST", "/api/v1/auth", {"apiKey": key["apiKey"]})
    a.call("POST", "/api/v1/auth", {"apiKey": "nonsense"})
    a.ok("DELETE", "/api/v1/api-key", {"keyId": key["keyId"]})
    agent = FakeAgent(c, "fake-1", ["fa-1", "fa-2"])
    a.ok("PUT", "/api/v1/clusters", {"clusterName": "fake-1", "apiServer": "https://10.1.1.1:6443"})
    c.workspace("sw", ["worker-1", "fake-1"])
    a.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "sw", "addNamespaces": ["sw-extra"],
                                            "description": "sweep", "addUsers": [{"username": "bo", "email": "b@x.io"}]})
    c.slice_token("sw", "worker-1")
    a.ok("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "sw", "clusterName": "worker-1"})
    a.call("GET", "/api/v1/slice-workspace/kube-config", {"workspaceName": "sw", "clusterName": "fake-1"})
    agent.nodes["fa-1"]["workloads"] = [{"name": "trainer", "namespace": "sw-ns",
                                         "gpus": [FakeAgent.uuid("fa-1", i) for i in range(8)], "labels": LLAMA}]
    agent.sample("fa-1", tempC=95.0, powerW=690.0, utilPct=97.0, memUsedMiB=60000)
    held = c.gpr(sliceName="sw", gprName="held", clusterName="fake-1", exitDuration="2h", priority=150)
    wait_for(lambda: agent.serve() or c.status(held)["status"]["provisioningStatus"] == "Provisioned")
    agent.heartbeat()
    waiting = c.gpr(sliceName="sw", gprName="waiting", priority=120)
    other = c.gpr(sliceName="sw", gprName="other", priority=110)
    # Policies: a Pending GPR (with its reason) in the queue and the listings, a refusal, both routes.
    a.ok("PUT", "/api/v1/slice-workspace/policy", {
        "workspaceName": "sw", "maxGPRs": 20, "maxExitDurationPerGPR": "12h", "priorityRange": {"min": 1, "max": 300},
        "gpuShapes": [H100["gpuModel"], A100["gpuModel"]], "maxGPUPerGpr": 64, "maxMemoryPerGpr": 10000,
        "concurrentGpuQuota": 64, "maxNodesPerGpr": 8, "enableAutoEviction": False, "requeueOnFailure": None,
        "softLimits": {"maxExitDurationPerGPR": "6h", "priorityRange": {"min": 1, "max": 250}}})
    a.get("/api/v1/slice-workspace/policy?workspaceName=sw")
    a.ok("PUT", "/api/v1/settings/policy", {"maxNodesPerGpr": 32, "softLimits": {"maxNodesPerGpr": 16}})
    a.get("/api/v1/settings/policy")
    pending = c.gpr(sliceName="sw", gprName="long", exitDuration="8h")
    rejected = c.gpr(sliceName="sw", gprName="urgent", priority=260)
    a.call("POST", "/api/v1/gpr", {"gprName": "huge", "sliceName": "sw", "numberOfGPUNodes": 1, "exitDuration": "13h"})
    a.call("PUT", "/api/v1/slice-workspace/policy", {"workspaceName": "sw", "maxGPRs": -1})
    a.ok("PUT", "/api/v1/gpr", {"gprId": waiting, "priority": 130})
    a.call("PUT", "/api/v1/gpr", {"gprId": held, "extendBy": "30m"})
    a.ok("POST", "/api/v1/gpr/waittime", {"gprName": "q", "sliceName": "sw", "numberOfGPUNodes": 1,
                                          "exitDuration": "1h"})
    a.ok("POST", "/api/v1/queue/top", {"gprId": other})
    for path in ("/api/v1/queue", "/api/v1/gpr/list", "/api/v1/gpr/list?sliceName=sw", "/api/v1/gpr?gprId=" + held,
                 "/api/v1/inventory/list", "/api/v1/inventory?sliceName=sw", "/api/v1/nodes", "/api/v1/gpus",
                 "/api/v1/clusters", "/api/v1/slice-workspace/list", "/api/v1/slice-workspace?workspaceName=sw",
                 "/api/v1/api-key/list", "/api/v1/projects", "/api/v1/events?limit=3", "/api/v1/gpus/table",
                 "/api/v1/gpus/table?sliceName=sw&sort=temperature",
                 "/api/v1/gpus/series?uuid=" + FakeAgent.uuid("fa-1", 0), "/api/v1/workloads", "/api/v1/models",
                 "/api/v1/alerts", "/api/v1/settings/observability", "/api/v1/notifications?sliceName=sw",
                 "/api/v1/prices", "/api/v1/usage", "/api/v1/insights/queue", "/healthz"):
        a.get(path)
    page = a.get("/api/v1/events?limit=2")
    a.get("/api/v1/events?limit=2&continue=" + page["continue"])
    a.ok("PUT", "/api/v1/nodes/thresholds", {"clusterName": "fake-1", "gpuTempThreshold": 90})
    # GPU sharing: a provisioned share, its node's allocation map, a waiting share, a map not found.
    c.workspace("sw2", ["worker-1"])
    shared = c.gpr(sliceName="sw2", gprName="shared", gpuSharingMode="Shared", numberOfGPUs=0.5)
    node = c.wait_state(shared, "Provisioned")["status"]["nodes"][0]
    a.get("/api/v1/nodes/%s/gpu-alloc-map?clusterName=worker-1" % node)
    a.get("/api/v1/inventory/list")
    a.get("/api/v1/gpr?gprId=" + c.gpr(sliceName="sw2", gprName="shared-2", gpuSharingMode="Shared", numberOfGPUs=1.25))
    a.call("GET", "/api/v1/nodes/no-such-node/gpu-alloc-map")
    a.ok("PUT", "/api/v1/prices", {"gpuShape": H100["gpuModel"], "pricePerGpuHour": 2.5})
    a.ok("PUT", "/api/v1/settings/observability", {"seriesPoints": 120})
    a.ok("POST", "/api/v1/gpr/approve", {"gprId": pending})
    a.ok("POST", "/api/v1/gpr/reject", {"gprId": rejected, "reason": "not that urgent"})
    a.get("/api/v1/gpr?gprId=" + rejected)
    a.ok("DELETE", "/api/v1/slice-workspace/policy", {"workspaceName": "sw"})
    a.ok("PUT", "/api/v1/settings/policy", {})
    a.ok("DELETE", "/api/v1/gpr", {"gprId": other})
    a.ok("POST", "/api/v1/gpr/evict", {"gprId": held, "reason": "maintenance"})
    c.advance("1h")
    a.get("/api/v1/usage?sliceName=sw")
    a.get("/api/v1/gpr?gprId=" + held)
    agent.api.get("/api/v1/agent/actions?wait=0")
    # Errors: validation, not found, conflict, forbidden, unauthenticated, unknown route and method.
    a.call("POST", "/api/v1/gpr", {"gprName": "bad", "sliceName": "sw", "numberOfGPUNodes": 1,
                                   "exitDuration": "1h", "priority": 5000})
    a.call("GET", "/api/v1/gpr?gprId=gpr-00000000-0000")
    a.call("DELETE", "/api/v1/slice-workspace", {"workspaceName": "sw"})
    c.egsd.api(token="").call("GET", "/api/v1/gpr/list")
    agent.api.call("GET", "/api/v1/gpr/list")
    a.call("GET", "/api/v1/no-such-route")
    a.call("PATCH", "/api/v1/gpr", {})


def test_real_answers_match_the_document(cluster):
    c = cluster
    # The document of the cluster's own egsd: a second egsd (the egsd fixture) would share its data
    # directory, which on PostgreSQL means its schema, whose leader lock the first one holds.
    document = fetch_document(c.egsd)
    c.add_cluster("worker-1", [("h100-1", H100), ("a100-1", A100)])
    del SWEEP[:]
    sweep(c, c.admin)
    v = Validator(document)
    mine = list(SWEEP)
    routes = {(m.lower(), p.split("?")[0]) for m, p, s, _, _ in mine if s == 200}
    assert len(routes) >= 45, sorted(routes)
    checked, problems = check_answers(v, mine)
    assert checked >= len(mine) // 2
    # And the answers of the API tests that ran before this module in the session.
    earlier = [a for kept in RECORDED.values() for a in kept]
    n, more = check_answers(v, earlier)
    problems += more
    assert problems == [], "%d answers break the OpenAPI document:\n%s" % (len(problems), "\n".join(problems[:40]))
