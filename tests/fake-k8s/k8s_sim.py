"""The control loops a real cluster runs, reduced to what clients of the API can observe:
a scheduler, a kubelet per node, pod termination, namespace cleanup, node condition taints,
PodDisruptionBudget status, owner-reference garbage collection and a Deployment controller.

Scheduler: a Pending pod without spec.nodeName (schedulerName default-scheduler) waits
--schedule-delay seconds, then is bound to the first node by name that is Ready, not cordoned,
whose NoSchedule/NoExecute taints it tolerates, that matches its nodeSelector and required node
affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields metadata.name) and has the
requested cpu, memory, pods and extended resources (nvidia.com/gpu) left in allocatable; it posts
Scheduled / FailedScheduling events and keeps PodScheduled=False (reason Unschedulable) on pods
that fit nowhere, retrying every tick, so a pod starts when a fitting node appears.
Kubelet: a bound pod on a Ready node becomes Running at once (podIP 127.0.0.1, or the node's
InternalIP with hostNetwork; containers ready); nothing runs, probes are not evaluated, a pod on a
NotReady node is not marked failed.  Pods bound to nodes that no longer exist are deleted (pod GC).
Termination: a pod with deletionTimestamp vanishes after min(grace period, --terminate-seconds).
Node taints: cordoned -> node.kubernetes.io/unschedulable:NoSchedule; Ready False -> not-ready,
Ready Unknown -> unreachable (NoSchedule and NoExecute); no taint-based eviction.
Deployments, DaemonSets and StatefulSets: see k8s_workloads."""
import copy
import hashlib
import re
import secrets
import time

import k8s_objects as ko
import k8s_subres

QTY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
UNITS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3,
         "Ti": 1024 ** 4}


def quantity(s):
    m = QTY.match(str(s))
    if not m or m.group(2) not in UNITS:
        return 0.0
    return float(m.group(1)) * UNITS[m.group(2)]


def tolerates(tols, taint):
    for t in tols or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expr_ok(e, value, present):
    op, vals = e.get("operator"), e.get("values") or []
    if op == "In":
        return present and value in vals
    if op == "NotIn":
        return not present or value not in vals
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and vals:
        try:
            return int(value) > int(vals[0]) if op == "Gt" else int(value) < int(vals[0])
        except ValueError:
            return False
    return False


def node_affinity_ok(pod, node):
    labels = node["metadata"].get("labels") or {}
    spec = pod.get("spec", {})
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    req = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not req:
        return True
    for term in req.get("nodeSelectorTerms") or []:
        exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_expr_ok(e, labels.get(e.get("key")), e.get("key") in labels) for e in exprs) and \
                all(_expr_ok(f, node["metadata"]["name"], f.get("key") == "metadata.name") for f in fields):
            return True
    return False


def pod_requests(pod):
    out = {"pods": 1.0}
    for c in pod.get("spec", {}).get("containers", []):
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            out[k] = out.get(k, 0.0) + quantity(v)
    return out


def node_ready(node):
    for c in node.get("status", {}).get("conditions", []):
        if c.get("type") == "Ready":
            return c.get("status")
    return "Unknown"


def node_ip(node):
    for a in node.get("status", {}).get("addresses", []):
        if a.get("type") == "InternalIP":
            return a.get("address")
    return "127.0.0.1"


