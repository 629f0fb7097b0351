/*
 * ctl_args.c: egsctl's command-line plumbing: options (the command's and the global ones, in any
 * order, GNU style: --name VALUE, --name=VALUE, -o json, -ojson), the exit code of each libegs
 * error, messages a person understands, and the authenticated connection of a run.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int ctl_errorf(struct ctl *c, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "egsctl%s%s: ", c->cmd ? " " : "", c->cmd ? c->cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* Finds the option named by arg ("--name", "--name=v", "-x", "-xv") in opts; *inline_value
 * receives the text after '=' or after the short letter, NULL when none. */
static const struct ctl_opt *find_opt(const struct ctl_opt *opts, const char *arg, const char **inline_value)
{
	*inline_value = NULL;
	for (const struct ctl_opt *o = opts; o && o->name; o++) {
		if (arg[1] == '-') {
			size_t n = strlen(o->name);
			if (strncmp(arg + 2, o->name, n) != 0 || (arg[2 + n] != '\0' && arg[2 + n] != '='))
				continue;
			if (arg[2 + n] == '=')
				*inline_value = arg + 3 + n;
			return o;
		}
		if (o->short_name && arg[1] == o->short_name) {
			if (arg[2])
				*inline_value = arg + 2;
			return o;
		}
	}
	return NULL;
}

/* Applies option o with its value (from inline or argv[*i + 1]). */
static int take_opt(struct ctl *c, const struct ctl_opt *o, const char *arg, const char *inl, int argc, char **argv,
		    int *i)
{
	const char *v = inl;

	if (o->flag) {
		if (inl)
			return ctl_usage(c, "%s takes no value", arg);
		*o->flag = true;
		return CTL_OK;
	}
	if (!v) {
		if (*i + 1 >= argc)
			return ctl_usage(c, "option --%s needs a value (see --help)", o->name);
		v = argv[++*i];
	}
	if (o->list) {
		if (o->list->n == CTL_LIST_MAX)
			return ctl_usage(c, "--%s may be given at most %d times", o->name, CTL_LIST_MAX);
		o->list->v[o->list->n++] = v;
	} else {
		*o->value = v;
	}
	return CTL_OK;
}

static int set_format(struct ctl *c)
{
	static const char *const names[] = {"table", "wide", "json", "yaml", "name"};

	c->format = CTL_OUT_TABLE;
	if (!c->output)
		return CTL_OK;
	for (size_t i = 0; i < EGS_ARRAY_LEN(names); i++)
		if (!strcmp(c->output, names[i])) {
			c->format = (enum ctl_format)i;
			return CTL_OK;
		}
	return ctl_usage(c, "-o %s: the output format must be table, wide, json, yaml or name", c->output);
}

/* The global options, and what they set after parsing (format, request timeout). */
static int finish_globals(struct ctl *c, const char *timeout)
{
	int64_t secs;

	if (timeout) {
		if (!ctl_duration(c, "--request-timeout", timeout, &secs))
			return CTL_USAGE;
		c->request_timeout_s = (long)secs;
	}
	return set_format(c);
}

int ctl_args(struct ctl *c, int argc, char **argv, int first, const struct ctl_opt *opts, const char **pos,
	     int maxpos, int *npos, bool *help)
{
	const char *timeout = NULL;
	const struct ctl_opt globals[] = {
		{"context", 0, &c->context, NULL, NULL},   {"server", 0, &c->server, NULL, NULL},
		{"key-file", 0, &c->key_file, NULL, NULL}, {"output", 'o', &c->output, NULL, NULL},
		{"request-timeout", 0, &timeout, NULL, NULL}, {"config", 0, &c->config_path, NULL, NULL},
		{"ca-file", 0, &c->ca_file, NULL, NULL},      {NULL, 0, NULL, NULL, NULL},
	};
	bool only_pos = false;
	int rc;

	*npos = 0;
	*help = false;
	for (int i = first; i < argc; i++) {
		const char *a = argv[i], *inl;
		const struct ctl_opt *o;
		if (!only_pos && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
			*help = true;
			continue;
		}
		if (!only_pos && !strcmp(a, "--")) {
			only_pos = true;
			continue;
		}
		if (only_pos || a[0] != '-' || a[1] == '\0') {
			if (*npos == maxpos)
				return ctl_usage(c, "unexpected argument '%s' (see egsctl %s --help)", a, c->cmd ? c->cmd : "");
			pos[(*npos)++] = a;
			continue;
		}
		o = find_opt(opts, a, &inl);
		if (!o)
			o = find_opt(globals, a, &inl);
		if (!o)
			return ctl_usage(c, "unknown option %s (see egsctl %s --help)", a, c->cmd ? c->cmd : "");
		rc = take_opt(c, o, a, inl, argc, argv, &i);
		if (rc)
			return rc;
	}
	return finish_globals(c, timeout);
}

int ctl_help(int rc, bool help, const char *text)
{
	if (help && rc == CTL_OK)
		fputs(text, stdout);
	return rc;
}

