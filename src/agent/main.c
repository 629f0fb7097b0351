/*
 * main.c: the egs-agent program: options, the token file, the device and cluster backends, the
 * connectivity listener, then the protocol loop until SIGTERM or SIGINT.  `--probe` instead prints
 * what the device backend reads, one JSON line per GPU, and exits (tests/nvml-real.sh uses it).
 *
 * Signals are blocked in every thread and taken synchronously with sigwait() here, so the shutdown
 * path is ordinary code (no async-signal-safety puzzles).  Exit status: 0 after a clean shutdown,
 * 1 when a backend cannot start, 2 for usage errors.
 */
#include "agent/agent.h"
#include "agent/backend.h"
#include "agent/backend_k8s.h"
#include "agent/k8s_events.h"
#include "agent/checks.h"
#include "agent/devices.h"
#include "agent/k8s_gprcr.h"
#include "agent/k8s_infer.h"
#include "agent/log.h"
#include "agent/peer.h"
#include "agent/report.h"
#include "agent/webhook.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_MAX 4096
#define HOOK_TIMEOUT_S 300
#define CHECK_LOG_MAX_AGE_S (30 * 86400)

struct options {
	const char *server, *cluster, *token_file, *devices, *backend, *state_dir;
	const char *ca_file; /* --ca-file: the CA (PEM) that verifies an https:// --server */
	const char *on_attach, *on_detach;
	const char *node_name, *instance_type, *cloud_provider, *region; /* --devices nvml */
	const char *storage, *nccl, *advertise;
	const char *kubeconfig, *dcgm_url; /* --backend kubernetes */
	const char *webhook_cert, *webhook_key, *webhook_url, *webhook_ca;
	int webhook_port;
	int check_port, nccl_timeout_s, quarantine_s, sample_interval_s, expect_gpus;
	int evict_grace_s, drain_timeout_s;
	struct egs_checks_config checks;
	bool probe;
	enum egs_agent_log_level level;
};

