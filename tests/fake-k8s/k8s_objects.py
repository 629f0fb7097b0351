"""Per-kind behaviour of stored objects: API errors, the defaults a real API server fills on create,
and the validation it refuses with 422 Invalid.

Defaults are the ones clients and controllers look at (pod restartPolicy, schedulerName, service
account, terminationGracePeriodSeconds, the not-ready/unreachable tolerations of
DefaultTolerationSeconds, requests copied from limits; namespace finalizer and name label; service
clusterIP; secret type and stringData), not every field a real server defaults.  Validation covers
names, labels, the fields a pod, PDB, CRD and webhook configuration cannot do without, and the pod
update rule (only images, activeDeadlineSeconds, added tolerations and scheduling gates may change);
everything else of a spec is stored as given."""
import base64
import copy
import datetime
import re
import secrets
import uuid

from k8s_meta import dumps  # noqa: F401  (re-exported for callers that build Status bodies)


class ApiError(Exception):
    """A failure that becomes a Status object: code, reason, message, details."""

    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
              "reason": self.reason, "code": self.code}
        if self.details:
            st["details"] = self.details
        return st


def qualified(res):
    return res.resource + ("." + res.group if res.group else "")


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(res), name),
                    {"name": name, "group": res.group, "kind": res.resource})


def already_exists(res, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(res), name),
                    {"name": name, "group": res.group, "kind": res.resource})


