"""POST /api/v1/gpr reads every field a body gives, and only those (api_gpr.c's body mask): a create with
all 23 request fields keeps each, the SDK's spellings (requestName, memoryPerGpu) too; gprId,
earlyRelease and unknown keys are refused by name with nothing stored; an update changes exactly the
fields it gives.  The create's and update's replies, written without building JSON
(egs_reply_ok_str), are the envelope's exact bytes, and the audit log names the GPR."""
import json
import re

from conftest import H100

FULL = {"requestName": "full", "sliceName": "w", "clusterName": "c1", "numberOfGPUs": 2, "numberOfGPUNodes": 1,
        "instanceType": "p5.48xlarge", "gpuShape": "NVIDIA-H100-80GB-HBM3", "memoryPerGpu": 40000,
        "exitDuration": "3h", "priority": 7, "idleTimeOutDuration": "20m", "enforceIdleTimeOut": True,
        "enableEviction": True, "requeueOnFailure": True, "preferredClusters": ["c1"],
        "enableAutoClusterSelection": True, "enableAutoGpuSelection": True, "dedicatedNodes": True,
        "enableRDMA": True, "enableSecondaryNetwork": True, "gpuSharingMode": "Dedicated"}

KEPT = {"gprName": "full", "sliceName": "w", "clusterName": "c1", "numberOfGPUs": 2, "numberOfGPUNodes": 1,
        "instanceType": "p5.48xlarge", "gpuShape": "NVIDIA-H100-80GB-HBM3", "memoryPerGPU": 40000,
        "memoryPerGpu": 40000, "exitDuration": "3h0m0s", "priority": 7, "idleTimeOutDuration": "0h20m0s",
        "enforceIdleTimeOut": True, "enableEviction": True, "requeueOnFailure": True, "preferredClusters": ["c1"],
        "enableAutoClusterSelection": True, "enableAutoGpuSelection": True, "dedicatedNodes": True,
        "enableRDMA": True, "enableSecondaryNetwork": True, "gpuSharingMode": "Dedicated"}


def kept(status):
    return {k: status[k] for k in KEPT}


def test_every_field_given_is_kept_and_only_given_ones_change(cluster):
    cluster.add_cluster("c1", [("n1", H100)])
    cluster.workspace("w", ["c1"])
    # The node's 8 GPUs taken, the full request waits: editable.
    cluster.wait_state(cluster.gpr(sliceName="w", numberOfGPUs=8), "Provisioned")
    g = cluster.admin.ok("POST", "/api/v1/gpr", FULL)["gprId"]
    assert kept(cluster.status(g)) == KEPT
    # Defaults where a body gives nothing.
    plain = cluster.status(cluster.gpr(sliceName="w"))
    assert (plain["priority"], plain["idleTimeOutDuration"], plain["enableRDMA"], plain["preferredClusters"],
            plain["instanceType"], plain["gpuShape"]) == (101, "", False, [], "", "")
    # An update changes the fields it gives and no other.
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "exitDuration": "5h", "enableRDMA": False})
    assert kept(cluster.status(g)) == dict(KEPT, exitDuration="5h0m0s", enableRDMA=False)
    cluster.admin.ok("PUT", "/api/v1/gpr", {"gprId": g, "priority": 9, "memoryPerGPU": 20000})
    assert kept(cluster.status(g)) == dict(KEPT, exitDuration="5h0m0s", enableRDMA=False, priority=9,
                                           memoryPerGPU=20000, memoryPerGpu=20000)


def test_create_refuses_ids_and_unknown_keys_by_name(cluster):
    cluster.add_cluster("c1", [("n1", H100)])
    cluster.workspace("w", ["c1"])
    body = {"gprName": "x", "sliceName": "w", "numberOfGPUs": 1, "numberOfGPUNodes": 1, "exitDuration": "1h"}
    for extra, field in (({"gprId": "gpr-00000001-0000"}, "gprId"), ({"earlyRelease": True}, "earlyRelease"),
                         ({"gprId": "gpr-00000001-0000", "earlyRelease": True}, "gprId"),
                         ({"bogusField": 1}, "bogusField"), ({"priority": 5, "numberofgpus": 2}, "numberofgpus")):
        status, doc = cluster.admin.call("POST", "/api/v1/gpr", dict(body, **extra))
        assert status == 422, (extra, doc)
        assert doc["error"]["data"]["field"] == field, (extra, doc)
    # A required field left out is still named, whatever else the body has.
    for missing in ("sliceName", "numberOfGPUNodes", "exitDuration", "gprName"):
        status, doc = cluster.admin.call("POST", "/api/v1/gpr", {k: v for k, v in body.items() if k != missing})
        assert status == 422 and doc["error"]["data"]["field"] == missing, (missing, doc)
    assert cluster.admin.get("/api/v1/gpr/list")["items"] == []


def test_replies_are_the_envelope_bytes_and_audited(cluster):
    cluster.add_cluster("c1", [("n1", H100)])
    cluster.workspace("w", ["c1"])
    body = {"gprName": "x", "sliceName": "w", "numberOfGPUs": 8, "numberOfGPUNodes": 1, "exitDuration": "1h"}
    ids = []
    for _ in range(2):
        status, data, resp = cluster.admin.raw("POST", "/api/v1/gpr", body)
        gid = json.loads(data)["data"]["gprId"]
        assert status == 200 and re.fullmatch(r"gpr-[0-9a-f]{8}-[0-9a-f]{4}", gid)
        assert data == b'{"statusCode":200,"status":"OK","message":"Success","data":{"gprId":"%s"}}' % gid.encode()
        assert resp.getheader("Content-Type") == "application/json"
        ids.append(gid)
    status, data, _ = cluster.admin.raw("PUT", "/api/v1/gpr", {"gprId": ids[1], "priority": 50})
    assert (status, data) == (200, b'{"statusCode":200,"status":"OK","message":"Success","data":{"gprId":"%s"}}'
                              % ids[1].encode())
    assert cluster.status(ids[1])["priority"] == 50
    audit = cluster.admin.get("/api/v1/audit")["items"]
    got = [(e["method"], e["target"], e["status"], e["errorKey"]) for e in audit if e["route"] == "/api/v1/gpr"]
    assert got == [("POST", ids[0], 200, ""), ("POST", ids[1], 200, ""), ("PUT", ids[1], 200, "")]
