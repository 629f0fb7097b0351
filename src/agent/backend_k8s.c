/*
 * backend_k8s.c: the kubernetes cluster backend (backend_k8s.h): opening, the node cache, the taint
 * reconciler, attach, and the attachment queries.  Detach (cordon, evict, wait, unlabel, uncordon) is
 * k8s_drain.c; the device view is devices_k8s.c.
 *
 * Attach: read the node from the API server (not the cache: the decision must see the newest
 * labels), refuse a node attached to another GPR or not managed, make sure the slice's namespaces
 * exist and carry kubeslice.io/slice=<workspace>, then patch the labels with the node's
 * resourceVersion as a precondition; 409 means someone changed the node meanwhile: read it and decide
 * again (a few times).  The answer goes into the cache at once so that the next heartbeat reports it.
 */
#include "agent/backend_k8s.h"

#include "agent/clock.h"
#include "agent/k8s_internal.h"
#include "agent/log.h"
#include "agent/webhook.h"
#include "core/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECONCILE_MS 2000
#define ATTACH_TRIES 5
#define ROUND_GAP_MS 200

static struct egs_k8s *k8s_of(struct egs_backend *b)
{
	return (struct egs_k8s *)b;
}

static bool closing(void *arg)
{
	return atomic_load(&((struct egs_k8s *)arg)->closing);
}

enum egs_err egs__k8s_later(struct egs_k8s *k, enum egs_err rc, char *msg, size_t msgsz)
{
	char why[256];

	if (rc != EGS_ERR_IO || egs__k8s_stopping(k))
		return rc;
	egs_strlcpy(why, msg, sizeof(why));
	snprintf(msg, msgsz, "the Kubernetes API server does not answer: %s", why);
	return EGS_ERR_BUSY;
}

bool egs__k8s_stopping(struct egs_k8s *k)
{
	return atomic_load(&k->closing) || (k->base.stop && k->base.stop(k->base.stop_arg));
}

static void node_changed(void *arg)
{
	struct egs_k8s *k = arg;
	pthread_mutex_lock(&k->rmu);
	k->dirty = true;
	pthread_cond_broadcast(&k->rcv);
	pthread_mutex_unlock(&k->rmu);
}

/* The API path of node name into path; false (why in msg) when the name is too long. */
static bool node_path(const char *name, char *path, size_t pathsz, char *msg, size_t msgsz)
{
	char esc[400];
	if (!egs_kube_escape(name, esc, sizeof(esc))) {
		snprintf(msg, msgsz, "node name too long");
		return false;
	}
	snprintf(path, pathsz, "/api/v1/nodes/%s", esc);
	return true;
}

enum egs_err egs__k8s_node_get(struct egs_k8s *k, const char *name, json_t **node, char *msg, size_t msgsz)
{
	char path[600];
	long status;
	enum egs_err rc;

	*node = NULL;
	if (!node_path(name, path, sizeof(path), msg, msgsz))
		return EGS_ERR_INVALID;
	rc = egs_kube_call(k->kube, "GET", path, NULL, NULL, k->api_timeout_s, &status, node, msg, msgsz);
	if (rc != EGS_OK) {
		json_decref(*node);
		*node = NULL;
	}
	return rc;
}

enum egs_err egs__k8s_node_patch(struct egs_k8s *k, const char *name, json_t *patch, char *msg, size_t msgsz)
{
	char path[600];
	json_t *ans = NULL;
	long status;
	enum egs_err rc;

	if (!node_path(name, path, sizeof(path), msg, msgsz))
		return EGS_ERR_INVALID;
	rc = egs_kube_call(k->kube, "PATCH", path, "application/merge-patch+json", patch, k->api_timeout_s, &status,
			   &ans, msg, msgsz);
	if (rc == EGS_OK && json_is_object(ans))
		egs_kube_reflector_put(k->nodes, ans);
	json_decref(ans);
	return rc;
}

/* ---- the taint reconciler ---- */

struct taint_todo {
	struct egs_strlist add, remove;
};

static void collect_taints(void *arg, const char *key, json_t *obj)
{
	struct taint_todo *t = arg;
	struct egs_k8s_node n;
	(void)key;
	if (!egs_k8s_node_read(obj, &n) || !n.name[0])
		return;
	/* A node attached before it opted out keeps its taint until it is detached. */
	if (n.managed && !n.tainted)
		egs_strlist_add(&t->add, n.name);
	else if (!n.managed && n.tainted && !n.gpr[0])
		egs_strlist_add(&t->remove, n.name);
}

