"""The fake API server's type registry: which resources exist, how they are discovered, and how
`kubectl get` prints them.

Every built-in resource is one row of BUILTIN; custom resources are added at run time from the
CustomResourceDefinitions the store holds (Registry.sync_crds).  Discovery answers the legacy
documents only (APIVersions, APIGroupList, APIResourceList, all application/json): client-go asks
for aggregated discovery first and falls back to these when the reply is plain JSON, as it does
against servers older than 1.26.  OpenAPI: /openapi/v3 lists every group-version and each
document holds one PATCH operation per kind carrying x-kubernetes-group-version-kind and the
fieldValidation query parameter, which is what kubectl reads to decide that the server validates
fields itself (so it skips its client-side schema validation); there are no schemas, so kubectl
falls back to its compiled-in types for strategic merge patches.  /openapi/v2 is a valid document
without definitions (protobuf when asked, as older kubectl versions such as Debian's 1.20 always
ask and validate against it: a kind without a definition is not validated client-side)."""
import collections
import datetime
import json

Res = collections.namedtuple("Res", "group version resource kind namespaced short subs status verbs categories")

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _r(group, resource, kind, namespaced, short=(), subs=(), status=False, version="v1", verbs=None, cats=()):
    return Res(group, version, resource, kind, namespaced, list(short), list(subs), status, verbs or VERBS, list(cats))


