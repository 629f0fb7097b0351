"""Subresources and reviews: pods/eviction (PodDisruptionBudgets), pods/binding, pods/log,
serviceaccounts/token (TokenRequest), */scale, and the access and token reviews.

Eviction follows the real eviction REST handler: a terminating, Pending, Succeeded or Failed pod is
deleted without consulting budgets; a Running pod covered by exactly one PDB is deleted only while
that budget allows a disruption (healthy pods above the desired count), otherwise 429
TooManyRequests with the DisruptionBudget cause; more than one PDB is a 500, as real.  Budgets
count matching pods of the namespace as expected pods (there is no controller scale lookup)."""
import copy
import math
import time

import k8s_objects as ko
from k8s_objects import ApiError
from k8s_store import SelectorError, labels_match, structured_selector


def _scaled(v, total):
    if isinstance(v, str) and v.endswith("%"):
        return int(math.ceil(total * int(v[:-1]) / 100.0))
    return int(v)


def pod_healthy(p):
    if p["metadata"].get("deletionTimestamp") or p.get("status", {}).get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions", []))


def pdb_status(store, pdb):
    """Computes a PDB's status fields from the pods it selects (call under the lock)."""
    ns = pdb["metadata"]["namespace"]
    try:
        sel = structured_selector(pdb.get("spec", {}).get("selector"))
    except SelectorError:
        sel = None
    pods = [p for p in store.items("", "pods", ns) if sel and labels_match(sel, p["metadata"].get("labels"))]
    pods = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    expected = len(pods)
    healthy = sum(1 for p in pods if pod_healthy(p))
    spec = pdb.get("spec", {})
    if "maxUnavailable" in spec:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = _scaled(spec.get("minAvailable", 1), expected)
    allowed = max(0, healthy - desired)
    return {"observedGeneration": pdb["metadata"].get("generation", 1), "disruptionsAllowed": allowed,
            "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
            "conditions": [{"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                            "observedGeneration": pdb["metadata"].get("generation", 1),
                            "lastTransitionTime": (pdb.get("status") or {}).get("conditions", [{}])[0].get(
                                "lastTransitionTime") or ko.now_str()}]}


def evict(api, res, ns, name, body):
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise ko.bad_request("the body of the request must be a policy/v1 Eviction")
    if body.get("metadata", {}).get("name") not in (None, name):
        raise ko.bad_request("name in URL does not match name in Eviction object")
    opts = body.get("deleteOptions") or {}
    store = api.store
    with store.lock:
        pod = store.get("", "pods", ns, name)
        if pod is None:
            raise ko.not_found(res, name)
        phase = pod.get("status", {}).get("phase")
        if not pod["metadata"].get("deletionTimestamp") and phase == "Running":
            pdbs = []
            for b in store.items("policy", "poddisruptionbudgets", ns):
                try:
                    sel = structured_selector(b.get("spec", {}).get("selector"))
                except SelectorError:
                    continue
                if sel and labels_match(sel, pod["metadata"].get("labels")):
                    pdbs.append(b)
            if len(pdbs) > 1:
                raise ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                               "eviction subresource does not support.")
            if pdbs:
                st = pdb_status(store, pdbs[0])
                if st["disruptionsAllowed"] <= 0 and (pod_healthy(pod) or st["currentHealthy"] < st["desiredHealthy"]):
                    raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's "
                                   "disruption budget.", {"causes": [{"reason": "DisruptionBudget", "message":
                                                                      "The disruption budget %s needs %d healthy pods "
                                                                      "and has %d currently" % (
                                                                          pdbs[0]["metadata"]["name"],
                                                                          st["desiredHealthy"], st["currentHealthy"])}]})
        grace = opts.get("gracePeriodSeconds")
        api.delete_locked(res, pod, None if grace is None else int(grace), opts.get("propagationPolicy"))
    return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def bind(api, res, ns, name, body):
    target = (body or {}).get("target") or {}
    if not target.get("name"):
        raise ko.invalid(res, name, [("target.name", "FieldValueRequired", "Required value")])
    with api.store.lock:
        pod = api.store.get("", "pods", ns, name)
        if pod is None:
            raise ko.not_found(res, name)
        if pod["spec"].get("nodeName"):
            raise ko.conflict(res, name, "pod %s is already assigned to node \"%s\"" % (name, pod["spec"]["nodeName"]))
        bind_locked(api, pod, target["name"])
    return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def bind_locked(api, pod, node):
    new = copy.deepcopy(pod)
    new["spec"]["nodeName"] = node
    conds = [c for c in new["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": ko.now_str()})
    new["status"]["conditions"] = conds
    return api.put_locked(api.reg.lookup("", "v1", "pods"), new, pod)


