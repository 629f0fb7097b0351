"""Installation: `make install` (PREFIX, DESTDIR) and its systemd units, the Containerfile, and egsd's
--admin-key-file (the Kubernetes Secret of deploy/kubernetes/controller).  The kustomize bases are
tested in test_install_kustomize.py.  No container runtime runs on our build machines, so the
Containerfile is checked for what can be checked without building it: the paths it copies exist, the
binaries it takes are the Makefile's, and its runtime stage installs every shared library they link."""
import os
import re
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import BIN, ROOT, Egsd, Api

PROGRAMS = ["egsd", "egs-agent", "egsctl"]
UNITS = ["egsd.service", "egs-agent.service"]


def make_install(*args):
    r = subprocess.run(["make", "-s", "--no-print-directory", "install", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_make_install_destdir_tree():
    with tempfile.TemporaryDirectory(prefix="egs-install-") as dest:
        make_install("DESTDIR=" + dest)
        root = os.path.join(dest, "usr", "local")
        for p in PROGRAMS:
            path = os.path.join(root, "bin", p)
            assert os.stat(path).st_mode & 0o777 == 0o755, path
            r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
            assert r.returncode == 0 and "usage" in (r.stdout + r.stderr).lower(), (p, r.stdout, r.stderr)
        docs = os.path.join(root, "share", "doc", "egs")
        for d in ["README.md", "agent.md", "egsctl.md", "kubernetes-install.md", "internals/agent-protocol.md"]:
            assert os.path.isfile(os.path.join(docs, d)), d
        assert os.path.isfile(os.path.join(root, "share", "bash-completion", "completions", "egsctl"))
        for u in UNITS:
            path = os.path.join(root, "lib", "systemd", "system", u)
            text = open(path).read()
            assert os.stat(path).st_mode & 0o777 == 0o644
            assert "@" + "BINDIR@" not in text and "@DOCDIR@" not in text
            prog = u.split(".")[0]
            assert re.search(r"^ExecStart=/usr/local/bin/%s " % prog, text, re.M), text
            assert dest not in text  # DESTDIR is where files go, never what they name
        # Nothing outside PREFIX: the staging tree holds usr/local only.
        assert os.listdir(dest) == ["usr"] and os.listdir(os.path.join(dest, "usr")) == ["local"]


def test_make_install_prefix():
    with tempfile.TemporaryDirectory(prefix="egs-install-") as dest:
        make_install("DESTDIR=" + dest, "PREFIX=/opt/egs")
        unit = open(os.path.join(dest, "opt/egs/lib/systemd/system/egsd.service")).read()
        assert "ExecStart=/opt/egs/bin/egsd " in unit and "file:/opt/egs/share/doc/egs/" in unit
        assert os.access(os.path.join(dest, "opt/egs/bin/egsd"), os.X_OK)


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is not installed")
def test_systemd_units_verify_and_hardening():
    with tempfile.TemporaryDirectory(prefix="egs-units-") as tmp:
        # A real PREFIX (no DESTDIR), so that verify finds the programs ExecStart names.
        make_install("PREFIX=" + os.path.join(tmp, "usr"))
        units = os.path.join(tmp, "usr", "lib", "systemd", "system")
        r = subprocess.run(["systemd-analyze", "verify"] + UNITS, cwd=units, capture_output=True, text=True,
                           timeout=60)
        # verify exits 0 on unknown keys too, and only warns: any output is a mistake in a unit.
        assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr
        for u in UNITS:
            text = open(os.path.join(units, u)).read()
            for key in ("DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=",
                        "CapabilityBoundingSet=\n", "ProtectHome=yes"):
                assert key in text, (u, key)
            r = subprocess.run(["systemd-analyze", "security", "--offline=yes", u], cwd=units, capture_output=True,
                               text=True, timeout=60)
            m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
            assert m, r.stdout + r.stderr
            assert float(m.group(1)) < 3.0, (u, m.group(1))  # systemd's scale: below 3 is "OK"


# ---------------------------------------------------------------------------------------------------
# Containerfile
# ---------------------------------------------------------------------------------------------------

def containerfile():
    return open(os.path.join(ROOT, "Containerfile")).read()


def test_containerfile_copies_existing_paths_and_names_both_images():
    text = containerfile()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)
    names = {s[1] for s in stages}
    assert {"build", "runtime", "egsd", "egs-agent"} <= names
    assert all(s[0].startswith("debian:") or s[0] in names for s in stages), stages
    copies = re.findall(r"^COPY\s+(?!--from)(.+?)\s+\S+$", text, re.M)
    assert copies
    for c in copies:
        for src in c.split():
            assert os.path.exists(os.path.join(ROOT, src)), src
    make = open(os.path.join(ROOT, "Makefile")).read()
    assert re.search(r"^all:", make, re.M) and "RUN make" in text
    taken = re.findall(r"^COPY --from=build /src/build/bin/(\S+) /usr/local/bin/(\S+)", text, re.M)
    assert sorted(taken) == [("egs-agent", "egs-agent"), ("egsd", "egsd")]
    for prog, _ in taken:
        assert re.search(r'ENTRYPOINT \["/usr/local/bin/%s"\]' % prog, text)
    assert re.search(r"^USER 65532", text, re.M)  # the runtime images never run as root


def runtime_packages(text):
    stage = text.split("AS runtime", 1)[1].split("FROM", 1)[0]
    m = re.search(r"apt-get install[^\n]*?--no-install-recommends(.*?)&&", stage, re.S)
    return set(m.group(1).replace("\\", " ").split())


@pytest.mark.skipif(not shutil.which("dpkg") or not shutil.which("readelf"), reason="needs dpkg and readelf")
def test_containerfile_runtime_has_every_linked_library():
    """Each shared library the binaries name (DT_NEEDED) comes from a Debian package that the runtime stage
    installs (or libc6, in every Debian image): a library added to the link shows up here, not in a pod."""
    pkgs = runtime_packages(containerfile())
    missing = []
    for prog in ("egsd", "egs-agent"):
        dyn = subprocess.run(["readelf", "-d", os.path.join(BIN, prog)], capture_output=True, text=True).stdout
        where = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(
            ["ldd", os.path.join(BIN, prog)], capture_output=True, text=True).stdout, re.M))
        for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dyn):
            owner = ""
            for path in (where[lib], "/usr" + where[lib], where[lib].replace("/usr/lib/", "/lib/", 1)):
                owner = owner or subprocess.run(["dpkg", "-S", path], capture_output=True, text=True).stdout
            pkg = owner.split(":", 1)[0].strip()
            assert pkg, lib
            if pkg != "libc6" and pkg not in pkgs:
                missing.append((prog, lib, pkg))
    assert not missing, missing


