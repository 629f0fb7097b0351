"""Offline unit tests of the EGS Python SDK's wire mapping.

The SDK runs against a small in-process HTTP stub on 127.0.0.1 that records every request and answers
what each test programs.  These tests check paths, methods, query strings and bodies, token caching and
renewal, the errorKey -> exception mapping, connection reuse, and that every function of the SDK
reference (seed 000) works called positionally and with keywords.  Tests against a real egsd live in
tests/api/.
"""

import datetime
import inspect
import json
import logging
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import egs  # noqa: E402
from egs import exceptions  # noqa: E402
from egs.internal.client import egs_core_apis_client as client_mod  # noqa: E402

API_KEY = "5067bd55-SECRET-KEY-3e966e917f07"
TOKEN_PREFIX = "SECRETTOKEN-"


# ----- the stub server -----------------------------------------------------------------------------


def envelope_ok(data):
    return {"statusCode": 200, "status": "OK", "message": "Success", "data": data}


def ok(data=None, headers=None):
    return (200, envelope_ok(data), headers or {})


def err(status, error_key, message="failed", data=None, headers=None):
    body = {
        "statusCode": status,
        "status": "Error",
        "message": "top-level " + message,
        "data": None,
        "error": {"errorKey": error_key, "message": message, "data": data},
    }
    return (status, body, headers or {})


class Request(object):
    def __init__(self, method, raw_path, headers, body, port):
        parts = urlsplit(raw_path)
        self.method = method
        self.raw_path = raw_path
        self.path = parts.path
        self.query = parse_qs(parts.query, keep_blank_values=True)
        self.headers = headers
        self.body = body
        self.port = port

    @property
    def token(self):
        auth = self.headers.get("Authorization") or ""
        return auth[len("Bearer "):] if auth.startswith("Bearer ") else None


class Stub(object):
    """Records requests; answers /api/v1/auth with numbered tokens and other routes as programmed."""

    def __init__(self, prefix=""):
        self.prefix = prefix
        self.requests = []
        self.routes = {}
        self.lock = threading.Lock()
        self.token_count = 0
        self.valid_tokens = set()
        self.expired_tokens = set()
        self.auth_headers = {}  # extra headers on /api/v1/auth answers
        self.date = None  # fixed Date header, else the real time
        self.server = None

    # Programming.
    def on(self, method, path, *answers):
        """Answer ``method path`` with ``answers`` in turn (the last one repeats)."""
        self.routes[(method, path)] = list(answers)

    def calls(self, method=None, path=None):
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    def auth_calls(self):
        return self.calls("POST", "/api/v1/auth")

    def api_calls(self):
        return [r for r in self.calls() if r.path != "/api/v1/auth"]

    # Serving.
    def answer(self, req):
        path = req.path
        if self.prefix:
            if not path.startswith(self.prefix + "/"):
                return err(404, "NOT_FOUND", "outside the prefix")
            path = path[len(self.prefix):]
        key = (req.method, path)
        if key not in self.routes and path == "/api/v1/auth":
            return self.default_auth(req)
        if path != "/api/v1/auth":
            if req.token in self.expired_tokens:
                return err(401, "TOKEN_EXPIRED", "token expired")
            if req.token not in self.valid_tokens:
                return err(401, "UNAUTHENTICATED", "Unauthenticated")
        answers = self.routes.get(key)
        if not answers:
            return err(404, "NOT_FOUND", "no route %s %s" % key)
        with self.lock:
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        return answer(req) if callable(answer) else answer

    def default_auth(self, req):
        if not isinstance(req.body, dict) or req.body.get("apiKey") != API_KEY:
            return err(401, "UNAUTHENTICATED", "Unauthenticated")
        with self.lock:
            self.token_count += 1
            token = TOKEN_PREFIX + str(self.token_count)
            self.valid_tokens.add(token)
        return ok({"token": token}, dict(self.auth_headers))

    def start(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = -1  # one write per answer (flushed by the base class), no Nagle stalls

            def log_message(self, *args):
                pass

            def date_time_string(self, timestamp=None):
                if stub.date is not None:
                    return stub.date
                return BaseHTTPRequestHandler.date_time_string(self, timestamp)

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw.decode("utf-8")) if raw else None
                req = Request(self.command, self.path, dict(self.headers.items()), body,
                              self.client_address[1])
                with stub.lock:
                    stub.requests.append(req)
                status, payload, headers = stub.answer(req)
                silent_close = headers.pop("X-Stub-Silent-Close", None)
                if isinstance(payload, (dict, list)):
                    data = json.dumps(payload).encode("utf-8")
                    ctype = "application/json"
                else:
                    data = (payload or "").encode("utf-8")
                    ctype = "text/html"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                if silent_close:
                    # Close without "Connection: close", like a server dropping an idle keep-alive.
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self):
        return "http://127.0.0.1:%d%s" % (self.server.server_address[1], self.prefix)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    s = Stub().start()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def no_default_session():
    egs.update_global_session(None)
    yield
    egs.update_global_session(None)


@pytest.fixture
def session(stub):
    s = egs.authenticate(stub.url, API_KEY, sdk_default=False)
    yield s
    s.close()


@pytest.fixture
def clock(monkeypatch):
    """Moves the SDK's monotonic clock: ``clock.advance(seconds)``."""

    class Clock(object):
        def __init__(self):
            self.now = 1000.0

        def advance(self, seconds):
            self.now += seconds

    c = Clock()
    monkeypatch.setattr(client_mod, "_monotonic", lambda: c.now)
    return c


# ----- wire objects used by the tests --------------------------------------------------------------