def token_request(api, res, ns, name, body):
    spec = (body or {}).get("spec") or {}
    exp = spec.get("expirationSeconds", 3600)
    if not isinstance(exp, int) or exp < 600:
        raise ApiError(422, "Invalid", 'TokenRequest.authentication.k8s.io "%s" is invalid: spec.expirationSeconds: '
                       'Invalid value: %s: may not specify a duration less than 10 minutes' % (name, exp),
                       {"name": name, "group": "authentication.k8s.io", "kind": "TokenRequest",
                        "causes": [{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                                    "message": "may not specify a duration less than 10 minutes"}]})
    auds = spec.get("audiences") or ["https://kubernetes.default.svc.cluster.local"]
    with api.store.lock:
        sa = api.store.get("", "serviceaccounts", ns, name)
        if sa is None:
            raise ko.not_found(res, name)
        until = int(time.time()) + exp
        tok = api.auth.sa_token(sa, auds, until)
    out = {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
           "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
           "spec": {"audiences": auds, "expirationSeconds": exp, "boundObjectRef": spec.get("boundObjectRef")},
           "status": {"token": tok, "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until))}}
    return 201, out


def pod_log(api, res, ns, name, q):
    pod = api.get(res, ns, name)
    names = [c["name"] for c in pod["spec"].get("containers", [])]
    c = q.get("container") or (names[0] if len(names) == 1 else None)
    if c is None:
        raise ko.bad_request("a container name must be specified for pod %s, choose one of: %s" % (name, names))
    if c not in names:
        raise ko.bad_request("container %s is not valid for pod %s" % (c, name))
    if pod.get("status", {}).get("phase") != "Running":
        raise ko.bad_request('container "%s" in pod "%s" is waiting to start: ContainerCreating' % (c, name))
    return "fake-k8s: container %s of pod %s/%s is running on node %s (this fake runs no processes)\n" % (
        c, ns, name, pod["spec"].get("nodeName"))


def scale_of(obj):
    sel = obj.get("spec", {}).get("selector", {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                          "creationTimestamp") if k in obj["metadata"]},
            "spec": {"replicas": obj.get("spec", {}).get("replicas", 0)},
            "status": {"replicas": obj.get("status", {}).get("replicas", 0),
                       "selector": ",".join("%s=%s" % kv for kv in sorted(sel.items()))}}


def review(api, res, body, ident):
    """SelfSubjectAccessReview, SubjectAccessReview, TokenReview, SelfSubjectReview."""
    body = body if isinstance(body, dict) else {}
    spec = body.get("spec") or {}
    out = copy.deepcopy(body)
    out.setdefault("metadata", {})
    out["apiVersion"], out["kind"] = "%s/%s" % (res.group, res.version), res.kind
    if res.resource in ("selfsubjectaccessreviews", "subjectaccessreviews"):
        who = ident if res.resource == "selfsubjectaccessreviews" else (spec.get("user", ""), spec.get("groups") or [])
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if ra:
            a = {"verb": ra.get("verb", ""), "group": ra.get("group", ""), "resource": ra.get("resource", ""),
                 "sub": ra.get("subresource", ""), "ns": ra.get("namespace", ""), "name": ra.get("name", "")}
        elif nra:
            a = {"verb": nra.get("verb", ""), "resource": None, "path": nra.get("path", "")}
        else:
            raise ko.invalid(res, "", [("spec.resourceAttributes", "FieldValueRequired",
                                        "Required value: exactly one of nonResourceAttributes or resourceAttributes "
                                        "must be specified")])
        with api.store.lock:
            ok = api.auth.authorize(who, a, api.store)
        out["status"] = {"allowed": ok, "reason": "RBAC: allowed" if ok else ""}
    elif res.resource == "tokenreviews":
        with api.store.lock:
            who = api.auth.authenticate(spec.get("token", ""), api.store)
        out["status"] = {"authenticated": True, "user": {"username": who[0], "groups": who[1]},
                         "audiences": spec.get("audiences") or []} if who else {"authenticated": False}
    else:
        out["status"] = {"userInfo": {"username": ident[0], "groups": ident[1]}}
    return 201, out