static void usage(FILE *f)
{
	fputs("usage: egs-agent --server URL --cluster NAME --token-file FILE --devices FILE.yaml|nvml [options]\n"
	      "       egs-agent --server URL --cluster NAME --token-file FILE --backend kubernetes\n"
	      "                 [--kubeconfig FILE] [options]\n"
	      "       egs-agent --devices FILE.yaml|nvml --probe [--cluster NAME]\n"
	      "\n"
	      "The worker-side agent of the Elastic GPU Service: registers this cluster's nodes and GPUs\n"
	      "with egsd, sends heartbeats with GPU samples, runs pre-provisioning and post-exit checks, and\n"
	      "attaches and detaches nodes as egsd asks.\n"
	      "\n"
	      "  --server URL            egsd's base URL, e.g. http://127.0.0.1:8080 or https://egs.example:8443\n"
	      "  --ca-file FILE          https: trust the CA certificates (PEM) in FILE instead of the system\n"
	      "                          store to verify egsd (its certificate must name the --server host)\n"
	      "  --cluster NAME          the cluster this agent serves (as registered by an admin)\n"
	      "  --token-file FILE       file holding the cluster's agent token (data.agentToken)\n"
	      "  --devices SRC           a mock devices YAML file, or 'nvml' for this host's NVIDIA GPUs\n"
	      "                          (libnvidia-ml.so.1, or $EGS_NVML_LIBRARY)\n"
	      "  --node-name NAME        nvml: the node's name (default: the host name)\n"
	      "  --instance-type TYPE    nvml: default the DMI product name, else 'unknown'\n"
	      "  --cloud-provider NAME, --region NAME   nvml: optional node labels\n"
	      "  --expect-gpus N         nvml: the GPUs this host should have; fewer makes it Unhealthy\n"
	      "  --backend NAME          cluster backend: 'local' (the default: a state file and hooks) or\n"
	      "                          'kubernetes' (the cluster's GPU nodes; no --devices then)\n"
	      "  --kubeconfig FILE       kubernetes: the kubeconfig (default: in-cluster service account)\n"
	      "  --dcgm-exporter URL     kubernetes: scrape GPU metrics from URL (default: the dcgm-exporter\n"
	      "                          pods, found by label), every --sample-interval seconds\n"
	      "  --evict-grace S         kubernetes: evicted pods' grace period at detach (default 30)\n"
	      "  --drain-timeout S       kubernetes: evictions a PodDisruptionBudget refuses are retried\n"
	      "                          this long, then the pods are deleted (default 300)\n"
	      "  --webhook-port PORT     kubernetes: serve the admission webhook (HTTPS) on this port\n"
	      "  --webhook-cert FILE, --webhook-key FILE   its certificate chain and key (PEM)\n"
	      "  --webhook-url URL       kubernetes: with --webhook-ca, register the webhook configurations\n"
	      "                          'egs-agent' pointing the API server at URL (https://host:port)\n"
	      "  --webhook-ca FILE       the CA (PEM) that signed --webhook-cert, for their caBundle\n"
	      "  --state-dir DIR         the local backend's state and the check logs (default ./egs-agent-state)\n"
	      "  --on-attach CMD         shell command run when a node is attached (EGS_* variables set)\n"
	      "  --on-detach CMD         shell command run when a node is detached (drain it here)\n"
	      "  --pre-checks LIST       checks before an attach (default all: node-health,gpu-inventory,\n"
	      "                          gpu-processes,storage,connectivity,nccl; 'none' for none)\n"
	      "  --post-checks LIST      checks after a detach (default node-health,gpu-processes,storage)\n"
	      "  --check-storage PATH    directory that must be present ({node} is the node's name)\n"
	      "  --check-nccl CMD        NCCL test command for multi-node GPRs (EGS_NODES etc. set)\n"
	      "  --check-nccl-timeout S  default 600\n"
	      "  --check-port PORT       listen here for peer agents' connectivity checks (default 0: off)\n"
	      "  --advertise-host HOST   the host peers reach this agent at (default: the host name)\n"
	      "  --check-quarantine S    a node that failed a check is reported Unhealthy this long (300)\n"
	      "  --sample-interval S     seconds between GPU samples (default 1)\n"
	      "  --probe                 print one JSON line per GPU with what the devices read, and exit\n"
	      "  --log-level LEVEL       error, warn, info (default) or debug\n"
	      "  --help                  this text\n",
	      f);
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "egs-agent: %s%s%s\nTry 'egs-agent --help'.\n", what, arg ? ": " : "", arg ? arg : "");
	return 2;
}

/* Parses a decimal integer within [min, max]. */
static bool int_arg(const char *s, int min, int max, int *out)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno == ERANGE || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

enum {
	O_NODE_NAME = 256, O_INSTANCE_TYPE, O_CLOUD, O_REGION, O_PRE, O_POST, O_STORAGE, O_NCCL, O_NCCL_TIMEOUT,
	O_CHECK_PORT, O_ADVERTISE, O_QUARANTINE, O_SAMPLE, O_PROBE, O_EXPECT_GPUS, O_KUBECONFIG, O_EVICT_GRACE,
	O_DRAIN_TIMEOUT, O_WH_PORT, O_WH_CERT, O_WH_KEY, O_WH_URL, O_WH_CA, O_CA_FILE, O_DCGM,
};