GPR_WIRE = {
    "gprId": "gpr-1bb22a0b-9388",
    "gprName": "gpt-4o-workload",
    "sliceName": "llm-gpt-4o",
    "clusterName": "worker-1",
    "numberOfGPUs": 2,
    "numberOfGPUNodes": 1,
    "instanceType": "p5.48xlarge",
    "memoryPerGPU": 81920,
    "priority": 201,
    "gpuSharingMode": "Virtual",
    "estimatedStartTime": "2024-01-01T00:00:00Z",
    "estimatedWaitTime": "0h2m40s",
    "exitDuration": "6h0m0s",
    "earlyRelease": False,
    "gpuShape": "NVIDIA-H100-80GB-HBM3",
    "multiNode": False,
    "dedicatedNodes": True,
    "enableRDMA": False,
    "enableSecondaryNetwork": True,
    "idleTimeOutDuration": "",
    "status": {
        "provisioningStatus": "Provisioned",
        "failureReason": "",
        "numGpusAllocated": 2,
        "startTimestamp": "2024-01-01T00:02:40Z",
        "completionTimestamp": "",
        "cost": "12.5",
        "nodes": ["h100-node-1"],
        "internalState": "Provisioned",
        "retryCount": 1,
        "delayedCount": 3,
    },
}

SEED_DATA_ATTRS = {
    "request_id": "gpr-1bb22a0b-9388",
    "workspace_name": "llm-gpt-4o",
    "cluster_name": "worker-1",
    "number_of_gpus": 2,
    "number_of_gpu_nodes": 1,
    "instance_type": "p5.48xlarge",
    "memory_per_gpu": 81920,
    "priority": 201,
    "gpu_sharing_mode": "Virtual",
    "estimated_start_time": "2024-01-01T00:00:00Z",
    "estimated_wait_time": "0h2m40s",
    "exit_duration": "6h0m0s",
    "early_release": False,
    "gpr_name": "gpt-4o-workload",
    "gpu_shape": "NVIDIA-H100-80GB-HBM3",
    "multi_node": False,
    "dedicated_nodes": True,
    "enable_rdma": False,
    "enable_secondary_network": True,
}

SEED_STATUS_ATTRS = {
    "provisioning_status": "Provisioned",
    "failure_reason": "",
    "num_gpus_allocated": 2,
    "start_timestamp": "2024-01-01T00:02:40Z",
    "completion_timestamp": "",
    "cost": "12.5",
    "nodes": ["h100-node-1"],
    "internal_state": "Provisioned",
    "retry_count": 1,
    "delayed_count": 3,
}

GPR_ARGS = ("gpt-4o-workload", "llm-gpt-4o", "worker-1", 1, 2, 81920, "p5.48xlarge",
            "NVIDIA-H100-80GB-HBM3", "0d6h0m", 201)
GPR_KWARGS = dict(
    request_name="gpt-4o-workload", workspace_name="llm-gpt-4o", cluster_name="worker-1",
    node_count=1, gpu_per_node_count=2, memory_per_gpu=81920, instance_type="p5.48xlarge",
    gpu_shape="NVIDIA-H100-80GB-HBM3", exit_duration="0d6h0m", priority=201,
)
GPR_BODY = {
    "gprName": "gpt-4o-workload",
    "sliceName": "llm-gpt-4o",
    "clusterName": "worker-1",
    "numberOfGPUs": 2,
    "numberOfGPUNodes": 1,
    "memoryPerGpu": 81920,
    "instanceType": "p5.48xlarge",
    "gpuShape": "NVIDIA-H100-80GB-HBM3",
    "exitDuration": "0d6h0m",
    "priority": 201,
    "idleTimeOutDuration": "",
    "enforceIdleTimeOut": False,
    "enableEviction": None,  # null: unset, so a workspace policy's default applies
    "requeueOnFailure": None,
    "preferredClusters": None,
    "enableAutoClusterSelection": False,
    "enableAutoGpuSelection": False,
}


# ----- seed 000 functions: signatures, positional / keyword / default-session calls ----------------

SEED_SIGNATURES = {
    "request_gpu": ["request_name", "workspace_name", "cluster_name", "node_count",
                    "gpu_per_node_count", "memory_per_gpu", "instance_type", "gpu_shape",
                    "exit_duration", "priority", "authenticated_session"],
    "cancel_gpu_request": ["request_id", "authenticated_session"],
    "update_gpu_request_priority": ["request_id", "new_prority", "authenticated_session"],
    "update_gpu_request_name": ["request_id", "new_name", "authenticated_session"],
    "release_gpu": ["request_id", "authenticated_session"],
    "gpu_request_status": ["request_id", "authenticated_session"],
    "gpu_request_status_for_workspace": ["workspace_name", "authenticated_session"],
}


# The public EGS SDK's keyword arguments, taken after the reference's positional ones.
PUBLIC_KEYWORDS = {
    "request_gpu": {"idle_timeout_duration", "enforce_idle_timeout", "enable_auto_gpu_selection",
                    "enable_auto_cluster_selection", "requeue_on_failure", "enable_eviction", "preferred_clusters"},
    "update_gpu_request_priority": {"new_priority"},
}