# ---------------------------------------------------------------------------------------------------
# egsd --admin-key-file
# ---------------------------------------------------------------------------------------------------

def test_admin_key_file_is_adopted_at_first_start(tmp_path):
    key = "3f1c2a9e-8b7d-4c6e-9a5f-0123456789ab"
    key_file = tmp_path / "secret" / "admin.key"
    key_file.parent.mkdir()
    key_file.write_text(key.upper() + "\n")  # as a Secret may hold it: upper case, a newline
    e = Egsd(str(tmp_path / "data"), extra=["--admin-key-file", str(key_file)]).start()
    try:
        assert e.admin_key == key
        assert Api(e.port, key).call("GET", "/api/v1/clusters")[0] == 200
        assert Api(e.port, key.upper()).call("GET", "/api/v1/clusters")[0] == 401
    finally:
        e.stop()
    assert os.stat(tmp_path / "data" / "admin.key").st_mode & 0o777 == 0o600
    # Later starts keep the store's key: a changed file does not replace it (nor crash egsd).
    key_file.write_text("not a key")
    e = Egsd(str(tmp_path / "data"), extra=["--admin-key-file", str(key_file)]).start()
    try:
        assert Api(e.port, key).call("GET", "/api/v1/clusters")[0] == 200
    finally:
        e.stop()
    assert key not in e.logs()


@pytest.mark.parametrize("content", ["", "not-a-key", "3f1c2a9e-8b7d-4c6e-9a5f-0123456789abX", None])
def test_admin_key_file_bad_refuses_to_start(tmp_path, content):
    key_file = tmp_path / "admin.key"
    if content is not None:
        key_file.write_text(content)
    data = tmp_path / "data"
    r = subprocess.run([os.path.join(BIN, "egsd"), "--listen", "127.0.0.1:0", "--data", str(data),
                        "--admin-key-file", str(key_file)], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "--admin-key-file" in r.stderr and "must hold one API key" in r.stderr, r.stderr
    assert not (data / "admin.key").exists()  # no half bootstrap: no key file names a key it lacks
