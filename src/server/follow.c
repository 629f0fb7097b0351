/*
 * follow.c: a follower applies what the leader committed, row by row (docs/ha.md, replica.c).
 *
 * egs_store_follow hands every object that the turns since the last load or catch-up wrote, as its
 * current row (or NULL: deleted), and their events.  Each is applied to the model as a load would
 * have it, keeping what only memory holds:
 *   - GPRs and nodes are updated in place (other objects point at them: the queue, the active and
 *     finished lists, holds, shares): a GPR leaves the queue, the active list and its workspace's
 *     unfinished count as it was and joins them as it is, is charged to fair share when it finishes,
 *     and keeps its runtime fields (phase_since unless its state changed, idle time, check runs);
 *     a node keeps its runtime fields and GPU samples;
 *   - workspaces are updated in place too (their unfinished count is the GPRs'); their policies are
 *     parsed again;
 *   - every other kind is replaced (deleted, then added), a cluster keeping its agent's last contact;
 *   - events: a new id joins the ring and the event streams, a known one (a repeat) is updated.
 * A GPR finished before the retention that is not in memory is left out (its row was counted when
 * it left, or at the load).  What would leave a pointer dangling (a node or GPR deleted) asks for a
 * full load instead.  Every change bumps the generation (kept views drop), then the turn's change
 * log is cleared: a follower never commits.
 */
#include "server/server.h"

#include "core/aging.h"
#include "core/fair.h"
#include "core/gpr.h"
#include "core/held.h"
#include "core/share_gpr.h"
#include "core/util.h"
#include "server/observe.h"

#include <stdlib.h>
#include <string.h>

struct apply {
	struct egs_server *srv;
	int64_t now;
	bool reload;   /* something could not be applied: load in full */
	bool holds;    /* a GPR's hold changed: rebuild the list of holds */
	bool policies; /* a workspace changed: parse the policies again */
	size_t rows, events;
};

#define SWAP(a, b)                                                                                                     \
	do {                                                                                                           \
		__typeof__(a) swap_tmp_ = (a);                                                                         \
		(a) = (b);                                                                                             \
		(b) = swap_tmp_;                                                                                       \
	} while (0)

static bool active_state(enum egs_gpr_state s)
{
	return s == EGS_GPR_PROVISIONING || s == EGS_GPR_PROVISIONED || s == EGS_GPR_RELEASING;
}

/* Moves the stored fields of fresh into g (fresh gets g's old ones, and is freed by the caller). */
static void take_gpr_fields(struct egs_gpr *g, struct egs_gpr *fresh)
{
	egs_gpr_copy_request(g, fresh); /* the fields an edit changes, listed once in core/gpr.c */
	memcpy(g->workspace, fresh->workspace, sizeof(g->workspace));
	memcpy(g->created_by, fresh->created_by, sizeof(g->created_by));
	memcpy(g->evicted_by, fresh->evicted_by, sizeof(g->evicted_by));
	g->priority = fresh->priority;
	g->state = fresh->state;
	SWAP(g->failure_reason, fresh->failure_reason);
	SWAP(g->pending_reason, fresh->pending_reason);
	g->created_at = fresh->created_at;
	g->start_ts = fresh->start_ts;
	g->exit_at = fresh->exit_at;
	g->completion_ts = fresh->completion_ts;
	g->retry_count = fresh->retry_count;
	g->delayed_count = fresh->delayed_count;
	g->seq = fresh->seq;
	SWAP(g->nodes, fresh->nodes);
	g->marks_sent = fresh->marks_sent;
	g->fair = fresh->fair;
	SWAP(g->shares, fresh->shares);
	SWAP(g->n_shares, fresh->n_shares);
	g->held_until = fresh->held_until;
	g->ghost = fresh->ghost;
	SWAP(g->held_nodes, fresh->held_nodes);
	g->plan_serial = 0; /* the planner's caches: its shape may have changed */
}

/* A shared GPR that finished is no longer attached to its node (as its agent would report). */
static void detach_shared(struct egs_state *st, const struct egs_gpr *g)
{
	struct egs_node *n = g->share_centi && g->nodes.n == 1 ? egs_map_get(&st->nodes, g->nodes.v[0]) : NULL;
	if (n && egs_gpr_state_terminal(g->state))
		egs_strlist_remove(&n->attached_shared, g->id);
}