def conflict(res, name, why="the object has been modified; please apply your changes to the latest version "
                               "and try again"):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s' % (qualified(res), name, why),
                    {"name": name, "group": res.group, "kind": res.resource})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def invalid(res, name, causes):
    """causes: [(field, reason, message)] with reason FieldValueRequired/Invalid/Forbidden/..."""
    text = "; ".join("%s: %s" % (f, m) for f, _, m in causes)
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (res.kind, name, text),
                    {"name": name, "group": res.group, "kind": res.kind,
                     "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]})


def now_str():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def ts_after(seconds):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- names and labels -----------------------------------------------------------------------

SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_ONLY = {"namespaces"}
DNS1035_ONLY = {"services"}
PATH_NAMES = {"roles", "rolebindings", "clusterroles", "clusterrolebindings"}


def name_problems(resource, name):
    """Returns the validation message for a bad object name, or None."""
    if resource in PATH_NAMES:
        if name in (".", "..") or "/" in name or "%" in name:
            return 'may not contain "/" or "%" and may not be "." or ".."'
        return None
    if resource in LABEL_ONLY or resource in DNS1035_ONLY:
        rx = DNS1035 if resource in DNS1035_ONLY else LABEL
        if len(name) > 63 or not rx.match(name):
            return ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc')")
        return None
    if len(name) > 253 or not SUBDOMAIN.match(name):
        return ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com')")
    return None


def label_problems(labels):
    out = []
    for k, v in (labels or {}).items():
        prefix, _, nm = k.rpartition("/")
        if (prefix and (len(prefix) > 253 or not SUBDOMAIN.match(prefix))) or len(nm) > 63 or not LABEL_NAME.match(nm):
            out.append(("metadata.labels", "FieldValueInvalid",
                        'Invalid value: "%s": name part must consist of alphanumeric characters, \'-\', \'_\' or '
                        '\'.\', and must start and end with an alphanumeric character' % k))
        if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
            out.append(("metadata.labels", "FieldValueInvalid",
                        'Invalid value: "%s": a valid label must be an empty string or consist of alphanumeric '
                        'characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character'
                        % (v,)))
    return out


# --- create-time defaults -------------------------------------------------------------------

def _default_container(c):
    img = c.get("image", "")
    tag = img.rsplit("/", 1)[-1]
    c.setdefault("imagePullPolicy", "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    r = c.setdefault("resources", {})
    for k, v in (r.get("limits") or {}).items():
        r.setdefault("requests", {}).setdefault(k, v)


def default_pod_spec(spec):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if isinstance(c, dict):
            _default_container(c)


def default_pod(pod):
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tols = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tols) and \
                not any(t.get("operator") == "Exists" and not t.get("key") for t in tols):
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    reqs = [c.get("resources", {}) for c in spec.get("containers", []) if isinstance(c, dict)]
    qos = "BestEffort"
    if any(r.get("requests") or r.get("limits") for r in reqs):
        qos = "Guaranteed" if all(r.get("limits") and r.get("limits") == r.get("requests") and
                                  {"cpu", "memory"} <= set(r["limits"]) for r in reqs) else "Burstable"
    pod["status"] = {"phase": "Pending", "qosClass": qos}


def default_object(res, obj, service_ips):
    """Fills create-time defaults in place (obj is owned by the caller)."""
    r, kind = res.resource, res.kind
    if res.group == "" and r == "pods":
        default_pod(obj)
    elif r == "namespaces" and res.group == "":
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif r == "services" and res.group == "":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            spec.setdefault("clusterIP", next(service_ips))
            spec["clusterIPs"] = [spec["clusterIP"]]
        for p in spec.get("ports", []):
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
    elif r == "secrets" and res.group == "":
        obj.setdefault("type", "Opaque")
        sd = obj.pop("stringData", None) or {}
        for k, v in sd.items():
            obj.setdefault("data", {})[k] = base64.b64encode(v.encode()).decode()
    elif res.group == "apps" and kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
        spec = obj.setdefault("spec", {})
        if kind != "DaemonSet":
            spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault("strategy", {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    if res.status and r not in ("namespaces", "nodes", "persistentvolumes"):
        obj["status"] = obj.get("status") if r == "pods" else {}


def new_metadata(obj, ns):
    md = obj["metadata"]
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = now_str()
    md["generation"] = 1
    for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink", "managedFields"):
        md.pop(k, None)
    if ns:
        md["namespace"] = ns
    else:
        md.pop("namespace", None)


def generate_name(md):
    if not md.get("name") and md.get("generateName"):
        md["name"] = md["generateName"] + "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


# --- validation ------------------------------------------------------------------------------

def _pod_causes(spec, prefix="spec"):
    out = []
    cs = spec.get("containers")
    if not isinstance(cs, list) or not cs:
        return [(prefix + ".containers", "FieldValueRequired", "Required value")]
    seen = set()
    for i, c in enumerate(cs):
        if not isinstance(c, dict):
            out.append(("%s.containers[%d]" % (prefix, i), "FieldValueInvalid", "Invalid value: must be an object"))
            continue
        if not c.get("name"):
            out.append(("%s.containers[%d].name" % (prefix, i), "FieldValueRequired", "Required value"))
        elif c["name"] in seen:
            out.append(("%s.containers[%d].name" % (prefix, i), "FieldValueDuplicate",
                        'Duplicate value: "%s"' % c["name"]))
        seen.add(c.get("name"))
        if not c.get("image"):
            out.append(("%s.containers[%d].image" % (prefix, i), "FieldValueRequired", "Required value"))
    return out


def _webhook_causes(obj):
    out = []
    for i, w in enumerate(obj.get("webhooks") or []):
        p = "webhooks[%d]" % i
        if len((w.get("name") or "").split(".")) < 3:
            out.append((p + ".name", "FieldValueInvalid", 'Invalid value: "%s": should be a domain with at least '
                        'three segments separated by dots' % w.get("name", "")))
        cc = w.get("clientConfig") or {}
        if bool(cc.get("url")) == bool(cc.get("service")):
            out.append((p + ".clientConfig", "FieldValueRequired", "Required value: exactly one of url or service is "
                        "required"))
        if w.get("sideEffects") not in ("None", "NoneOnDryRun"):
            out.append((p + ".sideEffects", "FieldValueNotSupported", 'Unsupported value: "%s": supported values: '
                        '"None", "NoneOnDryRun"' % (w.get("sideEffects") or "")))
        if "v1" not in (w.get("admissionReviewVersions") or []):
            out.append((p + ".admissionReviewVersions", "FieldValueRequired", "Required value: must include v1 "
                        "(this server speaks admission.k8s.io/v1 only)"))
        if w.get("failurePolicy") not in (None, "Fail", "Ignore"):
            out.append((p + ".failurePolicy", "FieldValueNotSupported", 'Unsupported value: "%s"'
                        % w["failurePolicy"]))
    return out


def _crd_causes(obj):
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    out = []
    for f in ("plural", "kind"):
        if not names.get(f):
            out.append(("spec.names." + f, "FieldValueRequired", "Required value"))
    if not spec.get("group") or "." not in spec.get("group", ""):
        out.append(("spec.group", "FieldValueInvalid", "Invalid value: should be a domain with at least one dot"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        out.append(("spec.scope", "FieldValueNotSupported", 'Unsupported value: "%s": supported values: "Cluster", '
                    '"Namespaced"' % (spec.get("scope") or "")))
    vs = spec.get("versions") or []
    if not vs:
        out.append(("spec.versions", "FieldValueRequired", "Required value"))
    elif sum(1 for v in vs if v.get("storage")) != 1:
        out.append(("spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as "
                    "storage version"))
    want = "%s.%s" % (names.get("plural"), spec.get("group"))
    if not out and obj["metadata"]["name"] != want:
        out.append(("metadata.name", "FieldValueInvalid", 'Invalid value: "%s": must be spec.names.plural+"."+'
                    'spec.group' % obj["metadata"]["name"]))
    return out


def validate(res, obj):
    """Raises ApiError 422 when obj cannot be stored (create and update)."""
    md = obj["metadata"]
    causes = label_problems(md.get("labels"))
    r = res.resource
    if res.group == "" and r == "pods":
        causes += _pod_causes(obj.get("spec") or {})
    elif res.group == "apps" and r in ("deployments", "statefulsets", "daemonsets", "replicasets"):
        spec = obj.get("spec") or {}
        causes += _pod_causes((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")
        sel = spec.get("selector")
        if not sel:
            causes.append(("spec.selector", "FieldValueRequired", "Required value"))
        else:
            tl = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if any(tl.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
                causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                               "Invalid value: `selector` does not match template `labels`"))
    elif r == "poddisruptionbudgets":
        spec = obj.get("spec") or {}
        if "minAvailable" in spec and "maxUnavailable" in spec:
            causes.append(("spec", "FieldValueInvalid", "Invalid value: minAvailable and maxUnavailable cannot be "
                           "both set"))
    elif r == "customresourcedefinitions":
        causes += _crd_causes(obj)
    elif r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        causes += _webhook_causes(obj)
    if causes:
        raise invalid(res, md.get("name", ""), causes)


MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds")


def validate_pod_update(res, old, new):
    """Pod specs are immutable but for images, activeDeadlineSeconds, added tolerations and removed gates."""
    a, b = copy.deepcopy(old.get("spec") or {}), copy.deepcopy(new.get("spec") or {})
    old_tols = a.get("tolerations") or []
    if any(t not in (b.get("tolerations") or []) for t in old_tols):
        raise invalid(res, old["metadata"]["name"], [("spec.tolerations", "FieldValueForbidden",
                                                      "Forbidden: existing toleration can not be modified except its "
                                                      "tolerationSeconds")])
    for s in (a, b):
        for k in MUTABLE_POD_SPEC:
            s.pop(k, None)
        for c in s.get("containers", []) + s.get("initContainers", []):
            if isinstance(c, dict):
                c.pop("image", None)
    if a != b:
        raise invalid(res, old["metadata"]["name"], [
            ("spec", "FieldValueForbidden", "Forbidden: pod updates may not change fields other than "
             "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
             "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
             "(allow it to be set to 1 if it was previously negative)")])
