"""Dynamic admission: the registered MutatingWebhookConfigurations, then the
ValidatingWebhookConfigurations, called with admission.k8s.io/v1 AdmissionReview over HTTPS.

Matching follows the real rules: operations, apiGroups, apiVersions, resources (with "*",
"*/*", "pods/status"), scope, namespaceSelector (the namespace's labels; a Namespace object is
matched by its own labels; cluster-scoped objects always match) and objectSelector (the new or the
old object's labels).  clientConfig.url is dialled as given; clientConfig.service is resolved to
127.0.0.1 and the targetPort (or port) of the named Service's port `service.port` (default 443),
verified as <name>.<namespace>.svc, since nothing here routes cluster IPs.  caBundle verifies the
webhook's certificate (the system roots when absent).  Mutations are base64 JSONPatch.  Denials
become the real Status ('admission webhook "x" denied the request: msg', code >= 400);
failurePolicy Fail turns a call failure into 500 InternalError, Ignore skips the webhook.
Not done: reinvocationPolicy, matchConditions (CEL), admission.k8s.io/v1beta1, ValidatingAdmissionPolicy."""
import base64
import http.client
import json
import ssl
import uuid

import k8s_patch
from k8s_objects import ApiError
from k8s_store import SelectorError, labels_match, structured_selector


def _rule_matches(rule, op, res, sub):
    ops = rule.get("operations") or []
    if "*" not in ops and op not in ops:
        return False
    if not any(g in ("*", res.group) for g in rule.get("apiGroups") or []):
        return False
    if not any(v in ("*", res.version) for v in rule.get("apiVersions") or []):
        return False
    want = res.resource + ("/" + sub if sub else "")
    ok = False
    for r in rule.get("resources") or []:
        if r == want or r == "*/*" or (r == "*" and not sub) or (sub and r == "*/" + sub) or \
                (sub and r == res.resource + "/*"):
            ok = True
    if not ok:
        return False
    scope = rule.get("scope") or "*"
    return scope == "*" or (scope == "Namespaced") == res.namespaced


def _webhook_matches(w, op, res, sub, obj, old, ns_labels):
    if not any(_rule_matches(r, op, res, sub) for r in w.get("rules") or []):
        return False
    try:
        nsel = structured_selector(w.get("namespaceSelector") or {})
        osel = structured_selector(w.get("objectSelector") or {})
    except SelectorError:
        return False
    if res.resource == "namespaces" and res.group == "":
        if not labels_match(nsel, ((obj or old) or {}).get("metadata", {}).get("labels")):
            return False
    elif res.namespaced and not labels_match(nsel, ns_labels):
        return False
    return any(labels_match(osel, (o or {}).get("metadata", {}).get("labels")) for o in (obj, old) if o) or \
        (not obj and not old)


def _endpoint(cc, store):
    """Returns (host, port, path, tls_hostname) for a clientConfig; raises ValueError."""
    if cc.get("url"):
        u = http.client.urlsplit(cc["url"])
        if u.scheme != "https":
            raise ValueError("webhook url must use https")
        return u.hostname, u.port or 443, (u.path or "/") + ("?" + u.query if u.query else ""), u.hostname
    svc = cc["service"]
    port = svc.get("port", 443)
    with store.lock:
        obj = store.get("", "services", svc.get("namespace", ""), svc.get("name", ""))
    if obj is None:
        raise ValueError('service "%s/%s" not found' % (svc.get("namespace"), svc.get("name")))
    target = port
    for p in obj.get("spec", {}).get("ports", []):
        if p.get("port") == port and isinstance(p.get("targetPort"), int):
            target = p["targetPort"]
    return "127.0.0.1", target, svc.get("path") or "/", "%s.%s.svc" % (svc["name"], svc["namespace"])


