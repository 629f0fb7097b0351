"""What the API tests against the fake Kubernetes API server share: K8sAgent, a real egs-agent
--backend kubernetes, and k8s_env, the fake server and egsd with their teardown (every agent stopped and
its log printed, then egsd and the fake closed, whatever the test did)."""
import contextlib
import os
import subprocess
import sys

from conftest import BIN, Cluster, free_port

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake-k8s"))
from fakek8s import FakeK8s  # noqa: E402

DRAIN_TIMEOUT_S = 4


class K8sAgent:
    """A real egs-agent with --backend kubernetes against the fake API server, registered as cluster `name`.
    By default it runs node checks, drains and serves the admission webhook, with the fake's admin
    kubeconfig; minimal=True runs it with none of those (what a least-privilege agent needs, as
    test_slice_access_k8s runs it), kubeconfig= names another one (e.g. a ServiceAccount's) and ca_data=
    registers the cluster with the API server's CA."""

    def __init__(self, cluster, fake, name="k1", kubeconfig=None, ca_data=None, minimal=False):
        body = {"clusterName": name, "apiServer": fake.url}
        if ca_data:
            body["caData"] = ca_data
        data = cluster.admin.ok("POST", "/api/v1/clusters", body)
        self.workdir = os.path.join(cluster.tmp, "agent-" + name)
        os.makedirs(self.workdir, exist_ok=True)
        self.token_file = os.path.join(self.workdir, "token")
        with open(self.token_file, "w") as f:
            f.write(data["agentToken"] + "\n")
        self.args = [os.path.join(BIN, "egs-agent"), "--server", cluster.egsd.url, "--cluster", name,
                     "--token-file", self.token_file, "--backend", "kubernetes", "--kubeconfig",
                     kubeconfig or fake.kubeconfig, "--state-dir", os.path.join(self.workdir, "state")]
        if not minimal:
            self.webhook_port = free_port()
            crt, key = fake.issue_cert("egs-agent", ["127.0.0.1", "localhost"])
            self.args += ["--pre-checks", "node-health", "--post-checks", "node-health", "--evict-grace", "1",
                          "--drain-timeout", str(DRAIN_TIMEOUT_S), "--webhook-port", str(self.webhook_port),
                          "--webhook-cert", crt, "--webhook-key", key,
                          "--webhook-url", "https://127.0.0.1:%d" % self.webhook_port, "--webhook-ca", fake.ca]
        self.args += ["--log-level", "debug"]
        self.log_path = os.path.join(self.workdir, "agent.log")
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
        self.log.close()

    def logs(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


@contextlib.contextmanager
def k8s_env(tmp, terminate_seconds, bookmark_seconds=1.0, egsd_extra=()):
    """Yields (fake, cluster, agents): the fake API server (its state under tmp/k8s), egsd (conftest's Cluster,
    with egsd_extra on its command line) in tmp, and an empty list for the test's started K8sAgents.  On the way out, failed or not, each agent in
    the list is stopped and the tail of its log printed (pytest shows it when the test fails), then egsd and
    the fake are closed."""
    fake = FakeK8s(terminate_seconds=terminate_seconds, bookmark_seconds=bookmark_seconds,
                   directory=os.path.join(tmp, "k8s"))
    agents = []
    try:
        cluster = Cluster(tmp, extra=egsd_extra)
    except BaseException:
        fake.close()
        raise
    try:
        yield fake, cluster, agents
    finally:
        for a in agents:
            a.stop()
            print(a.logs()[-20000:])
        cluster.close()
        fake.close()
