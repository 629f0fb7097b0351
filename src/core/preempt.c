/*
 * preempt.c: a high-priority request evicts the cheapest set of opted-in lower-priority GPRs; see
 * preempt.h.
 */
#include "core/preempt.h"

#include "core/gpr.h"
#include "core/held.h"
#include "core/sched.h"
#include "core/share_gpr.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waiting high-band GPRs examined per run (each costs a pass over the nodes of its clusters). */
#define PREEMPT_TRIES 32

struct victim {
	struct egs_gpr *g;
	size_t nodes;  /* its nodes that the request could use */
	double lost;   /* GPU-seconds it has run */
	bool chosen;
};

/* A node the request could use that is free or on its way back (its holder is no longer
 * provisioned: releasing, evicted, or finished). */
static bool coming(const struct egs_state *st, const struct egs_node *n, int64_t now)
{
	if (!n->gpr_id[0]) /* shares (core/share_gpr.h) leave at their own exits; a held release
			    * (core/held.h) counts as still running, as it does for the plan */
		return !egs_share_node_busy(n) && !egs_node_held(n, now);
	const struct egs_gpr *h = egs_state_gpr(st, n->gpr_id);
	return !h || (h->state != EGS_GPR_PROVISIONED && h->state != EGS_GPR_PROVISIONING);
}

static bool usable(const struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
		   const struct egs_node *n, const char *cluster, int64_t now)
{
	return !strcmp(n->cluster, cluster) && egs_node_schedulable(st, n, now) && egs_node_matches(g, ws, n);
}

static int cmp_lost_per_node(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	double lx = x->lost / (double)x->nodes, ly = y->lost / (double)y->nodes;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->g->id, y->g->id);
}

/* Chooses victims in cluster for g (marking v[i].chosen); returns the GPU-seconds lost, or -1 when
 * no set frees enough nodes or none is needed. */
static double choose(struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
		     const char *cluster, struct victim *v, size_t *nv, int64_t now)
{
	size_t have = 0;
	void *p;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &p);) {
		const struct egs_node *n = p;
		if (usable(st, g, ws, n, cluster, now) && coming(st, n, now))
			have++;
	}
	if (have >= (size_t)g->node_count)
		return -1; /* enough nodes are free or on their way: it waits for them, or for its turn */
	*nv = 0;
	for (size_t i = 0; i < st->active.len; i++) {
		struct egs_gpr *a = st->active.items[i];
		if (a->state != EGS_GPR_PROVISIONED || !(a->flags & EGS_GPRF_EVICTION) || a->priority >= g->priority ||
		    now - a->start_ts < st->cfg.preempt_min_runtime_s || strcmp(a->cluster, cluster) != 0)
			continue;
		size_t m = 0;
		for (size_t k = 0; k < a->nodes.n; k++) {
			const struct egs_node *n = egs_map_get(&st->nodes, a->nodes.v[k]);
			m += n && !strcmp(n->gpr_id, a->id) && usable(st, g, ws, n, cluster, now);
		}
		if (m)
			v[(*nv)++] = (struct victim){ a, m, (double)a->node_count * a->gpus_per_node * (double)(now - a->start_ts),
						      false };
	}
	qsort(v, *nv, sizeof(*v), cmp_lost_per_node);
	size_t need = (size_t)g->node_count - have, got = 0;
	for (size_t i = 0; i < *nv && got < need; i++) {
		v[i].chosen = true;
		got += v[i].nodes;
	}
	if (got < need)
		return -1;
	/* Prune: drop the costliest members the set does not need. */
	for (size_t i = *nv; i-- > 0;)
		if (v[i].chosen && got - v[i].nodes >= need) {
			v[i].chosen = false;
			got -= v[i].nodes;
		}
	double lost = 0;
	for (size_t i = 0; i < *nv; i++)
		if (v[i].chosen)
			lost += v[i].lost;
	return lost;
}

static bool workspace_busy(const struct egs_state *st, const char *ws)
{
	for (size_t i = 0; i < st->active.len; i++)
		if (!strcmp(((const struct egs_gpr *)st->active.items[i])->workspace, ws))
			return true;
	return false;
}

/* Tries to make room for g; returns how many GPRs it evicted. */
static size_t preempt_for(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
	if (!ws || workspace_busy(st, g->workspace))
		return 0;
	size_t cap = st->active.len + 1, nv = 0, best_nv = 0;
	struct victim *v = egs_calloc(cap, sizeof(*v)), *best = egs_calloc(cap, sizeof(*best));
	double best_lost = -1;
	for (size_t c = 0; c < ws->clusters.n; c++) {
		const char *cluster = ws->clusters.v[c];
		if (g->cluster[0] && strcmp(g->cluster, cluster) != 0)
			continue;
		double lost = choose(st, g, ws, cluster, v, &nv, now);
		if (lost >= 0 && (best_lost < 0 || lost < best_lost)) {
			best_lost = lost;
			memcpy(best, v, nv * sizeof(*v));
			best_nv = nv;
		}
	}
	size_t evicted = 0;
	char names[300] = "";
	for (size_t i = 0; i < best_nv; i++) {
		if (!best[i].chosen)
			continue;
		struct egs_gpr *a = best[i].g;
		char why[200];
		snprintf(why, sizeof(why), "preempted by GPR %s (priority %d) after running %llds", g->name, g->priority,
			 (long long)(now - a->start_ts));
		egs_strlcpy(a->evicted_by, g->id, sizeof(a->evicted_by));
		EGS_ASSERT(egs_gpr_evict(st, a, why, now) == EGS_OK);
		size_t len = strlen(names);
		snprintf(names + len, sizeof(names) - len, "%s%s", evicted ? ", " : "", a->name);
		evicted++;
	}
	if (evicted)
		egs_state_event(st, now, "Warning", "Preempting", "GPR", g->id, g->workspace,
				"GPR %s (priority %d) evicts %zu lower-priority GPR(s) to start: %s", g->name, g->priority,
				evicted, names);
	free(v);
	free(best);
	return evicted;
}

size_t egs_preempt(struct egs_state *st, int64_t now)
{
	size_t nq = egs_queue_len(&st->queue);
	if (!nq || egs_queue_peek(&st->queue)->priority < EGS_PRIORITY_HIGH)
		return 0;
	/* Cheap first: the highest priority any GPR could be evicted by (none: nothing to do). */
	int lowest = INT_MAX;
	for (size_t i = 0; i < st->active.len; i++) {
		const struct egs_gpr *a = st->active.items[i];
		if (a->state == EGS_GPR_PROVISIONED && (a->flags & EGS_GPRF_EVICTION) &&
		    now - a->start_ts >= st->cfg.preempt_min_runtime_s && a->priority < lowest)
			lowest = a->priority;
	}
	if (lowest == INT_MAX)
		return 0;
	struct egs_gpr **order = egs_malloc(nq * sizeof(*order));
	egs_queue_sorted(&st->queue, order);
	size_t evicted = 0, tried = 0;
	for (size_t i = 0; i < nq && !evicted && tried < PREEMPT_TRIES && order[i]->priority >= EGS_PRIORITY_HIGH; i++) {
		struct egs_gpr *g = order[i];
		if ((g->est_start && g->est_start <= now) || g->priority <= lowest || g->share_centi)
			continue; /* it starts now, or its nodes are on their way; or no one is below it; or it
				   * asks for shares, which evicting whole nodes is not made for */
		tried++;
		evicted = preempt_for(st, g, now);
	}
	free(order);
	return evicted;
}
