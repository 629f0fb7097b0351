"""The verbs of the fake API server over the store: get, list, create, update, patch, delete,
deletecollection, with the metadata rules of a real server (uid, creationTimestamp, generation,
resourceVersion preconditions -> 409, status subresource split, finalizers, graceful pod deletion,
namespace termination) and dynamic admission on create/update/delete.

Every method takes decoded input, returns (http_code, body) or raises ApiError, and takes the store
lock itself; admission webhooks are called without the lock, and the write re-checks that the
object did not change meanwhile (retrying unconditional writes, 409 for conditional ones).
Subresource verbs (eviction, binding, token, log, scale) and reviews live in k8s_subres."""
import copy
import itertools

import k8s_admit
import k8s_auth
import k8s_objects as ko
import k8s_patch
from k8s_meta import gv_string
from k8s_objects import ApiError
from k8s_store import SelectorError, fields_match, labels_match, parse_field_selector, parse_label_selector

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def _service_ips():
    for a in range(96, 112):
        for b in range(0, 256):
            for c in range(1, 255):
                yield "10.%d.%d.%d" % (a, b, c)


def _body_of(o):
    """The object without metadata and status: what `generation` counts changes of."""
    return {k: v for k, v in o.items() if k not in ("metadata", "status")}


class Api:
    """The verbs; sim (k8s_sim.Sim) is notified of writes through the store condition only."""

    def __init__(self, store, reg, auth, opts):
        self.store, self.reg, self.auth, self.opts = store, reg, auth, opts
        self.service_ips = _service_ips()
        self.next_event = itertools.count(1)

    # --- reads ---------------------------------------------------------------------------------
    def get(self, res, ns, name):
        with self.store.lock:
            obj = self.store.get(res.group, res.resource, ns, name)
            if obj is None:
                raise ko.not_found(res, name)
            return obj

    def selectors(self, res, q):
        try:
            return (parse_label_selector(q.get("labelSelector", "")),
                    parse_field_selector(q.get("fieldSelector", ""), res.resource))
        except SelectorError as e:
            raise ko.bad_request(str(e))

    def list(self, res, ns, q):
        """Returns (items, list_rv, continue_token) honouring selectors, limit and continue."""
        lsel, fsel = self.selectors(res, q)
        start = q.get("continue", "")
        try:
            limit = int(q.get("limit", "0") or 0)
        except ValueError:
            raise ko.bad_request("limit: invalid value %r" % q.get("limit"))
        with self.store.lock:
            out = []
            token = ""
            for o in self.store.items(res.group, res.resource, ns or None):
                key = "%s/%s" % (o["metadata"].get("namespace", ""), o["metadata"]["name"])
                if start and key <= start:
                    continue
                if labels_match(lsel, o["metadata"].get("labels")) and fields_match(fsel, o):
                    if limit and len(out) == limit:
                        token = "%s/%s" % (out[-1]["metadata"].get("namespace", ""), out[-1]["metadata"]["name"])
                        break
                    out.append(o)
            return out, self.store.rv, token

    # --- helpers under the lock -----------------------------------------------------------------
    def ns_labels(self, ns):
        with self.store.lock:
            n = self.store.get("", "namespaces", "", ns) if ns else None
            return (n or {}).get("metadata", {}).get("labels", {})

    def _check_namespace(self, res, ns):
        if not res.namespaced:
            return
        n = self.store.get("", "namespaces", "", ns)
        if n is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           {"name": ns, "kind": "namespaces"})
        if n["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", '%s "%s" is forbidden: unable to create new content in namespace %s '
                           'because it is being terminated' % (res.resource, "", ns),
                           {"kind": res.resource, "causes": [{"reason": "NamespaceTerminating", "field":
                                                              "metadata.namespace"}]})

    def _check_body(self, res, ns, body, name=None):
        if not isinstance(body, dict):
            raise ko.bad_request("the body of the request must be a JSON object")
        want_api = gv_string(res.group, res.version)
        if body.get("kind") and body["kind"] != res.kind or body.get("apiVersion") and body["apiVersion"] != want_api:
            raise ko.bad_request("the API version in the data (%s) does not match the expected API version (%s)"
                                 % (body.get("apiVersion"), want_api) if body.get("kind") == res.kind else
                                 "%s in version \"%s\" cannot be handled as a %s: the kind does not match"
                                 % (body.get("kind"), res.version, res.kind))
        md = body.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise ko.bad_request("metadata must be an object")
        if res.namespaced and md.get("namespace") and md["namespace"] != ns:
            raise ko.bad_request("the namespace of the provided object does not match the namespace sent on the "
                                 "request")
        if name is not None and md.get("name") and md["name"] != name:
            raise ko.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                 % (md["name"], name))
        body["apiVersion"], body["kind"] = want_api, res.kind

    def _escalation(self, res, obj, ident):
        """Refuses Role and binding writes that grant more than the writer holds (under the lock)."""
        if res.group != "rbac.authorization.k8s.io":
            return
        why = k8s_auth.escalation_check(self.auth, ident, res, obj, self.store)
        if why:
            raise ApiError(403, "Forbidden", why, {"name": obj["metadata"].get("name", ""), "group": res.group,
                                                   "kind": res.resource})

    def put_locked(self, res, obj, old):
        return self.store.put(res.group, res.resource, obj, old)

    def remove_locked(self, res, obj):
        """Deletes obj now, with the cascades a real control plane performs synchronously enough."""
        gone = self.store.remove(res.group, res.resource, obj)
        md = obj["metadata"]
        if res.resource == "customresourcedefinitions":
            spec = obj["spec"]
            for o in list(self.store.items(spec["group"], spec["names"]["plural"])):
                self.store.remove(spec["group"], spec["names"]["plural"], o)
            self.reg.sync_crds(self.store.items("apiextensions.k8s.io", "customresourcedefinitions"))
        elif res.resource == "serviceaccounts" and res.group == "":
            for s in list(self.store.items("", "secrets", md["namespace"])):
                ann = s["metadata"].get("annotations") or {}
                if s.get("type") == "kubernetes.io/service-account-token" and \
                        ann.get("kubernetes.io/service-account.name") == md["name"]:
                    self.store.remove("", "secrets", s)
        return gone

    # --- create --------------------------------------------------------------------------------
    def create(self, res, ns, body, ident, q):
        self._check_body(res, ns, body)
        md = body["metadata"]
        ko.generate_name(md)
        if not md.get("name"):
            raise ko.invalid(res, "", [("metadata.name", "FieldValueRequired", "Required value: name or "
                                        "generateName is required")])
        why = ko.name_problems(res.resource, md["name"])
        if why:
            raise ko.invalid(res, md["name"], [("metadata.name", "FieldValueInvalid",
                                                'Invalid value: "%s": %s' % (md["name"], why))])
        ko.new_metadata(body, ns if res.namespaced else None)
        ko.default_object(res, body, self.service_ips)
        ko.validate(res, body)
        with self.store.lock:
            self._check_namespace(res, ns)
        body = k8s_admit.admit(self.store, res, None, "CREATE", body, None, ns, ident, self.ns_labels(ns))
        ko.validate(res, body)
        if q.get("dryRun") == "All":
            return 201, body
        with self.store.lock:
            self._check_namespace(res, ns)
            if self.store.get(res.group, res.resource, ns, md["name"]) is not None:
                raise ko.already_exists(res, md["name"])
            self._escalation(res, body, ident)
            obj = self.put_locked(res, body, None)
            self._after_create(res, obj)
            return 201, obj

    def _after_create(self, res, obj):
        md = obj["metadata"]
        if res.group == "" and res.resource == "namespaces":
            sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            ko.new_metadata(sa, md["name"])
            self.put_locked(self.reg.lookup("", "v1", "serviceaccounts"), sa, None)
        elif res.resource == "customresourcedefinitions":
            spec = obj["spec"]
            new = copy.deepcopy(obj)
            new["status"] = {"acceptedNames": spec["names"], "storedVersions": [
                v["name"] for v in spec["versions"] if v.get("storage")], "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "lastTransitionTime": ko.now_str(),
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "lastTransitionTime": ko.now_str(), "message": "the initial names have been accepted"}]}
            self.put_locked(res, new, obj)
            self.reg.sync_crds(self.store.items("apiextensions.k8s.io", "customresourcedefinitions"))
        elif res.group == "" and res.resource == "secrets" and obj.get("type") == "kubernetes.io/service-account-token":
            self._fill_sa_secret(res, obj)

    def _fill_sa_secret(self, res, obj):
        import base64
        md = obj["metadata"]
        sa = self.store.get("", "serviceaccounts", md["namespace"],
                            (md.get("annotations") or {}).get("kubernetes.io/service-account.name", ""))
        if sa is None:
            return
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("annotations", {})["kubernetes.io/service-account.uid"] = sa["metadata"]["uid"]
        tok = self.auth.sa_token(sa, ["https://kubernetes.default.svc.cluster.local"], None, obj)
        new["data"] = dict(new.get("data") or {}, token=base64.b64encode(tok.encode()).decode(),
                           namespace=base64.b64encode(md["namespace"].encode()).decode())
        new["data"]["ca.crt"] = base64.b64encode(self.auth.ca_pem).decode()
        self.put_locked(res, new, obj)

    # --- update and patch ----------------------------------------------------------------------
    def _merge_update(self, res, sub, old, body):
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            return new
        new = copy.deepcopy(body)
        md, omd = new.setdefault("metadata", {}), old["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                  "namespace", "name"):
            if k in omd:
                md[k] = omd[k]
            else:
                md.pop(k, None)
        md.pop("managedFields", None)
        if res.status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    def update(self, res, ns, name, sub, body, ident, q):
        self._check_body(res, ns, body, name)
        pre = body["metadata"].get("resourceVersion")
        return self._write(res, ns, name, sub, lambda old: body, pre, ident, q)

    def patch(self, res, ns, name, sub, ctype, doc, ident, q):
        """doc: the decoded patch; ctype one of the patch media types."""
        crd = self.reg.crd_of.get((res.group, res.resource))
        if ctype == STRATEGIC and crd is not None:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                           "media types include: application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml")
        if ctype == APPLY:
            if not q.get("fieldManager"):
                raise ko.bad_request("PATCH with application/apply-patch+yaml requires the fieldManager parameter")
            if not isinstance(doc, dict):
                raise ko.bad_request("apply patch must be a JSON (YAML flow) object")
            with self.store.lock:
                exists = self.store.get(res.group, res.resource, ns, name) is not None
            if not exists and not sub:
                body = copy.deepcopy(doc)
                body.setdefault("metadata", {})["name"] = name
                return self.create(res, ns, body, ident, q)
        holder = {}

        def apply(old):
            try:
                if ctype == MERGE:
                    out = k8s_patch.merge_patch(old, doc)
                elif ctype == JSONPATCH:
                    out = k8s_patch.json_patch(old, doc)
                else:
                    out = k8s_patch.strategic_merge(old, doc)
                    sel = (doc.get("spec") or {}).get("selector") if isinstance(doc, dict) else None
                    if res.resource == "poddisruptionbudgets" and isinstance(sel, dict):
                        out["spec"]["selector"] = k8s_patch.strip_directives(sel)  # patchStrategy: replace
            except k8s_patch.PatchError as e:
                raise ApiError(422, "Invalid", str(e))
            if not isinstance(out, dict):
                raise ko.bad_request("the patch must produce an object")
            md = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
            holder["pre"] = md.get("resourceVersion") if md.get("resourceVersion") != \
                old["metadata"]["resourceVersion"] else None
            self._check_body(res, ns, out, name)
            return out
        return self._write(res, ns, name, sub, apply, None, ident, q, holder)

    def _write(self, res, ns, name, sub, make, pre, ident, q, holder=None):
        for _ in range(8):
            with self.store.lock:
                old = self.store.get(res.group, res.resource, ns, name)
            if old is None:
                raise ko.not_found(res, name)
            body = make(old)
            if holder is not None:
                pre = holder.get("pre")
            if pre and pre != old["metadata"]["resourceVersion"]:
                raise ko.conflict(res, name)
            new = self._merge_update(res, sub, old, body)
            if res.group == "" and res.resource == "pods" and sub is None:
                ko.validate_pod_update(res, old, new)
            ko.validate(res, new)
            if sub in (None, "status"):
                new = k8s_admit.admit(self.store, res, sub, "UPDATE", new, old, ns, ident, self.ns_labels(ns))
            if q.get("dryRun") == "All":
                return 200, new
            with self.store.lock:
                cur = self.store.get(res.group, res.resource, ns, name)
                if cur is None:
                    raise ko.not_found(res, name)
                if cur["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]:
                    if pre:
                        raise ko.conflict(res, name)
                    continue
                self._escalation(res, new, ident)
                return 200, self.commit_update_locked(res, old, new)
        raise ko.conflict(res, name, "too many concurrent writes")

    def commit_update_locked(self, res, old, new):
        """Stores new in place of old unless nothing changed; completes deletions that wait on finalizers."""
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old
        md = new["metadata"]
        if _body_of(new) != _body_of(old):
            md["generation"] = old["metadata"].get("generation", 0) + 1
        if md.get("deletionTimestamp") and not md.get("finalizers") and res.resource != "namespaces" and not (
                res.group == "" and res.resource == "pods" and md.get("deletionGracePeriodSeconds")):
            return self.remove_locked(res, new)
        obj = self.put_locked(res, new, old)
        if res.resource == "customresourcedefinitions":
            self.reg.sync_crds(self.store.items("apiextensions.k8s.io", "customresourcedefinitions"))
        return obj

    # --- delete --------------------------------------------------------------------------------
    def delete(self, res, ns, name, opts, ident, q):
        opts = opts if isinstance(opts, dict) else {}
        with self.store.lock:
            obj = self.store.get(res.group, res.resource, ns, name)
        if obj is None:
            raise ko.not_found(res, name)
        pc = opts.get("preconditions") or {}
        if pc.get("uid") and pc["uid"] != obj["metadata"]["uid"]:
            raise ko.conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                              % (pc["uid"], obj["metadata"]["uid"]))
        if pc.get("resourceVersion") and pc["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise ko.conflict(res, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion "
                              "in object meta: %s" % (pc["resourceVersion"], obj["metadata"]["resourceVersion"]))
        k8s_admit.admit(self.store, res, None, "DELETE", None, obj, ns, ident, self.ns_labels(ns))
        grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        try:
            grace = None if grace is None else int(grace)
        except ValueError:
            raise ko.bad_request("gracePeriodSeconds: invalid value %r" % grace)
        if q.get("dryRun") == "All":
            return 200, obj
        with self.store.lock:
            obj = self.store.get(res.group, res.resource, ns, name)
            if obj is None:
                raise ko.not_found(res, name)
            return 200, self.delete_locked(res, obj, grace, opts.get("propagationPolicy"))

    def delete_locked(self, res, obj, grace=None, propagation=None):
        """Starts or completes the deletion of a stored object; returns what DELETE answers."""
        md = obj["metadata"]
        if res.group == "" and res.resource == "pods":
            spec = obj.get("spec", {})
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            done = obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if grace <= 0 or not spec.get("nodeName") or done:
                if md.get("finalizers"):
                    return self._mark_deleting(res, obj, 0)
                return self.remove_locked(res, obj)
            if md.get("deletionTimestamp") and md.get("deletionGracePeriodSeconds", 0) <= grace:
                return obj
            return self._mark_deleting(res, obj, grace)
        if res.group == "" and res.resource == "namespaces":
            if md.get("deletionTimestamp"):
                return obj
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = ko.now_str()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new.setdefault("status", {})["phase"] = "Terminating"
            return self.put_locked(res, new, obj)
        if md.get("finalizers") or propagation == "Foreground":
            if md.get("deletionTimestamp"):
                return obj
            return self._mark_deleting(res, obj, 0)
        return self.remove_locked(res, obj)

    def _mark_deleting(self, res, obj, grace):
        new = copy.deepcopy(obj)
        new["metadata"]["deletionTimestamp"] = ko.ts_after(grace)
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        return self.put_locked(res, new, obj)

    def delete_collection(self, res, ns, q, opts, ident):
        items, _, _ = self.list(res, ns, q)
        for o in items:
            try:
                self.delete(res, ns or o["metadata"].get("namespace", ""), o["metadata"]["name"], opts, ident, q)
            except ApiError as e:
                if e.code != 404:
                    raise
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
