/*
 * k8s_slice.c: slice access in the kubernetes backend (backend.h's slice operations;
 * docs/internals/agent-protocol.md section 5): the slice's namespaces, its ServiceAccount, the
 * RoleBindings to the ClusterRole egs-slice-user, the TokenRequest, their removal, and the report of
 * the slice namespaces with their running pods.
 *
 * Invariants:
 *   - the agent removes only what it made: a namespace it created carries
 *     egs.kubeslice.io/created-by=egs-agent and is deleted at release; a namespace that existed and that
 *     it labelled carries egs.kubeslice.io/adopted-by=egs-agent and only loses the slice's label, its
 *     RoleBinding egs-slice-user and the slice's ServiceAccount;
 *   - a namespace labelled for another slice is never touched (the action fails, saying whose it is);
 *   - a ServiceAccount whose egs.kubeslice.io/generation differs from the action's is deleted and made
 *     again: bound tokens name their ServiceAccount's UID, so every token minted before dies with it;
 *   - tokens are never logged and never put in a message.
 * The report counts pods from the backend's pod cache (k8s_pods.c keeps every pod's phase): no API call.
 * Every step reads the object from the API server (not the cache) and writes only the difference, so a
 * repeated action is harmless.
 */
#include "agent/k8s_internal.h"

#include "agent/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLICE_ROLE "egs-slice-user"
#define RBAC_PATH "/apis/rbac.authorization.k8s.io/v1/namespaces"
#define STATE_MAX 1024 /* slice namespaces reported at most */

static struct egs_k8s *k8s_of(struct egs_backend *b)
{
	return (struct egs_k8s *)b;
}

/* One API call under the backend's timeout; *ans (may be NULL) gets the answer (caller decrefs). */
static enum egs_err call(struct egs_k8s *k, const char *method, const char *path, const char *ctype, json_t *body,
			 json_t **ans, char *msg, size_t msgsz)
{
	long status;
	json_t *got = NULL;
	enum egs_err rc = egs_kube_call(k->kube, method, path, ctype, body, k->api_timeout_s, &status, &got, msg, msgsz);

	if (ans)
		*ans = got;
	else
		json_decref(got);
	return rc;
}

/* DELETE path; a 404 counts as done. */
static enum egs_err delete_gone_ok(struct egs_k8s *k, const char *path, char *msg, size_t msgsz)
{
	enum egs_err rc = call(k, "DELETE", path, NULL, NULL, NULL, msg, msgsz);
	return rc == EGS_ERR_NOT_FOUND ? EGS_OK : rc;
}

static const char *label(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

static bool is_agent(const char *v)
{
	return v && strcmp(v, EGS_K8S_AGENT) == 0;
}

/* Escapes a name for a path segment into esc (at least 256 bytes); false (msg set) when it cannot. */
static bool esc_name(const char *name, char *esc, size_t escsz, char *msg, size_t msgsz)
{
	if (egs_kube_escape(name, esc, escsz))
		return true;
	snprintf(msg, msgsz, "name too long: %.64s", name);
	return false;
}

/* ---- namespaces ---- */

/* Labels an existing namespace (obj, borrowed) for workspace when it is not yet, marking it adopted
 * unless the agent created it.  EGS_ERR_CONFLICT when another slice has it. */
static enum egs_err claim_namespace(struct egs_k8s *k, const char *ns, const char *path, json_t *obj,
				    const char *ws, char *msg, size_t msgsz)
{
	const char *have = label(obj, EGS_K8S_LABEL_SLICE);
	bool marked = is_agent(label(obj, EGS_K8S_LABEL_CREATED_BY)) || is_agent(label(obj, EGS_K8S_LABEL_ADOPTED_BY));
	json_t *ans = NULL;
	enum egs_err rc;

	if (have && *have && strcmp(have, ws) != 0) {
		snprintf(msg, msgsz, "namespace %s belongs to slice %s (label %s=%s); it cannot join slice %s", ns, have,
			 EGS_K8S_LABEL_SLICE, have, ws);
		return EGS_ERR_CONFLICT;
	}
	if (json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")) {
		snprintf(msg, msgsz, "namespace %s is being deleted; it can join slice %s once it is gone", ns, ws);
		return EGS_ERR_CONFLICT;
	}
	if (have && marked)
		return EGS_OK;
	json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", EGS_K8S_LABEL_SLICE, ws);
	if (!marked)
		json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "labels"), EGS_K8S_LABEL_ADOPTED_BY,
				    json_string(EGS_K8S_AGENT));
	rc = call(k, "PATCH", path, "application/merge-patch+json", patch, &ans, msg, msgsz);
	if (rc == EGS_OK) {
		EGS_LOG_INFO("namespace %s joined slice %s", ns, ws);
		egs_kube_reflector_put(k->namespaces, ans);
	}
	json_decref(patch);
	json_decref(ans);
	return rc;
}

