"""Inference endpoints end to end: our SDK (sdk/python, the public SDK's calls) against a real egsd, a real
egs-agent --backend kubernetes running the controller of src/agent/k8s_infer.c against the fake Kubernetes API
server of tests/fake-k8s (whose Deployment controller, scheduler and kubelet make pods Ready), and the real
kubectl to look at what was made.  The refusals and roles run against mock agents (no cluster needed).

What each test proves is in its docstring."""
import json
import os

import pytest

import egs
from egs import exceptions
from egs.internal.inference_endpoint.create_inference_endpoint_data import GpuSpec, ModelSpec, Resources

from conftest import H100, Api, Cluster, wait_for
from k8sfix import K8sAgent, k8s_env
from test_slice_access_k8s import apply_worker_rbac


NS = "ws-dev"
LABEL = "egs.kubeslice.io/inference-endpoint"
PATH = "/api/v1/inference-endpoint"


def ok(p):
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


WEBHOOK_RULES = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": "egs-agent-webhooks"},
                 "rules": [{"apiGroups": ["admissionregistration.k8s.io"],
                            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                            "verbs": ["create", "get", "update"]}]}


def least_privilege_agent(cluster, fake, tmp):
    """The agent as installed: the ServiceAccount egs-agent with deploy/kubernetes/worker/rbac.yaml's
    ClusterRole (plus the webhook configurations, which --webhook-url needs), enforced by the fake."""
    apply_worker_rbac(fake)
    rbac = "/apis/rbac.authorization.k8s.io/v1/"
    assert fake.post(rbac + "clusterroles", WEBHOOK_RULES)[0] == 201
    assert fake.post(rbac + "clusterrolebindings", {
        "metadata": {"name": "egs-agent-webhooks"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egs-agent-webhooks"},
        "subjects": [{"kind": "ServiceAccount", "name": "egs-agent", "namespace": "egs-system"}]})[0] == 201
    kc = fake.kubeconfig_for(fake.service_account_token("egs-system", "egs-agent", 36000),
                             os.path.join(tmp, "agent.kubeconfig"))
    agent = K8sAgent(cluster, fake)
    agent.args[agent.args.index("--kubeconfig") + 1] = kc
    return agent


@pytest.fixture
def env(tmpdir_path):
    """The fake API server with one 8-GPU node, egsd with workspace ws (namespace ws-dev on k1), the agent of
    k1 with the least-privilege role, and an SDK session as admin."""
    with k8s_env(tmpdir_path, terminate_seconds=0.5) as (fake, cluster, agents):
        fake.add_gpu_node("gpu-1")
        agents.append(least_privilege_agent(cluster, fake, tmpdir_path).start())
        wait_for(lambda: [n["gpuNodeName"] for n in cluster.schedulable_nodes()] == ["gpu-1"], timeout=20,
                 what="gpu-1 in the inventory")
        cluster.workspace("ws", ["k1"], namespaces=[NS])
        wait_for(lambda: fake.get("/api/v1/namespaces/" + NS)[0] == 200, timeout=20, what="the slice namespace")
        cluster.auth = egs.authenticate(cluster.egsd.url, cluster.egsd.admin_key, sdk_default=False)
        yield fake, cluster, agents[0]


def gpu_spec(gpus=1, exit_duration="1h"):
    return GpuSpec(gpu_shape="NVIDIA-H100-80GB-HBM3", instance_type="p5.48xlarge", memory_per_gpu=40,
                   number_of_gpu_nodes=1, number_of_gpus=gpus, exit_duration=exit_duration, priority=101)


def describe(cluster, name="llm"):
    return egs.describe_inference_endpoint("ws", name, "k1", cluster.auth)["endpoint"]


def objects(fake, kinds="deploy,svc"):
    """{kind/name: object} of the kinds in the slice namespace, as the real kubectl shows them."""
    out = json.loads(ok(fake.kubectl("get", kinds, "-n", NS, "-o", "json")))
    return {"%s/%s" % (o["kind"], o["metadata"]["name"]): o for o in out["items"]}


def pods(fake):
    return objects(fake, "pods")


def assert_pinned(pod_spec, gpr_id):
    assert pod_spec["nodeSelector"]["kubeslice.io/gpr"] == gpr_id
    assert {"key": "kubeslice.io/egs", "operator": "Equal", "value": "dedicated-node",
            "effect": "NoSchedule"} in pod_spec["tolerations"]


def test_standard_endpoint_queues_deploys_on_the_gprs_node_is_ready_and_delete_removes_it(env):
    """create_inference_endpoint makes a GPR for the endpoint; while it waits behind another GPR the endpoint is
    Queued and nothing exists in the namespace.  Once the GPR is Provisioned the agent creates a Deployment
    (the huggingface runtime image, STORAGE_URI, the args, cpu/memory requests, one GPU) and a Service, both
    labelled for the endpoint, the pod template pinned to the GPR's nodes (nodeSelector kubeslice.io/gpr and
    the EGS taint's toleration); the pod runs on gpu-1, and describe says Ready with the Service's URL and the
    GPR.  Delete removes the Deployment (and its pod) and the Service, releases the GPR, and the endpoint goes."""
    fake, cluster, _ = env
    holder = cluster.gpr(sliceName="ws", numberOfGPUs=8, exitDuration="2h", gprName="holder")
    cluster.wait_state(holder, "Provisioned", timeout=20)

    spec = ModelSpec("huggingface", "hf://meta-llama/Llama-3.1-8B", ["--max-model-len=4096"], None,
                     Resources("4", "16Gi"))
    answer = egs.create_inference_endpoint("k1", "llm", "ws", spec, gpu_spec(), cluster.auth)
    assert answer == {"endpointName": "llm"}
    d = describe(cluster)
    assert d["status"] == "Queued" and d["predictStatus"] == "NotReady", d
    gid = d["gpuRequests"][0]["gprId"]
    assert d["gpuRequests"][0]["status"] == "Queued" and d["gpuRequests"][0]["gprName"] == "llm"
    assert cluster.status(gid)["gprName"] == "llm" and cluster.status(gid)["clusterName"] == "k1"
    assert objects(fake) == {}

    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": holder, "earlyRelease": True})
    cluster.wait_state(gid, "Provisioned", timeout=30)
    wait_for(lambda: set(objects(fake)) == {"Deployment/llm", "Service/llm"}, timeout=20,
             what="the Deployment and the Service")
    objs = objects(fake)
    dep, svc = objs["Deployment/llm"], objs["Service/llm"]
    assert dep["metadata"]["labels"][LABEL] == "llm" and svc["metadata"]["labels"][LABEL] == "llm"
    ps = dep["spec"]["template"]["spec"]
    assert_pinned(ps, gid)
    c = ps["containers"][0]
    assert c["image"].startswith("kserve/huggingfaceserver:") and c["args"] == ["--max-model-len=4096"]
    assert {"name": "STORAGE_URI", "value": "hf://meta-llama/Llama-3.1-8B"} in c["env"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] in (1, "1")
    assert {k: c["resources"]["requests"][k] for k in ("cpu", "memory")} == {"cpu": "4", "memory": "16Gi"}
    assert svc["spec"]["selector"] == {LABEL: "llm"} and svc["spec"]["ports"][0]["port"] == 80

    wait_for(lambda: describe(cluster)["status"] == "Ready", timeout=30, what="the endpoint Ready")
    d = describe(cluster)
    assert d["endpoint"] == "http://llm.%s.svc.cluster.local" % NS and d["namespace"] == NS
    assert d["predictStatus"] == "Ready" and d["readyReplicas"] == 1 and d["replicas"] == 1
    assert d["tryCommand"] == ["curl -s http://llm.%s.svc.cluster.local/v1/models/llm" % NS]
    assert d["gpuRequests"][0]["status"] == "Provisioned"
    [pod] = pods(fake).values()
    assert pod["spec"]["nodeName"] == "gpu-1" and pod["status"]["phase"] == "Running"
    listed = egs.list_inference_endpoint("ws", cluster.auth)["endpoints"]
    assert listed == [{"endpointName": "llm", "modelName": "huggingface", "status": "Ready",
                       "endpoint": d["endpoint"], "clusterName": "k1", "namespace": NS}]

    assert egs.delete_inference_endpoint("ws", "llm", "k1", cluster.auth) == {}
    assert cluster.status(gid)["status"]["provisioningStatus"] in ("Releasing", "Complete")
    wait_for(lambda: objects(fake) == {} and pods(fake) == {}, timeout=30, what="the objects removed")
    wait_for(lambda: egs.list_inference_endpoint("ws", cluster.auth)["endpoints"] == [], timeout=20,
             what="the endpoint gone from the list")
    with pytest.raises(exceptions.EgsException):
        describe(cluster)
    wait_for(lambda: cluster.status(gid)["status"]["provisioningStatus"] == "Complete", timeout=30,
             what="the GPR released")


def test_the_gprs_end_removes_the_objects_and_restarts_keep_the_endpoint(env):
    """When the endpoint's GPR reaches its exit time (the dev clock moved past exitDuration) it is released
    and the agent removes the Deployment and the Service: the endpoint shows Released and stays listed until
    deleted, which then forgets it (once the agent has confirmed its objects gone).  The endpoint survives an egsd restart (stored)."""
    fake, cluster, agent = env
    spec = ModelSpec("vllm", "s3://models/m", None, None, None)
    egs.create_inference_endpoint("k1", "llm", "ws", spec, gpu_spec(exit_duration="1h"), cluster.auth)
    wait_for(lambda: describe(cluster)["status"] == "Ready", timeout=40, what="the endpoint Ready")
    gid = describe(cluster)["gpuRequests"][0]["gprId"]

    cluster.egsd.stop()
    cluster.egsd.start()
    cluster.admin = cluster.egsd.api()
    cluster.auth = egs.authenticate(cluster.egsd.url, cluster.egsd.admin_key, sdk_default=False)
    assert describe(cluster)["status"] == "Ready"

    cluster.advance("1h1m")
    wait_for(lambda: cluster.status(gid)["status"]["provisioningStatus"] in ("Releasing", "Complete"), timeout=30,
             what="the GPR released at its exit time")
    wait_for(lambda: objects(fake) == {}, timeout=30, what="the objects removed at the GPR's end")
    wait_for(lambda: describe(cluster)["status"] == "Released", timeout=20, what="Released")
    assert describe(cluster)["predictStatus"] == "NotReady"
    egs.delete_inference_endpoint("ws", "llm", "k1", cluster.auth)
    wait_for(lambda: egs.list_inference_endpoint("ws", cluster.auth)["endpoints"] == [], timeout=20,
             what="the endpoint forgotten")


RAW = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: srv
  labels: {app: srv}
spec:
  replicas: 1
  selector: {matchLabels: {app: srv}}
  template:
    metadata: {labels: {app: srv}}
    spec:
      containers:
      - name: srv
        image: example.org/my-server:1.0
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: srv-http}
spec:
  selector: {app: srv}
  ports: [{port: 8000}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: srv-config}
