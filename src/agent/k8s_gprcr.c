/*
 * k8s_gprcr.c: the GPUProvisioningRequest controller (k8s_gprcr.h).  A round reads egsd's links
 * (GET /api/v1/agent/gprs: each CR uid's GPR with its view and events), snapshots the CR cache, and
 * reconciles each CR against them: finalizer first, then create or update in egsd, then the annotation
 * and the status, each written only when it differs.  egsd's answer is the truth about what exists; the
 * agent keeps only the refusals it already wrote (uid -> generation and message), so that a spec egsd
 * refused is not sent again every round.  Nothing acts on a watch event alone: a missed or repeated
 * event changes nothing, the next round sees the difference.
 */
#include "agent/k8s_gprcr.h"

#include "agent/clock.h"
#include "agent/k8s_internal.h"
#include "agent/log.h"
#include "core/util.h"

#include <egs/egs.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CR_GROUP_PATH "/apis/egs.kubeslice.io/v1"
#define CALL_TIMEOUT_S 10
#define NS_RECHECK_S 10 /* how often a namespace the cache calls no slice's is read from the API server */

struct egs_gprcr {
	struct egs_k8s *k;
	struct egs_client *egs;
	struct egs_kube_reflector *crs;
	int interval_ms;
	pthread_t thread;
	bool started;
	atomic_bool closing;
	pthread_mutex_t mu; /* guards dirty */
	pthread_cond_t cv;
	bool dirty;
	json_t *refused; /* uid -> {"generation", "message"}: applies egsd refused (controller thread only) */
	json_t *ns_checked; /* namespace -> monotonic second it was last read from the API server (ditto) */
};

/* What a round knows about one CR (borrowed from the CR object). */
struct cr {
	json_t *obj;
	const char *ns, *name, *uid, *rv;
	json_int_t generation;
	bool deleting, has_finalizer;
};

static bool closing(void *arg)
{
	return atomic_load(&((struct egs_gprcr *)arg)->closing);
}