/* Takes one option c (with optarg) into o.  Returns -1 to go on, else the exit status. */
static int take_option(int c, struct options *o, const char *opt)
{
	char err[128];

	switch (c) {
	case 's': o->server = optarg; break;
	case 'c': o->cluster = optarg; break;
	case 't': o->token_file = optarg; break;
	case 'd': o->devices = optarg; break;
	case 'b': o->backend = optarg; break;
	case 'S': o->state_dir = optarg; break;
	case 'A': o->on_attach = optarg; break;
	case 'D': o->on_detach = optarg; break;
	case O_NODE_NAME: o->node_name = optarg; break;
	case O_INSTANCE_TYPE: o->instance_type = optarg; break;
	case O_CLOUD: o->cloud_provider = optarg; break;
	case O_REGION: o->region = optarg; break;
	case O_STORAGE: o->checks.storage_path = optarg; break;
	case O_NCCL: o->checks.nccl_command = optarg; break;
	case O_ADVERTISE: o->advertise = optarg; break;
	case O_PROBE: o->probe = true; break;
	case O_KUBECONFIG: o->kubeconfig = optarg; break;
	case O_DCGM: o->dcgm_url = optarg; break;
	case O_WH_CERT: o->webhook_cert = optarg; break;
	case O_WH_KEY: o->webhook_key = optarg; break;
	case O_WH_URL: o->webhook_url = optarg; break;
	case O_WH_CA: o->webhook_ca = optarg; break;
	case O_CA_FILE: o->ca_file = optarg; break;
	case O_PRE:
	case O_POST:
		if (egs_checks_parse_list(optarg, c == O_PRE ? EGS_CHECK_PRE : EGS_CHECK_POST,
					  c == O_PRE ? &o->checks.pre : &o->checks.post, err, sizeof(err)) != EGS_OK)
			return usage_error(c == O_PRE ? "--pre-checks" : "--post-checks", err);
		break;
	case O_EXPECT_GPUS:
		if (!int_arg(optarg, 1, 64, &o->expect_gpus))
			return usage_error("--expect-gpus must be 1 to 64", optarg);
		break;
	case O_NCCL_TIMEOUT:
	case O_CHECK_PORT:
	case O_QUARANTINE:
	case O_EVICT_GRACE:
	case O_DRAIN_TIMEOUT:
	case O_WH_PORT:
	case O_SAMPLE: {
		int *dst = c == O_NCCL_TIMEOUT ? &o->checks.nccl_timeout_s : c == O_CHECK_PORT ? &o->check_port :
			   c == O_QUARANTINE ? &o->quarantine_s : c == O_EVICT_GRACE ? &o->evict_grace_s :
			   c == O_DRAIN_TIMEOUT ? &o->drain_timeout_s : c == O_WH_PORT ? &o->webhook_port :
			   &o->sample_interval_s;
		bool port = c == O_CHECK_PORT || c == O_WH_PORT;
		if (!int_arg(optarg, c == O_CHECK_PORT ? 0 : 1, port ? 65535 : 86400, dst))
			return usage_error("expected a number in range for", opt);
		break;
	}
	case 'l':
		if (!egs_agent_log_parse_level(optarg, &o->level))
			return usage_error("--log-level must be error, warn, info or debug", optarg);
		break;
	case 'h': usage(stdout); return 0;
	default: return usage_error("unknown option or missing argument", opt);
	}
	return -1;
}

/* Checks what the options say together.  Returns -1 to go on, else the exit status. */
static int check_options(struct options *o)
{
	const char *why = NULL;
	bool kube = strcmp(o->backend, "kubernetes") == 0;

	if (strcmp(o->backend, "local") != 0 && !kube)
		return usage_error("--backend must be 'local' or 'kubernetes', not", o->backend);
	if (kube && o->devices)
		return usage_error("--devices does not apply to --backend kubernetes (the nodes come from the cluster)",
				   NULL);
	if (!kube && (o->kubeconfig || o->webhook_port || o->webhook_url || o->dcgm_url))
		return usage_error("--kubeconfig, --dcgm-exporter and --webhook-* need --backend kubernetes", NULL);
	if (o->dcgm_url && strncmp(o->dcgm_url, "http://", 7) != 0 && strncmp(o->dcgm_url, "https://", 8) != 0)
		return usage_error("--dcgm-exporter must be an http:// or https:// URL, not", o->dcgm_url);
	if (o->webhook_port && (!o->webhook_cert || !o->webhook_key))
		return usage_error("--webhook-port needs --webhook-cert and --webhook-key", NULL);
	if (!o->webhook_url != !o->webhook_ca || (o->webhook_url && strncmp(o->webhook_url, "https://", 8) != 0))
		return usage_error("--webhook-url (an https:// URL) and --webhook-ca go together", NULL);
	if (!o->devices && !kube)
		return usage_error("--devices is required", NULL);
	if (o->probe) {
		if (kube)
			return usage_error("--probe needs --devices", NULL);
		if (!o->cluster)
			o->cluster = "probe";
		return -1;
	}
	if (!o->server || !o->cluster || !o->token_file)
		return usage_error(kube ? "--server, --cluster and --token-file are required" :
					  "--server, --cluster, --token-file and --devices are required", NULL);
	if (strncmp(o->server, "http://", 7) != 0 && strncmp(o->server, "https://", 8) != 0)
		return usage_error("--server must be an http:// or https:// URL", o->server);
	if (o->ca_file && access(o->ca_file, R_OK) != 0)
		return usage_error("--ca-file cannot be read", o->ca_file);
	if (!egs_dns_label_valid(o->cluster, &why))
		return usage_error("--cluster", why);
	if (o->advertise && (!*o->advertise || strchr(o->advertise, ' ') || strlen(o->advertise) > 100))
		return usage_error("--advertise-host must be a host name or address", o->advertise);
	return -1;
}