/* Makes namespace ns exist labelled for workspace ws: created (and marked so) when missing, claimed
 * when it exists. */
static enum egs_err ensure_namespace(struct egs_k8s *k, const char *ns, const char *ws, char *msg, size_t msgsz)
{
	char esc[300], path[400];
	json_t *obj = NULL;
	enum egs_err rc = EGS_ERR_CONFLICT;

	if (!esc_name(ns, esc, sizeof(esc), msg, msgsz))
		return EGS_ERR_INVALID;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", esc);
	for (int i = 0; i < 2 && rc == EGS_ERR_CONFLICT; i++) { /* a 409 at create: someone made it meanwhile */
		rc = call(k, "GET", path, NULL, NULL, &obj, msg, msgsz);
		if (rc == EGS_OK) {
			rc = claim_namespace(k, ns, path, obj, ws, msg, msgsz);
			break;
		}
		if (rc != EGS_ERR_NOT_FOUND)
			break;
		json_decref(obj);
		json_t *body = egs_k8s_namespace(ns, ws);
		obj = NULL;
		rc = call(k, "POST", "/api/v1/namespaces", NULL, body, &obj, msg, msgsz);
		json_decref(body);
		if (rc == EGS_OK) {
			EGS_LOG_INFO("created namespace %s for slice %s", ns, ws);
			egs_kube_reflector_put(k->namespaces, obj);
		}
		json_decref(obj);
		obj = NULL;
	}
	json_decref(obj);
	return rc;
}

/* ---- the ServiceAccount ---- */

static json_t *service_account(const char *ns, const char *name, const char *ws, int64_t gen)
{
	char g[24];
	snprintf(g, sizeof(g), "%lld", (long long)gen);
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}, s:{s:s}}}", "apiVersion", "v1", "kind", "ServiceAccount",
			 "metadata", "name", name, "namespace", ns, "labels", EGS_K8S_LABEL_SLICE, ws,
			 EGS_K8S_LABEL_CREATED_BY, EGS_K8S_AGENT, "annotations", EGS_K8S_ANN_GENERATION, g);
}

/* Makes the ServiceAccount req->service_account exist in ns with req->generation, recreating one of
 * another generation (which kills every token it had). */