static void crs_changed(void *arg)
{
	struct egs_gprcr *c = arg;
	pthread_mutex_lock(&c->mu);
	c->dirty = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* Fills cr from obj (borrowed); false when it lacks a namespace, name or uid. */
static bool cr_read(json_t *obj, struct cr *cr)
{
	json_t *md = json_object_get(obj, "metadata"), *f;
	size_t i;

	*cr = (struct cr){ .obj = obj };
	cr->ns = str_at(md, "namespace");
	cr->name = str_at(md, "name");
	cr->uid = str_at(md, "uid");
	cr->rv = str_at(md, "resourceVersion");
	cr->generation = json_integer_value(json_object_get(md, "generation"));
	if (cr->generation < 1)
		cr->generation = 1;
	cr->deleting = json_object_get(md, "deletionTimestamp") != NULL;
	json_array_foreach(json_object_get(md, "finalizers"), i, f)
		if (!strcmp(json_string_value(f) ? json_string_value(f) : "", EGS_GPRCR_FINALIZER))
			cr->has_finalizer = true;
	return *cr->ns && *cr->name && *cr->uid;
}

/* The CR's object path (suffix: "" or "/status") into out; false when it does not fit. */
static bool cr_path(const struct cr *cr, const char *suffix, char *out, size_t outsz)
{
	char ns[256], name[600];
	int n;

	if (!egs_kube_escape(cr->ns, ns, sizeof(ns)) || !egs_kube_escape(cr->name, name, sizeof(name)))
		return false;
	n = snprintf(out, outsz, CR_GROUP_PATH "/namespaces/%s/gpuprovisioningrequests/%s%s", ns, name, suffix);
	return n > 0 && (size_t)n < outsz;
}

/* Merge-patches the CR (or its status) and puts the answer into the cache.  The egs_kube_call() codes. */
static enum egs_err cr_patch(struct egs_gprcr *c, const struct cr *cr, const char *suffix, json_t *patch)
{
	char path[1024], msg[256];
	json_t *ans = NULL;
	long status;
	enum egs_err rc;

	if (!cr_path(cr, suffix, path, sizeof(path)))
		return EGS_ERR_INVALID;
	rc = egs_kube_call(c->k->kube, "PATCH", path, "application/merge-patch+json", patch, c->k->api_timeout_s,
			   &status, &ans, msg, sizeof(msg));
	if (rc == EGS_OK && json_is_object(ans))
		egs_kube_reflector_put(c->crs, ans);
	else if (rc != EGS_OK && rc != EGS_ERR_CONFLICT && rc != EGS_ERR_NOT_FOUND)
		EGS_LOG_WARN("gpuprovisioningrequest %s/%s: patch%s: %s", cr->ns, cr->name, suffix, msg);
	else if (rc != EGS_OK) /* the cache was behind, or the CR went: the next round reads it again */
		EGS_LOG_DEBUG("gpuprovisioningrequest %s/%s: patch%s: %s", cr->ns, cr->name, suffix, msg);
	json_decref(ans);
	return rc;
}

/* Adds (want) or removes our finalizer, keeping the others; the resourceVersion guards the list. */
static enum egs_err set_finalizer(struct egs_gprcr *c, const struct cr *cr, bool want)
{
	json_t *list = json_array(), *f, *patch;
	size_t i;
	enum egs_err rc;

	json_array_foreach(json_object_get(json_object_get(cr->obj, "metadata"), "finalizers"), i, f)
		if (strcmp(json_string_value(f) ? json_string_value(f) : "", EGS_GPRCR_FINALIZER) != 0)
			json_array_append(list, f);
	if (want)
		json_array_append_new(list, json_string(EGS_GPRCR_FINALIZER));
	patch = json_pack("{s:{s:o, s:s}}", "metadata", "finalizers", list, "resourceVersion", cr->rv);
	rc = cr_patch(c, cr, "", patch);
	json_decref(patch);
	return rc;
}

/* ---- egsd ---- */

/* GET /api/v1/agent/gprs as uid -> link (caller decrefs), or NULL when egsd cannot answer now. */
static json_t *fetch_links(struct egs_gprcr *c)
{
	json_t *data = NULL, *by = NULL, *it;
	size_t i;

	if (egs_client_call(c->egs, "GET", "/api/v1/agent/gprs", NULL, CALL_TIMEOUT_S, NULL, &data) != EGS_OK) {
		EGS_LOG_DEBUG("gpuprovisioningrequests: egsd: %s", egs_client_errmsg(c->egs));
		goto out;
	}
	by = json_object();
	json_array_foreach(json_object_get(data, "items"), i, it)
		if (*str_at(it, "uid"))
			json_object_set(by, str_at(it, "uid"), it);
out:
	json_decref(data);
	return by;
}

/* Ends the GPR linked to uid in egsd.  True when egsd has it (ended, or no link was left). */
static bool end_gpr(struct egs_gprcr *c, const char *uid, const char *what)
{
	json_t *body = json_pack("{s:s}", "uid", uid), *data = NULL;
	enum egs_err rc = egs_client_call(c->egs, "DELETE", "/api/v1/agent/gprs", body, CALL_TIMEOUT_S, NULL, &data);
	bool done = rc == EGS_OK || egs_client_status(c->egs) == 404;

	if (rc == EGS_OK)
		EGS_LOG_INFO("gpuprovisioningrequest %s gone: GPR %s is %s", what, str_at(data, "gprId"),
			     str_at(data, "provisioningStatus"));
	else if (!done)
		EGS_LOG_WARN("gpuprovisioningrequest %s: cannot end its GPR now: %s", what, egs_client_errmsg(c->egs));
	json_decref(body);
	json_decref(data);
	return done;
}

/*
 * POSTs cr's spec to egsd.  Returns EGS_OK (gpr_id set), EGS_ERR_IO when egsd cannot answer now (try
 * again next round), or another code when egsd refused: the refusal is remembered in c->refused with
 * its message ("spec.<field>: why").
 */
static enum egs_err apply_cr(struct egs_gprcr *c, const struct cr *cr, char *gpr_id, size_t idsz)
{
	json_t *spec = json_object_get(cr->obj, "spec"), *data = NULL;
	json_t *body = json_pack("{s:s, s:s, s:s, s:I, s:O}", "namespace", cr->ns, "name", cr->name, "uid", cr->uid,
				 "generation", cr->generation, "spec", spec ? spec : json_object());
	enum egs_err rc = egs_client_call(c->egs, "POST", "/api/v1/agent/gprs", body, CALL_TIMEOUT_S, NULL, &data);
	long status = egs_client_status(c->egs);
	char msg[700];

	json_decref(body);
	if (rc == EGS_OK) {
		egs_strlcpy(gpr_id, str_at(data, "gprId"), idsz);
		json_object_del(c->refused, cr->uid);
		EGS_LOG_INFO("gpuprovisioningrequest %s/%s (generation %lld): GPR %s", cr->ns, cr->name,
			     (long long)cr->generation, gpr_id);
	} else if (status >= 400 && status < 500) {
		const char *field = egs_client_errfield(c->egs);
		if (*field)
			snprintf(msg, sizeof(msg), "spec.%s: %s", field, egs_client_errmsg(c->egs));
		else
			snprintf(msg, sizeof(msg), "%s", egs_client_errmsg(c->egs));
		json_object_set_new(c->refused, cr->uid, json_pack("{s:I, s:s}", "generation", cr->generation,
								   "message", msg));
		EGS_LOG_INFO("gpuprovisioningrequest %s/%s (generation %lld) refused by egsd: %s", cr->ns, cr->name,
			     (long long)cr->generation, msg);
	} else {
		EGS_LOG_DEBUG("gpuprovisioningrequest %s/%s: egsd: %s", cr->ns, cr->name, egs_client_errmsg(c->egs));
		rc = EGS_ERR_IO;
	}
	json_decref(data);
	return rc;
}

/* ---- status ---- */

/* "12m0s (start 2026-01-01T10:00:00Z)" while waiting, "started <time>" once running, else NULL. */
static json_t *estimate_of(json_t *gpr)
{
	const char *state = str_at(json_object_get(gpr, "status"), "provisioningStatus");
	const char *start = json_string_value(json_object_get(gpr, "estimatedStartTime"));
	const char *wait = json_string_value(json_object_get(gpr, "estimatedWaitTime"));
	char b[160];

	if ((!strcmp(state, "Queued") || !strcmp(state, "Pending")) && start) {
		snprintf(b, sizeof(b), "%s (start %s)", wait ? wait : "?", start);
		return json_string(b);
	}
	if (!strcmp(state, "Provisioning") || !strcmp(state, "Provisioned") || !strcmp(state, "Releasing")) {
		const char *t = json_string_value(json_object_get(json_object_get(gpr, "status"), "startTimestamp"));
		snprintf(b, sizeof(b), "started %s", t ? t : start ? start : "now");
		return json_string(b);
	}
	return json_null();
}

/* "a,b" of the node names (NULL when none). */
static json_t *node_list(json_t *nodes)
{
	char b[2048] = "";
	size_t i, n = 0;
	json_t *v;

	json_array_foreach(nodes, i, v) {
		int w = snprintf(b + n, sizeof(b) - n, "%s%s", i ? "," : "", json_string_value(v) ? json_string_value(v) : "");
		if (w < 0 || (size_t)w >= sizeof(b) - n)
			break;
		n += (size_t)w;
	}
	return n ? json_string(b) : json_null();
}

/* The status the CR should show (every key present; null removes it in a merge patch).  link may be
 * NULL (no GPR), refusal NULL (egsd took the spec). */
static json_t *desired_status(json_t *link, json_t *refusal)
{
	json_t *gpr = json_object_get(link, "gpr"), *st = json_object_get(gpr, "status");
	json_t *nodes = json_object_get(st, "nodes");
	const char *state = json_string_value(json_object_get(st, "provisioningStatus"));
	json_t *msg = json_object_get(refusal, "message");
	const char *reason = json_string_value(json_object_get(st, "failureReason"));

	if (!msg && reason && *reason)
		msg = json_object_get(st, "failureReason");
	if (!msg && json_string_value(json_object_get(st, "pendingReason")))
		msg = json_object_get(st, "pendingReason");
	return json_pack("{s:O?, s:s?, s:O?, s:O?, s:o, s:O?, s:O?, s:O?, s:o, s:O?, s:I, s:O?}",
			 "gprId", json_object_get(link, "gprId"),
			 "provisioningStatus", state ? state : refusal ? "Invalid" : NULL,
			 "estimatedStartTime", json_object_get(gpr, "estimatedStartTime"),
			 "estimatedWaitTime", json_object_get(gpr, "estimatedWaitTime"),
			 "estimate", estimate_of(gpr),
			 "startTimestamp", json_object_get(st, "startTimestamp"),
			 "exitTimestamp", json_object_get(st, "exitTimestamp"),
			 "nodes", json_array_size(nodes) ? nodes : NULL,
			 "nodeList", node_list(nodes),
			 "message", msg,
			 "observedGeneration", refusal ? json_integer_value(json_object_get(refusal, "generation"))
						       : json_integer_value(json_object_get(link, "generation")),
			 "events", json_array_size(json_object_get(link, "events")) ? json_object_get(link, "events") : NULL);
}

/* Writes want into the CR's status when a key of it differs from what the CR shows. */
static void sync_status(struct egs_gprcr *c, const struct cr *cr, json_t *want)
{
	json_t *have = json_object_get(cr->obj, "status"), *v, *patch;
	const char *key;
	bool same = true;

	json_object_foreach(want, key, v) {
		json_t *h = json_object_get(have, key);
		if (json_is_null(v) ? h != NULL : !json_equal(v, h))
			same = false;
	}
	if (same)
		return;
	patch = json_pack("{s:O}", "status", want);
	cr_patch(c, cr, "/status", patch);
	json_decref(patch);
}

/* Makes the annotation name gpr_id. */
static void sync_annotation(struct egs_gprcr *c, const struct cr *cr, const char *gpr_id)
{
	json_t *ann = json_object_get(json_object_get(cr->obj, "metadata"), "annotations"), *patch;

	if (!*gpr_id || !strcmp(str_at(ann, EGS_GPRCR_ANNOTATION), gpr_id))
		return;
	patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", EGS_GPRCR_ANNOTATION, gpr_id);
	cr_patch(c, cr, "", patch);
	json_decref(patch);
}

/* ---- the round ---- */

/* One CR in a slice namespace against egsd's links (uid -> link). */
static void reconcile(struct egs_gprcr *c, const struct cr *cr, json_t *links)
{
	json_t *link = json_object_get(links, cr->uid), *refusal = json_object_get(c->refused, cr->uid), *want;
	char gpr_id[EGS_ID_MAX] = "", what[400];

	snprintf(what, sizeof(what), "%s/%s", cr->ns, cr->name);
	if (cr->deleting) {
		if (cr->has_finalizer && (!link || end_gpr(c, cr->uid, what)))
			set_finalizer(c, cr, false);
		json_object_del(c->refused, cr->uid);
		return;
	}
	if (!cr->has_finalizer) { /* first, so that no GPR exists whose CR could vanish unseen */
		set_finalizer(c, cr, true);
		return; /* the cache has the new object (and resourceVersion) for the next round */
	}
	if (refusal && json_integer_value(json_object_get(refusal, "generation")) != cr->generation)
		refusal = NULL;
	if ((!link || json_integer_value(json_object_get(link, "generation")) < cr->generation) && !refusal) {
		enum egs_err rc = apply_cr(c, cr, gpr_id, sizeof(gpr_id));
		if (rc == EGS_ERR_IO)
			return;
		refusal = json_object_get(c->refused, cr->uid);
		if (rc == EGS_OK) {
			sync_annotation(c, cr, gpr_id);
			crs_changed(c); /* the next round, at once, has egsd's view of it for the status */
			return;
		}
	}
	if (link)
		egs_strlcpy(gpr_id, str_at(link, "gprId"), sizeof(gpr_id));
	sync_annotation(c, cr, gpr_id);
	want = desired_status(link, refusal);
	sync_status(c, cr, want);
	json_decref(want);
}

static json_int_t mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (json_int_t)ts.tv_sec + 1; /* never 0: 0 means "never checked" */
}