/* Puts the taint on (want) or off one node; a 409 is left to the next round. */
static void fix_taint(struct egs_k8s *k, const char *name, bool want)
{
	char msg[256];
	json_t *node = egs_kube_reflector_get(k->nodes, name), *patch;

	if (!node)
		return;
	patch = egs_k8s_patch_taint(node, want);
	if (patch && egs__k8s_node_patch(k, name, patch, msg, sizeof(msg)) == EGS_OK)
		EGS_LOG_INFO("node %s: %s the taint %s=%s:NoSchedule", name, want ? "added" : "removed",
			     EGS_K8S_TAINT_KEY, EGS_K8S_TAINT_VALUE);
	else if (patch)
		EGS_LOG_DEBUG("node %s: taint: %s", name, msg);
	json_decref(patch);
	json_decref(node);
}

static void reconcile_taints(struct egs_k8s *k)
{
	struct taint_todo t = {0};

	egs_kube_reflector_foreach(k->nodes, collect_taints, &t);
	for (size_t i = 0; i < t.add.n && !closing(k); i++)
		fix_taint(k, t.add.v[i], true);
	for (size_t i = 0; i < t.remove.n && !closing(k); i++)
		fix_taint(k, t.remove.v[i], false);
	egs_strlist_cleanup(&t.add);
	egs_strlist_cleanup(&t.remove);
}

/* Waits until the node cache changed, RECONCILE_MS passed, or the backend closes. */
static void wait_dirty(struct egs_k8s *k)
{
	struct timespec ts = egs_clock_after_ms(RECONCILE_MS);

	pthread_mutex_lock(&k->rmu);
	while (!closing(k) && !k->dirty && pthread_cond_timedwait(&k->rcv, &k->rmu, &ts) == 0)
		;
	k->dirty = false;
	pthread_mutex_unlock(&k->rmu);
}

/* The reconciler: a round after every change of the node cache (at most every ROUND_GAP_MS, so a burst
 * of node updates costs one pass over the nodes, not one per update) and every RECONCILE_MS. */
static void *reconcile_main(void *arg)
{
	struct egs_k8s *k = arg;

	while (!closing(k)) {
		wait_dirty(k);
		if (!closing(k) && egs_kube_reflector_wait_synced(k->nodes, 0))
			reconcile_taints(k);
		for (int t = 0; t < ROUND_GAP_MS && !closing(k); t += 50)
			usleep(50 * 1000);
	}
	return NULL;
}

/* ---- attach ---- */

/* Creates namespace ns for workspace, or labels it when it exists. */
static enum egs_err write_namespace(struct egs_k8s *k, const char *ns, const char *workspace, char *msg,
				    size_t msgsz)
{
	char path[400], esc[300];
	json_t *body = egs_k8s_namespace(ns, workspace), *patch = egs_k8s_patch_namespace(workspace), *ans = NULL;
	long status;
	enum egs_err rc;

	rc = egs_kube_call(k->kube, "POST", "/api/v1/namespaces", NULL, body, k->api_timeout_s, &status, &ans, msg,
			   msgsz);
	if (rc == EGS_OK) {
		EGS_LOG_INFO("created namespace %s for slice %s", ns, workspace);
	} else if (rc == EGS_ERR_CONFLICT && egs_kube_escape(ns, esc, sizeof(esc))) {
		json_decref(ans);
		ans = NULL;
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s", esc);
		rc = egs_kube_call(k->kube, "PATCH", path, "application/merge-patch+json", patch, k->api_timeout_s,
				   &status, &ans, msg, msgsz);
	}
	if (rc == EGS_OK && json_is_object(ans))
		egs_kube_reflector_put(k->namespaces, ans); /* the webhook knows the namespace at once */
	json_decref(ans);
	json_decref(body);
	json_decref(patch);
	return rc;
}

