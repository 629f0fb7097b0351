"""Slice workspaces as ``GET /api/v1/slice-workspace/list`` returns them."""

from typing import Any, List, Optional

from egs.internal.util import Record, as_list


class Namespace(Record):
    """A namespace of a workspace and the clusters it is on."""

    _REPR_ATTRS = ("namespace", "clusters")

    def __init__(self, namespace: Optional[str] = None, clusters: Optional[List[str]] = None):
        self.namespace = namespace
        self.clusters = clusters if clusters is not None else []

    @classmethod
    def from_wire(cls, obj: Any) -> "Namespace":
        if isinstance(obj, str):  # tolerate a bare list of names
            return cls(obj, [])
        if not isinstance(obj, dict):
            obj = {}
        return cls(obj.get("namespace"), as_list(obj.get("clusters")))



class Workspace(Record):
    """A slice workspace: name, clusters, namespaces (list of :class:`Namespace`) and slice settings."""

    _REPR_ATTRS = ("name", "clusters", "namespaces", "slice_description")

    def __init__(
        self,
        name: Optional[str] = None,
        overlay_network_deployment_mode: Optional[str] = None,
        max_clusters: Optional[int] = None,
        slice_description: Optional[str] = None,
        clusters: Optional[List[str]] = None,
        namespaces: Optional[List[Namespace]] = None,
    ):
        self.name = name
        self.overlay_network_deployment_mode = overlay_network_deployment_mode
        self.max_clusters = max_clusters
        self.slice_description = slice_description
        self.clusters = clusters if clusters is not None else []
        self.namespaces = namespaces if namespaces is not None else []

    @classmethod
    def from_wire(cls, obj: Any) -> "Workspace":
        if not isinstance(obj, dict):
            obj = {}
        return cls(
            name=obj.get("name") if obj.get("name") is not None else obj.get("workspaceName"),
            overlay_network_deployment_mode=obj.get("overlayNetworkDeploymentMode"),
            max_clusters=obj.get("maxClusters"),
            slice_description=obj.get("sliceDescription"),
            clusters=as_list(obj.get("clusters")),
            namespaces=[Namespace.from_wire(n) for n in as_list(obj.get("namespaces"))],
        )



class ListWorkspacesResponse(list):
    """The list of :class:`Workspace`; ``.workspaces`` gives the same list (the public SDK's shape)."""

    @property
    def workspaces(self) -> List[Workspace]:
        return list(self)

    @classmethod
    def from_data(cls, data: Any) -> "ListWorkspacesResponse":
        items = data.get("workspaces") if isinstance(data, dict) else None
        return cls(Workspace.from_wire(w) for w in as_list(items))
