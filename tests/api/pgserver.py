"""A throwaway PostgreSQL server for tests and benchmarks: initdb and pg_ctl in a temporary
directory, listening only on a unix socket in that directory (no TCP port, so parallel runs never
collide), trust authentication.  PostgreSQL refuses to run as root, so under root the server runs
as the `postgres` user (Debian's package creates it; created with useradd when missing).

    srv = PgServer().start()
    url = srv.create_db("egs_1")      # postgres:///egs_1?host=...&user=...
    srv.restart(); srv.stop()

Also a command line for shell scripts (bench/pg/run.sh):
    python3 pgserver.py start DIR     # prints the URL of database "egs"; with $EGS_PG_SETTINGS
                                      # ("name=value ...") as server settings
    python3 pgserver.py stop|restart DIR
    python3 pgserver.py cleanup DIR   # stops at once and removes DIR
"""
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time


def pg_bindir():
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")


class PgServer:
    def __init__(self, base=None, fsync=True):
        self.base = base
        self.fsync = fsync
        self.bindir = pg_bindir()
        self.root = os.geteuid() == 0
        self.user = "postgres" if self.root else pwd.getpwuid(os.geteuid()).pw_name
        self.owned_base = False

    def _as_user(self, args, **kw):
        if self.root:
            args = ["runuser", "-u", self.user, "--"] + args
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
        if p.returncode != 0:  # e.g. a parent directory the postgres user cannot enter
            raise RuntimeError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stdout.decode(errors="replace")))
        return p

    def _ensure_user(self):
        if not self.root:
            return
        try:
            pwd.getpwnam(self.user)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", self.user], check=True)

    @property
    def data(self):
        return os.path.join(self.base, "data")

    @property
    def sock(self):
        return os.path.join(self.base, "sock")

    def start(self):
        self._ensure_user()
        if self.base is None:
            self.base = tempfile.mkdtemp(prefix="egs-pg-")
            self.owned_base = True
        os.makedirs(self.sock, exist_ok=True)
        if self.root:
            pw = pwd.getpwnam(self.user)
            for p in (self.base, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self._as_user([os.path.join(self.bindir, "initdb"), "-D", self.data, "--auth=trust", "-U", self.user,
                           "-E", "UTF8", "--locale=C", "--no-sync"])
        opts = "-c listen_addresses='' -c unix_socket_directories=%s -c max_connections=300" \
               " -c shared_buffers=64MB" % self.sock
        for kv in os.environ.get("EGS_PG_SETTINGS", "").split():  # bench/pg/run.sh: NAME=VALUE ...
            opts += " -c " + kv
        if not self.fsync:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._as_user([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.base, "log"),
                       "-o", opts, "-w", "-t", "30", "start"])
        return self

    def stop(self, mode="fast"):
        if self.base and os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self._as_user([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m", mode, "-w", "stop"])

    def restart(self):
        self._as_user([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-l", os.path.join(self.base, "log"),
                       "-m", "fast", "-w", "restart"])

    def cleanup(self):
        self.stop("immediate")
        if self.owned_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def psql(self, sql, db="postgres"):
        out = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                              "-h", self.sock, "-U", self.user, "-d", db, "-c", sql],
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return out.stdout.decode()

    def dump(self, schema, db="postgres"):
        """pg_dump's SQL text of one schema (data included)."""
        return subprocess.run([os.path.join(self.bindir, "pg_dump"), "-h", self.sock, "-U", self.user, "-n", schema, db],
                              check=True, stdout=subprocess.PIPE).stdout.decode()

    def create_db(self, name):
        """Creates database name (when it does not exist yet) and returns its URL."""
        if not self.psql("SELECT 1 FROM pg_database WHERE datname = '%s'" % name).strip():
            self.psql('CREATE DATABASE "%s"' % name)
        return self.url(name)

    def schema_url(self, schema, db="postgres"):
        """Creates schema (when missing) in db and returns a URL whose sessions use it: a cheap,
        separate namespace per egsd in one database."""
        self.psql('CREATE SCHEMA IF NOT EXISTS "%s"' % schema, db)
        return self.url(db) + "&options=-csearch_path%%3D%s" % schema

    def url(self, db):
        return "postgres:///%s?host=%s&user=%s" % (db, self.sock, self.user)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop", "restart", "cleanup"):
        sys.exit("usage: pgserver.py start|stop|restart|cleanup DIR")
    srv = PgServer(base=os.path.abspath(sys.argv[2]))
    if sys.argv[1] == "start":
        os.makedirs(srv.base, exist_ok=True)
        print(srv.start().create_db("egs"))
    elif sys.argv[1] == "restart":
        srv.restart()
    elif sys.argv[1] == "cleanup":
        srv.owned_base = True
        srv.cleanup()
    else:
        srv.stop()
