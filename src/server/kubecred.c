/*
 * kubecred.c: slice access credentials (kubecred.h): the sealing key, the per-workspace credential
 * docs, the agent's `sliceAccess` actions and report, and the two user routes that read them: the
 * kubeconfig and its regeneration.
 *
 * A doc's spec is {"clusters": {"<cluster>": {"want", "have", "sealed", "expiresAt", "issuedAt",
 * "namespaces", "serviceAccount", "retryAt", "error"}}}: `want` is the generation egsd asks the agent
 * for (1 at first, +1 per regeneration), `have` the generation of the sealed token.  Invariant: a token
 * is handed out only when have == want and it has not expired, so a regenerated or superseded token is
 * never served again.  Tokens appear in clear only in the agent's report and the kubeconfig answer;
 * never in the store, a log line or an event.
 */
#include "server/kubecred.h"
#include "server/template.h"

#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_FILE "kubecreds.key"
#define TOKEN_MAX 8192
#define TOKEN_TTL_S (7 * 86400) /* asked of the agent unless egsd --slice-token-ttl; the API server may grant less */
#define RETRY_S 30              /* after a failed report, before the action is sent again */
#define SEAL_MAX (4 * ((crypto_aead_xchacha20poly1305_ietf_NPUBBYTES + TOKEN_MAX + 16) / 3) + 8)

static enum egs_err read_key(const char *path, unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? EGS_ERR_NOT_FOUND : EGS_ERR_IO;
	unsigned char extra;
	ssize_t n = read(fd, key, crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
	bool ok = n == crypto_aead_xchacha20poly1305_ietf_KEYBYTES && read(fd, &extra, 1) == 0;
	close(fd);
	return ok ? EGS_OK : EGS_ERR_IO;
}

static enum egs_err write_key(const char *path, const unsigned char *key, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return EGS_ERR_IO;
	bool ok = write(fd, key, len) == (ssize_t)len && fsync(fd) == 0;
	close(fd);
	if (!ok)
		unlink(path);
	return ok ? EGS_OK : EGS_ERR_IO;
}

enum egs_err egs_kubecred_start(struct egs_server *srv)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", srv->data_dir, KEY_FILE);
	enum egs_err err = read_key(path, srv->kubecred_key);
	if (err == EGS_ERR_NOT_FOUND) {
		crypto_aead_xchacha20poly1305_ietf_keygen(srv->kubecred_key);
		err = write_key(path, srv->kubecred_key, sizeof(srv->kubecred_key));
		if (!err)
			fprintf(srv->log, "level=info msg=\"slice token key created\" path=%s\n", path);
	}
	if (err)
		fprintf(stderr, "egsd: %s must be the %d-byte key that seals slice tokens (%s); see "
			"docs/kubernetes-install.md\n", path, (int)sizeof(srv->kubecred_key), strerror(errno));
	return err ? EGS_ERR_IO : EGS_OK;
}

void egs_kubecred_stop(struct egs_server *srv)
{
	sodium_memzero(srv->kubecred_key, sizeof(srv->kubecred_key));
}

/* The associated data binds a sealed token to its row: one moved to another workspace, cluster or
 * generation in the database does not open. */
static size_t seal_ad(char *ad, size_t n, const char *ws, const char *cluster, json_int_t gen)
{
	int len = snprintf(ad, n, "egs-kubecred:v1:%s:%s:%lld", ws, cluster, (long long)gen);
	EGS_ASSERT(len > 0 && (size_t)len < n);
	return (size_t)len;
}

