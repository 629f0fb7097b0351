"""Unit tests of the fake Kubernetes API server's pure parts (no process): the patch formats,
selectors, scheduling predicates, RBAC rule matching, printer-column JSONPath and the protobuf
envelope.  Each expectation is the behaviour of apimachinery / the real scheduler."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake-k8s"))
import k8s_auth  # noqa: E402
import k8s_meta  # noqa: E402
import k8s_patch  # noqa: E402
import k8s_proto  # noqa: E402
import k8s_sim  # noqa: E402
import k8s_store  # noqa: E402


def test_strategic_merge_directives():
    doc = {"spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                                   {"name": "b", "image": "1"}],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "tolerations": [{"key": "t1"}]},
           "metadata": {"finalizers": ["f1", "f2"], "labels": {"a": "1", "b": "2"}}}
    out = k8s_patch.strategic_merge(doc, {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}], "containers": [{"name": "a", "image": "2"}]}})
    assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("b", "1"), ("a", "2")]
    out = k8s_patch.strategic_merge(doc, {
        "spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]},
                                {"name": "b", "$patch": "delete"}],
                 "tolerations": [{"key": "t2"}]},
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"], "labels": {"a": None}}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["a"]
    assert out["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]
    assert out["spec"]["tolerations"] == [{"key": "t2"}]  # no merge key: replaced
    assert out["metadata"] == {"finalizers": ["f2"], "labels": {"b": "2"}}
    assert doc["spec"]["containers"][1]["name"] == "b"  # input untouched
    out = k8s_patch.strategic_merge(doc, {"spec": {"volumes": [{"$patch": "replace"}, {"name": "w"}]}})
    assert out["spec"]["volumes"] == [{"name": "w"}]
    out = k8s_patch.strategic_merge({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                                    {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}})
    assert out == {"strategy": {"type": "Recreate"}}
    out = k8s_patch.strategic_merge({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["b", "a"]}})
    assert out["metadata"]["finalizers"] == ["a", "b"]
    with pytest.raises(k8s_patch.PatchError):
        k8s_patch.strategic_merge(doc, {"spec": {"containers": [{"image": "no-name"}]}})


def test_json_and_merge_patch():
    doc = {"a": {"b": [1, 2, 3]}, "c": "x", "k/e~y": 1}
    out = k8s_patch.json_patch(doc, [{"op": "add", "path": "/a/b/1", "value": 9},
                                     {"op": "remove", "path": "/a/b/0"},
                                     {"op": "move", "from": "/c", "path": "/d"},
                                     {"op": "copy", "from": "/d", "path": "/e"},
                                     {"op": "replace", "path": "/k~1e~0y", "value": 2},
                                     {"op": "add", "path": "/a/b/-", "value": 4}])
    assert out == {"a": {"b": [9, 2, 3, 4]}, "d": "x", "e": "x", "k/e~y": 2}
    for bad in ([{"op": "replace", "path": "/nope", "value": 1}], [{"op": "remove", "path": "/a/b/7"}],
                [{"op": "test", "path": "/c", "value": "y"}], [{"op": "frob", "path": "/c"}], {"op": "add"}):
        with pytest.raises(k8s_patch.PatchError):
            k8s_patch.json_patch(doc, bad)
    assert k8s_patch.merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None}, "l": [2]}) == \
        {"a": {"c": 2}, "l": [2]}


def test_selectors():
    reqs = k8s_store.parse_label_selector("app=web,tier!=db,env in (prod, staging),!legacy,gpu,zone notin (a)")
    ok = {"app": "web", "tier": "fe", "env": "prod", "gpu": "", "zone": "b"}
    assert k8s_store.labels_match(reqs, ok)
    for k, v in (("app", "api"), ("tier", "db"), ("env", "dev"), ("legacy", "1"), ("zone", "a")):
        assert not k8s_store.labels_match(reqs, dict(ok, **{k: v}))
    assert not k8s_store.labels_match(reqs, {k: v for k, v in ok.items() if k != "gpu"})
    with pytest.raises(k8s_store.SelectorError):
        k8s_store.parse_label_selector("bad key=1")
    sel = k8s_store.structured_selector({"matchLabels": {"a": "b"},
                                         "matchExpressions": [{"key": "c", "operator": "NotIn", "values": ["d"]}]})
    assert k8s_store.labels_match(sel, {"a": "b"}) and not k8s_store.labels_match(sel, {"a": "b", "c": "d"})
    assert k8s_store.labels_match(k8s_store.structured_selector({}), {"any": "thing"})
    assert not k8s_store.labels_match(k8s_store.structured_selector(None), {})
    f = k8s_store.parse_field_selector("spec.nodeName=n1,status.phase!=Failed", "pods")
    assert k8s_store.fields_match(f, {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    assert not k8s_store.fields_match(f, {"spec": {"nodeName": "n1"}, "status": {"phase": "Failed"}})
    with pytest.raises(k8s_store.SelectorError):
        k8s_store.parse_field_selector("spec.nodeName=n1", "configmaps")


def test_scheduling_predicates():
    taint = {"key": "kubeslice.io/egs", "value": "dedicated-node", "effect": "NoSchedule"}
    assert k8s_sim.tolerates([{"key": "kubeslice.io/egs", "operator": "Exists"}], taint)
    assert k8s_sim.tolerates([{"operator": "Exists"}], taint)
    assert not k8s_sim.tolerates([{"key": "kubeslice.io/egs", "value": "other"}], taint)
    assert not k8s_sim.tolerates([{"key": "kubeslice.io/egs", "operator": "Exists", "effect": "NoExecute"}], taint)
    node = {"metadata": {"name": "n1", "labels": {"gpus": "8", "slice": "s1"}}}
    aff = lambda *exprs, fields=(): {"spec": {"affinity": {"nodeAffinity": {  # noqa: E731
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": list(exprs), "matchFields": list(fields)}]}}}}}
    assert k8s_sim.node_affinity_ok(aff({"key": "gpus", "operator": "Gt", "values": ["4"]}), node)
    assert not k8s_sim.node_affinity_ok(aff({"key": "gpus", "operator": "Lt", "values": ["4"]}), node)
    assert k8s_sim.node_affinity_ok(aff({"key": "slice", "operator": "In", "values": ["s1"]},
                                        {"key": "x", "operator": "DoesNotExist"}), node)
    assert not k8s_sim.node_affinity_ok(aff({"key": "slice", "operator": "NotIn", "values": ["s1"]}), node)
    assert k8s_sim.node_affinity_ok(aff(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]), node)
    assert not k8s_sim.node_affinity_ok({"spec": {"nodeSelector": {"slice": "s2"}}}, node)
    assert k8s_sim.quantity("1500m") == 1.5 and k8s_sim.quantity("2Gi") == 2 * 1024 ** 3
    assert k8s_sim.quantity("8") == 8


def test_rbac_rules_and_messages():
    a = {"verb": "get", "group": "", "resource": "pods", "sub": "log", "ns": "x", "name": "p"}
    assert k8s_auth.rule_allows({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, a)
    assert k8s_auth.rule_allows({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/log"]}, a)
    assert not k8s_auth.rule_allows({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, a)
    assert not k8s_auth.rule_allows({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"],
                                     "resourceNames": ["q"]}, a)
    assert k8s_auth.rule_allows({"verbs": ["get"], "nonResourceURLs": ["/metrics*"]},
                                {"verb": "get", "resource": None, "path": "/metrics/x"})
    msg = k8s_auth.forbidden_message(("u", []), dict(a, sub="", name=""))
    assert msg == 'pods is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace "x"'
    msg = k8s_auth.forbidden_message(("u", []), {"verb": "list", "group": "apps", "resource": "deployments",
                                                 "sub": "", "ns": "", "name": ""})
    assert msg == ('deployments.apps is forbidden: User "u" cannot list resource "deployments" in API group "apps" '
                   'at the cluster scope')


def test_jsonpath_and_age():
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "a.b": 3}}
    assert k8s_meta.jsonpath(obj, ".status.conditions[0].type") == "Ready"
    assert k8s_meta.jsonpath(obj, ".status['a.b']") == 3
    assert k8s_meta.jsonpath(obj, ".status.conditions[5].type") is None
    now = k8s_meta.parse_time("2026-01-02T03:04:05Z")
    assert k8s_meta.human_age("2026-01-02T03:03:05Z", now) == "60s"
    assert k8s_meta.human_age("2026-01-02T02:59:05Z", now) == "5m"
    assert k8s_meta.human_age("2026-01-01T03:04:05Z", now) == "24h"


def _pb(field, data):
    return bytes([(field << 3) | 2, len(data)]) + data


def test_protobuf_envelope():
    attrs = _pb(1, b"team-a") + _pb(2, b"create") + _pb(5, b"pods")
    raw = _pb(2, _pb(1, attrs))
    body = b"k8s\x00" + _pb(1, _pb(1, b"authorization.k8s.io/v1") + _pb(2, b"SelfSubjectAccessReview")) + \
        _pb(2, raw)
    obj = k8s_proto.decode(body)
    assert obj["kind"] == "SelfSubjectAccessReview"
    ra = obj["spec"]["resourceAttributes"]
    assert (ra["namespace"], ra["verb"], ra["resource"], ra["group"]) == ("team-a", "create", "pods", "")
    spec = _pb(1, b"aud") + bytes([4 << 3, 0x90, 0x1c])  # expirationSeconds = 3600 as a varint
    tr = k8s_proto.decode(b"k8s\x00" + _pb(1, _pb(2, b"TokenRequest")) + _pb(2, _pb(2, spec)))
    assert tr["spec"] == {"audiences": ["aud"], "expirationSeconds": 3600}
    with pytest.raises(k8s_proto.ProtoError):
        k8s_proto.decode(b"k8s\x00" + _pb(1, _pb(2, b"Pod")))
    with pytest.raises(k8s_proto.ProtoError):
        k8s_proto.decode(b"{}")
