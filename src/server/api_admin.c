/*
 * api_admin.c: admin operations on GPRs (approve, reject), and the dev clock
 * (`egsd --dev-clock` only) that lets tests drive hours of schedule in milliseconds.
 */
#include "server/server.h"
#include "server/aged.h"

#include "core/gpr.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

static void debug_clock(struct egs_req *r)
{
	static const char *const allowed[] = { "advance", "keepHeartbeats", NULL };
	struct egs_server *srv = r->srv;
	if (!srv->dev_clock) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "ROUTE_NOT_FOUND", NULL, "no route %s", r->path);
		return;
	}
	char adv[40];
	if (!egs_authenticate(r) || !egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "advance", true, adv, sizeof(adv)))
		return;
	int64_t secs;
	const char *why;
	bool keep, keep_given;
	if (!egs_duration_parse(adv, &secs, &why)) {
		egs_reply_invalid(r, "advance", "advance %s", why);
		return;
	}
	if (!egs_get_bool(r, r->body, "keepHeartbeats", &keep, &keep_given))
		return;
	srv->clock_offset += secs;
	/* By default agents kept heart-beating through the virtual interval; keepHeartbeats=false
	 * lets a test see what silent agents look like after it. */
	void *v;
	if (keep_given && !keep)
		goto plan;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (n->last_heartbeat)
			n->last_heartbeat += secs;
	}
	for (size_t i = 0; egs_map_next(&srv->st.clusters, &i, NULL, &v);) {
		struct egs_cluster *c = v;
		if (c->last_seen)
			c->last_seen += secs;
	}
plan:
	egs_server_plan_now(srv);
	char ts[32];
	egs_time_format(egs_now(srv), ts, sizeof(ts));
	egs_reply_ok(r, json_pack("{s:s, s:I}", "now", ts, "offsetSeconds", (json_int_t)srv->clock_offset));
}

static struct egs_gpr *admin_gpr(struct egs_req *r, const char *const *allowed, char *id)
{
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "gprId", true, id, EGS_ID_MAX))
		return NULL;
	struct egs_gpr *g = egs_state_gpr(&r->srv->st, id);
	if (!g) /* finished and left memory by age (server/aged.h): every action here refuses it */
		g = egs_aged_get(r->srv, id);
	const struct egs_workspace *ws = g ? egs_state_workspace(&r->srv->st, g->workspace) : NULL;
	if (!g || (ws ? !egs_in_project(r, ws->project) : r->who.project[0] != '\0')) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_NOT_FOUND", "gprId", "GPR %s not found", id);
		return NULL;
	}
	return g;
}

static void gpr_approve(struct egs_req *r)
{
	static const char *const allowed[] = { "gprId", NULL };
	char id[EGS_ID_MAX];
	struct egs_gpr *g = admin_gpr(r, allowed, id);
	if (!g || !egs_policy_approvable(r, g))
		return;
	enum egs_err err = egs_gpr_approve(&r->srv->st, g, egs_now(r->srv));
	if (err)
		egs_reply_err(r, err, err == EGS_ERR_CONFLICT ? "GPR_NOT_PENDING" : NULL, "gprId",
			      "GPR %s is %s, not waiting for approval", id, egs_gpr_state_name(g->state));
	else
		egs_reply_ok(r, json_pack("{s:s}", "gprId", id));
}

static void gpr_reject(struct egs_req *r)
{
	static const char *const allowed[] = { "gprId", "reason", NULL };
	char id[EGS_ID_MAX], reason[256];
	struct egs_gpr *g = admin_gpr(r, allowed, id);
	if (!g || !egs_get_str(r, r->body, "reason", false, reason, sizeof(reason)))
		return;
	enum egs_err err = egs_gpr_reject(&r->srv->st, g, reason[0] ? reason : "rejected by an admin", egs_now(r->srv));
	if (err)
		egs_reply_err(r, err, err == EGS_ERR_CONFLICT ? "GPR_NOT_PENDING" : NULL, "gprId",
			      "GPR %s is %s, not waiting for approval", id, egs_gpr_state_name(g->state));
	else
		egs_reply_ok(r, json_pack("{s:s}", "gprId", id));
}

static void gpr_evict(struct egs_req *r)
{
	static const char *const allowed[] = { "gprId", "reason", NULL };
	char id[EGS_ID_MAX], reason[256];
	struct egs_gpr *g = admin_gpr(r, allowed, id);
	if (!g || !egs_get_str(r, r->body, "reason", true, reason, sizeof(reason)) ||
	    !egs_check_text(r, "reason", reason))
		return;
	enum egs_err err = egs_gpr_evict(&r->srv->st, g, reason, egs_now(r->srv));
	if (err)
		egs_reply_err(r, err, NULL, "gprId", "Cannot evict GPR in %s state", egs_gpr_state_name(g->state));
	else
		egs_reply_ok(r, json_pack("{s:s, s:s}", "gprId", id, "provisioningStatus", egs_gpr_state_name(g->state)));
}

/* Moves a waiting GPR to the front: one priority step above the highest queued (at most 1000). */
static void queue_top(struct egs_req *r)
{
	static const char *const allowed[] = { "gprId", NULL };
	char id[EGS_ID_MAX];
	struct egs_gpr *g = admin_gpr(r, allowed, id);
	if (!g)
		return;
	enum egs_err err = egs_gpr_editable(g);
	if (err) {
		egs_reply_err(r, err, NULL, "gprId", "Cannot move a GPR in %s state", egs_gpr_state_name(g->state));
		return;
	}
	struct egs_state *st = &r->srv->st;
	const struct egs_gpr *head = egs_queue_peek(&st->queue);
	int top = head && head != g ? head->priority + 1 : g->priority;
	if (top > 1000) {
		egs_reply_err(r, EGS_ERR_CONFLICT, "QUEUE_TOP_FULL", "gprId",
			      "GPR %s already waits at priority 1000; lower it before moving another above it", head->id);
		return;
	}
	if (top > g->priority)
		egs_gpr_set_priority(st, g, top, egs_now(r->srv));
	egs_reply_ok(r, json_pack("{s:s, s:i}", "gprId", id, "priority", g->priority));
}

static void healthz(struct egs_req *r)
{
	egs_reply_ok(r, egs_replica_health(r->srv)); /* role, epoch, and how far behind a follower is */
}

const struct egs_route egs_routes_admin[] = {
	{ EVHTTP_REQ_POST, "/api/v1/debug/clock", debug_clock, true }, /* authenticates itself */
	{ EVHTTP_REQ_POST, "/api/v1/gpr/approve", gpr_approve, false },
	{ EVHTTP_REQ_POST, "/api/v1/gpr/reject", gpr_reject, false },
	{ EVHTTP_REQ_POST, "/api/v1/gpr/evict", gpr_evict, false },
	{ EVHTTP_REQ_POST, "/api/v1/queue/top", queue_top, false },
	{ EVHTTP_REQ_GET, "/healthz", healthz, true },
	{ 0, NULL, NULL, false },
};