@pytest.mark.parametrize("name", sorted(SEED_SIGNATURES))
def test_seed_signatures_match_the_reference(name):
    params = inspect.signature(getattr(egs, name)).parameters
    positional = [p.name for p in params.values() if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional == SEED_SIGNATURES[name]
    assert params["authenticated_session"].default is None
    keyword_only = {p.name for p in params.values() if p.kind == inspect.Parameter.KEYWORD_ONLY}
    assert PUBLIC_KEYWORDS.get(name, set()) <= keyword_only
    assert all(params[k].default is not inspect.Parameter.empty for k in keyword_only)


def _check_gpr_list(result):
    assert [g.request_id for g in result] == ["gpr-1bb22a0b-9388", "gpr-2"]
    assert all(isinstance(g, egs.GpuRequestData) for g in result)
    assert result[1].status.provisioning_status == "Queued"


SEED_CALLS = [
    # name, positional args, keyword args, method, path, query, body, answer data, result check
    ("request_gpu", GPR_ARGS, GPR_KWARGS, "POST", "/api/v1/gpr", {}, GPR_BODY,
     {"gprId": "gpr-1bb22a0b-9388"}, lambda r: r == "gpr-1bb22a0b-9388"),
    ("cancel_gpu_request", ("gpr-1",), {"request_id": "gpr-1"}, "DELETE", "/api/v1/gpr", {},
     {"gprId": "gpr-1"}, None, lambda r: r is None),
    ("update_gpu_request_priority", ("gpr-1", 301), {"request_id": "gpr-1", "new_prority": 301},
     "PUT", "/api/v1/gpr", {}, {"gprId": "gpr-1", "priority": 301}, None, lambda r: r is None),
    ("update_gpu_request_name", ("gpr-1", "renamed"), {"request_id": "gpr-1", "new_name": "renamed"},
     "PUT", "/api/v1/gpr", {}, {"gprId": "gpr-1", "gprName": "renamed"}, None, lambda r: r is None),
    ("release_gpu", ("gpr-1",), {"request_id": "gpr-1"}, "PUT", "/api/v1/gpr", {},
     {"gprId": "gpr-1", "earlyRelease": True}, None, lambda r: r is None),
    ("gpu_request_status", ("gpr-1bb22a0b-9388",), {"request_id": "gpr-1bb22a0b-9388"}, "GET",
     "/api/v1/gpr", {"gprId": ["gpr-1bb22a0b-9388"]}, None, GPR_WIRE,
     lambda r: isinstance(r, egs.GpuRequestData) and r.request_id == "gpr-1bb22a0b-9388"
     and r.status.nodes == ["h100-node-1"]),
    ("gpu_request_status_for_workspace", ("llm-gpt-4o",), {"workspace_name": "llm-gpt-4o"}, "GET",
     "/api/v1/gpr/list", {"sliceName": ["llm-gpt-4o"]}, None,
     {"items": [GPR_WIRE, {"gprId": "gpr-2", "status": {"provisioningStatus": "Queued"}}]},
     lambda r: _check_gpr_list(r) is None),
]


@pytest.mark.parametrize("style", ["positional", "keyword", "default_session"])
@pytest.mark.parametrize("case", SEED_CALLS, ids=[c[0] for c in SEED_CALLS])
def test_seed_function_wire_mapping(stub, case, style):
    name, args, kwargs, method, path, query, body, data, check = case
    stub.on(method, path, ok(data))
    fn = getattr(egs, name)
    if style == "default_session":
        sess = egs.authenticate(stub.url, API_KEY)  # sdk_default=True by default
        result = fn(*args)
    else:
        sess = egs.authenticate(stub.url, API_KEY, sdk_default=False)
        if style == "positional":
            result = fn(*(args + (sess,)))
        else:
            result = fn(authenticated_session=sess, **kwargs)
    sess.close()
    assert check(result), result
    calls = stub.api_calls()
    assert len(calls) == 1
    req = calls[0]
    assert (req.method, req.path, req.query) == (method, path, query)
    assert req.body == body
    assert req.token == TOKEN_PREFIX + "1"
    if body is not None:
        assert req.headers["Content-Type"] == "application/json"


def test_seed_example_runs_unchanged(stub):
    """The example of the SDK reference, only URL and key changed."""
    node = {"gpuNodeName": "n1", "gpuShape": "NVIDIA-H100-80GB-HBM3", "instanceType": "p5.48xlarge",
            "clusterName": "worker-1", "memory": 81920, "gpuCount": 8, "availableGPUs": 8}
    stub.on("GET", "/api/v1/inventory/list", ok({"managedNodes": [node], "unmanagedNodes": []}))
    stub.on("POST", "/api/v1/slice-workspace", ok({"workspaceName": "llm-gpt-4o"}))
    stub.on("POST", "/api/v1/gpr", ok({"gprId": "gpr-42"}))
    stub.on("PUT", "/api/v1/gpr", ok(None))
    stub.on("DELETE", "/api/v1/gpr", ok(None))
    stub.on("GET", "/api/v1/gpr", ok(dict(GPR_WIRE, gprId="gpr-42")))
    stub.on("GET", "/api/v1/gpr/list", ok({"items": [dict(GPR_WIRE, gprId="gpr-42")]}))

    auth = egs.authenticate(stub.url, API_KEY)
    inventory = egs.inventory(None, auth)
    workspace_name = egs.create_workspace("llm-gpt-4o", ["worker-1"], ["llm-gpt-40-dev"], "John Doe",
                                          "john.doe@avesha.io", auth)
    gpu_request_id = egs.request_gpu("gpt-4o-workload", workspace_name, "worker-1", 1, 1, 81920,
                                     inventory[0].instance_type, inventory[0].gpu_shape, "0d6h0m",
                                     201, auth)
    egs.update_gpu_request_priority(gpu_request_id, 301, auth)
    egs.update_gpu_request_name(gpu_request_id, "new-name", auth)
    gpu_request = egs.gpu_request_status(gpu_request_id, auth)
    gpu_requests = egs.gpu_request_status_for_workspace(workspace_name, auth)
    egs.release_gpu(gpu_request_id, auth)
    egs.cancel_gpu_request(gpu_request_id, auth)
    auth.close()

    assert workspace_name == "llm-gpt-4o"
    assert gpu_request_id == "gpr-42"
    assert gpu_request.request_id == "gpr-42"
    assert [g.request_id for g in gpu_requests] == ["gpr-42"]
    post = stub.calls("POST", "/api/v1/gpr")[0].body
    assert post["instanceType"] == "p5.48xlarge"
    assert post["gpuShape"] == "NVIDIA-H100-80GB-HBM3"
    assert post["numberOfGPUs"] == 1 and post["numberOfGPUNodes"] == 1
    assert len(stub.auth_calls()) == 1


# ----- authentication and the token cache ---------------------------------------------------------


def test_authenticate_posts_the_key_without_bearer(stub):
    sess = egs.authenticate(stub.url, API_KEY, sdk_default=False)
    sess.close()
    (auth,) = stub.auth_calls()
    assert auth.body == {"apiKey": API_KEY}
    assert "Authorization" not in auth.headers
    assert auth.headers["Content-Type"] == "application/json"


def test_one_auth_for_many_operations(stub, session):
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    stub.on("PUT", "/api/v1/gpr", ok(None))
    for _ in range(5):
        egs.gpu_request_status("gpr-1", session)
    egs.update_gpu_request_priority("gpr-1", 150, session)
    egs.release_gpu("gpr-1", session)
    assert len(stub.auth_calls()) == 1
    assert len(stub.api_calls()) == 7
    assert {r.token for r in stub.api_calls()} == {TOKEN_PREFIX + "1"}


def test_token_renewed_before_the_expiry_header(stub, clock):
    # Expiry is 60 s after the server's Date header, whatever the local wall clock says.
    stub.date = "Mon, 01 Jan 2024 00:00:00 GMT"
    stub.auth_headers = {"X-Token-Expires-At": "2024-01-01T00:01:00Z"}
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    sess = egs.authenticate(stub.url, API_KEY, sdk_default=False)
    clock.advance(50)
    egs.gpu_request_status("gpr-1", sess)
    assert len(stub.auth_calls()) == 1
    clock.advance(5)  # 55 s: within the renewal margin (10% of 60 s)
    egs.gpu_request_status("gpr-1", sess)
    assert len(stub.auth_calls()) == 2
    assert stub.api_calls()[-1].token == TOKEN_PREFIX + "2"
    egs.gpu_request_status("gpr-1", sess)
    assert len(stub.auth_calls()) == 2
    sess.close()


def test_token_renewed_after_ten_minutes_without_header(stub, clock, session):
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    clock.advance(599)
    egs.gpu_request_status("gpr-1", session)
    assert len(stub.auth_calls()) == 1
    clock.advance(2)
    egs.gpu_request_status("gpr-1", session)
    assert len(stub.auth_calls()) == 2
    assert stub.api_calls()[-1].token == TOKEN_PREFIX + "2"


def test_token_expired_answer_reauthenticates_once_and_retries(stub, session):
    stub.on("PUT", "/api/v1/gpr", ok(None))
    stub.expired_tokens.add(TOKEN_PREFIX + "1")
    egs.update_gpu_request_name("gpr-1", "n2", session)
    assert len(stub.auth_calls()) == 2
    puts = stub.calls("PUT", "/api/v1/gpr")
    assert [r.token for r in puts] == [TOKEN_PREFIX + "1", TOKEN_PREFIX + "2"]
    assert puts[1].body == {"gprId": "gpr-1", "gprName": "n2"}
    # The new token is cached from then on.
    egs.update_gpu_request_name("gpr-1", "n3", session)
    assert len(stub.auth_calls()) == 2


def test_token_expired_twice_raises_without_looping(stub, session):
    stub.on("GET", "/api/v1/gpr", err(401, "TOKEN_EXPIRED", "token expired"))
    with pytest.raises(exceptions.Unauthorized) as info:
        egs.gpu_request_status("gpr-1", session)
    assert info.value.error_key == "TOKEN_EXPIRED"
    assert len(stub.auth_calls()) == 2
    assert len(stub.calls("GET", "/api/v1/gpr")) == 2


def test_cached_token_unknown_to_server_is_replaced(stub, session):
    # E.g. the server restarted and forgot its tokens.
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    stub.valid_tokens.clear()
    assert egs.gpu_request_status("gpr-1", session).request_id == GPR_WIRE["gprId"]
    assert len(stub.auth_calls()) == 2


def test_unauthenticated_with_fresh_token_raises(stub, session):
    stub.on("GET", "/api/v1/gpr", err(401, "UNAUTHENTICATED", "Unauthenticated"))
    with pytest.raises(exceptions.Unauthorized):
        egs.gpu_request_status("gpr-1", session)
    # One renewal for the cached token, none for the fresh one.
    assert len(stub.auth_calls()) == 2
    assert len(stub.calls("GET", "/api/v1/gpr")) == 2


def test_forbidden_does_not_reauthenticate(stub, session):
    stub.on("DELETE", "/api/v1/gpr", err(403, "FORBIDDEN", "viewer key"))
    with pytest.raises(exceptions.Unauthorized):
        egs.cancel_gpu_request("gpr-1", session)
    assert len(stub.auth_calls()) == 1


@pytest.mark.parametrize("answer, cls", [
    (err(401, "API_KEY_EXPIRED", "Api Key has expired"), exceptions.ApiKeyExpired),
    (err(401, "API_KEY_INVALID", "Api Key Configuration is invalid"), exceptions.ApiKeyInvalid),
    (err(401, "UNAUTHENTICATED", "Unauthenticated"), exceptions.ApiKeyNotFound),
])
def test_authenticate_refused(stub, answer, cls):
    stub.on("POST", "/api/v1/auth", answer)
    with pytest.raises(cls) as info:
        egs.authenticate(stub.url, API_KEY)
    assert isinstance(info.value, exceptions.Unauthorized)
    assert info.value.status_code == 401
    assert egs.get_global_session() is None


def test_authenticate_wrong_key_is_unauthorized(stub):
    with pytest.raises(exceptions.Unauthorized):
        egs.authenticate(stub.url, "not-the-key")


def test_auth_answer_without_token(stub):
    stub.on("POST", "/api/v1/auth", ok({}))
    with pytest.raises(exceptions.EgsException):
        egs.authenticate(stub.url, API_KEY, sdk_default=False)


def test_access_token_mode(stub):
    stub.valid_tokens.add("caller-token")
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    sess = egs.authenticate(stub.url, access_token="caller-token", sdk_default=False)
    egs.gpu_request_status("gpr-1", sess)
    assert stub.auth_calls() == []
    assert stub.api_calls()[0].token == "caller-token"
    stub.expired_tokens.add("caller-token")
    with pytest.raises(exceptions.Unauthorized):
        egs.gpu_request_status("gpr-1", sess)
    assert stub.auth_calls() == []
    sess.close()


def test_parse_rfc3339_forms():
    parse = client_mod.parse_rfc3339
    utc = datetime.timezone.utc
    assert parse("2024-01-01T00:01:00Z") == datetime.datetime(2024, 1, 1, 0, 1, tzinfo=utc)
    assert parse("2024-01-01T02:01:00.123456789+02:00") == datetime.datetime(
        2024, 1, 1, 0, 1, 0, 123456, tzinfo=utc)
    assert parse("2023-12-31T23:01:00-01:00") == datetime.datetime(2024, 1, 1, 0, 1, tzinfo=utc)
    assert parse("1704067260") == datetime.datetime(2024, 1, 1, 0, 1, tzinfo=utc)
    assert parse("yesterday") is None
    headers = {"Date": "Mon, 01 Jan 2024 00:00:00 GMT",
               "X-Token-Expires-At": "2024-01-01T02:01:00.5+02:00"}
    assert client_mod.token_lifetime(headers) == pytest.approx(60.5)
    assert client_mod.token_lifetime({"Date": "Mon, 01 Jan 2024 00:00:00 GMT"}) is None
    assert client_mod.token_lifetime({"X-Token-Expires-At": "garbage"}) is None
    assert client_mod.token_renewal_delay({"X-Token-Expires-At": "garbage"}) == 600
    assert client_mod.token_renewal_delay(headers) == pytest.approx(60.5 - 6.05)
    headers["X-Token-Expires-At"] = "2024-01-01T01:00:00Z"
    assert client_mod.token_renewal_delay(headers) == pytest.approx(3600 - 30)


# ----- errorKey -> exception mapping ---------------------------------------------------------------

ERROR_CASES = [
    (401, "UNAUTHENTICATED", exceptions.Unauthorized),
    (401, "TOKEN_EXPIRED", exceptions.Unauthorized),
    (401, "API_KEY_EXPIRED", exceptions.Unauthorized),
    (401, "API_KEY_INVALID", exceptions.Unauthorized),
    (403, "FORBIDDEN", exceptions.Unauthorized),
    (409, "GPR_ALREADY_PROVISIONED", exceptions.GpuAlreadyProvisioned),
    (409, "GPR_ALREADY_RELEASED", exceptions.GpuAlreadyReleased),
    (409, "GPR_NOT_PROVISIONED", exceptions.GpuNotProvisioned),
    (404, "GPR_NOT_FOUND", exceptions.GpuRequestNotFound),
    (404, "WORKSPACE_NOT_FOUND", exceptions.WorkspaceNotFound),
    (409, "WORKSPACE_ALREADY_EXISTS", exceptions.WorkspaceAlreadyExists),
    (422, "VALIDATION_FAILED", exceptions.BadParameters),
    (400, "BAD_REQUEST", exceptions.BadParameters),
    (422, "GPR_UNSATISFIABLE", exceptions.Unsatisfiable),
    (409, "SOMETHING_NEW", exceptions.EgsException),
    (500, "INTERNAL", exceptions.ServerError),
    (503, "GPR_ALREADY_PROVISIONED", exceptions.GpuAlreadyProvisioned),  # the key wins
]

SPECIFIC = [exceptions.Unauthorized, exceptions.GpuAlreadyProvisioned, exceptions.GpuAlreadyReleased,
            exceptions.GpuNotProvisioned, exceptions.GpuRequestNotFound, exceptions.WorkspaceNotFound,
            exceptions.WorkspaceAlreadyExists, exceptions.BadParameters, exceptions.Unsatisfiable,
            exceptions.ServerError, exceptions.NoDefaultSession, exceptions.ServerUnreachable]


@pytest.mark.parametrize("status, key, cls", ERROR_CASES, ids=[c[1] + str(c[0]) for c in ERROR_CASES])
def test_error_key_mapping(stub, session, status, key, cls):
    details = {"gprId": "gpr-1", "state": "Provisioned"}
    stub.on("DELETE", "/api/v1/gpr", err(status, key, "Cannot delete GPR in Successful state", details))
    with pytest.raises(exceptions.EgsException) as info:
        egs.cancel_gpu_request("gpr-1", session)
    exc = info.value
    assert isinstance(exc, cls)
    for other in SPECIFIC:
        if not issubclass(cls, other):
            assert not isinstance(exc, other), "%s is also a %s" % (type(exc), other)
    assert exc.status_code == status
    assert exc.error_key == key
    assert exc.message == "Cannot delete GPR in Successful state"
    assert exc.data == details
    assert exc.response["error"]["errorKey"] == key
    assert key in str(exc) and "Cannot delete" in str(exc)


def test_same_status_different_keys_give_different_exceptions(stub, session):
    stub.on("PUT", "/api/v1/gpr",
            err(409, "GPR_ALREADY_RELEASED", "released"),
            err(409, "GPR_NOT_PROVISIONED", "queued: cancel it"),
            err(409, "GPR_ALREADY_PROVISIONED", "provisioned"))
    with pytest.raises(exceptions.GpuAlreadyReleased):
        egs.release_gpu("gpr-1", session)
    with pytest.raises(exceptions.GpuNotProvisioned):
        egs.release_gpu("gpr-1", session)
    with pytest.raises(exceptions.GpuAlreadyProvisioned):
        egs.update_gpu_request_priority("gpr-1", 10, session)


def test_errors_without_error_key(stub, session):
    stub.on("GET", "/api/v1/gpr",
            (502, "<html>Bad Gateway</html>", {}),
            (401, {"statusCode": 401, "status": "Error", "message": "Unauthenticated", "data": None}, {}),
            (404, None, {}))
    with pytest.raises(exceptions.ServerError) as info:
        egs.gpu_request_status("gpr-1", session)
    assert info.value.status_code == 502 and "Bad Gateway" in info.value.message
    with pytest.raises(exceptions.Unauthorized) as info:
        egs.gpu_request_status("gpr-1", session)
    assert info.value.error_key is None
    with pytest.raises(exceptions.EgsException) as info:
        egs.gpu_request_status("gpr-1", session)
    assert not isinstance(info.value, (exceptions.ServerError, exceptions.GpuRequestNotFound))
    assert info.value.status_code == 404


def test_every_exception_derives_from_egs_exception():
    names = ["Unauthorized", "GpuAlreadyProvisioned", "GpuAlreadyReleased", "GpuNotProvisioned",
             "GpuRequestNotFound", "WorkspaceNotFound", "WorkspaceAlreadyExists", "BadParameters",
             "Unsatisfiable", "ServerError", "NoDefaultSession", "ServerUnreachable",
             "UnhandledException", "ApiKeyExpired", "ApiKeyInvalid", "ApiKeyNotFound"]
    for name in names:
        assert issubclass(getattr(exceptions, name), exceptions.EgsException), name
    assert issubclass(exceptions.EgsException, Exception)
    assert exceptions.EgsApplicationException is exceptions.EgsException


def test_success_answer_that_is_not_json(stub, session):
    stub.on("GET", "/api/v1/gpr", (200, "<html>captive portal</html>", {}))
    with pytest.raises(exceptions.EgsException):
        egs.gpu_request_status("gpr-1", session)


# ----- default session -----------------------------------------------------------------------------


def test_sdk_default_session(stub):
    stub.on("GET", "/api/v1/gpr/list", ok({"items": []}))
    first = egs.authenticate(stub.url, API_KEY)
    assert egs.get_global_session() is first
    second = egs.authenticate(stub.url, API_KEY, sdk_default=False)
    assert egs.get_global_session() is first
    assert egs.gpu_request_status_for_workspace("ws") == []
    assert stub.api_calls()[-1].token == TOKEN_PREFIX + "1"
    egs.gpu_request_status_for_workspace("ws", second)
    assert stub.api_calls()[-1].token == TOKEN_PREFIX + "2"
    first.close()
    second.close()


@pytest.mark.parametrize("call", [
    lambda: egs.request_gpu(*GPR_ARGS),
    lambda: egs.cancel_gpu_request("gpr-1"),
    lambda: egs.update_gpu_request_priority("gpr-1", 5),
    lambda: egs.update_gpu_request_name("gpr-1", "x"),
    lambda: egs.release_gpu("gpr-1"),
    lambda: egs.gpu_request_status("gpr-1"),
    lambda: egs.gpu_request_status_for_workspace("ws"),
    lambda: egs.inventory(),
    lambda: egs.list_workspaces(),
])
def test_no_default_session_raises(stub, call):
    egs.authenticate(stub.url, API_KEY, sdk_default=False).close()
    with pytest.raises(exceptions.NoDefaultSession) as info:
        call()
    assert isinstance(info.value, exceptions.Unauthorized)
    assert stub.api_calls() == []


def test_wrong_session_type_is_rejected(stub):
    with pytest.raises(TypeError):
        egs.gpu_request_status("gpr-1", "http://not-a-session")


# ----- data classes ----------------------------------------------------------------------------------


def test_gpu_request_data_from_wire():
    gpr = egs.GpuRequestData.from_dict(GPR_WIRE)
    for attr, value in SEED_DATA_ATTRS.items():
        assert getattr(gpr, attr) == value, attr
    assert isinstance(gpr.status, egs.GpuRequestStatus)
    for attr, value in SEED_STATUS_ATTRS.items():
        assert getattr(gpr.status, attr) == value, attr
    # Exactly the attributes of the SDK reference.
    assert set(vars(gpr)) == set(SEED_DATA_ATTRS) | {"status"}
    assert set(vars(gpr.status)) == set(SEED_STATUS_ATTRS)
    assert gpr.gpr_id == gpr.request_id and gpr.slice_name == gpr.workspace_name
    text = repr(gpr)
    assert text.startswith("GpuRequestData(") and "gpr-1bb22a0b-9388" in text
    assert "GpuRequestStatus(provisioning_status='Provisioned'" in text


def test_gpu_request_data_tolerates_missing_keys():
    gpr = egs.GpuRequestData.from_dict({"gprId": "gpr-9", "memoryPerGpu": 15, "unknownKey": 1})
    assert gpr.request_id == "gpr-9"
    assert gpr.memory_per_gpu == 15
    for attr in SEED_DATA_ATTRS:
        if attr not in ("request_id", "memory_per_gpu"):
            assert getattr(gpr, attr) is None, attr
    for attr in SEED_STATUS_ATTRS:
        assert getattr(gpr.status, attr) is None, attr
    assert not hasattr(gpr, "unknown_key")
    assert repr(gpr) == "GpuRequestData(request_id='gpr-9', memory_per_gpu=15, status=GpuRequestStatus())"
    assert egs.GpuRequestData.from_dict(GPR_WIRE) == egs.GpuRequestData.from_dict(GPR_WIRE)
    assert egs.GpuRequestData.from_dict(GPR_WIRE).to_dict()["status"]["nodes"] == ["h100-node-1"]


def test_inventory_from_managed_nodes(stub, session):
    managed = [{
        "gpuNodeName": "h100-node-1", "gpuShape": "NVIDIA-H100-80GB-HBM3",
        "gpuModelName": "H100", "instanceType": "p5.48xlarge", "clusterName": "worker-1",
        "memory": 81920, "gpuCount": 8, "availableGPUs": 6, "gpuTempThreshold": "85",
        "gpuPowerThreshold": "700", "cloudProvider": "aws", "region": "us-east-1",
        "nodeHealth": "Healthy", "gpuNodeState": "NODE_RESERVED", "newFieldX": "kept",
        "allocation": [{"gprName": "g1", "sliceName": "ws", "totalGPUsAllocated": 2,
                        "allocationTimeStamp": "2024-01-01T00:00:00Z"}],
    }]
    stub.on("GET", "/api/v1/inventory/list",
            ok({"managedNodes": managed, "unmanagedNodes": [{"gpuNodeName": "u1"}]}))
    nodes = egs.inventory(None, session)
    assert stub.api_calls()[0].query == {}
    assert len(nodes) == 1
    n = nodes[0]
    assert (n.gpu_node_name, n.gpu_shape, n.gpu_model_name) == ("h100-node-1", "NVIDIA-H100-80GB-HBM3", "H100")
    assert (n.instance_type, n.cluster_name, n.memory) == ("p5.48xlarge", "worker-1", 81920)
    assert (n.gpu_count, n.available_gpus, n.node_health) == (8, 6, "Healthy")
    assert n.gpu_node_status == "NODE_RESERVED"
    assert (n.cloud_provider, n.region, n.gpu_temp_threshold) == ("aws", "us-east-1", "85")
    assert n.new_field_x == "kept"
    assert n.allocation[0].slice_name == "ws" and n.allocation[0].total_gpus_allocated == 2
    assert [u.gpu_node_name for u in nodes.unmanaged_nodes] == ["u1"]
    assert nodes.managed_nodes == [n]
    assert "h100-node-1" in repr(n)


def test_inventory_items_fallback_and_workspace_query(stub, session):
    stub.on("GET", "/api/v1/inventory/list",
            ok({"items": [{"gpuNodeName": "a", "gpuModelName": "T4", "gpuNodeStatus": "NODE_AVAILABLE"}]}))
    nodes = egs.inventory(workspace_name="ws-1", authenticated_session=session)
    assert [n.gpu_node_name for n in nodes] == ["a"]
    assert nodes[0].gpu_shape == "T4"  # falls back to the model name
    assert nodes[0].gpu_node_status == "NODE_AVAILABLE"
    assert nodes[0].available_gpus is None
    assert stub.api_calls()[0].query == {"sliceName": ["ws-1"]}


def test_workspace_inventory(stub, session):
    stub.on("GET", "/api/v1/inventory", ok({"items": [
        {"nodeName": ["n1"], "instanceType": "p5", "memory": 81920, "totalGpus": 8, "gpuShape": "H100"}]}))
    usage = egs.workspace_inventory("ws", session)
    assert stub.api_calls()[0].query == {"sliceName": ["ws"]}
    assert (usage[0].node_name, usage[0].total_gpus, usage[0].gpu_shape) == (["n1"], 8, "H100")


# ----- workspaces and wait time ----------------------------------------------------------------------


@pytest.mark.parametrize("style", ["positional", "keyword"])
def test_create_workspace(stub, session, style):
    stub.on("POST", "/api/v1/slice-workspace", ok({"workspaceName": "llm-gpt-4o"}))
    args = ("llm-gpt-4o", ["worker-1"], ["llm-gpt-40-dev"], "John Doe", "john.doe@avesha.io")
    if style == "positional":
        name = egs.create_workspace(*(args + (session,)))
    else:
        name = egs.create_workspace(workspace_name=args[0], clusters=args[1], namespaces=args[2],
                                    username=args[3], email=args[4], authenticated_session=session)
    assert name == "llm-gpt-4o"
    assert stub.api_calls()[0].body == {"workspaceName": "llm-gpt-4o", "clusters": ["worker-1"],
                                        "namespaces": ["llm-gpt-40-dev"], "username": "John Doe",
                                        "email": "john.doe@avesha.io"}


def test_create_workspace_conflict(stub, session):
    stub.on("POST", "/api/v1/slice-workspace", err(409, "WORKSPACE_ALREADY_EXISTS", "Already Exists"))
    with pytest.raises(exceptions.WorkspaceAlreadyExists):
        egs.create_workspace("w", ["c"], ["n"], "u", "e@x", session)


def test_delete_list_and_kubeconfig(stub, session):
    stub.on("DELETE", "/api/v1/slice-workspace", ok(None))
    stub.on("GET", "/api/v1/slice-workspace/list", ok({"workspaces": [{
        "name": "ws", "overlayNetworkDeploymentMode": "single-network", "maxClusters": 16,
        "sliceDescription": "d", "clusters": ["worker-1"],
        "namespaces": [{"namespace": "ns1", "clusters": ["worker-1"]}]}]}))
    stub.on("POST", "/api/v1/slice-workspace/kube-config", ok({"kubeConfig": "apiVersion: v1\n"}))

    assert egs.delete_workspace("ws", session) is None
    workspaces = egs.list_workspaces(session)
    config = egs.get_workspace_kubeconfig("ws", "worker-1", session)

    delete, listing, kube = stub.api_calls()
    assert (delete.method, delete.body) == ("DELETE", {"workspaceName": "ws"})
    assert (listing.method, listing.body) == ("GET", None)
    assert (kube.method, kube.body) == ("POST", {"workspaceName": "ws", "clusterName": "worker-1"})
    assert [w.name for w in workspaces] == ["ws"]
    assert workspaces.workspaces[0].clusters == ["worker-1"]
    assert workspaces[0].namespaces[0].namespace == "ns1"
    assert workspaces[0].max_clusters == 16
    assert config == "apiVersion: v1\n"


@pytest.mark.parametrize("style", ["positional", "keyword"])
def test_get_wait_time(stub, session, style):
    answer = {"estimates": [{"clusterName": "worker-1", "estimatedWaitTime": "0h2m40s"}]}
    stub.on("POST", "/api/v1/gpr/waittime", ok(answer))
    if style == "positional":
        result = egs.get_wait_time(*(GPR_ARGS + (session,)))
    else:
        result = egs.get_wait_time(authenticated_session=session, **GPR_KWARGS)
    assert result == answer
    assert stub.api_calls()[0].body == GPR_BODY
    assert stub.calls("POST", "/api/v1/gpr") == []


def test_request_gpu_without_gpr_id_fails(stub, session):
    stub.on("POST", "/api/v1/gpr", ok({}))
    with pytest.raises(exceptions.EgsException):
        egs.request_gpu(*(GPR_ARGS + (session,)))


def test_request_gpu_unsatisfiable(stub, session):
    why = {"reason": "no node has 16 GPUs"}
    stub.on("POST", "/api/v1/gpr", err(422, "GPR_UNSATISFIABLE", "no node could ever fit", why))
    with pytest.raises(exceptions.Unsatisfiable) as info:
        egs.request_gpu(*(GPR_ARGS + (session,)))
    assert info.value.data == why


# ----- transport -------------------------------------------------------------------------------------


def test_one_connection_is_reused(stub, session):
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    for _ in range(4):
        egs.gpu_request_status("gpr-1", session)
    assert len({r.port for r in stub.calls()}) == 1
    assert len(stub.calls()) == 5


def test_connection_close_is_honoured(stub, session):
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE, {"Connection": "close"}), ok(GPR_WIRE))
    egs.gpu_request_status("gpr-1", session)
    egs.gpu_request_status("gpr-1", session)
    first, second = stub.calls("GET", "/api/v1/gpr")
    assert first.port != second.port


