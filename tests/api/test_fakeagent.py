"""The test doubles of tests/api against a real egsd: what the other tests lean on must hold itself.

What each test proves is in its docstring."""
from fakeagent import FakeAgent, provisioned


def test_provisioned_returns_only_once_the_gpr_is_provisioned(cluster):
    """fakeagent.provisioned() serves actions until the new GPR is Provisioned, not until it has served some:
    here the first actions it serves are the detach of a GPR released just before on the only node, while the
    new GPR still waits for that node; what it returns says Provisioned, on the node."""
    agent = FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("w", ["c1"])
    a = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, exitDuration="1h", gprName="a")
    assert a["status"]["provisioningStatus"] == "Provisioned"
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": a["gprId"], "earlyRelease": True})
    b = provisioned(cluster, agent, sliceName="w", numberOfGPUs=8, exitDuration="1h", gprName="b")
    assert b["status"]["provisioningStatus"] == "Provisioned", b["status"]
    assert agent.nodes["n1"]["attached"] == b["gprId"]
