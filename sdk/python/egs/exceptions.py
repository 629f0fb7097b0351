"""Exceptions raised by the EGS SDK.

Every exception derives from :class:`EgsException`, which carries what the server said: the HTTP
status code, the ``errorKey`` of the error envelope, its message and its ``data``.  The class is chosen
from the envelope's ``error.errorKey`` (see :data:`ERROR_KEY_MAP`), never from the status code alone, so
that for example a 409 ``GPR_ALREADY_RELEASED`` and a 409 ``GPR_ALREADY_PROVISIONED`` surface as
different exceptions.  Only an answer without any ``errorKey`` (a proxy page, an older server) falls
back to its status code: 401/403 -> :class:`Unauthorized`, 5xx -> :class:`ServerError`.

Exceptions never hold the API key, the bearer token or request headers.
"""

from typing import Any, Optional


class EgsException(Exception):
    """Base of every exception of the SDK.

    Attributes:
        status_code: HTTP status of the answer (``None`` when no answer came back).
        error_key: the ``error.errorKey`` of the error envelope, or ``None``.
        message: the most specific human-readable message available.
        data: the ``error.data`` of the error envelope (often details of the conflict), or ``None``.
        response: the whole decoded error envelope (a dict) or ``None``.
    """

    def __init__(
        self,
        message: Optional[str] = None,
        status_code: Optional[int] = None,
        error_key: Optional[str] = None,
        data: Any = None,
        response: Any = None,
    ):
        self.message = message if message is not None else ""
        self.status_code = status_code
        self.error_key = error_key
        self.data = data
        self.response = response
        super().__init__(self.message)

    @property
    def exception(self) -> Any:
        """The decoded envelope (name kept from the public EGS SDK, where it held the response)."""
        return self.response

    def __str__(self) -> str:
        parts = []
        if self.status_code is not None:
            parts.append(str(self.status_code))
        if self.error_key:
            parts.append(self.error_key)
        prefix = "[" + " ".join(parts) + "] " if parts else ""
        return prefix + self.message

    def __repr__(self) -> str:
        return "%s(status_code=%r, error_key=%r, message=%r)" % (
            type(self).__name__,
            self.status_code,
            self.error_key,
            self.message,
        )


#: Name kept from the public EGS SDK, whose generic base exception was called this.
EgsApplicationException = EgsException


class Unauthorized(EgsException):
    """The API key or token is unknown, expired or not allowed to do this operation."""


class ApiKeyExpired(Unauthorized):
    """The API key's validity period is over (``API_KEY_EXPIRED``)."""


class ApiKeyInvalid(Unauthorized):
    """The API key is malformed or disabled (``API_KEY_INVALID``)."""


class ApiKeyNotFound(Unauthorized):
    """The server does not know the API key (``UNAUTHENTICATED`` at ``/api/v1/auth``)."""


class NoDefaultSession(Unauthorized):
    """No ``authenticated_session`` was given and no SDK default session is set.

    A subclass of :class:`Unauthorized` because the public SDK raised ``Unauthorized`` here.
    """


class GpuAlreadyProvisioned(EgsException):
    """The GPU request is provisioned (or past it): it can no longer be cancelled or edited."""


class GpuAlreadyReleased(EgsException):
    """The GPU request was already released."""


class GpuNotProvisioned(EgsException):
    """The GPU request is not provisioned yet, so it cannot be released (cancel it instead)."""


class GpuRequestNotFound(EgsException):
    """No GPU request has this id (or the key may not see it)."""


class WorkspaceNotFound(EgsException):
    """No workspace has this name (or the key may not see it)."""


class WorkspaceAlreadyExists(EgsException):
    """A workspace with this name exists already."""


class BadParameters(EgsException):
    """The server refused the parameters (``VALIDATION_FAILED`` or ``BAD_REQUEST``)."""


class Unsatisfiable(EgsException):
    """No node of the inventory could ever satisfy the GPU request (``GPR_UNSATISFIABLE``)."""