data: {mode: fast}
"""


def test_custom_spec_is_applied_pinned_and_an_object_that_is_not_ours_is_left_alone(env):
    """create_inference_endpoint_with_custom_model_spec applies the user's YAML (three documents) into the
    slice's namespace: the Deployment's pod template pinned to the GPR's nodes, every object labelled; the
    endpoint URL is the first Service's; it becomes Ready.  A second endpoint whose manifest names an object
    that exists and is not its own shows Failed with the reason, and that object is never changed or
    deleted, not even when the endpoint is deleted."""
    fake, cluster, _ = env
    egs.create_inference_endpoint_with_custom_model_spec("k1", "custom", "ws", RAW, gpu_spec(), cluster.auth)
    wait_for(lambda: describe(cluster, "custom")["status"] == "Ready", timeout=40, what="the custom endpoint Ready")
    d = describe(cluster, "custom")
    gid = d["gpuRequests"][0]["gprId"]
    assert d["endpoint"] == "http://srv-http.%s.svc.cluster.local" % NS and d["modelName"] == "custom"
    objs = objects(fake, "deploy,svc,cm")
    assert {"Deployment/srv", "Service/srv-http", "ConfigMap/srv-config"} <= set(objs)
    assert all(objs[k]["metadata"]["labels"][LABEL] == "custom"
               for k in ("Deployment/srv", "Service/srv-http", "ConfigMap/srv-config"))
    assert_pinned(objs["Deployment/srv"]["spec"]["template"]["spec"], gid)

    code, body = fake.post("/api/v1/namespaces/%s/configmaps" % NS,
                           {"metadata": {"name": "theirs"}, "data": {"keep": "me"}})
    assert code == 201, body
    raw2 = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs}\ndata: {keep: not}\n"
    egs.create_inference_endpoint_with_custom_model_spec("k1", "other", "ws", raw2, None, cluster.auth)
    wait_for(lambda: describe(cluster, "other")["status"] == "Failed", timeout=20, what="the conflict reported")
    assert "ConfigMap theirs exists" in describe(cluster, "other")["message"]
    assert describe(cluster, "other")["gpuRequests"] == []
    egs.delete_inference_endpoint("ws", "other", "k1", cluster.auth)
    wait_for(lambda: [e["endpointName"] for e in egs.list_inference_endpoint("ws", cluster.auth)["endpoints"]]
             == ["custom"], timeout=20, what="the failed endpoint gone")
    code, cm = fake.get("/api/v1/namespaces/%s/configmaps/theirs" % NS)
    assert code == 200 and cm["data"] == {"keep": "me"} and LABEL not in (cm["metadata"].get("labels") or {})

    egs.delete_inference_endpoint("ws", "custom", "k1", cluster.auth)
    wait_for(lambda: not {"Deployment/srv", "Service/srv-http", "ConfigMap/srv-config"} & set(
        objects(fake, "deploy,svc,cm")), timeout=30, what="the custom objects removed")
    assert fake.get("/api/v1/namespaces/%s/configmaps/theirs" % NS)[0] == 200


# ---- refusals and roles (mock agents: no cluster needed) ----

@pytest.fixture
def mock(tmpdir_path):
    c = Cluster(tmpdir_path)
    c.add_cluster("k1", [("h1", H100)])
    c.add_cluster("k2", [("h2", H100)])
    c.workspace("ws", ["k1"], namespaces=[NS])
    c.workspace("other", ["k2"], namespaces=["other-ns"])
    yield c
    c.close()


def body(**kw):
    b = {"clusterName": "k1", "endpointName": "llm", "workspace": "ws",
         "modelSpec": {"modelName": "huggingface", "storageURI": "hf://m", "args": None, "secret": None,
                       "resources": None},
         "gpuSpec": {"gpuShape": H100["gpuModel"], "instanceType": H100["instanceType"], "memoryPerGPU": 40,
                     "numberOfGPUNodes": 1, "numberOfGPUs": 1, "exitDuration": "1h", "priority": 101},
         "rawModelSpec": None}
    b.update(kw)
    return b


def refused(api, b, status, field=None):
    code, doc = api.call("POST", PATH, b)
    assert code == status if status else 400 <= code < 500, (code, doc)
    if field:
        assert doc["error"]["data"]["field"] == field, doc
    return doc["error"]["message"]


def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(mock):
    """Each hostile or malformed create gets a 4xx naming the field; no endpoint and no GPR is stored; a
    duplicate name is 409; a refused GPR (too many GPUs) stores nothing either."""
    api = mock.admin
    ms = body()["modelSpec"]
    cases = [
        (dict(endpointName="LLM"), "endpointName"), (dict(endpointName="9llm"), "endpointName"),
        (dict(endpointName="a" * 64), "endpointName"), (dict(endpointName="a.b"), "endpointName"),
        (dict(modelSpec=None), "modelSpec"),
        (dict(rawModelSpec="kind: ConfigMap"), "rawModelSpec"),
        (dict(gpuSpec=None), "gpuSpec"),
        (dict(clusterName="k2"), "clusterName"), (dict(clusterName="nowhere"), "clusterName"),
        (dict(modelSpec=dict(ms, modelName="bogus")), "modelSpec.modelName"),
        (dict(modelSpec=dict(ms, storageURI="")), "modelSpec.storageURI"),
        (dict(modelSpec=dict(ms, storageURI="s3://a\nb")), "modelSpec.storageURI"),
        (dict(modelSpec=dict(ms, args=[1])), "modelSpec.args"),
        (dict(modelSpec=dict(ms, secret={"HF_TOKEN": "hunter2"})), "modelSpec.secret"),
        (dict(modelSpec=dict(ms, resources={"cpu": "lots"})), "modelSpec.resources.cpu"),
        (dict(modelSpec=dict(ms, resources={"gpu": "1"})), "modelSpec.resources"),
        (dict(gpuSpec=dict(body()["gpuSpec"], sliceName="other")), "gpuSpec.sliceName"),
        (dict(gpuSpec=dict(body()["gpuSpec"], numberOfGPUs=0)), "numberOfGPUs"),
        (dict(gpuSpec=dict(body()["gpuSpec"], numberOfGPUs=9)), None),  # more than any node has
        (dict(modelSpec=None, rawModelSpec="kind: Secret\napiVersion: v1\nmetadata: {name: s}\n"), "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}\n"),
         "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: p}\nspec: {template: "
              "{spec: {hostNetwork: true, containers: [{name: c, image: i}]}}}\n"), "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
              "spec: {containers: [{name: c, image: i}]}\n"), "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\ndata: {a: [\n"),
         "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="".join("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\n" % i
                                                   for i in range(17))), "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="apiVersion: v1\nkind: Service\nmetadata: {name: a.b}\n"), "rawModelSpec"),
        (dict(modelSpec=None, rawModelSpec="x" * 70000), "rawModelSpec"),
        (dict(workspace="nope"), "workspaceName"),
    ]
    for change, field in cases:
        refused(api, body(**change), 404 if change.get("workspace") else (None if field is None else 422), field)
    code, doc = api.call("POST", PATH, dict(body(), extra=1))
    assert code in (400, 422) and doc["error"]["data"]["field"] == "extra", doc
    code, doc = api.call("POST", PATH, dict(body(), modelSpec="huggingface"))
    assert code in (400, 422) and doc["error"]["data"]["field"] == "modelSpec", doc
    assert api.get(PATH + "/list?workspace=ws")["endpoints"] == []
    assert api.get("/api/v1/gpr/list?sliceName=ws")["items"] == []

    assert api.ok("POST", PATH, body())["endpointName"] == "llm"
    refused(api, body(), 409, "endpointName")
    refused(api, body(clusterName="k1", modelSpec=None, rawModelSpec="apiVersion: v1\nkind: ConfigMap\n"
                      "metadata: {name: c}\n", gpuSpec=None), 409, "endpointName")
    assert len(api.get("/api/v1/gpr/list?sliceName=ws")["items"]) == 1
    assert len(api.get(PATH + "/list?workspace=ws")["endpoints"]) == 1


def test_roles_and_scopes(mock):
    """The workspace's Owner creates and deletes; its Viewer lists and describes but may not write (403); keys
    of another workspace get 403 on every route; agents may not call the user routes, users not the agent
    routes, and an agent sees and reports only its own cluster's endpoints."""
    owner = mock.admin.with_token(mock.key("Owner", "ws"))
    viewer = mock.admin.with_token(mock.key("Viewer", "ws"))
    stranger = mock.admin.with_token(mock.key("Owner", "other"))
    assert owner.ok("POST", PATH, body())["endpointName"] == "llm"
    q = "?workspace=ws&endpoint=llm&cluster=k1"
    assert viewer.get(PATH + q)["endpoint"]["status"] in ("Queued", "Provisioning")
    assert [e["endpointName"] for e in viewer.get(PATH + "/list?workspace=ws")["endpoints"]] == ["llm"]
    assert viewer.call("POST", PATH, body(endpointName="v"))[0] == 403
    ref = {"endpoint": "llm", "workspace": "ws", "cluster": "k1"}
    assert viewer.call("DELETE", PATH, ref)[0] == 403
    for method, path, b in (("GET", PATH + q, None), ("GET", PATH + "/list?workspace=ws", None),
                            ("POST", PATH, body(endpointName="s")), ("DELETE", PATH, ref)):
        assert stranger.call(method, path, b)[0] == 403, (method, path)
    assert mock.admin.call("GET", PATH + "?workspace=ws&endpoint=llm&cluster=k2")[0] == 404
    assert mock.admin.call("GET", PATH + "?workspace=ws&endpoint=nope")[0] == 404

    k1 = Api(mock.egsd.port, mock.tokens["k1"], mock.egsd.ssl_context)
    k2 = Api(mock.egsd.port, mock.tokens["k2"], mock.egsd.ssl_context)
    assert k1.call("GET", PATH + "/list?workspace=ws")[0] == 403
    assert owner.call("GET", "/api/v1/agent/inference-endpoints")[0] == 403
    wait_for(lambda: mock.status(owner.get(PATH + q)["endpoint"]["gpuRequests"][0]["gprId"])["status"]
             ["provisioningStatus"] == "Provisioned", what="the GPR provisioned on the mock node")
    [item] = k1.get("/api/v1/agent/inference-endpoints")["items"]
    assert item["want"] == "present" and item["namespace"] == NS
    assert [o["kind"] for o in item["objects"]] == ["Deployment", "Service"]
    assert k2.get("/api/v1/agent/inference-endpoints")["items"] == []
    assert k2.call("POST", "/api/v1/agent/inference-endpoints", {"id": item["id"], "present": True})[0] == 404
    k1.ok("POST", "/api/v1/agent/inference-endpoints", {"id": item["id"], "present": True, "ready": True,
                                                       "readyReplicas": 1, "replicas": 1})
    assert owner.get(PATH + q)["endpoint"]["status"] == "Ready"

    # Deleting: the endpoint waits for the agent to report its objects gone, then leaves the store.
    owner.ok("DELETE", PATH, ref)
    assert owner.get(PATH + q)["endpoint"]["status"] == "Deleting"
    [item] = k1.get("/api/v1/agent/inference-endpoints")["items"]
    assert item["want"] == "absent"
    k1.ok("POST", "/api/v1/agent/inference-endpoints", {"id": item["id"], "present": False})
    assert owner.get(PATH + "/list?workspace=ws")["endpoints"] == []
    assert k1.get("/api/v1/agent/inference-endpoints")["items"] == []


