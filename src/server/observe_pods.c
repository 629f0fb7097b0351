/*
 * observe_pods.c: the GPU pods of slices that wait for nodes (docs/observability.md, "Pods waiting for
 * a GPR").  A kubernetes agent reports them in each heartbeat as `pendingPods` (agent-protocol.md); egsd
 * keeps the latest list per cluster in memory only (the next heartbeat after a restart brings it back)
 * and shows each pod in the workloads view of its workspace, with the GPR it waits for.
 *
 * Trust: the list is network input from an agent, so it is checked whole before anything is kept, and
 * a pod is shown only where its workspace includes the reporting cluster and the pod's namespace.
 */
#include "server/observe.h"

#include <string.h>

#define MAX_PENDING 1000

struct cluster_pods {
	char cluster[EGS_NAME_MAX]; /* map key */
	json_t *items;              /* owned */
	int64_t at;
};

/* One string field of item i: required or not, at most max bytes, clean text.  Replies 422. */
static bool str_field(struct egs_req *r, json_t *o, size_t i, const char *k, bool required, size_t max)
{
	json_t *v = json_object_get(o, k);
	char f[64];
	if (!v && !required)
		return true;
	snprintf(f, sizeof(f), "pendingPods[%zu].%s", i, k);
	if (!json_is_string(v) || (required && !json_string_length(v)) || json_string_length(v) > max ||
	    !egs_text_clean(json_string_value(v))) {
		egs_reply_invalid(r, f, "%s must be a string of %s%zu bytes without control characters", f,
				  required ? "1 to " : "at most ", max);
		return false;
	}
	return true;
}

bool egs_observe_pending_check(struct egs_req *r, json_t *list)
{
	json_t *o;
	size_t i;

	if (!list || json_is_null(list)) /* null is "not given", as for every optional field */
		return true;
	if (!json_is_array(list) || json_array_size(list) > MAX_PENDING) {
		egs_reply_invalid(r, "pendingPods", "pendingPods must be a list of at most %d pods", MAX_PENDING);
		return false;
	}
	json_array_foreach(list, i, o) {
		json_t *n = json_object_get(o, "gpuRequest");
		char f[64];
		if (!json_is_object(o)) {
			snprintf(f, sizeof(f), "pendingPods[%zu]", i);
			egs_reply_invalid(r, f, "%s must be an object", f);
			return false;
		}
		if (!str_field(r, o, i, "name", true, 253) || !str_field(r, o, i, "namespace", true, 63) ||
		    !str_field(r, o, i, "workspace", true, 63) || !str_field(r, o, i, "phase", false, 32) ||
		    !str_field(r, o, i, "reason", false, 64) || !str_field(r, o, i, "message", false, 256) ||
		    !str_field(r, o, i, "since", false, 40))
			return false;
		if (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > 1 << 20) {
			snprintf(f, sizeof(f), "pendingPods[%zu].gpuRequest", i);
			egs_reply_invalid(r, f, "%s must be an integer from 1 to %d", f, 1 << 20);
			return false;
		}
	}
	return true;
}

void egs_observe_pending(struct egs_server *srv, const char *cluster, json_t *list, int64_t now)
{
	static const char *const keep[] = { "name", "namespace", "workspace", "gpuRequest", "phase", "reason", "message", "since" };
	struct cluster_pods *c;
	json_t *items, *o;
	size_t i;

	if (!srv->obs || !json_is_array(list))
		return;
	items = json_array();
	json_array_foreach(list, i, o) {
		json_t *x = json_object();
		for (size_t k = 0; k < EGS_ARRAY_LEN(keep); k++)
			if (json_object_get(o, keep[k]))
				json_object_set(x, keep[k], json_object_get(o, keep[k]));
		json_array_append_new(items, x);
	}
	c = egs_map_get(&srv->obs->pending, cluster);
	if (!c) {
		c = egs_calloc(1, sizeof(*c));
		egs_strlcpy(c->cluster, cluster, sizeof(c->cluster));
		egs_map_put(&srv->obs->pending, c->cluster, c);
	}
	json_decref(c->items);
	c->items = items;
	c->at = now;
}

