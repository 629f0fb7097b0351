"""Authentication and authorization: API keys and bearer tokens (expiry, tampering, revocation, storage),
and every role's limits (Admin of every project or of one, Owner and Viewer of one workspace, Agent of one
cluster).  401 means "who are you?", 403 "you may not"; every refusal is checked by its errorKey and by
the stored state it must not have changed."""
import json
import os
import re
import sqlite3
import stat
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from conftest import STORE, Api, Cluster, Egsd, H100, T4, pg_schema, pg_server, store_query

ENVELOPE = {"statusCode", "status", "message", "data", "error"}
UNKNOWN_KEY = "7d0c5a54-4b4e-4c8e-9a51-2f8d1c0e6b3a"
FMT = "%Y-%m-%dT%H:%M:%SZ"


def ts(s):
    return datetime.strptime(s, FMT).replace(tzinfo=timezone.utc).timestamp()


def refused(status, doc, want_status, *keys, field=None):
    """Asserts an error answer: HTTP status, the exact envelope, one of the errorKeys (and the field)."""
    assert status == want_status, (status, doc)
    assert isinstance(doc, dict) and set(doc) == ENVELOPE, doc
    assert doc["statusCode"] == status and doc["status"] == "Error" and doc["data"] is None, doc
    assert doc["error"]["errorKey"] in keys, (keys, doc)
    if field is not None:
        assert (doc["error"]["data"] or {}).get("field") == field, (field, doc)
    return doc["error"]


def denied(status, doc, *not_found_keys):
    """403 FORBIDDEN, or 404 with a not-found errorKey where the object's existence is hidden."""
    assert status in (403, 404), (status, doc)
    if status == 403:
        return refused(status, doc, 403, "FORBIDDEN")
    return refused(status, doc, 404, *not_found_keys)


def auth(api, key):
    """POST /api/v1/auth; returns (token, X-Token-Expires-At as epoch seconds)."""
    status, body, resp = Api(api.port).raw("POST", "/api/v1/auth", '{"apiKey": "%s"}' % key)
    assert status == 200, body
    doc = json.loads(body)
    assert set(doc) <= ENVELOPE and doc["statusCode"] == 200
    assert set(doc["data"]) == {"token"}, doc  # exactly {"token": ...}: clients build objects from it
    hdr = resp.getheader("X-Token-Expires-At")
    assert hdr and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", hdr), hdr
    return doc["data"]["token"], ts(hdr)


def new_key(admin, role, **kw):
    body = {"name": "k-%s-%s" % (role.lower(), uuid.uuid4().hex[:8]), "role": role, "userName": "someone"}
    body.update(kw)
    return admin.ok("POST", "/api/v1/api-key", body)


# ---------------------------------------------------------------------------------------------------
# 401: no, garbage, unknown, expired, tampered or revoked credentials
# ---------------------------------------------------------------------------------------------------

PROTECTED = [("GET", "/api/v1/gpr/list", None), ("GET", "/api/v1/gpr?gprId=gpr-00000000-0000", None),
             ("POST", "/api/v1/gpr", {"gprName": "x", "sliceName": "w", "numberOfGPUNodes": 1, "exitDuration": "1h"}),
             ("PUT", "/api/v1/gpr", {"gprId": "gpr-00000000-0000", "priority": 5}),
             ("DELETE", "/api/v1/gpr", {"gprId": "gpr-00000000-0000"}),
             ("POST", "/api/v1/gpr/waittime", {"gprName": "x", "sliceName": "w", "numberOfGPUNodes": 1, "exitDuration": "1h"}),
             ("POST", "/api/v1/gpr/approve", {"gprId": "gpr-00000000-0000"}),
             ("GET", "/api/v1/slice-workspace/list", None),
             ("POST", "/api/v1/slice-workspace", {"workspaceName": "w", "clusters": ["c"]}),
             ("GET", "/api/v1/inventory/list", None), ("GET", "/api/v1/clusters", None),
             ("POST", "/api/v1/clusters", {"clusterName": "c"}),
             ("GET", "/api/v1/api-key/list", None), ("POST", "/api/v1/api-key", {"name": "n", "role": "Admin"}),
             ("DELETE", "/api/v1/api-key", {"name": "bootstrap-admin"}),
             ("POST", "/api/v1/projects", {"projectName": "p"}), ("GET", "/api/v1/events", None),
             ("GET", "/api/v1/nodes", None), ("GET", "/api/v1/gpus", None),
             ("POST", "/api/v1/agent/register", {"nodes": []}), ("GET", "/api/v1/agent/actions?wait=0", None),
             ("POST", "/api/v1/debug/clock", {"advance": "1h"}),
             ("PUT", "/api/v1/slice-workspace/policy", {"workspaceName": "w", "maxGPRs": 1}),
             ("GET", "/api/v1/slice-workspace/policy?workspaceName=w", None),
             ("DELETE", "/api/v1/slice-workspace/policy", {"workspaceName": "w"}),
             ("GET", "/api/v1/settings/policy", None), ("PUT", "/api/v1/settings/policy", {"maxNodesPerGpr": 1})]


def assert_nothing_stored(egsd):
    a = egsd.api()
    assert a.get("/api/v1/slice-workspace/list")["workspaces"] == []
    assert a.get("/api/v1/clusters")["items"] == []
    assert [k["name"] for k in a.get("/api/v1/api-key/list")["items"]] == ["bootstrap-admin"]
    assert [p["projectName"] for p in a.get("/api/v1/projects")["items"]] == ["default"]
    assert egsd.api().ok("POST", "/api/v1/debug/clock", {"advance": "1s"})["offsetSeconds"] == 1


@pytest.mark.parametrize("header", [None, "", "Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", "Token @KEY", "@KEY",
                                    "Bearer: @KEY", "Bearer\t@KEY"])
def test_missing_or_malformed_authorization_is_401(egsd, header):
    key = egsd.admin_key
    anon = Api(egsd.port)
    hdrs = {} if header is None else {"Authorization": header.replace("@KEY", key)}
    for method, path, body in PROTECTED:
        status, doc = anon.call(method, path, body, headers=hdrs)
        e = refused(status, doc, 401, "UNAUTHENTICATED")
        assert "Bearer" in e["message"] or "Unauthenticated" in e["message"], e
    assert_nothing_stored(egsd)


