"""GPR template bindings: which templates a workspace may use per cluster, and the default there.

Names and arguments of the public EGS SDK; a binding is named after its workspace.  ``clusters`` is a
list of dicts ``{"clusterName", "defaultTemplateName", "templates"}`` (or GprTemplateBindingCluster).
"""

from typing import Any, List, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.internal.gpr_template.data import GprTemplateBinding, GprTemplateBindingList, clusters_wire

BINDING_PATH = "/api/v1/gpr-template-binding"


def _body(workspace_name: str, clusters: List[Any], enable_auto_gpr: bool) -> dict:
    return {"workspaceName": workspace_name, "clusters": clusters_wire(clusters),
            "enableAutoGPR": bool(enable_auto_gpr)}


def create_gpr_template_binding(
    workspace_name: str,
    clusters: List[Any],
    enable_auto_gpr: bool = False,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> GprTemplateBinding:
    """Bind templates to a workspace (admins); returns the binding (name, namespace, clusters, ...)."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplateBinding(auth.client.call("POST", BINDING_PATH, _body(workspace_name, clusters, enable_auto_gpr)))


def get_gpr_template_binding(
    binding_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> GprTemplateBinding:
    """The binding of workspace ``binding_name``, with each template's status."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplateBinding(auth.client.call("GET", BINDING_PATH, query={"gprTemplateBindingName": binding_name}))


def list_gpr_template_bindings(
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> GprTemplateBindingList:
    """The bindings of the workspaces the caller sees: a list, also ``.templateBindings``."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplateBindingList.from_data(auth.client.call("GET", BINDING_PATH + "/list"))


def update_gpr_template_binding(
    workspace_name: str,
    clusters: List[Any],
    enable_auto_gpr: bool = False,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> GprTemplateBinding:
    """Replace a workspace's binding; returns it."""
    auth = get_authenticated_session(authenticated_session)
    return GprTemplateBinding(auth.client.call("PUT", BINDING_PATH, _body(workspace_name, clusters, enable_auto_gpr)))


def delete_gpr_template_binding(
    binding_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> None:
    """Delete the binding of workspace ``binding_name``."""
    auth = get_authenticated_session(authenticated_session)
    auth.client.call("DELETE", BINDING_PATH, {"gprTemplateBindingName": binding_name})