def test_idle_connection_dropped_by_server(stub, session):
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE, {"X-Stub-Silent-Close": "1"}), ok(GPR_WIRE))
    egs.gpu_request_status("gpr-1", session)
    assert egs.gpu_request_status("gpr-1", session).request_id == GPR_WIRE["gprId"]
    assert len(stub.calls("GET", "/api/v1/gpr")) == 2


def test_request_resent_once_when_reused_connection_was_dropped(stub, session, monkeypatch):
    # Defeat the idle check so that the request really goes out on the dead connection.
    stub.on("GET", "/api/v1/gpr", ok(GPR_WIRE, {"X-Stub-Silent-Close": "1"}), ok(GPR_WIRE))
    egs.gpu_request_status("gpr-1", session)
    import time
    time.sleep(0.2)  # let the server finish closing
    monkeypatch.setattr(client_mod.select, "select", lambda r, w, x, t: ([], [], []))
    assert egs.gpu_request_status("gpr-1", session).request_id == GPR_WIRE["gprId"]
    gets = stub.calls("GET", "/api/v1/gpr")
    assert len(gets) == 2
    assert gets[0].port != gets[1].port


def test_path_prefix_is_kept():
    s = Stub(prefix="/egs").start()
    try:
        s.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
        sess = egs.authenticate(s.url + "/", API_KEY, sdk_default=False)
        egs.gpu_request_status("gpr-1", sess)
        sess.close()
        assert [r.path for r in s.calls()] == ["/egs/api/v1/auth", "/egs/api/v1/gpr"]
    finally:
        s.stop()


