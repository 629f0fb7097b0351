"""Server paging of GET /api/v1/gpr/list (limit, continue, as GET /api/v1/events): without either the
answer is the whole list, as the SDK and egsctl read it; with them, pages that are disjoint, complete,
in the order of the whole list, and stable when GPRs are created or deleted between pages; hostile
values are refused naming the field; a key scoped to one slice pages only that slice."""

from urllib.parse import quote

from fakeagent import FakeAgent


def ids(items):
    return [g["gprId"] for g in items]


def pages(api, query, limit):
    """Every page of query at limit; returns the pages' id lists."""
    out, token = [], None
    while True:
        q = "&".join(x for x in (query, "limit=%d" % limit, token and "continue=" + token) if x)
        d = api.get("/api/v1/gpr/list?" + q)
        assert set(d) == {"items", "continue"}
        out.append(ids(d["items"]))
        assert len(d["items"]) <= limit
        token = d["continue"]
        if token is None:
            return out
        assert len(d["items"]) == limit and token == d["items"][-1]["gprId"]


def refused(api, query, field):
    status, doc = api.call("GET", "/api/v1/gpr/list?" + query)
    assert status == 422, (query, status, doc)
    assert doc["error"]["data"]["field"] == field, (query, doc)


def test_pages_are_disjoint_complete_ordered_and_stable(cluster):
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("a", ["c1"])
    cluster.workspace("b", ["c1"])
    made = [cluster.gpr(sliceName="a", gprName="a%d" % i) for i in range(23)]
    other = [cluster.gpr(sliceName="b", gprName="b%d" % i) for i in range(4)]

    whole = cluster.admin.get("/api/v1/gpr/list?sliceName=a")
    assert set(whole) == {"items"}, "without paging parameters the answer is as before: no continue"
    order = ids(whole["items"])
    assert sorted(order) == sorted(made) and order == made, "oldest first (creation order)"

    for limit in (1, 5, 23, 1000):
        got = pages(cluster.admin, "sliceName=a", limit)
        flat = [i for p in got for i in p]
        assert flat == order, limit  # disjoint, complete, same order
        assert len(got) == -(-23 // limit)

    # Every slice the caller sees, and the status filter, page the same way.
    assert [i for p in pages(cluster.admin, "", 7) for i in p] == ids(cluster.admin.get("/api/v1/gpr/list")["items"])
    assert set(made + other) == set(ids(cluster.admin.get("/api/v1/gpr/list")["items"]))
    queued = ids(cluster.admin.get("/api/v1/gpr/list?sliceName=a&status=Queued")["items"])
    assert [i for p in pages(cluster.admin, "sliceName=a&status=Queued", 4) for i in p] == queued

    # A create between pages: nothing repeated or skipped, the new GPR comes on a later page; the GPR
    # a token names may be deleted before the next page is asked for.
    first = cluster.admin.get("/api/v1/gpr/list?sliceName=a&limit=10")
    new = cluster.gpr(sliceName="a", gprName="late")
    cluster.admin.ok("DELETE", "/api/v1/gpr", {"gprId": first["continue"]})
    rest = [i for p in pages_from(cluster.admin, "sliceName=a", 10, first["continue"]) for i in p]
    assert ids(first["items"]) + rest == order + [new]
    assert not set(ids(first["items"])) & set(rest)

    # Scope: a Viewer of a pages only a; b is not listed to it.
    viewer = cluster.egsd.api(cluster.key("Viewer", "a"))
    assert set(i for p in pages(viewer, "", 6) for i in p) <= set(made + [new])
    status, doc = viewer.call("GET", "/api/v1/gpr/list?sliceName=b&limit=5")
    assert status in (403, 404) and not doc.get("data"), (status, doc)


def pages_from(api, query, limit, token):
    out = []
    while token:
        d = api.get("/api/v1/gpr/list?%s&limit=%d&continue=%s" % (query, limit, token))
        out.append(ids(d["items"]))
        token = d["continue"]
    return out


def test_hostile_paging_values_are_refused_naming_the_field(cluster):
    FakeAgent(cluster, "c1", ["n1"])
    cluster.workspace("a", ["c1"])
    gid = cluster.gpr(sliceName="a")
    for bad in ("-1", "0", "1001", "99999999999999999999999", "abc", "", "1.5", "+", "%205", "5x", "0x10", "%2B5"):
        refused(cluster.admin, "sliceName=a&limit=" + bad, "limit")
    for bad in ("", "garbage", "gpr-", "gpr-ZZZZ", "GPR-00000001-0000", "../etc", "gpr-" + "a" * 200,
                quote("gpr-0000 0001")):
        refused(cluster.admin, "sliceName=a&continue=" + bad, "continue")
    refused(cluster.admin, "sliceName=a&limit=0&continue=" + gid, "limit")
    status, doc = cluster.admin.call("GET", "/api/v1/gpr/list?sliceName=a&continue=gpr-%00")
    assert status == 400 and doc["error"]["errorKey"] == "BAD_REQUEST"  # control characters: the query layer
    # A well-formed token past every GPR is an empty last page, not an error.
    d = cluster.admin.get("/api/v1/gpr/list?sliceName=a&continue=gpr-ffffffff-ffff")
    assert d == {"items": [], "continue": None}
    # continue alone pages at the default size (100), like the events.
    d = cluster.admin.get("/api/v1/gpr/list?sliceName=a&continue=gpr-00000000-0000")
    assert ids(d["items"]) == [gid] and d["continue"] is None