/* base64(nonce || ciphertext) of token; caller frees. */
static char *seal(const struct egs_server *srv, const char *ws, const char *cluster, json_int_t gen,
		  const char *token)
{
	size_t tlen = strlen(token), clen = tlen + crypto_aead_xchacha20poly1305_ietf_ABYTES;
	size_t blen = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES + clen;
	unsigned char *buf = egs_malloc(blen);
	char ad[200];
	size_t adlen = seal_ad(ad, sizeof(ad), ws, cluster, gen);
	randombytes_buf(buf, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(buf + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, NULL,
						   (const unsigned char *)token, tlen, (const unsigned char *)ad,
						   adlen, NULL, buf, srv->kubecred_key);
	size_t out_len = sodium_base64_ENCODED_LEN(blen, sodium_base64_VARIANT_ORIGINAL);
	char *out = egs_malloc(out_len);
	sodium_bin2base64(out, out_len, buf, blen, sodium_base64_VARIANT_ORIGINAL);
	free(buf);
	return out;
}

/* The token sealed in b64, or NULL when it does not open (another key, a moved row); caller frees
 * with sodium_memzero first. */
static char *unseal(const struct egs_server *srv, const char *ws, const char *cluster, json_int_t gen,
		    const char *b64)
{
	size_t n = strlen(b64), blen;
	if (n > SEAL_MAX)
		return NULL;
	unsigned char *buf = egs_malloc(n + 1);
	char *out = NULL;
	char ad[200];
	size_t adlen = seal_ad(ad, sizeof(ad), ws, cluster, gen);
	if (sodium_base642bin(buf, n + 1, b64, n, NULL, &blen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    blen < crypto_aead_xchacha20poly1305_ietf_NPUBBYTES + crypto_aead_xchacha20poly1305_ietf_ABYTES)
		goto out;
	size_t clen = blen - crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
	out = egs_malloc(clen + 1);
	unsigned long long plen;
	if (crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)out, &plen, NULL,
						       buf + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, clen,
						       (const unsigned char *)ad, adlen, buf, srv->kubecred_key) != 0) {
		free(out);
		out = NULL;
		goto out;
	}
	out[plen] = '\0';
out:
	free(buf);
	return out;
}

static void free_token(char *t)
{
	if (t) {
		sodium_memzero(t, strlen(t));
		free(t);
	}
}

/* ---- the credential docs ---- */

/* The spec of workspace ws's doc (a new reference; {"clusters": {}} when it has none). */
static json_t *load(struct egs_server *srv, const char *ws)
{
	const struct egs_doc *d = egs_state_doc(&srv->st, EGS_KIND_KUBECRED, ws);
	json_t *spec = d ? egs_doc_spec(d) : json_object();
	if (!json_is_object(json_object_get(spec, "clusters")))
		json_object_set_new(spec, "clusters", json_object());
	return spec;
}

/* The entry of cluster in spec (borrowed from spec), created empty when missing. */
static json_t *entry(json_t *spec, const char *cluster)
{
	json_t *cl = json_object_get(spec, "clusters"), *e = json_object_get(cl, cluster);
	if (!json_is_object(e)) {
		e = json_object();
		json_object_set_new(cl, cluster, e);
	}
	return e;
}