def test_query_values_are_encoded(stub, session):
    stub.on("GET", "/api/v1/gpr/list", ok({"items": []}))
    egs.gpu_request_status_for_workspace("a b&c=d", session)
    req = stub.api_calls()[0]
    assert req.query == {"sliceName": ["a b&c=d"]}
    assert " " not in req.raw_path


def test_server_unreachable():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(exceptions.ServerUnreachable):
        egs.authenticate("http://127.0.0.1:%d" % port, API_KEY)


def test_endpoint_parsing_and_connection_settings():
    ctx = ssl.create_default_context()
    c = client_mod.EgsCoreApisClient("https://egs.example.com:8443/base/", api_key="k", ssl_context=ctx)
    assert (c.scheme, c.server_host, c.server_port, c.prefix) == ("https", "egs.example.com", 8443, "/base")
    conn = c._new_connection()
    assert type(conn).__name__ == "HTTPSConnection"
    assert conn.timeout == 30
    assert conn._context is ctx
    plain = client_mod.EgsCoreApisClient("egs.local", api_key="k")
    assert (plain.scheme, plain.server_port, plain.prefix) == ("http", 80, "")
    assert type(plain._new_connection()).__name__ == "HTTPConnection"
    assert client_mod.EgsCoreApisClient("https://h", api_key="k").server_port == 443
    with pytest.raises(ValueError):
        client_mod.EgsCoreApisClient("ftp://h", api_key="k")
    with pytest.raises(ValueError):
        client_mod.EgsCoreApisClient("http://h")