class Sim:
    """Runs the loops every tick under the store lock; api is the k8s_api.Api."""

    def __init__(self, api, schedule_delay, terminate_seconds):
        self.api, self.store, self.reg = api, api.store, api.reg
        self.schedule_delay, self.terminate_seconds = schedule_delay, terminate_seconds
        self.first_seen = {}   # pod uid -> monotonic time first seen Pending
        self.deadline = {}     # pod uid -> monotonic time its termination completes
        self.failed_msg = {}   # pod uid -> last FailedScheduling message
        self.last_gc = self.last_deploy = 0.0
        self.work = None       # k8s_workloads.Workloads, set by attach_workloads
        self.R = {r: self.reg.lookup(g, "v1", r) for g, r in (
            ("", "pods"), ("", "nodes"), ("", "events"), ("", "namespaces"), ("policy", "poddisruptionbudgets"),
            ("apps", "deployments"), ("apps", "replicasets"))}

    def tick(self):
        now = time.monotonic()
        self.terminate(now)
        self.namespaces()
        self.node_taints()
        if now - self.last_deploy > 0.5 and self.work is not None:
            self.last_deploy = now
            self.work.tick(now)
        self.schedule(now)
        self.kubelet()
        self.pdbs()
        if now - self.last_gc > 1.0:
            self.last_gc = now
            self.gc()

    def timers_pending(self):
        """True while a pod waits for its schedule delay or its termination."""
        now = time.monotonic()
        return bool(self.deadline) or any(now - t < self.schedule_delay for t in self.first_seen.values())

    def event(self, obj, etype, reason, message, component):
        md = obj["metadata"]
        ns = md.get("namespace") or "default"
        if self.store.get("", "namespaces", "", ns) is None:
            return
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%s" % (md["name"], secrets.token_hex(8)), "namespace": ns},
              "involvedObject": {"kind": obj.get("kind"), "namespace": md.get("namespace"), "name": md["name"],
                                 "uid": md.get("uid"), "apiVersion": obj.get("apiVersion"),
                                 "resourceVersion": md.get("resourceVersion")},
              "reason": reason, "message": message, "type": etype, "source": {"component": component},
              "firstTimestamp": ko.now_str(), "lastTimestamp": ko.now_str(), "count": 1,
              "reportingComponent": component, "reportingInstance": ""}
        ko.new_metadata(ev, ns)
        self.api.put_locked(self.R["events"], ev, None)

    # --- pods -----------------------------------------------------------------------------------
    def terminate(self, now):
        pods = self.store.items("", "pods")
        live = {p["metadata"]["uid"] for p in pods}
        for table in (self.deadline, self.first_seen, self.failed_msg):
            for uid in [u for u in table if u not in live]:
                del table[uid]
        for p in pods:
            md = p["metadata"]
            if not md.get("deletionTimestamp"):
                continue
            uid = md["uid"]
            if uid not in self.deadline:
                grace = md.get("deletionGracePeriodSeconds", 0)
                self.deadline[uid] = now + min(grace, self.terminate_seconds)
                if grace:
                    self.event(p, "Normal", "Killing", "Stopping container %s" % ",".join(
                        c["name"] for c in p["spec"].get("containers", [])), "kubelet")
            if now >= self.deadline[uid] and not md.get("finalizers"):
                self.deadline.pop(uid, None)
                self.api.remove_locked(self.R["pods"], p)

    def _fit(self, pod, node, used):
        if node_ready(node) != "True":
            return "node(s) were not ready"
        spec = pod.get("spec", {})
        if node.get("spec", {}).get("unschedulable") and not tolerates(
                spec.get("tolerations"), {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "node(s) were unschedulable"
        for t in node.get("spec", {}).get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations"), t):
                return "node(s) had untolerated taint {%s: %s}" % (t.get("key"), t.get("value", ""))
        if not node_affinity_ok(pod, node):
            return "node(s) didn't match Pod's node affinity/selector"
        alloc = node.get("status", {}).get("allocatable") or {}
        have = used.get(node["metadata"]["name"], {})
        for k, v in pod_requests(pod).items():
            cap = quantity(alloc[k]) if k in alloc else (110.0 if k == "pods" else 0.0)
            if k in ("cpu", "memory", "ephemeral-storage") and k not in alloc:
                continue
            if have.get(k, 0.0) + v > cap + 1e-9:
                return "Insufficient %s" % k
        return None

    def _used(self):
        used = {}
        for p in self.store.items("", "pods"):
            n = p.get("spec", {}).get("nodeName")
            if n and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                u = used.setdefault(n, {})
                for k, v in pod_requests(p).items():
                    u[k] = u.get(k, 0.0) + v
        return used

    def schedule(self, now):
        pending = [p for p in self.store.items("", "pods") if not p["spec"].get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")
                   and p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
                   and not p["spec"].get("schedulingGates")]
        if not pending:
            return
        nodes = self.store.items("", "nodes")
        used = None
        for p in pending:
            uid = p["metadata"]["uid"]
            if now - self.first_seen.setdefault(uid, now) < self.schedule_delay:
                continue
            if used is None:
                used = self._used()
            reasons = {}
            chosen = None
            for n in nodes:
                why = self._fit(p, n, used)
                if why is None:
                    chosen = n
                    break
                reasons[why] = reasons.get(why, 0) + 1
            if chosen is not None:
                name = chosen["metadata"]["name"]
                bound = k8s_subres.bind_locked(self.api, p, name)
                u = used.setdefault(name, {})
                for k, v in pod_requests(p).items():
                    u[k] = u.get(k, 0.0) + v
                self.first_seen.pop(uid, None)
                self.failed_msg.pop(uid, None)
                self.event(bound, "Normal", "Scheduled", "Successfully assigned %s/%s to %s" % (
                    p["metadata"]["namespace"], p["metadata"]["name"], name), "default-scheduler")
                continue
            msg = "0/%d nodes are available: %s." % (len(nodes), ", ".join(
                "%d %s" % (c, r) for r, c in sorted(reasons.items())))
            if self.failed_msg.get(uid) != msg:
                self.failed_msg[uid] = msg
                new = copy.deepcopy(p)
                conds = [c for c in new["status"].get("conditions", []) if c.get("type") != "PodScheduled"]
                conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg,
                              "lastProbeTime": None, "lastTransitionTime": ko.now_str()})
                new["status"]["conditions"] = conds
                self.api.put_locked(self.R["pods"], new, p)
                self.event(p, "Warning", "FailedScheduling", msg, "default-scheduler")

    def kubelet(self):
        nodes = {n["metadata"]["name"]: n for n in self.store.items("", "nodes")}
        for p in list(self.store.items("", "pods")):
            name = p["spec"].get("nodeName")
            if not name or p["metadata"].get("deletionTimestamp"):
                continue
            node = nodes.get(name)
            if node is None:
                self.api.delete_locked(self.R["pods"], p, 0)
                continue
            if p["status"].get("phase") != "Pending" or node_ready(node) != "True":
                continue
            self._run(p, node)

    def _run(self, p, node):
        new = copy.deepcopy(p)
        t = ko.now_str()
        host = node_ip(node)
        ip = host if p["spec"].get("hostNetwork") else "127.0.0.1"
        conds = [{"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": t}
                 for c in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
        cs = [{"name": c["name"], "image": c.get("image", ""), "imageID": "docker.io/library/%s@sha256:%s" % (
            c.get("image", ""), hashlib.sha256(c.get("image", "").encode()).hexdigest()),
            "containerID": "containerd://" + secrets.token_hex(32), "ready": True, "started": True,
            "restartCount": 0, "state": {"running": {"startedAt": t}}, "lastState": {}}
            for c in p["spec"].get("containers", [])]
        new["status"].update({"phase": "Running", "conditions": conds, "hostIP": host, "hostIPs": [{"ip": host}],
                              "podIP": ip, "podIPs": [{"ip": ip}], "startTime": t, "containerStatuses": cs})
        self.api.put_locked(self.R["pods"], new, p)
        self.event(new, "Normal", "Started", "Started container %s" % ",".join(c["name"] for c in cs), "kubelet")

    # --- nodes, namespaces, budgets, garbage ------------------------------------------------------
    def node_taints(self):
        for n in self.store.items("", "nodes"):
            taints = [t for t in n.get("spec", {}).get("taints") or [] if not t.get("key", "").startswith(
                ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready",
                 "node.kubernetes.io/unreachable"))]
            auto = []
            if n.get("spec", {}).get("unschedulable"):
                auto.append(("node.kubernetes.io/unschedulable", "NoSchedule"))
            ready = node_ready(n)
            if ready != "True":
                key = "node.kubernetes.io/not-ready" if ready == "False" else "node.kubernetes.io/unreachable"
                auto += [(key, "NoSchedule"), (key, "NoExecute")]
            old = n.get("spec", {}).get("taints") or []
            keep = {(t["key"], t.get("effect")): t for t in old}
            want = taints + [keep.get(a) or dict({"key": a[0], "effect": a[1]}, **(
                {"timeAdded": ko.now_str()} if a[1] == "NoExecute" else {})) for a in auto]
            if want != old:
                new = copy.deepcopy(n)
                if want:
                    new.setdefault("spec", {})["taints"] = want
                else:
                    new.get("spec", {}).pop("taints", None)
                self.api.put_locked(self.R["nodes"], new, n)

    def namespaces(self):
        for ns in self.store.items("", "namespaces"):
            if not ns["metadata"].get("deletionTimestamp"):
                continue
            name, left = ns["metadata"]["name"], 0
            for (g, r), table in list(self.store.objs.items()):
                for (ons, _), o in list(table.items()):
                    if ons != name:
                        continue
                    left += 1
                    res = self.reg.by_path.get((g, "v1", r)) or self.reg.find_kind(g, o.get("kind"))
                    if res is not None and not o["metadata"].get("deletionTimestamp"):
                        self.api.delete_locked(res, o, None)
            if left == 0:
                self.api.remove_locked(self.R["namespaces"], ns)

    def pdbs(self):
        for b in self.store.items("policy", "poddisruptionbudgets"):
            st = k8s_subres.pdb_status(self.store, b)
            if st != b.get("status"):
                new = copy.deepcopy(b)
                new["status"] = st
                self.api.put_locked(self.R["poddisruptionbudgets"], new, b)

    def gc(self):
        uids = set()
        for table in self.store.objs.values():
            for o in table.values():
                uids.add(o["metadata"].get("uid"))
        for (g, r), table in list(self.store.objs.items()):
            for o in list(table.values()):
                refs = o["metadata"].get("ownerReferences")
                if refs and not any(ref.get("uid") in uids for ref in refs) and \
                        not o["metadata"].get("deletionTimestamp"):
                    res = self.reg.find_kind(g, o.get("kind"))
                    if res is not None:
                        self.api.delete_locked(res, o, None)

    def run_deferred(self):
        """Creates the pods the workload controllers asked for, without the lock."""
        self.work.run_deferred()