static void update_gpr(struct apply *a, struct egs_gpr *g, struct egs_gpr *fresh)
{
	struct egs_state *st = &a->srv->st;
	bool was_terminal = egs_gpr_state_terminal(g->state), state_moved = g->state != fresh->state;
	a->holds |= g->held_until != fresh->held_until || g->ghost != fresh->ghost ||
		    !egs_strlist_equal(&g->held_nodes, &fresh->held_nodes);
	egs_state_count_gpr(st, g, -1);
	if (g->state == EGS_GPR_QUEUED)
		egs_queue_remove(&st->queue, g);
	else if (active_state(g->state))
		egs_vec_remove(&st->active, g);
	take_gpr_fields(g, fresh);
	egs_gpr_free(fresh);
	if (state_moved)
		g->phase_since = a->now;
	egs_state_count_gpr(st, g, +1);
	if (g->state == EGS_GPR_QUEUED)
		egs_queue_push(&st->queue, g);
	else if (active_state(g->state))
		egs_vec_push(&st->active, g);
	if (egs_gpr_state_terminal(g->state) && !was_terminal)
		egs_fair_note_loaded(st, g);
	egs_share_loaded(st, g);
	detach_shared(st, g);
	egs_state_touch(st, EGS_KIND_GPR, g);
}

static void apply_gpr(struct apply *a, const char *key, struct egs_gpr *fresh)
{
	struct egs_state *st = &a->srv->st;
	struct egs_gpr *g = egs_state_gpr(st, key);
	int64_t retention = st->cfg.finished_retention_s;
	if (!fresh) { /* GPRs are never deleted: a model that has one the store lacks is not the store's */
		a->reload |= g != NULL;
		return;
	}
	if (g) {
		update_gpr(a, g, fresh);
		return;
	}
	if (retention > 0 && egs_gpr_state_terminal(fresh->state) && !fresh->held_until && !fresh->ghost &&
	    egs_aging_finished_at(fresh) < a->now - retention) {
		egs_gpr_free(fresh); /* aged: counted when it left memory (or at the load) */
		return;
	}
	a->holds |= fresh->held_until > 0;
	if (egs_state_add_gpr(st, fresh) != EGS_OK) {
		egs_gpr_free(fresh);
		a->reload = true;
		return;
	}
	egs_state_touch(st, EGS_KIND_GPR, fresh);
}

/* The node's stored fields from fresh; its runtime fields and GPU samples stay. */
static void update_node(struct egs_node *n, struct egs_node *fresh)
{
	memcpy(n->instance_type, fresh->instance_type, sizeof(n->instance_type));
	memcpy(n->gpu_shape, fresh->gpu_shape, sizeof(n->gpu_shape));
	memcpy(n->cloud_provider, fresh->cloud_provider, sizeof(n->cloud_provider));
	memcpy(n->region, fresh->region, sizeof(n->region));
	memcpy(n->zone, fresh->zone, sizeof(n->zone));
	memcpy(n->gpr_id, fresh->gpr_id, sizeof(n->gpr_id));
	memcpy(n->attached_gpr, fresh->attached_gpr, sizeof(n->attached_gpr));
	n->gpu_count = fresh->gpu_count;
	n->memory_mib = fresh->memory_mib;
	n->temp_threshold = fresh->temp_threshold;
	n->power_threshold = fresh->power_threshold;
	n->health = fresh->health;
	n->allocated_at = fresh->allocated_at;
	egs_node_keep_samples(fresh, n); /* before the swap below: fresh has the stored GPUs */
	SWAP(n->gpus, fresh->gpus);
	SWAP(n->n_gpus, fresh->n_gpus);
}

static void apply_node(struct apply *a, const char *key, struct egs_node *fresh)
{
	struct egs_state *st = &a->srv->st;
	struct egs_node *n = egs_map_get(&st->nodes, key);
	if (!fresh || !n) {
		if (!fresh) /* shared GPRs point at their node: a deletion is a full load's */
			a->reload |= n != NULL;
		else if (egs_state_add_node(st, fresh) == EGS_OK)
			egs_state_touch(st, EGS_KIND_NODE, fresh);
		else {
			egs_node_free(fresh);
			a->reload = true;
		}
		return;
	}
	update_node(n, fresh);
	egs_node_free(fresh);
	st->inventory_gen++; /* its shape, GPU count or memory may have changed */
	egs_state_touch(st, EGS_KIND_NODE, n);
}

static void apply_workspace(struct apply *a, const char *key, struct egs_workspace *fresh)
{
	struct egs_state *st = &a->srv->st;
	struct egs_workspace *w = egs_state_workspace(st, key);
	a->policies = true;
	if (w && !fresh) {
		egs_state_del(st, EGS_KIND_WORKSPACE, w);
		return;
	}
	if (!w) {
		if (fresh && egs_state_add_workspace(st, fresh) == EGS_OK)
			egs_state_touch(st, EGS_KIND_WORKSPACE, fresh);
		else if (fresh) {
			egs_workspace_free(fresh);
			a->reload = true;
		}
		return;
	}
	memcpy(w->project, fresh->project, sizeof(w->project));
	SWAP(w->description, fresh->description);
	SWAP(w->clusters, fresh->clusters);
	SWAP(w->namespaces, fresh->namespaces);
	SWAP(w->n_namespaces, fresh->n_namespaces);
	SWAP(w->users, fresh->users);
	SWAP(w->n_users, fresh->n_users);
	w->created_at = fresh->created_at;
	SWAP(w->webhook_url, fresh->webhook_url);
	SWAP(w->policy_json, fresh->policy_json);
	egs_workspace_free(fresh);
	egs_state_touch(st, EGS_KIND_WORKSPACE, w);
}

