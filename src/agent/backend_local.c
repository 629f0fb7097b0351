/*
 * backend_local.c: the local cluster backend.  "Attached" means: recorded in
 * <state-dir>/attach-state.json and, when configured, the operator's --on-attach hook succeeded.
 *
 * The state file is the truth that survives restarts, so it is replaced atomically (temp file, fsync,
 * rename, fsync of the directory) and only after the hook succeeded: a crash leaves either the old or
 * the new state, never a torn file.  Hooks must be idempotent, since a crash between a hook and the
 * state write makes the control plane ask again.  A lock file (flock) keeps two agents off one
 * state directory.
 *
 * Locks: op_mu serialises attach/detach (held across hooks, which may take minutes); mu guards the
 * attachment list for the short moments it changes, so heartbeats reading it never wait for a hook.
 *
 * File format (version 1):
 *   {"version": 1, "cluster": "worker-1",
 *    "nodes": {"h100-node-1": {"gprId": "...", "workspace": "...", "namespaces": ["..."],
 *                              "startTime": "...", "exitTime": "...", "attachedAt": "..."}},
 *    "shared": [{"node": "h100-node-2", "gprId": "...", ... as above, "shares": {"<uuid>": "0.60"}}]}
 * "nodes" holds the dedicated attachments (one per node), "shared" the shared ones (GPU sharing: a set
 * per node, each with its shares of the node's GPUs).  "shared" is written only when not empty, so a
 * file without shares is what agents before sharing wrote, and they read one with shares as before
 * (they ignore the key).
 */
#include "agent/backend.h"

#include "agent/hook.h"
#include "core/share.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATE_FILE "attach-state.json"
#define STATE_VERSION 1

struct local {
	struct egs_backend base; /* first: struct egs_backend * converts to struct local * */
	char *cluster;
	char *on_attach, *on_detach;
	int hook_timeout_s;
	char *dir, *path, *tmp_path;
	int lock_fd;
	pthread_mutex_t op_mu;
	pthread_mutex_t mu;
	struct egs_vec atts; /* struct egs_attachment *, owned */
};

static struct local *local_of(struct egs_backend *b)
{
	return (struct local *)b;
}

static void att_free(struct egs_attachment *a)
{
	if (a)
		egs_attachments_free(a, 1);
}

static void att_copy(struct egs_attachment *dst, const struct egs_attachment *src)
{
	dst->node = egs_strdup(src->node);
	dst->gpr_id = egs_strdup(src->gpr_id);
	dst->workspace = egs_strdup(src->workspace);
	memset(&dst->namespaces, 0, sizeof(dst->namespaces));
	egs_strlist_copy(&dst->namespaces, &src->namespaces);
	dst->start_time = egs_strdup(src->start_time);
	dst->exit_time = egs_strdup(src->exit_time);
	dst->attached_at = egs_strdup(src->attached_at);
	dst->shares = NULL;
	dst->n_shares = src->n_shares;
	if (src->shares) {
		dst->shares = egs_calloc(src->n_shares + 1, sizeof(*dst->shares));
		memcpy(dst->shares, src->shares, src->n_shares * sizeof(*dst->shares));
	}
}

/* Returns the dedicated attachment of node, or NULL.  Caller holds mu or op_mu. */
static struct egs_attachment *find(struct local *l, const char *node)
{
	for (size_t i = 0; i < l->atts.len; i++) {
		struct egs_attachment *a = l->atts.items[i];
		if (!a->shares && strcmp(a->node, node) == 0)
			return a;
	}
	return NULL;
}

/* Returns the attachment (dedicated or shared) of node to gpr_id, or NULL.  Caller holds mu or op_mu. */
static struct egs_attachment *find_gpr(struct local *l, const char *node, const char *gpr_id)
{
	for (size_t i = 0; i < l->atts.len; i++) {
		struct egs_attachment *a = l->atts.items[i];
		if (strcmp(a->node, node) == 0 && strcmp(a->gpr_id, gpr_id) == 0)
			return a;
	}
	return NULL;
}

