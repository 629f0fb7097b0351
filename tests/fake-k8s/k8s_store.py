"""The fake API server's object store: objects by (group, resource, namespace, name), one global
resourceVersion counter, and a bounded history of change events that watches replay.

Invariants: every write happens under Store.lock and gives the written object the next
resourceVersion; stored dicts are never mutated after they are stored (writers store a new dict),
so readers may serialize them under the lock without copying.  The history holds the last N
events; a watch from resourceVersion X can resume only when every event after X is still held,
otherwise it gets 410 Gone, which is also what every old resourceVersion gets after a restart
(the history is not persisted, as a real watch cache is not)."""
import collections
import json
import os
import re
import threading

Event = collections.namedtuple("Event", "rv group resource type obj old")


class SelectorError(ValueError):
    pass


# --- label and field selectors --------------------------------------------------------------

_SET_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def parse_label_selector(s):
    """Parses a labelSelector query string into [(key, op, values)]; raises SelectorError."""
    reqs = []
    for part in _split_top(s or ""):
        part = part.strip()
        if not part:
            continue
        m = _SET_RE.match(part)
        if m:
            vals = [v.strip() for v in m.group(3).split(",") if v.strip()]
            reqs.append((m.group(1), "In" if m.group(2) == "in" else "NotIn", vals))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append((k.strip(), "NotIn", [v.strip()]))
        elif "==" in part or "=" in part:
            k, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            reqs.append((k.strip(), "In", [v.strip()]))
        elif part.startswith("!"):
            reqs.append((part[1:].strip(), "DoesNotExist", []))
        else:
            reqs.append((part, "Exists", []))
        if not re.match(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
                        reqs[-1][0]):
            raise SelectorError("unable to parse requirement: invalid label key \"%s\"" % reqs[-1][0])
    return reqs


def structured_selector(sel):
    """Converts a metav1.LabelSelector dict into requirements; None selects nothing, {} everything."""
    if sel is None:
        return None
    reqs = [(k, "In", [v]) for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SelectorError('"%s" is not a valid label selector operator' % op)
        reqs.append((e.get("key", ""), op, list(e.get("values") or [])))
    return reqs


def labels_match(reqs, labels):
    """True when the labels dict satisfies every requirement (None requirements match nothing)."""
    if reqs is None:
        return False
    labels = labels or {}
    for k, op, vals in reqs:
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


FIELDS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
    "secrets": {"type"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type"},
}


def parse_field_selector(s, resource):
    """Parses a fieldSelector into [(field, negate, value)], refusing fields the resource lacks."""
    reqs = []
    for part in (s or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            f, v = part.split("!=", 1)
            neg = True
        elif "=" in part:
            f, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            neg = False
        else:
            raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (s, part))
        f = f.strip()
        if f not in ("metadata.name", "metadata.namespace") and f not in FIELDS.get(resource, ()):
            raise SelectorError('field label not supported: %s' % f)
        reqs.append((f, neg, v.strip()))
    return reqs


def _field_value(obj, field):
    if field == "source" and "source" in obj:
        return obj["source"].get("component", "")
    cur = obj
    for p in field.split("."):
        cur = cur.get(p) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs, obj):
    for f, neg, v in reqs:
        if (_field_value(obj, f) == v) == neg:
            return False
    return True


# --- the store ------------------------------------------------------------------------------

class Store:
    """All objects and the change history; see the module comment for the locking rules."""

    def __init__(self, history):
        self.lock = threading.Condition()
        self.rv = 0
        self.objs = {}  # (group, resource) -> {(namespace, name): obj}
        self.hist = collections.deque(maxlen=max(1, history))
        self.dirty = False

    def table(self, group, resource):
        return self.objs.setdefault((group, resource), {})

    def get(self, group, resource, ns, name):
        return self.objs.get((group, resource), {}).get((ns or "", name))

    def items(self, group, resource, ns=None):
        """Objects of one resource, sorted by namespace then name; ns None means all namespaces."""
        t = self.objs.get((group, resource), {})
        keys = sorted(k for k in t if ns is None or k[0] == ns)
        return [t[k] for k in keys]

    def put(self, group, resource, obj, old):
        """Stores obj (takes ownership) with the next resourceVersion; records ADDED or MODIFIED."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        md = obj["metadata"]
        self.table(group, resource)[(md.get("namespace", ""), md["name"])] = obj
        self.hist.append(Event(self.rv, group, resource, "MODIFIED" if old else "ADDED", obj, old))
        self.dirty = True
        self.lock.notify_all()
        return obj

    def remove(self, group, resource, obj):
        """Removes the stored object; the DELETED event carries a copy at a new resourceVersion."""
        md = obj["metadata"]
        self.table(group, resource).pop((md.get("namespace", ""), md["name"]), None)
        self.rv += 1
        gone = dict(obj)
        gone["metadata"] = dict(md, resourceVersion=str(self.rv))
        self.hist.append(Event(self.rv, group, resource, "DELETED", gone, obj))
        self.dirty = True
        self.lock.notify_all()
        return gone

    def oldest_resumable(self):
        """The smallest resourceVersion a watch may resume from (every later event is held)."""
        if not self.hist:
            return self.rv
        return self.hist[0].rv - 1

    def events_after(self, rv):
        """Events with a resourceVersion above rv, oldest first (caller checks resumability)."""
        out = []
        for ev in reversed(self.hist):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out

    # --- persistence ------------------------------------------------------------------------
    def save(self, path):
        """Writes every object and the counter atomically; call with the lock held."""
        doc = {"resourceVersion": self.rv,
               "objects": [[g, r, o] for (g, r), t in sorted(self.objs.items()) for o in t.values()]}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
        self.dirty = False

    def load(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.rv = int(doc["resourceVersion"])
        for g, r, o in doc["objects"]:
            md = o["metadata"]
            self.table(g, r)[(md.get("namespace", ""), md["name"])] = o
