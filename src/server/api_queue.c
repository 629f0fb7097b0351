/*
 * api_queue.c: the GPR queue as admins and users see it: GET /api/v1/queue lists waiting GPRs in
 * queue order with their global position, their position among the GPRs that want the same cluster
 * and GPU shape, and the plan's estimate.  Users see their workspaces' entries only, with the same
 * global positions; Pending GPRs (waiting for approval) follow, without a position.
 */
#include "server/server.h"

#include "core/fair.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

struct group {
	char cluster[EGS_NAME_MAX], shape[EGS_NAME_MAX];
	size_t count;
	int64_t first_start;
};

static bool visible(struct egs_req *r, const struct egs_gpr *g)
{
	const struct egs_workspace *w = egs_state_workspace(&r->srv->st, g->workspace);
	if (!w || !egs_in_project(r, w->project))
		return false;
	return r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0] || !strcmp(r->who.workspace, w->name);
}

static json_t *entry(struct egs_req *r, const struct egs_gpr *g, size_t pos, size_t gpos)
{
	json_t *keep = egs_json_gpr_queued(g, egs_now(r->srv));
	json_object_set_new(keep, "position", pos ? json_integer((json_int_t)pos) : json_null());
	json_object_set_new(keep, "positionInGroup", gpos ? json_integer((json_int_t)gpos) : json_null());
	if (g->pending_reason)
		json_object_set_new(keep, "pendingReason", json_string(g->pending_reason));
	/* What orders equal priorities (core/fair.h): the workspace's GPU-hours before this GPR was
	 * queued, decayed to now. */
	json_object_set_new(keep, "workspaceRecentGpuHours",
			    json_real(egs_fair_decayed(&r->srv->st, g->fair, egs_now(r->srv))));
	return keep;
}

static void queue_list(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const char *cluster = egs_query(r, "clusterName"), *shape = egs_query(r, "gpuShape");
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	size_t nq = egs_queue_len(&st->queue);
	struct egs_gpr **order = egs_malloc((nq + 1) * sizeof(*order));
	egs_queue_sorted(&st->queue, order);
	struct group *groups = egs_calloc(nq + 1, sizeof(*groups));
	size_t ngroups = 0;
	json_t *items = json_array();
	for (size_t i = 0; i < nq; i++) {
		const struct egs_gpr *g = order[i];
		struct group *gr = NULL;
		for (size_t j = 0; j < ngroups && !gr; j++)
			if (!strcmp(groups[j].cluster, g->cluster) && !strcmp(groups[j].shape, g->gpu_shape))
				gr = &groups[j];
		if (!gr) {
			gr = &groups[ngroups++];
			egs_strlcpy(gr->cluster, g->cluster, sizeof(gr->cluster));
			egs_strlcpy(gr->shape, g->gpu_shape, sizeof(gr->shape));
		}
		gr->count++;
		if (g->est_start && (!gr->first_start || g->est_start < gr->first_start))
			gr->first_start = g->est_start;
		if ((cluster && strcmp(cluster, g->cluster)) || (shape && strcmp(shape, g->gpu_shape)) || !visible(r, g))
			continue;
		json_array_append_new(items, entry(r, g, i + 1, gr->count));
	}
	void *v;
	for (size_t i = 0; egs_map_next(&st->gprs, &i, NULL, &v);) {
		const struct egs_gpr *g = v;
		if (g->state != EGS_GPR_PENDING || (cluster && strcmp(cluster, g->cluster)) ||
		    (shape && strcmp(shape, g->gpu_shape)) || !visible(r, g))
			continue;
		json_array_append_new(items, entry(r, g, 0, 0));
	}
	json_t *jg = json_array();
	for (size_t j = 0; j < ngroups; j++) {
		char ts[32];
		if (groups[j].first_start)
			egs_time_format(groups[j].first_start, ts, sizeof(ts));
		json_array_append_new(jg, json_pack("{s:s, s:s, s:I, s:o}", "clusterName", groups[j].cluster, "gpuShape",
						    groups[j].shape, "queued", (json_int_t)groups[j].count,
						    "nextEstimatedStart", groups[j].first_start ? json_string(ts) : json_null()));
	}
	free(groups);
	free(order);
	egs_reply_ok(r, json_pack("{s:o, s:o, s:I}", "items", items, "groups", jg, "queueLength", (json_int_t)nq));
}

const struct egs_route egs_routes_queue[] = {
	{ EVHTTP_REQ_GET, "/api/v1/queue", queue_list, false },
	{ 0, NULL, NULL, false },
};
