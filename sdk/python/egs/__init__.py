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
from egs.gpu_requests import (
    cancel_gpu_request,
    get_wait_time,
    gpu_request_status,
    gpu_request_status_for_workspace,
    release_gpu,
    request_gpu,
    update_gpu_request_name,
    update_gpu_request_priority,
)
from egs.internal.gpr.gpr_status_data import GpuRequestData, GpuRequestStatus
from egs.internal.inventory.list_inventory_data import (
    Allocation,
    Inventory,
    InventoryList,
    InventoryNode,
    InventoryUsage,
)
from egs.internal.workspace.list_workspaces_data import ListWorkspacesResponse, Namespace, Workspace
from egs.inventory_operations import inventory, workspace_inventory
from egs.workspace import create_workspace, delete_workspace, get_workspace_kubeconfig, list_workspaces

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