class _Conn(http.client.HTTPSConnection):
    """HTTPS to host:port, verifying the certificate for another name (a Service's DNS name)."""

    def __init__(self, host, port, sni, timeout, context):
        super().__init__(host, port, timeout=timeout, context=context)
        self.sni = sni

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.sni)


def _call(w, review, store):
    host, port, path, sni = _endpoint(w.get("clientConfig") or {}, store)
    ctx = ssl.create_default_context()
    bundle = (w.get("clientConfig") or {}).get("caBundle")
    if bundle:
        ctx = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    conn = _Conn(host, port, sni, w.get("timeoutSeconds", 10), ctx)
    try:
        conn.request("POST", path, body=json.dumps(review), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise ValueError("the server responded with HTTP %d" % resp.status)
        out = json.loads(data)
        r = out.get("response")
        if not isinstance(r, dict) or r.get("uid") != review["request"]["uid"]:
            raise ValueError("expected response.uid=%r" % review["request"]["uid"])
        return r
    finally:
        conn.close()


def _configs(store, resource):
    with store.lock:
        return [c for c in store.items("admissionregistration.k8s.io", resource)]


def admit(store, res, sub, op, obj, old, ns, ident, ns_labels):
    """Runs mutating then validating webhooks; returns the (possibly patched) object or raises ApiError."""
    for kind, resource in (("mutating", "mutatingwebhookconfigurations"),
                           ("validating", "validatingwebhookconfigurations")):
        for cfg in _configs(store, resource):
            for w in cfg.get("webhooks") or []:
                if not _webhook_matches(w, op, res, sub, obj, old, ns_labels):
                    continue
                obj = _one(store, w, kind, res, sub, op, obj, old, ns, ident)
    return obj


def _one(store, w, kind, res, sub, op, obj, old, ns, ident):
    name = (obj or old or {}).get("metadata", {}).get("name", "")
    req = {"uid": str(uuid.uuid4()), "kind": {"group": res.group, "version": res.version, "kind": res.kind},
           "resource": {"group": res.group, "version": res.version, "resource": res.resource},
           "requestKind": {"group": res.group, "version": res.version, "kind": res.kind},
           "requestResource": {"group": res.group, "version": res.version, "resource": res.resource},
           "name": name, "operation": op, "userInfo": {"username": ident[0], "groups": ident[1]},
           "object": obj, "oldObject": old, "dryRun": False,
           "options": {"kind": "CreateOptions" if op == "CREATE" else "UpdateOptions" if op == "UPDATE"
                       else "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}}
    if ns:
        req["namespace"] = ns
    if sub:
        req["subResource"] = sub
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    try:
        r = _call(w, review, store)
    except (OSError, ValueError, KeyError, http.client.HTTPException) as e:
        if w.get("failurePolicy", "Fail") == "Ignore":
            return obj
        raise ApiError(500, "InternalError", 'Internal error occurred: failed calling webhook "%s": failed to call '
                       'webhook: %s' % (w.get("name"), e))
    if not r.get("allowed"):
        st = r.get("status") or {}
        code = st.get("code") if isinstance(st.get("code"), int) and st.get("code") >= 400 else 400
        msg = st.get("message") or st.get("reason")
        deny = 'admission webhook "%s" denied the request' % w.get("name")
        raise ApiError(code, st.get("reason") or ("Forbidden" if code == 403 else "BadRequest"),
                       deny + (": " + msg if msg else " without explanation"))
    if r.get("patch") and kind == "mutating" and obj is not None:
        if r.get("patchType") != "JSONPatch":
            raise ApiError(500, "InternalError", 'Internal error occurred: webhook "%s" returned patchType %r'
                           % (w.get("name"), r.get("patchType")))
        try:
            obj = k8s_patch.json_patch(obj, json.loads(base64.b64decode(r["patch"])))
        except (ValueError, k8s_patch.PatchError) as e:
            raise ApiError(500, "InternalError", 'Internal error occurred: JSON Patch from webhook "%s": %s'
                           % (w.get("name"), e))
    return obj
