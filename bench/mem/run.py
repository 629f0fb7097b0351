"""egsd's memory and start-up time with 1,000,000 GPRs in the store, with and without
--finished-retention (bench/mem/README.md).

    make bench-mem                      (SQLite; PG=1 adds PostgreSQL, N=... sets the GPR count)

One store per kind is filled once by build/bench/egs-fill (N GPRs, 98% finished over the last 30 days,
2% queued), then, in ROUNDS alternating rounds, the same egsd binary starts on it with each retention
(RETENTIONS, default "0 24h"; 0 = every GPR in memory, the behaviour before aging) and reports:
start-up (exec to the first 200 of /healthz: the load, the first plan), egsd's CPU seconds by then
(utime + stime), its resident set (VmRSS) and peak (VmHWM) once ready, and egs_gprs_in_memory.
Prints a markdown table and the load average.

BASE_EGSD=path adds a second binary (e.g. main's build before a change): every round then starts
both, alternating, each on its own copy of the store (the same fill, twice: a build with a newer
schema migrates its copy, which the older build would refuse), and the table names which egsd each
row is.  BASE_FILL=path fills the base's copy with that build's egs-fill (needed when the two builds'
schemas differ: egs-fill migrates the store it fills to its own build's schema).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import http.client

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))
from ports import free_port  # noqa: E402

N = int(os.environ.get("N", "1000000"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
RETENTIONS = os.environ.get("RETENTIONS", "0 24h").split()
PG = os.environ.get("PG", "0") == "1"
TMP = os.environ.get("BENCH_TMP", "/var/tmp")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def get(port, path, token=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    return r.status, r.read()


def one_start(egsd, data, store_args, retention):
    port = free_port()
    key_file = os.path.join(data, "bench.key")  # the admin key, whichever start bootstraps
    if not os.path.exists(key_file):
        with open(key_file, "w") as f:
            f.write(open("/proc/sys/kernel/random/uuid").read().strip() + "\n")
    args = [egsd, "--listen", "127.0.0.1:%d" % port, "--data", data, "--quiet", "--admin-key-file", key_file,
            "--finished-retention", retention] + store_args
    log = open(os.path.join(data, "egsd.log"), "ab")
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            if p.poll() is not None:
                raise RuntimeError("egsd exited: see " + os.path.join(data, "egsd.log"))
            try:
                if get(port, "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        ready = time.monotonic() - t0
        cpu = cpu_s(p.pid)
        rss, hwm = status_kib(p.pid, "VmRSS"), status_kib(p.pid, "VmHWM")
        token = open(key_file).read().strip()
        metrics = get(port, "/metrics", token)[1].decode()
        in_mem = next((int(line.split()[1]) for line in metrics.splitlines() if line.startswith("egs_gprs_in_memory ")),
                      -1)  # -1: not the leader (a follower)
        return {"ready_s": ready, "cpu_s": cpu, "rss_mib": rss / 1024, "hwm_mib": hwm / 1024, "in_memory": in_mem}
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        log.close()


def main():
    work = tempfile.mkdtemp(prefix="egs-bench-mem.", dir=TMP)
    os.chmod(work, 0o755)
    egsd = os.path.join(work, "egsd")
    shutil.copy(os.path.join(ROOT, "build", "bin", "egsd"), egsd)  # one binary for every round
    binaries = [("this", egsd)]
    if os.environ.get("BASE_EGSD"):
        shutil.copy(os.environ["BASE_EGSD"], os.path.join(work, "egsd-base"))
        binaries.append(("base", os.path.join(work, "egsd-base")))
    fill = os.path.join(ROOT, "build", "bench", "egs-fill")
    stores = [("sqlite", lambda name: (os.path.join(work, "sqlite-" + name), []))] \
        if os.environ.get("SQLITE", "1") == "1" else []
    pg = None
    if PG:
        from pgserver import PgServer
        pg = PgServer(base=work).start()
        stores.append(("postgres", lambda name: (os.path.join(work, "pg-" + name),
                                                 ["--store-url", pg.schema_url("bench_" + name)])))
    rows = []
    try:
        for kind, store_of in stores:
            copies = {}
            for name, binary in binaries:  # a store for each binary, the same fill
                data, sargs = copies[name] = store_of(name)
                os.makedirs(data)
                target = sargs[1] if sargs else os.path.join(data, "egs.db")
                t = time.monotonic()
                filler = os.environ.get("BASE_FILL", fill) if name == "base" else fill
                subprocess.run([filler, target, str(N)], check=True)
                print("== %s: filled %d GPRs in %.1f s" % (kind, N, time.monotonic() - t), file=sys.stderr)
                # The first start bootstraps (admin key, project) and is not timed; on PostgreSQL its load
                # is also the first read of the fresh rows (hint bits), so it is tried a few times.
                for attempt in range(3):
                    try:
                        one_start(binary, data, sargs, "24h")
                        break
                    except RuntimeError as e:
                        print("== %s: first start %d: %s" % (kind, attempt + 1, e), file=sys.stderr)
                        time.sleep(8)  # past the lease of the egsd that stepped down, so the next one leads
            for rnd in range(ROUNDS):
                for ret in RETENTIONS:
                    for name, binary in (binaries if rnd % 2 == 0 else binaries[::-1]):
                        data, sargs = copies[name]
                        try:
                            r = one_start(binary, data, sargs, ret)
                        except RuntimeError as e:  # e.g. a PostgreSQL load longer than the leader's lease
                            tail = open(os.path.join(data, "egsd.log")).read().strip().splitlines()[-3:]
                            r = {"failed": " / ".join(tail)[:300]}
                            print("== %s %s: %s" % (kind, ret, e), file=sys.stderr)
                        r.update(store=kind, retention=ret, round=rnd + 1, egsd=name)
                        if "failed" in r:
                            time.sleep(8)
                        rows.append(r)
                        print("== " + json.dumps(r), file=sys.stderr)
    finally:
        if pg:
            pg.cleanup()
        if os.environ.get("KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
    print("| egsd | store | --finished-retention | round | GPRs in memory | start-up s | CPU s | RSS MiB | peak RSS MiB |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "failed" in r:
            print("| %s | %s | %s | %d | egsd did not start: %s | | | | |" % (
                r["egsd"], r["store"], r["retention"], r["round"], r["failed"]))
            continue
        print("| %s | %s | %s | %d | %d | %.2f | %.2f | %.0f | %.0f |" % (
            r["egsd"], r["store"], r["retention"], r["round"], r["in_memory"], r["ready_s"], r["cpu_s"], r["rss_mib"],
            r["hwm_mib"]))
    print("\n%d GPRs; load average %s" % (N, " ".join(open("/proc/loadavg").read().split()[:3])))


if __name__ == "__main__":
    main()
