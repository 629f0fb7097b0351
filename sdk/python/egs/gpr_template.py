"""GPR templates: admin-defined request shapes (names and arguments of the public EGS SDK).

A GPR is created from a template with ``request_gpu(..., template_name=...)``; the workspace's template
binding must list it (egs.gpr_template_binding).  Errors raise the classes of egs.exceptions.
"""

from typing import Any, Dict, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.internal.gpr_template.data import GprTemplate, GprTemplateList

TEMPLATE_PATH = "/api/v1/gpr-template"


def _template_body(
    name: str,
    cluster_name: str,
    number_of_gpus: int,
    number_of_gpu_nodes: int,
    memory_per_gpu: Optional[int],
    gpu_shape: Optional[str],
    instance_type: Optional[str],
    exit_duration: str,
    priority: Optional[int],
    enforce_idle_timeout: bool,
    enable_eviction: bool,
    requeue_on_failure: bool,
    idle_timeout_duration: Optional[str],
) -> Dict[str, Any]:
    if enforce_idle_timeout and not idle_timeout_duration:
        raise ValueError("idle_timeout_duration is required when enforce_idle_timeout is True")
    body = {
        "name": name,
        "clusterName": cluster_name,
        "numberOfGPUs": number_of_gpus,
        "numberOfGPUNodes": number_of_gpu_nodes,
        "memoryPerGpu": memory_per_gpu,
        "gpuShape": gpu_shape or "",
        "instanceType": instance_type or "",
        "exitDuration": exit_duration,
        "priority": priority,
        "enforceIdleTimeOut": bool(enforce_idle_timeout),
        "enableEviction": bool(enable_eviction),
        "requeueOnFailure": bool(requeue_on_failure),
    }
    if idle_timeout_duration:
        body["idleTimeOutDuration"] = idle_timeout_duration
    return body


def create_gpr_template(
    name: str,
    cluster_name: str,
    gpu_per_node_count: int,
    num_gpu_nodes: int,
    memory_per_gpu: Optional[int],
    gpu_shape: Optional[str],
    instance_type: Optional[str],
    exit_duration: str,
    priority: Optional[int],
    enforce_idle_timeout: bool = False,
    enable_eviction: bool = False,
    requeue_on_failure: bool = False,
    idle_timeout_duration: Optional[str] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> str:
    """Create a GPR template (admins); returns its name.  memory_per_gpu: GB below 1024, MiB from 1024."""
    auth = get_authenticated_session(authenticated_session)
    body = _template_body(name, cluster_name, gpu_per_node_count, num_gpu_nodes, memory_per_gpu, gpu_shape,
                          instance_type, exit_duration, priority, enforce_idle_timeout, enable_eviction,
                          requeue_on_failure, idle_timeout_duration)
    data = auth.client.call("POST", TEMPLATE_PATH, body)
    return data.get("gprTemplateName", name) if isinstance(data, dict) else name


def get_gpr_template(
    gpr_template_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> GprTemplate:
    """One template (attributes of the public SDK's GetGprTemplateResponse)."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplate(auth.client.call("GET", TEMPLATE_PATH, query={"gprTemplateName": gpr_template_name}))


def list_gpr_templates(authenticated_session: Optional[AuthenticatedSession] = None) -> GprTemplateList:
    """Every template of the caller's project: a list, also available as ``.items``."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplateList.from_data(auth.client.call("GET", TEMPLATE_PATH + "/list"))


def update_gpr_template(
    name: str,
    cluster_name: str,
    number_of_gpus: int,
    instance_type: Optional[str],
    exit_duration: str,
    number_of_gpu_nodes: int,
    priority: Optional[int],
    memory_per_gpu: Optional[int],
    gpu_shape: Optional[str],
    enable_eviction: bool = False,
    requeue_on_failure: bool = False,
    enforce_idle_timeout: bool = False,
    idle_timeout_duration: Optional[str] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> GprTemplate:
    """Replace a template with these values (argument order of the public SDK); returns it as stored."""
    auth = get_authenticated_session(authenticated_session)
    body = _template_body(name, cluster_name, number_of_gpus, number_of_gpu_nodes, memory_per_gpu, gpu_shape,
                          instance_type, exit_duration, priority, enforce_idle_timeout, enable_eviction,
                          requeue_on_failure, idle_timeout_duration)
    auth.client.call("PUT", TEMPLATE_PATH, body)
    return get_gpr_template(name, auth)


def delete_gpr_template(
    gpr_template_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> None:
    """Delete a template; refused (GPR_TEMPLATE_IN_USE) while a binding lists it."""
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("DELETE", TEMPLATE_PATH, {"gprTemplateName": gpr_template_name})