int ctl_check_format(struct ctl *c, unsigned allowed)
{
	if (allowed & (1u << c->format))
		return CTL_OK;
	return ctl_usage(c, "-o %s is not supported by this command", c->output ? c->output : "table");
}

int ctl_exit_of(enum egs_err err)
{
	switch (err) {
	case EGS_OK:
		return CTL_OK;
	case EGS_ERR_NOT_FOUND:
		return CTL_NOT_FOUND;
	case EGS_ERR_UNAUTHENTICATED:
	case EGS_ERR_EXPIRED:
	case EGS_ERR_FORBIDDEN:
		return CTL_AUTH;
	case EGS_ERR_IO:
	case EGS_ERR_STORE:
		return CTL_UNREACHABLE;
	case EGS_ERR_EXISTS:
	case EGS_ERR_CONFLICT:
	case EGS_ERR_GPR_PROVISIONED:
	case EGS_ERR_GPR_RELEASED:
	case EGS_ERR_GPR_NOT_PROVISIONED:
	case EGS_ERR_GPR_FINISHED:
	case EGS_ERR_BUSY:
		return CTL_CONFLICT;
	default:
		return CTL_FAILED;
	}
}

int ctl_fail(struct ctl *c, enum egs_err err, const char *what)
{
	const char *msg = c->client ? egs_client_errmsg(c->client) : "";
	long status = c->client ? egs_client_status(c->client) : 0;

	if (!*msg)
		msg = egs_err_str(err);
	if (err == EGS_ERR_IO && status == 0 && (strstr(msg, "SSL") || strstr(msg, "certificate")))
		return ctl_errorf(c, CTL_UNREACHABLE,
				  "cannot reach %s: TLS failed: %s\n  (does egsd serve https there, and is its certificate "
				  "signed by %s?  give its CA with --ca-file FILE)",
				  c->server_url, msg, c->ca_path[0] ? c->ca_path : "a CA of the system store");
	if (err == EGS_ERR_IO && status == 0)
		return ctl_errorf(c, CTL_UNREACHABLE,
				  "cannot reach %s: %s\n  (is egsd running there?  `egsctl config current-context` shows the "
				  "server this command uses)",
				  c->server_url, msg);
	if (err == EGS_ERR_UNAUTHENTICATED || err == EGS_ERR_EXPIRED)
		return ctl_errorf(c, CTL_AUTH, "%s: the server refused the API key: %s\n  (run `egsctl login %s "
				  "--key-file FILE` with a valid key)", what, msg, c->server_url);
	if (err == EGS_ERR_STORE || (err == EGS_ERR_IO && status >= 500))
		return ctl_errorf(c, CTL_UNREACHABLE, "%s: the server failed (HTTP %ld): %s", what, status, msg);
	return ctl_errorf(c, ctl_exit_of(err), "%s: %s", what, msg);
}

int ctl_auth_failed(struct ctl *c, enum egs_err err)
{
	int code = ctl_fail(c, err, "authenticate");
	/* A malformed key (400) is a credential problem like an unknown one. */
	return code == CTL_FAILED ? CTL_AUTH : code;
}

int ctl_use_ca(struct ctl *c, struct egs_client *client)
{
	if (c->ca_path[0] && egs_client_set_ca_file(client, c->ca_path) != EGS_OK)
		return ctl_usage(c, "cannot read the CA file %s: %s", c->ca_path, strerror(errno));
	return CTL_OK;
}

struct egs_client *ctl_client(struct ctl *c, int *code)
{
	char url[512], key[256];
	enum egs_err err;

	if (c->client)
		return c->client;
	*code = ctl_credentials(c, url, sizeof(url), key, sizeof(key));
	if (*code != CTL_OK)
		return NULL;
	egs_strlcpy(c->server_url, url, sizeof(c->server_url));
	c->client = egs_client_new(url, NULL);
	if (!c->client) {
		*code = ctl_usage(c, "server %s is not an http:// or https:// URL", url);
		goto out;
	}
	egs_client_set_timeout(c->client, c->request_timeout_s);
	*code = ctl_use_ca(c, c->client);
	err = *code ? EGS_ERR_INVALID : egs_client_authenticate(c->client, key);
	if (err != EGS_OK) {
		if (!*code)
			*code = ctl_auth_failed(c, err);
		egs_client_free(c->client);
		c->client = NULL;
	}
out:
	for (volatile char *p = key; *p; p++)
		*p = '\0';
	return c->client;
}

bool ctl_int(struct ctl *c, const char *opt, const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = s ? strtol(s, &end, 10) : 0;
	if (!s || !*s || *end || errno == ERANGE || v < min || v > max) {
		ctl_usage(c, "%s must be a whole number from %ld to %ld, not '%s'", opt, min, max, s ? s : "");
		return false;
	}
	*out = v;
	return true;
}

bool ctl_duration(struct ctl *c, const char *opt, const char *s, int64_t *out)
{
	const char *why = NULL;

	if (s && egs_duration_parse(s, out, &why))
		return true;
	ctl_usage(c, "%s must be a duration such as 30s, 10m or 1h30m, not '%s'%s%s", opt, s ? s : "", why ? ": " : "",
		  why ? why : "");
	return false;
}
