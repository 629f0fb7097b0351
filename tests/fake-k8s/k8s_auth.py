"""Who is calling and what they may do: the test PKI, bearer tokens and RBAC.

PKI: a CA and a server certificate for 127.0.0.1/localhost/kubernetes.default.svc made with the
openssl CLI on first start and reused after.  Tokens: the admin token (group system:masters, allowed
everything) from DIR/admin.token, and ServiceAccount tokens, which are JWT-shaped (header.claims.
signature, HMAC-SHA256 with DIR/token.key; real servers sign with RSA, clients never check) and
name system:serviceaccount:<ns>:<name>.  A token is accepted only while its ServiceAccount exists
with the same uid, while a Secret-bound token's Secret exists with that token, and before its exp.
RBAC follows the real authorizer: ClusterRoleBindings anywhere, RoleBindings in their namespace,
rules by verb, apiGroup, resource or resource/subresource (with "*" and "*/sub"), resourceNames and
nonResourceURLs.  Discovery, /version, /healthz and the self reviews are open to every
authenticated user, as the default system:discovery and system:basic-user roles make them.  The
escalation check of real servers applies to Role/ClusterRole and binding writes: a non-admin may
only grant what it holds itself (literal coverage of each verb x group x resource x name), unless
it has `escalate` on the role kind, or `bind` on the role a binding references.  Not done:
aggregated ClusterRoles, impersonation, client certificates."""
import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import time

ADMIN = ("kubernetes-admin", ["system:masters", "system:authenticated"])


def _run(args, cwd):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(d):
    """Creates ca.key/ca.crt in d unless present."""
    if os.path.exists(os.path.join(d, "ca.crt")):
        return
    _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", "/CN=fake-k8s-ca",
          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)


def issue_cert(d, name, hosts):
    """Issues <name>.crt/<name>.key in d signed by d's CA for hosts (IPs or DNS names); returns paths."""
    crt, key = os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")
    if os.path.exists(crt):
        return crt, key
    sans = ",".join(("IP:" if h.replace(".", "").isdigit() or ":" in h else "DNS:") + h for h in hosts)
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % sans)
    _run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + hosts[0]], d)
    _run(["openssl", "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
          "-CAcreateserial", "-out", name + ".crt", "-days", "3650", "-extfile", name + ".ext"], d)
    os.unlink(os.path.join(d, name + ".csr"))
    return crt, key


def _secret_file(d, name, nbytes):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        with open(p, "w") as f:
            f.write(secrets.token_hex(nbytes))
        os.chmod(p, 0o600)
    with open(p) as f:
        return f.read().strip()


