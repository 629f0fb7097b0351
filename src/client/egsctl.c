/*
 * egsctl.c: the EGS command line (kubectl's habits): finds the command among the arguments (global
 * options may come before it), hands the rest to the command's module, and frees the connection.
 * The commands live in ctl_*.c; ctl.h lists them and the exit codes scripts rely on.
 */
#include "core/common.h"

#include "client/ctl.h"

#include <stdlib.h>
#include <string.h>

#define EGSCTL_VERSION "0.1.0"

struct command {
	const char *name;
	int (*fn)(struct ctl *c, int argc, char **argv);
	const char *summary;
};

static int cmd_version(struct ctl *c, int argc, char **argv);
static int cmd_help(struct ctl *c, int argc, char **argv);

static const struct command commands[] = {
	{"login", ctl_cmd_login, "check an API key and save it with the server's URL as a context"},
	{"config", ctl_cmd_config, "list, switch or delete contexts"},
	{"get", ctl_cmd_get, "list gprs, workspaces, nodes, gpus, clusters, events or the queue"},
	{"describe", ctl_cmd_describe, "show one GPR (or workspace) in detail, with its events"},
	{"create", ctl_cmd_create, "create a GPR from flags"},
	{"waittime", ctl_cmd_waittime, "estimate when a request would start, per cluster and GPU shape"},
	{"wait", ctl_cmd_wait, "wait until a GPR is Provisioned (or another state), showing progress"},
	{"release", ctl_cmd_release, "give a provisioned GPR's GPUs back before its exit time"},
	{"delete", ctl_cmd_delete, "cancel a waiting GPR, or delete what manifests describe (-f)"},
	{"apply", ctl_cmd_apply, "create or update what YAML manifests describe (idempotent)"},
	{"kubeconfig", ctl_cmd_kubeconfig, "print a workspace's kubeconfig for one of its clusters"},
	{"regenerate", ctl_cmd_regenerate, "regenerate a workspace's kubeconfig (cuts off the old ones)"},
	{"version", cmd_version, "print egsctl's version"},
	{"help", cmd_help, "help on a command"},
};

static void usage(FILE *f)
{
	fputs("usage: egsctl [global options] COMMAND [ARGS...]\n"
	      "\n"
	      "The command line of the Elastic GPU Service.\n"
	      "\n"
	      "commands:\n",
	      f);
	for (size_t i = 0; i < EGS_ARRAY_LEN(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fputs("\n"
	      "global options (anywhere on the line):\n"
	      "  --context NAME          use this saved context instead of the current one\n"
	      "  --server URL            the EGS server (overrides the context; $EGS_SERVER)\n"
	      "  --key-file FILE         the API key (overrides the context; $EGS_API_KEY holds a key)\n"
	      "  -o, --output FORMAT     table (default), wide, json, yaml or name\n"
	      "  --request-timeout DUR   bound of each call to the server (default 30s)\n"
	      "  --ca-file FILE          https: trust the CA certificates (PEM) in FILE instead of the system's\n"
	      "                          (overrides the context's certificate-authority; $EGS_CA_FILE)\n"
	      "  --config FILE           the contexts file (default $EGS_CONFIG or ~/.config/egs/config)\n"
	      "  -h, --help              help; `egsctl COMMAND --help` for a command's\n"
	      "\n"
	      "exit codes: 0 ok, 1 refused by the server, 2 bad usage or manifest, 3 not found,\n"
	      "4 not logged in or not allowed, 5 server unreachable or failing, 6 wait timed out,\n"
	      "7 conflict with the object's state, 8 the awaited state can no longer be reached.\n"
	      "\n"
	      "Start with: egsctl login http://127.0.0.1:8080 --key-file var/admin.key\n",
	      f);
}

static int cmd_version(struct ctl *c, int argc, char **argv)
{
	(void)c, (void)argc, (void)argv;
	printf("egsctl %s\n", EGSCTL_VERSION);
	return CTL_OK;
}

static const struct command *find(const char *name)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(commands); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static int cmd_help(struct ctl *c, int argc, char **argv)
{
	const struct command *cmd = argc > 1 ? find(argv[1]) : NULL;
	char *args[] = {argv[0], "--help", NULL};

	if (argc <= 1) {
		usage(stdout);
		return CTL_OK;
	}
	if (!cmd || cmd->fn == cmd_help)
		return ctl_usage(c, "no command named %s (see egsctl --help)", argv[1]);
	c->cmd = cmd->name;
	return cmd->fn(c, 2, args);
}

/* Does argv[i] (a global option written "--name VALUE") consume the next argument? */
static bool takes_value(const char *a)
{
	static const char *const with_value[] = {"--context", "--server", "--key-file", "-o", "--output",
						 "--request-timeout", "--config", "--ca-file"};
	for (size_t i = 0; i < EGS_ARRAY_LEN(with_value); i++)
		if (!strcmp(a, with_value[i]))
			return true;
	return false;
}

/* The index of the command word, or 0 when there is none. */
static int command_index(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] != '-')
			return i;
		if (takes_value(argv[i]))
			i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ctl c = {.request_timeout_s = 30};
	const struct command *cmd;
	int idx = command_index(argc, argv), rc;
	char **args;

	if (idx == 0) {
		bool help = argc > 1 && (!strcmp(argv[argc - 1], "--help") || !strcmp(argv[argc - 1], "-h"));
		usage(help ? stdout : stderr);
		return help ? CTL_OK : CTL_USAGE;
	}
	cmd = find(argv[idx]);
	if (!cmd) {
		fprintf(stderr, "egsctl: unknown command '%s' (see egsctl --help)\n", argv[idx]);
		return CTL_USAGE;
	}
	c.cmd = cmd->name;
	/* The command sees argv without its own name: global options before it stay options. */
	args = egs_calloc((size_t)argc, sizeof(*args));
	for (int i = 0, j = 0; i < argc; i++)
		if (i != idx)
			args[j++] = argv[i];
	rc = cmd->fn(&c, argc - 1, args);
	egs_free(args);
	egs_client_free(c.client);
	if (fflush(stdout) != 0 && rc == CTL_OK)
		rc = CTL_FAILED; /* a full disk or closed pipe must not look like success */
	return rc;
}
