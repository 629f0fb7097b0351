"""GPR templates and template bindings as the SDK returns them.

Attribute names follow the public EGS SDK's classes (``GetGprTemplateResponse``,
``GetGprTemplateBindingResponse``, ...), so code written for it reads the same attributes here; the
binding's cluster entries keep that SDK's camelCase attributes (``clusterName``, ``templates``...) and
also answer to snake_case names.
"""

from typing import Any, Dict, List, Optional

from egs.internal.util import Record, as_list

_TEMPLATE_FIELDS = (
    ("name", "name"),
    ("cluster_name", "clusterName"),
    ("number_of_gpus", "numberOfGPUs"),
    ("number_of_gpu_nodes", "numberOfGPUNodes"),
    ("memory_per_gpu", "memoryPerGpu"),
    ("gpu_shape", "gpuShape"),
    ("instance_type", "instanceType"),
    ("exit_duration", "exitDuration"),
    ("priority", "priority"),
    ("enforce_idle_timeout", "enforceIdleTimeOut"),
    ("enable_eviction", "enableEviction"),
    ("requeue_on_failure", "requeueOnFailure"),
    ("idle_timeout_duration", "idleTimeOutDuration"),
    ("project_name", "projectName"),
)


class GprTemplate(Record):
    """One GPR template (the public SDK's ``GetGprTemplateResponse``); memory_per_gpu is in MiB."""

    _REPR_ATTRS = tuple(attr for attr, _ in _TEMPLATE_FIELDS)

    def __init__(self, obj: Any = None):
        if not isinstance(obj, dict):
            obj = {}
        for attr, key in _TEMPLATE_FIELDS:
            setattr(self, attr, obj.get(key))



class GprTemplateList(list):
    """The list of :class:`GprTemplate`; ``.items`` gives the same list (the public SDK's shape)."""

    @property
    def items(self) -> List[GprTemplate]:
        return list(self)

    @classmethod
    def from_data(cls, data: Any) -> "GprTemplateList":
        items = data.get("items") if isinstance(data, dict) else None
        return cls(GprTemplate(t) for t in as_list(items))


class GprTemplateBindingCluster(Record):
    """One cluster of a binding: its templates, the default among them and their status."""

    _REPR_ATTRS = ("clusterName", "defaultTemplateName", "templates")

    def __init__(
        self,
        cluster_name: Optional[str] = None,
        default_template_name: Optional[str] = None,
        templates: Optional[List[str]] = None,
        default_template_status: Optional[str] = None,
        template_status: Optional[Dict[str, str]] = None,
    ):
        self.clusterName = cluster_name
        self.defaultTemplateName = default_template_name
        self.templates = list(templates or [])
        self.defaultTemplateStatus = default_template_status
        self.templateStatus = dict(template_status or {})

    cluster_name = property(lambda self: self.clusterName)
    default_template_name = property(lambda self: self.defaultTemplateName)
    default_template_status = property(lambda self: self.defaultTemplateStatus)
    template_status = property(lambda self: self.templateStatus)

    @classmethod
    def from_wire(cls, obj: Any) -> "GprTemplateBindingCluster":
        if not isinstance(obj, dict):
            obj = {}
        return cls(obj.get("clusterName"), obj.get("defaultTemplateName"), as_list(obj.get("templates")),
                   obj.get("defaultTemplateStatus"), obj.get("templateStatus") or {})

    def to_wire(self) -> Dict[str, Any]:
        """The request form: ``{clusterName, defaultTemplateName, templates}``."""
        return {"clusterName": self.clusterName, "defaultTemplateName": self.defaultTemplateName or "",
                "templates": list(self.templates)}



class GprTemplateBinding(Record):
    """A workspace's template binding: name (the workspace), namespace (create/update answers only),
    clusters (list of :class:`GprTemplateBindingCluster`) and enable_auto_gpr."""

    _REPR_ATTRS = ("name", "namespace", "clusters", "enable_auto_gpr")

    def __init__(self, obj: Any = None):
        if not isinstance(obj, dict):
            obj = {}
        self.name = obj.get("name")
        self.namespace = obj.get("namespace")
        self.clusters = [GprTemplateBindingCluster.from_wire(c) for c in as_list(obj.get("clusters"))]
        self.enable_auto_gpr = obj.get("enableAutoGPR")



class GprTemplateBindingList(list):
    """The list of :class:`GprTemplateBinding`; ``.templateBindings`` (the public SDK's name) and
    ``.template_bindings`` give the same list."""

    @property
    def templateBindings(self) -> List[GprTemplateBinding]:
        return list(self)

    template_bindings = templateBindings

    @classmethod
    def from_data(cls, data: Any) -> "GprTemplateBindingList":
        items = data.get("templateBindings") if isinstance(data, dict) else None
        return cls(GprTemplateBinding(b) for b in as_list(items))


def clusters_wire(clusters: Any) -> List[Dict[str, Any]]:
    """Binding clusters given as dicts (the public SDK's form) or GprTemplateBindingCluster, as sent."""
    out = []
    for c in clusters or []:
        if isinstance(c, GprTemplateBindingCluster):
            out.append(c.to_wire())
        elif isinstance(c, dict):
            out.append({"clusterName": c.get("clusterName", c.get("cluster_name")),
                        "defaultTemplateName": c.get("defaultTemplateName", c.get("default_template_name")) or "",
                        "templates": list(c.get("templates") or [])})
        else:
            raise TypeError("each cluster must be a dict {clusterName, defaultTemplateName, templates}")
    return out