/* Parses argv into o.  Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"server", required_argument, NULL, 's'},
		{"cluster", required_argument, NULL, 'c'},
		{"token-file", required_argument, NULL, 't'},
		{"devices", required_argument, NULL, 'd'},
		{"backend", required_argument, NULL, 'b'},
		{"state-dir", required_argument, NULL, 'S'},
		{"on-attach", required_argument, NULL, 'A'},
		{"on-detach", required_argument, NULL, 'D'},
		{"log-level", required_argument, NULL, 'l'},
		{"node-name", required_argument, NULL, O_NODE_NAME},
		{"instance-type", required_argument, NULL, O_INSTANCE_TYPE},
		{"cloud-provider", required_argument, NULL, O_CLOUD},
		{"region", required_argument, NULL, O_REGION},
		{"expect-gpus", required_argument, NULL, O_EXPECT_GPUS},
		{"pre-checks", required_argument, NULL, O_PRE},
		{"post-checks", required_argument, NULL, O_POST},
		{"check-storage", required_argument, NULL, O_STORAGE},
		{"check-nccl", required_argument, NULL, O_NCCL},
		{"check-nccl-timeout", required_argument, NULL, O_NCCL_TIMEOUT},
		{"check-port", required_argument, NULL, O_CHECK_PORT},
		{"advertise-host", required_argument, NULL, O_ADVERTISE},
		{"check-quarantine", required_argument, NULL, O_QUARANTINE},
		{"sample-interval", required_argument, NULL, O_SAMPLE},
		{"probe", no_argument, NULL, O_PROBE},
		{"kubeconfig", required_argument, NULL, O_KUBECONFIG},
		{"dcgm-exporter", required_argument, NULL, O_DCGM},
		{"evict-grace", required_argument, NULL, O_EVICT_GRACE},
		{"drain-timeout", required_argument, NULL, O_DRAIN_TIMEOUT},
		{"webhook-port", required_argument, NULL, O_WH_PORT},
		{"webhook-cert", required_argument, NULL, O_WH_CERT},
		{"webhook-key", required_argument, NULL, O_WH_KEY},
		{"webhook-url", required_argument, NULL, O_WH_URL},
		{"webhook-ca", required_argument, NULL, O_WH_CA},
		{"ca-file", required_argument, NULL, O_CA_FILE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;

	*o = (struct options){.backend = "local", .state_dir = "./egs-agent-state", .level = EGS_ALOG_INFO};
	o->checks.pre = egs_checks_all(EGS_CHECK_PRE);
	o->checks.post = egs_checks_all(EGS_CHECK_POST);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		if ((rc = take_option(c, o, argv[optind - 1])) >= 0)
			return rc;
	if (optind < argc)
		return usage_error("unexpected argument", argv[optind]);
	return check_options(o);
}

/* Reads the token (surrounding whitespace dropped) into buf.  Never prints the token itself. */
static bool read_token(const char *path, char *buf, size_t bufsz)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, start = 0;
	struct stat st;
	ssize_t n;

	if (fd < 0) {
		EGS_LOG_ERROR("token file %s: %s", path, strerror(errno));
		return false;
	}
	while (len < bufsz - 1 && (n = read(fd, buf + len, bufsz - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 077))
		EGS_LOG_WARN("token file %s is readable by other users; chmod 600 it", path);
	close(fd);
	buf[len] = '\0';
	if (len == bufsz - 1) {
		EGS_LOG_ERROR("token file %s: longer than %zu bytes", path, bufsz - 2);
		return false;
	}
	while (len > 0 && strchr(" \t\r\n", buf[len - 1]))
		buf[--len] = '\0';
	while (buf[start] && strchr(" \t\r\n", buf[start]))
		start++;
	memmove(buf, buf + start, len - start + 1);
	for (const char *p = buf; *p; p++) {
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
			EGS_LOG_ERROR("token file %s: the token holds whitespace or non-ASCII characters", path);
			return false;
		}
	}
	if (!buf[0]) {
		EGS_LOG_ERROR("token file %s is empty", path);
		return false;
	}
	return true;
}

