"""The three patch formats of the Kubernetes API: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and strategic merge patch.

Strategic merge patch follows apimachinery's rules for the lists that clients patch: lists of
objects with a patchMergeKey (containers, env, volumes, ports, conditions, ...) merge by that key,
`finalizers` merges as a set, every other list (tolerations, taints, args, ...) is replaced, and the
directives $patch (replace/delete/merge), $retainKeys, $setElementOrder/<list> and
$deleteFromPrimitiveList/<list> are honoured; PodDisruptionBudget spec.selector (patchStrategy replace) is replaced by the
caller, k8s_api.  Merge keys are looked up by the list's field name
rather than by the Go type (the fake has no schemas); the only name shared by two types with
different keys is `ports` (containerPort for containers, port for services), told apart by the
items.  Functions never mutate their inputs; they raise PatchError with a client-facing message."""
import copy

MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "imagePullSecrets": "name",
    "conditions": "type", "ownerReferences": "uid", "hostAliases": "ip", "addresses": "type", "podIPs": "ip",
    "hostIPs": "ip", "resourceClaims": "name", "schedulingGates": "name", "secrets": "name",
    "topologySpreadConstraints": "topologyKey", "ports": None,
}
SET_LISTS = {"finalizers"}


class PatchError(ValueError):
    pass


def merge_patch(doc, patch):
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- JSON patch -----------------------------------------------------------------------------

def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, parts, path):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise PatchError("jsonpatch: path %s: missing value" % path)
    return cur


def _get(doc, path):
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise PatchError("jsonpatch: path %s: missing value" % path)


def _remove(doc, path):
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError("jsonpatch remove operation does not apply: doc is missing path: %s" % path)


def _add(doc, path, value, replace=False):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError("jsonpatch replace operation does not apply: doc is missing key: %s" % path)
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise PatchError("jsonpatch %s operation does not apply: index out of range: %s"
                             % ("replace" if replace else "add", path))
    else:
        raise PatchError("jsonpatch: path %s: missing value" % path)
    return doc


def json_patch(doc, ops):
    """RFC 6902 over a copy of doc; ops is the decoded patch array."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be an array of operations")
    out = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("json patch operation needs 'op' and 'path': %s" % (op,))
        kind, path = op["op"], op["path"]
        if kind == "add":
            out = _add(out, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(out, path)
        elif kind == "replace":
            out = _add(out, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            v = _remove(out, op.get("from", ""))
            out = _add(out, path, v)
        elif kind == "copy":
            out = _add(out, path, copy.deepcopy(_get(out, op.get("from", ""))))
        elif kind == "test":
            if _get(out, path) != op.get("value"):
                raise PatchError("testing value %s failed: test failed" % path)
        else:
            raise PatchError("Unexpected kind: %s" % kind)
    return out


# --- strategic merge patch ------------------------------------------------------------------

def _merge_key(field, items):
    key = MERGE_KEYS.get(field, "")
    if key is None:  # ports
        dicts = [i for i in items if isinstance(i, dict)]
        key = "containerPort" if any("containerPort" in i for i in dicts) else "port"
    return key


def strip_directives(v):
    """Removes directives from a value that is set wholesale (nothing to merge into)."""
    if isinstance(v, dict):
        if v.get("$patch") == "delete":
            return None
        return {k: strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [strip_directives(x) for x in v if not (isinstance(x, dict) and x.get("$patch") in ("delete", "replace")
                                             and len(x) == 1)]
    return v


def _order(items, order, key):
    pos = {}
    for i, o in enumerate(order):
        pos[o.get(key) if isinstance(o, dict) else o] = i
    ident = (lambda x: x.get(key)) if key else (lambda x: x)
    known = sorted((x for x in items if ident(x) in pos), key=lambda x: pos[ident(x)])
    return known + [x for x in items if ident(x) not in pos]


def _merge_list(field, orig, patch):
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [strip_directives(p) for p in patch if not (isinstance(p, dict) and p.get("$patch") == "replace")]
    if field in SET_LISTS:
        return list(orig) + [p for p in patch if p not in orig]
    key = _merge_key(field, list(orig) + list(patch))
    out = copy.deepcopy(orig)
    for p in patch:
        if not isinstance(p, dict) or key not in p:
            raise PatchError("map: %s does not contain declared merge key: %s" % (p, key))
        idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == p[key]), None)
        if p.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(strip_directives(p))
        else:
            out[idx] = strategic_merge(out[idx], p)
    return out


def strategic_merge(doc, patch):
    """Applies a strategic merge patch (a dict) to a copy of doc (a dict)."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object")
    if patch.get("$patch") == "replace":
        return strip_directives(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
        elif k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(out.get(f), list):
                out[f] = [x for x in out[f] if x not in v]
        elif k.startswith("$"):
            continue
        elif v is None or (isinstance(v, dict) and v.get("$patch") == "delete"):
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = strategic_merge(out[k], v)
        elif isinstance(v, list) and isinstance(out.get(k), list) and (k in MERGE_KEYS or k in SET_LISTS):
            out[k] = _merge_list(k, out[k], v)
        else:
            out[k] = strip_directives(v)
    for f, order in orders.items():
        if isinstance(out.get(f), list) and isinstance(order, list):
            key = _merge_key(f, out[f]) if f in MERGE_KEYS else None
            out[f] = _order(out[f], order, key)
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        out = {k: v for k, v in out.items() if k in keep}
    return out