BUILTIN = [
    _r("", "namespaces", "Namespace", False, ["ns"], ["status", "finalize"], True,
       verbs=["create", "delete", "get", "list", "patch", "update", "watch"]),
    _r("", "nodes", "Node", False, ["no"], ["status"], True),
    _r("", "pods", "Pod", True, ["po"], ["status", "eviction", "binding", "log"], True, cats=["all"]),
    _r("", "events", "Event", True, ["ev"]),
    _r("", "services", "Service", True, ["svc"], ["status"], True, cats=["all"]),
    _r("", "endpoints", "Endpoints", True, ["ep"]),
    _r("", "configmaps", "ConfigMap", True, ["cm"]),
    _r("", "secrets", "Secret", True),
    _r("", "serviceaccounts", "ServiceAccount", True, ["sa"], ["token"]),
    _r("", "persistentvolumeclaims", "PersistentVolumeClaim", True, ["pvc"], ["status"], True),
    _r("", "persistentvolumes", "PersistentVolume", False, ["pv"], ["status"], True),
    _r("apps", "deployments", "Deployment", True, ["deploy"], ["status", "scale"], True, cats=["all"]),
    _r("apps", "daemonsets", "DaemonSet", True, ["ds"], ["status"], True, cats=["all"]),
    _r("apps", "replicasets", "ReplicaSet", True, ["rs"], ["status", "scale"], True, cats=["all"]),
    _r("apps", "statefulsets", "StatefulSet", True, ["sts"], ["status", "scale"], True, cats=["all"]),
    _r("policy", "poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"], ["status"], True),
    _r("rbac.authorization.k8s.io", "roles", "Role", True),
    _r("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", True),
    _r("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
    _r("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    _r("admissionregistration.k8s.io", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
    _r("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", False, ["crd", "crds"],
       ["status"], True),
    _r("coordination.k8s.io", "leases", "Lease", True),
    _r("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=["create"]),
    _r("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", False, verbs=["create"]),
    _r("authentication.k8s.io", "tokenreviews", "TokenReview", False, verbs=["create"]),
    _r("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", False, verbs=["create"]),
]

# Resources that only answer POST (reviews): never stored, never listed.
REVIEWS = {"selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews", "selfsubjectreviews"}

# Subresources whose discovery entry names another kind (group/version given, as real servers do).
SUB_KIND = {
    ("pods", "eviction"): ("policy", "v1", "Eviction", ["create"]),
    ("pods", "binding"): ("", "v1", "Binding", ["create"]),
    ("pods", "log"): ("", "v1", "Pod", ["get"]),
    ("serviceaccounts", "token"): ("authentication.k8s.io", "v1", "TokenRequest", ["create"]),
    ("deployments", "scale"): ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    ("replicasets", "scale"): ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    ("statefulsets", "scale"): ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    ("namespaces", "finalize"): ("", "v1", "Namespace", ["update"]),
}


def gv_string(group, version):
    return version if not group else group + "/" + version


class Registry:
    """All served resources, built-in plus those of established CRDs; read under the store lock."""

    def __init__(self):
        self.by_path = {}       # (group, version, resource) -> Res
        self.crd_of = {}        # (group, resource) -> CRD object (custom resources only)
        self.sync_crds([])

    def sync_crds(self, crds):
        """Rebuilds the table from BUILTIN and the given CRD objects (borrowed)."""
        table = {(r.group, r.version, r.resource): r for r in BUILTIN}
        crd_of = {}
        for crd in crds:
            spec = crd.get("spec", {})
            names = spec.get("names", {})
            if crd.get("metadata", {}).get("deletionTimestamp"):
                continue
            for v in spec.get("versions", []):
                if not v.get("served", True):
                    continue
                subs = ["status"] if "status" in (v.get("subresources") or {}) else []
                if "scale" in (v.get("subresources") or {}):
                    subs.append("scale")
                r = Res(spec["group"], v["name"], names["plural"], names["kind"], spec.get("scope") == "Namespaced",
                        list(names.get("shortNames", [])), subs, "status" in subs, VERBS,
                        list(names.get("categories", [])))
                table[(r.group, r.version, r.resource)] = r
                crd_of[(r.group, r.resource)] = crd
        self.by_path = table
        self.crd_of = crd_of

    def lookup(self, group, version, resource):
        return self.by_path.get((group, version, resource))

    def find_kind(self, group, kind):
        for r in self.by_path.values():
            if r.group == group and r.kind == kind:
                return r
        return None

    def groups(self):
        """Returns {group: [versions]} with the storage/preferred version first."""
        out = collections.OrderedDict()
        for (g, v, _) in sorted(self.by_path):
            out.setdefault(g, [])
            if v not in out[g]:
                out[g].append(v)
        for g, crd in [(k[0], c) for k, c in self.crd_of.items()]:
            order = [v["name"] for v in crd["spec"].get("versions", []) if v.get("storage")]
            if order and order[0] in out.get(g, []):
                out[g].remove(order[0])
                out[g].insert(0, order[0])
        return out

    # --- discovery documents ---------------------------------------------------------------
    def api_versions(self, addr):
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]}

    def group_doc(self, g, versions):
        vs = [{"groupVersion": gv_string(g, v), "version": v} for v in versions]
        return {"name": g, "versions": vs, "preferredVersion": vs[0]}

    def api_groups(self):
        groups = [self.group_doc(g, vs) for g, vs in self.groups().items() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, group, version):
        """The APIResourceList of one group-version, or None when it is not served."""
        rows = []
        for (g, v, name), r in sorted(self.by_path.items()):
            if g != group or v != version:
                continue
            row = {"name": name, "singularName": r.kind.lower(), "namespaced": r.namespaced, "kind": r.kind,
                   "verbs": r.verbs}
            if r.short:
                row["shortNames"] = r.short
            if r.categories:
                row["categories"] = r.categories
            rows.append(row)
            for sub in r.subs:
                sg, sv, sk, sverbs = SUB_KIND.get((name, sub), (None, None, r.kind, ["get", "patch", "update"]))
                srow = {"name": name + "/" + sub, "singularName": "", "namespaced": r.namespaced, "kind": sk,
                        "verbs": sverbs}
                if sg is not None:
                    srow["group"], srow["version"] = sg, sv
                rows.append(srow)
        if not rows:
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv_string(group, version),
                "resources": rows}

    def openapi_v3_root(self):
        paths = {}
        for g, vs in self.groups().items():
            for v in vs:
                key = ("api/" + v) if not g else ("apis/" + g + "/" + v)
                paths[key] = {"serverRelativeURL": "/openapi/v3/" + key + "?hash=fake"}
        return {"paths": paths}

    def openapi_v3_doc(self, group, version):
        """A minimal OpenAPI 3 document for one group-version (see the module comment)."""
        paths = {}
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                 {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        for (g, v, name), r in self.by_path.items():
            if g != group or v != version or name in REVIEWS:
                continue
            base = "/api/" + v if not g else "/apis/" + g + "/" + v
            path = base + ("/namespaces/{namespace}/" if r.namespaced else "/") + name + "/{name}"
            gvk = {"group": g, "version": v, "kind": r.kind}
            paths[path] = {"patch": {"operationId": "patch" + r.kind, "parameters": param,
                                     "x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch",
                                     "responses": {"200": {"description": "OK"}}}}
        if not paths:
            return None
        return {"openapi": "3.0.0", "info": {"title": "fake-k8s", "version": "v1.32.0"}, "paths": paths,
                "components": {"schemas": {}}}


def _pb(field, data):
    """One protobuf length-delimited field (wire type 2); data is bytes shorter than 128."""
    return bytes([(field << 3) | 2, len(data)]) + data


def openapi_v2(protobuf):
    """The OpenAPI v2 document: swagger 2.0, info, no paths or definitions."""
    if protobuf:
        return _pb(1, b"2.0") + _pb(2, _pb(1, b"fake-k8s") + _pb(2, b"v1.32.0"))
    return {"swagger": "2.0", "info": {"title": "fake-k8s", "version": "v1.32.0"}, "paths": {}, "definitions": {}}


# --- Table output (what `kubectl get` prints) -----------------------------------------------

def parse_time(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def human_age(ts, now):
    """Formats the time since an RFC 3339 timestamp the way kubectl's duration.HumanDuration does."""
    if not ts:
        return "<unknown>"
    s = int((now - parse_time(ts)).total_seconds())
    if s < 0:
        s = 0
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24) if h % 24 else "%dd" % d
    return "%dd" % d


def _col(name, typ="string", fmt="", priority=0):
    return {"name": name, "type": typ, "format": fmt, "description": name, "priority": priority}


def jsonpath(obj, path):
    """Evaluates the simple JSONPath subset CRD printer columns use: .a.b, .a[0].b, .a['x.y']."""
    cur = obj
    i, path = 0, path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    while i < len(path) and cur is not None:
        c = path[i]
        if c == ".":
            j = i + 1
            while j < len(path) and path[j] not in ".[":
                j += 1
            key = path[i + 1:j]
            cur = cur.get(key) if isinstance(cur, dict) and key else (cur if not key else None)
            i = j
        elif c == "[":
            j = path.index("]", i)
            key = path[i + 1:j].strip("'\"")
            if key.lstrip("-").isdigit() and isinstance(cur, list):
                k = int(key)
                cur = cur[k] if -len(cur) <= k < len(cur) else None
            else:
                cur = cur.get(key) if isinstance(cur, dict) else None
            i = j + 1
        else:
            return None
    return cur


def _node_cells(o, now):
    st = o.get("status", {})
    ready = next((c for c in st.get("conditions", []) if c.get("type") == "Ready"), None)
    status = "Ready" if ready and ready.get("status") == "True" else ("NotReady" if ready else "Unknown")
    if o.get("spec", {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in o["metadata"].get("labels", {})
                   if k.startswith("node-role.kubernetes.io/"))
    return [o["metadata"]["name"], status, ",".join(roles) or "<none>",
            human_age(o["metadata"].get("creationTimestamp"), now), st.get("nodeInfo", {}).get("kubeletVersion", "")]


def _pod_cells(o, now):
    st, spec = o.get("status", {}), o.get("spec", {})
    cs = st.get("containerStatuses", [])
    ready = sum(1 for c in cs if c.get("ready"))
    status = st.get("reason") or st.get("phase", "Pending")
    if o["metadata"].get("deletionTimestamp"):
        status = "Terminating"
    restarts = sum(c.get("restartCount", 0) for c in cs)
    return [o["metadata"]["name"], "%d/%d" % (ready, len(spec.get("containers", []))), status, restarts,
            human_age(o["metadata"].get("creationTimestamp"), now), st.get("podIP", "<none>"),
            spec.get("nodeName", "<none>")]


def _event_cells(o, now):
    io = o.get("involvedObject", {})
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    if last and "." in last:
        last = last.split(".")[0] + "Z"
    return [human_age(last, now), o.get("type", ""), o.get("reason", ""),
            "%s/%s" % (io.get("kind", "").lower(), io.get("name", "")), o.get("message", "")]


def _deploy_cells(o, now):
    st, spec = o.get("status", {}), o.get("spec", {})
    return [o["metadata"]["name"], "%d/%d" % (st.get("readyReplicas", 0), spec.get("replicas", 1)),
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0),
            human_age(o["metadata"].get("creationTimestamp"), now)]


def _pdb_cells(o, now):
    spec = o.get("spec", {})
    return [o["metadata"]["name"], str(spec.get("minAvailable", "N/A")), str(spec.get("maxUnavailable", "N/A")),
            o.get("status", {}).get("disruptionsAllowed", 0), human_age(o["metadata"].get("creationTimestamp"), now)]


TABLES = {
    "nodes": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"),
               ], _node_cells),
    "pods": ([_col("Name", fmt="name"), _col("Ready"), _col("Status"), _col("Restarts", "integer"), _col("Age"),
              _col("IP", priority=1), _col("Node", priority=1)], _pod_cells),
    "events": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")], _event_cells),
    "deployments": ([_col("Name", fmt="name"), _col("Ready"), _col("Up-to-date", "integer"),
                     _col("Available", "integer"), _col("Age")], _deploy_cells),
    "poddisruptionbudgets": ([_col("Name", fmt="name"), _col("Min Available"), _col("Max Unavailable"),
                              _col("Allowed Disruptions", "integer"), _col("Age")], _pdb_cells),
    "customresourcedefinitions": ([_col("Name", fmt="name"), _col("Created At", "date")],
                                  lambda o, now: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]),
    "namespaces": ([_col("Name", fmt="name"), _col("Status"), _col("Age")],
                   lambda o, now: [o["metadata"]["name"], o.get("status", {}).get("phase", "Active"),
                                   human_age(o["metadata"].get("creationTimestamp"), now)]),
}


