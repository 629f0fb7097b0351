/*
 * api_policy.c: workspace policies and the global limits (docs/policies.md), and their enforcement
 * when a GPR is created or changed.
 *
 *   PUT    /api/v1/slice-workspace/policy   {workspaceName, ...policy}  admin of the workspace's project
 *   GET    /api/v1/slice-workspace/policy?workspaceName=W              admin, owners and viewers of W
 *   DELETE /api/v1/slice-workspace/policy   {workspaceName}             admin of the workspace's project
 *   GET    /api/v1/settings/policy                                     every role but agents
 *   PUT    /api/v1/settings/policy          {...policy}                admin of every project
 *
 * PUT replaces the whole policy (members left out are unset), so applying the same body twice
 * changes nothing; a refused body changes nothing either.  A workspace's policy is stored in its
 * row (canonical JSON, column `policy`, migration 4) and goes with the workspace; the global one in
 * the store's meta table.  The global hard maxNodesPerGpr defaults to egsd --max-nodes-per-gpr.
 *
 * Policies are the workspace's, not the caller's: an admin's own GPR in a workspace obeys it too
 * (and the admin may approve it at once).
 */
#include "server/server.h"

#include "core/gpr.h"
#include "core/policy.h"
#include "server/policy_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GLOBAL_KEY "policy.global"
#define DEFAULT_MAX_NODES 64

#define POLICY_MEMBERS                                                                                            \
	"maxGPRs", "maxExitDurationPerGPR", "priorityRange", "gpuShapes", "maxGPUPerGpr", "maxMemoryPerGpr",       \
		"concurrentGpuQuota", "maxNodesPerGpr", "enableAutoEviction", "requeueOnFailure", "softLimits"

static const char *const ws_members[] = { "workspaceName", POLICY_MEMBERS, NULL };
static const char *const global_members[] = { POLICY_MEMBERS, NULL };
static const char *const ws_skip[] = { "workspaceName", NULL };

/* ---- the global policy ---- */

/* The admin's global policy plus the --max-nodes-per-gpr default where it sets no hard maxNodesPerGpr. */
static void with_default(struct egs_server *srv, struct egs_policy *p)
{
	if (p->hard.set & (1u << EGS_LIMIT_NODES))
		return;
	p->hard.set |= 1u << EGS_LIMIT_NODES;
	p->hard.max[EGS_LIMIT_NODES] = srv->max_nodes_per_gpr;
}

/* Parses stored policy text; false (with a log line naming what) when it is not a valid policy. */
static bool parse_stored(struct egs_server *srv, const char *what, const char *text, struct egs_policy *p)
{
	char field[96], why[400];
	json_error_t jerr;
	json_t *o = json_loads(text, 0, &jerr);
	bool ok = o && egs_policy_parse(o, NULL, p, field, sizeof(field), why, sizeof(why));
	if (!ok)
		fprintf(srv->log, "level=fatal msg=\"stored policy of %s is unreadable: %s\"\n", what,
			o ? why : jerr.text);
	json_decref(o);
	return ok;
}

enum egs_err egs_policy_start(struct egs_server *srv)
{
	char *text = NULL;
	enum egs_err err;
	if (!srv->max_nodes_per_gpr)
		srv->max_nodes_per_gpr = DEFAULT_MAX_NODES;
	srv->policy_global = egs_policy_new();
	if ((err = egs_store_meta_get(srv->store, GLOBAL_KEY, &text)))
		return err;
	bool ok = !text || parse_stored(srv, "the whole pool", text, srv->policy_global);
	free(text);
	if (!ok)
		return EGS_ERR_STORE;
	with_default(srv, srv->policy_global);
	return egs_policy_load_workspaces(srv);
}

enum egs_err egs_policy_load_workspaces(struct egs_server *srv)
{
	char what[EGS_NAME_MAX + 16];
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.workspaces, &i, NULL, &v);) {
		struct egs_workspace *w = v;
		if (!w->policy_json || w->policy)
			continue;
		w->policy = egs_policy_new();
		snprintf(what, sizeof(what), "workspace %s", w->name);
		if (!parse_stored(srv, what, w->policy_json, w->policy))
			return EGS_ERR_STORE;
	}
	return EGS_OK;
}

/* ---- enforcement ---- */

/* The limits that read the fields an update changed (old is the GPR, g its edited copy). */
static uint32_t changed_limits(const struct egs_gpr *g, const struct egs_gpr *old)
{
	uint32_t m = 0;
	if (g->priority != old->priority)
		m |= 1u << EGS_LIMIT_PRIORITY;
	if (g->exit_duration_s != old->exit_duration_s)
		m |= 1u << EGS_LIMIT_EXIT_DURATION;
	if (g->gpus_per_node != old->gpus_per_node || g->node_count != old->node_count)
		m |= 1u << EGS_LIMIT_GPUS | 1u << EGS_LIMIT_QUOTA | 1u << EGS_LIMIT_NODES | 1u << EGS_LIMIT_MEMORY |
		     1u << EGS_LIMIT_GPU_SHAPES;
	if (strcmp(g->gpu_shape, old->gpu_shape) || strcmp(g->instance_type, old->instance_type) ||
	    strcmp(g->cluster, old->cluster) || g->memory_mib != old->memory_mib)
		m |= 1u << EGS_LIMIT_GPU_SHAPES | 1u << EGS_LIMIT_MEMORY;
	return m;
}

