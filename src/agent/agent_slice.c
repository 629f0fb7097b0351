/*
 * agent_slice.c: slice access in the agent loop (docs/internals/agent-protocol.md section 5), for a
 * backend that has the slice operations (backend.h; the kubernetes backend):
 *   - `sliceAccess` actions: the backend sets up the slice's namespaces, ServiceAccount and
 *     RoleBindings and mints a token, which goes to egsd in POST /api/v1/agent/slice-access (or the
 *     failure, with its message);
 *   - `sliceRelease` actions: a namespace leaves a slice (the workspace was deleted, or the namespace or
 *     the cluster left it): the backend removes what it made there;
 *   - the slice report thread: every REPORT_MS it asks the backend which slice namespaces it set up and
 *     how many pods run in each, and sends that to POST /api/v1/agent/slice-namespaces when it changed,
 *     after each registration (egsd keeps it in memory only) and at least every RESEND_MS.  egsd derives
 *     the `sliceRelease` actions and the "namespace still runs pods" refusals from it.
 * After a release the action thread sends the report at once, so that the next poll does not carry the
 * same release again.  Tokens are never logged; the copies this file makes are wiped before freeing.
 */
#include "agent/agent_internal.h"

#include "agent/clock.h"
#include "agent/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPORT_MS 3000
#define RESEND_MS 30000
#define CALL_TIMEOUT_S 15
#define LATER_PAUSE_MS 2000
#define MIN_TTL_S 600 /* the least a TokenRequest takes (Kubernetes refuses less) */
#define MSG_MAX 380   /* egsd takes messages of at most 399 bytes */

static void wipe(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
}