/*
 * Whether namespace ns is a slice's.  The namespace cache answers; when it says no, the API server is
 * asked too, at most every NS_RECHECK_S per namespace: a namespace labelled after the cache's last
 * event, or an event the watch missed, must not leave a CR unseen until the next re-list.  A namespace
 * found labelled goes into the cache, where the admission webhook sees it as well.
 */
static bool slice_namespace(struct egs_gprcr *c, const char *ns)
{
	char ws[EGS_NAME_MAX], path[400], esc[300], msg[256];
	json_t *obj = NULL;
	json_int_t now = mono_s(), last;
	long status;
	bool slice;

	if (egs_backend_k8s_slice_of(&c->k->base, ns, ws, sizeof(ws)))
		return true;
	last = json_integer_value(json_object_get(c->ns_checked, ns));
	if ((last && now - last < NS_RECHECK_S) || !egs_kube_escape(ns, esc, sizeof(esc)))
		return false;
	json_object_set_new(c->ns_checked, ns, json_integer(now));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", esc);
	if (egs_kube_call(c->k->kube, "GET", path, NULL, NULL, c->k->api_timeout_s, &status, &obj, msg, sizeof(msg)) !=
	    EGS_OK) {
		json_decref(obj);
		return false;
	}
	slice = *str_at(json_object_get(json_object_get(obj, "metadata"), "labels"), EGS_K8S_LABEL_SLICE) != '\0';
	if (slice) {
		EGS_LOG_INFO("namespace %s is a slice namespace the namespace cache did not show yet", ns);
		egs_kube_reflector_put(c->k->namespaces, obj);
	}
	json_decref(obj);
	return slice;
}

