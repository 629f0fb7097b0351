"""Workload controllers: Deployments, DaemonSets and StatefulSets make pods from their templates.

Pods are created through the API (k8s_api.Api.create, after the store lock is released), so
admission webhooks see them as they see a real controller's pods; a refused create is a
FailedCreate event on the owner and a 5 s back-off.  Every pod carries an ownerReference to its
workload (controller: true), so deleting the workload garbage-collects its pods.
Deployments: `replicas` pods labelled pod-template-hash, owned by the Deployment itself (no
ReplicaSet objects); a template change replaces all pods at once; status replicas, updated, ready,
available and the Available condition.
DaemonSets: one pod per node that matches the template's nodeSelector/required affinity and whose
NoSchedule/NoExecute taints the template tolerates, plus the tolerations the real controller adds
(not-ready, unreachable, unschedulable, *-pressure); the pod is pinned with a required
matchFields metadata.name affinity and placed by the scheduler, as real; pods of nodes that stop
qualifying are deleted; status desired/current/ready/available/updated.
StatefulSets: pods <name>-0..N-1 created in order (each waits for the previous one to be Ready,
podManagementPolicy Parallel does not wait), hostname and subdomain set, one
PersistentVolumeClaim per volumeClaimTemplate and ordinal, created Bound (there is no storage
provisioner: no PersistentVolume exists behind it) and kept when the StatefulSet goes, as real;
a template change deletes the pods highest ordinal first, one at a time.  Jobs and ReplicaSets
are stored only."""
import copy
import hashlib
import json
import secrets
import time

import k8s_objects as ko
import k8s_subres
from k8s_sim import node_affinity_ok, tolerates

DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
CONTROLLER = ("system:serviceaccount:kube-system:workload-controller",
              ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"])


def template_hash(tmpl):
    return hashlib.sha256(json.dumps(tmpl, sort_keys=True).encode()).hexdigest()[:10]


def owner_ref(obj):
    return {"apiVersion": "apps/v1", "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


class Workloads:
    """The three controllers; tick() runs under the store lock, run_deferred() without it."""

    def __init__(self, sim):
        self.sim, self.api, self.store = sim, sim.api, sim.store
        self.deferred = []   # (namespace, pod body, owner) to create through the API
        self.backoff = {}    # owner uid -> monotonic time before which no pod is created for it

    def tick(self, now):
        for kind, fn in (("deployments", self.deployment), ("daemonsets", self.daemonset),
                         ("statefulsets", self.statefulset)):
            for obj in self.store.items("apps", kind):
                if not obj["metadata"].get("deletionTimestamp"):
                    fn(obj, now)

    # --- shared ---------------------------------------------------------------------------------
    def owned(self, obj):
        uid = obj["metadata"]["uid"]
        return [p for p in self.store.items("", "pods", obj["metadata"]["namespace"])
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]

    def spawn(self, obj, name, labels, now, mutate=None):
        """Queues a pod from obj's template unless obj is backing off after a refused create."""
        if self.backoff.get(obj["metadata"]["uid"], 0) > now:
            return
        tmpl = obj["spec"].get("template") or {}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(tmpl.get("metadata") or {}),
               "spec": copy.deepcopy(tmpl.get("spec") or {})}
        pod["metadata"]["name"] = name
        pod["metadata"].setdefault("labels", {}).update(labels)
        pod["metadata"]["ownerReferences"] = [owner_ref(obj)]
        if mutate:
            mutate(pod)
        self.deferred.append((obj["metadata"]["namespace"], pod, obj))

    def run_deferred(self):
        todo, self.deferred = self.deferred, []
        for ns, pod, owner in todo:
            try:
                self.api.create(self.sim.R["pods"], ns, pod, CONTROLLER, {})
            except ko.ApiError as e:
                with self.store.lock:
                    self.backoff[owner["metadata"]["uid"]] = time.monotonic() + 5.0
                    cur = self.store.get("apps", owner["kind"].lower() + "s", ns, owner["metadata"]["name"])
                    if cur is not None and e.code != 409:
                        self.sim.event(cur, "Warning", "FailedCreate", "Error creating: %s" % e.message,
                                       owner["kind"].lower() + "-controller")

    def set_status(self, obj, st):
        if st != obj.get("status"):
            new = copy.deepcopy(obj)
            new["status"] = st
            self.api.put_locked(self.api.reg.lookup("apps", "v1", obj["kind"].lower() + "s"), new, obj)

    def delete(self, pod):
        self.api.delete_locked(self.sim.R["pods"], pod, None)

    # --- Deployment -----------------------------------------------------------------------------
    def deployment(self, d, now):
        h = template_hash(d["spec"].get("template") or {})
        want = d["spec"].get("replicas", 1)
        live = [p for p in self.owned(d) if not p["metadata"].get("deletionTimestamp")]
        for p in live:
            if (p["metadata"].get("labels") or {}).get("pod-template-hash") != h:
                self.delete(p)
        live = [p for p in live if (p["metadata"].get("labels") or {}).get("pod-template-hash") == h]
        for p in live[want:]:
            self.delete(p)
        for _ in range(want - len(live)):
            self.spawn(d, "%s-%s-%s" % (d["metadata"]["name"], h[:9], secrets.token_hex(3)[:5]),
                       {"pod-template-hash": h}, now)
        ready = sum(1 for p in live[:want] if k8s_subres.pod_healthy(p))
        st = {"observedGeneration": d["metadata"].get("generation", 1), "replicas": min(len(live), want),
              "updatedReplicas": min(len(live), want), "readyReplicas": ready, "availableReplicas": ready,
              "unavailableReplicas": max(0, want - ready)}
        st = {k: v for k, v in st.items() if v or k == "observedGeneration"}
        ok = ready >= want
        cond = {"type": "Available", "status": "True" if ok else "False",
                "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable"}
        oc = ((d.get("status") or {}).get("conditions") or [{}])[0]
        if oc.get("status") == cond["status"]:
            cond = oc
        else:
            cond.update(message="Deployment has %s availability." % ("minimum" if ok else "no minimum"),
                        lastUpdateTime=ko.now_str(), lastTransitionTime=ko.now_str())
        st["conditions"] = [cond]
        self.set_status(d, st)

    # --- DaemonSet ------------------------------------------------------------------------------
    @staticmethod
    def _ds_target(pod):
        aff = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
               .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        for term in aff.get("nodeSelectorTerms") or []:
            for f in term.get("matchFields") or []:
                if f.get("key") == "metadata.name" and f.get("values"):
                    return f["values"][0]
        return pod["spec"].get("nodeName")

    @staticmethod
    def _ds_eligible(spec, node):
        tols = (spec.get("tolerations") or []) + DS_TOLERATIONS
        for t in node.get("spec", {}).get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tols, t):
                return False
        return node_affinity_ok({"spec": spec}, node)

    def daemonset(self, ds, now):
        tmpl = ds["spec"].get("template") or {}
        spec, h = tmpl.get("spec") or {}, template_hash(tmpl)
        eligible = {n["metadata"]["name"] for n in self.store.items("", "nodes") if self._ds_eligible(spec, n)}
        placed = {}
        for p in self.owned(ds):
            target = self._ds_target(p)
            if p["metadata"].get("deletionTimestamp"):
                placed.setdefault(target, None)
            elif target not in eligible or target in placed or \
                    (p["metadata"].get("labels") or {}).get("controller-revision-hash") != h:
                self.delete(p)
                placed.setdefault(target, None)
            else:
                placed[target] = p
        for node in sorted(eligible - set(placed)):
            def pin(pod, node=node):
                pod["spec"]["affinity"] = dict(pod["spec"].get("affinity") or {}, nodeAffinity={
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}})
                pod["spec"]["tolerations"] = (pod["spec"].get("tolerations") or []) + [
                    t for t in DS_TOLERATIONS if t not in (pod["spec"].get("tolerations") or [])]
            self.spawn(ds, "%s-%s" % (ds["metadata"]["name"], secrets.token_hex(3)[:5]),
                       {"controller-revision-hash": h, "pod-template-generation": str(
                           ds["metadata"].get("generation", 1))}, now, pin)
        pods = [p for n, p in placed.items() if p is not None and n in eligible]
        ready = sum(1 for p in pods if k8s_subres.pod_healthy(p))
        self.set_status(ds, {"observedGeneration": ds["metadata"].get("generation", 1),
                             "desiredNumberScheduled": len(eligible), "currentNumberScheduled": len(pods),
                             "updatedNumberScheduled": len(pods), "numberReady": ready, "numberAvailable": ready,
                             "numberUnavailable": len(eligible) - ready, "numberMisscheduled": 0})

    # --- StatefulSet ----------------------------------------------------------------------------
    def _claims(self, sts, i):
        """Ensures the ordinal's PersistentVolumeClaims exist (Bound); returns the pod volumes."""
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        vols = []
        for t in sts["spec"].get("volumeClaimTemplates") or []:
            claim = "%s-%s-%d" % (t["metadata"]["name"], name, i)
            vols.append({"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}})
            if self.store.get("", "persistentvolumeclaims", ns, claim) is not None:
                continue
            spec = copy.deepcopy(t.get("spec") or {})
            pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": claim, "labels": dict((sts["spec"].get("selector") or {}).get(
                       "matchLabels") or {})}, "spec": spec}
            ko.new_metadata(pvc, ns)
            spec["volumeName"] = "pvc-" + pvc["metadata"]["uid"]
            pvc["status"] = {"phase": "Bound", "accessModes": spec.get("accessModes") or [],
                             "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get(
                                 "storage", "1Gi")}}
            self.api.put_locked(self.api.reg.lookup("", "v1", "persistentvolumeclaims"), pvc, None)
        return vols

    def statefulset(self, sts, now):
        name, h = sts["metadata"]["name"], template_hash(sts["spec"].get("template") or {})
        want = sts["spec"].get("replicas", 1)
        ordered = sts["spec"].get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        by_name = {p["metadata"]["name"]: p for p in self.owned(sts)}
        for pname, p in by_name.items():
            ordinal = pname.rsplit("-", 1)[-1]
            if ordinal.isdigit() and int(ordinal) >= want and not p["metadata"].get("deletionTimestamp"):
                self.delete(p)
        stale = [i for i in range(want) if "%s-%d" % (name, i) in by_name and not by_name["%s-%d" % (
            name, i)]["metadata"].get("deletionTimestamp") and (by_name["%s-%d" % (name, i)]["metadata"].get(
                "labels") or {}).get("controller-revision-hash") != h]
        if stale and all(k8s_subres.pod_healthy(p) for p in by_name.values()):
            self.delete(by_name["%s-%d" % (name, max(stale))])
        for i in range(want):
            p = by_name.get("%s-%d" % (name, i))
            if p is None:
                vols = self._claims(sts, i)

                def ident(pod, i=i, vols=vols):
                    pod["spec"]["hostname"] = "%s-%d" % (name, i)
                    if sts["spec"].get("serviceName"):
                        pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
                    have = {v.get("name") for v in pod["spec"].get("volumes") or []}
                    pod["spec"]["volumes"] = (pod["spec"].get("volumes") or []) + [
                        v for v in vols if v["name"] not in have]
                self.spawn(sts, "%s-%d" % (name, i), {"controller-revision-hash": h,
                                                     "statefulset.kubernetes.io/pod-name": "%s-%d" % (name, i),
                                                     "apps.kubernetes.io/pod-index": str(i)}, now, ident)
                if ordered:
                    break
            elif ordered and not k8s_subres.pod_healthy(p):
                break
        pods = [by_name.get("%s-%d" % (name, i)) for i in range(want)]
        pods = [p for p in pods if p is not None and not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in pods if k8s_subres.pod_healthy(p))
        cur = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == h)
        self.set_status(sts, {"observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(pods),
                              "readyReplicas": ready, "availableReplicas": ready, "currentReplicas": cur,
                              "updatedReplicas": cur, "currentRevision": "%s-%s" % (name, h),
                              "updateRevision": "%s-%s" % (name, h)})