/* Does node hold shared attachments?  Caller holds mu or op_mu. */
static bool has_shared(struct local *l, const char *node)
{
	for (size_t i = 0; i < l->atts.len; i++) {
		const struct egs_attachment *a = l->atts.items[i];
		if (a->shares && strcmp(a->node, node) == 0)
			return true;
	}
	return false;
}

/* Why the shares of req cannot join node's shared attachments ("" when they can): a dedicated
 * attachment, or a GPU that would hold more than a whole GPU.  Caller holds op_mu. */
static void shares_conflict(struct local *l, const struct egs_attach_req *req, char *msg, size_t msgsz)
{
	const struct egs_attachment *ded = find(l, req->node);
	msg[0] = '\0';
	if (ded) {
		snprintf(msg, msgsz, "node %s is attached to %s; detach it first", req->node, ded->gpr_id);
		return;
	}
	for (size_t k = 0; k < req->n_shares; k++) {
		int sum = req->shares[k].centi;
		for (size_t i = 0; i < l->atts.len; i++) {
			const struct egs_attachment *a = l->atts.items[i];
			for (size_t j = 0; a->shares && j < a->n_shares && !strcmp(a->node, req->node); j++)
				if (!strcmp(a->shares[j].uuid, req->shares[k].uuid))
					sum += a->shares[j].centi;
		}
		if (sum > EGS_SHARE_WHOLE) {
			char have[EGS_SHARE_TEXT_MAX];
			egs_share_format(sum - req->shares[k].centi, have, sizeof(have));
			snprintf(msg, msgsz, "GPU %s of node %s already has %s allocated; the shares do not fit",
				 req->shares[k].uuid, req->node, have);
			return;
		}
	}
}

/* ---- the state file ---- */

static json_t *shares_json(const struct egs_gpu_share *shares, size_t n)
{
	json_t *o = json_object();
	for (size_t k = 0; k < n; k++) {
		char text[EGS_SHARE_TEXT_MAX];
		egs_share_format(shares[k].centi, text, sizeof(text));
		json_object_set_new(o, shares[k].uuid, json_string(text));
	}
	return o;
}

static json_t *state_json(struct local *l)
{
	json_t *nodes = json_object(), *shared = json_array();

	for (size_t i = 0; i < l->atts.len; i++) {
		const struct egs_attachment *a = l->atts.items[i];
		json_t *ns = json_array();
		for (size_t k = 0; k < a->namespaces.n; k++)
			json_array_append_new(ns, json_string(a->namespaces.v[k]));
		json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:s, s:s}", "gprId", a->gpr_id, "workspace", a->workspace,
				      "namespaces", ns, "startTime", a->start_time, "exitTime", a->exit_time,
				      "attachedAt", a->attached_at);
		if (!a->shares) {
			json_object_set_new(nodes, a->node, o);
			continue;
		}
		json_object_set_new(o, "node", json_string(a->node));
		json_object_set_new(o, "shares", shares_json(a->shares, a->n_shares));
		json_array_append_new(shared, o);
	}
	json_t *root = json_pack("{s:i, s:s, s:o}", "version", STATE_VERSION, "cluster", l->cluster, "nodes", nodes);
	if (json_array_size(shared))
		json_object_set(root, "shared", shared);
	json_decref(shared);
	return root;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Replaces path by data atomically and durably.  Caller holds op_mu. */