GARBAGE = ["garbage", "egs1.", "egs1.key-00000000-0000.99999999999." + "0" * 64, "egs1." + "a" * 8000,
           UNKNOWN_KEY, "@KEY_UPPER", "@KEY" + "0", "@KEY_FLIPPED", "@KEY_NODASH", "null", "\u00e9\u00e9",
           "Bearer @KEY", "@KEY @KEY", "egs1.@KEY"]


@pytest.mark.parametrize("cred", GARBAGE)
def test_garbage_bearer_is_401(egsd, cred):
    key = egsd.admin_key
    flipped = key[:-1] + ("0" if key[-1] != "0" else "1")
    cred = (cred.replace("@KEY_UPPER", key.upper()).replace("@KEY_FLIPPED", flipped)
            .replace("@KEY_NODASH", key.replace("-", "")).replace("@KEY", key))
    if cred == key.upper() and key.upper() == key:
        pytest.skip("the key has no letters")
    api = Api(egsd.port, cred)
    for method, path, body in PROTECTED:
        status, doc = api.call(method, path, body)
        refused(status, doc, 401, "UNAUTHENTICATED")
    assert_nothing_stored(egsd)


def test_auth_endpoint_answers(egsd):
    anon = Api(egsd.port)
    # malformed keys: 400 API_KEY_INVALID naming apiKey, with the public message
    for bad in ("not-a-key", "0000", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", egsd.admin_key + "0", " " + egsd.admin_key,
                egsd.admin_key.replace("-", "")):
        status, doc = anon.call("POST", "/api/v1/auth", {"apiKey": bad})
        e = refused(status, doc, 400, "API_KEY_INVALID", field="apiKey")
        assert e["message"].startswith("Api Key Configuration is invalid"), e
    # unknown but well-formed: 401
    e = refused(*anon.call("POST", "/api/v1/auth", {"apiKey": UNKNOWN_KEY}), 401, "UNAUTHENTICATED")
    assert e["message"] == "Unauthenticated"
    # field errors: 422 naming apiKey
    for body in ({}, {"apiKey": None}, {"apiKey": ""}, {"apiKey": 5}, {"apiKey": [egsd.admin_key]}):
        refused(*anon.call("POST", "/api/v1/auth", body), 422, "VALIDATION_FAILED", field="apiKey")
    refused(*anon.call("POST", "/api/v1/auth", {"apiKey": egsd.admin_key, "user": "x"}), 422, "VALIDATION_FAILED",
            field="user")
    refused(*anon.call("POST", "/api/v1/auth", b"{"), 400, "MALFORMED_JSON")
    # /auth itself needs no bearer, and a bad bearer on it is ignored
    assert Api(egsd.port, "garbage").call("POST", "/api/v1/auth", {"apiKey": egsd.admin_key})[0] == 200


def test_token_is_issued_and_accepted(egsd):
    key = egsd.admin_key
    t0 = time.time()
    token, exp = auth(egsd.api(), key)
    assert token.startswith("egs1.") and key not in token
    assert t0 + 3600 - 5 <= exp <= time.time() + 3600 + 5, (exp - t0)
    api = Api(egsd.port, token)
    assert api.get("/api/v1/gpr/list")["items"] == []
    assert api.ok("POST", "/api/v1/projects", {"projectName": "via-token"})["projectName"] == "via-token"
    # the key itself is a bearer too
    assert Api(egsd.port, key).get("/api/v1/projects")["items"]
    # each /auth mints a token; both work
    token2, _ = auth(egsd.api(), key)
    assert Api(egsd.port, token2).get("/api/v1/clusters")["items"] == []


def test_token_expires_on_the_real_clock(tmpdir_path):
    e = Egsd(os.path.join(tmpdir_path, "ttl"), dev_clock=False, extra=["--token-ttl", "2"]).start()
    try:
        key = e.admin_key
        t0 = time.time()
        token, exp = auth(e.api(), key)
        assert t0 + 0.5 <= exp <= t0 + 3.5, exp - t0
        api = Api(e.port, token)
        assert api.get("/api/v1/gpr/list")["items"] == []
        time.sleep(max(0.0, exp - time.time()) + 0.2)
        e1 = refused(*api.call("GET", "/api/v1/gpr/list"), 401, "TOKEN_EXPIRED")
        assert "expired" in e1["message"]
        refused(*api.call("POST", "/api/v1/projects", {"projectName": "late"}), 401, "TOKEN_EXPIRED")
        # the key still works, directly and through a fresh token
        assert Api(e.port, key).get("/api/v1/gpr/list")["items"] == []
        fresh, _ = auth(e.api(), key)
        assert Api(e.port, fresh).get("/api/v1/gpr/list")["items"] == []
        assert [p["projectName"] for p in e.api().get("/api/v1/projects")["items"]] == ["default"]
    finally:
        e.stop()


def test_token_expires_on_the_dev_clock(egsd):
    admin = egsd.api()
    token, exp = auth(admin, egsd.admin_key)
    api = Api(egsd.port, token)
    admin.ok("POST", "/api/v1/debug/clock", {"advance": "59m"})
    assert api.get("/api/v1/clusters")["items"] == []
    admin.ok("POST", "/api/v1/debug/clock", {"advance": "1m"})
    refused(*api.call("GET", "/api/v1/clusters"), 401, "TOKEN_EXPIRED")
    assert admin.get("/api/v1/clusters")["items"] == []


