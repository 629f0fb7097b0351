/*
 * k8s_events.c: egsd's GPR events as core/v1 Events in the slice's namespaces (k8s_events.h).
 *
 * The cursor is egsd's event id: the first call asks where to start, later calls ask for what came
 * after the cursor.  An event is written in each namespace by create; 409 AlreadyExists (the same GPR,
 * reason and namespace before) reads the object and merge-patches count + 1, lastTimestamp and message.
 * A namespace that does not exist is skipped.  Failures are logged and the cursor still moves: events
 * are a courtesy copy, never a reason to stall (egsd keeps the truth).
 */
#include "agent/k8s_events.h"

#include "agent/clock.h"
#include "agent/k8s_internal.h"
#include "agent/log.h"
#include "core/util.h"

#include <egs/egs.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CALL_TIMEOUT_S 10

struct egs_k8s_gpr_events {
	struct egs_k8s *k; /* borrowed */
	struct egs_client *egsd;
	int poll_s;
	pthread_t thread;
	pthread_mutex_t mu; /* guards stop */
	pthread_cond_t cv;
	bool stop;
};

static const char *const reasons[][2] = {
	{ "Provisioned", "GPRProvisioned" },   { "Progress25", "GPRWindow25" },
	{ "Progress50", "GPRWindow50" },       { "Progress75", "GPRWindow75" },
	{ "ExitWarning", "GPRExitWarning" },   { "EarlyRelease", "GPREarlyRelease" },
	{ "Exit", "GPRExit" },                 { "Complete", "GPRReleased" },
	{ "NodeReplaced", "GPRNodeReplaced" }, { "NodeFailed", "GPRNodeFailed" },
	{ "PostExitCheckFailed", "GPRCheckFailed" }, { "ProvisioningFailed", "GPRProvisioningFailed" },
	{ "DetachFailed", "GPRDetachFailed" }, { "IdleWarning", "GPRIdleWarning" },
	{ "IdleTimeout", "GPRIdleTimeout" },
};

const char *egs_k8s_gpr_reason(const char *egs_reason)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(reasons); i++)
		if (!strcmp(reasons[i][0], egs_reason))
			return reasons[i][1];
	return NULL;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* A repeat: count + 1, lastTimestamp now, the new message. */
static void bump(struct egs_k8s *k, const char *path, const char *message, const char *now)
{
	json_t *old = NULL, *patch;
	char err[256];
	long status;

	if (egs_kube_call(k->kube, "GET", path, NULL, NULL, CALL_TIMEOUT_S, &status, &old, err, sizeof(err)) != EGS_OK) {
		EGS_LOG_WARN("event %s: %s", path, err);
		return;
	}
	json_int_t count = json_integer_value(json_object_get(old, "count"));
	patch = json_pack("{s:{s:O}, s:I, s:s, s:s}", "metadata", "resourceVersion",
			  json_object_get(json_object_get(old, "metadata"), "resourceVersion"), "count",
			  (json_int_t)(count > 0 ? count + 1 : 2), "lastTimestamp", now, "message", message);
	if (patch && egs_kube_call(k->kube, "PATCH", path, "application/merge-patch+json", patch, CALL_TIMEOUT_S, &status,
				   NULL, err, sizeof(err)) != EGS_OK)
		EGS_LOG_WARN("event %s: %s", path, err);
	json_decref(patch);
	json_decref(old);
}

/* Writes egsd event ev into namespace ns. */
static void write_one(struct egs_k8s *k, json_t *ev, const char *ns, const char *reason)
{
	char name[EGS_ID_MAX + EGS_NAME_MAX + 2], esc_ns[200], esc_name[300], path[600], now[32], err[256];
	const char *gpr = str(ev, "gprId");
	long status;
	json_t *obj;
	enum egs_err rc;

	snprintf(name, sizeof(name), "%s.%s", gpr, reason);
	for (char *p = name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (!egs_kube_escape(ns, esc_ns, sizeof(esc_ns)) || !egs_kube_escape(name, esc_name, sizeof(esc_name)))
		return;
	egs_time_format((int64_t)time(NULL), now, sizeof(now));
	obj = egs_k8s_event(ns, gpr, reason, str(ev, "message"), strcmp(str(ev, "type"), "Warning") ? "Normal" : "Warning",
			    now, 0);
	json_object_set_new(json_object_get(obj, "metadata"), "name", json_string(name));
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", esc_ns);
	rc = egs_kube_call(k->kube, "POST", path, NULL, obj, CALL_TIMEOUT_S, &status, NULL, err, sizeof(err));
	if (rc == EGS_ERR_CONFLICT) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events/%s", esc_ns, esc_name);
		bump(k, path, str(ev, "message"), now);
	} else if (rc == EGS_ERR_NOT_FOUND) {
		EGS_LOG_DEBUG("event %s: namespace %s does not exist here", name, ns);
	} else if (rc != EGS_OK) {
		EGS_LOG_WARN("event %s in namespace %s: %s", reason, ns, err);
	}
	json_decref(obj);
}