static enum egs_err write_atomic(struct local *l, const char *data, char *err, size_t errsz)
{
	int fd = open(l->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const char *step = "open";

	if (fd < 0)
		goto fail;
	step = "write";
	if (!write_all(fd, data, strlen(data)))
		goto fail;
	step = "fsync";
	if (fsync(fd) != 0)
		goto fail;
	step = "close";
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	step = "rename";
	if (rename(l->tmp_path, l->path) != 0)
		goto fail;
	/* The rename itself is durable only once the directory is synced. */
	fd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	return EGS_OK;
fail:
	snprintf(err, errsz, "cannot write %s: %s: %s", l->path, step, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(l->tmp_path);
	return EGS_ERR_IO;
}

static enum egs_err save(struct local *l, char *err, size_t errsz)
{
	json_t *j = state_json(l);
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	enum egs_err rc;

	EGS_ASSERT(text);
	rc = write_atomic(l, text, err, errsz);
	free(text);
	json_decref(j);
	return rc;
}

/* Reads optional string member key of o; "" when absent; false when present but not a string. */
static bool opt_string(json_t *o, const char *key, char **out)
{
	json_t *v = json_object_get(o, key);
	if (v && !json_is_string(v))
		return false;
	*out = egs_strdup(v ? json_string_value(v) : "");
	return true;
}

static bool parse_att(const char *node, json_t *o, struct egs_attachment *a)
{
	json_t *ns = json_object_get(o, "namespaces"), *v;
	size_t i;

	a->node = egs_strdup(node);
	if (!json_is_object(o) || !json_string_length(json_object_get(o, "gprId")))
		return false;
	if (!opt_string(o, "gprId", &a->gpr_id) || !opt_string(o, "workspace", &a->workspace) ||
	    !opt_string(o, "startTime", &a->start_time) || !opt_string(o, "exitTime", &a->exit_time) ||
	    !opt_string(o, "attachedAt", &a->attached_at))
		return false;
	if (ns && !json_is_array(ns))
		return false;
	json_array_foreach(ns, i, v) {
		if (!json_is_string(v))
			return false;
		egs_strlist_add(&a->namespaces, json_string_value(v));
	}
	return true;
}

/* The "shares" of a shared attachment: {"<uuid>": "0.60", ...}, each 0.01 to 1.00. */
static bool parse_shares(json_t *o, struct egs_attachment *a)
{
	const char *uuid;
	json_t *v;
	if (!json_is_object(o) || !json_object_size(o) || json_object_size(o) > EGS_SHARE_DEV_MAX)
		return false;
	a->shares = egs_calloc(json_object_size(o) + 1, sizeof(*a->shares));
	json_object_foreach(o, uuid, v) {
		struct egs_gpu_share *sh = &a->shares[a->n_shares++];
		if (!json_is_string(v) || !egs_share_parse(json_string_value(v), EGS_SHARE_WHOLE, &sh->centi) ||
		    !egs_strlcpy(sh->uuid, uuid, sizeof(sh->uuid)))
			return false;
	}
	return true;
}

static enum egs_err load_shared(struct local *l, json_t *shared, char *err, size_t errsz)
{
	size_t i;
	json_t *v;
	if (!shared)
		return EGS_OK;
	if (!json_is_array(shared)) {
		snprintf(err, errsz, "%s: \"shared\" is not a list", l->path);
		return EGS_ERR_INVALID;
	}
	json_array_foreach(shared, i, v) {
		struct egs_attachment *a = egs_calloc(1, sizeof(*a));
		const char *node = json_string_value(json_object_get(v, "node"));
		if (!node || !parse_att(node, v, a) || !parse_shares(json_object_get(v, "shares"), a)) {
			snprintf(err, errsz, "%s: shared[%zu]: malformed shared attachment", l->path, i);
			att_free(a);
			return EGS_ERR_INVALID;
		}
		egs_vec_push(&l->atts, a);
	}
	return EGS_OK;
}

static enum egs_err load(struct local *l, char *err, size_t errsz)
{
	enum egs_err rc = EGS_ERR_INVALID;
	json_error_t jerr;
	json_t *root, *nodes, *v;
	const char *cluster, *node;

	if (access(l->path, F_OK) != 0 && errno == ENOENT)
		return EGS_OK; /* first start */
	root = json_load_file(l->path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errsz, "%s:%d: %s", l->path, jerr.line, jerr.text);
		return jerr.line <= 0 ? EGS_ERR_IO : EGS_ERR_INVALID;
	}
	cluster = json_string_value(json_object_get(root, "cluster"));
	nodes = json_object_get(root, "nodes");
	if (json_integer_value(json_object_get(root, "version")) != STATE_VERSION || !cluster ||
	    !json_is_object(nodes)) {
		snprintf(err, errsz, "%s: not an egs-agent state file of version %d", l->path, STATE_VERSION);
		goto out;
	}
	if (strcmp(cluster, l->cluster) != 0) {
		snprintf(err, errsz, "%s belongs to cluster '%s', not '%s'; use another --state-dir", l->path,
			 cluster, l->cluster);
		goto out;
	}
	json_object_foreach(nodes, node, v) {
		struct egs_attachment *a = egs_calloc(1, sizeof(*a));
		if (!parse_att(node, v, a)) {
			snprintf(err, errsz, "%s: node '%s': malformed attachment", l->path, node);
			att_free(a);
			goto out;
		}
		egs_vec_push(&l->atts, a);
	}
	rc = load_shared(l, json_object_get(root, "shared"), err, errsz);
out:
	json_decref(root);
	return rc;
}

/* ---- hooks ---- */

static char *join_commas(const struct egs_strlist *l)
{
	size_t n = 1;
	char *s, *p;

	for (size_t i = 0; i < l->n; i++)
		n += strlen(l->v[i]) + 1;
	s = p = egs_malloc(n);
	*p = '\0';
	for (size_t i = 0; i < l->n; i++) {
		size_t k = strlen(l->v[i]);
		if (i > 0)
			*p++ = ',';
		memcpy(p, l->v[i], k + 1);
		p += k;
	}
	return s;
}

/* Runs cmd (may be NULL: nothing to do) for action on attachment a. */
static enum egs_err run_hook(struct local *l, const char *cmd, const char *action,
			     const struct egs_attachment *a, char *msg, size_t msgsz)
{
	char *ns, *env[11];
	enum egs_err rc;

	if (!cmd)
		return EGS_OK;
	ns = join_commas(&a->namespaces);
	struct egs_strlist shares = {0};
	for (size_t k = 0; k < a->n_shares; k++) {
		char text[EGS_NAME_MAX + EGS_SHARE_TEXT_MAX + 1];
		size_t u = strlen(a->shares[k].uuid);
		memcpy(text, a->shares[k].uuid, u);
		text[u] = '=';
		egs_share_format(a->shares[k].centi, text + u + 1, sizeof(text) - u - 1);
		egs_strlist_add(&shares, text);
	}
	char *share_list = join_commas(&shares);
	egs_strlist_cleanup(&shares);
	env[0] = egs_hook_env("EGS_ACTION", action);
	env[1] = egs_hook_env("EGS_NODE", a->node);
	env[2] = egs_hook_env("EGS_CLUSTER", l->cluster);
	env[3] = egs_hook_env("EGS_GPR_ID", a->gpr_id);
	env[4] = egs_hook_env("EGS_WORKSPACE", a->workspace);
	env[5] = egs_hook_env("EGS_NAMESPACES", ns);
	env[6] = egs_hook_env("EGS_START_TIME", a->start_time);
	env[7] = egs_hook_env("EGS_EXIT_TIME", a->exit_time);
	env[8] = egs_hook_env("EGS_SHARING_MODE", a->shares ? "shared" : "dedicated");
	env[9] = egs_hook_env("EGS_GPU_SHARES", share_list); /* "GPU-a=0.60,GPU-b=0.60"; "" when dedicated */
	env[10] = NULL;
	rc = egs_hook_run(cmd, env, l->hook_timeout_s, l->base.stop, l->base.stop_arg, msg, msgsz);
	for (size_t i = 0; env[i]; i++)
		egs_free(env[i]);
	egs_free(ns);
	egs_free(share_list);
	return rc;
}

/* ---- operations ---- */

static enum egs_err local_attach(struct egs_backend *b, const struct egs_attach_req *req, char *msg,
				 size_t msgsz)
{
	struct local *l = local_of(b);
	struct egs_attachment *cur, *a = NULL;
	enum egs_err rc = EGS_OK;
	char now[32];

	pthread_mutex_lock(&l->op_mu);
	cur = find_gpr(l, req->node, req->gpr_id);
	if (cur && !cur->shares == !req->shares) {
		egs_strlcpy(msg, "already attached", msgsz);
		goto out;
	}
	if (req->shares)
		shares_conflict(l, req, msg, msgsz);
	else if ((cur = find(l, req->node)) != NULL)
		snprintf(msg, msgsz, "node %s is attached to %s; detach it first", req->node, cur->gpr_id);
	else if (has_shared(l, req->node))
		snprintf(msg, msgsz, "node %s holds shared GPUs; they must be detached first", req->node);
	if (msg[0]) {
		rc = EGS_ERR_CONFLICT;
		goto out;
	}
	egs_time_format((int64_t)time(NULL), now, sizeof(now));
	a = egs_calloc(1, sizeof(*a));
	a->node = egs_strdup(req->node);
	a->gpr_id = egs_strdup(req->gpr_id);
	a->workspace = egs_strdup(req->workspace);
	egs_strlist_copy(&a->namespaces, req->namespaces);
	a->start_time = egs_strdup(req->start_time ? req->start_time : "");
	a->exit_time = egs_strdup(req->exit_time ? req->exit_time : "");
	a->attached_at = egs_strdup(now);
	if (req->shares) {
		a->n_shares = req->n_shares;
		a->shares = egs_calloc(req->n_shares + 1, sizeof(*a->shares));
		memcpy(a->shares, req->shares, req->n_shares * sizeof(*a->shares));
	}
	rc = run_hook(l, l->on_attach, "attach", a, msg, msgsz);
	if (rc != EGS_OK)
		goto out;
	pthread_mutex_lock(&l->mu);
	egs_vec_push(&l->atts, a);
	pthread_mutex_unlock(&l->mu);
	rc = save(l, msg, msgsz);
	if (rc != EGS_OK) {
		pthread_mutex_lock(&l->mu);
		egs_vec_remove(&l->atts, a);
		pthread_mutex_unlock(&l->mu);
		goto out;
	}
	a = NULL;
	egs_strlcpy(msg, "attached", msgsz);
out:
	pthread_mutex_unlock(&l->op_mu);
	att_free(a);
	return rc;
}

static enum egs_err local_detach(struct egs_backend *b, const char *node, const char *gpr_id, char *msg,
				 size_t msgsz)
{
	struct local *l = local_of(b);
	struct egs_attachment *cur;
	enum egs_err rc = EGS_OK;

	pthread_mutex_lock(&l->op_mu);
	cur = gpr_id && *gpr_id ? find_gpr(l, node, gpr_id) : find(l, node);
	if (!cur) {
		egs_strlcpy(msg, "not attached", msgsz);
		goto out;
	}
	rc = run_hook(l, l->on_detach, "detach", cur, msg, msgsz);
	if (rc != EGS_OK)
		goto out;
	pthread_mutex_lock(&l->mu);
	egs_vec_remove(&l->atts, cur);
	pthread_mutex_unlock(&l->mu);
	rc = save(l, msg, msgsz);
	if (rc != EGS_OK) {
		pthread_mutex_lock(&l->mu);
		egs_vec_push(&l->atts, cur); /* still recorded as attached: the next detach retries */
		pthread_mutex_unlock(&l->mu);
		goto out;
	}
	att_free(cur);
	egs_strlcpy(msg, "detached", msgsz);
out:
	pthread_mutex_unlock(&l->op_mu);
	return rc;
}

static bool local_attached_gpr(struct egs_backend *b, const char *node, char *gpr, size_t gprsz)
{
	struct local *l = local_of(b);
	struct egs_attachment *a;

	pthread_mutex_lock(&l->mu);
	a = find(l, node);
	egs_strlcpy(gpr, a ? a->gpr_id : "", gprsz);
	pthread_mutex_unlock(&l->mu);
	return a != NULL;
}

static void local_list(struct egs_backend *b, struct egs_attachment **out, size_t *n)
{
	struct local *l = local_of(b);

	pthread_mutex_lock(&l->mu);
	*n = l->atts.len;
	*out = egs_calloc(l->atts.len, sizeof(**out));
	for (size_t i = 0; i < l->atts.len; i++)
		att_copy(&(*out)[i], l->atts.items[i]);
	pthread_mutex_unlock(&l->mu);
}

static void local_free(struct egs_backend *b)
{
	struct local *l = local_of(b);

	for (size_t i = 0; i < l->atts.len; i++)
		att_free(l->atts.items[i]);
	egs_vec_cleanup(&l->atts);
	if (l->lock_fd >= 0)
		close(l->lock_fd); /* releases the flock */
	pthread_mutex_destroy(&l->op_mu);
	pthread_mutex_destroy(&l->mu);
	egs_free(l->cluster);
	egs_free(l->on_attach);
	egs_free(l->on_detach);
	egs_free(l->dir);
	egs_free(l->path);
	egs_free(l->tmp_path);
	egs_free(l);
}

static const struct egs_backend_ops local_ops = {
	.name = "local",
	.attach = local_attach,
	.detach = local_detach,
	.attached_gpr = local_attached_gpr,
	.list = local_list,
	.free = local_free,
};

/* ---- opening ---- */

/* mkdir -p with mode 0700 for what it creates. */
static bool make_dirs(const char *dir)
{
	char *p = egs_strdup(dir);
	struct stat st;
	bool ok;

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			break;
		*s = '/';
	}
	ok = (mkdir(p, 0700) == 0 || errno == EEXIST) && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
	egs_free(p);
	return ok;
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *s = egs_malloc(n);
	snprintf(s, n, "%s/%s", dir, name);
	return s;
}

