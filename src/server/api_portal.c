/*
 * api_portal.c: two read-only routes the portal needs and no other route gave.
 *
 * GET /api/v1/auth/whoami: the caller's own key (role, scope, expiry), so the portal can hide the
 * actions a role may not take (the API still decides).
 *
 * GET /api/v1/schedule?clusterName= (admins): the schedule of each node: what holds it now and the
 * queued GPRs planned on it, with when.  The planner keeps each GPR's estimated start but not the
 * nodes it reserved for it (core/sched_place.c keeps only the last placement), so the nodes are replayed
 * here: the first SCHEDULE_MAX_PLANNED queued GPRs with an estimate, in queue order, each on the
 * first nodes (by name) that match it and are free for its whole window from its estimate.  The
 * times are the planner's; the node a GPR is drawn on is this replay's, which may differ from the
 * one the planner picks when two nodes are interchangeable (same cluster and shape).
 */
#include "server/server.h"

#include "core/sched.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

#define SCHEDULE_MAX_PLANNED 2000

static void whoami(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	const struct egs_apikey *k = egs_state_apikey(&r->srv->st, r->who.key_id);
	if (!k) { /* deleted between authentication and now: cannot happen in one loop turn */
		egs_reply_err(r, EGS_ERR_UNAUTHENTICATED, NULL, NULL, "Unauthenticated");
		return;
	}
	json_t *o = egs_json_apikey(k);
	json_object_set_new(o, "serverTime", json_integer((json_int_t)egs_now(r->srv)));
	egs_reply_ok(r, o);
}

/* One node's timeline: half-open windows [start, end) of the GPRs on it, in the order added. */
struct lane {
	struct egs_node *n;
	json_t *slots;   /* the JSON of each window */
	int64_t *starts; /* the planned windows, for the free check */
	int64_t *ends;
	size_t nplanned, cap;
	int64_t busy_until; /* the holder's end (or a hold's), 0 = free now */
};

static int lane_cmp(const void *a, const void *b)
{
	const struct lane *x = a, *y = b;
	int c = strcmp(x->n->cluster, y->n->cluster);
	return c ? c : strcmp(x->n->name, y->n->name);
}

static bool lane_free(const struct lane *l, int64_t s, int64_t e)
{
	if (l->busy_until > s)
		return false;
	for (size_t i = 0; i < l->nplanned; i++)
		if (l->starts[i] < e && s < l->ends[i])
			return false;
	return true;
}

static json_t *slot_json(const struct egs_gpr *g, const char *kind, int64_t s, int64_t e)
{
	char ts[32], te[32];
	egs_time_format(s, ts, sizeof(ts));
	egs_time_format(e, te, sizeof(te));
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i}", "gprId", g->id, "gprName", g->name,
			      "sliceName", g->workspace, "kind", kind, "start", ts, "end", te, "priority", g->priority,
			      "numberOfGPUs", g->gpus_per_node, "numberOfGPUNodes", g->node_count);
	EGS_ASSERT(o);
	if (g->share_centi)
		json_object_set_new(o, "sharedGPUs", json_real(g->share_centi / 100.0));
	return o;
}

/* What holds l's node now: its assigned GPR (provisioned, releasing, held for an early release). */
static void lane_now(struct egs_state *st, struct lane *l, int64_t now)
{
	struct egs_node *n = l->n;
	struct egs_gpr *g = n->gpr_id[0] ? egs_state_gpr(st, n->gpr_id) : NULL;
	if (g) {
		int64_t end = g->exit_at > now ? g->exit_at : now;
		if (g->held_until > end)
			end = g->held_until;
		json_array_append_new(l->slots, slot_json(g, egs_gpr_state_name(g->state), g->start_ts ? g->start_ts : now, end));
		l->busy_until = end;
	} else if (n->held_until > now) {
		l->busy_until = n->held_until;
	}
	for (size_t i = 0; i < n->shared.len; i++) {
		struct egs_gpr *sg = n->shared.items[i];
		int64_t end = sg->exit_at > now ? sg->exit_at : now;
		json_array_append_new(l->slots, slot_json(sg, egs_gpr_state_name(sg->state), sg->start_ts, end));
		if (end > l->busy_until)
			l->busy_until = end;
	}
}

static void lane_plan(struct lane *l, const struct egs_gpr *g, int64_t s, int64_t e)
{
	if (l->nplanned == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->starts = egs_realloc(l->starts, l->cap * sizeof(*l->starts));
		l->ends = egs_realloc(l->ends, l->cap * sizeof(*l->ends));
	}
	l->starts[l->nplanned] = s;
	l->ends[l->nplanned++] = e;
	json_array_append_new(l->slots, slot_json(g, "Planned", s, e));
}