def test_tampered_tokens_are_refused(egsd):
    admin = egsd.api()
    viewer = new_key(admin, "Viewer")
    admin_id = [k["keyId"] for k in admin.get("/api/v1/api-key/list")["items"] if k["name"] == "bootstrap-admin"][0]
    tok, _ = auth(admin, egsd.admin_key)
    vtok, _ = auth(admin, viewer["apiKey"])
    prefix, kid, exp, mac = tok.split(".")
    vprefix, vkid, vexp, vmac = vtok.split(".")
    assert (prefix, kid) == ("egs1", admin_id) and len(mac) == 64 and vkid == viewer["keyId"]
    flip = lambda c: "1" if c == "0" else "0"
    tampered = {
        "mac-last": ".".join([prefix, kid, exp, mac[:-1] + flip(mac[-1])]),
        "mac-first": ".".join([prefix, kid, exp, flip(mac[0]) + mac[1:]]),
        "mac-upper": ".".join([prefix, kid, exp, mac.upper()]) if mac.upper() != mac else None,
        "mac-short": ".".join([prefix, kid, exp, mac[:-1]]),
        "mac-long": ".".join([prefix, kid, exp, mac + "0"]),
        "mac-empty": ".".join([prefix, kid, exp, ""]),
        "mac-zero": ".".join([prefix, kid, exp, "0" * 64]),
        "exp-later": ".".join([prefix, kid, str(int(exp) + 86400 * 365), mac]),
        "exp-earlier": ".".join([prefix, kid, str(int(exp) - 1), mac]),
        "exp-leading-zero": ".".join([prefix, kid, "0" + exp, mac]),
        "id-swapped": ".".join([prefix, viewer["keyId"], exp, mac]),
        "viewer-escalates-to-admin": ".".join([vprefix, admin_id, vexp, vmac]),
        "viewer-mac-on-admin": ".".join([prefix, kid, exp, vmac]),
        "prefix": ".".join(["egs2", kid, exp, mac]),
        "extra-part": ".".join([prefix, "x", kid, exp, mac]),
        "nul": tok[:10] + "%00" + tok[10:],
    }
    for name, t in tampered.items():
        if t is None:
            continue
        api = Api(egsd.port, t)
        status, doc = api.call("GET", "/api/v1/api-key/list")
        refused(status, doc, 401, "UNAUTHENTICATED")
        refused(*api.call("POST", "/api/v1/projects", {"projectName": "p-" + name.replace("-", "")[:20].lower()}),
                401, "UNAUTHENTICATED")
    assert [p["projectName"] for p in admin.get("/api/v1/projects")["items"]] == ["default"]
    # the originals still work, each with its own role
    assert Api(egsd.port, tok).get("/api/v1/api-key/list")["items"]
    refused(*Api(egsd.port, vtok).call("GET", "/api/v1/api-key/list"), 403, "FORBIDDEN")


def test_key_validity_and_expiry(egsd):
    admin = egsd.api()
    now = time.time()
    day = new_key(admin, "Viewer", validity="1d")
    assert abs(ts(day["validUntil"]) - (now + 86400)) < 10, day
    listed = {k["keyId"]: k for k in admin.get("/api/v1/api-key/list")["items"]}
    assert listed[day["keyId"]]["validUntil"] == day["validUntil"]
    tok, exp = auth(admin, day["apiKey"])
    assert abs(exp - (now + 3600)) < 10
    # a token never outlives its key
    short = new_key(admin, "Viewer", validity="30m")
    _, sexp = auth(admin, short["apiKey"])
    assert sexp == ts(short["validUntil"]), (sexp, short["validUntil"])
    # dates and RFC 3339 times
    d = (datetime.now(timezone.utc) + timedelta(days=400)).strftime("%Y-%m-%d")
    assert new_key(admin, "Owner", validity=d)["validUntil"] == d + "T00:00:00Z"
    t = (datetime.now(timezone.utc) + timedelta(days=3)).strftime(FMT)
    assert new_key(admin, "Owner", validity=t)["validUntil"] == t
    for bad in ("2020-01-01", "yesterday", "-1d", "0d", "2020-01-01T00:00:00Z", 90):
        refused(*admin.call("POST", "/api/v1/api-key", {"name": "bad-validity", "role": "Viewer", "validity": bad}),
                422, "VALIDATION_FAILED", field="validity")
    assert Api(egsd.port, day["apiKey"]).get("/api/v1/gpr/list")["items"] == []
    admin.ok("POST", "/api/v1/debug/clock", {"advance": "2d"})
    e = refused(*Api(egsd.port).call("POST", "/api/v1/auth", {"apiKey": day["apiKey"]}), 401, "API_KEY_EXPIRED")
    assert e["message"] == "Api Key has expired"
    refused(*Api(egsd.port, day["apiKey"]).call("GET", "/api/v1/gpr/list"), 401, "API_KEY_EXPIRED")
    refused(*Api(egsd.port, tok).call("GET", "/api/v1/gpr/list"), 401, "TOKEN_EXPIRED", "API_KEY_EXPIRED")
    refused(*Api(egsd.port, short["apiKey"]).call("GET", "/api/v1/gpr/list"), 401, "API_KEY_EXPIRED")
    # keys without validity are unaffected
    assert admin.get("/api/v1/gpr/list")["items"] == []
    assert auth(admin, egsd.admin_key)[0]


def auth_cache(admin):
    """egs_auth_cache_total from /metrics: {"hit": n, "miss": n}."""
    text = admin.raw("GET", "/metrics")[1].decode()
    got = dict(re.findall(r'^egs_auth_cache_total\{result="(hit|miss)"\} (\d+)$', text, re.M))
    assert set(got) == {"hit", "miss"}, "egs_auth_cache_total missing from /metrics"
    return {k: int(v) for k, v in got.items()}


def test_two_credentials_of_one_set_both_stay_cached(tmpdir_path, monkeypatch):
    """The credential cache keeps two slots a set, the least recently used giving way (auth.c); every
    credential in one set here (EGS_TEST_AUTH_CACHE_SETS=1).  Direct-mapped, the admin key and k would
    push each other out on every use."""
    monkeypatch.setenv("EGS_TEST_AUTH_CACHE_SETS", "1")
    e = Egsd(os.path.join(tmpdir_path, "egsd")).start()
    try:
        admin = e.api()
        k = new_key(admin, "Admin")
        tok, _ = auth(admin, k["apiKey"])
        ka, ta = Api(e.port, k["apiKey"]), Api(e.port, tok)
        c0 = auth_cache(admin)  # the admin key: cached from here on
        assert ka.get("/api/v1/projects")["items"]  # k: a miss, then kept beside the admin key
        assert ka.get("/api/v1/projects")["items"]  # a hit
        c1 = auth_cache(admin)  # a hit: the admin key stayed
        assert c1 == {"hit": c0["hit"] + 2, "miss": c0["miss"] + 1}, (c0, c1)
        assert ta.get("/api/v1/projects")["items"]  # the token: a miss; k, used least recently, gives way
        c2 = auth_cache(admin)
        assert c2 == {"hit": c1["hit"] + 1, "miss": c1["miss"] + 1}, (c1, c2)
        assert ta.get("/api/v1/projects")["items"]  # kept
        assert ka.get("/api/v1/projects")["items"]  # k again: a miss; the admin key gives way this time
        assert ta.get("/api/v1/projects")["items"]  # the token stayed
        c3 = auth_cache(admin)  # a miss: the admin key was the one used least recently
        assert c3 == {"hit": c2["hit"] + 2, "miss": c2["miss"] + 2}, (c2, c3)
    finally:
        e.stop()


