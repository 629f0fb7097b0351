"""The HTTP client of one authenticated session: one keep-alive connection, a cached bearer token.

Invariants:
- One HTTP/1.1 connection per client, reused across calls and reopened when the server closed it.  A
  lock serializes the calls of one client, so a session may be shared by threads.
- The API key is exchanged for a token once (``POST /api/v1/auth``) and the token is reused until it
  is about to expire: the expiry comes from the ``X-Token-Expires-At`` header (RFC 3339), measured
  against the answer's ``Date`` header so that a skewed local clock does not matter; without the header
  the token is renewed after 10 minutes.  A call answered 401 ``TOKEN_EXPIRED`` (or 401
  ``UNAUTHENTICATED`` with a token cached by an earlier call, e.g. after a server restart) gets one new
  token and is retried once.
- The API key and the token never appear in a repr, an exception or a log record.
"""

import datetime
import email.utils
import http.client
import json
import logging
import re
import select
import ssl
import threading
import time
from typing import Any, Dict, Optional, Tuple
from urllib.parse import quote, urlencode, urlsplit

from egs.exceptions import ServerUnreachable, UnhandledException, exception_for_response

log = logging.getLogger("egs")

DEFAULT_TIMEOUT = 30.0
#: Token lifetime assumed when the server sends no ``X-Token-Expires-At`` header.
DEFAULT_TOKEN_LIFETIME = 600.0
#: Renew a token with a known expiry this long before it (at most; 10% of its lifetime if shorter).
MAX_REFRESH_MARGIN = 30.0
TOKEN_EXPIRES_HEADER = "X-Token-Expires-At"
USER_AGENT = "egs-python-sdk/0.1.0"

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})$"
)
_RETRYABLE_SEND_ERRORS = (
    http.client.RemoteDisconnected,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
)


def _monotonic() -> float:
    """The clock token deadlines are kept on (a function so that tests can move it)."""
    return time.monotonic()


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def parse_rfc3339(text: str) -> Optional[datetime.datetime]:
    """Parse an RFC 3339 time (any number of fraction digits, ``Z`` or an offset); ``None`` if invalid.

    A plain number is read as seconds since the Unix epoch.
    """
    text = text.strip()
    if re.match(r"^\d+(\.\d+)?$", text):
        try:
            return datetime.datetime.fromtimestamp(float(text), datetime.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    m = _RFC3339.match(text)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or ".0")[1:7].ljust(6, "0"))
    zone = m.group(8)
    if zone in ("Z", "z"):
        tz = datetime.timezone.utc
    else:
        digits = zone[1:].replace(":", "")
        delta = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        tz = datetime.timezone(delta if zone[0] == "+" else -delta)
    try:
        return datetime.datetime(year, month, day, hour, minute, min(second, 59), micro, tz)
    except ValueError:
        return None


def token_lifetime(headers: Any) -> Optional[float]:
    """Seconds the token of an auth answer stays valid per its headers; None without a usable header.

    The ``X-Token-Expires-At`` time is measured against the answer's ``Date`` header (the server's
    clock), or against the local clock when there is no ``Date``.
    """
    raw = headers.get(TOKEN_EXPIRES_HEADER) if headers is not None else None
    expires = parse_rfc3339(raw) if raw else None
    if expires is None:
        return None
    reference = None
    date = headers.get("Date")
    if date:
        try:
            reference = email.utils.parsedate_to_datetime(date)
        except (TypeError, ValueError, IndexError):
            reference = None
        if reference is not None and reference.tzinfo is None:
            reference = reference.replace(tzinfo=datetime.timezone.utc)
    if reference is None:
        reference = _utcnow()
    return max(0.0, (expires - reference).total_seconds())


def token_renewal_delay(headers: Any) -> float:
    """Seconds after an auth answer at which its token is renewed.

    A known expiry is anticipated by 10% of the lifetime (at most 30 s) to absorb latency and the
    one-second resolution of ``Date``; without one the token is renewed after exactly 10 minutes.
    """
    lifetime = token_lifetime(headers)
    if lifetime is None:
        return DEFAULT_TOKEN_LIFETIME
    return lifetime - min(MAX_REFRESH_MARGIN, lifetime * 0.1)


def _error_key(envelope: Any) -> Optional[str]:
    if isinstance(envelope, dict) and isinstance(envelope.get("error"), dict):
        key = envelope["error"].get("errorKey")
        return key if isinstance(key, str) else None
    return None