static enum egs_err ensure_sa(struct egs_k8s *k, const struct egs_slice_req *req, const char *ns, char *msg,
			      size_t msgsz)
{
	char ens[300], esa[300], coll[700], path[1000];
	json_t *obj = NULL, *body = NULL;
	enum egs_err rc;

	if (!esc_name(ns, ens, sizeof(ens), msg, msgsz) || !esc_name(req->service_account, esa, sizeof(esa), msg, msgsz))
		return EGS_ERR_INVALID;
	snprintf(coll, sizeof(coll), "/api/v1/namespaces/%s/serviceaccounts", ens);
	snprintf(path, sizeof(path), "%s/%s", coll, esa);
	rc = call(k, "GET", path, NULL, NULL, &obj, msg, msgsz);
	if (rc == EGS_OK) {
		const char *g = json_string_value(
			json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"), EGS_K8S_ANN_GENERATION));
		int64_t have = 0;
		if (g && egs_int_parse(g, 1, INT64_MAX, &have) && have == req->generation)
			goto out;
		/* Another generation (or none: not ours to keep): the tokens it had must stop working. */
		rc = delete_gone_ok(k, path, msg, msgsz);
		if (rc != EGS_OK)
			goto out;
		EGS_LOG_INFO("slice %s: deleted ServiceAccount %s/%s of generation %s", req->workspace, ns,
			     req->service_account, g ? g : "(none)");
	} else if (rc != EGS_ERR_NOT_FOUND) {
		goto out;
	}
	body = service_account(ns, req->service_account, req->workspace, req->generation);
	rc = call(k, "POST", coll, NULL, body, NULL, msg, msgsz);
	if (rc == EGS_OK)
		EGS_LOG_INFO("slice %s: created ServiceAccount %s/%s (generation %lld)", req->workspace, ns,
			     req->service_account, (long long)req->generation);
out:
	json_decref(obj);
	json_decref(body);
	return rc;
}

/* ---- RoleBindings ---- */

/* The RoleBinding egs-slice-user in ns from the ClusterRole egs-slice-user to the ServiceAccount sa
 * in sa_ns. */
static enum egs_err ensure_binding(struct egs_k8s *k, const char *ns, const char *ws, const char *sa,
				   const char *sa_ns, char *msg, size_t msgsz)
{
	char ens[300], coll[600], path[700];
	json_t *subjects = json_pack("[{s:s, s:s, s:s}]", "kind", "ServiceAccount", "name", sa, "namespace", sa_ns);
	json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}, s:{s:s, s:s, s:s}, s:O}", "apiVersion",
				 "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata", "name", SLICE_ROLE,
				 "namespace", ns, "labels", EGS_K8S_LABEL_SLICE, ws, EGS_K8S_LABEL_CREATED_BY, EGS_K8S_AGENT,
				 "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind", "ClusterRole", "name", SLICE_ROLE,
				 "subjects", subjects);
	json_t *patch = json_pack("{s:O}", "subjects", subjects);
	enum egs_err rc = EGS_ERR_INVALID;

	if (!esc_name(ns, ens, sizeof(ens), msg, msgsz))
		goto out;
	snprintf(coll, sizeof(coll), RBAC_PATH "/%s/rolebindings", ens);
	snprintf(path, sizeof(path), "%s/" SLICE_ROLE, coll);
	rc = call(k, "POST", coll, NULL, body, NULL, msg, msgsz);
	if (rc == EGS_ERR_CONFLICT) /* there already: make sure it names this ServiceAccount */
		rc = call(k, "PATCH", path, "application/merge-patch+json", patch, NULL, msg, msgsz);
out:
	json_decref(subjects);
	json_decref(body);
	json_decref(patch);
	return rc;
}

struct stale {
	const char *ws;
	const struct egs_strlist *keep;
	struct egs_strlist out;
};

static void collect_stale(void *arg, const char *key, json_t *obj)
{
	struct stale *s = arg;
	const char *have = label(obj, EGS_K8S_LABEL_SLICE);
	if (have && strcmp(have, s->ws) == 0 && !egs_strlist_has(s->keep, key))
		egs_strlist_add(&s->out, key);
}

/* Deletes the RoleBinding egs-slice-user of the namespaces labelled for ws that req no longer lists. */
static enum egs_err drop_stale_bindings(struct egs_k8s *k, const struct egs_slice_req *req, char *msg, size_t msgsz)
{
	struct stale s = {.ws = req->workspace, .keep = req->namespaces};
	char esc[300], path[600];
	enum egs_err rc = EGS_OK;

	egs_kube_reflector_foreach(k->namespaces, collect_stale, &s);
	for (size_t i = 0; i < s.out.n && rc == EGS_OK; i++) {
		if (!egs_kube_escape(s.out.v[i], esc, sizeof(esc)))
			continue;
		snprintf(path, sizeof(path), RBAC_PATH "/%s/rolebindings/" SLICE_ROLE, esc);
		rc = delete_gone_ok(k, path, msg, msgsz);
	}
	egs_strlist_cleanup(&s.out);
	return rc;
}

/* ---- the token ---- */