/* enableEviction and requeueOnFailure the request leaves unset take the policy's default. */
static void apply_defaults(struct egs_req *r, struct egs_gpr *g, const struct egs_policy *wp,
			   const struct egs_policy *gp)
{
	static const struct {
		const char *field;
		uint32_t bit;
	} flags[] = { { "enableEviction", EGS_GPRF_EVICTION }, { "requeueOnFailure", EGS_GPRF_REQUEUE } };
	for (size_t i = 0; i < EGS_ARRAY_LEN(flags); i++) {
		int ws_def = wp ? (i ? wp->requeue : wp->auto_eviction) : -1;
		int def = ws_def >= 0 ? ws_def : i ? gp->requeue : gp->auto_eviction;
		if (def < 0)
			continue; /* no default: no lookup of the body (~190 instructions each) */
		json_t *given = json_object_get(r->body, flags[i].field);
		if (given && !json_is_null(given))
			continue;
		g->flags = def ? g->flags | flags[i].bit : g->flags & ~flags[i].bit;
	}
}

/* Measures g (self: the GPR of the state it stands for, or NULL) against the limits in mask that the
 * workspace's or the global policy sets, into *res; returns the verdict (OK when none is set). */
static enum egs_policy_verdict verdict(struct egs_server *srv, const struct egs_gpr *g, const struct egs_gpr *self,
				       uint32_t mask, struct egs_policy_result *res)
{
	const struct egs_workspace *ws = egs_state_workspace(&srv->st, g->workspace);
	const struct egs_policy *wp = ws ? ws->policy : NULL, *gp = srv->policy_global;
	uint32_t need = mask & ((wp ? egs_policy_limits_set(wp) : 0) | egs_policy_limits_set(gp));
	if (!need)
		return res->verdict = EGS_POLICY_OK;
	struct egs_policy_ask a;
	egs_policy_measure(&srv->st, g, ws, self, need, &a);
	egs_policy_check(wp, gp, &a, need, res);
	egs_policy_ask_cleanup(&a);
	return res->verdict;
}

bool egs_policy_admit(struct egs_req *r, struct egs_gpr *g, const struct egs_gpr *old)
{
	struct egs_server *srv = r->srv;
	struct egs_policy_result res;
	if (!old) {
		const struct egs_workspace *ws = egs_state_workspace(&srv->st, g->workspace);
		apply_defaults(r, g, ws ? ws->policy : NULL, srv->policy_global);
	}
	switch (verdict(srv, g, old, old ? changed_limits(g, old) : EGS_LIMIT_ALL, &res)) {
	case EGS_POLICY_HARD:
		egs_reply_err(r, EGS_ERR_INVALID, "POLICY_LIMIT_EXCEEDED", res.field, "%s", res.message);
		return false;
	case EGS_POLICY_SOFT:
		free(g->pending_reason);
		g->pending_reason = egs_strdup(res.message);
		return true;
	default:
		return true;
	}
}

bool egs_policy_approvable(struct egs_req *r, struct egs_gpr *g)
{
	struct egs_policy_result res;
	if (g->state != EGS_GPR_PENDING || verdict(r->srv, g, g, EGS_LIMIT_ALL, &res) != EGS_POLICY_HARD)
		return true; /* not Pending: egs_gpr_approve says so */
	egs_reply_err(r, EGS_ERR_INVALID, "POLICY_LIMIT_EXCEEDED", res.field,
		      "GPR %s cannot be approved: %s (the policy changed since it was created)", g->id, res.message);
	return false;
}

/* ---- workspace policy routes ---- */

/* The GET form: {workspaceName, ...what the policy sets}. */
static json_t *ws_view(const struct egs_workspace *w)
{
	json_t *o = w->policy ? egs_policy_json(w->policy) : json_object();
	json_object_set_new(o, "workspaceName", json_string(w->name));
	return o;
}

