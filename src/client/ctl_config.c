/*
 * ctl_config.c: egsctl's contexts: `login` and `config`, and where a run's server and API key come
 * from.
 *
 * The config file (--config, $EGS_CONFIG, $XDG_CONFIG_HOME/egs/config or ~/.config/egs/config) is
 * YAML, like a kubeconfig:
 *
 *     current-context: prod
 *     contexts:
 *       - {name: prod, server: https://egs.example.com, apiKey: ..., certificate-authority: /path/ca.pem}
 *
 * certificate-authority (optional) is the CA file that verifies an https server instead of the
 * system store; `login --ca-file` saves it as an absolute path.
 * It holds API keys, so it is written with mode 0600 (its directory 0700), through a temporary file
 * and a rename, so a crash never leaves half a file.  Precedence for a run: --server/--key-file, then
 * $EGS_SERVER/$EGS_API_KEY, then the context named by --context, then the current context.
 */
#include "core/common.h"

#include "client/ctl.h"
#include "client/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX (1024 * 1024)

static const char *config_path(struct ctl *c, char *buf, size_t n)
{
	const char *env = getenv("EGS_CONFIG"), *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

	if (c->config_path)
		return c->config_path;
	if (env && *env)
		return env;
	if (xdg && *xdg)
		snprintf(buf, n, "%s/egs/config", xdg);
	else
		snprintf(buf, n, "%s/.config/egs/config", home && *home ? home : ".");
	return buf;
}

/* Reads a small file into a new NUL-terminated buffer (caller frees); NULL with errno set. */
static char *slurp(const char *path, size_t max, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = egs_malloc(max + 1);
	n = fread(buf, 1, max + 1, f);
	if (f != stdin)
		fclose(f);
	if (n > max) {
		egs_free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Reads the API key of a key file: its first line without surrounding blanks. */
static int read_key(struct ctl *c, const char *path, char *key, size_t keysz)
{
	size_t len, start = 0, end;
	char *text = slurp(path, 4096, &len);

	if (!text)
		return ctl_usage(c, "cannot read key file %s: %s", path, strerror(errno));
	while (start < len && (text[start] == ' ' || text[start] == '\t' || text[start] == '\n' || text[start] == '\r'))
		start++;
	end = start;
	while (end < len && text[end] != '\n' && text[end] != '\r')
		end++;
	while (end > start && (text[end - 1] == ' ' || text[end - 1] == '\t'))
		end--;
	if (end == start || end - start >= keysz) {
		egs_free(text);
		return ctl_usage(c, "key file %s does not hold an API key on its first line", path);
	}
	memcpy(key, text + start, end - start);
	key[end - start] = '\0';
	memset(text, 0, len);
	egs_free(text);
	return CTL_OK;
}

/* Loads the config (an empty one when the file does not exist); *cfg is a new reference. */
static int load_config(struct ctl *c, const char *path, json_t **cfg)
{
	char err[512];
	size_t len;
	char *text = slurp(path, CONFIG_MAX, &len);
	json_t *contexts;

	*cfg = NULL;
	if (!text && errno == ENOENT) {
		*cfg = json_pack("{s:s, s:[]}", "current-context", "", "contexts");
		return CTL_OK;
	}
	if (!text)
		return ctl_usage(c, "cannot read config %s: %s", path, strerror(errno));
	if (egs_yaml_load(text, len, path, cfg, err, sizeof(err)) != EGS_OK) {
		egs_free(text);
		return ctl_usage(c, "config %s", err);
	}
	egs_free(text);
	if (json_is_null(*cfg)) {
		json_decref(*cfg);
		*cfg = json_object();
	}
	contexts = json_object_get(*cfg, "contexts");
	if (!json_is_object(*cfg) || (contexts && !json_is_array(contexts))) {
		json_decref(*cfg);
		*cfg = NULL;
		return ctl_usage(c, "config %s: expected a mapping with current-context and a list of contexts", path);
	}
	if (!contexts)
		json_object_set_new(*cfg, "contexts", json_array());
	return CTL_OK;
}

/* The context named name, or NULL. */
static json_t *find_context(json_t *cfg, const char *name, size_t *index)
{
	size_t i;
	json_t *ctx;

	json_array_foreach(json_object_get(cfg, "contexts"), i, ctx)
		if (!strcmp(ctl_str(ctx, "name"), name)) {
			if (index)
				*index = i;
			return ctx;
		}
	return NULL;
}

/* mkdir -p of path's directory, mode 0700 for what it creates. */
static void make_parent(const char *path)
{
	char dir[1024];

	egs_strlcpy(dir, path, sizeof(dir));
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0700);
		*p = '/';
	}
}