def test_secrets_never_shown(stub, session, caplog):
    caplog.set_level(logging.DEBUG, logger="egs")
    stub.on("GET", "/api/v1/gpr", err(409, "SOMETHING", "boom"))
    stub.expired_tokens.add(TOKEN_PREFIX + "1")  # forces a renewal, logged at debug level
    with pytest.raises(exceptions.EgsException) as info:
        egs.gpu_request_status("gpr-1", session)
    texts = [repr(session), str(session), repr(session.client), str(session.client),
             repr(info.value), str(info.value), caplog.text]
    assert len(stub.auth_calls()) == 2
    for text in texts:
        assert API_KEY not in text
        assert TOKEN_PREFIX not in text
    assert "127.0.0.1" in repr(session)


def test_threads_share_one_session(stub, session):
    stub.on("GET", "/api/v1/gpr", lambda req: ok(dict(GPR_WIRE, gprId=req.query["gprId"][0])))
    errors = []

    def worker(n):
        try:
            for i in range(10):
                gid = "gpr-%d-%d" % (n, i)
                assert egs.gpu_request_status(gid, session).request_id == gid
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(stub.calls("GET", "/api/v1/gpr")) == 80
    assert len(stub.auth_calls()) == 1


# ----- https against a local TLS stub ----------------------------------------------------------------


