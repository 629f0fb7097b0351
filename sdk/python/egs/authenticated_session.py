"""AuthenticatedSession and the SDK default session.

An :class:`AuthenticatedSession` is what :func:`egs.authenticate` returns and what every operation
takes as ``authenticated_session``.  When an operation is given ``None`` it uses the SDK default session
(set by ``authenticate(..., sdk_default=True)`` or :func:`update_global_session`) and raises
:class:`~egs.exceptions.NoDefaultSession` when there is none.
"""

import threading
from typing import Optional

from egs.exceptions import NoDefaultSession
from egs.internal.client.egs_core_apis_client import EgsCoreApisClient

_default_lock = threading.Lock()
_default_session = None  # type: Optional[AuthenticatedSession]


class AuthenticatedSession(object):
    """An authenticated connection to one EGS controller.

    It holds the API key (never shown), caches the bearer token and renews it when it expires, and keeps
    one HTTP/1.1 connection open.  It may be shared by threads (their calls are serialized) and used as
    a context manager, which closes the connection on exit.
    """

    def __init__(self, client: EgsCoreApisClient, sdk_default: bool = False):
        self.client = client
        if sdk_default:
            update_global_session(self)

    @property
    def endpoint(self) -> str:
        """The controller's URL (scheme, host, port and path prefix)."""
        return self.client.endpoint

    def close(self) -> None:
        """Close the HTTP connection; the session stays usable and reconnects on the next call."""
        self.client.close()

    def __enter__(self) -> "AuthenticatedSession":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return "AuthenticatedSession(endpoint=%r, sdk_default=%r)" % (
            self.endpoint,
            get_global_session() is self,
        )

    __str__ = __repr__


def update_global_session(session: Optional[AuthenticatedSession]) -> None:
    """Make ``session`` the SDK default (``None`` clears it)."""
    global _default_session
    with _default_lock:
        _default_session = session


def get_global_session() -> Optional[AuthenticatedSession]:
    """The SDK default session, or ``None``."""
    return _default_session


def get_authenticated_session(
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> AuthenticatedSession:
    """``authenticated_session`` if given, else the SDK default; raises NoDefaultSession if neither."""
    if authenticated_session is not None:
        if not hasattr(authenticated_session, "client"):  # e.g. arguments passed out of order
            raise TypeError(
                "authenticated_session must be an AuthenticatedSession (from egs.authenticate), not %s"
                % type(authenticated_session).__name__
            )
        return authenticated_session
    session = _default_session
    if session is None:
        raise NoDefaultSession(
            "No authenticated session was given and no SDK default is set: "
            "call egs.authenticate(endpoint, api_key) first"
        )
    return session
