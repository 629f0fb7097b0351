"""Working kubeconfigs, egsd's side (src/server/kubecred.c, docs/internals/agent-protocol.md): a cluster's
agent that registered the "sliceAccess" feature gets `sliceAccess` actions, reports the ServiceAccount
token it minted (POST /api/v1/agent/slice-access), and the kubeconfig route hands that token out with the
cluster's API server and CA; until then it answers 409 KUBECONFIG_NOT_READY and says why.  Tokens are
sealed at rest under DIR/kubecreds.key; regeneration drops the old token at once and asks for a new
generation.  The agent here is this test speaking the protocol with the cluster's real agent token (the
Kubernetes backend that mints real tokens is the agent's side)."""
import glob
import os
import secrets

import pytest
import yaml

from conftest import Api, Cluster, Egsd, fake_sa_token

KC = "/api/v1/slice-workspace/kube-config"
REGEN = KC + "/regenerate"
REPORT = "/api/v1/agent/slice-access"


def register(agent, features):
    return agent.ok("POST", "/api/v1/agent/register", {"nodes": [], "features": features})


def actions(agent):
    return [a for a in agent.ok("GET", "/api/v1/agent/actions?wait=0")["actions"] if a["type"] == "sliceAccess"]


def report(agent, ws, gen, token=None, **kw):
    body = {"workspace": ws, "generation": gen, "ok": True, "token": token or fake_sa_token(),
            "expiresAt": "2099-01-01T00:00:00Z"}
    body.update(kw)
    return agent.call("POST", REPORT, body)


def not_ready(api, ws, cluster, says):
    status, doc = api.call("POST", KC, {"workspaceName": ws, "clusterName": cluster})
    assert status == 409 and doc["error"]["errorKey"] == "KUBECONFIG_NOT_READY", doc
    assert doc["error"]["data"]["field"] == "clusterName" and says in doc["error"]["message"], doc
    return doc


def kubeconfig(api, ws, cluster):
    return yaml.safe_load(api.ok("POST", KC, {"workspaceName": ws, "clusterName": cluster})["kubeConfig"])


def agent_of(c, name):
    """A cluster registered here with a fresh agent token (POST /api/v1/clusters returns it once)."""
    data = c.admin.ok("POST", "/api/v1/clusters", {"clusterName": name, "apiServer": "https://%s.example:6443" % name,
                                                   "caData": "Q0EtREFUQQ=="})
    c.tokens[name] = data["agentToken"]
    return Api(c.egsd.port, data["agentToken"])


@pytest.fixture
def world(tmp_path):
    c = Cluster(str(tmp_path))
    try:
        w1, w2 = agent_of(c, "worker-1"), agent_of(c, "worker-2")
        c.workspace("team-a", ["worker-1"], ["team-a-dev"])
        c.workspace("team-b", ["worker-1", "worker-2"], ["team-b-dev"])
        yield c, w1, w2
    finally:
        c.egsd.stop()


def test_no_kubeconfig_until_the_agent_reports_a_token(world):
    c, w1, w2 = world
    # An agent without the feature (today's local backend) gets no action, and the answer says why.
    register(w1, [])
    assert actions(w1) == []
    not_ready(c.admin, "team-a", "worker-1", "does not mint slice tokens")
    register(w1, ["sliceAccess"])
    got = {a["workspace"]: a for a in actions(w1)}
    assert set(got) == {"team-a", "team-b"}
    a = got["team-a"]
    assert a == {"actionId": "sliceAccess:team-a:1", "type": "sliceAccess", "workspace": "team-a",
                 "namespaces": ["team-a-dev"], "serviceAccount": "egs-slice-team-a", "generation": 1,
                 "tokenTtlSeconds": 604800, "reason": "missing"}
    not_ready(c.admin, "team-a", "worker-1", "has not reported")
    token = fake_sa_token()
    st, doc = report(w1, "team-a", 1, token, serviceAccount="egs-slice-team-a", namespaces=["team-a-dev"])
    assert st == 200 and doc["data"] == {"workspace": "team-a", "generation": 1, "stored": True}, doc
    kc = kubeconfig(c.admin, "team-a", "worker-1")
    assert kc["users"][0]["user"]["token"] == token
    assert kc["clusters"][0]["cluster"] == {"server": "https://worker-1.example:6443",
                                            "certificate-authority-data": "Q0EtREFUQQ=="}
    assert kc["contexts"][0]["context"]["namespace"] == "team-a-dev"
    assert [a["workspace"] for a in actions(w1)] == ["team-b"]  # team-a's is done
    # Per cluster: team-b on worker-2 is worker-2's agent's business, still not ready.
    not_ready(c.admin, "team-b", "worker-2", "does not mint")
    assert "SliceAccessReady" in [e["reason"] for e in c.admin.get("/api/v1/events")["items"]]


