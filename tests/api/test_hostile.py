"""Hostile input for every route: malformed JSON, wrong types, missing and unknown fields, huge bodies
and headers, negative and enormous numbers, unicode and control characters in names, path tricks.

Every hostile request must get a 4xx in the public error envelope (for a field error, a 422 whose
error.data.field names the field) and must change nothing stored: each case compares a snapshot of
everything the API lists (GPRs, workspaces, inventory, clusters, API keys, projects, the newest event)
before and after.  One server (two real agents over mock devices) serves the whole table; the few
inputs that are expected to be fatal to a broken server get a server of their own."""
import copy
import json
import re
import socket
import tempfile
import time
from types import SimpleNamespace

import pytest

from conftest import Api, Cluster, H100, T4, wait_for

ENVELOPE = {"statusCode", "status", "message", "data", "error"}
# Fields that move by themselves while nothing is changed (clock, heartbeats, samples).
VOLATILE = {"lastHeartbeat", "estimatedWaitTime", "remainingDuration", "gpus", "lastSeen", "agentConnected"}
SNAPSHOT_PATHS = ["/api/v1/gpr/list", "/api/v1/slice-workspace/list", "/api/v1/inventory/list", "/api/v1/clusters",
                  "/api/v1/api-key/list", "/api/v1/projects", "/api/v1/events?limit=1",
                  "/api/v1/slice-workspace/policy?workspaceName=team-b", "/api/v1/settings/policy"]
WELLFORMED_UNKNOWN_KEY = "00000000-0000-4000-8000-000000000000"


# ---------------------------------------------------------------------------------------------------
# the shared server and the checks
# ---------------------------------------------------------------------------------------------------

