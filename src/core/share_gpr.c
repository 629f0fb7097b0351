/*
 * share_gpr.c: shared GPRs on the state; see share_gpr.h.  Pure: no I/O, time comes in as `now`.
 */
#include "core/share_gpr.h"

#include "core/gpr.h"
#include "core/sched.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool egs_node_can_share(const struct egs_node *n)
{
	return n->sharing && n->gpu_count > 0 && n->gpu_count <= EGS_SHARE_DEV_MAX && n->n_gpus == n->gpu_count;
}

bool egs_share_node_busy(const struct egs_node *n)
{
	return n->shared.len > 0 || n->attached_shared.n > 0;
}

static bool holds_id(const struct egs_node *n, const char *id)
{
	for (size_t i = 0; i < n->shared.len; i++)
		if (!strcmp(((const struct egs_gpr *)n->shared.items[i])->id, id))
			return true;
	return false;
}

bool egs_share_node_stale(const struct egs_node *n)
{
	for (size_t i = 0; i < n->attached_shared.n; i++)
		if (!holds_id(n, n->attached_shared.v[i]))
			return true;
	return false;
}

static int device_index(const struct egs_node *n, const char *uuid)
{
	for (int i = 0; i < n->n_gpus && i < EGS_SHARE_DEV_MAX; i++)
		if (!strcmp(n->gpus[i].uuid, uuid))
			return i;
	return -1;
}

void egs_share_takes(const struct egs_node *n, const struct egs_gpr *g, int *take)
{
	memset(take, 0, EGS_SHARE_DEV_MAX * sizeof(*take));
	for (int k = 0; k < g->n_shares; k++) {
		int d = device_index(n, g->shares[k].uuid);
		if (d >= 0)
			take[d] += g->shares[k].centi;
	}
}

void egs_share_node_alloc(const struct egs_node *n, int *alloc)
{
	int ndev = n->gpu_count < EGS_SHARE_DEV_MAX ? n->gpu_count : EGS_SHARE_DEV_MAX;
	memset(alloc, 0, EGS_SHARE_DEV_MAX * sizeof(*alloc));
	if (n->gpr_id[0] || n->attached_gpr[0]) {
		for (int d = 0; d < ndev; d++)
			alloc[d] = EGS_SHARE_WHOLE;
		return;
	}
	int take[EGS_SHARE_DEV_MAX];
	for (size_t i = 0; i < n->shared.len; i++) {
		egs_share_takes(n, n->shared.items[i], take);
		for (int d = 0; d < ndev; d++)
			alloc[d] += take[d];
	}
}

bool egs_share_fits_now(const struct egs_node *n, const int *take)
{
	if (n->gpr_id[0] || n->attached_gpr[0] || egs_share_node_stale(n))
		return false;
	int alloc[EGS_SHARE_DEV_MAX];
	egs_share_node_alloc(n, alloc);
	for (int d = 0; d < n->gpu_count && d < EGS_SHARE_DEV_MAX; d++)
		if (alloc[d] + take[d] > EGS_SHARE_WHOLE)
			return false;
	return true;
}

void egs_share_start(struct egs_state *st, struct egs_gpr *g, struct egs_node *n, const int *take)
{
	(void)st;
	EGS_ASSERT(g->share_centi > 0 && egs_node_can_share(n));
	egs_strlist_cleanup(&g->nodes);
	egs_strlist_add(&g->nodes, n->key);
	free(g->shares);
	g->shares = egs_calloc((size_t)n->gpu_count + 1, sizeof(*g->shares));
	g->n_shares = 0;
	for (int d = 0; d < n->gpu_count; d++) {
		if (!take[d])
			continue;
		struct egs_gpu_share *s = &g->shares[g->n_shares++];
		egs_strlcpy(s->uuid, n->gpus[d].uuid, sizeof(s->uuid));
		s->centi = take[d];
	}
	EGS_ASSERT(g->n_shares > 0);
	if (!g->cluster[0])
		egs_strlcpy(g->cluster, n->cluster, sizeof(g->cluster));
}