static void mirror(struct egs_k8s_gpr_events *e, json_t *ev)
{
	const char *reason = egs_k8s_gpr_reason(str(ev, "reason"));
	json_t *ns;
	size_t i;

	if (!reason || !str(ev, "gprId")[0])
		return;
	json_array_foreach(json_object_get(ev, "namespaces"), i, ns)
		if (json_is_string(ns))
			write_one(e->k, ev, json_string_value(ns), reason);
}

/* One poll: *cursor < 0 asks where to start.  Returns false when egsd did not answer usefully. */
static bool poll_once(struct egs_k8s_gpr_events *e, int64_t *cursor)
{
	char path[96];
	json_t *data = NULL, *ev;
	long status = 0;
	size_t i;

	if (*cursor < 0)
		snprintf(path, sizeof(path), "/api/v1/agent/events");
	else
		snprintf(path, sizeof(path), "/api/v1/agent/events?after=%lld&limit=100", (long long)*cursor);
	if (egs_client_call(e->egsd, "GET", path, NULL, CALL_TIMEOUT_S, &status, &data) != EGS_OK) {
		EGS_LOG_DEBUG("GPR events from egsd: %s%s", status == 404 ? "egsd does not serve them: " : "",
			      egs_client_errmsg(e->egsd));
		json_decref(data);
		return false;
	}
	json_array_foreach(json_object_get(data, "events"), i, ev)
		mirror(e, ev);
	if (json_is_integer(json_object_get(data, "last")))
		*cursor = json_integer_value(json_object_get(data, "last"));
	json_decref(data);
	return true;
}

static void *events_main(void *arg)
{
	struct egs_k8s_gpr_events *e = arg;
	int64_t cursor = -1;

	for (;;) {
		poll_once(e, &cursor);
		struct timespec until = egs_clock_after_ms((int64_t)e->poll_s * 1000);
		pthread_mutex_lock(&e->mu);
		while (!e->stop && pthread_cond_timedwait(&e->cv, &e->mu, &until) == 0)
			;
		bool stop = e->stop;
		pthread_mutex_unlock(&e->mu);
		if (stop)
			return NULL;
	}
}

static bool aborted(void *arg)
{
	struct egs_k8s_gpr_events *e = arg;
	pthread_mutex_lock(&e->mu);
	bool stop = e->stop;
	pthread_mutex_unlock(&e->mu);
	return stop;
}

struct egs_k8s_gpr_events *egs_k8s_gpr_events_new(struct egs_backend *b, const char *server_url, const char *token,
						  const char *ca_file, int poll_s)
{
	struct egs_k8s_gpr_events *e = egs_calloc(1, sizeof(*e));

	e->k = (struct egs_k8s *)b;
	e->poll_s = poll_s > 0 ? poll_s : 2;
	e->egsd = egs_client_new(server_url, token);
	if (!e->egsd || (ca_file && egs_client_set_ca_file(e->egsd, ca_file) != EGS_OK)) {
		egs_client_free(e->egsd);
		egs_free(e);
		return NULL;
	}
	pthread_mutex_init(&e->mu, NULL);
	egs_clock_cond_init(&e->cv);
	egs_client_set_abort(e->egsd, aborted, e);
	if (pthread_create(&e->thread, NULL, events_main, e) != 0) {
		egs_client_free(e->egsd);
		pthread_mutex_destroy(&e->mu);
		pthread_cond_destroy(&e->cv);
		egs_free(e);
		return NULL;
	}
	return e;
}

void egs_k8s_gpr_events_free(struct egs_k8s_gpr_events *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->thread, NULL);
	egs_client_free(e->egsd);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	egs_free(e);
}