def scrub(x):
    if isinstance(x, dict):
        return {k: scrub(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [scrub(v) for v in x]
    return x


def sort_items(path, data):
    """Lists in a stable order so that a snapshot compares by content."""
    for key, by in (("items", ("gprId", "keyId", "clusterName", "gpuNodeName", "projectName", "id")),
                    ("workspaces", ("name",))):
        if isinstance(data, dict) and isinstance(data.get(key), list):
            data[key] = sorted(data[key], key=lambda o: tuple(str(o.get(b, "")) for b in by))
    return data


def snapshot(api):
    out = {}
    for p in SNAPSHOT_PATHS:
        if "workspaceName=team-b" in p:  # servers of their own have no team-b: its 404 is the snapshot then
            status, doc = api.call("GET", p)
            out[p] = scrub(doc["data"]) if status == 200 else status
        else:
            out[p] = sort_items(p, scrub(api.get(p)))
    return out


def diff(before, after):
    out = []
    for p in SNAPSHOT_PATHS:
        if before[p] != after[p]:
            out.append("%s changed:\n  before %s\n  after  %s" % (p, json.dumps(before[p])[:1500],
                                                                  json.dumps(after[p])[:1500]))
    return out


def error_problems(status, doc, statuses, field=None, key=None):
    """What is wrong with an error answer (empty list = fine)."""
    p = []
    if not (400 <= status < 500):
        p.append("status %d is not a 4xx" % status)
    elif statuses and status not in statuses:
        p.append("status %d, expected one of %s" % (status, sorted(statuses)))
    if not isinstance(doc, dict) or set(doc) != ENVELOPE:
        p.append("envelope keys %r, expected exactly %r" % (sorted(doc) if isinstance(doc, dict) else doc,
                                                           sorted(ENVELOPE)))
        return p
    if doc["statusCode"] != status or doc["status"] != "Error" or doc["data"] is not None:
        p.append("envelope statusCode/status/data wrong: %r" % {k: doc[k] for k in ("statusCode", "status", "data")})
    err = doc["error"]
    if not isinstance(err, dict) or not isinstance(err.get("errorKey"), str) or not err["errorKey"]:
        p.append("error.errorKey missing or empty: %r" % (err,))
        return p
    if not isinstance(err.get("message"), str) or not err["message"]:
        p.append("error.message missing: %r" % (err,))
    if key and err["errorKey"] != key:
        p.append("errorKey %r, expected %r" % (err["errorKey"], key))
    got = (err.get("data") or {}).get("field") if isinstance(err.get("data"), dict) else None
    if status == 422 and field is not None:
        fields = field if isinstance(field, (tuple, set, list)) else (field,)
        if got not in fields:
            p.append("error.data.field %r, expected %r" % (got, field))
    elif status == 422 and not (isinstance(got, str) and got):
        p.append("a 422 without error.data.field: %r" % (err,))
    elif got is not None and field is not None:
        fields = field if isinstance(field, (tuple, set, list)) else (field,)
        if got not in fields:
            p.append("error.data.field %r, expected %r" % (got, field))
    return p


@pytest.fixture(scope="module")
def env():
    with tempfile.TemporaryDirectory(prefix="egs-hostile-") as tmp:
        c = Cluster(tmp)
        try:
            c.add_cluster("worker-1", [("h100-1", H100)])
            c.add_cluster("worker-2", [("t4-1", T4)])
            c.workspace("team-a", ["worker-1"], ["team-a-ns"])
            c.workspace("team-b", ["worker-1", "worker-2"], ["team-b-ns"])
            c.slice_token("team-a", "worker-1")  # the kube-config base answers 200
            p = c.gpr(sliceName="team-a", clusterName="worker-1", exitDuration="10h")
            c.wait_state(p, "Provisioned")
            q = c.gpr(sliceName="team-b", clusterName="worker-1", exitDuration="1h", gpuShape=H100["gpuModel"])
            q2 = c.gpr(sliceName="team-a", exitDuration="1h")
            c.admin.ok("PUT", "/api/v1/slice-workspace/policy", POLICY_BASE)  # generous: binds no GPR case
            assert c.status(q)["status"]["provisioningStatus"] == "Queued"
            assert c.status(q2)["status"]["provisioningStatus"] == "Queued"
            owner = c.admin.ok("POST", "/api/v1/api-key", {"name": "owner-a", "role": "Owner", "userName": "o",
                                                           "workspaceName": "team-a"})
            subs = {"@ADMIN_KEY": c.egsd.admin_key, "@P": p, "@Q": q, "@Q2": q2, "@OWNER_KEY_ID": owner["keyId"],
                    "@AGENT1_KEY_ID": [k["keyId"] for k in c.admin.get("/api/v1/api-key/list")["items"]
                                       if k.get("clusterName") == "worker-1"][0],
                    "@SELF_KEY_ID": [k["keyId"] for k in c.admin.get("/api/v1/api-key/list")["items"]
                                     if k["name"] == "bootstrap-admin"][0]}
            e = SimpleNamespace(cluster=c, admin=c.admin, agent2=c.admin.with_token(c.tokens["worker-2"]), subs=subs)
            yield e
        finally:
            c.close()


@pytest.fixture(autouse=True)
def _server_alive(request):
    if "env" in request.fixturenames:
        e = request.getfixturevalue("env")
        assert e.cluster.egsd.proc.poll() is None, "the shared egsd died in an earlier test"


def subst(x, subs):
    if isinstance(x, str):
        return subs.get(x, x)
    if isinstance(x, dict):
        return {subst(k, subs): subst(v, subs) for k, v in x.items()}
    if isinstance(x, list):
        return [subst(v, subs) for v in x]
    return x


def subst_bytes(b, subs):
    for k in sorted(subs, key=len, reverse=True):
        b = b.replace(k.encode(), subs[k].encode())
    return b


def run_case(env, case):
    api = env.agent2 if case.who == "agent" else env.admin
    if isinstance(case.body, bytes):
        body = subst_bytes(case.body, env.subs)
    else:
        body = json.dumps(subst(case.body, env.subs))
    path = subst(case.path, env.subs)
    before = snapshot(env.admin)
    status, doc = api.call(case.method, path, body)
    problems = error_problems(status, doc, case.statuses, case.field, case.key)
    assert env.cluster.egsd.proc.poll() is None, "egsd died on %s %s %r" % (case.method, path, body)
    problems += diff(before, snapshot(env.admin))
    assert not problems, "%s %s body=%s\n  -> %d %s\n  %s" % (case.method, path, (body or b"")[:300], status,
                                                              json.dumps(doc)[:600], "\n  ".join(problems))


# ---------------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------------

BIG = "a" * 10240
WRONG = {  # values of the wrong JSON type for each kind of field
    "str": [1, True, 1.5, [], {}, ["a"]],
    "int": ["1", True, 1.5, [], {}, [1], {"v": 1}],
    "bool": ["true", 1, 0, [], {}, "yes"],
    "list": ["worker-1", 1, True, {}, {"0": "worker-1"}],
}
# hostile strings: (label, value)
NAME_TRICKS = [("nul", "a\u0000b"), ("ctrl", "a\u0001b"), ("newline", "a\nb"), ("esc", "a\u001b[31mb"),
               ("del", "a\u007fb"), ("big", BIG), ("uni", "työ"), ("emoji", "🚀"), ("rtl", "\u200fabc"),
               ("slash", "a/b"), ("dotdot", ".."), ("pct", "%2e%2e"), ("space", "a b"), ("surrogate", "\ud800"),
               ("quote", 'a"b'), ("long64", "a" * 64), ("empty", "")]
DNS_ONLY = [("upper", "Team-A"), ("underscore", "a_b"), ("dot", "a.b"), ("dash", "-ab")]
TEXT_TRICKS = [("nul", "a\u0000b"), ("big", BIG), ("surrogate", "\ud800")]
PERSON_TRICKS = TEXT_TRICKS + [("ctrl", "a\u0001b"), ("newline", "a\nb"), ("del", "a\u007fb"), ("esc", "a\u001bb")]
INTS = [("neg", -1), ("zero", 0), ("2p31", 2 ** 31), ("2p63", 2 ** 63), ("-2p63", -2 ** 63), ("1e308", 1e308),
        ("1e400", "RAW:1e400"), ("10p30", 10 ** 30), ("neg-huge", -10 ** 30)]
DURATIONS = [("neg", "-1h"), ("zero", "0s"), ("zero-all", "0d0h0m"), ("sci", "1e308"), ("nul", "1h\u0000"),
             ("huge", "999999999d"), ("too-long", "367d"), ("unit", "1x"), ("no-num", "h"), ("twice", "1h1h"),
             ("order", "1m1h"), ("emoji", "🚀"), ("space", "1 h"), ("big", "1" * 10240 + "h"), ("empty", "")]
LIST_TRICKS = [("bad-elem-int", [1]), ("bad-elem-null", [None]), ("upper", ["Worker-1"]), ("slash", ["a/b"]),
               ("uni", ["työ"]), ("empty-str", [""]), ("long", ["a" * 64]), ("too-many", ["n%d" % i for i in range(65)]),
               ("dotdot", [".."]), ("nul", ["a\u0000b"]), ("nested", [["worker-1"]])]
STRLIST_TRICKS = [("elem-int", [1]), ("elem-null", [None]), ("elem-obj", [{}]), ("nested", [["a"]]), ("nul", ["a\u0000b"]),
                  ("big", [BIG])]


class Case:
    def __init__(self, route, name, method, path, body, statuses, field=None, key=None, who="admin"):
        self.route, self.name, self.method, self.path = route, name, method, path
        self.body, self.statuses, self.field, self.key, self.who = body, set(statuses), field, key, who

    @property
    def id(self):
        return "%s:%s" % (self.route, self.name)


def raw_json(body):
    """Serialises a body in which "RAW:..." strings stand for raw JSON tokens (numbers json.dumps cannot write)."""
    text = json.dumps(body)
    for tok in ("1e400",):
        text = text.replace('"RAW:%s"' % tok, tok)
    return text.encode()


class Route:
    """One mutating route, a valid base body and its fields.  Each field: (name, kind, required, extra),
    where extra may carry a base body to mutate instead of the route's, and extra hostile values."""

    def __init__(self, name, method, path, base, fields, who="admin", unique=None):
        self.name, self.method, self.path, self.base, self.fields, self.who = name, method, path, base, fields, who
        self.unique = unique  # a name field made unique per case, so that one wrongly accepted case hides no other

    def cases(self):
        out = []
        def add(n, body, statuses, field=None, key=None):
            # jansson refuses "\u0000" while parsing (JSON_ALLOW_NUL is off): a 400 is as good as a 422 then.
            if not isinstance(body, bytes) and "\\u0000" in json.dumps(body):
                statuses = set(statuses) | {400}
            u = self.unique
            if isinstance(body, dict) and u and body.get(u) == self.base.get(u):
                body = dict(body, **{u: "%s-%d" % (self.base[u], len(out))})
            out.append(Case(self.name, n, self.method, self.path, body, statuses, field, key, self.who))
        # the body as a whole
        first = next(iter(self.base))
        for n, raw in [("malformed-open", b"{"), ("malformed-colon", b'{"a":}'), ("single-quotes", b"{'a': 1}"),
                       ("trailing-garbage", json.dumps(self.base).encode() + b"x"),
                       ("trailing-comma", b'{"a": 1,}'), ("bare-word", b"nul"), ("nan", b'{"a": NaN}'),
                       ("invalid-utf8", b'{"' + first.encode() + b'": "\xff\xfe"}'),
                       ("bom", b"\xef\xbb\xbf" + json.dumps(self.base).encode()),
                       ("deep", b'{"a":' * 5000 + b"1" + b"}" * 5000),
                       ("nul-byte", b'{"a"\x00: 1}')]:
            add("body-" + n, raw, {400}, key="MALFORMED_JSON")
        # a key given twice: 422 naming it (test_wrong_types.py has it for every route)
        add("body-dup-key", ('{"%s": 1, "%s": 1}' % (first, first)).encode(), {422}, first)
        for n, val in [("array", [self.base]), ("string", "x"), ("number", 1), ("null", None), ("true", True)]:
            add("body-" + n, json.dumps(val).encode(), {400}, key="MALFORMED_JSON")
        add("body-empty", b"", {400})
        if not getattr(self, "empty_ok", False):  # (PUT /api/v1/settings/policy {} is a valid policy: no limits)
            add("body-empty-object", b"{}", {400, 422})
        extra = dict(self.base, bogusField=1)
        add("unknown-field", extra, {422}, "bogusField")
        add("unknown-field-null", dict(self.base, bogusField=None), {422}, "bogusField")
        add("unknown-field-case", dict({k: v for k, v in self.base.items() if k != first}, **{first.upper(): self.base[first]}),
            {422}, (first.upper(), first))
        out.append(Case(self.name, "unknown-field-ctrl", self.method, self.path, dict(self.base, **{"a\u0001b": 1}),
                        {422}, None, None, self.who))
        out.append(Case(self.name, "unknown-field-emoji", self.method, self.path, dict(self.base, **{"🚀": 1}),
                        {422}, None, None, self.who))
        for fname, kind, required, opts in self.fields:
            base = opts.get("base", self.base)
            statuses_lookup = opts.get("lookup", ())  # statuses a well-typed unknown value may get (404...)
            def mut(v, b=base, f=fname):
                d = copy.deepcopy(b)
                d[f] = v
                return d
            wrong = opts.get("wrong") or WRONG["list" if kind in ("names", "strlist") else "int" if kind == "int"
                                                else "bool" if kind == "bool" else "str"]
            for v in wrong:
                add("%s-type-%s" % (fname, type(v).__name__ + ("-" + str(v)[:6] if v not in ([], {}) else "")),
                    mut(v), {422}, fname)
            if required:
                d = copy.deepcopy(base)
                d.pop(fname, None)
                add("%s-missing" % fname, d, {422}, opts.get("missing_field", fname))
                add("%s-null" % fname, mut(None), {422}, opts.get("missing_field", fname))
            if kind in ("dns", "label", "lookup"):
                tricks = NAME_TRICKS + (DNS_ONLY if kind == "dns" else [])
                for n, v in tricks:
                    if n == "empty" and not required:
                        continue
                    if n == "surrogate":
                        add("%s-%s" % (fname, n), mut(v), {400}, key="MALFORMED_JSON")
                    else:
                        add("%s-%s" % (fname, n), mut(v), {422} | set(statuses_lookup), fname)
            elif kind in ("text", "person"):
                for n, v in (PERSON_TRICKS if kind == "person" else TEXT_TRICKS):
                    add("%s-%s" % (fname, n), mut(v), {400} if n == "surrogate" else {422}, fname)
            elif kind == "int":
                lo = opts.get("min", 1)
                for n, v in INTS:
                    if isinstance(v, int) and v >= lo and v <= opts.get("max", 2 ** 31 - 1):
                        continue
                    body = raw_json(mut(v)) if isinstance(v, str) else mut(v)
                    st = {400} if (isinstance(v, int) and abs(v) >= 2 ** 63 and v != -2 ** 63) or n == "1e400" else {422}
                    add("%s-%s" % (fname, n), body, st, fname)
                for v in opts.get("bad", ()):
                    add("%s-bad-%s" % (fname, v), mut(v), {422}, fname)
            elif kind == "duration":
                for n, v in DURATIONS:
                    if v is None or (n == "empty" and not required):
                        continue
                    add("%s-%s" % (fname, n), mut(v), {422}, fname)
            elif kind == "names":
                for n, v in LIST_TRICKS:
                    add("%s-%s" % (fname, n), mut(v), {422}, opts.get("elem_field", fname))
            elif kind == "strlist":
                for n, v in STRLIST_TRICKS:
                    add("%s-%s" % (fname, n), mut(v), {422}, fname)
            for n, v, st, *rest in opts.get("more", ()):
                add("%s-%s" % (fname, n), mut(v), set(st), rest[0] if rest else fname,
                    rest[1] if len(rest) > 1 else None)
        for n, body, st, *rest in getattr(self, "specials", ()):
            add("special-" + n, body, set(st), rest[0] if rest else None, rest[1] if len(rest) > 1 else None)
        return out


GPR_BASE = {"gprName": "hostile", "sliceName": "team-b", "clusterName": "worker-1", "numberOfGPUs": 1,
            "numberOfGPUNodes": 1, "exitDuration": "1h", "priority": 101, "instanceType": H100["instanceType"],
            "gpuShape": H100["gpuModel"], "memoryPerGpu": 80, "idleTimeOutDuration": "30m", "enforceIdleTimeOut": False,
            "enableEviction": False, "requeueOnFailure": False, "preferredClusters": ["worker-1"],
            "gpuSharingMode": "Dedicated"}
GPR_FIELDS = [
    ("gprName", "label", True, {}),
    ("sliceName", "dns", True, {"lookup": (404,), "more": [("unknown", "zz-none", (404,), "sliceName", "WORKSPACE_NOT_FOUND")]}),
    ("clusterName", "dns", False, {"more": [("not-in-ws", "worker-9", (422,))]}),
    ("instanceType", "label", False, {}),
    ("gpuShape", "label", False, {"more": [("unknown-shape", "NVIDIA-B200", (422,), "gpuShape", "GPR_UNSATISFIABLE")]}),
    ("numberOfGPUs", "int", False, {"max": 64, "bad": [65, 1000],
                                    "more": [("unsatisfiable", 9, (422,), "numberOfGPUs", "GPR_UNSATISFIABLE")]}),
    ("numberOfGPUNodes", "int", True, {"max": 1024, "bad": [1025],
                                       "more": [("unsatisfiable", 2, (422,), "numberOfGPUNodes", "GPR_UNSATISFIABLE")]}),
    ("memoryPerGPU", "int", False, {"min": 0, "max": 2 ** 30}),
    ("memoryPerGpu", "int", False, {"min": 0, "max": 2 ** 30,
                                    "more": [("unsatisfiable", 200000, (422,), "memoryPerGpu", "GPR_UNSATISFIABLE")]}),
    ("exitDuration", "duration", True, {}),
    ("priority", "int", False, {"max": 1000, "bad": [1001, 301000]}),
    ("idleTimeOutDuration", "duration", False, {}),
    ("enforceIdleTimeOut", "bool", False, {}),
    ("enableEviction", "bool", False, {}),
    ("requeueOnFailure", "bool", False, {}),
    ("enableRDMA", "bool", False, {}),
    ("preferredClusters", "names", False, {"more": [("not-in-ws", ["worker-9"], (422,))]}),
    ("gpuSharingMode", "str", False, {"more": [("weird", "Virtual", (422,)), ("nul", "Dedicated\u0000", (422,))]}),
]
SHARED_BASE = dict(GPR_BASE, gpuSharingMode="Shared", numberOfGPUs=0.5)
GPR_SPECIALS = [
    ("shared-two-nodes", dict(SHARED_BASE, numberOfGPUNodes=2), (422,), "numberOfGPUNodes"),
    ("shared-thousandth", dict(SHARED_BASE, numberOfGPUs=0.001), (422,), "numberOfGPUs"),
    ("shared-negative", dict(SHARED_BASE, numberOfGPUs=-0.2), (422,), "numberOfGPUs"),
    ("shared-string", dict(SHARED_BASE, numberOfGPUs="0.2"), (422,), "numberOfGPUs"),
    ("shared-huge", dict(SHARED_BASE, numberOfGPUs=1e9), (422,), "numberOfGPUs"),
    ("shared-unsatisfiable", dict(SHARED_BASE, numberOfGPUs=9), (422,), "numberOfGPUs", "GPR_UNSATISFIABLE"),
    ("dedicated-fraction", dict(GPR_BASE, numberOfGPUs=1.5), (422,), "numberOfGPUs"),
    ("gprId-on-create", dict(GPR_BASE, gprId="gpr-00000000-0000"), (422,), "gprId"),
    ("earlyRelease-on-create", dict(GPR_BASE, earlyRelease=True), (422,), "earlyRelease"),
    ("memory-disagree", dict(GPR_BASE, memoryPerGPU=40, memoryPerGpu=80), (422,), ("memoryPerGpu", "memoryPerGPU")),
    ("idle-enforced-without-duration", {k: v for k, v in dict(GPR_BASE, enforceIdleTimeOut=True).items()
                                         if k != "idleTimeOutDuration"}, (422,), "idleTimeOutDuration"),
    ("name-and-requestName-bad", dict({k: v for k, v in GPR_BASE.items() if k != "gprName"}, requestName="a/b"),
     (422,), ("gprName", "requestName")),
]


POLICY_BASE = {"workspaceName": "team-b", "maxGPRs": 1000, "maxExitDurationPerGPR": "100d",
               "priorityRange": {"min": 1, "max": 1000}, "gpuShapes": [H100["gpuModel"], T4["gpuModel"]],
               "maxGPUPerGpr": 65536, "maxMemoryPerGpr": 10000000, "concurrentGpuQuota": 1000000, "maxNodesPerGpr": 1024,
               "enableAutoEviction": False, "requeueOnFailure": False,
               "softLimits": {"maxExitDurationPerGPR": "99d", "maxGPRs": 999}}
POLICY_WRONG = [1, True, 1.5, [], "x", ["a"]]  # softLimits and priorityRange are objects
POLICY_FIELDS = [
    ("maxGPRs", "int", False, {"min": 0, "max": 1000000, "bad": [1000001]}),
    ("maxExitDurationPerGPR", "duration", False, {}),
    ("priorityRange", "str", False, {"wrong": POLICY_WRONG, "more": [
        ("min-above-max", {"min": 200, "max": 1}, (422,)),
        ("min-zero", {"min": 0, "max": 10}, (422,), "priorityRange.min"),
        ("max-huge", {"min": 1, "max": 1001}, (422,), "priorityRange.max"),
        ("max-missing", {"min": 1}, (422,), "priorityRange.max"),
        ("min-str", {"min": "1", "max": 10}, (422,), "priorityRange.min"),
        ("extra", {"min": 1, "max": 10, "step": 1}, (422,), "priorityRange.step"),
        ("string", "1-200", (422,))]}),
    ("gpuShapes", "strlist", False, {"more": [("slash", ["a/b"], (422,)), ("too-many", ["s%d" % i for i in range(65)], (422,))]}),
    ("maxGPUPerGpr", "int", False, {"max": 65536, "bad": [65537]}),
    ("maxMemoryPerGpr", "int", False, {"max": 10000000, "bad": [10000001]}),
    ("concurrentGpuQuota", "int", False, {"min": 0, "max": 1000000, "bad": [1000001]}),
    ("maxNodesPerGpr", "int", False, {"max": 1024, "bad": [1025]}),
    ("enableAutoEviction", "bool", False, {}),
    ("requeueOnFailure", "bool", False, {}),
    ("softLimits", "str", False, {"wrong": POLICY_WRONG, "more": [
        ("unknown", {"bogus": 1}, (422,), "softLimits.bogus"),
        ("flag", {"requeueOnFailure": True}, (422,), "softLimits.requeueOnFailure"),
        ("nested", {"softLimits": {}}, (422,), "softLimits.softLimits"),
        ("beyond-hard", {"maxGPRs": 1001}, (422,), "softLimits.maxGPRs"),
        ("neg", {"maxGPRs": -1}, (422,), "softLimits.maxGPRs"),
        ("range-beyond-hard", {"priorityRange": {"min": 1, "max": 1001}}, (422,), "softLimits.priorityRange.max"),
        ("shape-not-hard", {"gpuShapes": ["NVIDIA-B200"]}, (422,), "softLimits.gpuShapes"),
        ("duration-bad", {"maxExitDurationPerGPR": "0s"}, (422,), "softLimits.maxExitDurationPerGPR")]}),
]


def routes():
    r = []
    r.append(Route("auth", "POST", "/api/v1/auth", {"apiKey": "@ADMIN_KEY"}, [
        ("apiKey", "str", True, {"more": [
            ("malformed", "not-a-key", (400,), "apiKey", "API_KEY_INVALID"),
            ("short", "0000-0000", (400,), "apiKey", "API_KEY_INVALID"),
            ("uuid-nonhex", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", (400,), "apiKey", "API_KEY_INVALID"),
            ("nul", "00000000-0000-4000-8000-00000000000\u0000", (400, 422)),
            ("big", BIG, (400, 422)), ("emoji", "🚀", (400,), "apiKey", "API_KEY_INVALID"),
            ("unknown-wellformed", WELLFORMED_UNKNOWN_KEY, (401,), None, "UNAUTHENTICATED"),
            ("token-instead-of-key", "egs1.key-00000000-0000.9999999999." + "0" * 64, (400,), "apiKey")]})]))
    ak = Route("api-key-create", "POST", "/api/v1/api-key",
               {"name": "hk-valid", "userName": "u", "description": "d", "role": "Viewer", "validity": "90d",
                "workspaceName": "team-a"}, unique="name", fields=[
        ("name", "label", True, {}),
        ("userName", "person", False, {}),
        ("description", "text", False, {}),
        ("role", "str", True, {"more": [("agent", "Agent", (422,)), ("root", "root", (422,)), ("nul", "Viewer\u0000", (422,)),
                                        ("big", BIG, (422,)), ("empty", "", (422,))]}),
        ("validity", "str", False, {"more": [("neg", "-1d", (422,)), ("zero", "0d", (422,)), ("past", "2020-01-01", (422,)),
                                             ("garbage", "soon", (422,)), ("huge", "99999999999d", (422,)),
                                             ("nul", "1d\u0000", (422,)), ("bad-date", "2027-02-30", (422,)),
                                             ("big", BIG, (422,)), ("emoji", "🚀", (422,))]}),
        ("workspaceName", "lookup", False, {"lookup": (404,), "more": [
            ("unknown", "zz-none", (404,), "workspaceName", "WORKSPACE_NOT_FOUND")]}),
        ("projectName", "lookup", False, {"lookup": (404,), "more": [
            ("unknown", "zz-none", (404,), "projectName", "PROJECT_NOT_FOUND")]}),
    ])
    ak.specials = [("admin-scoped-to-workspace", {"name": "hk-x", "role": "Admin", "workspaceName": "team-a"}, (422,),
                    "workspaceName"),
                   ("duplicate-name", {"name": "owner-a", "role": "Viewer"}, (409,), "name", "API_KEY_ALREADY_EXISTS")]
    r.append(ak)
    akd = Route("api-key-delete", "DELETE", "/api/v1/api-key", {"keyId": "@OWNER_KEY_ID"}, [
        ("keyId", "lookup", False, {"lookup": (404,), "more": [
            ("unknown", "key-00000000-0000", (404,), "keyId", "API_KEY_NOT_FOUND"),
            ("agent-key", "@AGENT1_KEY_ID", (404,), "keyId", "API_KEY_NOT_FOUND"),
            ("self", "@SELF_KEY_ID", (409,), "keyId", "API_KEY_IN_USE")]}),
        ("name", "lookup", False, {"base": {"name": "owner-a", "projectName": "zz-none"}, "lookup": (404,)}),
        ("projectName", "str", False, {}),
    ])
    akd.specials = [("nothing-named", {"description": "x"}, (422,), "description")]
    r.append(akd)
    pr = Route("projects", "POST", "/api/v1/projects", {"projectName": "hp-valid"}, unique="projectName", fields=[
        ("projectName", "dns", True, {})])
    pr.specials = [("duplicate", {"projectName": "default"}, (409,), "projectName", "PROJECT_ALREADY_EXISTS")]
    r.append(pr)
    wsc = Route("ws-create", "POST", "/api/v1/slice-workspace",
                {"workspaceName": "hw-valid", "clusters": ["worker-1"], "namespaces": ["hw-ns"], "username": "user",
                 "email": "u@example.com", "description": "d"}, unique="workspaceName", fields=[
        ("workspaceName", "dns", True, {}),
        ("clusters", "names", True, {"more": [("empty", [], (422,)),
                                              ("unregistered", ["worker-9"], (422,), "clusters", "CLUSTER_NOT_FOUND")]}),
        ("namespaces", "names", False, {}),
        ("username", "person", False, {}),
        ("email", "person", False, {"more": [("no-at", "nobody", (422,)), ("space", "a b@x.io", (422,)),
                                             ("bell", "a\u0007@example.com", (422,)), ("cr", "a@example.com\r", (422,))]}),
        ("description", "text", False, {}),
        ("projectName", "lookup", False, {"lookup": (404,), "more": [
            ("unknown", "zz-none", (404,), "projectName", "PROJECT_NOT_FOUND")]}),
    ])
    wsc.specials = [("duplicate", {"workspaceName": "team-a", "clusters": ["worker-1"]}, (409,), "workspaceName",
                     "WORKSPACE_ALREADY_EXISTS")]
    r.append(wsc)
    wsu = Route("ws-update", "PUT", "/api/v1/slice-workspace", {"workspaceName": "team-b", "description": "kept"}, [
        ("workspaceName", "lookup", True, {"lookup": (404,), "more": [
            ("unknown", "zz-none", (404,), "workspaceName", "WORKSPACE_NOT_FOUND")]}),
        ("addNamespaces", "names", False, {}),
        ("removeNamespaces", "names", False, {}),
        ("addClusters", "names", False, {"more": [("unregistered", ["worker-9"], (422,), "addClusters", "CLUSTER_NOT_FOUND")]}),
        ("removeClusters", "names", False, {"base": {"workspaceName": "team-a"},
                                            "more": [("last", ["worker-1"], (409, 422))]}),
        ("addUsers", "names", False, {"elem_field": ("addUsers", "addUsers[0]"),  # a list of objects: the element
                                      "more": [("elem-str", ["bob"], (422,), ("addUsers", "addUsers[0]")), ("user-int", [{"username": 5}], (422,),
                                                                                  ("addUsers[0].username", "username")),
                                               ("user-ctrl", [{"username": "a\u0001b"}], (422,), ("addUsers[0].username", "username")),
                                               ("email-bad", [{"username": "bob", "email": "nobody"}], (422,),
                                                ("addUsers[0].email", "email"))]}),
        ("removeUsers", "strlist", False, {}),
        ("description", "text", False, {}),
    ])
    r.append(wsu)
    r.append(Route("ws-delete", "DELETE", "/api/v1/slice-workspace", {"workspaceName": "team-b"}, [
        ("workspaceName", "lookup", True, {"lookup": (404,), "more": [
            ("active-gpr", "team-a", (409,), "workspaceName", "WORKSPACE_HAS_ACTIVE_GPR")]})]))
    r.append(Route("kube-config", "POST", "/api/v1/slice-workspace/kube-config",
                   {"workspaceName": "team-a", "clusterName": "worker-1"}, [
        ("workspaceName", "lookup", True, {"lookup": (404,)}),
        ("clusterName", "lookup", True, {"lookup": (404,), "more": [
            ("not-in-ws", "worker-2", (404,), "clusterName", "CLUSTER_NOT_FOUND")]})]))
    cr = Route("cluster-register", "POST", "/api/v1/clusters",
               {"clusterName": "hc-valid", "apiServer": "https://10.0.0.9:6443", "caData": "QUJD"}, unique="clusterName",
               fields=[
        ("clusterName", "dns", True, {}),
        ("apiServer", "str", False, {"more": [("js", "javascript:alert(1)", (422,)), ("ftp", "ftp://x", (422,)),
                                              ("space", "https://a b", (422,)), ("quote", 'https://a"b', (422,)),
                                              ("newline", "https://a\nb", (422,)), ("nul", "https://a\u0000", (422,)),
                                              ("big", "https://x/" + BIG, (422,)), ("uni", "https://työ.example", (422,))]}),
        ("caData", "str", False, {"more": [("not-b64", "not base64!", (422,)), ("big", "QUJD" * 2000, (422,)),
                                           ("nul", "QUJD\u0000", (422,)), ("yaml-inject", "QUJD\"\nusers: []", (422,))]}),
        ("projectName", "lookup", False, {"lookup": (404,)}),
    ])
    cr.specials = [("duplicate", {"clusterName": "worker-1"}, (409,), "clusterName", "CLUSTER_ALREADY_EXISTS")]
    r.append(cr)
    r.append(Route("cluster-update", "PUT", "/api/v1/clusters",
                   {"clusterName": "worker-1", "apiServer": "https://10.0.0.1:6443"}, [
        ("clusterName", "lookup", True, {"lookup": (404,), "more": [
            ("unknown", "worker-9", (404,), "clusterName", "CLUSTER_NOT_FOUND")]}),
        ("apiServer", "str", False, {"more": [("js", "javascript:alert(1)", (422,)), ("space", "https://a b", (422,)),
                                              ("big", "https://x/" + BIG, (422,))]}),
        ("caData", "str", False, {"more": [("not-b64", "not base64!", (422,)), ("big", "QUJD" * 2000, (422,))]}),
    ]))
    gc = Route("gpr-create", "POST", "/api/v1/gpr", GPR_BASE, GPR_FIELDS)
    gc.specials = GPR_SPECIALS
    r.append(gc)
    gw = Route("gpr-waittime", "POST", "/api/v1/gpr/waittime", GPR_BASE, GPR_FIELDS)
    gw.specials = [x for x in GPR_SPECIALS if not x[0].endswith("-on-create")]
    r.append(gw)
    gu = Route("gpr-update", "PUT", "/api/v1/gpr", {"gprId": "@Q", "priority": 150}, [
        ("gprId", "lookup", True, {"lookup": (404,), "more": [
            ("unknown", "gpr-00000000-0000", (404,), "gprId", "GPR_NOT_FOUND")]}),
        ("priority", "int", False, {"max": 1000, "bad": [1001]}),
        ("gprName", "label", False, {}),
        ("numberOfGPUs", "int", False, {"max": 64, "bad": [65],
                                        "more": [("unsatisfiable", 9, (422,), "numberOfGPUs", "GPR_UNSATISFIABLE")]}),
        ("exitDuration", "duration", False, {}),
        ("earlyRelease", "bool", False, {}),
        ("preferredClusters", "names", False, {}),
        ("sliceName", "str", False, {"more": [("any", "team-a", (422,))]}),
    ])
    gu.specials = [("release-queued", {"gprId": "@Q", "earlyRelease": True}, (409,), "gprId", "GPR_NOT_PROVISIONED"),
                   ("release-combined", {"gprId": "@P", "earlyRelease": True, "priority": 5}, (422,), "earlyRelease"),
                   ("priority-provisioned", {"gprId": "@P", "priority": 5}, (409,), "gprId", "GPR_ALREADY_PROVISIONED"),
                   ("rename-provisioned", {"gprId": "@P", "gprName": "x"}, (409,), "gprId", "GPR_ALREADY_PROVISIONED"),
                   ("dedicated-fraction", {"gprId": "@Q", "numberOfGPUs": 0.5}, (422,), "numberOfGPUs"),
                   ("shared-two-nodes", {"gprId": "@Q", "gpuSharingMode": "Shared", "numberOfGPUNodes": 2}, (422,),
                    "numberOfGPUNodes"),
                   ("shared-thousandth", {"gprId": "@Q", "gpuSharingMode": "Shared", "numberOfGPUs": 0.001}, (422,),
                    "numberOfGPUs"),
                   ("sharing-mode-int", {"gprId": "@Q", "gpuSharingMode": 5}, (422,), "gpuSharingMode")]
    r.append(gu)
    gd = Route("gpr-delete", "DELETE", "/api/v1/gpr", {"gprId": "@Q"}, [
        ("gprId", "lookup", True, {"lookup": (404,), "more": [
            ("provisioned", "@P", (409,), "gprId", "GPR_ALREADY_PROVISIONED")]})])
    r.append(gd)
    for verb in ("approve", "reject"):
        ga = Route("gpr-" + verb, "POST", "/api/v1/gpr/" + verb, {"gprId": "@Q"}, [
            ("gprId", "lookup", True, {"lookup": (404, 409), "more": [
                ("queued", "@Q", (409,), "gprId", "GPR_NOT_PENDING"),
                ("provisioned", "@P", (409,), "gprId")]})])
        if verb == "reject":
            ga.fields.append(("reason", "text", False, {"base": {"gprId": "@Q", "reason": "no"}}))
        r.append(ga)
    r.append(Route("policy-put", "PUT", "/api/v1/slice-workspace/policy", POLICY_BASE, [
        ("workspaceName", "lookup", True, {"lookup": (404,), "more": [
            ("unknown", "zz-none", (404,), "workspaceName", "WORKSPACE_NOT_FOUND")]})] + POLICY_FIELDS))
    r.append(Route("policy-delete", "DELETE", "/api/v1/slice-workspace/policy", {"workspaceName": "team-b"}, [
        ("workspaceName", "lookup", True, {"lookup": (404,), "more": [
            ("no-policy", "team-a", (404,), "workspaceName", "POLICY_NOT_FOUND")]})]))
    gp = Route("global-policy-put", "PUT", "/api/v1/settings/policy",
               {k: v for k, v in POLICY_BASE.items() if k != "workspaceName"}, POLICY_FIELDS)
    gp.empty_ok = True
    gp.specials = [("workspaceName", POLICY_BASE, (422,), "workspaceName")]
    r.append(gp)
    r.append(Route("debug-clock", "POST", "/api/v1/debug/clock", {"advance": "1h"}, [
        ("advance", "duration", True, {})]))
    node = {"name": "t4-1", "instanceType": T4["instanceType"], "gpuModel": T4["gpuModel"], "gpuCount": 4,
            "memoryMiB": 16384}

    def with_node(**kw):
        n = dict(node, **kw)
        return {"clusterName": "worker-2", "agentVersion": "test", "nodes": [n]}

    reg = Route("agent-register", "POST", "/api/v1/agent/register",
                {"clusterName": "worker-2", "agentVersion": "test", "nodes": [node]}, [
        ("clusterName", "str", False, {"more": [("other-cluster", "worker-1", (403,), "clusterName", "FORBIDDEN"),
                                                ("nul", "worker-2\u0000", (403, 422))]}),
        ("agentVersion", "str", False, {"more": [("nul", "1\u0000", (422,)), ("big", BIG, (422,))]}),
        ("nodes", "str", True, {"wrong": [1, True, 1.5, {}, "t4-1", {"0": node}],
                                "more": [("elem-int", [1], (422,), "nodes[0]"), ("elem-str", ["t4-1"], (422,), "nodes[0]"),
                                         ("elem-list", [[node]], (422,), "nodes[0]")]}),
    ])
    reg.specials = []
    # (a NUL in a node name is tried on a server of its own below: accepting it would re-register the cluster)
    for f, vals in [("name", [("slash", "a/b"), ("dotdot", ".."), ("uni", "työ"), ("big", BIG),
                              ("int", 5), ("empty", ""), ("ctrl", "a\u0001b")]),
                    ("instanceType", [("int", 5), ("slash", "a/b"), ("big", BIG), ("empty", "")]),
                    ("gpuModel", [("list", []), ("space", "a b"), ("emoji", "🚀")]),
                    ("cloudProvider", [("int", 1), ("slash", "a/b")]),
                    ("region", [("obj", {}), ("slash", "a/b")]),
                    ("gpuCount", [("neg", -1), ("zero", 0), ("huge", 2 ** 31), ("str", "8"), ("float", 1.5), ("65", 65)]),
                    ("memoryMiB", [("neg", -1), ("zero", 0), ("huge", 2 ** 40), ("str", "1"), ("float", 1e308)]),
                    ("gpus", [("str", "x"), ("elem-int", [1]), ("uuid-int", [{"uuid": 5}]), ("uuid-slash", [{"uuid": "a/b"}]),
                              ("too-many", [{"uuid": "g%d" % i} for i in range(65)])])]:
        # (a malformed attachedGpr at registration is taken as nothing attached, with a Warning event:
        # test_agent_wire.py covers it; a restarted agent must not be locked out by one bad state file)
        for n, v in vals:
            reg.specials.append(("node-%s-%s" % (f, n), with_node(**{f: v}), (422,),
                                 ("nodes[0].%s" % f, f) if f in ("gpuCount", "memoryMiB") else
                                 tuple("nodes[0].%s%s" % (f, s) for s in ("", "[0]", "[0].uuid"))))
    reg.specials.append(("node-missing-name", {"clusterName": "worker-2", "nodes": [{k: v for k, v in node.items() if k != "name"}]},
                         (422,), "nodes[0].name"))
    reg.specials.append(("node-missing-gpuCount", {"clusterName": "worker-2", "nodes": [{k: v for k, v in node.items()
                                                                                         if k != "gpuCount"}]},
                         (422,), ("nodes[0].gpuCount", "gpuCount")))
    reg.specials.append(("node-twice", {"clusterName": "worker-2", "nodes": [node, node]}, (422,), "nodes[1].name"))
    r.append(reg)
    hb_node = {"name": "t4-1", "health": "Healthy", "attachedGpr": "", "gpus": []}
    hb = Route("agent-heartbeat", "POST", "/api/v1/agent/heartbeat", {"clusterName": "worker-2", "nodes": [hb_node]}, [
        ("clusterName", "str", False, {"more": [("other-cluster", "worker-1", (403,), "clusterName", "FORBIDDEN")]}),
        ("nodes", "str", True, {"wrong": [1, True, 1.5, {}, "t4-1", {"0": hb_node}],
                                "more": [("elem-int", [1], (422,), ("nodes[0]", "nodes[0].name"))]}),
    ])
    hb.specials = []
    for f, vals in [("name", [("int", 5), ("null", None), ("list", [])]),
                    ("health", [("int", 5), ("obj", {})]),
                    ("attachedGpr", [("int", 5), ("big", BIG)]),
                    ("gpus", [("str", "x"), ("elem-str", ["x"]), ("power-str", [{"uuid": "x", "powerW": "hot"}])])]:
        for n, v in vals:
            hb.specials.append(("node-%s-%s" % (f, n), {"clusterName": "worker-2", "nodes": [dict(hb_node, **{f: v})]},
                                (422,), tuple("nodes[0].%s%s" % (f, s) for s in ("", "[0]", "[0].uuid", "[0].powerW"))))
    r.append(hb)
    res_base = {"clusterName": "worker-2", "actionId": "detach:gpr-00000000-0000:t4-1", "type": "detach",
                "gprId": "gpr-00000000-0000", "node": "t4-1", "ok": True, "message": "done"}
    res = Route("agent-result", "POST", "/api/v1/agent/actions/result", res_base, [
        ("clusterName", "str", False, {"more": [("other-cluster", "worker-1", (403,), "clusterName", "FORBIDDEN")]}),
        ("actionId", "text", False, {}),
        ("type", "str", True, {"more": [("explode", "explode", (422,)), ("nul", "detach\u0000", (422,)),
                                        ("upper", "DETACH", (422,))]}),
        ("gprId", "text", True, {"more": [("ctrl", "gpr-\u0001", (404, 422))]}),
        ("node", "lookup", True, {"lookup": (404,), "more": [
            ("other-cluster-node", "h100-1", (404,), "node", "NODE_NOT_FOUND")]}),
        ("ok", "bool", True, {}),
        ("message", "text", False, {}),
    ])
    r.append(res)
    for x in (reg, hb, res):
        x.who = "agent"
    return r


ALL_CASES = [c for rt in routes() for c in rt.cases()]
# agent routes are called with worker-2's agent token
for _c in ALL_CASES:
    if _c.route.startswith("agent-"):
        _c.who = "agent"


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_hostile_body(env, case):
    run_case(env, case)


def test_table_covers_every_mutating_route_ten_times():
    per_route = {}
    for c in ALL_CASES:
        per_route[(c.method, c.path)] = per_route.get((c.method, c.path), 0) + 1
    mutating = [("POST", "/api/v1/auth"), ("POST", "/api/v1/api-key"), ("DELETE", "/api/v1/api-key"),
                ("POST", "/api/v1/projects"), ("POST", "/api/v1/slice-workspace"), ("PUT", "/api/v1/slice-workspace"),
                ("DELETE", "/api/v1/slice-workspace"), ("POST", "/api/v1/slice-workspace/kube-config"),
                ("POST", "/api/v1/clusters"), ("PUT", "/api/v1/clusters"), ("POST", "/api/v1/gpr"), ("PUT", "/api/v1/gpr"),
                ("DELETE", "/api/v1/gpr"), ("POST", "/api/v1/gpr/waittime"), ("POST", "/api/v1/gpr/approve"),
                ("POST", "/api/v1/gpr/reject"), ("POST", "/api/v1/debug/clock"), ("POST", "/api/v1/agent/register"),
                ("PUT", "/api/v1/slice-workspace/policy"), ("DELETE", "/api/v1/slice-workspace/policy"),
                ("PUT", "/api/v1/settings/policy"),
                ("POST", "/api/v1/agent/heartbeat"), ("POST", "/api/v1/agent/actions/result")]
    for m in mutating:
        assert per_route.get(m, 0) >= 10, (m, per_route.get(m))


def test_valid_bases_really_work(env):
    """The table's base bodies are valid (so each case fails only for its hostile part): the read-only ones
    succeed as they stand."""
    a = env.admin
    s = env.subs
    assert a.call("POST", "/api/v1/auth", {"apiKey": s["@ADMIN_KEY"]})[0] == 200
    assert a.call("POST", "/api/v1/gpr/waittime", GPR_BASE)[0] == 200
    assert a.call("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "team-a", "clusterName": "worker-1"})[0] == 200
    before = snapshot(a)
    st, doc = env.agent2.call("POST", "/api/v1/agent/heartbeat", {"clusterName": "worker-2", "nodes": [
        {"name": "t4-1", "health": "Healthy", "attachedGpr": "", "gpus": []}]})
    assert st == 200, doc
    assert diff(before, snapshot(a)) == []


def test_clock_not_moved_by_hostile_advances(env):
    """The debug clock cases above must not have moved the dev clock: one more second lands on offset 1."""
    data = env.admin.ok("POST", "/api/v1/debug/clock", {"advance": "1s"})
    assert data["offsetSeconds"] == 1, data


# ---------------------------------------------------------------------------------------------------
# query strings, paths, methods
# ---------------------------------------------------------------------------------------------------

QUERY_CASES = [
    ("/api/v1/gpr?gprId=", {422}, "gprId"),
    ("/api/v1/gpr", {422}, "gprId"),
    ("/api/v1/gpr?gprId=..", {404}, "gprId"),
    ("/api/v1/gpr?gprId=%2e%2e%2flist", {404}, "gprId"),
    ("/api/v1/gpr?gprId=gpr-00000000-0000", {404}, "gprId"),
    ("/api/v1/gpr?gprId=" + "a" * 5000, {404, 414, 422}, "gprId"),
    ("/api/v1/gpr?gprId=a%00b", {400, 404, 422}, "gprId"),
    ("/api/v1/gpr/list?sliceName=zz-none", {404}, "sliceName"),
    ("/api/v1/gpr/list?sliceName=..%2fteam-a", {404}, "sliceName"),
    ("/api/v1/gpr/list?sliceName=%00", {400, 404, 422}, "sliceName"),
    ("/api/v1/gpr/list?status=Bogus", {422}, "status"),
    ("/api/v1/gpr/list?status=%ff", {422}, "status"),
    ("/api/v1/gpr/list?sliceName=team-a&sliceName=team-b", {400, 422}, "sliceName"),
    ("/api/v1/gpr/list?status=Queued&status=Provisioned", {400, 422}, "status"),
    ("/api/v1/gpr/list?a", {400}, None),
    ("/api/v1/gpr/list?&&&==", {400}, None),
    ("/api/v1/slice-workspace", {422}, "workspaceName"),
    ("/api/v1/slice-workspace?workspaceName=zz-none", {404}, "workspaceName"),
    ("/api/v1/slice-workspace?workspaceName=..", {404}, "workspaceName"),
    ("/api/v1/inventory", {422}, "sliceName"),
    ("/api/v1/inventory?sliceName=zz-none", {404}, "sliceName"),
    ("/api/v1/inventory?sliceName=%ff", {404, 422}, "sliceName"),
    ("/api/v1/nodes/zz-none/gpu-alloc-map", {404}, "node"),
    ("/api/v1/nodes/%ff/gpu-alloc-map", {404}, "node"),
    ("/api/v1/nodes/" + "n" * 300 + "/gpu-alloc-map", {404}, "node"),
    ("/api/v1/nodes/h100-1/gpu-alloc-map?clusterName=zz-none", {404}, "node"),
    ("/api/v1/nodes/h100-1/gpu-alloc-map?clusterName=%ff", {404, 422}, None),
    ("/api/v1/events?limit=-1", {422}, "limit"),
    ("/api/v1/events?limit=0", {422}, "limit"),
    ("/api/v1/events?limit=1e3", {422}, "limit"),
    ("/api/v1/events?limit=99999999999999999999999", {422}, "limit"),
    ("/api/v1/events?limit=", {422}, "limit"),
    ("/api/v1/events?limit=%ff", {422}, "limit"),
]


@pytest.mark.parametrize("path,statuses,field", QUERY_CASES, ids=[q[0][:60] for q in QUERY_CASES])
def test_hostile_query(env, path, statuses, field):
    before = snapshot(env.admin)
    status, doc = env.admin.call("GET", path)
    problems = error_problems(status, doc, statuses, field)
    assert not problems, (path, status, doc, problems)
    assert diff(before, snapshot(env.admin)) == []


AGENT_QUERY = [("/api/v1/agent/actions?wait=-1", "wait"), ("/api/v1/agent/actions?wait=61", "wait"),
               ("/api/v1/agent/actions?wait=abc", "wait"), ("/api/v1/agent/actions?wait=", "wait"),
               ("/api/v1/agent/actions?wait=99999999999999999999", "wait"), ("/api/v1/agent/actions?wait=1e1", "wait")]


@pytest.mark.parametrize("path,field", AGENT_QUERY, ids=[q[0] for q in AGENT_QUERY])
def test_hostile_agent_query(env, path, field):
    status, doc = env.agent2.call("GET", path)
    assert not error_problems(status, doc, {422}, field), (status, doc)


PATH_CASES = [
    ("GET", "/api/v1/../api/v1/gpr/list", {400, 404}),
    ("GET", "/api/v1/gpr/%2e%2e/list", {400, 404}),
    ("GET", "/api/v1/gpr/../gpr/list", {400, 404}),
    ("GET", "//api/v1/gpr/list", {400, 404}),
    ("GET", "/api//v1/gpr/list", {400, 404}),
    ("GET", "/api/v1/gpr/list/", {400, 404}),
    ("GET", "/api/v1/gpr%2flist", {400, 404}),
    ("GET", "/API/V1/GPR/LIST", {400, 404}),
    ("GET", "/api/v1/gpr/list;jsessionid=1", {400, 404}),
    ("GET", "/api/v1/gpr/list%00", {400, 404}),
    ("GET", "/api/v1/gpr/list%20", {400, 404}),
    ("GET", "/api/v1/%C3%A9", {400, 404}),
    ("GET", "/" + "a" * 10000, {400, 404, 414}),
    ("GET", "/api/v1/gpr/list/" + "../" * 3000, {400, 404, 414}),
    ("POST", "/api/v1/gpr/../../../../etc/passwd", {400, 404}),
    ("GET", "/api/v1/nope", {404}),
    ("GET", "/api/v2/gpr/list", {404}),
    ("GET", "/api", {404}),  # "/" is the portal (test_portal.py)
    ("DELETE", "/api/v1/does-not-exist", {404}),
]


@pytest.mark.parametrize("method,path,statuses", PATH_CASES, ids=["%s %s" % (m, p[:50]) for m, p, _ in PATH_CASES])
def test_path_tricks(env, method, path, statuses):
    before = snapshot(env.admin)
    status, doc = env.admin.call(method, path, b"{}" if method != "GET" else None)
    assert not error_problems(status, doc, statuses), (path, status, doc)
    if status == 404:
        assert doc["error"]["errorKey"] == "ROUTE_NOT_FOUND", doc
    assert diff(before, snapshot(env.admin)) == []


def test_unknown_routes_404_even_unauthenticated(env):
    anon = Api(env.cluster.egsd.port)
    for path in ("/api/v1/nope", "/api/v1/gpr/list/extra", "/metrics/../api/v1/gpr"):
        status, doc = anon.call("GET", path)
        assert status == 404 and not error_problems(status, doc, {404}, key="ROUTE_NOT_FOUND"), (path, status, doc)


METHOD_CASES = [("PATCH", "/api/v1/gpr"), ("GET", "/api/v1/auth"), ("DELETE", "/api/v1/gpr/list"),
                ("PUT", "/api/v1/api-key"), ("PUT", "/api/v1/projects"), ("DELETE", "/api/v1/clusters"),
                ("POST", "/api/v1/inventory/list"), ("GET", "/api/v1/gpr/approve"), ("PUT", "/api/v1/agent/register"),
                ("POST", "/api/v1/agent/actions"), ("GET", "/api/v1/debug/clock"), ("OPTIONS", "/api/v1/gpr"),
                ("POST", "/healthz")]


@pytest.mark.parametrize("method,path", METHOD_CASES, ids=["%s %s" % m for m in METHOD_CASES])
def test_wrong_method_405(env, method, path):
    before = snapshot(env.admin)
    status, doc = env.admin.call(method, path, b"{}")
    assert not error_problems(status, doc, {405}, key="METHOD_NOT_ALLOWED"), (method, path, status, doc)
    assert diff(before, snapshot(env.admin)) == []


# ---------------------------------------------------------------------------------------------------
# sizes: bodies and headers
# ---------------------------------------------------------------------------------------------------

def raw_http(port, head, body=b"", timeout=10):
    """Sends raw bytes; returns (status or None, headers bytes, body bytes).  Tolerates the server closing early."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(head + body)
        except OSError:
            pass
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            out += b
            hdr, sep, rest = out.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"content-length:\s*(\d+)", hdr, re.I)
                if m and len(rest) >= int(m.group(1)):
                    break
    finally:
        s.close()
    if not out.startswith(b"HTTP/1."):
        return None, b"", out
    hdr, _, rest = out.partition(b"\r\n\r\n")
    return int(hdr.split()[1]), hdr, rest


def still_answers(env):
    st, doc = env.admin.call("GET", "/api/v1/gpr/list")
    return st == 200 and env.cluster.egsd.proc.poll() is None


@pytest.mark.parametrize("path", ["/api/v1/gpr", "/api/v1/slice-workspace", "/api/v1/auth", "/api/v1/agent/heartbeat"])
def test_body_over_1mib_refused(env, path):
    before = snapshot(env.admin)
    key = env.subs["@ADMIN_KEY"].encode()
    body = b'{"gprName": "' + b"a" * (1024 * 1024 + 10) + b'"}'
    head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
            b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    status, _, _ = raw_http(env.cluster.egsd.port, head, body)
    assert status == 413, status
    assert still_answers(env)
    assert diff(before, snapshot(env.admin)) == []


def test_body_just_under_limit_is_parsed(env):
    """A body under the bound is read and refused for its content (422 naming the field), not for its size."""
    pad = 1024 * 1024 - len(json.dumps(dict(GPR_BASE, gprName=""))) - 1
    body = json.dumps(dict(GPR_BASE, gprName="a" * pad))
    assert len(body) < 1024 * 1024
    status, doc = env.admin.call("POST", "/api/v1/gpr", body)
    assert not error_problems(status, doc, {422}, "gprName"), (status, doc)


def test_content_length_lies(env):
    key = env.subs["@ADMIN_KEY"].encode()
    head = (b"POST /api/v1/gpr HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
            b"\r\nContent-Length: 999999999\r\n\r\n")
    status, _, _ = raw_http(env.cluster.egsd.port, head, b"{}", timeout=3)
    assert status is None or 400 <= status < 500, status
    head = b"POST /api/v1/gpr HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"
    status, _, _ = raw_http(env.cluster.egsd.port, head, b"{}", timeout=3)
    assert status is None or 400 <= status < 500, status
    head = b"POST /api/v1/gpr HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    status, _, _ = raw_http(env.cluster.egsd.port, head, b"zz\r\nxx\r\n0\r\n\r\n", timeout=3)
    assert status is None or 400 <= status < 500, status
    assert still_answers(env)


@pytest.mark.parametrize("size", [64 * 1024, 1024 * 1024])
def test_huge_header_refused(env, size):
    key = env.subs["@ADMIN_KEY"].encode()
    head = (b"GET /api/v1/gpr/list HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + b"\r\nX-Big: " +
            b"a" * size + b"\r\n\r\n")
    status, _, _ = raw_http(env.cluster.egsd.port, head)
    # A 1 MiB header may be cut off by a reset before the answer is read; 64 KB must be answered.
    assert (status is None and size > 65536) or (status is not None and 400 <= status < 500), status
    assert still_answers(env)


def test_many_headers_and_huge_authorization(env):
    head = b"GET /api/v1/gpr/list HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(3000)) + b"\r\n"
    status, _, _ = raw_http(env.cluster.egsd.port, head)
    assert status is not None and 400 <= status < 500, status
    bad = env.admin.with_token("egs1." + "a" * 12000)
    status, doc = bad.call("GET", "/api/v1/gpr/list")
    assert 400 <= status < 500, status
    assert still_answers(env)


def test_raw_request_line_garbage(env):
    port = env.cluster.egsd.port
    for line in (b"GET /api/v1/gpr/list HTTP/9.9\r\nHost: x\r\n\r\n", b"GET\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                 b"GET /api/v1/gpr/list HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
                 b"GET " + b"/a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"):
        status, _, _ = raw_http(port, line, timeout=3)
        assert status is None or 400 <= status < 600 and status != 500, (line[:40], status)
        assert still_answers(env), line[:40]


# ---------------------------------------------------------------------------------------------------
# inputs that kill a broken server: each gets its own egsd
# ---------------------------------------------------------------------------------------------------

def egsd_survives(e):
    time.sleep(0.05)
    if e.proc.poll() is not None:
        return False
    try:
        st, _ = e.api().call("GET", "/api/v1/gpr/list")
    except OSError:
        return False
    return st == 200


FATAL_QUERIES = [
    ("GET", "/api/v1/gpr?gprId=%ff", "gprId"),
    ("GET", "/api/v1/gpr?gprId=%c3", "gprId"),
    ("GET", "/api/v1/gpr?gprId=" + "%C3%A9" * 300, "gprId"),
    ("GET", "/api/v1/slice-workspace?workspaceName=%ff", "workspaceName"),
    ("GET", "/api/v1/slice-workspace?workspaceName=" + "%E2%82%AC" * 200, "workspaceName"),
    ("GET", "/api/v1/gpr/list?sliceName=%ff%fe", "sliceName"),
    ("GET", "/api/v1/inventory?sliceName=%80", "sliceName"),
    ("GET", "/api/v1/events?workspace=%ff&gprId=%ff&type=%ff", None),
    ("GET", "/api/v1/nodes?clusterName=%ff", None),
    ("GET", "/api/v1/nodes/%ff%fe/gpu-alloc-map?clusterName=%ff", None),
]


@pytest.mark.parametrize("method,path,field", FATAL_QUERIES, ids=[p[:50] for _, p, _ in FATAL_QUERIES])
def test_non_utf8_and_long_query_values_do_not_kill_egsd(egsd, method, path, field):
    api = egsd.api()
    try:
        status, doc = api.call(method, path)
    except OSError as exc:
        status, doc = None, repr(exc)
    assert egsd_survives(egsd), "egsd died on %s %s (log tail: %s)" % (method, path, egsd.logs()[-300:])
    if status != 200:
        assert not error_problems(status, doc, {400, 404, 422}, field), (status, doc)


@pytest.mark.parametrize("raw_path", [b"/api/v1/\xff", b"/\xc3", b"/api/v1/gpr?gprId=\xff", b"\xff\xfe/api"])
def test_non_utf8_request_path_does_not_kill_egsd(egsd, raw_path):
    """Unauthenticated: the path is echoed in the 404's message."""
    status, _, body = raw_http(egsd.port, b"GET " + raw_path + b" HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)
    assert egsd_survives(egsd), "egsd died on GET %r (log tail: %s)" % (raw_path, egsd.logs()[-300:])
    assert status is not None and 400 <= status < 500, (status, body[:200])


def agent_only_cluster(egsd, node_name):
    """A cluster whose agent is this test (no egs-agent process): returns (admin api, agent api)."""
    admin = egsd.api()
    tok = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    agent = admin.with_token(tok)
    agent.ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [
        {"name": node_name, "instanceType": "p5.48xlarge", "gpuModel": H100["gpuModel"], "gpuCount": 8,
         "memoryMiB": 81920}]})
    return admin, agent


@pytest.mark.parametrize("type_", ["attach", "detach"])
def test_agent_failure_message_cannot_poison_events(egsd, type_):
    """An agent's failure message lands in an event message (a 512-byte buffer); cut in the middle of a
    UTF-8 sequence it must not make the event list (or the server) unusable, now or after a restart."""
    node = "n" * 63
    admin, agent = agent_only_cluster(egsd, node)
    for gid_len in (20, 21, 22, 23):
        gid = "gpr-" + "0" * (gid_len - 4)
        status, doc = agent.call("POST", "/api/v1/agent/actions/result",
                                 {"type": type_, "gprId": gid, "node": node, "ok": False, "message": "é" * 199})
        assert egsd_survives(egsd), egsd.logs()[-300:]
        assert status in (200, 422), (status, doc)
    try:
        status, doc = admin.call("GET", "/api/v1/events")
    except OSError as exc:
        status, doc = None, repr(exc)
    assert egsd_survives(egsd) and status == 200, ("GET /api/v1/events", status, egsd.logs()[-300:])
    for ev in doc["data"]["items"]:
        ev["message"].encode("utf-8")
    egsd.stop()
    egsd.start()
    status, doc = egsd.api().call("GET", "/api/v1/events")
    assert status == 200 and egsd_survives(egsd)


def test_agent_precheck_message_cannot_poison_gpr(egsd):
    """The pre-check failure message becomes the GPR's failureReason (a 300-byte buffer)."""
    admin, agent = agent_only_cluster(egsd, "h1")
    admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["c1"]})
    gid = admin.ok("POST", "/api/v1/gpr", {"gprName": "j", "sliceName": "w", "numberOfGPUNodes": 1, "exitDuration": "1h"})["gprId"]
    wait_for(lambda: admin.get("/api/v1/gpr?gprId=" + gid)["status"]["provisioningStatus"] == "Provisioning",
             what="provisioning")
    for msg in ("é" * 199,):
        status, doc = agent.call("POST", "/api/v1/agent/actions/result",
                                 {"type": "attach", "gprId": gid, "node": "h1", "ok": False, "message": msg})
        assert egsd_survives(egsd), egsd.logs()[-300:]
        try:
            st, got = admin.call("GET", "/api/v1/gpr?gprId=" + gid)
        except OSError as exc:
            st, got = None, repr(exc)
        assert egsd_survives(egsd) and st == 200, (st, egsd.logs()[-300:])
        got["data"]["status"]["failureReason"].encode("utf-8")
        assert admin.call("GET", "/api/v1/gpr/list")[0] == 200


def test_heartbeat_with_a_bad_node_changes_nothing(egsd):
    """A heartbeat refused with a 4xx for its second node must not have applied its first node."""
    admin, agent = agent_only_cluster(egsd, "h1")
    agent.ok("POST", "/api/v1/agent/heartbeat", {"clusterName": "c1", "nodes": [{"name": "h1", "health": "Healthy"}]})
    before = [n["nodeHealth"] for n in admin.get("/api/v1/inventory/list")["items"]]
    assert before == ["Healthy"]
    status, doc = agent.call("POST", "/api/v1/agent/heartbeat", {"clusterName": "c1", "nodes": [
        {"name": "h1", "health": "Unhealthy"}, {"name": 5}]})
    assert not error_problems(status, doc, {422}, "nodes[1].name"), (status, doc)
    after = [n["nodeHealth"] for n in admin.get("/api/v1/inventory/list")["items"]]
    assert after == before, "a refused heartbeat changed node health: %s -> %s" % (before, after)


@pytest.mark.parametrize("field,value", [("name", "h1\u0000evil"), ("region", "eu\u0000evil"),
                                         ("instanceType", "p5\u0000evil"), ("name", "h2\u0000")])
def test_agent_register_nul_in_strings_refused(egsd, field, value):
    """A NUL inside a node's strings must be refused (422 naming it), not cut off at the NUL and stored."""
    admin, agent = agent_only_cluster(egsd, "h1")
    before = snapshot(admin)
    node = {"name": "h1", "instanceType": "p5.48xlarge", "gpuModel": H100["gpuModel"], "gpuCount": 8, "memoryMiB": 81920}
    node[field] = value
    status, doc = agent.call("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": [node]})
    assert not error_problems(status, doc, {400, 422}, "nodes[0].%s" % field), (status, doc)
    assert diff(before, snapshot(admin)) == []