def test_deleted_key_is_revoked_at_once(egsd):
    admin = egsd.api()
    k = new_key(admin, "Admin")
    tok, _ = auth(admin, k["apiKey"])
    assert Api(egsd.port, k["apiKey"]).get("/api/v1/projects")["items"]
    assert Api(egsd.port, tok).get("/api/v1/projects")["items"]
    # both are now answered from the credential cache (auth.c): revocation must still hold at once
    before = auth_cache(admin)
    assert Api(egsd.port, k["apiKey"]).get("/api/v1/projects")["items"]
    assert Api(egsd.port, tok).get("/api/v1/projects")["items"]
    after = auth_cache(admin)
    assert after == {"hit": before["hit"] + 3, "miss": before["miss"]}, (before, after)  # 3: the metrics read too
    # a cached credential's text with one character changed is checked afresh, and refused
    for cred in (k["apiKey"][:-1] + ("0" if k["apiKey"][-1] != "0" else "1"), tok[:-1] + ("0" if tok[-1] != "0" else "1")):
        refused(*Api(egsd.port, cred).call("GET", "/api/v1/projects"), 401, "UNAUTHENTICATED")
    assert admin.ok("DELETE", "/api/v1/api-key", {"keyId": k["keyId"]}) == {"keyId": k["keyId"]}
    refused(*Api(egsd.port, k["apiKey"]).call("GET", "/api/v1/projects"), 401, "UNAUTHENTICATED")
    refused(*Api(egsd.port, tok).call("GET", "/api/v1/projects"), 401, "UNAUTHENTICATED")
    refused(*Api(egsd.port, tok).call("POST", "/api/v1/projects", {"projectName": "ghost"}), 401, "UNAUTHENTICATED")
    refused(*Api(egsd.port).call("POST", "/api/v1/auth", {"apiKey": k["apiKey"]}), 401, "UNAUTHENTICATED")
    refused(*admin.call("DELETE", "/api/v1/api-key", {"keyId": k["keyId"]}), 404, "API_KEY_NOT_FOUND", field="keyId")
    assert k["keyId"] not in [x["keyId"] for x in admin.get("/api/v1/api-key/list")["items"]]
    # deletion by name revokes just the same
    k2 = new_key(admin, "Owner")
    admin.ok("DELETE", "/api/v1/api-key", {"name": k2["name"]})
    refused(*Api(egsd.port, k2["apiKey"]).call("GET", "/api/v1/gpr/list"), 401, "UNAUTHENTICATED")
    # a key cannot delete itself (through a token either); agent keys are not deleted here
    self_id = [x["keyId"] for x in admin.get("/api/v1/api-key/list")["items"] if x["name"] == "bootstrap-admin"][0]
    refused(*admin.call("DELETE", "/api/v1/api-key", {"keyId": self_id}), 409, "API_KEY_IN_USE")
    refused(*Api(egsd.port, auth(admin, egsd.admin_key)[0]).call("DELETE", "/api/v1/api-key", {"keyId": self_id}),
            409, "API_KEY_IN_USE")
    agent = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})
    agent_id = [x["keyId"] for x in admin.get("/api/v1/api-key/list")["items"] if x.get("clusterName") == "c1"][0]
    refused(*admin.call("DELETE", "/api/v1/api-key", {"keyId": agent_id}), 404, "API_KEY_NOT_FOUND")
    assert Api(egsd.port, agent["agentToken"]).ok("POST", "/api/v1/agent/register", {"clusterName": "c1", "nodes": []})
    # survives a restart: still revoked
    egsd.stop()
    egsd.start()
    refused(*Api(egsd.port, k["apiKey"]).call("GET", "/api/v1/projects"), 401, "UNAUTHENTICATED")
    assert Api(egsd.port, tok).call("GET", "/api/v1/projects")[0] == 401


