/*
 * kube_config.c: where the Kubernetes API server is and how to authenticate: a kubeconfig's current
 * context (parsed with libyaml's document API) or the in-cluster service account.
 *
 * Only what a client needs is read: the current context's cluster (server, CA, insecure flag) and
 * user (token, token file, client certificate and key).  Anything else in the file is ignored, as
 * kubectl ignores it; auth methods this client lacks (exec plugins, auth providers, basic auth) are
 * refused by name instead of silently sending no credentials.  Embedded data fields are base64 and
 * decoded here; file names are kept and read when the client opens.
 */
#include "agent/kube.h"

#include "core/util.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#define KUBECONFIG_MAX (4 * 1024 * 1024)

void egs_kube_config_cleanup(struct egs_kube_config *c)
{
	egs_free(c->server);
	egs_free(c->token);
	egs_free(c->token_file);
	egs_free(c->ca_pem);
	egs_free(c->ca_file);
	egs_free(c->cert_pem);
	egs_free(c->cert_file);
	egs_free(c->key_pem);
	egs_free(c->key_file);
	memset(c, 0, sizeof(*c));
}

static enum egs_err failf(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static enum egs_err failf(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return EGS_ERR_INVALID;
}

/* The value of key in mapping m as a node, or NULL. */
static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *m, const char *key)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

/* The scalar value of key in m, or NULL (borrowed from the document). */
static const char *map_str(yaml_document_t *doc, yaml_node_t *m, const char *key)
{
	yaml_node_t *v = map_get(doc, m, key);
	return v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : NULL;
}

/* The entry of the named list (clusters, contexts, users) called name: its inner mapping under
 * inner_key, or NULL. */
static yaml_node_t *named_entry(yaml_document_t *doc, yaml_node_t *root, const char *list, const char *name,
				const char *inner_key)
{
	yaml_node_t *l = map_get(doc, root, list);
	if (!l || l->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *it = l->data.sequence.items.start; it < l->data.sequence.items.top; it++) {
		yaml_node_t *e = yaml_document_get_node(doc, *it);
		const char *n = map_str(doc, e, "name");
		if (n && strcmp(n, name) == 0)
			return map_get(doc, e, inner_key);
	}
	return NULL;
}

