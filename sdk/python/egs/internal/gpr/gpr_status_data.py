"""GpuRequestData and GpuRequestStatus: a GPU provision request (GPR) as the SDK reference describes it.

Both are built from the wire GPR object of ``GET /api/v1/gpr`` and ``GET /api/v1/gpr/list``.  Their
attribute names are exactly those of the SDK reference (seed 000); keys missing on the wire become
``None`` and unknown wire keys are ignored, so a newer server does not break an older SDK.
"""

from typing import Any, Dict, List, Optional

from egs.internal.util import Record, as_list, build_fields

# (attribute, wire keys tried in order).  The CRD spelling comes second where the two differ.
_STATUS_FIELDS = (
    ("provisioning_status", ("provisioningStatus",)),
    ("failure_reason", ("failureReason",)),
    ("num_gpus_allocated", ("numGpusAllocated", "numGPUsAllocated")),
    ("start_timestamp", ("startTimestamp",)),
    ("completion_timestamp", ("completionTimestamp",)),
    ("cost", ("cost",)),
    ("nodes", ("nodes", "nodeList")),
    ("internal_state", ("internalState",)),
    ("retry_count", ("retryCount",)),
    ("delayed_count", ("delayedCount",)),
)

_DATA_FIELDS = (
    ("request_id", ("gprId",)),
    ("workspace_name", ("sliceName",)),
    ("cluster_name", ("clusterName",)),
    ("number_of_gpus", ("numberOfGPUs",)),
    ("number_of_gpu_nodes", ("numberOfGPUNodes",)),
    ("instance_type", ("instanceType",)),
    ("memory_per_gpu", ("memoryPerGPU", "memoryPerGpu")),
    ("priority", ("priority",)),
    ("gpu_sharing_mode", ("gpuSharingMode",)),
    ("estimated_start_time", ("estimatedStartTime",)),
    ("estimated_wait_time", ("estimatedWaitTime",)),
    ("exit_duration", ("exitDuration",)),
    ("early_release", ("earlyRelease",)),
    ("gpr_name", ("gprName",)),
    ("gpu_shape", ("gpuShape",)),
    ("multi_node", ("multiNode",)),
    ("dedicated_nodes", ("dedicatedNodes",)),
    ("enable_rdma", ("enableRDMA",)),
    ("enable_secondary_network", ("enableSecondaryNetwork",)),
)


class GpuRequestStatus(Record):
    """The status part of a GPU request (``status`` on the wire)."""

    _REPR_ATTRS = tuple(attr for attr, _ in _STATUS_FIELDS)

    def __init__(
        self,
        provisioning_status: Optional[str] = None,
        failure_reason: Optional[str] = None,
        num_gpus_allocated: Optional[int] = None,
        start_timestamp: Optional[str] = None,
        completion_timestamp: Optional[str] = None,
        cost: Optional[str] = None,
        nodes: Optional[List[str]] = None,
        internal_state: Optional[str] = None,
        retry_count: Optional[int] = None,
        delayed_count: Optional[int] = None,
    ):
        self.provisioning_status = provisioning_status
        self.failure_reason = failure_reason
        self.num_gpus_allocated = num_gpus_allocated
        self.start_timestamp = start_timestamp
        self.completion_timestamp = completion_timestamp
        self.cost = cost
        self.nodes = nodes
        self.internal_state = internal_state
        self.retry_count = retry_count
        self.delayed_count = delayed_count

    @classmethod
    def from_dict(cls, obj: Any) -> "GpuRequestStatus":
        """Build from the wire ``status`` object; ``None`` or a non-object gives an all-``None`` status."""
        fields = build_fields(obj, _STATUS_FIELDS)
        if fields["nodes"] is not None:
            fields["nodes"] = as_list(fields["nodes"])
        return cls(**fields)

    def to_dict(self) -> Dict[str, Any]:
        """The wire form (camelCase keys) of the attributes."""
        return {keys[0]: getattr(self, attr) for attr, keys in _STATUS_FIELDS}



class GpuRequestData(Record):
    """A GPU request including its internal states and status (SDK reference: class GpuRequestData)."""

    _REPR_ATTRS = tuple(attr for attr, _ in _DATA_FIELDS) + ("status",)

    def __init__(
        self,
        request_id: Optional[str] = None,
        workspace_name: Optional[str] = None,
        cluster_name: Optional[str] = None,
        number_of_gpus: Optional[int] = None,
        number_of_gpu_nodes: Optional[int] = None,
        instance_type: Optional[str] = None,
        memory_per_gpu: Optional[int] = None,
        priority: Optional[int] = None,
        gpu_sharing_mode: Optional[str] = None,
        estimated_start_time: Optional[str] = None,
        estimated_wait_time: Optional[str] = None,
        exit_duration: Optional[str] = None,
        early_release: Optional[bool] = None,
        gpr_name: Optional[str] = None,
        gpu_shape: Optional[str] = None,
        multi_node: Optional[bool] = None,
        dedicated_nodes: Optional[bool] = None,
        enable_rdma: Optional[bool] = None,
        enable_secondary_network: Optional[bool] = None,
        status: Optional[GpuRequestStatus] = None,
    ):
        self.request_id = request_id
        self.workspace_name = workspace_name
        self.cluster_name = cluster_name
        self.number_of_gpus = number_of_gpus
        self.number_of_gpu_nodes = number_of_gpu_nodes
        self.instance_type = instance_type
        self.memory_per_gpu = memory_per_gpu
        self.priority = priority
        self.gpu_sharing_mode = gpu_sharing_mode
        self.estimated_start_time = estimated_start_time
        self.estimated_wait_time = estimated_wait_time
        self.exit_duration = exit_duration
        self.early_release = early_release
        self.gpr_name = gpr_name
        self.gpu_shape = gpu_shape
        self.multi_node = multi_node
        self.dedicated_nodes = dedicated_nodes
        self.enable_rdma = enable_rdma
        self.enable_secondary_network = enable_secondary_network
        self.status = status if status is not None else GpuRequestStatus()

    @classmethod
    def from_dict(cls, obj: Any) -> "GpuRequestData":
        """Build from a wire GPR object.  A missing ``status`` gives an all-``None`` status object."""
        fields = build_fields(obj, _DATA_FIELDS)
        status = obj.get("status") if isinstance(obj, dict) else None
        return cls(status=GpuRequestStatus.from_dict(status), **fields)

    # Names used by the public EGS SDK for the same two fields.
    @property
    def gpr_id(self) -> Optional[str]:
        """Alias of ``request_id``."""
        return self.request_id

    @property
    def slice_name(self) -> Optional[str]:
        """Alias of ``workspace_name``."""
        return self.workspace_name

    @property
    def number_of_gp_us(self) -> Optional[int]:
        """Alias of ``number_of_gpus`` (the public SDK's spelling)."""
        return self.number_of_gpus

    def to_dict(self) -> Dict[str, Any]:
        """The wire form (camelCase keys) of the attributes, ``status`` included."""
        out = {keys[0]: getattr(self, attr) for attr, keys in _DATA_FIELDS}
        out["status"] = self.status.to_dict() if self.status is not None else None
        return out