def _crd_columns(crd, version):
    for v in crd["spec"].get("versions", []):
        if v["name"] == version:
            return v.get("additionalPrinterColumns") or []
    return []


def table(res, objs, list_rv, crd, include_object, now):
    """Builds a meta.k8s.io/v1 Table for objs (borrowed); include_object is None, Metadata or Object."""
    if crd is not None:
        pcs = _crd_columns(crd, res.version)
        cols = [_col("Name", fmt="name")] + [
            _col(c["name"], c.get("type", "string"), c.get("format", ""), c.get("priority", 0)) for c in pcs]
        if not pcs:
            cols.append(_col("Age"))

        def cells(o, now2):
            out = [o["metadata"]["name"]]
            for c in pcs:
                v = jsonpath(o, c["jsonPath"])
                if c.get("type") == "date" and isinstance(v, str):
                    v = human_age(v, now2)
                out.append(v if v is not None else "<none>" if c.get("type", "string") == "string" else None)
            if not pcs:
                out.append(human_age(o["metadata"].get("creationTimestamp"), now2))
            return out
    elif res.resource in TABLES:
        cols, cells = TABLES[res.resource]
    else:
        cols = [_col("Name", fmt="name"), _col("Age")]

        def cells(o, now2):
            return [o["metadata"]["name"], human_age(o["metadata"].get("creationTimestamp"), now2)]
    rows = []
    for o in objs:
        if include_object == "None":
            ro = None
        elif include_object == "Object":
            ro = o
        else:
            ro = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        rows.append({"cells": cells(o, now), "object": ro})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": str(list_rv)},
            "columnDefinitions": cols, "rows": rows}


def dumps(doc):
    return json.dumps(doc, separators=(",", ":")).encode()