def _b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _unb64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class Auth:
    """Tokens and RBAC for one server directory; methods that read objects run under the store lock."""

    def __init__(self, d):
        make_ca(d)
        issue_cert(d, "server", ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                                 "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"])
        self.admin_token = _secret_file(d, "admin.token", 24)
        self.key = _secret_file(d, "token.key", 32).encode()
        with open(os.path.join(d, "ca.crt"), "rb") as f:
            self.ca_pem = f.read()

    def sign(self, claims):
        body = _b64(json.dumps({"alg": "HS256", "kid": "fake-k8s"}).encode()) + "." + \
            _b64(json.dumps(claims, separators=(",", ":")).encode())
        return body + "." + _b64(hmac.new(self.key, body.encode(), hashlib.sha256).digest())

    def sa_token(self, sa, audiences, exp, secret=None):
        """A token for ServiceAccount object sa (borrowed); exp None for a Secret-bound token."""
        md = sa["metadata"]
        now = int(time.time())
        ko = {"namespace": md["namespace"], "serviceaccount": {"name": md["name"], "uid": md["uid"]}}
        if secret is not None:
            ko["secret"] = {"name": secret["metadata"]["name"], "uid": secret["metadata"]["uid"]}
        claims = {"iss": "https://kubernetes.default.svc.cluster.local", "aud": audiences, "iat": now, "nbf": now,
                  "sub": "system:serviceaccount:%s:%s" % (md["namespace"], md["name"]), "kubernetes.io": ko,
                  "jti": secrets.token_hex(8)}
        if exp is not None:
            claims["exp"] = exp
        return self.sign(claims)

    def authenticate(self, token, store):
        """Returns (user, groups) for a valid token or None."""
        if not token:
            return None
        if hmac.compare_digest(token, self.admin_token):
            return ADMIN
        parts = token.split(".")
        if len(parts) != 3:
            return None
        want = _b64(hmac.new(self.key, (parts[0] + "." + parts[1]).encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(want, parts[2]):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
            ko = claims["kubernetes.io"]
            ns, sa_name, sa_uid = ko["namespace"], ko["serviceaccount"]["name"], ko["serviceaccount"]["uid"]
        except (ValueError, KeyError, TypeError):
            return None
        if "exp" in claims and claims["exp"] < time.time():
            return None
        sa = store.get("", "serviceaccounts", ns, sa_name)
        if sa is None or sa["metadata"]["uid"] != sa_uid or sa["metadata"].get("deletionTimestamp"):
            return None
        if "secret" in ko:
            sec = store.get("", "secrets", ns, ko["secret"]["name"])
            if sec is None or sec["metadata"]["uid"] != ko["secret"]["uid"]:
                return None
            if base64.b64decode(sec.get("data", {}).get("token", "")).decode(errors="replace") != token:
                return None
        return ("system:serviceaccount:%s:%s" % (ns, sa_name),
                ["system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"])

    # --- RBAC ---------------------------------------------------------------------------------
    def authorize(self, ident, a, store):
        """True when identity (user, groups) may do request attributes a (dict: verb, group, resource,
        sub, ns, name, path)."""
        user, groups = ident
        if "system:masters" in groups:
            return True
        if a.get("resource") is None:
            p = a.get("path", "")
            if p in ("/api", "/apis", "/version", "/healthz", "/livez", "/readyz") or p.startswith(
                    ("/api/", "/apis/", "/openapi/")):
                return True
        elif a["group"] in ("authorization.k8s.io", "authentication.k8s.io") and a["resource"] in (
                "selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews") and a["verb"] == "create":
            return True
        for b in store.items("rbac.authorization.k8s.io", "clusterrolebindings"):
            if self._binds(b, user, groups) and self._role_allows(b, None, a, store):
                return True
        if a.get("ns"):
            for b in store.items("rbac.authorization.k8s.io", "rolebindings", a["ns"]):
                if self._binds(b, user, groups) and self._role_allows(b, a["ns"], a, store):
                    return True
        return False

    @staticmethod
    def _binds(binding, user, groups):
        ns = binding["metadata"].get("namespace", "")
        for s in binding.get("subjects") or []:
            kind = s.get("kind")
            if kind == "ServiceAccount":
                if user == "system:serviceaccount:%s:%s" % (s.get("namespace") or ns, s.get("name")):
                    return True
            elif kind == "User" and s.get("name") == user:
                return True
            elif kind == "Group" and s.get("name") in groups:
                return True
        return False

    def _role_allows(self, binding, ns, a, store):
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            role = store.get("rbac.authorization.k8s.io", "clusterroles", "", ref.get("name", ""))
        else:
            role = store.get("rbac.authorization.k8s.io", "roles", ns or "", ref.get("name", ""))
        if role is None:
            return False
        return any(rule_allows(r, a) for r in role.get("rules") or [])


def rule_allows(rule, a):
    """One PolicyRule against request attributes (see Auth.authorize)."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and a["verb"] not in verbs:
        return False
    if a.get("resource") is None:
        for u in rule.get("nonResourceURLs") or []:
            if u == a["path"] or (u.endswith("*") and a["path"].startswith(u[:-1])):
                return True
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a["group"] not in groups:
        return False
    want = a["resource"] + ("/" + a["sub"] if a.get("sub") else "")
    res = rule.get("resources") or []
    if not ("*" in res or want in res or (a.get("sub") and "*/" + a["sub"] in res)):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.get("name") in names


def _rule_attrs(rule, ns):
    """The literal request attributes a PolicyRule grants (what the granter must hold)."""
    for verb in rule.get("verbs") or []:
        for url in rule.get("nonResourceURLs") or []:
            yield {"verb": verb, "resource": None, "path": url}
        for g in rule.get("apiGroups") or []:
            for r in rule.get("resources") or []:
                res, _, sub = r.partition("/")
                for name in rule.get("resourceNames") or [""]:
                    yield {"verb": verb, "group": g, "resource": res, "sub": sub, "ns": ns, "name": name}


def escalation_check(auth, ident, res, obj, store):
    """Returns None, or the 403 message when ident may not write this Role/ClusterRole/binding."""
    if "system:masters" in ident[1]:
        return None
    ns = obj["metadata"].get("namespace", "")
    name = obj["metadata"].get("name", "")
    rb = "rbac.authorization.k8s.io"
    if res.resource in ("roles", "clusterroles"):
        if auth.authorize(ident, {"verb": "escalate", "group": rb, "resource": res.resource, "sub": "", "ns": ns,
                                  "name": name}, store):
            return None
        rules = obj.get("rules") or []
    else:
        ref = obj.get("roleRef") or {}
        kind = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if auth.authorize(ident, {"verb": "bind", "group": rb, "resource": kind, "sub": "", "ns": ns,
                                  "name": ref.get("name", "")}, store):
            return None
        role = store.get(rb, kind, "" if kind == "clusterroles" else ns, ref.get("name", ""))
        rules = (role or {}).get("rules") or []
    missing = [r for r in rules if not all(auth.authorize(ident, a, store) for a in _rule_attrs(r, ns))]
    if not missing:
        return None
    return ('%s.%s "%s" is forbidden: user "%s" (groups=%s) is attempting to grant RBAC permissions not currently '
            'held:\n%s' % (res.resource, rb, name, ident[0], json.dumps(ident[1]), "\n".join(
                json.dumps(r, sort_keys=True) for r in missing)))


def forbidden_message(ident, a):
    """The exact sentence a real API server writes for a 403."""
    user = ident[0]
    if a.get("resource") is None:
        return 'forbidden: User "%s" cannot %s path "%s"' % (user, a["verb"], a["path"])
    res = a["resource"] + ("/" + a["sub"] if a.get("sub") else "")
    qual = a["resource"] + ("." + a["group"] if a["group"] else "")
    head = '%s "%s" is forbidden' % (qual, a["name"]) if a.get("name") else "%s is forbidden" % qual
    scope = 'in the namespace "%s"' % a["ns"] if a.get("ns") else "at the cluster scope"
    return '%s: User "%s" cannot %s resource "%s" in API group "%s" %s' % (head, user, a["verb"], res, a["group"],
                                                                          scope)


DEFAULT_CLUSTER_ROLES = {
    "cluster-admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    "admin": [{"apiGroups": ["", "apps", "policy", "batch", "coordination.k8s.io", "rbac.authorization.k8s.io"],
               "resources": ["*"], "verbs": ["*"]}],
    "edit": [{"apiGroups": ["", "apps", "policy", "batch"],
              "resources": ["pods", "pods/log", "pods/eviction", "pods/status", "services", "configmaps", "secrets",
                            "persistentvolumeclaims", "serviceaccounts", "deployments", "deployments/scale",
                            "replicasets", "statefulsets", "daemonsets", "jobs", "poddisruptionbudgets", "events"],
              "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}],
    "view": [{"apiGroups": ["", "apps", "policy", "batch"],
              "resources": ["pods", "pods/log", "pods/status", "services", "configmaps", "persistentvolumeclaims",
                            "serviceaccounts", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs",
                            "poddisruptionbudgets", "events"],
              "verbs": ["get", "list", "watch"]}],
}
