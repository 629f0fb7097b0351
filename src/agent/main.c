/*
 * main.c: the egs-agent program: options, the token file, the device and cluster backends, then the
 * protocol loop until SIGTERM or SIGINT.
 *
 * Signals are blocked in every thread and taken synchronously with sigwait() here, so the shutdown
 * path is ordinary code (no async-signal-safety puzzles).  Exit status: 0 after a clean shutdown,
 * 1 when a backend cannot start, 2 for usage errors.
 */
#include "agent/agent.h"
#include "agent/backend.h"
#include "agent/devices.h"
#include "agent/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_MAX 4096
#define HOOK_TIMEOUT_S 300

struct options {
	const char *server, *cluster, *token_file, *devices, *backend, *state_dir;
	const char *on_attach, *on_detach;
	enum egs_agent_log_level level;
};

static void usage(FILE *f)
{
	fputs("usage: egs-agent --server URL --cluster NAME --token-file FILE --devices FILE.yaml|nvml\n"
	      "                 [--backend local] [--state-dir DIR] [--on-attach CMD] [--on-detach CMD]\n"
	      "                 [--log-level error|warn|info|debug]\n"
	      "\n"
	      "The worker-side agent of the Elastic GPU Service: registers this cluster's nodes and GPUs\n"
	      "with egsd, sends heartbeats with GPU samples, and attaches and detaches nodes as egsd asks.\n"
	      "\n"
	      "  --server URL        egsd's base URL, e.g. http://127.0.0.1:8080\n"
	      "  --cluster NAME      the cluster this agent serves (as registered by an admin)\n"
	      "  --token-file FILE   file holding the cluster's agent token (data.agentToken)\n"
	      "  --devices SRC       a mock devices YAML file, or 'nvml' for the local GPUs\n"
	      "  --backend NAME      cluster backend; 'local' (the default) is the only one built\n"
	      "  --state-dir DIR     where the local backend keeps its state (default ./egs-agent-state)\n"
	      "  --on-attach CMD     shell command run when a node is attached (EGS_* variables set)\n"
	      "  --on-detach CMD     shell command run when a node is detached\n"
	      "  --log-level LEVEL   default info\n"
	      "  --help              this text\n",
	      f);
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "egs-agent: %s%s%s\nTry 'egs-agent --help'.\n", what, arg ? ": " : "", arg ? arg : "");
	return 2;
}

/* Parses argv into o.  Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"server", required_argument, NULL, 's'},     {"cluster", required_argument, NULL, 'c'},
		{"token-file", required_argument, NULL, 't'}, {"devices", required_argument, NULL, 'd'},
		{"backend", required_argument, NULL, 'b'},    {"state-dir", required_argument, NULL, 'S'},
		{"on-attach", required_argument, NULL, 'A'},  {"on-detach", required_argument, NULL, 'D'},
		{"log-level", required_argument, NULL, 'l'},  {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *why = NULL;
	int c;

	*o = (struct options){.backend = "local", .state_dir = "./egs-agent-state", .level = EGS_ALOG_INFO};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's': o->server = optarg; break;
		case 'c': o->cluster = optarg; break;
		case 't': o->token_file = optarg; break;
		case 'd': o->devices = optarg; break;
		case 'b': o->backend = optarg; break;
		case 'S': o->state_dir = optarg; break;
		case 'A': o->on_attach = optarg; break;
		case 'D': o->on_detach = optarg; break;
		case 'l':
			if (!egs_agent_log_parse_level(optarg, &o->level))
				return usage_error("--log-level must be error, warn, info or debug", optarg);
			break;
		case 'h': usage(stdout); return 0;
		default: return usage_error("unknown option or missing argument", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument", argv[optind]);
	if (!o->server || !o->cluster || !o->token_file || !o->devices)
		return usage_error("--server, --cluster, --token-file and --devices are required", NULL);
	if (strncmp(o->server, "http://", 7) != 0 && strncmp(o->server, "https://", 8) != 0)
		return usage_error("--server must be an http:// or https:// URL", o->server);
	if (!egs_dns_label_valid(o->cluster, &why))
		return usage_error("--cluster", why);
	if (strcmp(o->backend, "local") != 0)
		return usage_error("only the 'local' backend is built; not", o->backend);
	return -1;
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
	EGS_LOG_INFO("egs-agent %s: cluster %s, server %s, devices %s (%zu nodes, %zu GPUs), backend %s "
		     "(state %s)",
		     EGS_AGENT_VERSION, o->cluster, o->server, o->devices, dev->n_nodes, gpus, o->backend,
		     o->state_dir);
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

/* Opens the device and cluster backends; logs why and returns false when one cannot start. */
static bool open_backends(const struct options *o, struct egs_devices **dev, struct egs_backend **be)
{
	struct egs_backend_local_config lc = {
		.state_dir = o->state_dir,
		.cluster = o->cluster,
		.on_attach = o->on_attach,
		.on_detach = o->on_detach,
		.hook_timeout_s = HOOK_TIMEOUT_S,
	};
	char err[1024];

	if (egs_devices_mock_load(o->devices, o->cluster, dev, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("devices: %s", err);
		return false;
	}
	if (egs_backend_local_new(&lc, be, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_ERROR("backend local: %s", err);
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct options o;
	struct egs_devices *dev = NULL;
	struct egs_backend *be = NULL;
	struct egs_agent *agent = NULL;
	char token[TOKEN_MAX + 2];
	sigset_t sigs;
	int rc, sig;

	rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		return rc;
	egs_agent_log_set_level(o.level);
	if (strcmp(o.devices, "nvml") == 0) {
		fprintf(stderr, "egs-agent: nvml backend not built yet; use a mock devices YAML file\n");
		return 2;
	}
	rc = 1;
	if (!read_token(o.token_file, token, sizeof(token)) || !open_backends(&o, &dev, &be))
		goto out;

	/* Before any thread exists, so that every thread inherits the mask. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	agent = egs_agent_new(&(struct egs_agent_config){
		.server_url = o.server, .cluster = o.cluster, .token = token, .devices = dev, .backend = be});
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
	egs_backend_free(be);
	egs_devices_free(dev);
	if (rc == 0)
		EGS_LOG_INFO("stopped");
	return rc;
}
