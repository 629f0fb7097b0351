"""Inference endpoints (functions of the public EGS SDK): a GPR plus a model server on its nodes
(docs/kubernetes.md, "Inference endpoints").  Each function returns the answer's data; a refusal raises
the exception of its status (BadParameters naming the field for a 422).
"""

from typing import Any, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.internal.inference_endpoint.create_inference_endpoint_data import GpuSpec, ModelSpec, to_wire

ENDPOINT_PATH = "/api/v1/inference-endpoint"


def list_inference_endpoints(
    workspace_name: str, authenticated_session: Optional[AuthenticatedSession] = None
) -> Any:
    auth = get_authenticated_session(authenticated_session)
    return auth.client.call("GET", ENDPOINT_PATH + "/list", query={"workspace": workspace_name})


list_inference_endpoint = list_inference_endpoints  # the name egs exports in the public SDK


def _create(cluster_name: str, endpoint_name: str, workspace_name: str, model_spec: Optional[ModelSpec],
            raw_model_spec: Optional[str], gpu_spec: Optional[GpuSpec],
            authenticated_session: Optional[AuthenticatedSession]) -> Any:
    auth = get_authenticated_session(authenticated_session)
    body = {"clusterName": cluster_name, "endpointName": endpoint_name, "workspace": workspace_name,
            "modelSpec": to_wire(model_spec), "rawModelSpec": raw_model_spec, "gpuSpec": to_wire(gpu_spec)}
    return auth.client.call("POST", ENDPOINT_PATH, body)


def create_inference_endpoint(
    cluster_name: str,
    endpoint_name: str,
    workspace_name: str,
    standard_model_spec: ModelSpec,
    gpu_spec: GpuSpec,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Any:
    return _create(cluster_name, endpoint_name, workspace_name, standard_model_spec, None, gpu_spec,
                   authenticated_session)


def create_inference_endpoint_with_custom_model_spec(
    cluster_name: str,
    endpoint_name: str,
    workspace_name: str,
    raw_model_spec: str,
    gpu_spec: Optional[GpuSpec],
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Any:
    return _create(cluster_name, endpoint_name, workspace_name, None, raw_model_spec, gpu_spec,
                   authenticated_session)


def describe_inference_endpoint(
    workspace_name: str,
    endpoint_name: str,
    cluster_name: str,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Any:
    auth = get_authenticated_session(authenticated_session)
    query = {"workspace": workspace_name, "endpoint": endpoint_name, "cluster": cluster_name}
    return auth.client.call("GET", ENDPOINT_PATH, query=query)


def delete_inference_endpoint(
    workspace_name: str,
    endpoint_name: str,
    cluster_name: str,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> Any:
    auth = get_authenticated_session(authenticated_session)
    body = {"endpoint": endpoint_name, "workspace": workspace_name, "cluster": cluster_name}
    return auth.client.call("DELETE", ENDPOINT_PATH, body)