/* write_namespace() unless the namespace cache already shows ns labelled for workspace. */
static enum egs_err ensure_namespace(struct egs_k8s *k, const char *ns, const char *workspace, char *msg,
				     size_t msgsz)
{
	char have[EGS_NAME_MAX];

	if (egs_backend_k8s_slice_of(&k->base, ns, have, sizeof(have)) && strcmp(have, workspace) == 0)
		return EGS_OK;
	return write_namespace(k, ns, workspace, msg, msgsz);
}

/* Decides about node n for req: EGS_OK to patch, or the answer (msg set; *done when it is final). */
static enum egs_err attach_verdict(const struct egs_k8s_node *n, const struct egs_attach_req *req, bool *done,
				   char *msg, size_t msgsz)
{
	*done = true;
	if (n->gpr[0] && strcmp(n->gpr, req->gpr_id) == 0) {
		egs_strlcpy(msg, "already attached", msgsz);
		return EGS_OK;
	}
	if (n->gpr[0]) {
		snprintf(msg, msgsz, "node %s is attached to %s; detach it first", req->node, n->gpr);
		return EGS_ERR_CONFLICT;
	}
	if (!n->managed) {
		snprintf(msg, msgsz, "node %s is not managed by EGS (%s=false or no GPUs)", req->node,
			 EGS_K8S_LABEL_MANAGED);
		return EGS_ERR_CONFLICT;
	}
	*done = false;
	return EGS_OK;
}

/* One read-decide-patch round: the first reads the node cache, later ones (after a 409: the cache was
 * behind) the API server.  *again: a 409 asks for another round. */
static enum egs_err attach_round(struct egs_k8s *k, const struct egs_attach_req *req, bool fresh, bool *again,
				 char *msg, size_t msgsz)
{
	struct egs_k8s_node n;
	json_t *node = fresh ? NULL : egs_kube_reflector_get(k->nodes, req->node), *patch = NULL;
	char now[32];
	bool done;
	enum egs_err rc = EGS_OK;

	*again = false;
	if (!node)
		rc = egs__k8s_node_get(k, req->node, &node, msg, msgsz);
	if (rc != EGS_OK) {
		if (rc == EGS_ERR_NOT_FOUND)
			snprintf(msg, msgsz, "node %s is not in the cluster", req->node);
		goto out;
	}
	egs_k8s_node_read(node, &n);
	rc = attach_verdict(&n, req, &done, msg, msgsz);
	if (done)
		goto out;
	egs_time_format((int64_t)time(NULL), now, sizeof(now));
	patch = egs_k8s_patch_attach(req, now);
	json_object_set_new(json_object_get(patch, "metadata"), "resourceVersion",
			    json_incref(json_object_get(json_object_get(node, "metadata"), "resourceVersion")));
	rc = egs__k8s_node_patch(k, req->node, patch, msg, msgsz);
	if (rc == EGS_ERR_CONFLICT)
		*again = true;
	else if (rc == EGS_OK)
		egs_strlcpy(msg, "attached", msgsz);
out:
	json_decref(node);
	json_decref(patch);
	return rc;
}

static enum egs_err k8s_attach(struct egs_backend *b, const struct egs_attach_req *req, char *msg, size_t msgsz)
{
	struct egs_k8s *k = k8s_of(b);
	enum egs_err rc = EGS_OK;
	bool again = true;

	if (req->shares) {
		snprintf(msg, msgsz, "the kubernetes backend does not share GPUs");
		return EGS_ERR_CONFLICT;
	}
	pthread_mutex_lock(&k->op_mu);
	for (size_t i = 0; i < req->namespaces->n && rc == EGS_OK; i++)
		rc = ensure_namespace(k, req->namespaces->v[i], req->workspace, msg, msgsz);
	for (int i = 0; rc == EGS_OK && again && i < ATTACH_TRIES && !egs__k8s_stopping(k); i++)
		rc = attach_round(k, req, i > 0, &again, msg, msgsz);
	if (rc == EGS_OK && strcmp(msg, "attached") == 0) {
		EGS_LOG_INFO("node %s: attached to %s (slice %s)", req->node, req->gpr_id, req->workspace);
		egs__k8s_events(k, req->namespaces, req->gpr_id, "NodeAttached", "Normal", "node %s joined the slice %s",
				req->node, req->workspace);
	}
	pthread_mutex_unlock(&k->op_mu);
	if (rc == EGS_OK && again) {
		snprintf(msg, msgsz, "node %s kept changing; try again", req->node);
		rc = EGS_ERR_CONFLICT;
	}
	return egs__k8s_later(k, rc, msg, msgsz);
}

