"""Slice workspace operations."""

from typing import List, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.internal.workspace.list_workspaces_data import ListWorkspacesResponse

WORKSPACE_PATH = "/api/v1/slice-workspace"


def create_workspace(
    workspace_name: str,
    clusters: List[str],
    namespaces: List[str],
    username: str,
    email: str,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> str:
    """Create a workspace on ``clusters`` with ``namespaces``; returns its name.

    Raises WorkspaceAlreadyExists, BadParameters (e.g. no cluster), Unauthorized.
    """
    auth = get_authenticated_session(authenticated_session)
    body = {
        "workspaceName": workspace_name,
        "clusters": list(clusters) if clusters is not None else [],
        "namespaces": list(namespaces) if namespaces is not None else [],
        "username": username,
        "email": email,
    }
    data = auth.client.call("POST", WORKSPACE_PATH, body)
    name = data.get("workspaceName") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else workspace_name


def delete_workspace(
    workspace_name: str, authenticated_session: Optional[AuthenticatedSession] = None, force: bool = False
) -> None:
    """Delete a workspace.  Raises WorkspaceNotFound for an unknown name.

    A workspace whose slice namespaces still run pods is refused (409) unless ``force`` is true: then
    the namespaces, and the pods in them, are removed too (docs/kubernetes.md, "Slice access").
    """
    auth = get_authenticated_session(authenticated_session)
    body = {"workspaceName": workspace_name}
    if force:
        body["force"] = True
    auth.client.call("DELETE", WORKSPACE_PATH, body)


def list_workspaces(
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> ListWorkspacesResponse:
    """The workspaces this key may see: a list of Workspace (also available as ``.workspaces``)."""
    auth = get_authenticated_session(authenticated_session)
    return ListWorkspacesResponse.from_data(auth.client.call("GET", WORKSPACE_PATH + "/list"))


def get_workspace_kubeconfig(
    workspace_name: str,
    cluster_name: str,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Optional[str]:
    """The kubeconfig (YAML text) scoped to the workspace's namespaces on ``cluster_name``."""
    auth = get_authenticated_session(authenticated_session)
    data = auth.client.call(
        "POST",
        WORKSPACE_PATH + "/kube-config",
        {"workspaceName": workspace_name, "clusterName": cluster_name},
    )
    return data.get("kubeConfig") if isinstance(data, dict) else None


def regenerate_workspace_kubeconfig(
    workspace_name: str,
    cluster_name: Optional[str] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> List[dict]:
    """Cut off every kubeconfig of the workspace handed out so far, on ``cluster_name`` or (None) on all
    of its clusters: egsd drops the stored tokens and each cluster's agent recreates the slice's
    ServiceAccount, so every token minted for it stops working.  Fetch the new kubeconfig with
    ``get_workspace_kubeconfig`` once the agent reported it (until then it raises ``UnhandledException``
    with ``error_key == "KUBECONFIG_NOT_READY"``).  Returns one dict per cluster:
    ``{"clusterName", "generation", "agentMintsTokens"}``.  Admins and the workspace's owners may.
    """
    auth = get_authenticated_session(authenticated_session)
    body = {"workspaceName": workspace_name}
    if cluster_name is not None:
        body["clusterName"] = cluster_name
    data = auth.client.call("POST", WORKSPACE_PATH + "/kube-config/regenerate", body)
    clusters = data.get("clusters") if isinstance(data, dict) else None
    return list(clusters) if isinstance(clusters, list) else []
