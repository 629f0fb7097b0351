/*
 * sched_kept.c: what the kept plan (the last walk's final state and snapshots) serves without a
 * full walk: a walk resumed from the snapshot before the first create (walk_resume), a GPR
 * appended at the end of the queue, wait-time queries, and the side-effect-free dry walks.
 */
#include "core/sched_int.h"

#include "core/fair.h"
#include "core/preempt.h"

#include <stdlib.h>
#include <string.h>

/* The first position of p's order that does not go before the first of st's arrivals. */
static size_t arrival_pos(const struct egs_plan *p, const struct egs_state *st)
{
	size_t lo = 0, hi = p->norder;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct egs_gpr *g = p->order[mid];
		bool before = g->priority != st->arrivals.priority ? g->priority > st->arrivals.priority
			      : g->fair != st->arrivals.fair      ? g->fair < st->arrivals.fair
								  : g->seq < st->arrivals.seq;
		if (before)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Puts the slots of the nodes g holds into p->chosen; false when one is not in the plan. */
static bool started_nodes(struct egs_plan *p, const struct egs_gpr *g)
{
	if ((size_t)g->node_count != g->nodes.n)
		return false;
	for (size_t i = 0; i < g->nodes.n; i++) {
		const struct egs_node *n = egs_map_get(&p->st->nodes, g->nodes.v[i]);
		p->chosen[i] = NULL;
		for (size_t j = 0; n && j < p->nslots && !p->chosen[i]; j++)
			if (p->slots[j].n == n)
				p->chosen[i] = &p->slots[j];
		if (!p->chosen[i])
			return false;
	}
	return true;
}

/*
 * Incremental planning.  When the only changes since the kept plan p was made are creates (queued,
 * not shared), nothing before the first of them in queue order can change: that part of the walk
 * would place the same GPRs on the same state.  So p is rebuilt from its last snapshot before
 * that place (as a wait-time query does: the GPRs the walk started after the snapshot hold their
 * nodes from their start) and the walk goes on from there over the queue as it is now.  Also
 * required: p still holds at now (no due time has come; if a GPR was placed at p's now without
 * starting, now is p's now), no held releases (their trial walks compare whole walks), no share
 * timelines.  Returns false (p untouched) when p cannot serve; else p is set up for the walk, its
 * first step restoring the snapshot (egs__walk_restore: at 100,000 x 10,000 it was most of the
 * run's set-up).  tests/unit/test_sched_incr.c checks that the result equals a full walk's.
 */
bool egs__walk_resume(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next)
{
	if (!p->valid || p->walking || p->st != st || p->shared || p->foreign || !st->arrivals.any ||
	    st->held.len || now < p->now || p->serial != st->inventory_gen + 1 ||
	    st->generation - p->gen_seen != st->arrivals.bumps - p->arr_seen)
		return false;
	size_t lo = arrival_pos(p, st), si = p->nsnaps, nst = 0;
	while (si > 0 && p->snaps[si - 1].pos > lo)
		si--;
	if (si == 0 || p->snaps[si - 1].pos == 0)
		return false; /* the first change comes before the first snapshot worth having */
	const struct snap *s = &p->snaps[si - 1];
	/* Something before it is due now, or was placed at p's now; or a hole it recorded is past
	 * now: a walk at now would not have recorded it, and holes are bounded (it took room). */
	if (now >= s->run_next || (now != p->now && (s->stuck || s->hole_end_min <= now)))
		return false;
	for (; nst < p->nstarted && p->started[nst].pos < s->pos; nst++)
		;
	for (size_t j = nst; j < p->nstarted; j++)
		if (p->started[j].g->state != EGS_GPR_PROVISIONING)
			return false;
	/* The restore is the walk's first step (egs__walk_restore), a piece of its own. */
	struct egs_plan *old = egs_malloc(sizeof(*old));
	*old = *p;
	memset(p, 0, sizeof(*p));
	p->old = old;
	p->st = st;
	p->now = now;
	p->base_next = base_next;
	p->keep = p->walking = true;
	p->resume_snap = si;
	p->gen_seen = st->generation;
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
	return true;
}

bool egs__walk_restore(struct egs_plan *p)
{
	struct egs_plan *k = p->old; /* the kept plan */
	size_t si = p->resume_snap, nst = 0;
	const struct snap *s = &k->snaps[si - 1];
	p->resume_snap = 0;
	for (; nst < k->nstarted && k->started[nst].pos < s->pos; nst++)
		;
	struct egs_plan q;
	egs__snap_restore_take(&q, k, s, p->now); /* in place: k only keeps what q does not take */
	for (size_t j = nst; j < k->nstarted; j++) { /* as a full walk sees them: provisioning */
		const struct egs_gpr *g = k->started[j].g;
		struct wsinfo *w = egs__ws_get(&q, g->workspace);
		if (g->share_centi || !started_nodes(&q, g)) {
			egs__plan_cleanup(&q);
			return false;
		}
		egs__reserve(&q, g, w, g->phase_since);
		w->active = true;
		k->started[j].pos = s->pos; /* carried: for a snapshot up to s, it started after it */
	}
	q.layout = k->layout;
	q.keep = true;
	q.walking = q.splice = true;
	q.from = q.cursor = q.norder = s->pos;
	q.order = k->order; /* the GPRs before s->pos keep their places and estimates */
	q.caporder = k->caporder;
	q.last = q.order[s->pos - 1];
	q.started = k->started;
	q.nstarted = k->nstarted;
	q.capstarted = k->capstarted;
	egs__snap_spare(&q, k->snaps + si, k->nsnaps - si); /* retaken as the walk goes on */
	q.snaps = k->snaps;
	q.nsnaps = si;
	q.stuck = s->stuck;
	q.hole_end_min = s->hole_end_min;
	q.base_next = p->base_next;
	q.run_next = egs__stale_next(&q, p->base_next < s->run_next ? p->base_next : s->run_next);
	q.gen_seen = p->gen_seen; /* what changed since the run began makes the walk stale */
	q.arr_seen = p->arr_seen;
	q.hold_seen = p->hold_seen;
	k->order = NULL;
	k->started = NULL;
	k->snaps = NULL;
	k->nsnaps = 0;
	q.old = k; /* what q did not take: freed by the walk's next step */
	*p = q;
	return true;
}

int64_t egs_sched_append(struct egs_state *st, struct egs_gpr *g, int64_t now, struct egs_plan *p)
{
	if (!p || !p->valid || p->walking || p->st != st || now < p->now || g->share_centi ||
	    (p->last && !egs_queue_before(p->last, g)) || g->state != EGS_GPR_QUEUED ||
	    g->priority >= EGS_PRIORITY_HIGH) /* it may preempt: egs_sched_run decides */
		return EGS_NEVER - 1;
	/* Only creates since the plan was made (g among them): a later run may resume from it. */
	bool arrivals_only = st->generation - p->gen_seen == st->arrivals.bumps - p->arr_seen;
	p->now = now;
	egs__order_push(p, g);
	int64_t t = egs__plan_one(p, g);
	if (g->state == EGS_GPR_PROVISIONING)
		egs__started_push(p, p->norder - 1, g);
	else if (t == now)
		p->stuck = true;
	else if (t != EGS_NEVER && t < p->run_next)
		p->run_next = t;
	p->foreign |= !arrivals_only;
	p->gen_seen = st->generation; /* g's own start, if it started, is the plan's doing */
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
	st->arrivals.any = false; /* the plan holds g */
	return t;
}

void egs_plan_invalidate(struct egs_plan *p)
{
	if (p)
		p->valid = false;
}

/* True when queued GPR q goes before a hypothetical GPR of priority prio and fair key fair: it
 * would be the newest of its priority and key. */
static bool before_probe(const struct egs_gpr *q, int prio, double fair)
{
	return q->priority > prio || (q->priority == prio && q->fair <= fair);
}

/* Places each probe on plan b (which stands right before where they go) without reserving. */
static void place_probes(struct egs_plan *b, const struct egs_gpr *const *probes, size_t n, int64_t now,
			 int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	for (size_t j = 0; j < n; j++) {
		int64_t t = egs__place(b, probes[j], egs__ws_get(b, probes[j]->workspace), NULL);
		if (t != EGS_NEVER && t < now)
			t = now;
		out[j] = t;
		if (clusters)
			egs_strlcpy(clusters[j], t != EGS_NEVER ? b->chosen[0]->n->cluster : "", EGS_NAME_MAX);
	}
}

/* The fast path: positions a plan from the kept one (its last snapshot before the probes' place,
 * then at most SNAP_EVERY GPRs replayed); false when the kept plan cannot serve. */
static bool estimate_kept(struct egs_plan *kept, const struct egs_gpr *const *probes, size_t n, int64_t now,
			  double fair, int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	if (!kept || !kept->valid || now < kept->now || kept->shared)
		return false; /* snapshots keep no share timelines: a fresh walk answers */
	for (size_t j = 0; j < n; j++)
		if (probes[j]->share_centi)
			return false;
	int prio = probes[0]->priority;
	size_t lo = 0, hi = kept->norder; /* the first entry that does not go before the probes */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (before_probe(kept->order[mid], prio, fair))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == kept->norder) { /* they go last: the kept plan stands right there */
		place_probes(kept, probes, n, now, out, clusters);
		return true;
	}
	const struct snap *s = NULL;
	for (size_t i = 0; i < kept->nsnaps && kept->snaps[i].pos <= lo; i++)
		s = &kept->snaps[i];
	if (!s)
		return false;
	struct egs_plan q;
	egs__snap_restore(&q, kept, s, now);
	/* The GPRs the walk started after the snapshot, wherever they stand in the queue, hold their
	 * own nodes from when they started: a full plan now sees them provisioning since then, before
	 * it places anyone. */
	for (size_t j = 0; j < kept->nstarted; j++) {
		if (kept->started[j].pos < s->pos)
			continue;
		const struct egs_gpr *g = kept->started[j].g;
		if (g->state != EGS_GPR_PROVISIONING)
			continue;
		if (!started_nodes(&q, g)) {
			egs__plan_cleanup(&q);
			return false;
		}
		egs__reserve(&q, g, egs__ws_get(&q, g->workspace), g->phase_since);
	}
	for (size_t i = s->pos; i < lo; i++) {
		struct egs_gpr *g = kept->order[i];
		egs__gpr_prefetch(kept->order, i, lo);
		if (g->state != EGS_GPR_PROVISIONING)
			egs__place_dry(&q, g);
	}
	place_probes(&q, probes, n, now, out, clusters);
	egs__plan_cleanup(&q);
	return true;
}

