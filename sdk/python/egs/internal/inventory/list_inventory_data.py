"""Inventory nodes (``GET /api/v1/inventory/list``) and workspace usage (``GET /api/v1/inventory``).

Each wire key becomes a snake_case attribute (``availableGPUs`` -> ``available_gpus``).  The fields the
SDK documents are always present (``None`` when the server left them out); any other key the server adds
is kept too, under its snake_case name, so nothing the server says is lost.
"""

import datetime
from typing import Any, Iterable, List, Tuple

from egs.internal.util import Record, as_list, first_of, format_repr, snake_case

_NODE_FIELDS = (
    ("gpu_node_name", ("gpuNodeName", "nodeName", "name")),
    ("gpu_shape", ("gpuShape", "gpuModelName")),
    ("gpu_model_name", ("gpuModelName", "gpuShape")),
    ("instance_type", ("instanceType",)),
    ("cluster_name", ("clusterName",)),
    ("memory", ("memory",)),
    ("gpu_count", ("gpuCount",)),
    ("available_gpus", ("availableGPUs", "availableGpus")),
    ("gpu_temp_threshold", ("gpuTempThreshold",)),
    ("gpu_power_threshold", ("gpuPowerThreshold",)),
    ("cloud_provider", ("cloudProvider",)),
    ("region", ("region",)),
    ("node_health", ("nodeHealth",)),
    ("gpu_node_status", ("gpuNodeStatus", "gpuNodeState")),
    ("gpu_slicing_profile", ("gpuSlicingProfile",)),
)

_ALLOCATION_FIELDS = (
    ("gpr_name", ("gprName",)),
    ("slice_name", ("sliceName",)),
    ("total_gpus_allocated", ("totalGPUsAllocated", "totalGpusAllocated")),
    ("allocation_timestamp", ("allocationTimeStamp", "allocationTimestamp")),
)

_USAGE_FIELDS = (
    ("node_name", ("nodeName",)),
    ("instance_type", ("instanceType",)),
    ("gpu_shape", ("gpuShape",)),
    ("memory", ("memory",)),
    ("total_gpus", ("totalGpus", "totalGPUs")),
    ("memory_per_gpu", ("memoryPerGpu", "memoryPerGPU")),
    ("gpu_per_node", ("gpuPerNode",)),
    ("total_gpu_nodes", ("totalGpuNodes",)),
    ("cluster_name", ("clusterName",)),
)


class _WireObject(Record):
    """Attributes from a wire object: the documented ``_FIELDS`` first, then every other key."""

    _FIELDS = ()  # type: Tuple[Tuple[str, Tuple[str, ...]], ...]

    def __init__(self, obj: Any = None):
        if not isinstance(obj, dict):
            obj = {}
        used = set()
        for attr, keys in self._FIELDS:
            setattr(self, attr, first_of(obj, keys))
            used.update(keys)
        for key, value in obj.items():
            if key in used or not isinstance(key, str):
                continue
            attr = snake_case(key)
            if attr and attr.isidentifier() and not hasattr(self, attr):
                setattr(self, attr, value)

    def __repr__(self) -> str:  # over each kind's _FIELDS
        return format_repr(self, [attr for attr, _ in self._FIELDS])


class AllocationTime(str):
    """When a node was allocated: the RFC 3339 text (a str, as the API document and seed 000 show it),
    with ``.seconds`` and ``.nanos`` as the public SDK reads it (a protobuf Timestamp)."""

    def __new__(cls, value: Any) -> "AllocationTime":
        seconds, nanos = None, 0
        if isinstance(value, dict):
            seconds, nanos = value.get("seconds"), value.get("nanos") or 0
            text = ""
            if isinstance(seconds, (int, float)):
                when = datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc)
                text = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        else:
            text = str(value)
            try:
                when = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
                seconds = int(when.replace(tzinfo=datetime.timezone.utc).timestamp())
            except ValueError:
                pass
        obj = super().__new__(cls, text)
        obj.seconds, obj.nanos = seconds, nanos
        return obj


class Allocation(_WireObject):
    """One GPR holding GPUs of a node: gpr_name, slice_name, total_gpus_allocated, allocation_timestamp
    (an :class:`AllocationTime`)."""

    _FIELDS = _ALLOCATION_FIELDS

    def __init__(self, obj: Any = None):
        super().__init__(obj)
        if self.allocation_timestamp is not None:
            self.allocation_timestamp = AllocationTime(self.allocation_timestamp)


class Inventory(_WireObject):
    """One GPU node of the inventory (name kept from the public EGS SDK; alias ``InventoryNode``).

    Attributes: gpu_node_name, gpu_shape, gpu_model_name, instance_type, cluster_name, memory (MiB per
    GPU), gpu_count, available_gpus, gpu_temp_threshold, gpu_power_threshold, cloud_provider, region,
    node_health, gpu_node_status, allocation (list of :class:`Allocation`), plus any other wire key in
    snake_case.
    """

    _FIELDS = _NODE_FIELDS

    def __init__(self, obj: Any = None):
        super().__init__(obj)
        raw = obj.get("allocation") if isinstance(obj, dict) else None
        self.allocation = [Allocation(a) for a in as_list(raw)]

    @property
    def availableGPUs(self) -> Any:  # noqa: N802  (the public SDK's attribute name)
        return self.available_gpus


InventoryNode = Inventory


class InventoryUsage(_WireObject):
    """GPUs of the inventory currently allocated to a workspace (``GET /api/v1/inventory?sliceName=``)."""

    _FIELDS = _USAGE_FIELDS


class InventoryList(list):
    """The list of managed inventory nodes, with both groups also available as attributes.

    ``managed_nodes`` is the list itself (``data.managedNodes``, or ``data.items`` from servers that
    answer that way); ``unmanaged_nodes`` holds ``data.unmanagedNodes``.
    """

    def __init__(self, managed: Iterable[Inventory] = (), unmanaged: Iterable[Inventory] = ()):
        super().__init__(managed)
        self.unmanaged_nodes = list(unmanaged)  # type: List[Inventory]

    @property
    def managed_nodes(self) -> List[Inventory]:
        return list(self)

    @classmethod
    def from_data(cls, data: Any) -> "InventoryList":
        if not isinstance(data, dict):
            data = {}
        managed = data.get("managedNodes")
        if managed is None:
            managed = data.get("items")
        return cls(
            [Inventory(n) for n in as_list(managed)],
            [Inventory(n) for n in as_list(data.get("unmanagedNodes"))],
        )


class UsageList(list):
    """What a workspace holds: :class:`InventoryUsage` objects; ``.workspace_inventory`` gives the same
    list (the public SDK's attribute)."""

    @property
    def workspace_inventory(self) -> List[InventoryUsage]:
        return list(self)


def usage_from_data(data: Any) -> UsageList:
    """``data.items`` of ``GET /api/v1/inventory?sliceName=W`` as :class:`InventoryUsage` objects."""
    items = data.get("items") if isinstance(data, dict) else None
    return UsageList(InventoryUsage(i) for i in as_list(items))