static void copy_cr(void *arg, const char *key, json_t *obj)
{
	(void)key;
	json_array_append_new(arg, json_deep_copy(obj));
}

static void round_once(struct egs_gprcr *c)
{
	json_t *links = fetch_links(c), *crs = json_array(), *obj, *seen = json_object(), *link;
	const char *uid;
	struct cr cr;
	size_t i;

	if (!links)
		goto out;
	egs_kube_reflector_foreach(c->crs, copy_cr, crs);
	json_array_foreach(crs, i, obj) {
		if (closing(c) || !cr_read(obj, &cr))
			continue;
		json_object_set_new(seen, cr.uid, json_true());
		/* A CR that has our finalizer is ours even if its namespace lost the slice label since. */
		if (cr.has_finalizer || slice_namespace(c, cr.ns))
			reconcile(c, &cr, links);
	}
	/* A GPR whose CR left the cluster without us (its finalizer removed by hand while we were away). */
	json_object_foreach(links, uid, link) {
		if (closing(c) || json_object_get(seen, uid) || !egs_kube_reflector_connected(c->crs))
			continue;
		char what[400];
		snprintf(what, sizeof(what), "%s/%s (uid %s)", str_at(link, "namespace"), str_at(link, "name"), uid);
		end_gpr(c, uid, what);
	}
out:
	json_decref(links);
	json_decref(crs);
	json_decref(seen);
}