static json_int_t num(json_t *e, const char *k, json_int_t dflt)
{
	json_t *v = json_object_get(e, k);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

/* Writes spec (borrowed) as workspace w's doc, creating it when needed. */
static void save(struct egs_server *srv, const struct egs_workspace *w, json_t *spec)
{
	egs_doc_put(srv, EGS_KIND_KUBECRED, w->name, w->project, spec);
}

void egs_kubecred_forget_workspace(struct egs_server *srv, const char *ws)
{
	struct egs_doc *d = egs_state_doc(&srv->st, EGS_KIND_KUBECRED, ws);
	if (d)
		egs_state_del(&srv->st, EGS_KIND_KUBECRED, d);
}

void egs_kubecred_forget_cluster(struct egs_server *srv, const char *ws, const char *cluster)
{
	const struct egs_workspace *w = egs_state_workspace(&srv->st, ws);
	json_t *spec = load(srv, ws);
	if (w && json_object_get(json_object_get(spec, "clusters"), cluster)) {
		json_object_del(json_object_get(spec, "clusters"), cluster);
		save(srv, w, spec);
	}
	json_decref(spec);
}

/* The namespaces of w on cluster, sorted as the workspace lists them (a new array). */
static json_t *ws_namespaces(const struct egs_workspace *w, const char *cluster)
{
	json_t *a = json_array();
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (egs_strlist_has(&w->namespaces[i].clusters, cluster))
			json_array_append_new(a, json_string(w->namespaces[i].name));
	return a;
}

/* Why the agent owes workspace w a token on cluster (e borrowed, may be NULL), or NULL when it does not. */
static const char *owed(const struct egs_workspace *w, const char *cluster, json_t *e, int64_t now)
{
	json_int_t want = num(e, "want", 1), have = num(e, "have", 0), exp = num(e, "expiresAt", 0);
	if (now < num(e, "retryAt", 0))
		return NULL;
	if (have < want || !json_is_string(json_object_get(e, "sealed")))
		return have ? "regenerate" : "missing";
	json_t *ns = ws_namespaces(w, cluster);
	bool same = json_equal(ns, json_object_get(e, "namespaces"));
	json_decref(ns);
	if (!same)
		return "namespaces";
	if (exp && now >= exp - (exp - num(e, "issuedAt", exp)) / 4)
		return "expiring";
	return NULL;
}

void egs_kubecred_append_actions(struct egs_server *srv, const struct egs_cluster *c, json_t *out)
{
	if (!c->slice_access)
		return;
	int64_t now = egs_now(srv);
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.workspaces, &i, NULL, &v);) {
		const struct egs_workspace *w = v;
		if (!egs_strlist_has(&w->clusters, c->name))
			continue;
		json_t *spec = load(srv, w->name), *e = json_object_get(json_object_get(spec, "clusters"), c->name);
		const char *why = owed(w, c->name, e, now);
		if (why) {
			json_int_t want = num(e, "want", 1);
			char aid[200], sa[EGS_NAME_MAX + 16];
			snprintf(aid, sizeof(aid), "sliceAccess:%s:%lld", w->name, (long long)want);
			snprintf(sa, sizeof(sa), "egs-slice-%s", w->name);
			json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:o, s:s, s:I, s:I, s:s}", "actionId", aid,
							     "type", "sliceAccess", "workspace", w->name, "namespaces",
							     ws_namespaces(w, c->name), "serviceAccount", sa, "generation",
							     want, "tokenTtlSeconds",
							     (json_int_t)(srv->slice_token_ttl_s ? srv->slice_token_ttl_s : TOKEN_TTL_S),
							     "reason", why));
		}
		json_decref(spec);
	}
}

/* The agent's own features (optional, at most 16 names; unknown ones ignored): "sliceAccess" says it
 * mints slice ServiceAccount tokens (kubecred.h).  false after replying 422 when malformed. */
bool egs_kubecred_agent_features(struct egs_req *r, bool *slice_access)
{
	json_t *f = json_object_get(r->body, "features"), *v;
	size_t i;
	*slice_access = false;
	if (!f || json_is_null(f))
		return true;
	if (!json_is_array(f) || json_array_size(f) > 16) {
		egs_reply_invalid(r, "features", "features must be a list of at most 16 names");
		return false;
	}
	json_array_foreach(f, i, v) {
		if (!json_is_string(v)) {
			egs_reply_invalid(r, "features", "features[%zu] must be a string", i);
			return false;
		}
		*slice_access = *slice_access || !strcmp(json_string_value(v), "sliceAccess");
	}
	return true;
}

/* ---- the agent's report: POST /api/v1/agent/slice-access ---- */