def test_egsctl_lists_a_workspaces_endpoints(mock):
    """`egsctl get inference-endpoints -w ws` prints the endpoints as a table (name, status, model, cluster,
    namespace), -o json the list, a name keeps that one; without -w it is a usage error (exit 2)."""
    from test_egsctl import Ctl, USAGE
    mock.admin.ok("POST", PATH, body())
    ctl = Ctl(mock.tmp)
    ctl.ok("login", mock.egsd.url, "--key-file", os.path.join(mock.egsd.data_dir, "admin.key"), "--name", "main")
    lines = ctl.ok("get", "inference-endpoints", "-w", "ws").stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "MODEL", "CLUSTER", "NAMESPACE"]
    assert lines[1].split()[0] == "llm" and lines[1].split()[2:] == ["huggingface", "k1", NS]
    items = ctl.json("get", "ie", "-w", "ws")["items"]
    assert [e["endpointName"] for e in items] == ["llm"] and items[0]["endpoint"].startswith("http://llm.")
    assert ctl.json("get", "ie", "nope", "-w", "ws")["items"] == []
    assert ctl("get", "inference-endpoints").returncode == USAGE
    assert ctl("get", "ie", "-w", "a&b").returncode == USAGE


def test_deleting_the_workspace_takes_its_endpoints(mock):
    """Deleting a workspace forgets its endpoints: one whose objects the agent was told to apply is listed to
    the agent as absent until it reports them gone, then it leaves the store; one never offered goes at once."""
    raw = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\n"
    k1 = Api(mock.egsd.port, mock.tokens["k1"], mock.egsd.ssl_context)
    mock.admin.ok("POST", PATH, body(endpointName="early", modelSpec=None, gpuSpec=None, rawModelSpec=raw % "e"))
    [item] = k1.get("/api/v1/agent/inference-endpoints")["items"]  # offered: the agent may create it now
    mock.admin.ok("POST", PATH, body(endpointName="late", modelSpec=None, gpuSpec=None, rawModelSpec=raw % "l"))
    mock.admin.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "ws"})
    items = k1.get("/api/v1/agent/inference-endpoints")["items"]
    assert [(i["endpointName"], i["want"]) for i in items] == [("early", "absent")]
    k1.ok("POST", "/api/v1/agent/inference-endpoints", {"id": item["id"], "present": False})
    assert k1.get("/api/v1/agent/inference-endpoints")["items"] == []
    assert mock.admin.call("GET", PATH + "/list?workspace=ws")[0] == 404