static struct egs_node *share_target(const struct egs_state *st, const struct egs_gpr *g)
{
	return g->n_shares && g->nodes.n == 1 ? egs_map_get(&st->nodes, g->nodes.v[0]) : NULL;
}

/* Does g hold its shares of n in its state?  While Releasing, only until its agent detached it. */
static bool holds(const struct egs_gpr *g, const struct egs_node *n)
{
	switch (g->state) {
	case EGS_GPR_PROVISIONING:
	case EGS_GPR_PROVISIONED: return true;
	case EGS_GPR_RELEASING: return egs_strlist_has(&n->attached_shared, g->id);
	default: return false;
	}
}

static void note_free(struct egs_node *n, int64_t now)
{
	if (now && !n->gpr_id[0] && !n->attached_gpr[0] && !egs_share_node_busy(n))
		n->free_since = now;
}

void egs_share_sync(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (!g->share_centi)
		return;
	if (g->state == EGS_GPR_QUEUED || g->state == EGS_GPR_PENDING) {
		free(g->shares); /* the next start takes new ones */
		g->shares = NULL;
		g->n_shares = 0;
	}
	struct egs_node *t = share_target(st, g), *old = g->share_node;
	bool h = t && holds(g, t);
	if (old && (!h || old != t)) {
		egs_vec_remove(&old->shared, g);
		g->share_node = NULL;
		note_free(old, now);
		st->generation++;
	}
	if (h && !g->share_node) {
		egs_vec_push(&t->shared, g);
		g->share_node = t;
		st->generation++;
	}
}

void egs_share_loaded(struct egs_state *st, struct egs_gpr *g)
{
	if (!g->share_centi)
		return;
	struct egs_node *n = share_target(st, g);
	if (n && (g->state == EGS_GPR_PROVISIONED || g->state == EGS_GPR_RELEASING) &&
	    !egs_strlist_has(&n->attached_shared, g->id))
		egs_strlist_add(&n->attached_shared, g->id);
	egs_share_sync(st, g, 0);
}

bool egs_share_attached(const struct egs_state *st, const struct egs_gpr *g)
{
	const struct egs_node *n = g->nodes.n == 1 ? egs_map_get(&st->nodes, g->nodes.v[0]) : NULL;
	return n && egs_strlist_has(&n->attached_shared, g->id);
}

/* Follows a change of what g's agent reports: Provisioning and attached -> Provisioned, Releasing and
 * detached -> Complete. */
static void settle(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	egs_share_sync(st, g, now);
	bool attached = egs_share_attached(st, g);
	if (g->state == EGS_GPR_PROVISIONING && attached) {
		g->start_ts = now;
		g->exit_at = now + g->exit_duration_s;
		char exit_s[32];
		egs_time_format(g->exit_at, exit_s, sizeof(exit_s));
		egs_gpr_set_state(st, g, EGS_GPR_PROVISIONED, now, "Provisioned",
				  "GPR %s provisioned with %d.%02d shared GPU(s) of node %s into workspace %s until %s",
				  g->name, g->share_centi / EGS_SHARE_WHOLE, g->share_centi % EGS_SHARE_WHOLE,
				  g->nodes.v[0], g->workspace, exit_s);
	} else if (g->state == EGS_GPR_RELEASING && !attached) {
		g->completion_ts = now;
		egs_gpr_set_state(st, g, EGS_GPR_COMPLETE, now, "Complete", "GPR %s complete; its GPU shares returned",
				  g->name);
	}
}

static void settle_id(struct egs_state *st, const char *id, int64_t now)
{
	struct egs_gpr *g = egs_state_gpr(st, id);
	if (g && g->share_centi)
		settle(st, g, now);
}