/* A ServiceAccount token as the API server issues them (a JWT): base64url parts and dots. */
static bool token_valid(const char *t)
{
	size_t n = strlen(t);
	if (n < 16 || n > TOKEN_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* The agent's workspace: registered, and including the agent's cluster; replies 404 otherwise. */
static struct egs_workspace *agent_ws(struct egs_req *r, const char *name)
{
	struct egs_workspace *w = egs_state_workspace(&r->srv->st, name);
	if (!w || !egs_strlist_has(&w->clusters, r->who.cluster)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "workspace",
			      "workspace %s does not include cluster %s", name, r->who.cluster);
		return NULL;
	}
	return w;
}

/* Records a successful report in e (borrowed); false after replying when the body is malformed. */
static bool store_token(struct egs_req *r, const struct egs_workspace *w, json_t *e, int64_t gen)
{
	char exp_s[40], sa[EGS_NAME_MAX + 16];
	int64_t exp, now = egs_now(r->srv);
	json_t *tok = json_object_get(r->body, "token");
	struct egs_strlist ns = { 0 };
	bool ok = false;
	if (!json_is_string(tok) || strlen(json_string_value(tok)) != json_string_length(tok) ||
	    !token_valid(json_string_value(tok))) {
		egs_reply_invalid(r, "token", "token must be the ServiceAccount token (16 to %d characters of a JWT)",
				  TOKEN_MAX);
		goto out;
	}
	if (!egs_get_str(r, r->body, "expiresAt", true, exp_s, sizeof(exp_s)) ||
	    !egs_get_str(r, r->body, "serviceAccount", false, sa, sizeof(sa)) ||
	    (sa[0] && !egs_check_name(r, "serviceAccount", sa, false)) ||
	    !egs_get_names(r, r->body, "namespaces", 64, &ns))
		goto out;
	if (!egs_time_parse(exp_s, &exp) || exp <= now) {
		egs_reply_invalid(r, "expiresAt", "expiresAt must be an RFC 3339 time in the future");
		goto out;
	}
	char *sealed = seal(r->srv, w->name, r->who.cluster, gen, json_string_value(tok));
	json_object_set_new(e, "sealed", json_string(sealed));
	free(sealed);
	json_object_set_new(e, "have", json_integer(gen));
	json_object_set_new(e, "expiresAt", json_integer(exp));
	json_object_set_new(e, "issuedAt", json_integer(now));
	json_object_set_new(e, "serviceAccount", json_string(sa));
	/* The namespaces the agent bound; without the list, the workspace's now (the agent saw them). */
	json_t *nsj = json_object_get(r->body, "namespaces") ? json_array() : ws_namespaces(w, r->who.cluster);
	for (size_t i = 0; i < ns.n; i++)
		json_array_append_new(nsj, json_string(ns.v[i]));
	json_object_set_new(e, "namespaces", nsj);
	json_object_del(e, "retryAt");
	json_object_del(e, "error");
	ok = true;
out:
	egs_strlist_cleanup(&ns);
	return ok;
}

static void agent_slice_access(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "actionId", "workspace", "generation", "ok", "token",
					       "expiresAt", "serviceAccount", "namespaces", "message", NULL };
	char name[EGS_NAME_MAX], cname[EGS_NAME_MAX], msg[400], aid[200];
	int64_t gen;
	bool ok, present;
	if (!egs_require_role(r, EGS_R(AGENT)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "clusterName", false, cname, sizeof(cname)) ||
	    !egs_get_str(r, r->body, "actionId", false, aid, sizeof(aid)) || !egs_check_text(r, "actionId", aid) ||
	    !egs_get_str(r, r->body, "workspace", true, name, sizeof(name)) ||
	    !egs_get_int(r, r->body, "generation", true, 1, INT32_MAX, &gen, NULL) ||
	    !egs_get_bool(r, r->body, "ok", &ok, &present) ||
	    !egs_get_str(r, r->body, "message", false, msg, sizeof(msg)) || !egs_check_text(r, "message", msg))
		return;
	if (cname[0] && strcmp(cname, r->who.cluster) != 0) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "clusterName", "this agent token belongs to cluster %s",
			      r->who.cluster);
		return;
	}
	if (!present) {
		egs_reply_invalid(r, "ok", "ok is required");
		return;
	}
	struct egs_workspace *w = agent_ws(r, name);
	if (!w)
		return;
	json_t *spec = load(r->srv, w->name), *e = entry(spec, r->who.cluster);
	json_int_t want = num(e, "want", 1);
	int64_t now = egs_now(r->srv);
	if (gen != want) {
		egs_reply_err(r, gen < want ? EGS_ERR_CONFLICT : EGS_ERR_INVALID,
			      gen < want ? "SLICE_ACCESS_SUPERSEDED" : NULL, "generation",
			      "generation %lld is not the one wanted (%lld): %s", (long long)gen, (long long)want,
			      gen < want ? "the kubeconfig was regenerated since; mint a token for the new one"
					 : "egsd never asked for it");
		goto out;
	}
	if (ok && !store_token(r, w, e, gen))
		goto out;
	if (!ok) {
		json_object_set_new(e, "retryAt", json_integer(now + RETRY_S));
		json_object_set_new(e, "error", json_string(msg[0] ? msg : "the agent gave no reason"));
	}
	save(r->srv, w, spec);
	if (ok)
		egs_state_event(&r->srv->st, now, "Normal", "SliceAccessReady", "Workspace", w->name, w->name,
				"the ServiceAccount token of workspace %s on cluster %s is ready (generation %lld)",
				w->name, r->who.cluster, (long long)gen);
	else
		egs_state_event(&r->srv->st, now, "Warning", "SliceAccessFailed", "Workspace", w->name, w->name,
				"cluster %s could not set up slice access for workspace %s: %s (retried in %d s)",
				r->who.cluster, w->name, msg[0] ? msg : "no reason given", RETRY_S);
	r->srv->st.generation++;
	egs_server_changed(r->srv);
	egs_reply_ok(r, json_pack("{s:s, s:I, s:b}", "workspace", w->name, "generation", gen, "stored", ok));
