"""Watch streams: newline-delimited JSON WatchEvents over a chunked HTTP response.

resourceVersion unset or "0" (or sendInitialEvents=true) starts with a synthetic ADDED event per
matching object; resourceVersion X resumes after X when the store's history still holds every
later event, and otherwise answers HTTP 200 with one ERROR event carrying a 410 Expired Status
("too old resource version"), as the real watch cache does.  A watcher that falls behind the
history gets the same ERROR and the stream ends.  Selectors are applied to both the old and new
object, so an object leaving the selection is DELETED and one entering it is ADDED.  With
allowWatchBookmarks=true a BOOKMARK carrying the current resourceVersion is sent every
--bookmark-seconds (and after the initial events when sendInitialEvents=true, annotated
k8s.io/initial-events-end).  timeoutSeconds ends the stream cleanly; so does a closed connection."""
import datetime
import json
import time

import k8s_meta
from k8s_meta import gv_string
from k8s_objects import ApiError
from k8s_store import fields_match, labels_match


def _matches(sel, obj):
    lsel, fsel = sel
    return obj is not None and labels_match(lsel, obj["metadata"].get("labels")) and fields_match(fsel, obj)


class Tables:
    """Turns watched objects into one-row meta.k8s.io Tables (kubectl get -w asks for them); the first
    carries the column definitions, later ones none, as real servers send them."""

    def __init__(self, app, res, include):
        with app.store.lock:
            self.crd = app.reg.crd_of.get((res.group, res.resource))
        self.res, self.include, self.first = res, include, True

    def __call__(self, obj):
        now = datetime.datetime.now(datetime.timezone.utc)
        t = k8s_meta.table(self.res, [obj], obj["metadata"].get("resourceVersion", ""), self.crd, self.include, now)
        if not self.first:
            t["columnDefinitions"] = []
        self.first = False
        return t


def _frame(etype, obj, conv=None):
    if conv is not None and etype in ("ADDED", "MODIFIED", "DELETED"):
        obj = conv(obj)
    data = json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _expired(x, oldest):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "too old resource version: %d (%d)" % (x, oldest + 1), "reason": "Expired", "code": 410}


def serve_watch(handler, app, res, ns, q, table=False):
    """Streams events for res (namespace ns or all) until timeout, client close or expiry; table: the
    client asked for Table objects."""
    store = app.store
    conv = Tables(app, res, q.get("includeObject") or "Metadata") if table else None
    sel = app.api.selectors(res, q)
    gv = gv_string(res.group, res.version)
    bookmarks = q.get("allowWatchBookmarks") in ("true", "1", "True")
    try:
        timeout = float(q.get("timeoutSeconds") or 1800)
    except ValueError:
        raise ApiError(400, "BadRequest", "timeoutSeconds: invalid value %r" % q.get("timeoutSeconds"))
    rv = q.get("resourceVersion", "")
    initial = q.get("sendInitialEvents") == "true"
    frames, expired = [], None
    with store.lock:
        if rv in ("", "0") or initial:
            start = store.rv
            for o in store.items(res.group, res.resource, ns or None):
                if _matches(sel, o):
                    frames.append(_frame("ADDED", _out(o, gv), conv))
            if initial and bookmarks:
                frames.append(_bookmark(res, gv, start, True))
        else:
            try:
                start = int(rv)
            except ValueError:
                raise ApiError(400, "BadRequest", "resourceVersion: invalid value %r" % rv)
            if start < store.oldest_resumable():
                expired = _expired(start, store.oldest_resumable())
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Cache-Control", "no-cache, private")
    handler.end_headers()
    w = handler.wfile
    if expired:
        w.write(_frame("ERROR", expired) + b"0\r\n\r\n")
        w.flush()
        return
    w.write(b"".join(frames))
    w.flush()
    _stream(w, app, res, ns, sel, gv, start, bookmarks, time.monotonic() + timeout, conv)


def _out(obj, gv):
    return obj if obj.get("apiVersion") == gv else dict(obj, apiVersion=gv)


def _bookmark(res, gv, rv, initial_end=False):
    md = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_end:
        md["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _frame("BOOKMARK", {"kind": res.kind, "apiVersion": gv, "metadata": md})


def _translate(ev, sel, ns):
    """Maps a store event to the (type, object) this watcher sees, or None."""
    o = ev.obj
    if ns and o["metadata"].get("namespace") != ns:
        return None
    if ev.type == "ADDED":
        return ("ADDED", o) if _matches(sel, o) else None
    if ev.type == "DELETED":
        return ("DELETED", o) if _matches(sel, ev.old) else None
    was, now = _matches(sel, ev.old), _matches(sel, o)
    if was and now:
        return ("MODIFIED", o)
    if now:
        return ("ADDED", o)
    if was:
        return ("DELETED", o)
    return None


def _stream(w, app, res, ns, sel, gv, start, bookmarks, deadline, conv):
    store = app.store
    every = app.args.bookmark_seconds
    next_bm = time.monotonic() + every
    while True:
        now = time.monotonic()
        if now >= deadline:
            w.write(b"0\r\n\r\n")
            w.flush()
            return
        with store.lock:
            if start < store.oldest_resumable():
                gone = _expired(start, store.oldest_resumable())
            else:
                gone = None
                evs = store.events_after(start)
                if not evs:
                    store.lock.wait(max(0.01, min(next_bm, deadline) - now))
                    evs = store.events_after(start)
                    if start < store.oldest_resumable():
                        gone = _expired(start, store.oldest_resumable())
                cur = store.rv
        if gone:
            w.write(_frame("ERROR", gone) + b"0\r\n\r\n")
            w.flush()
            return
        out = []
        for ev in evs:
            if ev.group != res.group or ev.resource != res.resource:
                continue
            t = _translate(ev, sel, ns)
            if t:
                out.append(_frame(t[0], _out(t[1], gv), conv))
        start = cur
        if bookmarks and time.monotonic() >= next_bm:
            out.append(_bookmark(res, gv, cur))
            next_bm = time.monotonic() + every
        elif not bookmarks and time.monotonic() >= next_bm:
            next_bm = time.monotonic() + every
        if out:
            w.write(b"".join(out))
            w.flush()
