/*
 * api_agent_events.c: GET /api/v1/agent/events, the GPR events a cluster's agent mirrors into its
 * cluster (docs/internals/agent-protocol.md, "GPR events"; the kubernetes agent writes them as core/v1
 * Events in the slice's namespaces).
 *
 *   GET /api/v1/agent/events               -> {"events": [], "last": <newest event id>}: where to start
 *   GET /api/v1/agent/events?after=N&limit=M -> the GPR transitions after id N (oldest first, at most M,
 *                                              default 100, 1..500) of GPRs with a node on the agent's
 *                                              cluster, and "last": the id to ask after next time
 *
 * Only committed events are served (the state's listing ring), so an agent never mirrors an event
 * the store could still lose.  Role Agent only, scoped to its own cluster.
 */
#include "server/server.h"

#include "core/util.h"

#include <string.h>

/* The GPR reasons an agent mirrors: the window's milestones, releases, node changes and failures. */
static const char *const mirrored[] = {
	"Provisioned", "Progress25", "Progress50", "Progress75", "ExitWarning", "EarlyRelease", "Exit",
	"Complete", "NodeReplaced", "NodeFailed", "PostExitCheckFailed", "ProvisioningFailed", "DetachFailed",
	"IdleWarning", "IdleTimeout", NULL,
};

static bool mirrored_reason(const char *reason)
{
	for (size_t i = 0; mirrored[i]; i++)
		if (!strcmp(mirrored[i], reason))
			return true;
	return false;
}

/* Does GPR g hold (or did it hold) a node of cluster? */
static bool on_cluster(const struct egs_gpr *g, const char *cluster)
{
	size_t n = strlen(cluster);
	if (!strcmp(g->cluster, cluster))
		return true;
	for (size_t i = 0; i < g->nodes.n; i++)
		if (!strncmp(g->nodes.v[i], cluster, n) && g->nodes.v[i][n] == '/')
			return true;
	return false;
}

/* The event as the agent gets it, or NULL when it is not one for cluster. */
static json_t *agent_event(const struct egs_state *st, const struct egs_event *e, const char *cluster)
{
	char first[32], last[32];
	if (strcmp(e->object_kind, "GPR") || !mirrored_reason(e->reason))
		return NULL;
	const struct egs_gpr *g = egs_state_gpr(st, e->object_name);
	if (!g || !on_cluster(g, cluster))
		return NULL;
	const struct egs_workspace *w = egs_state_workspace(st, g->workspace);
	json_t *nss = json_array();
	for (size_t j = 0; w && j < w->n_namespaces; j++)
		if (!w->namespaces[j].clusters.n || egs_strlist_has(&w->namespaces[j].clusters, cluster))
			json_array_append_new(nss, json_string(w->namespaces[j].name));
	egs_time_format(e->first_time, first, sizeof(first));
	egs_time_format(e->time, last, sizeof(last));
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:o, s:i, s:s, s:s}", "id", (json_int_t)e->id, "type",
			      e->type, "reason", e->reason, "message", e->message ? e->message : "", "gprId", g->id,
			      "workspace", g->workspace, "namespaces", nss, "count", e->count, "firstTimestamp", first,
			      "lastTimestamp", last);
	EGS_ASSERT(o);
	return o;
}

static void agent_events(struct egs_req *r)
{
	const struct egs_state *st = &r->srv->st;
	const char *after_s = egs_query(r, "after"), *limit_s = egs_query(r, "limit");
	int64_t after = 0, limit = 100, newest = 0;
	json_t *events = json_array();

	if (!egs_require_role(r, EGS_R(AGENT)))
		goto fail;
	if (after_s && !egs_int_parse(after_s, 0, INT64_MAX, &after)) {
		egs_reply_invalid(r, "after", "after must be an event id (an integer from 0)");
		goto fail;
	}
	if (limit_s && !egs_int_parse(limit_s, 1, 500, &limit)) {
		egs_reply_invalid(r, "limit", "limit must be an integer from 1 to 500");
		goto fail;
	}
	for (size_t i = 0; i < st->events_len; i++) {
		const struct egs_event *e = st->events[(st->events_head + i) % st->cfg.event_retention];
		if (!after_s || e->id <= after)
			continue;
		json_t *o = agent_event(st, e, r->who.cluster);
		if (o && (int64_t)json_array_size(events) == limit) {
			json_decref(o);
			break; /* newest stays the id before this one: the next call starts here */
		}
		newest = e->id;
		if (o)
			json_array_append_new(events, o);
	}
	if (!after_s) /* where to start: the newest committed event */
		newest = st->events_len ? st->events[(st->events_head + st->events_len - 1) % st->cfg.event_retention]->id : 0;
	else if (newest < after)
		newest = after;
	egs_reply_ok(r, json_pack("{s:o, s:I}", "events", events, "last", (json_int_t)newest));
	return;
fail:
	json_decref(events);
}

const struct egs_route egs_routes_agent_events[] = {
	{ EVHTTP_REQ_GET, "/api/v1/agent/events", agent_events, false },
	{ 0, NULL, NULL, false },
};