out:
	json_decref(spec);
}

/* ---- users: the kubeconfig and its regeneration ---- */

/* The workspace and cluster of a user route's body, checked for the caller (an admin, or a key that
 * may write the workspace: owner, editor); false after replying. */
static bool user_target(struct egs_req *r, const char *const *allowed, bool cluster_required,
			struct egs_workspace **w, char cname[EGS_NAME_MAX])
{
	char name[EGS_NAME_MAX];
	if (!egs_body_only(r, allowed) || !egs_get_str(r, r->body, "workspaceName", true, name, EGS_NAME_MAX) ||
	    !egs_get_str(r, r->body, "clusterName", cluster_required, cname, EGS_NAME_MAX) || !egs_find_ws(r, name, w) ||
	    !egs_can_write_ws(r, *w))
		return false;
	if (cname[0] && (!egs_state_cluster(&r->srv->st, cname) || !egs_strlist_has(&(*w)->clusters, cname))) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s is not part of workspace %s",
			      cname, name);
		return false;
	}
	return true;
}

/* The usable token of w on cluster c, or NULL after replying 409 KUBECONFIG_NOT_READY saying why. */
static char *usable_token(struct egs_req *r, const struct egs_workspace *w, const struct egs_cluster *c)
{
	json_t *spec = load(r->srv, w->name), *e = json_object_get(json_object_get(spec, "clusters"), c->name);
	json_int_t want = num(e, "want", 1), have = num(e, "have", 0);
	json_t *sealed = json_object_get(e, "sealed"), *err = json_object_get(e, "error");
	char *tok = NULL;
	const char *why = NULL;
	bool fresh = num(e, "expiresAt", 0) > egs_now(r->srv);
	if (have == want && json_is_string(sealed) && !fresh) {
		why = "the token the agent reported has expired and it has not reported a new one yet";
	} else if (have == want && json_is_string(sealed)) {
		tok = unseal(r->srv, w->name, c->name, have, json_string_value(sealed));
		why = tok ? NULL : "its stored token does not open with this egsd's kubecreds.key (was the key replaced?); "
				   "regenerate the kubeconfig";
	} else if (json_is_string(err)) {
		why = json_string_value(err);
	} else if (!c->slice_access) {
		why = "the cluster's agent does not mint slice tokens (it needs egs-agent --backend kubernetes with "
		      "slice access), so no kubeconfig this cluster accepts can be made yet";
	} else {
		why = have < want && have ? "the kubeconfig was regenerated and the agent has not reported the new token yet"
					  : "the agent has not reported the slice's ServiceAccount token yet";
	}
	if (!tok)
		egs_reply_err(r, EGS_ERR_CONFLICT, "KUBECONFIG_NOT_READY", "clusterName",
			      "no kubeconfig for workspace %s on cluster %s: %s", w->name, c->name, why);
	json_decref(spec);
	return tok;
}