static int save_config(struct ctl *c, const char *path, json_t *cfg)
{
	char tmp[1100];
	int fd;
	FILE *f;

	make_parent(path);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return ctl_errorf(c, CTL_FAILED, "cannot write %s: %s", tmp, strerror(errno));
	}
	fputs("# egsctl contexts (written by `egsctl login`; holds API keys: keep it private)\n", f);
	ctl_print_yaml(cfg, f);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return ctl_errorf(c, CTL_FAILED, "cannot write %s: %s", path, strerror(e));
	}
	return CTL_OK;
}

/* Fills what flags and the environment leave open from the chosen context. */
static int from_context(struct ctl *c, char *url, size_t urlsz, char *key, size_t keysz)
{
	char buf[1024];
	const char *path = config_path(c, buf, sizeof(buf)), *name;
	json_t *cfg, *ctx;
	int rc = load_config(c, path, &cfg);

	if (rc)
		return rc;
	name = c->context ? c->context : ctl_str(cfg, "current-context");
	ctx = *name ? find_context(cfg, name, NULL) : NULL;
	if (!ctx && c->context)
		rc = ctl_errorf(c, CTL_USAGE, "no context named %s in %s (see `egsctl config get-contexts`)", name, path);
	else if (!ctx)
		rc = ctl_errorf(c, CTL_AUTH, "not logged in: run `egsctl login URL --key-file FILE` first (or give "
					     "--server and --key-file)");
	if (rc)
		goto out;
	egs_strlcpy(c->context_name, name, sizeof(c->context_name));
	if (!url[0])
		egs_strlcpy(url, ctl_str(ctx, "server"), urlsz);
	if (!key[0] && !egs_strlcpy(key, ctl_str(ctx, "apiKey"), keysz))
		key[0] = '\0';
	if (!c->ca_path[0])
		egs_strlcpy(c->ca_path, ctl_str(ctx, "certificate-authority"), sizeof(c->ca_path));
	if (!url[0] || !key[0])
		rc = ctl_errorf(c, CTL_USAGE, "context %s in %s lacks a server or an apiKey; run `egsctl login` again",
				name, path);
out:
	json_decref(cfg);
	return rc;
}

int ctl_credentials(struct ctl *c, char *url, size_t urlsz, char *key, size_t keysz)
{
	const char *env_server = getenv("EGS_SERVER"), *env_key = getenv("EGS_API_KEY"), *env_ca = getenv("EGS_CA_FILE");
	int rc;

	url[0] = key[0] = '\0';
	if (c->ca_file)
		egs_strlcpy(c->ca_path, c->ca_file, sizeof(c->ca_path));
	else if (env_ca && *env_ca && !c->context && !egs_strlcpy(c->ca_path, env_ca, sizeof(c->ca_path)))
		return ctl_usage(c, "$EGS_CA_FILE is too long to be a path");
	if (c->server)
		egs_strlcpy(url, c->server, urlsz);
	else if (env_server && *env_server && !c->context)
		egs_strlcpy(url, env_server, urlsz);
	if (c->key_file) {
		rc = read_key(c, c->key_file, key, keysz);
		if (rc)
			return rc;
	} else if (env_key && *env_key && !c->context && !egs_strlcpy(key, env_key, keysz)) {
		return ctl_usage(c, "$EGS_API_KEY is too long to be an API key");
	}
	if (url[0] && key[0])
		return CTL_OK;
	return from_context(c, url, urlsz, key, keysz);
}

/* ---- login ---- */