def test_a_deleted_endpoint_whose_agent_is_gone_ends_released(mock):
    """Deleted while its cluster's agent is away, an endpoint shows Deleting only until that agent has been
    silent past the heartbeat timeout: then Released (a bounded end).  It stays listed to the agent as absent,
    so an agent that comes back still removes the objects, and the endpoint goes once the agent reports them
    gone."""
    raw = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"
    mock.agents["k1"].stop()  # the test plays k1's agent from here on
    k1 = Api(mock.egsd.port, mock.tokens["k1"], mock.egsd.ssl_context)
    mock.admin.ok("POST", PATH, body(modelSpec=None, gpuSpec=None, rawModelSpec=raw))
    [item] = k1.get("/api/v1/agent/inference-endpoints")["items"]  # offered: the agent may have created it
    q = PATH + "?workspace=ws&endpoint=llm&cluster=k1"
    mock.admin.ok("DELETE", PATH, {"endpoint": "llm", "workspace": "ws", "cluster": "k1"})
    assert mock.admin.get(q)["endpoint"]["status"] == "Deleting"
    mock.admin.ok("POST", "/api/v1/debug/clock", {"advance": "1m", "keepHeartbeats": False})
    assert mock.admin.get(q)["endpoint"]["status"] == "Released"
    assert [e["status"] for e in mock.admin.get(PATH + "/list?workspace=ws")["endpoints"]] == ["Released"]
    assert [(i["id"], i["want"]) for i in k1.get("/api/v1/agent/inference-endpoints")["items"]] == \
        [(item["id"], "absent")]
    k1.ok("POST", "/api/v1/agent/inference-endpoints", {"id": item["id"], "present": False})
    assert mock.admin.get(PATH + "/list?workspace=ws")["endpoints"] == []