static void kubeconfig(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", "clusterName", NULL };
	char cname[EGS_NAME_MAX];
	struct egs_workspace *w;
	if (!user_target(r, allowed, true, &w, cname))
		return;
	const struct egs_cluster *c = egs_state_cluster(&r->srv->st, cname);
	if (!c->api_server) {
		egs_reply_err(r, EGS_ERR_CONFLICT, "CLUSTER_HAS_NO_API_SERVER", "clusterName",
			      "cluster %s was registered without apiServer; an admin must set it first", cname);
		return;
	}
	char *tok = usable_token(r, w, c);
	if (!tok)
		return;
	const char *ns = w->name;
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (egs_strlist_has(&w->namespaces[i].clusters, cname)) {
			ns = w->namespaces[i].name;
			break;
		}
	size_t cap = strlen(tok) + strlen(c->api_server) + (c->ca_data ? strlen(c->ca_data) : 0) + 1024;
	char *yaml = egs_malloc(cap);
	int len = snprintf(yaml, cap,
			   "apiVersion: v1\nkind: Config\nclusters:\n- name: %s\n  cluster:\n    server: \"%s\"\n%s%s%s"
			   "users:\n- name: %s-%s\n  user:\n    token: \"%s\"\n"
			   "contexts:\n- name: %s@%s\n  context:\n    cluster: %s\n    user: %s-%s\n    namespace: %s\n"
			   "current-context: %s@%s\n",
			   cname, c->api_server, c->ca_data ? "    certificate-authority-data: \"" : "",
			   c->ca_data ? c->ca_data : "", c->ca_data ? "\"\n" : "", w->name, cname, tok, w->name, cname,
			   cname, w->name, cname, ns, w->name, cname);
	EGS_ASSERT(len > 0 && (size_t)len < cap);
	free_token(tok);
	egs_reply_ok(r, json_pack("{s:s}", "kubeConfig", yaml));
	sodium_memzero(yaml, (size_t)len);
	free(yaml);
}

static void regenerate(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", "clusterName", NULL };
	char cname[EGS_NAME_MAX];
	struct egs_workspace *w;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !user_target(r, allowed, false, &w, cname))
		return;
	json_t *spec = load(r->srv, w->name), *out = json_array();
	for (size_t i = 0; i < w->clusters.n; i++) {
		const char *cl = w->clusters.v[i];
		if (cname[0] && strcmp(cname, cl) != 0)
			continue;
		json_t *e = entry(spec, cl);
		json_int_t want = num(e, "want", 1), have = num(e, "have", 0);
		json_int_t next = (want > have ? want : have) + 1;
		/* The old token is gone from egsd at once; the agent recreates the ServiceAccount for `next`. */
		json_object_set_new(e, "want", json_integer(next));
		json_object_del(e, "sealed");
		json_object_del(e, "retryAt");
		json_object_del(e, "error");
		const struct egs_cluster *c = egs_state_cluster(&r->srv->st, cl);
		json_array_append_new(out, json_pack("{s:s, s:I, s:b}", "clusterName", cl, "generation", next,
						     "agentMintsTokens", c && c->slice_access));
	}
	save(r->srv, w, spec);
	json_decref(spec);
	egs_state_event(&r->srv->st, egs_now(r->srv), "Normal", "KubeConfigRegenerated", "Workspace", w->name, w->name,
			"the kubeconfig of workspace %s was regenerated on %s (key %s)", w->name,
			cname[0] ? cname : "every cluster", r->who.key_id);
	r->srv->st.generation++;
	egs_server_changed(r->srv);
	egs_reply_ok(r, json_pack("{s:s, s:o}", "workspaceName", w->name, "clusters", out));
}

const struct egs_route egs_routes_kubecred[] = {
	{ EVHTTP_REQ_POST, "/api/v1/slice-workspace/kube-config", kubeconfig, false },
	{ EVHTTP_REQ_GET, "/api/v1/slice-workspace/kube-config", kubeconfig, false },
	{ EVHTTP_REQ_POST, "/api/v1/slice-workspace/kube-config/regenerate", regenerate, false },
	{ EVHTTP_REQ_POST, "/api/v1/agent/slice-access", agent_slice_access, false },
	{ 0, NULL, NULL, false },
};
