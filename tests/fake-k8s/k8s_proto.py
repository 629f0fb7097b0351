"""Decoding of the few protobuf request bodies kubectl sends through typed clients.

kubectl posts SelfSubjectAccessReview (`auth can-i`), SelfSubjectReview (`auth whoami`),
TokenRequest (`create token`) and the other review kinds as application/vnd.kubernetes.protobuf
and does not retry in JSON, so those kinds are decoded here into the JSON shape the server uses;
every other kind in protobuf stays 415.  The envelope is the Kubernetes one: the 4 bytes "k8s\\0",
then a runtime.Unknown {typeMeta=1 {apiVersion=1, kind=2}, raw=2}.  Field numbers are those of
the kinds' generated.proto files."""


class ProtoError(ValueError):
    pass


def _varint(b, i):
    shift = v = 0
    while True:
        if i >= len(b):
            raise ProtoError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise ProtoError("varint too long")


def fields(b):
    """Splits one message into {field number: [values]} (ints for varints, bytes otherwise)."""
    out, i = {}, 0
    while i < len(b):
        key, i = _varint(b, i)
        fno, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ProtoError("truncated field %d" % fno)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ProtoError("unsupported wire type %d" % wt)
        out.setdefault(fno, []).append(v)
    return out


def _s(f, n):
    return f[n][-1].decode() if n in f else ""


def _msg(f, n):
    return fields(f[n][-1]) if n in f else {}


def _meta(f):
    m = _msg(f, 1)
    return {k: v for k, v in (("name", _s(m, 1)), ("namespace", _s(m, 3))) if v}


def _attrs(f):
    ra, nra = _msg(f, 1), _msg(f, 2)
    spec = {}
    if ra:
        spec["resourceAttributes"] = {k: _s(ra, n) for k, n in (("namespace", 1), ("verb", 2), ("group", 3),
                                                                 ("version", 4), ("resource", 5),
                                                                 ("subresource", 6), ("name", 7))}
    if nra:
        spec["nonResourceAttributes"] = {"path": _s(nra, 1), "verb": _s(nra, 2)}
    return spec, ra, nra


def decode(body):
    """Returns the JSON-shaped object for a protobuf body, or raises ProtoError."""
    if not body.startswith(b"k8s\x00"):
        raise ProtoError("missing the k8s protobuf envelope")
    env = fields(body[4:])
    tm = _msg(env, 1)
    api, kind = _s(tm, 1), _s(tm, 2)
    raw = fields(env[2][-1]) if 2 in env else {}
    obj = {"apiVersion": api, "kind": kind, "metadata": _meta(raw)}
    spec = _msg(raw, 2)
    if kind in ("SelfSubjectAccessReview", "SubjectAccessReview"):
        obj["spec"] = _attrs(spec)[0]
        if kind == "SubjectAccessReview":
            obj["spec"].update(user=_s(spec, 3), groups=[g.decode() for g in spec.get(4, [])], uid=_s(spec, 6))
    elif kind == "SelfSubjectReview":
        obj["spec"] = {}
    elif kind == "TokenReview":
        obj["spec"] = {"token": _s(spec, 1), "audiences": [a.decode() for a in spec.get(2, [])]}
    elif kind == "TokenRequest":
        obj["spec"] = {"audiences": [a.decode() for a in spec.get(1, [])]}
        if 4 in spec:
            obj["spec"]["expirationSeconds"] = spec[4][-1]
        if 3 in spec:
            b = fields(spec[3][-1])
            obj["spec"]["boundObjectRef"] = {"kind": _s(b, 1), "apiVersion": _s(b, 2), "name": _s(b, 3),
                                             "uid": _s(b, 4)}
    else:
        raise ProtoError("protobuf bodies of kind %r are not supported; send JSON" % kind)
    return obj
