"""API keys (admins): names, arguments and return values of the public EGS SDK.

Refusals raise the egs.exceptions class of their errorKey; for code written against the public SDK,
which raises ValueError for every refused API key call, those exceptions are ValueErrors too.
"""

import functools
from typing import Any, Optional

from egs.authenticated_session import AuthenticatedSession, get_authenticated_session
from egs.exceptions import EgsException, ServerUnreachable

KEY_PATH = "/api/v1/api-key"


@functools.lru_cache(maxsize=None)
def _value_error_class(cls: type) -> type:
    """``cls`` made also a ValueError (one class per original, so ``except`` on either works)."""
    return type(cls.__name__, (cls, ValueError), {"__module__": cls.__module__, "__doc__": cls.__doc__})


def _call(auth: AuthenticatedSession, method: str, path: str, body: Any = None, query: Any = None) -> Any:
    try:
        return auth.client.call(method, path, body, query=query)
    except ServerUnreachable:
        raise
    except EgsException as e:
        raise _value_error_class(type(e))(e.message, status_code=e.status_code, error_key=e.error_key, data=e.data,
                                          response=e.response) from None


def create_api_key(
    name: str,
    role: str,
    validity: str,
    username: str = "admin",
    description: str = "",
    workspace_name: Optional[str] = None,
    authenticated_session: Optional[AuthenticatedSession] = None,
) -> str:
    """Create a key and return it (shown only now).  role: Admin, Owner, Editor (needs workspace_name:
    an Owner limited to that workspace) or Viewer; validity: a duration (``"90d"``) or a date."""
    if role in ("Editor", "Viewer") and not workspace_name:
        raise ValueError("workspaceName is required for roles 'Editor' and 'Viewer'")
    body = {"name": name, "userName": username, "description": description, "role": role, "validity": validity}
    if workspace_name:
        body["workspaceName"] = workspace_name
    data = _call(get_authenticated_session(authenticated_session), "POST", KEY_PATH, body)
    if not isinstance(data, dict) or not data.get("apiKey"):
        raise ValueError("Unexpected response: 'apiKey' missing.")
    return data["apiKey"]


def delete_api_key(api_key: str, authenticated_session: Optional[AuthenticatedSession] = None) -> Any:
    """Delete a key given by its text; its tokens stop working at once.  Returns the answer's data."""
    return _call(get_authenticated_session(authenticated_session), "DELETE", KEY_PATH, {"apiKey": api_key})


def list_api_keys(
    workspace_name: Optional[str] = None, authenticated_session: Optional[AuthenticatedSession] = None
) -> Any:
    """The keys (``{"items": [...]}``, never the key texts), only those of ``workspace_name`` if given."""
    query = {"workspaceName": workspace_name} if workspace_name else None
    return _call(get_authenticated_session(authenticated_session), "GET", KEY_PATH + "/list", query=query)
