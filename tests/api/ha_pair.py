"""A leader egsd and a follower of it on one PostgreSQL schema, set up and torn down alike by the HA
tests (test_ha_follow.py, test_ha_large.py), and the table lock they use to make a load wait."""
import contextlib
import os
import subprocess

from conftest import Egsd, pg_server, store_args, wait_for
from test_ha import follower_of


def schema_of(url):
    return url[1].split("search_path%3D")[1]


def hold_table_lock(schema, table, seconds):
    """A psql session that locks table for `seconds` (every other session's read of it waits);
    returns the process once the lock is held."""
    pg = pg_server()
    sql = 'BEGIN; LOCK TABLE "%s".%s IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(%f); COMMIT;' % (schema, table, seconds)
    args = [os.path.join(pg.bindir, "psql"), "-X", "-q", "-At", "-h", pg.sock, "-U", pg.user, "-d", "postgres",
            "-c", sql]
    if pg.root:
        args = ["runuser", "-u", pg.user, "--"] + args
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    held = ("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = '%s' AND c.relname = '%s' AND l.granted "
            "AND l.mode = 'AccessExclusiveLock'" % (schema, table))
    wait_for(lambda: pg.psql(held).strip() == "1", interval=0.05, what="the table lock")
    return p


class Pair:
    """a: the leader; b: its follower once follow() made it; locker: a hold_table_lock process the
    test started (killed at the end); also: more things with stop() to stop first (agents, egsd)."""

    def __init__(self, tmpdir_path, url):
        self.tmp = tmpdir_path
        self.url = url
        self.schema = schema_of(url)
        self.a = self.b = self.locker = None
        self.also = []

    def follow(self):
        self.b = follower_of(self.a, os.path.join(self.tmp, "b"))
        return self.b


@contextlib.contextmanager
def ha_pair(tmpdir_path, follow=True, url=None, env=None):
    """Starts a leader on url (default: a schema of its own under tmpdir_path; env: variables it starts
    with) and, with follow, a follower of it; on a failure prints the follower's log; at the end kills
    the locker and stops everything, the leader last."""
    p = Pair(tmpdir_path, url or store_args(os.path.join(tmpdir_path, "shared")))
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        p.a = Egsd(os.path.join(tmpdir_path, "a"), extra=p.url).start()
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    try:
        if follow:
            p.follow()
        yield p
    except Exception:
        print("follower's log:", p.b.logs()[-3000:] if p.b else "")
        raise
    finally:
        if p.locker and p.locker.poll() is None:
            p.locker.kill()
        for e in reversed(p.also + [p.b]):
            if e:
                e.stop()
        p.a.stop()