static enum egs_err mint(struct egs_k8s *k, const struct egs_slice_req *req, const char *ns,
			 struct egs_slice_token *tok, char *msg, size_t msgsz)
{
	char ens[300], esa[300], path[800];
	json_t *body = json_pack("{s:s, s:s, s:{s:I}}", "apiVersion", "authentication.k8s.io/v1", "kind", "TokenRequest",
				 "spec", "expirationSeconds", (json_int_t)req->ttl_s);
	json_t *ans = NULL;
	enum egs_err rc = EGS_ERR_INVALID;

	if (!esc_name(ns, ens, sizeof(ens), msg, msgsz) || !esc_name(req->service_account, esa, sizeof(esa), msg, msgsz))
		goto out;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/serviceaccounts/%s/token", ens, esa);
	rc = call(k, "POST", path, NULL, body, &ans, msg, msgsz);
	if (rc != EGS_OK)
		goto out;
	json_t *st = json_object_get(ans, "status");
	const char *t = json_string_value(json_object_get(st, "token"));
	const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
	if (!t || !*t || !exp || !egs_strlcpy(tok->expires_at, exp, sizeof(tok->expires_at))) {
		snprintf(msg, msgsz, "the TokenRequest of ServiceAccount %s/%s answered without a token or expiry", ns,
			 req->service_account);
		rc = EGS_ERR_IO;
		goto out;
	}
	tok->token = egs_strdup(t);
out:
	json_decref(body);
	json_decref(ans);
	return rc;
}

enum egs_err egs__k8s_slice_access(struct egs_backend *b, const struct egs_slice_req *req,
				   struct egs_slice_token *tok, char *msg, size_t msgsz)
{
	struct egs_k8s *k = k8s_of(b);
	const char *first = req->namespaces->v[0];
	enum egs_err rc = EGS_OK;

	for (size_t i = 0; i < req->namespaces->n && rc == EGS_OK; i++)
		rc = ensure_namespace(k, req->namespaces->v[i], req->workspace, msg, msgsz);
	if (rc == EGS_OK)
		rc = ensure_sa(k, req, first, msg, msgsz);
	for (size_t i = 0; i < req->namespaces->n && rc == EGS_OK; i++)
		rc = ensure_binding(k, req->namespaces->v[i], req->workspace, req->service_account, first, msg, msgsz);
	if (rc == EGS_OK)
		rc = drop_stale_bindings(k, req, msg, msgsz);
	if (rc == EGS_OK)
		rc = mint(k, req, first, tok, msg, msgsz);
	if (rc == EGS_OK)
		snprintf(msg, msgsz, "ServiceAccount %s/%s bound in %zu namespaces, token until %s", first,
			 req->service_account, req->namespaces->n, tok->expires_at);
	return egs__k8s_later(k, rc, msg, msgsz);
}

/* ---- release ---- */

/* Unlabels a namespace the agent did not create: its RoleBinding and the slice's ServiceAccount go,
 * the namespace and everything else in it stay. */
static enum egs_err unclaim(struct egs_k8s *k, const char *ns, const char *esc, const char *sa, char *msg,
			    size_t msgsz)
{
	char path[900], esa[300];
	json_t *patch = NULL, *ans = NULL;
	enum egs_err rc;

	snprintf(path, sizeof(path), RBAC_PATH "/%s/rolebindings/" SLICE_ROLE, esc);
	rc = delete_gone_ok(k, path, msg, msgsz);
	if (rc == EGS_OK && esc_name(sa, esa, sizeof(esa), msg, msgsz)) {
		snprintf(path, sizeof(path), "/api/v1/namespaces/%s/serviceaccounts/%s", esc, esa);
		rc = delete_gone_ok(k, path, msg, msgsz);
	}
	if (rc != EGS_OK)
		return rc;
	patch = json_pack("{s:{s:{s:n, s:n}}}", "metadata", "labels", EGS_K8S_LABEL_SLICE, EGS_K8S_LABEL_ADOPTED_BY);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", esc);
	rc = call(k, "PATCH", path, "application/merge-patch+json", patch, &ans, msg, msgsz);
	if (rc == EGS_OK)
		egs_kube_reflector_put(k->namespaces, ans);
	json_decref(patch);
	json_decref(ans);
	if (rc == EGS_OK)
		snprintf(msg, msgsz, "namespace %s left the slice (kept: it existed before)", ns);
	return rc;
}