/* Decodes base64 text (whitespace allowed) into a new NUL-terminated string in *out. */
static bool b64_decode(const char *text, char **out)
{
	size_t n = strlen(text), len = 0;
	char *buf = egs_malloc(n + 1);

	if (sodium_base642bin((unsigned char *)buf, n, text, n, " \t\r\n", &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0) {
		egs_free(buf);
		return false;
	}
	buf[len] = '\0';
	*out = buf;
	return true;
}

/* A file name from the kubeconfig, made relative to base_dir unless absolute. */
static char *file_name(const char *base_dir, const char *name)
{
	size_t n;
	char *s;

	if (!base_dir || !*base_dir || name[0] == '/')
		return egs_strdup(name);
	n = strlen(base_dir) + strlen(name) + 2;
	s = egs_malloc(n);
	snprintf(s, n, "%s/%s", base_dir, name);
	return s;
}

/* Reads the data field (base64) or the file field of m into *pem or *file. */
static bool data_or_file(yaml_document_t *doc, yaml_node_t *m, const char *data_key, const char *file_key,
			 const char *base_dir, char **pem, char **file)
{
	const char *d = map_str(doc, m, data_key), *f = map_str(doc, m, file_key);

	if (d && *d)
		return b64_decode(d, pem);
	if (f && *f)
		*file = file_name(base_dir, f);
	return true;
}

static enum egs_err read_cluster(yaml_document_t *doc, yaml_node_t *c, const char *base_dir,
				 struct egs_kube_config *out, char *err, size_t errsz)
{
	const char *server = map_str(doc, c, "server"), *insecure = map_str(doc, c, "insecure-skip-tls-verify");
	size_t n;

	if (!server || (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0))
		return failf(err, errsz, "the cluster's server must be an https:// URL");
	out->server = egs_strdup(server);
	n = strlen(out->server);
	while (n > 0 && out->server[n - 1] == '/')
		out->server[--n] = '\0';
	out->insecure = insecure && strcmp(insecure, "true") == 0;
	if (!data_or_file(doc, c, "certificate-authority-data", "certificate-authority", base_dir, &out->ca_pem,
			  &out->ca_file))
		return failf(err, errsz, "certificate-authority-data is not base64");
	return EGS_OK;
}

static enum egs_err read_user(yaml_document_t *doc, yaml_node_t *u, const char *base_dir,
			      struct egs_kube_config *out, char *err, size_t errsz)
{
	static const char *const unsupported[] = {"exec", "auth-provider", "username", "password"};
	const char *token = map_str(doc, u, "token"), *token_file = map_str(doc, u, "tokenFile");

	for (size_t i = 0; i < EGS_ARRAY_LEN(unsupported); i++)
		if (map_get(doc, u, unsupported[i]))
			return failf(err, errsz, "the user's '%s' authentication is not supported; use a token "
						 "or a client certificate", unsupported[i]);
	if (token && *token)
		out->token = egs_strdup(token);
	else if (token_file && *token_file)
		out->token_file = file_name(base_dir, token_file);
	if (!data_or_file(doc, u, "client-certificate-data", "client-certificate", base_dir, &out->cert_pem,
			  &out->cert_file) ||
	    !data_or_file(doc, u, "client-key-data", "client-key", base_dir, &out->key_pem, &out->key_file))
		return failf(err, errsz, "client-certificate-data or client-key-data is not base64");
	if (!out->cert_pem != !out->key_pem || !out->cert_file != !out->key_file)
		return failf(err, errsz, "a client certificate needs its key (and a key its certificate)");
	return EGS_OK;
}

/* Fills out from the document's current context. */
static enum egs_err read_doc(yaml_document_t *doc, const char *base_dir, struct egs_kube_config *out, char *err,
			     size_t errsz)
{
	yaml_node_t *root = yaml_document_get_root_node(doc), *ctx, *c, *u = NULL;
	const char *cur = map_str(doc, root, "current-context"), *cname, *uname;
	enum egs_err rc;

	if (!root || root->type != YAML_MAPPING_NODE)
		return failf(err, errsz, "not a kubeconfig (expected a mapping)");
	if (!cur || !*cur)
		return failf(err, errsz, "no current-context");
	ctx = named_entry(doc, root, "contexts", cur, "context");
	if (!ctx)
		return failf(err, errsz, "context '%s' is not in contexts", cur);
	cname = map_str(doc, ctx, "cluster");
	uname = map_str(doc, ctx, "user");
	c = cname ? named_entry(doc, root, "clusters", cname, "cluster") : NULL;
	if (!c)
		return failf(err, errsz, "context '%s': cluster '%s' is not in clusters", cur, cname ? cname : "");
	if (uname && *uname && !(u = named_entry(doc, root, "users", uname, "user")))
		return failf(err, errsz, "context '%s': user '%s' is not in users", cur, uname);
	rc = read_cluster(doc, c, base_dir, out, err, errsz);
	if (rc == EGS_OK && u)
		rc = read_user(doc, u, base_dir, out, err, errsz);
	return rc;
}

enum egs_err egs_kube_config_parse(const char *text, size_t len, const char *source, const char *base_dir,
				   struct egs_kube_config *out, char *err, size_t errsz)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	enum egs_err rc;
	char why[256];

	memset(out, 0, sizeof(*out));
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = failf(err, errsz, "%s:%zu: %s", source, parser.problem_mark.line + 1,
			   parser.problem ? parser.problem : "not YAML");
		yaml_parser_delete(&parser);
		return rc;
	}
	rc = read_doc(&doc, base_dir, out, why, sizeof(why));
	if (rc != EGS_OK) {
		snprintf(err, errsz, "%s: %s", source, why);
		egs_kube_config_cleanup(out);
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

/* Reads the whole file at path (at most KUBECONFIG_MAX bytes) into a new string. */
static enum egs_err slurp(const char *path, char **out, size_t *len, char *err, size_t errsz)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return EGS_ERR_IO;
	}
	buf = egs_malloc(KUBECONFIG_MAX + 1);
	n = fread(buf, 1, KUBECONFIG_MAX + 1, f);
	fclose(f);
	if (n > KUBECONFIG_MAX) {
		egs_free(buf);
		snprintf(err, errsz, "%s: larger than %d bytes", path, KUBECONFIG_MAX);
		return EGS_ERR_IO;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return EGS_OK;
}

enum egs_err egs_kube_config_load(const char *path, struct egs_kube_config *out, char *err, size_t errsz)
{
	char *text = NULL, *dir = egs_strdup(path), *slash;
	size_t len = 0;
	enum egs_err rc;

	memset(out, 0, sizeof(*out));
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		dir[0] = '\0';
	rc = slurp(path, &text, &len, err, errsz);
	if (rc == EGS_OK)
		rc = egs_kube_config_parse(text, len, path, slash ? dir : NULL, out, err, errsz);
	egs_free(text);
	egs_free(dir);
	return rc;
}

enum egs_err egs_kube_config_incluster(const char *sa_dir, struct egs_kube_config *out, char *err,
				       size_t errsz)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	char buf[512];
	FILE *f;

	memset(out, 0, sizeof(*out));
	if (!sa_dir)
		sa_dir = EGS_KUBE_SA_DIR;
	if (!host || !*host || !port || !*port) {
		snprintf(err, errsz, "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are unset; give --kubeconfig");
		return EGS_ERR_NOT_FOUND;
	}
	snprintf(buf, sizeof(buf), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
	out->server = egs_strdup(buf);
	snprintf(buf, sizeof(buf), "%s/token", sa_dir);
	out->token_file = egs_strdup(buf);
	snprintf(buf, sizeof(buf), "%s/ca.crt", sa_dir);
	out->ca_file = egs_strdup(buf);
	f = fopen(out->token_file, "r");
	if (!f) {
		snprintf(err, errsz, "%s: %s", out->token_file, strerror(errno));
		egs_kube_config_cleanup(out);
		return EGS_ERR_IO;
	}
	fclose(f);
	return EGS_OK;
}
