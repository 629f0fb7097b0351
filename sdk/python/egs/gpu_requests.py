"""GPU provision request (GPR) operations: the SDK reference's (seed 000) and the public EGS SDK's, plus get_wait_time."""

from typing import Any, Dict, List, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.exceptions import UnhandledException
from egs.internal.gpr.gpr_status_data import GpuRequestData
from egs.internal.util import as_list

GPR_PATH = "/api/v1/gpr"


def _gpr_body(
    request_name: Optional[str],
    workspace_name: str,
    cluster_name: Optional[str],
    node_count: Optional[int],
    gpu_per_node_count: Optional[float],
    memory_per_gpu: Optional[int],
    instance_type: Optional[str],
    gpu_shape: Optional[str],
    exit_duration: Optional[str],
    priority: Optional[int],
    options: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The request body; ``options`` holds the keyword-only extras of :func:`request_gpu`."""
    o = options or {}
    if o.get("template_name"):  # the template fixes the shape: send only what names the GPR
        body = {"templateName": o["template_name"], "sliceName": workspace_name}
        if request_name:
            body["gprName"] = request_name
        return body
    missing = [n for n, v in (("request_name", request_name), ("node_count", node_count),
                              ("gpu_per_node_count", gpu_per_node_count), ("exit_duration", exit_duration)) if v is None]
    if missing:
        raise TypeError("request_gpu() needs %s (or template_name)" % ", ".join(missing))
    if o.get("enforce_idle_timeout") and not o.get("idle_timeout_duration"):
        raise ValueError("idle_timeout_duration is required when enforce_idle_timeout is True")
    body = {
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
        "idleTimeOutDuration": o.get("idle_timeout_duration") or "",
        "enforceIdleTimeOut": bool(o.get("enforce_idle_timeout")),
        "enableEviction": o.get("enable_eviction"),
        "requeueOnFailure": o.get("requeue_on_failure"),
        "preferredClusters": list(o["preferred_clusters"]) if o.get("preferred_clusters") else None,
        "enableAutoClusterSelection": bool(o.get("enable_auto_cluster_selection")),
        "enableAutoGpuSelection": bool(o.get("enable_auto_gpu_selection")),
    }
    if o.get("gpu_sharing_mode"):
        body["gpuSharingMode"] = o["gpu_sharing_mode"]
    return body


def _create(auth: AuthenticatedSession, body: Dict[str, Any]) -> str:
    data = auth.client.call("POST", GPR_PATH, body)
    gpr_id = data.get("gprId") if isinstance(data, dict) else None
    if not isinstance(gpr_id, str) or not gpr_id:
        raise UnhandledException("the server accepted the GPU request but returned no data.gprId")
    return gpr_id


def request_gpu(
    request_name: Optional[str] = None,
    workspace_name: Optional[str] = None,
    cluster_name: Optional[str] = None,
    node_count: Optional[int] = None,
    gpu_per_node_count: Optional[float] = None,
    memory_per_gpu: Optional[int] = None,
    instance_type: Optional[str] = None,
    gpu_shape: Optional[str] = None,
    exit_duration: Optional[str] = None,
    priority: Optional[int] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
    *,
    idle_timeout_duration: Optional[str] = None,
    enforce_idle_timeout: bool = False,
    enable_auto_gpu_selection: bool = False,
    enable_auto_cluster_selection: bool = False,
    requeue_on_failure: Optional[bool] = None,
    enable_eviction: Optional[bool] = None,
    preferred_clusters: Optional[List[str]] = None,
    gpu_sharing_mode: Optional[str] = None,
    template_name: Optional[str] = None,
) -> str:
    """Request ``node_count`` nodes with ``gpu_per_node_count`` GPUs each; returns the GPR id.

    Takes the positional arguments of the SDK reference (seed 000) and the keyword arguments of the
    public EGS SDK (``request_gpu(request_name=..., workspace_name=..., node_count=..., ...,
    idle_timeout_duration=..., enforce_idle_timeout=...)``).  ``memory_per_gpu`` is the minimum memory
    per GPU (below 1024: GB, from 1024 up: MiB), ``exit_duration`` a duration like ``"0d6h0m"``,
    ``priority`` 1-100 low, 101-200 medium, 201-300 high (server default 101).  With
    ``template_name`` the GPR takes that GPR template's shape (egs.gpr_template), which the
    workspace's template binding must allow; then only request_name and workspace_name count.
    Raises Unauthorized, BadParameters, Unsatisfiable, WorkspaceNotFound (see egs.exceptions).
    """
    auth = get_authenticated_session(authenticated_session)
    if not workspace_name:
        raise TypeError("request_gpu() needs workspace_name")
    options = dict(idle_timeout_duration=idle_timeout_duration, enforce_idle_timeout=enforce_idle_timeout,
                   enable_auto_gpu_selection=enable_auto_gpu_selection,
                   enable_auto_cluster_selection=enable_auto_cluster_selection,
                   requeue_on_failure=requeue_on_failure, enable_eviction=enable_eviction,
                   preferred_clusters=preferred_clusters, gpu_sharing_mode=gpu_sharing_mode,
                   template_name=template_name)
    body = _gpr_body(request_name, workspace_name, cluster_name, node_count, gpu_per_node_count,
                     memory_per_gpu, instance_type, gpu_shape, exit_duration, priority, options)
    return _create(auth, body)


def request_gpu_with_auto_selection(*, authenticated_session: Optional[AuthenticatedSession] = None,
                                    **kwargs: Any) -> str:
    """request_gpu with the cluster and the GPU shape chosen by the server (public EGS SDK)."""
    return request_gpu(authenticated_session=authenticated_session, cluster_name="", instance_type="",
                       gpu_shape="", enable_auto_cluster_selection=True, enable_auto_gpu_selection=True,
                       **kwargs)


def request_gpu_with_auto_gpu_selection(*, preferred_clusters: List[str],
                                        authenticated_session: Optional[AuthenticatedSession] = None,
                                        **kwargs: Any) -> str:
    """request_gpu on one of ``preferred_clusters``, with the GPU shape chosen by the server."""
    return request_gpu(authenticated_session=authenticated_session, cluster_name="", instance_type="",
                       gpu_shape="", preferred_clusters=preferred_clusters, enable_auto_gpu_selection=True,
                       **kwargs)


def request_gpu_with_auto_cluster(*, instance_type: str, gpu_shape: str,
                                  authenticated_session: Optional[AuthenticatedSession] = None,
                                  **kwargs: Any) -> str:
    """request_gpu for this instance type and GPU shape on a cluster the server chooses."""
    return request_gpu(authenticated_session=authenticated_session, cluster_name="", instance_type=instance_type,
                       gpu_shape=gpu_shape, enable_auto_cluster_selection=True, **kwargs)


def request_gpu_with_manual_selection(*, cluster_name: str, instance_type: str, gpu_shape: str,
                                      authenticated_session: Optional[AuthenticatedSession] = None,
                                      **kwargs: Any) -> str:
    """request_gpu with the cluster, instance type and GPU shape all given."""
    return request_gpu(authenticated_session=authenticated_session, cluster_name=cluster_name,
                       instance_type=instance_type, gpu_shape=gpu_shape, preferred_clusters=[cluster_name],
                       **kwargs)


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
    new_prority: Optional[int] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
    *,
    new_priority: Optional[int] = None,
) -> None:
    """Change the priority of a queued GPU request.  Raises GpuAlreadyProvisioned once provisioned.

    The priority is ``new_prority`` (spelled as in the SDK reference) or ``new_priority`` (the public
    EGS SDK's keyword).
    """
    if (new_prority is None) == (new_priority is None):
        raise TypeError("give the new priority once: new_prority (SDK reference) or new_priority")
    auth = get_authenticated_session(authenticated_session)
    value = new_priority if new_priority is not None else new_prority
    auth.client.call("PUT", GPR_PATH, {"gprId": request_id, "priority": value})


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


class GpuRequestList(list):
    """The GPU requests of a workspace; ``.items`` gives the same list (the public SDK's shape)."""

    @property
    def items(self) -> List[GpuRequestData]:
        return list(self)


def gpu_request_status_for_workspace(
    workspace_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> GpuRequestList:
    """Every GPU request of the workspace (a list, also ``.items``).  Raises WorkspaceNotFound."""
    auth = get_authenticated_session(authenticated_session)
    data = auth.client.call("GET", GPR_PATH + "/list", query={"sliceName": workspace_name})
    items = data.get("items") if isinstance(data, dict) else None
    return GpuRequestList(GpuRequestData.from_dict(item) for item in as_list(items))