/* Does workspace w hold namespace ns on cluster? */
static bool ws_has(const struct egs_workspace *w, const char *cluster, const char *ns)
{
	if (!egs_strlist_has(&w->clusters, cluster))
		return false;
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (!strcmp(w->namespaces[i].name, ns) &&
		    (!w->namespaces[i].clusters.n || egs_strlist_has(&w->namespaces[i].clusters, cluster)))
			return true;
	return false;
}

/* Is g a better GPR to wait for than best: of workspace ws, able to land on cluster, not provisioned yet,
 * older? */
static bool better(const struct egs_gpr *g, const struct egs_gpr *best, const char *ws, const char *cluster)
{
	if (strcmp(g->workspace, ws) || (g->cluster[0] && strcmp(g->cluster, cluster)) ||
	    (g->state != EGS_GPR_QUEUED && g->state != EGS_GPR_PROVISIONING))
		return false;
	return !best || g->created_at < best->created_at;
}

/* The GPR the workspace's pods wait for on cluster: its oldest Queued or Provisioning GPR that may land
 * there; NULL when none (one waiting for an admin's approval is not counted). */
static const struct egs_gpr *awaited(struct egs_server *srv, const char *ws, const char *cluster)
{
	const struct egs_gpr *best = NULL;
	for (size_t i = 0; i < egs_queue_len(&srv->st.queue); i++)
		if (better(egs_queue_at(&srv->st.queue, i), best, ws, cluster))
			best = egs_queue_at(&srv->st.queue, i);
	for (size_t i = 0; i < srv->st.active.len; i++)
		if (better(srv->st.active.items[i], best, ws, cluster))
			best = srv->st.active.items[i];
	return best;
}

void egs_observe_pending_view(struct egs_req *r, const char *ws, json_t *out)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	void *v;

	if (!srv->obs)
		return;
	for (size_t i = 0; egs_map_next(&srv->obs->pending, &i, NULL, &v);) {
		struct cluster_pods *c = v;
		json_t *o;
		size_t j;
		/* A cluster whose agent stopped reporting: its list is stale after the heartbeat timeout. */
		if (now - c->at > srv->st.cfg.heartbeat_timeout_s || !egs_state_cluster(&srv->st, c->cluster))
			continue;
		json_array_foreach(c->items, j, o) {
			const char *pws = json_string_value(json_object_get(o, "workspace"));
			const char *ns = json_string_value(json_object_get(o, "namespace"));
			const struct egs_workspace *w = egs_state_workspace(&srv->st, pws);
			if (!w || (ws && strcmp(ws, pws)) || !ws_has(w, c->cluster, ns) || !egs_obs_ws_visible(r, pws))
				continue;
			const struct egs_gpr *g = awaited(srv, pws, c->cluster);
			json_t *x = json_deep_copy(o);
			json_object_del(x, "workspace");
			json_object_set_new(x, "sliceName", json_string(pws));
			json_object_set_new(x, "clusterName", json_string(c->cluster));
			json_object_set_new(x, "gpuNodeName", json_null());
			json_object_set_new(x, "gpus", json_array());
			json_object_set_new(x, "waitingForGpr", g ? json_pack("{s:s, s:s}", "gprId", g->id, "state",
									     egs_gpr_state_name(g->state))
							  : json_null());
			json_array_append_new(out, x);
		}
	}
}

static void cluster_pods_free(void *v)
{
	struct cluster_pods *c = v;
	json_decref(c->items);
	free(c);
}

void egs_observe_pending_free(struct egs_server *srv)
{
	void *v;
	for (size_t i = 0; egs_map_next(&srv->obs->pending, &i, NULL, &v);)
		cluster_pods_free(v);
	egs_map_cleanup(&srv->obs->pending);
}