def test_removing_a_cluster_from_the_workspace_takes_its_endpoints(mock):
    """A cluster that leaves a workspace takes the workspace's endpoints there with it at once, offered to the
    agent or not (their objects are in the slice's namespaces there, which go too); endpoints on the
    clusters it keeps stay.  Removing a cluster that an endpoint's running GPR holds is refused (409, naming
    removeClusters) and changes nothing."""
    raw = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {a: b}\n"
    api = mock.admin
    api.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "two", "clusters": ["k1", "k2"],
                                               "namespaces": ["two-ns"], "username": "u", "email": "u@example.com"})
    k1 = Api(mock.egsd.port, mock.tokens["k1"], mock.egsd.ssl_context)
    for name, cluster in (("a", "k1"), ("b", "k1"), ("c", "k2")):
        api.ok("POST", PATH, body(workspace="two", endpointName=name, clusterName=cluster, modelSpec=None,
                                  gpuSpec=None, rawModelSpec=raw % name))
    k1.get("/api/v1/agent/inference-endpoints")  # a and b offered to k1's agent
    api.ok("POST", PATH, body(workspace="two", endpointName="gpu", clusterName="k2"))
    gid = api.get(PATH + "?workspace=two&endpoint=gpu")["endpoint"]["gpuRequests"][0]["gprId"]
    wait_for(lambda: mock.status(gid)["status"]["provisioningStatus"] == "Provisioned", what="gpu's GPR")
    code, doc = api.call("PUT", "/api/v1/slice-workspace", {"workspaceName": "two", "removeClusters": ["k2"]})
    assert code == 409 and doc["error"]["data"]["field"] == "removeClusters", doc
    names = lambda: sorted(e["endpointName"] for e in api.get(PATH + "/list?workspace=two")["endpoints"])  # noqa
    assert names() == ["a", "b", "c", "gpu"]
    api.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "two", "removeClusters": ["k1"], "force": True})
    assert names() == ["c", "gpu"]
    assert [i for i in k1.get("/api/v1/agent/inference-endpoints")["items"] if i["namespace"] == "two-ns"] == []