def test_tokens_are_sealed_at_rest_and_survive_a_restart(world, tmp_path):
    c, w1, _ = world
    register(w1, ["sliceAccess"])
    token = fake_sa_token()
    assert report(w1, "team-a", 1, token)[0] == 200
    data = c.egsd.data_dir
    key = os.path.join(data, "kubecreds.key")
    assert os.stat(key).st_mode & 0o777 == 0o600 and os.path.getsize(key) == 32
    c.egsd.stop()
    for f in glob.glob(os.path.join(data, "egs.db*")) + [c.egsd.log_path]:
        raw = open(f, "rb").read()
        assert token.encode() not in raw and token.split(".")[1].encode() not in raw, f
    e = Egsd(data).start()
    c.egsd = e
    try:
        assert kubeconfig(e.api(), "team-a", "worker-1")["users"][0]["user"]["token"] == token
    finally:
        e.stop()
    # Another key does not open what the first sealed: the answer says so, and no token leaks.
    with open(key, "wb") as f:
        f.write(secrets.token_bytes(32))
    e = Egsd(data).start()
    c.egsd = e
    not_ready(e.api(), "team-a", "worker-1", "does not open with this egsd's kubecreds.key")
    e.stop()
    with open(key, "wb") as f:
        f.write(b"short")
    bad = Egsd(data)
    with pytest.raises(RuntimeError, match="kubecreds.key must be the 32-byte key"):
        bad.start()


def test_regenerate_drops_the_old_token_and_asks_for_a_new_generation(world):
    c, w1, w2 = world
    register(w1, ["sliceAccess"])
    register(w2, ["sliceAccess"])
    old = fake_sa_token()
    assert report(w1, "team-b", 1, old)[0] == 200
    assert report(w2, "team-b", 1)[0] == 200
    owner = Api(c.egsd.port, c.key("Owner", "team-b"))
    got = owner.ok("POST", REGEN, {"workspaceName": "team-b", "clusterName": "worker-1"})
    assert got == {"workspaceName": "team-b", "clusters": [{"clusterName": "worker-1", "generation": 2,
                                                            "agentMintsTokens": True}]}
    doc = not_ready(owner, "team-b", "worker-1", "regenerated")
    assert old not in str(doc)
    kubeconfig(owner, "team-b", "worker-2")  # the other cluster's token is untouched
    a = [x for x in actions(w1) if x["workspace"] == "team-b"]
    assert a and a[0]["generation"] == 2 and a[0]["reason"] == "regenerate" and a[0]["actionId"] == "sliceAccess:team-b:2"
    # A late report of the old generation is refused, and so is a generation egsd never asked for.
    st, doc = report(w1, "team-b", 1, old)
    assert st == 409 and doc["error"]["errorKey"] == "SLICE_ACCESS_SUPERSEDED", doc
    st, doc = report(w1, "team-b", 3)
    assert st == 422 and doc["error"]["data"]["field"] == "generation", doc
    not_ready(owner, "team-b", "worker-1", "regenerated")
    new = fake_sa_token()
    assert report(w1, "team-b", 2, new)[0] == 200
    assert kubeconfig(owner, "team-b", "worker-1")["users"][0]["user"]["token"] == new
    # Without clusterName every cluster of the workspace is regenerated.
    got = c.admin.ok("POST", REGEN, {"workspaceName": "team-b"})
    assert [(x["clusterName"], x["generation"]) for x in got["clusters"]] == [("worker-1", 3), ("worker-2", 2)]
    not_ready(owner, "team-b", "worker-2", "regenerated")
    assert "KubeConfigRegenerated" in [e["reason"] for e in c.admin.get("/api/v1/events")["items"]]


def test_who_may_regenerate_and_read(world):
    c, w1, w2 = world
    register(w1, ["sliceAccess"])
    assert report(w1, "team-a", 1)[0] == 200
    body = {"workspaceName": "team-a", "clusterName": "worker-1"}
    st, doc = Api(c.egsd.port, c.key("Viewer", "team-a")).call("POST", REGEN, body)
    assert st == 403 and doc["error"]["errorKey"] == "FORBIDDEN", doc
    # An Editor key is an Owner limited to its workspace (model.h): it may, for that workspace only.
    editor = Api(c.egsd.port, c.key("Editor", "team-a"))
    assert editor.ok("POST", REGEN, body)["clusters"][0]["generation"] == 2
    assert report(w1, "team-a", 2)[0] == 200
    st, doc = editor.call("POST", REGEN, {"workspaceName": "team-b", "clusterName": "worker-1"})
    assert st in (403, 404), doc
    other_owner = Api(c.egsd.port, c.key("Owner", "team-b"))
    for path in (REGEN, KC):
        st, doc = other_owner.call("POST", path, body)
        assert st in (403, 404) and doc["error"]["errorKey"] in ("FORBIDDEN", "WORKSPACE_NOT_FOUND"), doc
    st, doc = Api(c.egsd.port, c.key("Viewer", "team-a")).call("POST", KC, body)
    assert st == 403  # a kubeconfig is a credential: not for viewers
    st, doc = w1.call("POST", REGEN, body)
    assert st == 403
    # Users may not report tokens; an agent only for workspaces that include its cluster.
    st, doc = c.admin.call("POST", REPORT, {"workspace": "team-a", "generation": 1, "ok": True,
                                            "token": fake_sa_token(), "expiresAt": "2099-01-01T00:00:00Z"})
    assert st == 403
    st, doc = report(w2, "team-a", 1)
    assert st == 404 and doc["error"]["errorKey"] == "WORKSPACE_NOT_FOUND"
    st, doc = report(w1, "team-a", 1, clusterName="worker-2")
    assert st == 403 and doc["error"]["data"]["field"] == "clusterName"
    # Nothing of that moved the token.
    assert kubeconfig(c.admin, "team-a", "worker-1")["users"][0]["user"]["token"]
    assert c.admin.get("/api/v1/slice-workspace?workspaceName=team-a")["name"] == "team-a"