static const char login_help[] =
	"usage: egsctl login URL --key-file FILE [--name CONTEXT] [--ca-file FILE]\n"
	"\n"
	"Checks the API key of FILE against the EGS server at URL, then saves both as a context in the\n"
	"config file (~/.config/egs/config, mode 0600) and makes it the current context.  Log in to more\n"
	"servers (or with more keys) under different names and switch with `egsctl config use-context`.\n"
	"\n"
	"options:\n"
	"  --key-file FILE   the API key (first line of FILE; - reads standard input)\n"
	"  --name CONTEXT    the context's name (default: host:port of URL); an existing one is replaced\n"
	"  --ca-file FILE    https: the CA (PEM) that signed the server's certificate, when it is not in\n"
	"                    the system store; saved in the context as certificate-authority\n"
	"\n"
	"examples:\n"
	"  egsctl login http://127.0.0.1:8080 --key-file var/admin.key\n"
	"  egsctl login https://egs.example.com --key-file ~/team-a.key --name prod\n"
	"  egsctl login https://10.0.0.5:8443 --key-file admin.key --ca-file egs-ca.pem\n";

/* The default context name: host[:port] of the URL. */
static void name_of_url(const char *url, char *buf, size_t n)
{
	const char *p = strstr(url, "://");
	size_t len;

	p = p ? p + 3 : url;
	len = strcspn(p, "/?#");
	if (len >= n)
		len = n - 1;
	memcpy(buf, p, len);
	buf[len] = '\0';
}

/* Stores (replacing) the context and makes it current.  ca ("" = none) is its certificate-authority. */
static void put_context(json_t *cfg, const char *name, const char *url, const char *key, const char *ca)
{
	json_t *ctx = json_pack("{s:s, s:s, s:s}", "name", name, "server", url, "apiKey", key);
	size_t i;

	if (*ca)
		json_object_set_new(ctx, "certificate-authority", json_string(ca));

	if (find_context(cfg, name, &i))
		json_array_set_new(json_object_get(cfg, "contexts"), i, ctx);
	else
		json_array_append_new(json_object_get(cfg, "contexts"), ctx);
	json_object_set_new(cfg, "current-context", json_string(name));
}

static int login(struct ctl *c, const char *url, const char *name)
{
	char key[256], buf[1024], defname[128], ca[PATH_MAX] = "";
	const char *path = config_path(c, buf, sizeof(buf));
	json_t *cfg = NULL;
	enum egs_err err;
	int rc = read_key(c, c->key_file, key, sizeof(key));

	if (rc)
		return rc;
	egs_strlcpy(c->server_url, url, sizeof(c->server_url));
	c->client = egs_client_new(url, NULL);
	if (!c->client) {
		rc = ctl_usage(c, "%s is not an http:// or https:// URL", url);
		goto out;
	}
	egs_client_set_timeout(c->client, c->request_timeout_s);
	if (c->ca_file) { /* saved absolute, so the context works from any directory */
		if (!realpath(c->ca_file, ca)) {
			rc = ctl_usage(c, "cannot read the CA file %s: %s", c->ca_file, strerror(errno));
			goto out;
		}
		egs_strlcpy(c->ca_path, ca, sizeof(c->ca_path));
		if ((rc = ctl_use_ca(c, c->client)))
			goto out;
	}
	err = egs_client_authenticate(c->client, key);
	if (err != EGS_OK) {
		rc = ctl_auth_failed(c, err);
		goto out;
	}
	if (!name) {
		name_of_url(url, defname, sizeof(defname));
		name = defname;
	}
	rc = load_config(c, path, &cfg);
	if (rc)
		goto out;
	put_context(cfg, name, url, key, ca);
	rc = save_config(c, path, cfg);
	if (rc == CTL_OK)
		printf("Logged in to %s; context \"%s\" is now current (%s).\n", url, name, path);
out:
	memset(key, 0, sizeof(key));
	json_decref(cfg);
	return rc;
}

int ctl_cmd_login(struct ctl *c, int argc, char **argv)
{
	const char *name = NULL, *pos[1];
	const struct ctl_opt opts[] = {{"name", 0, &name, NULL, NULL}, {NULL, 0, NULL, NULL, NULL}};
	int npos, rc;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 1, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, login_help);
	}
	if (npos != 1 || !c->key_file)
		return ctl_usage(c, "usage: egsctl login URL --key-file FILE [--name CONTEXT] [--ca-file FILE]");
	if (name && (!*name || strlen(name) >= 128))
		return ctl_usage(c, "--name must be 1 to 127 characters");
	return login(c, pos[0], name);
}

/* ---- config ---- */

