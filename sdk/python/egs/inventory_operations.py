"""Inventory operations: the GPU nodes of the pool, and what a workspace holds now."""

from typing import Any, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.internal.inventory.list_inventory_data import InventoryList, UsageList, usage_from_data


def inventory(
    workspace_name: Any = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> InventoryList:
    """The GPU nodes of the inventory (``GET /api/v1/inventory/list``).

    Returns a list of node objects with snake_case attributes (``gpu_node_name``, ``gpu_shape``,
    ``instance_type``, ``cluster_name``, ``memory``, ``gpu_count``, ``available_gpus``, ``node_health``,
    ``gpu_node_status``, ...); ``.managed_nodes`` is the same list and ``.unmanaged_nodes`` holds the
    unmanaged ones.  With ``workspace_name`` the request carries ``?sliceName=`` so that the server may
    answer for that workspace.  Both call styles work: ``inventory(None, auth)`` (SDK reference) and
    ``inventory(auth)`` (public EGS SDK, whose only argument is the session).
    """
    if isinstance(workspace_name, AuthenticatedSession) and authenticated_session is None:
        workspace_name, authenticated_session = None, workspace_name
    auth = get_authenticated_session(authenticated_session)
    query = {"sliceName": workspace_name} if workspace_name else None
    return InventoryList.from_data(auth.client.call("GET", "/api/v1/inventory/list", query=query))


def workspace_inventory(
    workspace_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> UsageList:
    """The GPUs currently allocated to a workspace (``GET /api/v1/inventory?sliceName=W``): a list of
    InventoryUsage, also available as ``.workspace_inventory`` (the public SDK's attribute)."""
    auth = get_authenticated_session(authenticated_session)
    data = auth.client.call("GET", "/api/v1/inventory", query={"sliceName": workspace_name})
    return usage_from_data(data)