static void *find(const struct egs_state *st, enum egs_kind kind, const char *key)
{
	switch (kind) {
	case EGS_KIND_PROJECT: return egs_state_project(st, key);
	case EGS_KIND_CLUSTER: return egs_state_cluster(st, key);
	case EGS_KIND_APIKEY: return egs_state_apikey(st, key);
	default: return egs_state_doc(st, kind, key);
	}
}

static enum egs_err add(struct egs_state *st, enum egs_kind kind, void *obj)
{
	switch (kind) {
	case EGS_KIND_PROJECT: return egs_state_add_project(st, obj);
	case EGS_KIND_CLUSTER: return egs_state_add_cluster(st, obj);
	case EGS_KIND_APIKEY: return egs_state_add_apikey(st, obj);
	default: return egs_state_add_doc(st, kind, obj);
	}
}

static void free_obj(enum egs_kind kind, void *obj)
{
	switch (kind) {
	case EGS_KIND_PROJECT: egs_project_free(obj); break;
	case EGS_KIND_CLUSTER: egs_cluster_free(obj); break;
	case EGS_KIND_APIKEY: egs_apikey_free(obj); break;
	default: egs_doc_free(obj); break;
	}
}

/* Projects, clusters, API keys and documents: the old object goes, the fresh one comes. */
static void replace(struct apply *a, enum egs_kind kind, const char *key, void *fresh)
{
	struct egs_state *st = &a->srv->st;
	void *old = find(st, kind, key);
	if (old && fresh && kind == EGS_KIND_CLUSTER) {
		const struct egs_cluster *o = old;
		struct egs_cluster *c = fresh;
		c->last_seen = o->last_seen;
		c->slice_access = o->slice_access;
	}
	if (old)
		egs_state_del(st, kind, old);
	if (!fresh)
		return;
	if (add(st, kind, fresh) != EGS_OK) {
		free_obj(kind, fresh);
		a->reload = true;
		return;
	}
	egs_state_touch(st, kind, fresh);
}

static void on_row(void *ctx, enum egs_kind kind, const char *key, void *obj)
{
	struct apply *a = ctx;
	a->rows++;
	switch (kind) {
	case EGS_KIND_GPR: apply_gpr(a, key, obj); break;
	case EGS_KIND_NODE: apply_node(a, key, obj); break;
	case EGS_KIND_WORKSPACE: apply_workspace(a, key, obj); break;
	default: replace(a, kind, key, obj); break;
	}
}

static void on_event(void *ctx, struct egs_event *ev)
{
	struct apply *a = ctx;
	struct egs_state *st = &a->srv->st;
	a->events++;
	for (size_t i = st->events_len; i-- > 0;) { /* a repeat is among the newest */
		struct egs_event *e = st->events[(st->events_head + i) % st->cfg.event_retention];
		if (e->id < ev->id)
			break;
		if (e->id == ev->id) {
			e->time = ev->time;
			e->count = ev->count;
			SWAP(e->message, ev->message);
			egs_event_free(ev);
			return;
		}
	}
	if (st->events_len && ev->id < st->events[(st->events_head + st->events_len - 1) % st->cfg.event_retention]->id) {
		egs_event_free(ev); /* older than the ring's newest and not in it: left the ring already */
		return;
	}
	egs_state_add_event(st, ev);
	if (a->srv->obs)
		egs_events_broadcast(a->srv, ev);
}

enum egs_err egs_follow_apply(struct egs_server *srv, size_t *rows)
{
	struct apply a = { .srv = srv, .now = egs_now(srv) };
	enum egs_err err = egs_store_follow(srv->store, on_row, on_event, &a);
	egs_state_clear_changes(&srv->st); /* frees what was replaced; nothing is committed */
	egs_views_changed(srv);
	if (err || a.reload)
		return err ? err : EGS_ERR_CONFLICT;
	if (a.holds) { /* as a load does: the nodes' held_until from the GPRs' holds */
		void *v;
		for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);)
			((struct egs_node *)v)->held_until = 0;
		egs_held_restore(&srv->st);
	}
	if (rows)
		*rows = a.rows + a.events;
	return a.policies ? egs_policy_load_workspaces(srv) : EGS_OK;
}