/* Replaces w's policy with p (takes ownership; NULL or empty clears it) and records the change. */
static void set_ws_policy(struct egs_req *r, struct egs_workspace *w, struct egs_policy *p, const char *reason)
{
	struct egs_server *srv = r->srv;
	char *text = NULL;
	if (p && egs_policy_empty(p)) {
		egs_policy_free(p);
		p = NULL;
	}
	if (p) {
		json_t *j = egs_policy_json(p);
		text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(j);
		EGS_ASSERT(text);
	}
	bool same = text && w->policy_json ? !strcmp(text, w->policy_json) : !text && !w->policy_json;
	if (same) { /* applying the same policy again changes nothing */
		free(text);
		egs_policy_free(p);
		return;
	}
	free(w->policy_json);
	egs_policy_free(w->policy);
	w->policy_json = text;
	w->policy = p;
	egs_state_touch(&srv->st, EGS_KIND_WORKSPACE, w);
	egs_state_event(&srv->st, egs_now(srv), "Normal", reason, "Workspace", w->name, w->name, "policy of workspace %s %s: %s",
			w->name, p ? "set" : "cleared", text ? text : "no limits");
}

static void ws_policy_put(struct egs_req *r)
{
	char name[EGS_NAME_MAX], field[96], why[400];
	struct egs_workspace *w;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, ws_members) ||
	    !egs_get_str(r, r->body, "workspaceName", true, name, sizeof(name)) || !egs_find_ws(r, name, &w))
		return;
	struct egs_policy *p = egs_policy_new();
	if (!egs_policy_parse(r->body, ws_skip, p, field, sizeof(field), why, sizeof(why))) {
		egs_policy_free(p);
		egs_reply_invalid(r, field, "%s", why);
		return;
	}
	set_ws_policy(r, w, p, "PolicyUpdated");
	egs_reply_ok(r, ws_view(w));
}

static void ws_policy_get(struct egs_req *r)
{
	const char *name = egs_query(r, "workspaceName");
	struct egs_workspace *w;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	if (!name || !*name) {
		egs_reply_invalid(r, "workspaceName", "workspaceName is required");
		return;
	}
	if (egs_find_ws(r, name, &w) && egs_can_read_ws(r, w))
		egs_reply_ok(r, ws_view(w));
}

static void ws_policy_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", NULL };
	char name[EGS_NAME_MAX];
	struct egs_workspace *w;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "workspaceName", true, name, sizeof(name)) || !egs_find_ws(r, name, &w))
		return;
	if (!w->policy) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "POLICY_NOT_FOUND", "workspaceName", "workspace %s has no policy", name);
		return;
	}
	set_ws_policy(r, w, NULL, "PolicyDeleted");
	egs_reply_ok(r, json_pack("{s:s}", "workspaceName", name));
}

/* ---- the global policy routes ---- */

static void global_get(struct egs_req *r)
{
	if (egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		egs_reply_ok(r, egs_policy_json(r->srv->policy_global));
}

static void global_put(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_policy *p = NULL, *eff = NULL;
	char field[96], why[400], *text = NULL, *stored = NULL;
	const char *bad;
	enum egs_err err;
	json_t *j;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, global_members))
		return;
	if (r->who.project[0]) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "only an admin of every project may change the global policy");
		return;
	}
	p = egs_policy_new();
	eff = egs_policy_new();
	if (!egs_policy_parse(r->body, NULL, p, field, sizeof(field), why, sizeof(why))) {
		egs_reply_invalid(r, field, "%s", why);
		goto out;
	}
	egs_policy_copy(eff, p);
	with_default(srv, eff);
	if (!egs_policy_validate(eff, &bad, why, sizeof(why))) { /* a soft limit beyond the default */
		egs_reply_invalid(r, bad, "%s", why);
		goto out;
	}
	j = egs_policy_json(p);
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	EGS_ASSERT(text);
	err = egs_store_meta_get(srv->store, GLOBAL_KEY, &stored);
	if (!err && !strcmp(stored ? stored : "{}", text)) { /* the same policy again changes nothing */
		egs_reply_ok(r, egs_policy_json(srv->policy_global));
		goto out;
	}
	if (err || (err = egs_store_meta_set(srv->store, GLOBAL_KEY, text))) {
		egs_reply_err(r, err, NULL, NULL, "the global policy could not be stored");
		goto out;
	}
	egs_policy_free(srv->policy_global);
	srv->policy_global = eff;
	eff = NULL;
	egs_state_event(&srv->st, egs_now(srv), "Normal", "PolicyUpdated", "Policy", "global", "", "global policy set: %s",
			text);
	egs_reply_ok(r, egs_policy_json(srv->policy_global));
out:
	free(stored);
	free(text);
	egs_policy_free(p);
	egs_policy_free(eff);
}

const struct egs_route egs_routes_policy[] = {
	{ EVHTTP_REQ_PUT, "/api/v1/slice-workspace/policy", ws_policy_put, false },
	{ EVHTTP_REQ_GET, "/api/v1/slice-workspace/policy", ws_policy_get, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/slice-workspace/policy", ws_policy_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/settings/policy", global_get, false },
	{ EVHTTP_REQ_PUT, "/api/v1/settings/policy", global_put, false },
	{ 0, NULL, NULL, false },
};