/* Draws g from its estimate on the first nodes that match it and are free for its window; false
 * when no set of free matching nodes is found (a shape the replay cannot place the same way). */
static bool place(struct egs_state *st, struct lane *lanes, size_t nl, const struct egs_gpr *g, size_t *pick)
{
	const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
	int64_t s = g->est_start, e = g->est_start + g->exit_duration_s;
	const char *cluster = NULL;
	size_t k = 0;
	for (size_t i = 0; ws && i < nl && k < (size_t)g->node_count; i++) {
		if (cluster && strcmp(lanes[i].n->cluster, cluster))
			continue;
		if (!egs_node_matches(g, ws, lanes[i].n) || !lane_free(&lanes[i], s, e))
			continue;
		if (!cluster) { /* one GPR's nodes are all in one cluster */
			size_t room = 0;
			for (size_t j = i; j < nl && !strcmp(lanes[j].n->cluster, lanes[i].n->cluster); j++)
				room += egs_node_matches(g, ws, lanes[j].n) && lane_free(&lanes[j], s, e);
			if (room < (size_t)g->node_count)
				continue;
			cluster = lanes[i].n->cluster;
		}
		pick[k++] = i;
	}
	if (k < (size_t)g->node_count)
		return false;
	for (size_t j = 0; j < k; j++)
		lane_plan(&lanes[pick[j]], g, s, e);
	return true;
}

static void schedule(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const char *cluster = egs_query(r, "clusterName");
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	if (cluster) {
		const struct egs_cluster *c = egs_state_cluster(st, cluster);
		if (!c || !egs_in_project(r, c->project)) {
			egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s does not exist", cluster);
			return;
		}
	}
	int64_t now = egs_now(r->srv);
	size_t nl = 0, cap = st->nodes.len + 1;
	struct lane *lanes = egs_calloc(cap, sizeof(*lanes));
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		const struct egs_cluster *c = egs_state_cluster(st, n->cluster);
		if (c && egs_in_project(r, c->project))
			lanes[nl++].n = n;
	}
	qsort(lanes, nl, sizeof(*lanes), lane_cmp);
	for (size_t i = 0; i < nl; i++) {
		lanes[i].slots = json_array();
		lane_now(st, &lanes[i], now);
	}
	size_t nq = egs_queue_len(&st->queue), *pick = egs_calloc(nl + 1, sizeof(*pick));
	struct egs_gpr **order = egs_malloc((nq + 1) * sizeof(*order));
	egs_queue_sorted(&st->queue, order);
	json_t *unplaced = json_array();
	for (size_t i = 0, planned = 0; i < nq && planned < SCHEDULE_MAX_PLANNED; i++) {
		const struct egs_gpr *g = order[i];
		if (!g->est_start || g->ghost)
			continue;
		planned++;
		if (!place(st, lanes, nl, g, pick) && (!cluster || !strcmp(g->cluster, cluster) || !g->cluster[0]))
			json_array_append_new(unplaced, slot_json(g, "Unplaced", g->est_start, g->est_start + g->exit_duration_s));
	}
	json_t *nodes = json_array();
	for (size_t i = 0; i < nl; i++) {
		struct egs_node *n = lanes[i].n;
		if (!cluster || !strcmp(n->cluster, cluster))
			json_array_append_new(nodes, json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:o}", "clusterName", n->cluster,
							       "gpuNodeName", n->name, "gpuShape", n->gpu_shape, "instanceType",
							       n->instance_type, "gpuCount", n->gpu_count, "nodeHealth",
							       egs_node_schedulable(st, n, now) ? "Healthy" : "Unhealthy",
							       "slots", lanes[i].slots));
		else
			json_decref(lanes[i].slots);
		free(lanes[i].starts);
		free(lanes[i].ends);
	}
	char ts[32];
	egs_time_format(now, ts, sizeof(ts));
	free(order);
	free(pick);
	free(lanes);
	egs_reply_ok(r, json_pack("{s:s, s:o, s:o, s:I}", "now", ts, "nodes", nodes, "unplaced", unplaced, "queueLength",
				  (json_int_t)nq));
}

const struct egs_route egs_routes_portal[] = {
	{ EVHTTP_REQ_GET, "/api/v1/auth/whoami", whoami, false },
	{ EVHTTP_REQ_GET, "/api/v1/schedule", schedule, false },
	{ 0, NULL, NULL, false },
};