@pytest.mark.parametrize("field,value", [
    ("token", ""), ("token", "short"), ("token", "a b.c" * 10), ("token", "x" * 8193), ("token", 'ab"\ninjected: 1' * 4),
    ("token", None), ("expiresAt", "2000-01-01T00:00:00Z"), ("expiresAt", "tomorrow"), ("generation", 0),
    ("generation", "1"), ("namespaces", ["Bad_NS"]), ("serviceAccount", "a/b"), ("ok", None), ("workspace", "")])
def test_malformed_reports_change_nothing(world, field, value):
    c, w1, _ = world
    register(w1, ["sliceAccess"])
    body = {"workspace": "team-a", "generation": 1, "ok": True, "token": fake_sa_token(),
            "expiresAt": "2099-01-01T00:00:00Z", field: value}
    st, doc = w1.call("POST", REPORT, body)
    assert st == 422 and doc["error"]["data"]["field"] == field, doc
    not_ready(c.admin, "team-a", "worker-1", "has not reported")
    assert sorted(a["workspace"] for a in actions(w1)) == ["team-a", "team-b"]


def test_failed_report_is_shown_and_retried_later(world):
    c, w1, _ = world
    register(w1, ["sliceAccess"])
    st, doc = w1.call("POST", REPORT, {"workspace": "team-a", "generation": 1, "ok": False,
                                       "message": "namespaces \"team-a-dev\" is forbidden"})
    assert st == 200 and doc["data"]["stored"] is False
    not_ready(c.admin, "team-a", "worker-1", 'namespaces "team-a-dev" is forbidden')
    assert [a["workspace"] for a in actions(w1)] == ["team-b"]  # not again at once
    c.advance("31s")
    assert "team-a" in [a["workspace"] for a in actions(w1)]
    assert "SliceAccessFailed" in [e["reason"] for e in c.admin.get("/api/v1/events")["items"]]


def test_namespace_changes_expiry_and_deletion(world):
    c, w1, _ = world
    register(w1, ["sliceAccess"])
    tok = fake_sa_token()
    assert report(w1, "team-a", 1, tok, expiresAt="2099-01-01T00:00:00Z")[0] == 200
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "team-a", "addNamespaces": ["team-a-prod"]})
    a = [x for x in actions(w1) if x["workspace"] == "team-a"]
    assert a[0]["reason"] == "namespaces" and a[0]["namespaces"] == ["team-a-dev", "team-a-prod"]
    assert kubeconfig(c.admin, "team-a", "worker-1")["users"][0]["user"]["token"] == tok  # still valid meanwhile
    assert report(w1, "team-a", 1, namespaces=["team-a-dev", "team-a-prod"])[0] == 200
    assert "team-a" not in [x["workspace"] for x in actions(w1)]
    # A token a quarter of whose life is left is renewed; an expired one is never handed out.
    assert report(w1, "team-b", 1, expiresAt="2099-01-01T00:00:00Z")[0] == 200
    c.admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "short", "clusters": ["worker-1"]})
    assert report(w1, "short", 1, expiresAt=_in(c, 3600))[0] == 200
    assert "short" not in [x["workspace"] for x in actions(w1)]
    c.advance("46m")
    assert [x["reason"] for x in actions(w1) if x["workspace"] == "short"] == ["expiring"]
    kubeconfig(c.admin, "short", "worker-1")
    c.advance("15m")
    not_ready(c.admin, "short", "worker-1", "expired")
    # Deleting the workspace deletes its tokens: a new workspace of that name starts from nothing.
    c.admin.ok("DELETE", "/api/v1/slice-workspace", {"workspaceName": "short"})
    c.admin.ok("POST", "/api/v1/slice-workspace", {"workspaceName": "short", "clusters": ["worker-1"]})
    not_ready(c.admin, "short", "worker-1", "has not reported")
    # A cluster that leaves a workspace takes its token along.
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "team-b", "addClusters": ["worker-2"]})
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "team-b", "removeClusters": ["worker-1"]})
    c.admin.ok("PUT", "/api/v1/slice-workspace", {"workspaceName": "team-b", "addClusters": ["worker-1"]})
    not_ready(c.admin, "team-b", "worker-1", "has not reported")


def _in(c, seconds):
    """RFC 3339 of egsd's clock plus seconds (the dev clock stands still)."""
    import datetime
    now = c.admin.get("/api/v1/auth/whoami")["serverTime"]
    return datetime.datetime.fromtimestamp(now + seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