static enum egs_err take_lock(struct local *l, char *err, size_t errsz)
{
	char *lock_path = path_join(l->dir, "lock");
	enum egs_err rc = EGS_OK;

	l->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (l->lock_fd < 0) {
		snprintf(err, errsz, "%s: %s", lock_path, strerror(errno));
		rc = EGS_ERR_IO;
	} else if (flock(l->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		snprintf(err, errsz, "%s: %s", lock_path,
			 errno == EWOULDBLOCK ? "another egs-agent uses this state directory" : strerror(errno));
		rc = EGS_ERR_IO;
	}
	egs_free(lock_path);
	return rc;
}

enum egs_err egs_backend_local_new(const struct egs_backend_local_config *cfg, struct egs_backend **out,
				   char *err, size_t errsz)
{
	struct local *l = egs_calloc(1, sizeof(*l));
	enum egs_err rc;

	EGS_ASSERT(cfg->state_dir && cfg->cluster);
	*out = NULL;
	l->base.ops = &local_ops;
	l->lock_fd = -1;
	pthread_mutex_init(&l->op_mu, NULL);
	pthread_mutex_init(&l->mu, NULL);
	l->cluster = egs_strdup(cfg->cluster);
	l->on_attach = cfg->on_attach && *cfg->on_attach ? egs_strdup(cfg->on_attach) : NULL;
	l->on_detach = cfg->on_detach && *cfg->on_detach ? egs_strdup(cfg->on_detach) : NULL;
	l->hook_timeout_s = cfg->hook_timeout_s;
	l->dir = egs_strdup(cfg->state_dir);
	l->path = path_join(cfg->state_dir, STATE_FILE);
	l->tmp_path = path_join(cfg->state_dir, STATE_FILE ".tmp");
	if (!make_dirs(l->dir)) {
		snprintf(err, errsz, "cannot create state directory %s: %s", l->dir, strerror(errno));
		rc = EGS_ERR_IO;
		goto fail;
	}
	rc = take_lock(l, err, errsz);
	if (rc != EGS_OK)
		goto fail;
	unlink(l->tmp_path); /* a leftover of a crash in the middle of a write */
	rc = load(l, err, errsz);
	if (rc != EGS_OK)
		goto fail;
	*out = &l->base;
	return EGS_OK;
fail:
	local_free(&l->base);
	return rc;
}