class UnhandledException(EgsException):
    """An error the SDK has no specific class for (name kept from the public EGS SDK)."""


class ServerError(UnhandledException):
    """The server failed (HTTP 5xx) with an error the SDK has no specific class for."""


class ServerUnreachable(EgsException):
    """No HTTP answer: connection refused, reset or timed out, TLS failure, or a body that is not JSON."""


#: ``error.errorKey`` -> exception class.  Keys not listed map to :class:`UnhandledException`,
#: or to :class:`ServerError` when the HTTP status is 5xx.
ERROR_KEY_MAP = {
    "UNAUTHENTICATED": Unauthorized,
    "TOKEN_EXPIRED": Unauthorized,
    "API_KEY_EXPIRED": ApiKeyExpired,
    "API_KEY_INVALID": ApiKeyInvalid,
    "FORBIDDEN": Unauthorized,
    "GPR_ALREADY_PROVISIONED": GpuAlreadyProvisioned,
    "GPR_ALREADY_RELEASED": GpuAlreadyReleased,
    "GPR_NOT_PROVISIONED": GpuNotProvisioned,
    "GPR_NOT_FOUND": GpuRequestNotFound,
    "WORKSPACE_NOT_FOUND": WorkspaceNotFound,
    "WORKSPACE_ALREADY_EXISTS": WorkspaceAlreadyExists,
    "VALIDATION_FAILED": BadParameters,
    "BAD_REQUEST": BadParameters,
    "GPR_UNSATISFIABLE": Unsatisfiable,
    "GPR_TEMPLATE_NOT_BOUND": BadParameters,
}


def exception_for_response(status_code: int, envelope: Any, auth_call: bool = False) -> EgsException:
    """Build (not raise) the exception for an error answer.

    ``envelope`` is the decoded body: a dict, the body's text when it was not JSON, or ``None``.
    ``auth_call`` is true for ``POST /api/v1/auth``, where an unknown key surfaces as
    :class:`ApiKeyNotFound` (still an :class:`Unauthorized`).
    """
    error = None
    message = None
    data = None
    if isinstance(envelope, dict):
        error = envelope.get("error")
        message = envelope.get("message")
    error_key = None
    if isinstance(error, dict):
        error_key = error.get("errorKey")
        if error.get("message"):
            message = error.get("message")
        data = error.get("data")
    if not isinstance(error_key, str) or not error_key:
        error_key = None
    if message is None:
        message = "HTTP %d" % status_code
        if isinstance(envelope, str) and envelope.strip():
            message += ": " + " ".join(envelope.split())[:200]
    message = str(message)

    if error_key is not None:
        cls = ERROR_KEY_MAP.get(error_key)
        if cls is Unauthorized and auth_call and error_key == "UNAUTHENTICATED":
            cls = ApiKeyNotFound
        if cls is None:
            cls = ServerError if status_code >= 500 else UnhandledException
    elif status_code in (401, 403):
        cls = Unauthorized
    elif status_code >= 500:
        cls = ServerError
    else:
        cls = UnhandledException
    return cls(
        message,
        status_code=status_code,
        error_key=error_key,
        data=data,
        response=envelope if isinstance(envelope, dict) else None,
    )


__all__ = [
    "EgsException",
    "EgsApplicationException",
    "Unauthorized",
    "ApiKeyExpired",
    "ApiKeyInvalid",
    "ApiKeyNotFound",
    "NoDefaultSession",
    "GpuAlreadyProvisioned",
    "GpuAlreadyReleased",
    "GpuNotProvisioned",
    "GpuRequestNotFound",
    "WorkspaceNotFound",
    "WorkspaceAlreadyExists",
    "BadParameters",
    "Unsatisfiable",
    "UnhandledException",
    "ServerError",
    "ServerUnreachable",
    "ERROR_KEY_MAP",
    "exception_for_response",
]