static const char config_help[] =
	"usage: egsctl config SUBCOMMAND\n"
	"\n"
	"Shows and changes the contexts that `egsctl login` saved.\n"
	"\n"
	"subcommands:\n"
	"  get-contexts           list the contexts (* marks the current one)\n"
	"  current-context        print the current context's name\n"
	"  use-context NAME       make NAME the current context\n"
	"  delete-context NAME    forget NAME (and its API key)\n"
	"  view                   print the config with API keys hidden (-o json|yaml)\n"
	"\n"
	"The config file is --config FILE, else $EGS_CONFIG, else ~/.config/egs/config.\n";

static int config_list(struct ctl *c, json_t *cfg)
{
	static const char *const headers[] = {"CURRENT", "NAME", "SERVER"};
	struct ctl_table *t;
	size_t i;
	json_t *ctx;

	if (json_array_size(json_object_get(cfg, "contexts")) == 0)
		return ctl_errorf(c, CTL_OK, "no contexts yet: run `egsctl login URL --key-file FILE`");
	t = ctl_table_new(headers, 3);
	json_array_foreach(json_object_get(cfg, "contexts"), i, ctx)
		ctl_table_add(t, strcmp(ctl_str(ctx, "name"), ctl_str(cfg, "current-context")) ? "" : "*",
			      ctl_str(ctx, "name"), ctl_str(ctx, "server"));
	ctl_table_print(t, stdout);
	ctl_table_free(t);
	return CTL_OK;
}

static int config_view(struct ctl *c, json_t *cfg)
{
	size_t i;
	json_t *ctx;

	json_array_foreach(json_object_get(cfg, "contexts"), i, ctx)
		if (json_object_get(ctx, "apiKey"))
			json_object_set_new(ctx, "apiKey", json_string("REDACTED"));
	if (c->format == CTL_OUT_JSON)
		ctl_print_json(cfg, stdout);
	else
		ctl_print_yaml(cfg, stdout);
	return CTL_OK;
}

/* Runs subcommand sub (with its argument arg, may be NULL) on the loaded config. */
static int config_run(struct ctl *c, const char *path, json_t *cfg, const char *sub, const char *arg)
{
	size_t i;

	if (!strcmp(sub, "get-contexts"))
		return config_list(c, cfg);
	if (!strcmp(sub, "view"))
		return config_view(c, cfg);
	if (!strcmp(sub, "current-context")) {
		if (!*ctl_str(cfg, "current-context"))
			return ctl_errorf(c, CTL_NOT_FOUND, "no current context (run `egsctl login`)");
		printf("%s\n", ctl_str(cfg, "current-context"));
		return CTL_OK;
	}
	if (strcmp(sub, "use-context") != 0 && strcmp(sub, "delete-context") != 0)
		return ctl_usage(c, "unknown subcommand %s (see egsctl config --help)", sub);
	if (!arg)
		return ctl_usage(c, "%s needs a context name", sub);
	if (!find_context(cfg, arg, &i))
		return ctl_errorf(c, CTL_NOT_FOUND, "no context named %s (see `egsctl config get-contexts`)", arg);
	if (!strcmp(sub, "use-context")) {
		json_object_set_new(cfg, "current-context", json_string(arg));
	} else {
		json_array_remove(json_object_get(cfg, "contexts"), i);
		if (!strcmp(ctl_str(cfg, "current-context"), arg))
			json_object_set_new(cfg, "current-context", json_string(""));
	}
	if (save_config(c, path, cfg) != CTL_OK)
		return CTL_FAILED;
	printf("%s context \"%s\".\n", !strcmp(sub, "use-context") ? "Switched to" : "Deleted", arg);
	return CTL_OK;
}

int ctl_cmd_config(struct ctl *c, int argc, char **argv)
{
	const char *pos[2], *path;
	const struct ctl_opt opts[] = {{NULL, 0, NULL, NULL, NULL}};
	char buf[1024];
	json_t *cfg;
	int npos, rc;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 2, &npos, &help);
	if (rc || help)
		return ctl_help(rc, help, config_help);
	if (npos == 0)
		return ctl_usage(c, "name a subcommand: get-contexts, current-context, use-context, delete-context or view");
	path = config_path(c, buf, sizeof(buf));
	rc = load_config(c, path, &cfg);
	if (rc)
		return rc;
	rc = config_run(c, path, cfg, pos[0], npos > 1 ? pos[1] : NULL);
	json_decref(cfg);
	return rc;
}