/* Waits until the CR cache changed, interval_ms passed, or the controller closes. */
static void wait_round(struct egs_gprcr *c)
{
	struct timespec ts = egs_clock_after_ms(c->interval_ms);

	pthread_mutex_lock(&c->mu);
	while (!closing(c) && !c->dirty && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0)
		;
	c->dirty = false;
	pthread_mutex_unlock(&c->mu);
}

static void *gprcr_main(void *arg)
{
	struct egs_gprcr *c = arg;

	while (!closing(c)) {
		wait_round(c);
		if (!closing(c) && egs_kube_reflector_wait_synced(c->crs, 0))
			round_once(c);
	}
	return NULL;
}

enum egs_err egs_gprcr_start(const struct egs_gprcr_config *cfg, struct egs_gprcr **out, char *err, size_t errsz)
{
	struct egs_gprcr *c = egs_calloc(1, sizeof(*c));

	*out = NULL;
	c->k = (struct egs_k8s *)cfg->backend;
	c->interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 1000;
	c->refused = json_object();
	c->ns_checked = json_object();
	pthread_mutex_init(&c->mu, NULL);
	egs_clock_cond_init(&c->cv);
	c->egs = egs_client_new(cfg->server_url, cfg->token);
	if (!c->egs || (cfg->ca_file && egs_client_set_ca_file(c->egs, cfg->ca_file) != EGS_OK)) {
		snprintf(err, errsz, "gpuprovisioningrequests: --server or --ca-file is not usable");
		egs_gprcr_free(c);
		return EGS_ERR_INVALID;
	}
	egs_client_set_abort(c->egs, closing, c);
	c->crs = egs_kube_reflector_new(c->k->kube, CR_GROUP_PATH "/gpuprovisioningrequests", NULL, NULL, crs_changed, c);
	if (egs_kube_reflector_start(c->crs) != EGS_OK || pthread_create(&c->thread, NULL, gprcr_main, c) != 0) {
		snprintf(err, errsz, "gpuprovisioningrequests: cannot start the controller's threads");
		egs_gprcr_free(c);
		return EGS_ERR_IO;
	}
	c->started = true;
	*out = c;
	return EGS_OK;
}

void egs_gprcr_free(struct egs_gprcr *c)
{
	if (!c)
		return;
	egs_kube_reflector_stop(c->crs);
	atomic_store(&c->closing, true);
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (c->started)
		pthread_join(c->thread, NULL);
	egs_kube_reflector_free(c->crs);
	egs_client_free(c->egs);
	json_decref(c->refused);
	json_decref(c->ns_checked);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	egs_free(c);
}