enum egs_err egs__k8s_slice_release(struct egs_backend *b, const char *ws, const char *ns, const char *sa,
				    char *msg, size_t msgsz)
{
	struct egs_k8s *k = k8s_of(b);
	char esc[300], path[400];
	json_t *obj = NULL;
	const char *have;
	enum egs_err rc;

	if (!esc_name(ns, esc, sizeof(esc), msg, msgsz))
		return EGS_ERR_INVALID;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", esc);
	rc = call(k, "GET", path, NULL, NULL, &obj, msg, msgsz);
	if (rc == EGS_ERR_NOT_FOUND) {
		snprintf(msg, msgsz, "namespace %s is gone", ns);
		rc = EGS_OK;
		goto out;
	}
	if (rc != EGS_OK)
		goto out;
	have = label(obj, EGS_K8S_LABEL_SLICE);
	if (!have || strcmp(have, ws) != 0 || json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")) {
		snprintf(msg, msgsz, "namespace %s is no longer slice %s's", ns, ws);
		goto out;
	}
	if (is_agent(label(obj, EGS_K8S_LABEL_CREATED_BY))) {
		json_t *ans = NULL;
		rc = call(k, "DELETE", path, NULL, NULL, &ans, msg, msgsz);
		if (rc == EGS_OK && json_object_get(json_object_get(ans, "metadata"), "deletionTimestamp"))
			egs_kube_reflector_put(k->namespaces, ans); /* Terminating: left out of the next report */
		json_decref(ans);
		if (rc == EGS_ERR_NOT_FOUND)
			rc = EGS_OK;
		if (rc == EGS_OK)
			snprintf(msg, msgsz, "deleted namespace %s (the agent created it for slice %s)", ns, ws);
	} else {
		rc = unclaim(k, ns, esc, sa, msg, msgsz);
	}
	if (rc == EGS_OK)
		EGS_LOG_INFO("slice %s: %s", ws, msg);
out:
	json_decref(obj);
	return egs__k8s_later(k, rc, msg, msgsz);
}

/* ---- the report ---- */

static void collect_mine(void *arg, const char *key, json_t *obj)
{
	json_t *out = arg;
	const char *ws = label(obj, EGS_K8S_LABEL_SLICE);
	bool created = is_agent(label(obj, EGS_K8S_LABEL_CREATED_BY));

	if (!ws || !*ws || json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp") ||
	    !(created || is_agent(label(obj, EGS_K8S_LABEL_ADOPTED_BY))) || json_array_size(out) >= STATE_MAX)
		return;
	json_array_append_new(out, json_pack("{s:s, s:s, s:b, s:i}", "name", key, "workspace", ws, "createdByAgent",
					     created, "runningPods", 0));
}

/* Counts a pod (obj) that has not finished (Pending, Running, or no phase yet; Terminating ones still
 * run) in the runningPods of its namespace's entry, if the report (arg: name -> entry) has one. */
static void count_pod(void *arg, const char *key, json_t *obj)
{
	json_t *by_ns = arg, *e;
	const char *ns = json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
	const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));

	(void)key;
	if (!ns || !(e = json_object_get(by_ns, ns)) || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
		return;
	json_object_set_new(e, "runningPods", json_integer(json_integer_value(json_object_get(e, "runningPods")) + 1));
}

json_t *egs__k8s_slice_state(struct egs_backend *b)
{
	struct egs_k8s *k = k8s_of(b);
	json_t *out, *by_ns, *v;
	size_t i;

	if (!egs_kube_reflector_wait_synced(k->namespaces, 0) || !egs_kube_reflector_wait_synced(k->pods, 0))
		return NULL;
	out = json_array();
	by_ns = json_object();
	egs_kube_reflector_foreach(k->namespaces, collect_mine, out);
	json_array_foreach(out, i, v)
		json_object_set(by_ns, json_string_value(json_object_get(v, "name")), v); /* the same objects */
	egs_kube_reflector_foreach(k->pods, count_pod, by_ns);
	json_decref(by_ns);
	return out;
}
