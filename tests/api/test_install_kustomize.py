"""deploy/kubernetes: the controller and worker kustomize bases render with the real kubectl (kustomize
built in), and what they render agrees with the programs: the flags in the containers' args exist, the
Services select the pods and name their ports, the RBAC is the least privilege docs/kubernetes-install.md
lists (no wildcard, no Secrets), the webhooks point at the agent's Service, and the CRD's spec fields are
exactly those of egsctl's GPUProvisioningRequest manifest kind (src/client/manifest.c)."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, ROOT

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")


def render(base):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(ROOT, "deploy", "kubernetes", base)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def one(objs, kind, name=None):
    got = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(got) == 1, (kind, name, [o["metadata"]["name"] for o in got])
    return got[0]


def flags(args):
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def help_text(prog):
    r = subprocess.run([os.path.join(BIN, prog), "--help"], capture_output=True, text=True, timeout=10)
    return r.stdout + r.stderr


def test_controller_base():
    objs = render("controller")
    assert sorted(o["kind"] for o in objs) == ["Namespace", "Service", "StatefulSet"]
    assert all(o["metadata"].get("namespace") == "egs-system" for o in objs if o["kind"] != "Namespace")
    sts, svc = one(objs, "StatefulSet", "egsd"), one(objs, "Service", "egsd")
    spec = sts["spec"]
    assert spec["replicas"] == 1  # one SQLite database
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    # The Service reaches the pod: its selector matches the pod's labels and its targetPort is a named port.
    labels = spec["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    assert svc["spec"]["ports"][0]["targetPort"] in {p["name"] for p in c["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/healthz"
    # The data directory is the PVC; the admin key comes from the Secret mounted where the flag points.
    args = dict(a.split("=", 1) for a in c["args"])
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts[args["--data"]] == "data"
    assert spec["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    key_dir, key_name = os.path.split(args["--admin-key-file"])
    vol = next(v for v in pod["volumes"] if v["name"] == mounts[key_dir])
    assert vol["secret"]["secretName"] == "egsd-admin-key" and key_name == "admin.key"
    assert args["--listen"].startswith("0.0.0.0:")
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert pod["automountServiceAccountToken"] is False
    usage = help_text("egsd")
    for f in flags(c["args"]):
        assert f in usage, f


def test_controller_ha_overlay():
    """Three egsd over PostgreSQL (docs/ha.md): the URL from a Secret, each replica advertising its pod
    IP, one slice-token key for all, and every flag one egsd knows."""
    objs = render("controller-ha")
    sts = one(objs, "StatefulSet", "egsd")
    assert sts["spec"]["replicas"] == 3
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = dict(a.split("=", 1) for a in c["args"])
    env = {e["name"]: e["valueFrom"] for e in c["env"]}
    assert args["--store-url"] == "$(EGS_STORE_URL)" and env["EGS_STORE_URL"]["secretKeyRef"]["name"] == "egsd-store"
    assert args["--advertise"] == "$(POD_IP):8080" and env["POD_IP"]["fieldRef"]["fieldPath"] == "status.podIP"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    key = mounts[os.path.join(args["--data"], "kubecreds.key")]
    vol = next(v for v in pod["volumes"] if v["name"] == key["name"])
    assert vol["secret"]["secretName"] == "egsd-kubecreds" and key["subPath"] == "kubecreds.key"
    assert mounts["/etc/egsd/admin-key"]["name"] == "admin-key"  # the base's mounts stay
    usage = help_text("egsd")
    for f in flags(c["args"]):
        assert f in usage, f
    # Spread over nodes, started together, and drained one at a time.
    labels = pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    spread = pod["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    assert spread["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    pdb = one(objs, "PodDisruptionBudget", "egsd")
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["metadata"]["namespace"] == sts["metadata"]["namespace"]


# What the agent may do, rule by rule; a change to the ClusterRole must change this table and the docs.
AGENT_RULES = {
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "pods"): {"list", "watch", "delete"},
    ("", "pods/eviction"): {"create"},
    ("", "events"): {"create", "patch"},
    ("", "namespaces"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "serviceaccounts"): {"get", "create", "patch", "delete"},
    ("", "serviceaccounts/token"): {"create"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"get", "list", "create", "patch", "delete"},
    ("rbac.authorization.k8s.io", "clusterroles"): {"bind"},
    ("egs.kubeslice.io", "gpuprovisioningrequests"): {"get", "list", "watch", "patch", "update"},
    ("egs.kubeslice.io", "gpuprovisioningrequests/status"): {"get", "patch", "update"},
    ("apps", "deployments"): {"get", "create", "delete"},
    ("apps", "statefulsets"): {"get", "create", "delete"},
    ("", "services"): {"get", "create", "delete"},
    ("", "configmaps"): {"get", "create", "delete"},
}


def rules_table(role):
    out = {}
    for r in role["rules"]:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                assert "*" not in (g, res) and "*" not in r["verbs"], r
                out.setdefault((g, res), set()).update(r["verbs"])
    return out


def test_worker_base_rbac():
    objs = render("worker")
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == sorted(["Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRole",
                            "ClusterRoleBinding", "ConfigMap", "Service", "Deployment",
                            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"])
    role = one(objs, "ClusterRole", "egs-agent")
    assert rules_table(role) == AGENT_RULES
    bind = next(r for r in role["rules"] if r["verbs"] == ["bind"])
    assert bind["resourceNames"] == ["egs-slice-user"]  # bind no other role
    one(objs, "ClusterRole", "egs-slice-user")
    crb = one(objs, "ClusterRoleBinding", "egs-agent")
    sa = one(objs, "ServiceAccount", "egs-agent")
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egs-agent"}
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "egs-agent", "namespace": sa["metadata"]["namespace"]}]
    dep = one(objs, "Deployment", "egs-agent")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "egs-agent"
    # The slice user's role is namespaced work only: nothing of the cluster, no RBAC, no escalation.
    user = rules_table(one(objs, "ClusterRole", "egs-slice-user"))
    for g, res in user:
        assert res not in {"nodes", "namespaces", "clusterroles", "clusterrolebindings", "roles", "rolebindings",
                           "serviceaccounts/token", "persistentvolumes"}, res
        assert g != "rbac.authorization.k8s.io"
    assert user[("", "serviceaccounts")] == {"get", "list", "watch"}
    assert {"create", "delete"} <= user[("", "pods")] and "create" in user[("egs.kubeslice.io", "gpuprovisioningrequests")]


def test_worker_base_agent_and_webhooks():
    objs = render("worker")
    dep, svc = one(objs, "Deployment", "egs-agent"), one(objs, "Service", "egs-agent")
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"  # never two agents for one cluster
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    labels = spec["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    port = next(p for p in c["ports"] if p["name"] == svc["spec"]["ports"][0]["targetPort"])
    args = dict(a.split("=", 1) for a in c["args"])
    assert args["--backend"] == "kubernetes" and int(args["--webhook-port"]) == port["containerPort"]
    # The ConfigMap the env reads is the generated one (kustomize renames it with a hash).
    cm = one(objs, "ConfigMap")
    for e in c["env"]:
        assert e["valueFrom"]["configMapKeyRef"]["name"] == cm["metadata"]["name"]
        assert e["valueFrom"]["configMapKeyRef"]["key"] in cm["data"]
        assert "$(%s)" % e["name"] in " ".join(c["args"])
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets[mounts[os.path.dirname(args["--token-file"])]] == "egs-agent-token"
    assert secrets[mounts[os.path.dirname(args["--webhook-cert"])]] == "egs-agent-webhook-tls"
    assert pod["securityContext"]["runAsNonRoot"] is True and c["securityContext"]["allowPrivilegeEscalation"] is False
    for kind, path, policy in (("MutatingWebhookConfiguration", "/mutate", "Fail"),
                               ("ValidatingWebhookConfiguration", "/validate", "Ignore")):
        wh = one(objs, kind, "egs-agent")["webhooks"][0]
        ref = wh["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["path"], ref["port"]) == \
            (svc["metadata"]["name"], svc["metadata"]["namespace"], path, svc["spec"]["ports"][0]["port"])
        assert wh["failurePolicy"] == policy and wh["sideEffects"] == "None"
        assert wh["rules"][0]["resources"] == ["pods"]
        keys = {(m["key"], m["operator"]) for m in wh["namespaceSelector"]["matchExpressions"]}
        assert ("kubeslice.io/slice", "Exists" if policy == "Fail" else "DoesNotExist") in keys
    usage = help_text("egs-agent")
    if "--webhook-port" not in usage:
        pytest.skip("this egs-agent has no Kubernetes backend yet: its flags cannot be checked")
    for f in flags(c["args"]):
        assert f in usage, f


def manifest_gpr_fields():
    src = open(os.path.join(ROOT, "src", "client", "manifest.c")).read()
    block = src.split("gpr_fields[] = {", 1)[1].split("};", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r'\{"(\w+)", "\w+", (T_\w+), [\w |]+\}', block)}


def test_worker_base_gpr_crd_matches_egsctl_manifest():
    crd = one(render("worker"), "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "gpuprovisioningrequests.egs.kubeslice.io"
    s = crd["spec"]
    assert s["group"] == "egs.kubeslice.io" and s["scope"] == "Namespaced"
    assert s["names"]["kind"] == "GPUProvisioningRequest" and "gpr" in s["names"]["shortNames"]
    v = s["versions"][0]
    assert v["name"] == "v1" and v["served"] and v["storage"] and v["subresources"] == {"status": {}}
    cols = {c["name"]: c["jsonPath"] for c in v["additionalPrinterColumns"]}
    assert cols["State"] == ".status.provisioningStatus" and cols["Nodes"] == ".status.nodeList"
    assert cols["Estimate"] == ".status.estimate"
    spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"]
    fields = manifest_gpr_fields()
    assert len(fields) > 20
    assert set(spec["properties"]) == set(fields)
    types = {"T_STR": "string", "T_DUR": "string", "T_INT": "integer", "T_BOOL": "boolean", "T_LIST": "array"}
    for name, t in fields.items():
        assert spec["properties"][name]["type"] == types[t], name
    assert "required" not in spec  # a templateName alone is a whole request, as in egsctl
    rule = spec["x-kubernetes-validations"][0]["rule"]
    assert all(f in rule for f in ("templateName", "numberOfGPUNodes", "exitDuration"))
    dur = re.compile(spec["properties"]["exitDuration"]["pattern"])
    assert dur.match("0d6h0m") and dur.match("90m") and not dur.match("6 h") and not dur.match("h6")
    status = v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for col in cols.values():
        if col.startswith(".status."):
            assert col.split(".")[2] in status, col
