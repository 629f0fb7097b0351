"""The zone of a Kubernetes node (topology.kubernetes.io/zone) reaches egsd's inventory, follows a change
of the label, and is stored: egsd shows it after a restart before any agent registers again."""
from conftest import wait_for
from test_k8s_backend import env, inventory  # noqa: F401  (env is a fixture)


def zones(cluster):
    return {n["gpuNodeName"]: n.get("zone") for n in inventory(cluster)["items"]}


def test_zone_is_registered_stored_and_shown(env):  # noqa: F811
    fake, cluster, start_agent = env
    fake.add_gpu_node("gpu-1", zone="us-east-1a")
    fake.add_gpu_node("gpu-2", zone="us-east-1b")
    agent = start_agent()
    wait_for(lambda: zones(cluster) == {"gpu-1": "us-east-1a", "gpu-2": "us-east-1b"}, timeout=20, what="the zones")
    n = {x["gpuNodeName"]: x for x in inventory(cluster)["items"]}["gpu-1"]
    assert n["region"] == "us-east-1"

    # The label moves: the agent registers again and egsd follows.
    code, _ = fake.patch("/api/v1/nodes/gpu-2", {"metadata": {"labels": {"topology.kubernetes.io/zone": "us-east-1c"}}})
    assert code == 200
    wait_for(lambda: zones(cluster)["gpu-2"] == "us-east-1c", timeout=20, what="the new zone")

    # Stored: after an egsd restart with the agent stopped, the inventory still has it.
    agent.stop()
    cluster.egsd.stop()
    cluster.egsd.start()
    assert zones(cluster) == {"gpu-1": "us-east-1a", "gpu-2": "us-east-1c"}

    # A zone egsd cannot take as a label is refused at registration with the field named.
    api = cluster.egsd.api(open(agent.token_file).read().strip())
    status, doc = api.call("POST", "/api/v1/agent/register", {"clusterName": "k1", "nodes": [{
        "name": "gpu-1", "instanceType": "p5.48xlarge", "gpuModel": "NVIDIA-H100-80GB-HBM3", "gpuCount": 8,
        "memoryMiB": 81559, "zone": "bad zone!"}]})
    assert status == 422 and doc["error"]["data"]["field"] == "nodes[0].zone", doc
    assert zones(cluster)["gpu-1"] == "us-east-1a"