/* ---- queries ---- */

/* Reads the node's GPR label into the buffer arg (a char[EGS_ID_MAX]). */
static void read_gpr(void *arg, json_t *obj)
{
	const char *g = json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"),
							  EGS_K8S_LABEL_GPR));
	egs_strlcpy(arg, g ? g : "", EGS_ID_MAX);
}

static bool k8s_attached_gpr(struct egs_backend *b, const char *node, char *gpr, size_t gprsz)
{
	char g[EGS_ID_MAX] = "";

	egs_kube_reflector_read(k8s_of(b)->nodes, node, read_gpr, g); /* no copy: called per node per heartbeat */
	egs_strlcpy(gpr, g, gprsz);
	return g[0] != '\0';
}

static void collect_attachment(void *arg, const char *key, json_t *obj)
{
	struct egs_vec *v = arg;
	struct egs_attachment a;
	(void)key;
	if (egs_k8s_node_attachment(obj, &a)) {
		struct egs_attachment *copy = egs_malloc(sizeof(*copy));
		*copy = a;
		egs_vec_push(v, copy);
	}
}

static void k8s_list(struct egs_backend *b, struct egs_attachment **out, size_t *n)
{
	struct egs_vec v = {0};

	egs_kube_reflector_foreach(k8s_of(b)->nodes, collect_attachment, &v);
	*n = v.len;
	*out = egs_calloc(v.len + 1, sizeof(**out));
	for (size_t i = 0; i < v.len; i++) {
		(*out)[i] = *(struct egs_attachment *)v.items[i];
		egs_free(v.items[i]);
	}
	egs_vec_cleanup(&v);
}

static void k8s_free(struct egs_backend *b)
{
	struct egs_k8s *k = k8s_of(b);

	egs_kube_reflector_stop(k->nodes);
	egs_kube_reflector_stop(k->namespaces);
	egs_kube_reflector_stop(k->pods);
	atomic_store(&k->closing, true);
	egs_k8s_dcgm_free(k->dcgm); /* before the pod cache it reads */
	pthread_mutex_lock(&k->rmu);
	pthread_cond_broadcast(&k->rcv);
	pthread_mutex_unlock(&k->rmu);
	if (k->reconciler_started)
		pthread_join(k->reconciler, NULL);
	egs_kube_reflector_free(k->nodes);
	egs_kube_reflector_free(k->namespaces);
	egs_kube_reflector_free(k->pods);
	egs_kube_free(k->kube);
	pthread_mutex_destroy(&k->op_mu);
	pthread_mutex_destroy(&k->rmu);
	pthread_cond_destroy(&k->rcv);
	egs_free(k->cluster);
	egs_free(k);
}

static const struct egs_backend_ops k8s_ops = {
	.name = "kubernetes",
	.dedicated_only = true,
	.attach = k8s_attach,
	.detach = egs__k8s_detach,
	.attached_gpr = k8s_attached_gpr,
	.list = k8s_list,
	.free = k8s_free,
	.slice_access = egs__k8s_slice_access,
	.slice_release = egs__k8s_slice_release,
	.slice_state = egs__k8s_slice_state,
};

/* ---- opening ---- */

static enum egs_err load_config(const struct egs_backend_k8s_config *cfg, struct egs_kube_config *kc, char *err,
				size_t errsz)
{
	if (cfg->kubeconfig)
		return egs_kube_config_load(cfg->kubeconfig, kc, err, errsz);
	return egs_kube_config_incluster(cfg->sa_dir, kc, err, errsz);
}