@pytest.fixture
def tls_stub(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
         str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True)
    s = Stub().start()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(cert), str(key))
    s.server.socket = server_ctx.wrap_socket(s.server.socket, server_side=True)
    yield s, str(cert)
    s.stop()


def test_https_verifies_certificates(tls_stub):
    s, cert = tls_stub
    s.on("GET", "/api/v1/gpr", ok(GPR_WIRE))
    url = "https://127.0.0.1:%d" % s.server.server_address[1]
    # The default context does not trust a self-signed certificate.
    with pytest.raises(exceptions.ServerUnreachable):
        egs.authenticate(url, API_KEY, sdk_default=False)
    trusted = ssl.create_default_context(cafile=cert)
    sess = egs.authenticate(url, API_KEY, sdk_default=False, ssl_context=trusted)
    assert egs.gpu_request_status("gpr-1", sess).request_id == GPR_WIRE["gprId"]
    sess.close()
    assert len(s.auth_calls()) == 1
    sess = egs.authenticate(url, API_KEY, sdk_default=False, ca_file=cert)  # the same, by file
    assert egs.gpu_request_status("gpr-1", sess).request_id == GPR_WIRE["gprId"]
    sess.close()
    with pytest.raises(ValueError):
        egs.authenticate(url, API_KEY, sdk_default=False, ca_file=cert, ssl_context=trusted)
    # another CA's file does not make the server trusted
    other = os.path.join(os.path.dirname(cert), "other.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", other + ".key", "-out",
                    other, "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    with pytest.raises(exceptions.ServerUnreachable):
        egs.authenticate(url, API_KEY, sdk_default=False, ca_file=other)

