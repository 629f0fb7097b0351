"""Free TCP ports for the test processes (egsd, fake agents, the fake Kubernetes API server).

By default the kernel picks one (its ephemeral range, 32768 and up). `make test` runs the API suite
twice at once (SQLite and PostgreSQL, scripts/api-tests.sh); a port that one run found free and closed
could be taken by the other run's next egsd before its own egsd bound it, and a test then talked to the
other run's server. So the second run sets EGS_TEST_PORT_RANGE=LO-HI (below the ephemeral range) and
draws its ports there: the two runs never pick the same port, nor a port of an outgoing connection."""
import os
import random
import socket

_RANGE = os.environ.get("EGS_TEST_PORT_RANGE", "")


def _bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return s.getsockname()[1]
    except OSError:
        return 0
    finally:
        s.close()


def free_port():
    """A port that was free on 127.0.0.1 a moment ago (in EGS_TEST_PORT_RANGE when that is set)."""
    if not _RANGE:
        return _bindable(0)
    lo, hi = (int(v) for v in _RANGE.split("-"))
    for _ in range(1000):
        port = _bindable(random.randrange(lo, hi + 1))
        if port:
            return port
    raise RuntimeError("no free port in EGS_TEST_PORT_RANGE=" + _RANGE)