def read_if_there(path):
    """A live server's file, or nothing when the server removed it after the walk listed it (it rewrites
    e.g. base/*/pg_internal.init as catalogs change): a removed file keeps no bytes to search."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def store_contents(egsd):
    """Every byte the store keeps on disk, a text dump of it, and (id, hash bytes) per API key."""
    if STORE == "postgres":
        pg = pg_server()
        files = [os.path.join(d, f) for sub in ("base", "pg_wal") for d, _, fs in os.walk(os.path.join(pg.data, sub))
                 for f in fs]
        blobs = b"".join(read_if_there(p) for p in files)
        rows = [(i, bytes.fromhex(h)) for i, h in store_query(egsd, "SELECT id, encode(hash, 'hex') FROM api_keys")]
        return blobs, pg.dump(pg_schema(egsd.data_dir)), rows
    db = os.path.join(egsd.data_dir, "egs.db")
    blobs = b"".join(open(p, "rb").read() for p in (db, db + "-wal", db + "-shm") if os.path.exists(p))
    conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return blobs, "\n".join(conn.iterdump()), conn.execute("SELECT id, hash FROM api_keys").fetchall()
    finally:
        conn.close()


def test_keys_are_random_stored_hashed_and_never_shown_or_logged(egsd):
    admin = egsd.api()
    keys = [new_key(admin, r, **({"validity": "90d"} if r == "Viewer" else {})) for r in ("Admin", "Owner", "Viewer")]
    agent_token = admin.ok("POST", "/api/v1/clusters", {"clusterName": "c1"})["agentToken"]
    secrets = [egsd.admin_key, agent_token] + [k["apiKey"] for k in keys]
    for s in secrets:
        u = uuid.UUID(s)
        assert str(u) == s and u.version == 4 and u.variant == uuid.RFC_4122, s
    assert len(set(secrets)) == len(secrets)
    tokens = [auth(admin, s)[0] for s in secrets]
    for s, t in zip(secrets, tokens):  # use every credential so that the access log has lines for it
        Api(egsd.port, s).call("GET", "/api/v1/gpr/list")
        Api(egsd.port, t).call("GET", "/api/v1/gpr/list")
        Api(egsd.port).call("POST", "/api/v1/auth", {"apiKey": s})
    # the list never shows a key
    listed = admin.get("/api/v1/api-key/list")["items"]
    dump = repr(listed)
    for s in secrets:
        assert s not in dump and s.replace("-", "") not in dump
    for item in listed:
        assert "apiKey" not in item and "hash" not in item and "token" not in item, item
    # the admin key file is private
    assert stat.S_IMODE(os.stat(os.path.join(egsd.data_dir, "admin.key")).st_mode) == 0o600
    # the store: no key text in any form, in the database, its WAL or anywhere in a dump; a 32-byte hash per key
    blobs, text_dump, rows = store_contents(egsd)
    for s in secrets + tokens:
        for form in (s, s.upper(), s.replace("-", "")):
            assert form.encode() not in blobs, "key text stored: %s" % form
            assert form not in text_dump
    for s in secrets:
        assert uuid.UUID(s).bytes not in blobs  # not even as 16 raw bytes
    by_id = {r[0]: r[1] for r in rows}
    for k in keys:
        assert isinstance(by_id[k["keyId"]], bytes) and len(by_id[k["keyId"]]) == 32
    assert len(set(by_id.values())) == len(by_id) == len(secrets)
    # ... nor in egsd's log
    egsd.stop()
    egsd.start()
    log = egsd.logs()
    for s in secrets + tokens:
        assert s not in log and s.replace("-", "") not in log, "secret in the log"
    for t in tokens:
        assert t.split(".")[-1] not in log  # not even the MAC


# ---------------------------------------------------------------------------------------------------
# 403: roles and scopes, on one shared world
# ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world():
    with tempfile.TemporaryDirectory(prefix="egs-auth-") as tmp:
        c = Cluster(tmp)
        try:
            c.add_cluster("worker-1", [("h100-1", H100), ("h100-2", H100)])
            c.add_cluster("worker-2", [("t4-1", T4)])
            c.workspace("a", ["worker-1"])
            c.workspace("b", ["worker-1", "worker-2"])
            ga = c.gpr(sliceName="a", clusterName="worker-1", exitDuration="10h")
            gb = c.gpr(sliceName="b", clusterName="worker-1", exitDuration="10h")
            c.wait_state(ga, "Provisioned")
            c.wait_state(gb, "Provisioned")
            gbq = c.gpr(sliceName="b", exitDuration="1h", priority=150)
            assert c.status(gbq)["status"]["provisioningStatus"] == "Queued"
            admin = c.admin
            keys = {name: new_key(admin, role, **kw) for name, role, kw in [
                ("owner_a", "Owner", {"workspaceName": "a"}), ("viewer_a", "Viewer", {"workspaceName": "a"}),
                ("viewer_all", "Viewer", {}), ("owner_b", "Owner", {"workspaceName": "b"})]}
            admin.ok("POST", "/api/v1/projects", {"projectName": "x"})
            keys["admin_x"] = new_key(admin, "Admin", projectName="x")
            yield SimpleNamespace(c=c, admin=admin, ga=ga, gb=gb, gbq=gbq, keys=keys,
                                  api=lambda name: Api(c.egsd.port, keys[name]["apiKey"]),
                                  agent=lambda cl: Api(c.egsd.port, c.tokens[cl]),
                                  slice_token=c.slice_token)
        finally:
            c.close()


def gpr_view(w, gid):
    g = w.c.status(gid)
    return (g["gprName"], g["priority"], g["status"]["provisioningStatus"], g["earlyRelease"], g["exitDuration"])


def world_view(w):
    a = w.admin
    return {"ws": a.get("/api/v1/slice-workspace/list"), "clusters": sorted(c["clusterName"] for c in a.get("/api/v1/clusters")["items"]),
            "keys": sorted(k["keyId"] for k in a.get("/api/v1/api-key/list")["items"]),
            "projects": sorted(p["projectName"] for p in a.get("/api/v1/projects")["items"]),
            "gprs": {g: gpr_view(w, g) for g in (w.ga, w.gb, w.gbq)},
            "policies": [a.get("/api/v1/slice-workspace/policy?workspaceName=" + x) for x in ("a", "b")] +
                        [a.get("/api/v1/settings/policy")]}


def gpr_body(ws, **kw):
    b = {"gprName": "j", "sliceName": ws, "numberOfGPUNodes": 1, "exitDuration": "1h"}
    b.update(kw)
    return b


def test_owner_manages_the_gprs_of_its_workspace(world):
    w = world
    token, _ = auth(w.admin, w.keys["owner_a"]["apiKey"])
    for api in (w.api("owner_a"), Api(w.c.egsd.port, token)):
        gid = api.ok("POST", "/api/v1/gpr", gpr_body("a", priority=120))["gprId"]
        g = api.get("/api/v1/gpr?gprId=" + gid)
        assert g["sliceName"] == "a" and g["status"]["provisioningStatus"] == "Queued"
        assert gid in [x["gprId"] for x in api.get("/api/v1/gpr/list?sliceName=a")["items"]]
        mine = api.get("/api/v1/gpr/list")["items"]
        assert {x["sliceName"] for x in mine} == {"a"} and w.ga in [x["gprId"] for x in mine]
        assert w.gb not in [x["gprId"] for x in mine] and w.gbq not in [x["gprId"] for x in mine]
        assert [x["name"] for x in api.get("/api/v1/slice-workspace/list")["workspaces"]] == ["a"]
        api.ok("PUT", "/api/v1/gpr", {"gprId": gid, "priority": 130, "gprName": "renamed"})
        assert api.get("/api/v1/gpr?gprId=" + gid)["priority"] == 130
        assert api.ok("POST", "/api/v1/gpr/waittime", gpr_body("a"))["items"]
        api.ok("DELETE", "/api/v1/gpr", {"gprId": gid})
        assert api.get("/api/v1/gpr?gprId=" + gid)["status"]["provisioningStatus"] == "Cancelled"
        w.slice_token("a", "worker-1")
        assert "kubeConfig" in api.ok("POST", "/api/v1/slice-workspace/kube-config",
                                      {"workspaceName": "a", "clusterName": "worker-1"})


def test_owner_cannot_touch_another_workspace(world):
    w = world
    before = world_view(w)
    token, _ = auth(w.admin, w.keys["owner_a"]["apiKey"])
    for api in (w.api("owner_a"), Api(w.c.egsd.port, token)):
        denied(*api.call("GET", "/api/v1/gpr?gprId=" + w.gb), "GPR_NOT_FOUND")
        denied(*api.call("GET", "/api/v1/gpr?gprId=" + w.gbq), "GPR_NOT_FOUND")
        denied(*api.call("GET", "/api/v1/gpr/list?sliceName=b"), "WORKSPACE_NOT_FOUND")
        denied(*api.call("DELETE", "/api/v1/gpr", {"gprId": w.gbq}), "GPR_NOT_FOUND")
        denied(*api.call("PUT", "/api/v1/gpr", {"gprId": w.gbq, "priority": 300}), "GPR_NOT_FOUND")
        denied(*api.call("PUT", "/api/v1/gpr", {"gprId": w.gbq, "gprName": "mine"}), "GPR_NOT_FOUND")
        denied(*api.call("PUT", "/api/v1/gpr", {"gprId": w.gb, "earlyRelease": True}), "GPR_NOT_FOUND")
        denied(*api.call("POST", "/api/v1/gpr", gpr_body("b")), "WORKSPACE_NOT_FOUND")
        denied(*api.call("POST", "/api/v1/gpr/waittime", gpr_body("b")), "WORKSPACE_NOT_FOUND")
        denied(*api.call("GET", "/api/v1/slice-workspace?workspaceName=b"), "WORKSPACE_NOT_FOUND")
        denied(*api.call("GET", "/api/v1/inventory?sliceName=b"), "WORKSPACE_NOT_FOUND")
        denied(*api.call("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "b", "clusterName": "worker-1"}),
               "WORKSPACE_NOT_FOUND")
        assert api.get("/api/v1/events?gprId=" + w.gb)["items"] == []
        assert api.get("/api/v1/events?workspace=b")["items"] == []
        assert "b" not in [x["name"] for x in api.get("/api/v1/slice-workspace/list")["workspaces"]]
        # worker-2 belongs to workspace b only: its nodes are not in a's inventory
        assert "worker-2" not in {n["clusterName"] for n in api.get("/api/v1/inventory/list")["items"]}
        assert "worker-2" not in {c["clusterName"] for c in api.get("/api/v1/clusters")["items"]}
    assert world_view(w) == before


ADMIN_ONLY = [("POST", "/api/v1/slice-workspace", {"workspaceName": "evil", "clusters": ["worker-1"]}),
              ("PUT", "/api/v1/slice-workspace", {"workspaceName": "a", "addClusters": ["worker-2"]}),
              ("DELETE", "/api/v1/slice-workspace", {"workspaceName": "a"}),
              ("POST", "/api/v1/clusters", {"clusterName": "evil"}),
              ("PUT", "/api/v1/clusters", {"clusterName": "worker-1", "apiServer": "https://evil.example"}),
              ("POST", "/api/v1/api-key", {"name": "evil", "role": "Admin"}),
              ("POST", "/api/v1/api-key", {"name": "evil2", "role": "Owner", "workspaceName": "a"}),
              ("GET", "/api/v1/api-key/list", None),
              ("DELETE", "/api/v1/api-key", {"name": "bootstrap-admin"}),
              ("POST", "/api/v1/projects", {"projectName": "evil"}), ("GET", "/api/v1/projects", None),
              ("POST", "/api/v1/debug/clock", {"advance": "10h"}),
              ("POST", "/api/v1/gpr/approve", {"gprId": "@GBQ"}), ("POST", "/api/v1/gpr/reject", {"gprId": "@GBQ"}),
              ("GET", "/api/v1/nodes", None), ("GET", "/api/v1/gpus", None),
              ("PUT", "/api/v1/slice-workspace/policy", {"workspaceName": "a", "maxGPRs": 100}),
              ("DELETE", "/api/v1/slice-workspace/policy", {"workspaceName": "a"}),
              ("PUT", "/api/v1/settings/policy", {"maxNodesPerGpr": 1024}),
              ("POST", "/api/v1/agent/register", {"clusterName": "worker-1", "nodes": []}),
              ("POST", "/api/v1/agent/heartbeat", {"clusterName": "worker-1", "nodes": []}),
              ("GET", "/api/v1/agent/actions?wait=0", None),
              ("POST", "/api/v1/agent/actions/result", {"type": "detach", "gprId": "@GB", "node": "h100-1", "ok": False})]


def subst(w, body):
    if body is None:
        return None
    return {k: {"@GB": w.gb, "@GBQ": w.gbq}.get(v, v) if isinstance(v, str) else v for k, v in body.items()}


@pytest.mark.parametrize("who", ["owner_a", "viewer_a", "viewer_all"])
def test_owners_and_viewers_cannot_administer(world, who):
    w = world
    before = world_view(w)
    api = w.api(who)
    for method, path, body in ADMIN_ONLY:
        refused(*api.call(method, path, subst(w, body)), 403, "FORBIDDEN")
    assert world_view(w) == before
    assert [n["nodeHealth"] for n in w.c.schedulable_nodes("worker-1")] == ["Healthy", "Healthy"]


def test_owner_key_cannot_create_keys(world):
    w = world
    for body in ({"name": "o1", "role": "Owner", "workspaceName": "a"}, {"name": "o2", "role": "Viewer", "workspaceName": "a"},
                 {"name": "o3", "role": "Admin"}):
        refused(*w.api("owner_a").call("POST", "/api/v1/api-key", body), 403, "FORBIDDEN")
        refused(*w.api("viewer_all").call("POST", "/api/v1/api-key", body), 403, "FORBIDDEN")
    assert not {"o1", "o2", "o3"} & {k["name"] for k in w.admin.get("/api/v1/api-key/list")["items"]}


def test_viewer_reads_its_scope_and_never_writes(world):
    w = world
    before = world_view(w)
    token, _ = auth(w.admin, w.keys["viewer_a"]["apiKey"])
    for api in (w.api("viewer_a"), Api(w.c.egsd.port, token)):
        assert api.get("/api/v1/gpr?gprId=" + w.ga)["gprId"] == w.ga
        assert {x["sliceName"] for x in api.get("/api/v1/gpr/list")["items"]} == {"a"}
        assert api.get("/api/v1/gpr/list?sliceName=a")["items"]
        assert [x["name"] for x in api.get("/api/v1/slice-workspace/list")["workspaces"]] == ["a"]
        assert api.get("/api/v1/slice-workspace?workspaceName=a")["name"] == "a"
        assert {n["clusterName"] for n in api.get("/api/v1/inventory/list")["items"]} == {"worker-1"}
        assert api.get("/api/v1/inventory?sliceName=a")["items"]
        assert [c["clusterName"] for c in api.get("/api/v1/clusters")["items"]] == ["worker-1"]
        assert api.get("/api/v1/events?workspace=a")["items"]
        denied(*api.call("GET", "/api/v1/gpr?gprId=" + w.gb), "GPR_NOT_FOUND")
        for method, path, body in [("POST", "/api/v1/gpr", gpr_body("a")),
                                   ("PUT", "/api/v1/gpr", {"gprId": w.ga, "priority": 300}),
                                   ("PUT", "/api/v1/gpr", {"gprId": w.ga, "earlyRelease": True}),
                                   ("DELETE", "/api/v1/gpr", {"gprId": w.ga}),
                                   ("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "a", "clusterName": "worker-1"}),
                                   ("POST", "/api/v1/slice-workspace", {"workspaceName": "v", "clusters": ["worker-1"]})]:
            refused(*api.call(method, path, body), 403, "FORBIDDEN")
    # an unscoped viewer reads every workspace of its project, and still writes nothing
    va = w.api("viewer_all")
    assert {x["name"] for x in va.get("/api/v1/slice-workspace/list")["workspaces"]} == {"a", "b"}
    assert va.get("/api/v1/gpr?gprId=" + w.gbq)["gprId"] == w.gbq
    refused(*va.call("DELETE", "/api/v1/gpr", {"gprId": w.gbq}), 403, "FORBIDDEN")
    refused(*va.call("PUT", "/api/v1/gpr", {"gprId": w.gbq, "priority": 1}), 403, "FORBIDDEN")
    assert world_view(w) == before


def test_viewer_can_ask_for_a_wait_time(world):
    """POST /api/v1/gpr/waittime computes and stores nothing, and its role check admits Viewers."""
    w = world
    for who in ("viewer_a", "viewer_all"):
        status, doc = w.api(who).call("POST", "/api/v1/gpr/waittime", gpr_body("a"))
        assert status == 200 and doc["data"]["items"], (who, status, doc)
    denied(*w.api("viewer_a").call("POST", "/api/v1/gpr/waittime", gpr_body("b")), "WORKSPACE_NOT_FOUND")


def test_agent_token_only_on_agent_routes_of_its_cluster(world):
    w = world
    before = world_view(w)
    tok1 = w.c.tokens["worker-1"]
    bearer, _ = auth(w.admin, tok1)
    for api in (w.agent("worker-1"), Api(w.c.egsd.port, bearer)):
        for method, path, body in [("GET", "/api/v1/gpr/list", None), ("POST", "/api/v1/gpr", gpr_body("a")),
                                   ("PUT", "/api/v1/gpr", {"gprId": w.gbq, "priority": 1}),
                                   ("DELETE", "/api/v1/gpr", {"gprId": w.gbq}),
                                   ("POST", "/api/v1/gpr/waittime", gpr_body("a")),
                                   ("GET", "/api/v1/slice-workspace/list", None),
                                   ("POST", "/api/v1/slice-workspace", {"workspaceName": "ag", "clusters": ["worker-1"]}),
                                   ("GET", "/api/v1/inventory/list", None), ("GET", "/api/v1/inventory?sliceName=a", None),
                                   ("GET", "/api/v1/clusters", None), ("POST", "/api/v1/clusters", {"clusterName": "ag"}),
                                   ("GET", "/api/v1/api-key/list", None),
                                   ("POST", "/api/v1/api-key", {"name": "ag", "role": "Admin"}),
                                   ("GET", "/api/v1/events", None), ("GET", "/api/v1/nodes", None),
                                   ("POST", "/api/v1/projects", {"projectName": "ag"}),
                                   ("POST", "/api/v1/debug/clock", {"advance": "1h"}),
                                   ("POST", "/api/v1/gpr/approve", {"gprId": w.gbq})]:
            status, doc = api.call(method, path, body)
            refused(status, doc, 403, "FORBIDDEN")
        denied(*api.call("GET", "/api/v1/gpr?gprId=" + w.ga), "GPR_NOT_FOUND")
        denied(*api.call("GET", "/api/v1/slice-workspace?workspaceName=a"), "WORKSPACE_NOT_FOUND")
        denied(*api.call("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "a", "clusterName": "worker-1"}),
               "WORKSPACE_NOT_FOUND")
        # another cluster's agent routes
        for path, body in [("/api/v1/agent/register", {"clusterName": "worker-2", "nodes": []}),
                           ("/api/v1/agent/heartbeat", {"clusterName": "worker-2", "nodes": [{"name": "t4-1", "health": "Unhealthy"}]}),
                           ("/api/v1/agent/actions/result", {"clusterName": "worker-2", "type": "attach", "gprId": w.gb,
                                                             "node": "t4-1", "ok": False, "message": "x"})]:
            refused(*api.call("POST", path, body), 403, "FORBIDDEN", field="clusterName")
        # another cluster's node, named without clusterName, is not found in its own cluster
        refused(*api.call("POST", "/api/v1/agent/actions/result", {"type": "attach", "gprId": w.gb, "node": "t4-1",
                                                                   "ok": False}), 404, "NODE_NOT_FOUND")
        assert api.ok("GET", "/api/v1/agent/actions?wait=0")["actions"] == []
    assert world_view(w) == before
    assert {n["gpuNodeName"]: n["nodeHealth"] for n in w.admin.get("/api/v1/inventory/list")["items"]}["t4-1"] == "Healthy"


@pytest.mark.parametrize("who", ["admin", "owner_a"])
def test_user_keys_cannot_call_agent_routes(world, who):
    w = world
    api = w.admin if who == "admin" else w.api(who)
    for method, path, body in [("POST", "/api/v1/agent/register", {"nodes": []}),
                               ("POST", "/api/v1/agent/heartbeat", {"nodes": []}),
                               ("GET", "/api/v1/agent/actions?wait=0", None),
                               ("POST", "/api/v1/agent/actions/result", {"type": "detach", "gprId": w.ga,
                                                                         "node": "h100-1", "ok": True})]:
        refused(*api.call(method, path, body), 403, "FORBIDDEN")


def test_project_admin_sees_and_touches_only_its_project(world):
    w = world
    ax = w.api("admin_x")
    before = world_view(w)
    owner_a_id = w.keys["owner_a"]["keyId"]
    # reads: nothing of the default project
    assert ax.get("/api/v1/slice-workspace/list")["workspaces"] == []
    assert ax.get("/api/v1/clusters")["items"] == []
    assert ax.get("/api/v1/gpr/list")["items"] == []
    assert ax.get("/api/v1/inventory/list")["items"] == []
    assert ax.get("/api/v1/nodes")["items"] == [] and ax.get("/api/v1/gpus")["items"] == []
    assert {k["projectName"] for k in ax.get("/api/v1/api-key/list")["items"]} == {"x"}
    assert [p["projectName"] for p in ax.get("/api/v1/projects")["items"]] == ["x"]
    assert all(e["workspace"] not in ("a", "b") for e in ax.get("/api/v1/events")["items"])
    # single objects: not found
    for method, path, body, key in [
            ("GET", "/api/v1/slice-workspace?workspaceName=a", None, "WORKSPACE_NOT_FOUND"),
            ("PUT", "/api/v1/slice-workspace", {"workspaceName": "a", "description": "x"}, "WORKSPACE_NOT_FOUND"),
            ("DELETE", "/api/v1/slice-workspace", {"workspaceName": "b"}, "WORKSPACE_NOT_FOUND"),
            ("POST", "/api/v1/slice-workspace/kube-config", {"workspaceName": "a", "clusterName": "worker-1"}, "WORKSPACE_NOT_FOUND"),
            ("PUT", "/api/v1/clusters", {"clusterName": "worker-1", "apiServer": "https://evil.example"}, "CLUSTER_NOT_FOUND"),
            ("GET", "/api/v1/gpr?gprId=" + w.ga, None, "GPR_NOT_FOUND"),
            ("PUT", "/api/v1/gpr", {"gprId": w.gbq, "priority": 1}, "GPR_NOT_FOUND"),
            ("PUT", "/api/v1/gpr", {"gprId": w.ga, "earlyRelease": True}, "GPR_NOT_FOUND"),
            ("DELETE", "/api/v1/gpr", {"gprId": w.gbq}, "GPR_NOT_FOUND"),
            ("POST", "/api/v1/gpr/approve", {"gprId": w.gbq}, "GPR_NOT_FOUND"),
            ("POST", "/api/v1/gpr/reject", {"gprId": w.gbq}, "GPR_NOT_FOUND"),
            ("GET", "/api/v1/gpr/list?sliceName=a", None, "WORKSPACE_NOT_FOUND"),
            ("GET", "/api/v1/inventory?sliceName=a", None, "WORKSPACE_NOT_FOUND"),
            ("POST", "/api/v1/gpr", gpr_body("a"), "WORKSPACE_NOT_FOUND"),
            ("POST", "/api/v1/gpr/waittime", gpr_body("b"), "WORKSPACE_NOT_FOUND"),
            ("DELETE", "/api/v1/api-key", {"keyId": owner_a_id}, "API_KEY_NOT_FOUND"),
            ("DELETE", "/api/v1/api-key", {"name": "owner_a-never"}, "API_KEY_NOT_FOUND"),
            ("POST", "/api/v1/api-key", {"name": "xo", "role": "Owner", "workspaceName": "a"}, "WORKSPACE_NOT_FOUND")]:
        status, doc = ax.call(method, path, body)
        assert status in (403, 404), (method, path, status, doc)
        refused(status, doc, status, key, "FORBIDDEN")
    # no widening into the default project
    for method, path, body in [("POST", "/api/v1/api-key", {"name": "xa", "role": "Admin", "projectName": "default"}),
                               ("POST", "/api/v1/slice-workspace", {"workspaceName": "xw0", "clusters": ["worker-1"],
                                                                    "projectName": "default"}),
                               ("POST", "/api/v1/clusters", {"clusterName": "xc0", "projectName": "default"}),
                               ("POST", "/api/v1/projects", {"projectName": "y"})]:
        refused(*ax.call(method, path, body), 403, "FORBIDDEN")
    refused(*ax.call("POST", "/api/v1/slice-workspace", {"workspaceName": "xw1", "clusters": ["worker-1"]}), 422,
            "CLUSTER_NOT_FOUND", field="clusters")
    assert world_view(w) == before
    # ... while its own project works, and what it makes stays in it
    assert ax.ok("POST", "/api/v1/clusters", {"clusterName": "xc"})["projectName"] == "x"
    ax.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "xw", "clusters": ["xc"]})
    k = new_key(ax, "Admin")
    assert k["projectName"] == "x"
    assert new_key(ax, "Owner", workspaceName="xw")["projectName"] == "x"
    # and the default project's keys do not see project x
    refused(*w.api("owner_a").call("GET", "/api/v1/slice-workspace?workspaceName=xw"), 404, "WORKSPACE_NOT_FOUND")
    assert "xw" not in [x["name"] for x in w.api("viewer_all").get("/api/v1/slice-workspace/list")["workspaces"]]
    assert "xc" in [c["clusterName"] for c in w.admin.get("/api/v1/clusters")["items"]]  # the global admin sees all


def test_project_admin_cannot_reach_gprs_of_a_deleted_workspace(world):
    """Once a default-project workspace is deleted its GPRs have no workspace; an admin of project x must still
    not see or act on them."""
    w = world
    w.c.workspace("gone", ["worker-1"])
    g = w.c.gpr(sliceName="gone", exitDuration="1h")
    assert w.c.status(g)["status"]["provisioningStatus"] == "Queued"
    w.admin.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "gone"})
    assert w.c.status(g)["status"]["provisioningStatus"] == "Cancelled"
    ax = w.api("admin_x")
    refused(*ax.call("GET", "/api/v1/gpr?gprId=" + g), 404, "GPR_NOT_FOUND")
    refused(*ax.call("POST", "/api/v1/gpr/approve", {"gprId": g}), 404, "GPR_NOT_FOUND")
    refused(*ax.call("POST", "/api/v1/gpr/reject", {"gprId": g}), 404, "GPR_NOT_FOUND")
    assert g not in [x["gprId"] for x in ax.get("/api/v1/gpr/list")["items"]]
    # owners and viewers of the project do not see it either
    refused(*w.api("viewer_all").call("GET", "/api/v1/gpr?gprId=" + g), 404, "GPR_NOT_FOUND")
