"""GPU provision request (GPR) operations of the SDK reference (seed 000), plus get_wait_time."""

from typing import Any, Dict, List, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.exceptions import UnhandledException
from egs.internal.gpr.gpr_status_data import GpuRequestData
from egs.internal.util import as_list

GPR_PATH = "/api/v1/gpr"


def _gpr_body(
    request_name: str,
    workspace_name: str,
    cluster_name: str,
    node_count: int,
    gpu_per_node_count: int,
    memory_per_gpu: int,
    instance_type: str,
    gpu_shape: str,
    exit_duration: str,
    priority: int,
) -> Dict[str, Any]:
    return {
        "gprName": request_name,
        "sliceName": workspace_name,
        "clusterName": cluster_name if cluster_name is not None else "",
        "numberOfGPUs": gpu_per_node_count,
        "numberOfGPUNodes": node_count,
        "memoryPerGpu": memory_per_gpu,
        "instanceType": instance_type if instance_type is not None else "",
        "gpuShape": gpu_shape if gpu_shape is not None else "",
        "exitDuration": exit_duration,
        "priority": priority,
        "idleTimeOutDuration": "",
        "enforceIdleTimeOut": False,
        "enableEviction": False,
        "requeueOnFailure": False,
        "preferredClusters": None,
        "enableAutoClusterSelection": False,
    }


def request_gpu(
    request_name: str,
    workspace_name: str,
    cluster_name: str,
    node_count: int,
    gpu_per_node_count: int,
    memory_per_gpu: int,
    instance_type: str,
    gpu_shape: str,
    exit_duration: str,
    priority: int,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> str:
    """Request ``node_count`` nodes with ``gpu_per_node_count`` GPUs each; returns the GPR id.

    ``memory_per_gpu`` is the minimum memory per GPU (below 1024: GB, from 1024 up: MiB),
    ``exit_duration`` a duration like ``"0d6h0m"``, ``priority`` 1-100 low, 101-200 medium, 201-300 high.
    Raises Unauthorized, BadParameters, Unsatisfiable, WorkspaceNotFound (see egs.exceptions).
    """
    auth = get_authenticated_session(authenticated_session)
    body = _gpr_body(
        request_name, workspace_name, cluster_name, node_count, gpu_per_node_count,
        memory_per_gpu, instance_type, gpu_shape, exit_duration, priority,
    )
    data = auth.client.call("POST", GPR_PATH, body)
    gpr_id = data.get("gprId") if isinstance(data, dict) else None
    if not isinstance(gpr_id, str) or not gpr_id:
        raise UnhandledException("the server accepted the GPU request but returned no data.gprId")
    return gpr_id


def get_wait_time(
    request_name: str,
    workspace_name: str,
    cluster_name: str,
    node_count: int,
    gpu_per_node_count: int,
    memory_per_gpu: int,
    instance_type: str,
    gpu_shape: str,
    exit_duration: str,
    priority: int,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Any:
    """Estimate when a GPU request like this would start (``POST /api/v1/gpr/waittime``).

    Takes the arguments of :func:`request_gpu`, creates nothing, and returns the answer's ``data`` as
    parsed JSON (the estimates per matching GPU shape and cluster, earliest first).
    """
    auth = get_authenticated_session(authenticated_session)
    body = _gpr_body(
        request_name, workspace_name, cluster_name, node_count, gpu_per_node_count,
        memory_per_gpu, instance_type, gpu_shape, exit_duration, priority,
    )
    return auth.client.call("POST", GPR_PATH + "/waittime", body)


def cancel_gpu_request(
    request_id: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> None:
    """Cancel a GPU request that is not provisioned yet.  Raises GpuAlreadyProvisioned otherwise."""
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("DELETE", GPR_PATH, {"gprId": request_id})


def update_gpu_request_priority(
    request_id: str,
    new_prority: int,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> None:
    """Change the priority of a queued GPU request.  Raises GpuAlreadyProvisioned once provisioned.

    (The parameter is spelled ``new_prority`` as in the SDK reference.)
    """
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("PUT", GPR_PATH, {"gprId": request_id, "priority": new_prority})


def update_gpu_request_name(
    request_id: str,
    new_name: str,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> None:
    """Rename a queued GPU request.  Raises GpuAlreadyProvisioned once provisioned."""
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("PUT", GPR_PATH, {"gprId": request_id, "gprName": new_name})


def release_gpu(request_id: str, authenticated_session: Optional[AuthenticatedSession] = None) -> None:
    """Release the GPUs of a provisioned request early.

    Raises GpuAlreadyReleased when already released, GpuNotProvisioned while still queued (cancel it).
    """
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("PUT", GPR_PATH, {"gprId": request_id, "earlyRelease": True})


def gpu_request_status(
    request_id: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> GpuRequestData:
    """The GPU request with its status.  Raises GpuRequestNotFound for an unknown id."""
    auth = get_authenticated_session(authenticated_session)
    data = auth.client.call("GET", GPR_PATH, query={"gprId": request_id})
    if not isinstance(data, dict):
        raise UnhandledException("the server returned no GPU request object for %r" % (request_id,))
    return GpuRequestData.from_dict(data)


def gpu_request_status_for_workspace(
    workspace_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> List[GpuRequestData]:
    """Every GPU request of the workspace.  Raises WorkspaceNotFound for an unknown workspace."""
    auth = get_authenticated_session(authenticated_session)
    data = auth.client.call("GET", GPR_PATH + "/list", query={"sliceName": workspace_name})
    items = data.get("items") if isinstance(data, dict) else None
    return [GpuRequestData.from_dict(item) for item in as_list(items)]
