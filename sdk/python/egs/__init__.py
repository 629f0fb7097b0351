"""EGS Python SDK: manage GPU provision requests, workspaces and the inventory of an EGS controller.

    import egs
    auth = egs.authenticate("https://egs.example.com", "<api key>")
    gpr_id = egs.request_gpu("train", "my-ws", "worker-1", 1, 1, 81920,
                             "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", "0d6h0m", 201, auth)
    print(egs.gpu_request_status(gpr_id, auth).status.provisioning_status)

Standard library only.  Errors raise the classes of :mod:`egs.exceptions`.
"""

from egs import exceptions
from egs.authenticated_session import (
    AuthenticatedSession,
    get_authenticated_session,
    get_global_session,
    update_global_session,
)
from egs.authentication import authenticate
from egs.exceptions import (
    BadParameters,
    EgsException,
    GpuAlreadyProvisioned,
    GpuAlreadyReleased,
    GpuNotProvisioned,
    GpuRequestNotFound,
    NoDefaultSession,
    ServerError,
    ServerUnreachable,
    Unauthorized,
    Unsatisfiable,
    WorkspaceAlreadyExists,
    WorkspaceNotFound,
)
from egs.api_key import create_api_key, delete_api_key, list_api_keys
from egs.gpr_template import (
    create_gpr_template,
    delete_gpr_template,
    get_gpr_template,
    list_gpr_templates,
    update_gpr_template,
)
from egs.gpr_template_binding import (
    create_gpr_template_binding,
    delete_gpr_template_binding,
    get_gpr_template_binding,
    list_gpr_template_bindings,
    update_gpr_template_binding,
)
from egs.gpu_requests import (
    GpuRequestList,
    cancel_gpu_request,
    get_wait_time,
    gpu_request_status,
    gpu_request_status_for_workspace,
    release_gpu,
    request_gpu,
    request_gpu_with_auto_cluster,
    request_gpu_with_auto_gpu_selection,
    request_gpu_with_auto_selection,
    request_gpu_with_manual_selection,
    update_gpu_request_name,
    update_gpu_request_priority,
)
from egs.inference_endpoint import (
    create_inference_endpoint,
    create_inference_endpoint_with_custom_model_spec,
    delete_inference_endpoint,
    describe_inference_endpoint,
    list_inference_endpoint,
    list_inference_endpoints,
)
from egs.internal.gpr_template.data import (
    GprTemplate,
    GprTemplateBinding,
    GprTemplateBindingCluster,
    GprTemplateBindingList,
    GprTemplateList,
)
from egs.internal.gpr.gpr_status_data import GpuRequestData, GpuRequestStatus
from egs.internal.inventory.list_inventory_data import (
    Allocation,
    AllocationTime,
    Inventory,
    InventoryList,
    InventoryNode,
    InventoryUsage,
    UsageList,
)
from egs.internal.workspace.list_workspaces_data import ListWorkspacesResponse, Namespace, Workspace
from egs.inventory_operations import inventory, workspace_inventory
from egs.workspace import (
    create_workspace,
    delete_workspace,
    get_workspace_kubeconfig,
    list_workspaces,
    regenerate_workspace_kubeconfig,
)

__version__ = "0.1.0"

__all__ = [
    "authenticate",
    "AuthenticatedSession",
    "get_authenticated_session",
    "get_global_session",
    "update_global_session",
    "request_gpu",
    "get_wait_time",
    "cancel_gpu_request",
    "update_gpu_request_priority",
    "update_gpu_request_name",
    "release_gpu",
    "gpu_request_status",
    "gpu_request_status_for_workspace",
    "inventory",
    "workspace_inventory",
    "create_workspace",
    "delete_workspace",
    "list_workspaces",
    "get_workspace_kubeconfig",
    "regenerate_workspace_kubeconfig",
    "request_gpu_with_auto_selection",
    "request_gpu_with_auto_gpu_selection",
    "request_gpu_with_auto_cluster",
    "request_gpu_with_manual_selection",
    "create_api_key",
    "delete_api_key",
    "list_api_keys",
    "create_gpr_template",
    "get_gpr_template",
    "list_gpr_templates",
    "update_gpr_template",
    "delete_gpr_template",
    "create_gpr_template_binding",
    "get_gpr_template_binding",
    "list_gpr_template_bindings",
    "update_gpr_template_binding",
    "delete_gpr_template_binding",
    "list_inference_endpoint",
    "list_inference_endpoints",
    "create_inference_endpoint",
    "create_inference_endpoint_with_custom_model_spec",
    "describe_inference_endpoint",
    "delete_inference_endpoint",
    "GpuRequestList",
    "GprTemplate",
    "GprTemplateList",
    "GprTemplateBinding",
    "GprTemplateBindingCluster",
    "GprTemplateBindingList",
    "AllocationTime",
    "UsageList",
    "GpuRequestData",
    "GpuRequestStatus",
    "Inventory",
    "InventoryNode",
    "InventoryList",
    "InventoryUsage",
    "Allocation",
    "Workspace",
    "Namespace",
    "ListWorkspacesResponse",
    "exceptions",
    "EgsException",
    "Unauthorized",
    "NoDefaultSession",
    "GpuAlreadyProvisioned",
    "GpuAlreadyReleased",
    "GpuNotProvisioned",
    "GpuRequestNotFound",
    "WorkspaceNotFound",
    "WorkspaceAlreadyExists",
    "BadParameters",
    "Unsatisfiable",
    "ServerError",
    "ServerUnreachable",
    "__version__",
]