static void log_start(const struct options *o, const struct egs_devices *dev, struct egs_backend *be)
{
	struct egs_attachment *atts;
	size_t n_atts, gpus = 0;

	for (size_t i = 0; i < dev->n_nodes; i++)
		gpus += (size_t)dev->nodes[i].gpu_count;
	EGS_LOG_INFO("egs-agent %s: cluster %s, server %s, devices %s (%s, %zu nodes, %zu GPUs), backend %s "
		     "(state %s)",
		     EGS_AGENT_VERSION, o->cluster, o->server, o->devices, dev->ops->name, dev->n_nodes, gpus,
		     o->backend, o->state_dir);
	egs_backend_list(be, &atts, &n_atts);
	for (size_t i = 0; i < n_atts; i++)
		EGS_LOG_INFO("node %s is attached to %s (workspace %s, exit %s)", atts[i].node, atts[i].gpr_id,
			     atts[i].workspace, atts[i].exit_time[0] ? atts[i].exit_time : "unknown");
	egs_attachments_free(atts, n_atts);
}

/* Blocks until SIGTERM or SIGINT and returns its number. */
static int wait_for_signal(const sigset_t *set)
{
	int sig = 0;
	while (sigwait(set, &sig) != 0)
		;
	return sig;
}

/* Opens the device backend named by --devices; logs why and returns false when it cannot start. */
static bool open_devices(const struct options *o, const char *address, struct egs_devices **dev)
{
	struct egs_devices_nvml_config nc = {
		.node_name = o->node_name,
		.instance_type = o->instance_type,
		.cloud_provider = o->cloud_provider,
		.region = o->region,
		.address = address,
		.expected_gpus = o->expect_gpus,
	};
	char err[1024];
	enum egs_err rc;

	if (strcmp(o->devices, "nvml") == 0)
		rc = egs_devices_nvml_open(&nc, dev, err, sizeof(err));
	else
		rc = egs_devices_mock_load(o->devices, o->cluster, dev, err, sizeof(err));
	if (rc != EGS_OK)
		EGS_LOG_ERROR("devices: %s", err);
	return rc == EGS_OK;
}