void egs_share_set_attached(struct egs_state *st, struct egs_node *n, const struct egs_strlist *ids, int64_t now)
{
	struct egs_strlist old = n->attached_shared;
	n->attached_shared = (struct egs_strlist){ 0 };
	for (size_t i = 0; i < ids->n; i++)
		if (!egs_strlist_has(&n->attached_shared, ids->v[i]))
			egs_strlist_add(&n->attached_shared, ids->v[i]);
	bool changed = old.n != n->attached_shared.n;
	for (size_t i = 0; i < old.n && !changed; i++)
		changed = !egs_strlist_has(&n->attached_shared, old.v[i]);
	if (changed) {
		st->generation++;
		/* Copy: a transition may not edit n->attached_shared, but it is cheap to be sure. */
		struct egs_strlist now_ids = { 0 };
		egs_strlist_copy(&now_ids, &n->attached_shared);
		for (size_t i = 0; i < old.n; i++)
			settle_id(st, old.v[i], now);
		for (size_t i = 0; i < now_ids.n; i++)
			if (!egs_strlist_has(&old, now_ids.v[i]))
				settle_id(st, now_ids.v[i], now);
		egs_strlist_cleanup(&now_ids);
		note_free(n, now);
	}
	egs_strlist_cleanup(&old);
}

void egs_share_note_attached(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool attached,
			     int64_t now)
{
	if (egs_strlist_has(&n->attached_shared, gpr_id) == attached)
		return;
	if (attached)
		egs_strlist_add(&n->attached_shared, gpr_id);
	else
		egs_strlist_remove(&n->attached_shared, gpr_id);
	st->generation++;
	settle_id(st, gpr_id, now);
	note_free(n, now);
}

/* The node of g's cluster where g's request fits now, packing first (nodes already holding shares),
 * then by name; NULL when none.  take receives the shares there. */
static struct egs_node *replacement(struct egs_state *st, const struct egs_gpr *g, const struct egs_node *failed,
				    int64_t now, int *take)
{
	const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
	struct egs_node *best = NULL;
	int alloc[EGS_SHARE_DEV_MAX], room[EGS_SHARE_DEV_MAX], t[EGS_SHARE_DEV_MAX];
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *m = v;
		if (m == failed || strcmp(m->cluster, failed->cluster) != 0 || !egs_node_can_share(m) ||
		    !egs_node_schedulable(st, m, now) || !egs_node_matches(g, ws, m))
			continue;
		egs_share_node_alloc(m, alloc);
		for (int d = 0; d < m->gpu_count; d++)
			room[d] = EGS_SHARE_WHOLE - alloc[d];
		if (!egs_share_fit(room, m->gpu_count, g->share_centi, t) || !egs_share_fits_now(m, t))
			continue;
		bool packed = m->shared.len > 0, best_packed = best && best->shared.len > 0;
		if (!best || packed > best_packed || (packed == best_packed && strcmp(m->name, best->name) < 0)) {
			best = m;
			memcpy(take, t, sizeof(t));
		}
	}
	return best;
}

void egs_share_remediate(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	struct egs_node *n = g->nodes.n == 1 ? egs_map_get(&st->nodes, g->nodes.v[0]) : NULL;
	if (!n)
		return;
	if (egs_node_schedulable(st, n, now)) {
		n->failure_noted = 0;
		return;
	}
	const char *why = n->health != EGS_HEALTH_HEALTHY ? egs_health_name(n->health) : "not heard from";
	int take[EGS_SHARE_DEV_MAX];
	struct egs_node *r = replacement(st, g, n, now, take);
	if (!r) {
		if (!n->failure_noted) {
			n->failure_noted = now;
			egs_state_event(st, now, "Warning", "NodeFailed", "GPR", g->id, g->workspace,
					"node %s of GPR %s is %s and no healthy node has room for its GPU shares", n->name,
					g->name, why);
		}
		return;
	}
	n->failure_noted = 0;
	egs_share_start(st, g, r, take);
	egs_share_sync(st, g, now);
	egs_state_touch(st, EGS_KIND_GPR, g);
	egs_state_event(st, now, "Warning", "NodeReplaced", "GPR", g->id, g->workspace,
			"node %s of GPR %s is %s; its GPU shares moved to node %s", n->name, g->name, why, r->name);
}