class EgsCoreApisClient(object):
    """Speaks the EGS REST API for one session.  Use :meth:`call`; everything else is internal."""

    def __init__(
        self,
        server_url: str,
        api_key: Optional[str] = None,
        access_token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        ssl_context: Optional[ssl.SSLContext] = None,
    ):
        if not api_key and not access_token:
            raise ValueError("Either api_key or access_token must be provided.")
        if not isinstance(server_url, str) or not server_url.strip():
            raise ValueError("endpoint must be a URL such as https://egs.example.com")
        url = server_url.strip()
        if "://" not in url:
            url = "http://" + url
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        if self.scheme not in ("http", "https"):
            raise ValueError("endpoint scheme must be http or https, not %r" % parts.scheme)
        if not parts.hostname:
            raise ValueError("endpoint has no host: %r" % server_url)
        self.server_host = parts.hostname
        try:
            port = parts.port
        except ValueError:
            raise ValueError("endpoint has an invalid port: %r" % server_url) from None
        self.server_port = port or (443 if self.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self._ssl_context = ssl_context
        self._api_key = api_key
        self._token = access_token
        # Monotonic time after which the token must be renewed; None: never (a caller's access token).
        self._token_deadline = None  # type: Optional[float]
        self._conn = None  # type: Optional[http.client.HTTPConnection]
        self._lock = threading.RLock()

    @property
    def endpoint(self) -> str:
        host = "[%s]" % self.server_host if ":" in self.server_host else self.server_host
        return "%s://%s:%d%s" % (self.scheme, host, self.server_port, self.prefix)

    def __repr__(self) -> str:
        return "EgsCoreApisClient(endpoint=%r)" % self.endpoint

    __str__ = __repr__

    # ----- public entry points -------------------------------------------------------------------

    def authenticate(self) -> None:
        """Exchange the API key for a new token now.  Raises an Unauthorized subclass on refusal."""
        with self._lock:
            if self._api_key is None:
                return
            self._authenticate_locked()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Optional[Dict[str, Any]] = None,
    ) -> Any:
        """Send one authenticated request and return the envelope's ``data``.

        ``body`` (any JSON value, or ``None`` for no body) is sent as JSON.  Raises the
        :mod:`egs.exceptions` class matching the answer's ``errorKey`` on any non-2xx answer, and
        :class:`~egs.exceptions.ServerUnreachable` when no answer came back.
        """
        with self._lock:
            fresh = self._ensure_token()
            status, _, envelope = self._send(method, path, body, query, self._token)
            if status == 401 and self._api_key is not None:
                key = _error_key(envelope)
                if key == "TOKEN_EXPIRED" or (key == "UNAUTHENTICATED" and not fresh):
                    log.debug("egs: token refused (%s); authenticating again", key)
                    self._authenticate_locked()
                    status, _, envelope = self._send(method, path, body, query, self._token)
        if not 200 <= status < 300:
            raise exception_for_response(status, envelope)
        if envelope is None:
            return None
        if not isinstance(envelope, dict):
            raise UnhandledException(
                "the server answered %d with a body that is not a JSON object" % status,
                status_code=status,
            )
        return envelope.get("data")

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self._close_conn()

    # ----- token ---------------------------------------------------------------------------------

    def _ensure_token(self) -> bool:
        """Get a token if there is none or it is about to expire; True when a new one was fetched."""
        if self._api_key is None:
            return False
        if self._token is None or (
            self._token_deadline is not None and _monotonic() >= self._token_deadline
        ):
            self._authenticate_locked()
            return True
        return False

    def _authenticate_locked(self) -> None:
        started = _monotonic()
        status, headers, envelope = self._send(
            "POST", "/api/v1/auth", {"apiKey": self._api_key}, None, None
        )
        if not 200 <= status < 300:
            raise exception_for_response(status, envelope, auth_call=True)
        data = envelope.get("data") if isinstance(envelope, dict) else None
        token = data.get("token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise UnhandledException(
                "the server's answer to /api/v1/auth holds no data.token", status_code=status
            )
        delay = token_renewal_delay(headers)
        self._token = token
        self._token_deadline = started + delay
        log.debug("egs: authenticated; token renewed in %.0f s", delay)

    # ----- transport -----------------------------------------------------------------------------

    def _new_connection(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
            return http.client.HTTPSConnection(
                self.server_host, self.server_port, timeout=self.timeout, context=context
            )
        return http.client.HTTPConnection(self.server_host, self.server_port, timeout=self.timeout)

    def _close_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def _connection(self) -> Tuple[http.client.HTTPConnection, bool]:
        """The connection to use and whether it is an already-open (reused) one."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                # An idle keep-alive socket that is readable was closed (or spoken to) by the server.
                readable, _, _ = select.select([conn.sock], [], [], 0)
            except (OSError, ValueError):
                readable = [True]
            if readable:
                self._close_conn()
                conn = None
        if conn is None:
            conn = self._conn = self._new_connection()
        return conn, conn.sock is not None

    def _target(self, path: str, query: Optional[Dict[str, Any]]) -> str:
        target = self.prefix + quote(path, safe="/")
        if query:
            target += "?" + urlencode(query)
        return target

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        query: Optional[Dict[str, Any]],
        token: Optional[str],
    ) -> Tuple[int, Any, Any]:
        """One HTTP exchange: (status, headers, decoded JSON body or text, None when empty)."""
        payload = None
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = "Bearer " + token
        target = self._target(path, query)
        attempt = 0
        while True:
            conn, reused = self._connection()
            try:
                conn.request(method, target, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except _RETRYABLE_SEND_ERRORS as e:
                self._close_conn()
                # The server may close an idle keep-alive connection just as we reuse it; such a
                # request never reached it, so it is sent once more on a fresh connection.
                if reused and attempt == 0:
                    attempt += 1
                    continue
                raise ServerUnreachable("%s %s: %s" % (method, self.endpoint, _describe(e)))
            except (OSError, http.client.HTTPException) as e:
                self._close_conn()
                raise ServerUnreachable("%s %s: %s" % (method, self.endpoint, _describe(e)))
        log.debug("egs: %s %s -> %d", method, path, response.status)
        return response.status, response.headers, _decode(raw)


def _describe(error: BaseException) -> str:
    text = str(error)
    return "%s: %s" % (type(error).__name__, text) if text else type(error).__name__


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def new_egs_core_apis_client(
    server_url: str,
    api_key: Optional[str] = None,
    access_token: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> EgsCoreApisClient:
    """Build a client (name kept from the public EGS SDK)."""
    return EgsCoreApisClient(server_url, api_key, access_token, timeout, ssl_context)