static bool open_backend(const struct options *o, struct egs_backend **be)
{
	struct egs_backend_local_config lc = {
		.state_dir = o->state_dir,
		.cluster = o->cluster,
		.on_attach = o->on_attach,
		.on_detach = o->on_detach,
		.hook_timeout_s = HOOK_TIMEOUT_S,
	};
	char err[1024];

	if (egs_backend_local_new(&lc, be, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("backend local: %s", err);
		return false;
	}
	return true;
}

/* Starts the connectivity listener when --check-port is set, and writes the address peers should use
 * ("host:port") into address. */
static bool start_listener(const struct options *o, struct egs_peer_listener **l, char *address, size_t n)
{
	char err[256], host[256] = "";

	address[0] = '\0';
	if (o->check_port == 0)
		return true;
	if (egs_peer_listener_start(NULL, o->check_port, o->cluster, l, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("--check-port: %s", err);
		return false;
	}
	if (o->advertise)
		egs_strlcpy(host, o->advertise, sizeof(host));
	else if (gethostname(host, sizeof(host) - 1) != 0)
		egs_strlcpy(host, "localhost", sizeof(host));
	snprintf(address, n, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, o->check_port);
	EGS_LOG_INFO("answering peer agents' connectivity checks on port %d (as %s)", o->check_port, address);
	return true;
}

/* --probe: one JSON line per GPU of every node, then exit status 0 (1 when the devices fail). */
static int probe(const struct options *o)
{
	struct egs_devices *dev = NULL;
	int rc = 1;

	if (!open_devices(o, NULL, &dev))
		return 1;
	for (size_t i = 0; i < dev->n_nodes; i++) {
		const struct egs_dev_node *n = &dev->nodes[i];
		struct egs_gpu_sample s[64];
		struct egs_gpu_proc procs[256];
		enum egs_health h = EGS_HEALTH_UNHEALTHY;
		char why[EGS_DEV_WHY_MAX];
		size_t np = 0;
		int64_t now = (int64_t)time(NULL);

		egs_devices_sample(dev, i, now, &h, why, sizeof(why), s);
		if (egs_devices_processes(dev, i, now, procs, EGS_ARRAY_LEN(procs), &np) != EGS_OK)
			np = 0;
		np = np < EGS_ARRAY_LEN(procs) ? np : EGS_ARRAY_LEN(procs);
		for (int g = 0; g < n->gpu_count; g++) {
			json_t *line = egs_report_probe_gpu(n, g, h, why, &s[g], procs, np);
			char *text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(6));
			puts(text);
			free(text);
			json_decref(line);
		}
	}
	rc = fflush(stdout) == 0 ? 0 : 1;
	egs_devices_free(dev);
	return rc;
}

/* Waits up to ms for SIGTERM or SIGINT; returns its number, or 0 when none came. */
static int signal_within(const sigset_t *set, int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	int sig = sigtimedwait(set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* The registration's unmanagedNodes: the GPU nodes that opted out, as node objects. */
static json_t *unmanaged_json(const struct egs_k8s_node *um, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:i, s:I, s:s, s:s}", "name", um[i].name,
						   "instanceType", um[i].instance_type, "gpuModel", um[i].model,
						   "gpuCount", um[i].gpu_count, "memoryMiB", (json_int_t)um[i].memory_mib,
						   "cloudProvider", um[i].cloud_provider, "region", um[i].region));
	return a;
}

/*
 * Runs the agent over the cluster's GPU nodes as they are now, until a signal (stored in *sig) or
 * until the set of GPU nodes changes (then it returns to be called again: the new agent registers the
 * new set, which egsd takes as an upsert).  Returns 0, or 1 when the agent cannot run.
 */
static int run_view(const struct options *o, struct egs_backend *be, const char *token, const char *address,
		    const char *checks_dir, const sigset_t *sigs, int *sig)
{
	uint64_t signature = egs_backend_k8s_signature(be);
	struct egs_devices *dev = NULL;
	struct egs_k8s_node *um = NULL;
	struct egs_agent *agent = NULL;
	size_t n_um = 0;
	json_t *unmanaged;
	int rc = 1;

	egs_backend_k8s_devices(be, &dev, &um, &n_um);
	unmanaged = unmanaged_json(um, n_um);
	agent = egs_agent_new(&(struct egs_agent_config){
		.server_url = o->server, .ca_file = o->ca_file, .cluster = o->cluster, .token = token, .devices = dev,
		.backend = be,
		.checks = &o->checks, .checks_dir = checks_dir, .quarantine_s = o->quarantine_s,
		.sample_interval_s = o->sample_interval_s, .address = address, .unmanaged = unmanaged,
		.no_sharing = true,
	});
	if (!agent) {
		EGS_LOG_ERROR("--server %s is not a usable URL", o->server);
		goto out;
	}
	EGS_LOG_INFO("serving %zu managed GPU nodes of the cluster (%zu unmanaged)", dev->n_nodes, n_um);
	if (egs_agent_start(agent) != EGS_OK) {
		EGS_LOG_ERROR("cannot start the agent's threads");
		goto out;
	}
	rc = 0;
	while (!(*sig = signal_within(sigs, 1000))) {
		if (egs_backend_k8s_signature(be) != signature) {
			EGS_LOG_INFO("the cluster's GPU nodes changed; registering them again");
			break;
		}
	}
out:
	egs_agent_free(agent);
	egs_devices_free(dev);
	json_decref(unmanaged);
	egs_free(um);
	return rc;
}