enum egs_err egs_backend_k8s_new(const struct egs_backend_k8s_config *cfg, struct egs_backend **out, char *err,
				 size_t errsz)
{
	struct egs_k8s *k = egs_calloc(1, sizeof(*k));
	struct egs_kube_config kc;
	enum egs_err rc;

	*out = NULL;
	k->base.ops = &k8s_ops;
	k->cluster = egs_strdup(cfg->cluster);
	k->evict_grace_s = cfg->evict_grace_s > 0 ? cfg->evict_grace_s : 30;
	k->drain_timeout_s = cfg->drain_timeout_s > 0 ? cfg->drain_timeout_s : 300;
	k->api_timeout_s = cfg->api_timeout_s > 0 ? cfg->api_timeout_s : 10;
	pthread_mutex_init(&k->op_mu, NULL);
	pthread_mutex_init(&k->rmu, NULL);
	egs_clock_cond_init(&k->rcv);
	rc = load_config(cfg, &kc, err, errsz);
	if (rc != EGS_OK)
		goto fail;
	rc = egs_kube_new(&kc, &k->kube, err, errsz);
	egs_kube_config_cleanup(&kc);
	if (rc != EGS_OK)
		goto fail;
	egs_kube_set_stop(k->kube, closing, k);
	k->nodes = egs_kube_reflector_new(k->kube, "/api/v1/nodes", NULL, egs_k8s_node_trim, node_changed, k);
	k->namespaces = egs_kube_reflector_new(k->kube, "/api/v1/namespaces", EGS_K8S_LABEL_SLICE,
					       egs_k8s_namespace_trim, NULL, NULL);
	k->pods = egs_kube_reflector_new(k->kube, "/api/v1/pods", NULL, egs_k8s_pod_trim, NULL, NULL);
	if (egs_kube_reflector_start(k->nodes) != EGS_OK || egs_kube_reflector_start(k->namespaces) != EGS_OK ||
	    egs_kube_reflector_start(k->pods) != EGS_OK ||
	    !(k->dcgm = egs_k8s_dcgm_new(k, cfg->dcgm_url, cfg->scrape_interval_s)) ||
	    pthread_create(&k->reconciler, NULL, reconcile_main, k) != 0) {
		snprintf(err, errsz, "cannot start the backend's threads");
		rc = EGS_ERR_IO;
		goto fail;
	}
	k->reconciler_started = true;
	*out = &k->base;
	return EGS_OK;
fail:
	k8s_free(&k->base);
	return rc;
}

bool egs_backend_k8s_wait_synced(struct egs_backend *b, int timeout_ms)
{
	return egs_kube_reflector_wait_synced(k8s_of(b)->nodes, timeout_ms);
}

bool egs_backend_k8s_slice_of(struct egs_backend *b, const char *ns, char *ws, size_t wssz)
{
	json_t *o = egs_kube_reflector_get(k8s_of(b)->namespaces, ns);
	const char *v = json_string_value(json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"),
							  EGS_K8S_LABEL_SLICE));
	bool ok = v && *v && egs_strlcpy(ws, v, wssz);

	json_decref(o);
	return ok;
}

/* Creates or replaces one webhook configuration. */
static enum egs_err put_config(struct egs_k8s *k, const char *collection, json_t *cfg, char *err, size_t errsz)
{
	char path[300];
	json_t *cur = NULL;
	long status;
	enum egs_err rc;

	snprintf(path, sizeof(path), "/apis/admissionregistration.k8s.io/v1/%s", collection);
	rc = egs_kube_call(k->kube, "POST", path, NULL, cfg, k->api_timeout_s, &status, NULL, err, errsz);
	if (rc != EGS_ERR_CONFLICT)
		return rc;
	snprintf(path, sizeof(path), "/apis/admissionregistration.k8s.io/v1/%s/egs-agent", collection);
	rc = egs_kube_call(k->kube, "GET", path, NULL, NULL, k->api_timeout_s, &status, &cur, err, errsz);
	if (rc == EGS_OK) {
		json_object_set(json_object_get(cfg, "metadata"), "resourceVersion",
				json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
		rc = egs_kube_call(k->kube, "PUT", path, NULL, cfg, k->api_timeout_s, &status, NULL, err, errsz);
	}
	json_decref(cur);
	return rc;
}

enum egs_err egs_backend_k8s_register_webhooks(struct egs_backend *b, const char *url_base, const char *ca_pem,
					       char *err, size_t errsz)
{
	struct egs_k8s *k = k8s_of(b);
	json_t *m = egs_webhook_configuration(true, url_base, ca_pem), *v = egs_webhook_configuration(false, url_base, ca_pem);
	enum egs_err rc = put_config(k, "mutatingwebhookconfigurations", m, err, errsz);

	if (rc == EGS_OK)
		rc = put_config(k, "validatingwebhookconfigurations", v, err, errsz);
	json_decref(m);
	json_decref(v);
	return rc;
}
