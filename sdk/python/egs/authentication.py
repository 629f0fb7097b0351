"""egs.authenticate: exchange an API key for a session with an EGS controller."""

import ssl
from typing import Optional

from egs.authenticated_session import AuthenticatedSession
from egs.internal.client.egs_core_apis_client import DEFAULT_TIMEOUT, EgsCoreApisClient


def authenticate(
    endpoint: str,
    api_key: Optional[str] = None,
    sdk_default: bool = True,
    access_token: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    ssl_context: Optional[ssl.SSLContext] = None,
    ca_file: Optional[str] = None,
) -> AuthenticatedSession:
    """Authenticate with the EGS controller at ``endpoint`` and return the session.

    The API key is exchanged for a bearer token right away (``POST /api/v1/auth``), so a wrong or
    expired key raises :class:`~egs.exceptions.Unauthorized` here rather than at the first operation.
    The token is cached and renewed by the session when it expires.

    Args:
        endpoint: the controller URL, e.g. ``https://egs.example.com`` (a path prefix is kept).
        api_key: the API key.
        sdk_default: make this session the SDK default, used by operations given
            ``authenticated_session=None``.
        access_token: instead of an API key, an existing bearer token (it cannot be renewed).
        timeout: seconds to wait for the server on each request.
        ssl_context: for ``https`` endpoints, a custom :class:`ssl.SSLContext` (e.g. a private CA);
            the default verifies certificates against the system store.
        ca_file: for ``https`` endpoints, a PEM file of the CA(s) to trust instead of the system store
            (e.g. the certificate egsd serves with ``--tls-cert``); certificates and host names are
            still verified.  Not together with ``ssl_context``.
    """
    if ca_file is not None:
        if ssl_context is not None:
            raise ValueError("give either ssl_context or ca_file, not both")
        ssl_context = ssl.create_default_context(cafile=ca_file)
    client = EgsCoreApisClient(
        endpoint,
        api_key=api_key,
        access_token=None if api_key else access_token,
        timeout=timeout,
        ssl_context=ssl_context,
    )
    if api_key:
        client.authenticate()
    return AuthenticatedSession(client, sdk_default)