void egs_sched_estimates(struct egs_state *st, const struct egs_gpr *const *probes, size_t n, int64_t now,
			 struct egs_plan *kept, int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	if (!n)
		return;
	double fair = egs_fair_key(st, probes[0]->workspace);
	if (kept && kept->st == st && estimate_kept(kept, probes, n, now, fair, out, clusters))
		return;
	struct egs_plan p;
	egs__plan_init(&p, st, now);
	size_t nq;
	struct egs_gpr **order = egs__plan_order(st, &nq, NULL);
	for (size_t i = 0; i < nq && before_probe(order[i], probes[0]->priority, fair); i++) {
		egs__gpr_prefetch(order, i, nq);
		egs__place_dry(&p, order[i]);
	}
	free(order);
	place_probes(&p, probes, n, now, out, clusters);
	egs__plan_cleanup(&p);
}

int64_t egs_sched_estimate(struct egs_state *st, const struct egs_gpr *g, int64_t now, char *cluster_out)
{
	int64_t t;
	char cl[1][EGS_NAME_MAX];
	egs_sched_estimates(st, &g, 1, now, NULL, &t, cl);
	if (cluster_out && t != EGS_NEVER)
		egs_strlcpy(cluster_out, cl[0], EGS_NAME_MAX);
	return t;
}

/* egs_sched_dry_starts, stopping at the first GPR that starts later than in base (when base is not
 * NULL); returns true when one does (out is then filled only up to it). */
static bool dry_walk(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order, const int64_t *base)
{
	struct egs_plan p;
	egs__plan_init(&p, st, now);
	size_t n;
	struct egs_gpr **o = egs__plan_order(st, &n, NULL);
	bool later = false;
	for (size_t i = 0, k = 0; i < n && !later; i++) {
		egs__gpr_prefetch(o, i, n);
		int64_t t = egs__place_dry(&p, o[i]); /* ghosts too: they reserve, and are not reported */
		if (o[i]->ghost)
			continue;
		if (order)
			order[k] = o[i];
		out[k] = t;
		later = base && out[k] > base[k];
		k++;
	}
	free(o);
	egs__plan_cleanup(&p);
	return later;
}

void egs_sched_dry_starts(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order)
{
	dry_walk(st, now, out, order, NULL);
}