static bool slice_of(void *arg, const char *ns, char *ws, size_t wssz)
{
	return egs_backend_k8s_slice_of(arg, ns, ws, wssz);
}

/* Registers the webhook configurations (--webhook-url, --webhook-ca).  False when it cannot. */
static bool register_webhooks(const struct options *o, struct egs_backend *be)
{
	char err[512], *ca = NULL;
	FILE *f = fopen(o->webhook_ca, "r");
	size_t n = 0;
	bool ok = false;

	if (!f) {
		EGS_LOG_ERROR("--webhook-ca %s: %s", o->webhook_ca, strerror(errno));
		return false;
	}
	ca = egs_calloc(65537, 1);
	n = fread(ca, 1, 65536, f);
	fclose(f);
	ca[n] = '\0';
	if (egs_backend_k8s_register_webhooks(be, o->webhook_url, ca, err, sizeof(err)) != EGS_OK)
		EGS_LOG_ERROR("cannot register the admission webhook configurations: %s", err);
	else
		ok = true;
	if (ok)
		EGS_LOG_INFO("registered the admission webhook configurations egs-agent at %s", o->webhook_url);
	egs_free(ca);
	return ok;
}

/* --backend kubernetes: the backend, then agents over the node set until a signal. */
static int run_kubernetes(const struct options *o, const char *token, const char *address, const char *checks_dir,
			  const sigset_t *sigs)
{
	struct egs_backend_k8s_config kc = {
		.kubeconfig = o->kubeconfig,
		.cluster = o->cluster,
		.evict_grace_s = o->evict_grace_s,
		.drain_timeout_s = o->drain_timeout_s,
		.dcgm_url = o->dcgm_url,
		.scrape_interval_s = o->sample_interval_s,
	};
	struct egs_backend *be = NULL;
	struct egs_webhook *wh = NULL;
	struct egs_k8s_gpr_events *ev = NULL;
	struct egs_gprcr *crc = NULL; /* the GPUProvisioningRequest controller */
	struct egs_infer *inf = NULL; /* the inference endpoint controller */
	char err[1024];
	int rc = 1, sig = 0;
	bool said = false;

	/* A thread per reflector, the reconciler, the scraper, the event mirror, the webhook and the agent's
	 * two: without a cap glibc gives each its own arena, and their fragments add up to more than the node
	 * cache itself.  One arena: these threads allocate little once the caches are full (bench/k8s). */
	mallopt(M_ARENA_MAX, 1);
	if (mkdir(o->state_dir, 0700) != 0 && errno != EEXIST)
		EGS_LOG_WARN("--state-dir %s: %s; check logs are not kept", o->state_dir, strerror(errno));
	if (egs_backend_k8s_new(&kc, &be, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("backend kubernetes: %s", err);
		return 1;
	}
	if (o->webhook_port && egs_webhook_start(NULL, o->webhook_port, o->webhook_cert, o->webhook_key, slice_of, be,
						 &wh, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("%s", err);
		egs_backend_free(be);
		return 1;
	}
	if (wh)
		EGS_LOG_INFO("serving the admission webhook on port %d", o->webhook_port);
	ev = egs_k8s_gpr_events_new(be, o->server, token, o->ca_file, 0);
	if (!ev)
		EGS_LOG_WARN("cannot start mirroring GPR events into the cluster");
	EGS_LOG_INFO("egs-agent %s: cluster %s, server %s, backend kubernetes (%s)", EGS_AGENT_VERSION, o->cluster,
		     o->server, o->kubeconfig ? o->kubeconfig : "in-cluster");
	while (!sig && !egs_backend_k8s_wait_synced(be, 0)) {
		if (!said)
			EGS_LOG_INFO("waiting for the Kubernetes API server to list the nodes");
		said = true;
		sig = signal_within(sigs, 500);
	}
	rc = sig || !o->webhook_url || register_webhooks(o, be) ? 0 : 1;
	struct egs_gprcr_config gc = { .backend = be, .server_url = o->server, .token = token, .ca_file = o->ca_file };
	if (!sig && rc == 0 && egs_gprcr_start(&gc, &crc, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("%s", err);
		rc = 1;
	}
	struct egs_infer_config ic = { .backend = be, .server_url = o->server, .token = token, .ca_file = o->ca_file };
	if (!sig && rc == 0 && egs_infer_start(&ic, &inf, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("%s", err);
		rc = 1;
	}
	while (!sig && rc == 0)
		rc = run_view(o, be, token, address, checks_dir, sigs, &sig);
	if (sig)
		EGS_LOG_INFO("%s received; stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	egs_k8s_gpr_events_free(ev);
	egs_infer_free(inf);
	egs_gprcr_free(crc);
	egs_webhook_free(wh);
	egs_backend_free(be);
	return rc;
}

int main(int argc, char **argv)
{
	struct options o;
	struct egs_devices *dev = NULL;
	struct egs_backend *be = NULL;
	struct egs_agent *agent = NULL;
	struct egs_peer_listener *listener = NULL;
	char token[TOKEN_MAX + 2], address[300], checks_dir[4096];
	sigset_t sigs;
	int rc, sig;

	rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;
	egs_agent_log_set_level(o.level);
	if (o.probe)
		return probe(&o);
	rc = 1;
	/* Before any thread exists, so that every thread inherits the mask. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (!read_token(o.token_file, token, sizeof(token)) || !start_listener(&o, &listener, address, sizeof(address)))
		goto out;
	snprintf(checks_dir, sizeof(checks_dir), "%s/checks", o.state_dir);
	egs_checks_log_prune(checks_dir, (int64_t)time(NULL), CHECK_LOG_MAX_AGE_S);
	if (strcmp(o.backend, "kubernetes") == 0) {
		rc = run_kubernetes(&o, token, address, checks_dir, &sigs);
		memset(token, 0, sizeof(token));
		goto out;
	}
	if (!open_devices(&o, address, &dev) || !open_backend(&o, &be))
		goto out;

	agent = egs_agent_new(&(struct egs_agent_config){
		.server_url = o.server,
		.ca_file = o.ca_file,
		.cluster = o.cluster,
		.token = token,
		.devices = dev,
		.backend = be,
		.checks = &o.checks,
		.checks_dir = checks_dir,
		.quarantine_s = o.quarantine_s,
		.sample_interval_s = o.sample_interval_s,
		.address = address,
	});
	memset(token, 0, sizeof(token)); /* the clients hold their own copies */
	if (!agent) {
		EGS_LOG_ERROR("--server %s is not a usable URL", o.server);
		goto out;
	}
	log_start(&o, dev, be);
	if (egs_agent_start(agent) != EGS_OK) {
		EGS_LOG_ERROR("cannot start the agent's threads");
		goto out;
	}
	sig = wait_for_signal(&sigs);
	EGS_LOG_INFO("%s received; stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	rc = 0;
out:
	egs_agent_free(agent); /* stops and joins the threads */
	egs_peer_listener_free(listener);
	egs_backend_free(be);
	egs_devices_free(dev);
	if (rc == 0)
		EGS_LOG_INFO("stopped");
	return rc;
}