/* The message egsd takes: at most MSG_MAX bytes, control characters turned into spaces. */
static void clean_msg(char *msg)
{
	if (strlen(msg) > MSG_MAX)
		msg[MSG_MAX] = '\0';
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/* ---- the report ---- */

/*
 * Sends the backend's slice namespaces to egsd through client c (borrowed; the calling thread's) when
 * they differ from the last report, a registration came since, RESEND_MS passed, or force.  Nothing is
 * sent while the backend cannot tell.
 */
static void send_report(struct egs_agent *a, struct egs_client *c, bool force)
{
	json_t *state = egs_backend_slice_state(a->be), *body;
	char *dump;
	uint64_t gen;
	long status = 0;
	bool same;

	if (!state)
		return;
	dump = json_dumps(state, JSON_COMPACT | JSON_SORT_KEYS);
	pthread_mutex_lock(&a->mu);
	gen = a->reg_gen;
	pthread_mutex_unlock(&a->mu);
	pthread_mutex_lock(&a->slice_mu);
	same = a->slice_last && strcmp(a->slice_last, dump) == 0 && a->slice_gen == gen &&
	       egs_clock_ms() - a->slice_at_ms < RESEND_MS;
	pthread_mutex_unlock(&a->slice_mu);
	if (same && !force)
		goto out;
	body = json_pack("{s:s, s:O}", "clusterName", a->cluster, "namespaces", state);
	if (egs_client_call(c, "POST", "/api/v1/agent/slice-namespaces", body, CALL_TIMEOUT_S, &status, NULL) == EGS_OK) {
		pthread_mutex_lock(&a->slice_mu);
		free(a->slice_last);
		a->slice_last = dump;
		dump = NULL;
		a->slice_gen = gen;
		a->slice_at_ms = egs_clock_ms();
		pthread_mutex_unlock(&a->slice_mu);
	} else if (!egs_agent_stopping(a)) {
		EGS_LOG_WARN("cannot report the slice namespaces (%s%ld: %s)", status ? "HTTP " : "", status,
			     egs_client_errmsg(c));
	}
	json_decref(body);
out:
	free(dump);
	json_decref(state);
}

static void *report_main(void *arg)
{
	struct egs_agent *a = arg;

	while (!egs_agent_stopping(a)) {
		pthread_mutex_lock(&a->mu);
		bool registered = a->registered;
		pthread_mutex_unlock(&a->mu);
		if (registered)
			send_report(a, a->slice_client, false);
		egs__agent_pause(a, REPORT_MS);
	}
	return NULL;
}

/* ---- the actions ---- */

/* Reads the strings of list (borrowed) into out; false when it is not a list of names. */
static bool names(json_t *list, struct egs_strlist *out)
{
	json_t *v;
	size_t i;

	if (!json_is_array(list))
		return false;
	json_array_foreach(list, i, v) {
		if (!json_string_length(v) || json_string_length(v) >= EGS_NAME_MAX)
			return false;
		egs_strlist_add(out, json_string_value(v));
	}
	return true;
}

/* Posts the result of a sliceAccess action: the token (wiped from the body after) or the failure. */
static void report_access(struct egs_agent *a, json_t *act, const struct egs_slice_req *req,
			  const struct egs_slice_token *tok, bool ok, char *msg)
{
	json_t *body = json_pack("{s:O, s:s, s:I, s:b}", "actionId", json_object_get(act, "actionId"), "workspace",
				 req->workspace, "generation", (json_int_t)req->generation, "ok", ok);
	long status = 0;

	if (ok) {
		json_t *ns = json_array();
		for (size_t i = 0; i < req->namespaces->n; i++)
			json_array_append_new(ns, json_string(req->namespaces->v[i]));
		json_object_set_new(body, "token", json_string(tok->token));
		json_object_set_new(body, "expiresAt", json_string(tok->expires_at));
		json_object_set_new(body, "serviceAccount", json_string(req->service_account));
		json_object_set_new(body, "namespaces", ns);
	} else {
		clean_msg(msg);
		json_object_set_new(body, "message", json_string(msg));
	}
	if (egs_client_call(a->act_client, "POST", "/api/v1/agent/slice-access", body, CALL_TIMEOUT_S, &status, NULL) !=
		    EGS_OK &&
	    !egs_agent_stopping(a))
		EGS_LOG_WARN("slice %s: cannot report the slice access (%s%ld: %s); egsd will ask again", req->workspace,
			     status ? "HTTP " : "", status, egs_client_errmsg(a->act_client));
	wipe((char *)json_string_value(json_object_get(body, "token"))); /* our own copy inside body */
	json_decref(body);
}

static void slice_access(struct egs_agent *a, json_t *act)
{
	struct egs_strlist ns = {0};
	struct egs_slice_token tok = {0};
	json_t *gen = json_object_get(act, "generation"), *ttl = json_object_get(act, "tokenTtlSeconds");
	struct egs_slice_req req = {
		.workspace = json_string_value(json_object_get(act, "workspace")),
		.namespaces = &ns,
		.service_account = json_string_value(json_object_get(act, "serviceAccount")),
		.generation = json_integer_value(gen),
		.ttl_s = json_is_integer(ttl) ? json_integer_value(ttl) : 0,
	};
	char msg[EGS__AGENT_MSG_MAX] = "";
	enum egs_err rc;

	if (!json_is_string(json_object_get(act, "actionId")) || !req.workspace || !req.service_account ||
	    !json_is_integer(gen) || req.generation < 1 || !names(json_object_get(act, "namespaces"), &ns)) {
		EGS_LOG_WARN("ignoring a malformed sliceAccess action");
		goto out;
	}
	if (req.ttl_s < MIN_TTL_S)
		req.ttl_s = MIN_TTL_S;
	if (ns.n == 0) {
		snprintf(msg, sizeof(msg), "workspace %s has no namespace on cluster %s: a ServiceAccount needs one "
			 "(add one with PUT /api/v1/slice-workspace addNamespaces)", req.workspace, a->cluster);
		rc = EGS_ERR_INVALID;
	} else {
		rc = egs_backend_slice_access(a->be, &req, &tok, msg, sizeof(msg));
	}
	if (rc == EGS_ERR_BUSY) {
		EGS_LOG_WARN("slice %s: cannot act now (%s); egsd asks again", req.workspace, msg);
		egs__agent_pause(a, LATER_PAUSE_MS);
		goto out;
	}
	egs_agent_log(rc == EGS_OK ? EGS_ALOG_INFO : EGS_ALOG_WARN, "slice %s: access generation %lld: %s",
		      req.workspace, (long long)req.generation, msg);
	report_access(a, act, &req, &tok, rc == EGS_OK, msg);
out:
	wipe(tok.token);
	free(tok.token);
	egs_strlist_cleanup(&ns);
}

static void slice_release(struct egs_agent *a, json_t *act)
{
	const char *ws = json_string_value(json_object_get(act, "workspace"));
	const char *ns = json_string_value(json_object_get(act, "namespace"));
	const char *sa = json_string_value(json_object_get(act, "serviceAccount"));
	char msg[EGS__AGENT_MSG_MAX] = "";
	enum egs_err rc;

	if (!ws || !*ws || !ns || !*ns || !sa) {
		EGS_LOG_WARN("ignoring a malformed sliceRelease action");
		return;
	}
	rc = egs_backend_slice_release(a->be, ws, ns, sa, msg, sizeof(msg));
	if (rc != EGS_OK) {
		/* egsd derives the release again from the next report: pause so that it is not a busy loop. */
		EGS_LOG_WARN("slice %s: cannot take namespace %s out (%s); egsd asks again", ws, ns, msg);
		egs__agent_pause(a, LATER_PAUSE_MS);
		return;
	}
	send_report(a, a->act_client, true);
}

bool egs__agent_slice_action(struct egs_agent *a, json_t *act)
{
	const char *type = json_string_value(json_object_get(act, "type"));

	if (!type || (strcmp(type, "sliceAccess") != 0 && strcmp(type, "sliceRelease") != 0))
		return false;
	if (!egs_backend_has_slices(a->be)) {
		EGS_LOG_WARN("ignoring a %s action: the %s backend does not set up slice access", type, a->be->ops->name);
		return true;
	}
	if (strcmp(type, "sliceAccess") == 0)
		slice_access(a, act);
	else
		slice_release(a, act);
	return true;
}

/* ---- lifecycle ---- */

static bool aborting(void *arg)
{
	return egs_agent_stopping(arg);
}

void egs__agent_slice_init(struct egs_agent *a, const char *server_url, const char *token, const char *ca_file)
{
	pthread_mutex_init(&a->slice_mu, NULL);
	if (egs_backend_has_slices(a->be)) {
		/* The same URL, token and CA file that the agent's other clients took already. */
		a->slice_client = egs_client_new(server_url, token);
		bool ok = a->slice_client && (!ca_file || egs_client_set_ca_file(a->slice_client, ca_file) == EGS_OK);
		EGS_ASSERT(ok);
	}
}

enum egs_err egs__agent_slice_start(struct egs_agent *a)
{
	if (!a->slice_client)
		return EGS_OK;
	egs_client_set_abort(a->slice_client, aborting, a);
	if (pthread_create(&a->slice_thread, NULL, report_main, a) != 0)
		return EGS_ERR_IO;
	a->slice_started = true;
	return EGS_OK;
}

void egs__agent_slice_cleanup(struct egs_agent *a)
{
	if (a->slice_started)
		pthread_join(a->slice_thread, NULL);
	a->slice_started = false;
	egs_client_free(a->slice_client);
	a->slice_client = NULL;
	free(a->slice_last);
	a->slice_last = NULL;
	pthread_mutex_destroy(&a->slice_mu);
}
