"""Free TCP ports for the test processes (egsd, fake agents, the fake Kubernetes API server).

By default the kernel picks one (its ephemeral range, 32768 and up). `make test` runs the API suite
twice at once (SQLite and PostgreSQL, scripts/api-tests.sh); a port that one run found free and closed
could be taken by the other run's next egsd before its own egsd bound it, and a test then talked to the
other run's server. So the second run sets EGS_TEST_PORT_RANGE=LO-HI (below the ephemeral range) and
draws its ports there: the two runs never pick the same port, nor a port of an outgoing connection.

Under pytest-xdist (scripts/api-tests.sh runs each store's suite on several workers) the workers of
one run draw from the same range, so worker i of N takes only ports p with p % N == i: no two workers
ever pick the same port either."""
import os
import random
import socket

_RANGE = os.environ.get("EGS_TEST_PORT_RANGE", "")
# This process's share of the ports under pytest-xdist (worker "gwI" of PYTEST_XDIST_WORKER_COUNT).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0) if _WORKERS > 1 else 0


def _bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return s.getsockname()[1]
    except OSError:
        return 0
    finally:
        s.close()


def _ephemeral():
    """The kernel's ephemeral range as "LO-HI" (where bind to port 0 draws from)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return "-".join(f.read().split())
    except OSError:
        return "32768-60999"


def free_port():
    """A port that was free on 127.0.0.1 a moment ago (in EGS_TEST_PORT_RANGE when that is set)."""
    if not _RANGE and _WORKERS == 1:
        return _bindable(0)
    lo, hi = (int(v) for v in (_RANGE or _ephemeral()).split("-"))
    for _ in range(1000):
        port = random.randrange(lo, hi + 1)
        port += (_WORKER - port) % _WORKERS  # this worker's share
        if port <= hi and _bindable(port):
            return port
    raise RuntimeError("no free port in %s for worker %d of %d" % (_RANGE or "the ephemeral range", _WORKER, _WORKERS))
