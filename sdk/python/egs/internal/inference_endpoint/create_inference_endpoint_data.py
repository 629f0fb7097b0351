"""Request pieces of an inference endpoint, at the import path and with the wire names of the public SDK."""

from typing import Any, Dict, List, Optional


class Resources(object):
    def __init__(self, cpu: str, memory: str):
        self.cpu = cpu
        self.memory = memory


class ModelSpec(object):
    def __init__(
        self,
        model_format_name: Optional[str] = None,
        storage_uri: Optional[str] = None,
        args: Optional[List[str]] = None,
        secret: Optional[Dict[str, Any]] = None,
        resources: Optional[Resources] = None,
    ):
        self.modelName = model_format_name
        self.storageURI = storage_uri
        self.args = args
        self.secret = secret
        self.resources = resources


class GpuSpec(object):
    def __init__(self, gpu_shape: str, instance_type: str, memory_per_gpu: int, number_of_gpu_nodes: int,
                 number_of_gpus: int, exit_duration: str, priority: int):
        self.gpuShape = gpu_shape
        self.instanceType = instance_type
        self.memoryPerGPU = memory_per_gpu
        self.numberOfGPUNodes = number_of_gpu_nodes
        self.numberOfGPUs = number_of_gpus
        self.exitDuration = exit_duration
        self.priority = priority


def to_wire(obj: Any) -> Any:
    """Plain JSON of a spec object (its attributes, recursively)."""
    if isinstance(obj, (list, tuple)):
        return [to_wire(o) for o in obj]
    if isinstance(obj, dict):
        return {k: to_wire(v) for k, v in obj.items()}
    if hasattr(obj, "__dict__"):
        return {k: to_wire(v) for k, v in vars(obj).items()}
    return obj
