/*
 * sched_held.c: the trials of held early releases before a run's walk (core/held.h): a walk with
 * the holds as they are and one with some lifted go side by side over the queue, in the run's
 * slices, and the holds are applied when no queued GPR starts later.
 */
#include "core/sched_int.h"

#include "core/held.h"

#include <stdlib.h>
#include <string.h>

/* Held releases tried one by one per run, after all of them at once failed: each try is a walk. */
#define HELD_TRIES 2

/* After a restart: true (and the wait is over for good) once every node has reported since the start
 * or the settle time has come. */
static bool held_settled(struct egs_state *st, int64_t now)
{
	void *v;
	if (now < st->held_settle)
		for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);)
			if (!((const struct egs_node *)v)->last_heartbeat)
				return false;
	st->held_settle = 0;
	return true;
}

void egs__trial_free(struct trial *t)
{
	egs__plan_cleanup(&t->base);
	egs__plan_cleanup(&t->lift);
	free(t->order);
	free(t->tried);
	free(t->lift_t);
	free(t->start_nodes);
	free(t);
}

/* Moves the snapshots' buffers of t's lift walk (an adopt walk takes them) to p's spares. */
void egs__trial_spares(struct egs_plan *p, struct trial *t)
{
	struct egs_plan *l = &t->lift;
	egs__snap_spare(p, l->snaps, l->nsnaps);
	egs__snap_spare(p, l->spare, l->nspare);
	l->nsnaps = l->nspare = 0;
}

/* The place of hold g in st->held, SIZE_MAX when it is not there. */
static size_t held_index(const struct egs_state *st, const struct egs_gpr *g)
{
	for (size_t i = 0; i < st->held.len; i++)
		if (st->held.items[i] == g)
			return i;
	return SIZE_MAX;
}

/* The checks before any trial: expires holds whose time has come, drops them all when nobody
 * waits; true when there are holds to try (something changed since the last tries). */
bool egs__held_pending(struct egs_state *st, int64_t now)
{
	egs_held_expire(st, now);
	if (st->held_settle && !held_settled(st, now))
		return false; /* just restarted: the walks would compare nodes not heard from yet (core/held.h) */
	if (st->held.len && st->generation == st->held_gen)
		return false; /* nothing changed since the last try: the same walks would give the same answer */
	if (!st->held.len || !egs_queue_len(&st->queue)) {
		while (st->held.len) /* nobody waits: nobody can be delayed */
			egs_held_drop(st, 0);
		return false;
	}
	return true;
}

/*
 * True when the kept plan p is the walk with the holds at now: the only changes since it was made
 * are early releases and cancels that left a hold (state.h: arrivals.hold_bumps), which the walk
 * sees as before them, and time has not moved past anything it depends on (as for walk_resume).
 * Then the first trial compares the walk with the holds lifted against the estimates p gave every
 * queued GPR, and walks once instead of twice.
 */
bool egs__held_kept_base(const struct egs_plan *p, const struct egs_state *st, int64_t now)
{
	return p->valid && !p->walking && !p->stale && !p->foreign && !p->shared && p->st == st &&
	       !st->arrivals.any && st->arrivals.bumps == p->arr_seen &&
	       st->generation - p->gen_seen == st->arrivals.hold_bumps - p->hold_seen && now >= p->now &&
	       now < p->run_next && (now == p->now || (!p->stuck && p->hole_end_min > now));
}

/* Sets up the next trial in p->trial: all holds lifted, or the first one alone. */
void egs__trial_begin(struct egs_plan *p, bool all)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	egs__trial_spares(p, t);
	egs__plan_cleanup(&t->base);
	egs__plan_cleanup(&t->lift);
	free(t->order);
	t->order = NULL;
	t->n = t->cursor = 0;
	t->phase = 0;
	t->all = all;
	t->kept_base = false;
	/* Only when every hold is tried: after it passes none is left, so the run's walk would
	 * walk the very state lift walked (the ghosts dropped, as lift skipped them). */
	t->adopt = all && p->keep && !st->cfg.plan_no_adopt;
	free(t->lift_t);
	t->lift_t = NULL;
	t->nstart_nodes = t->nghosts = 0;
	t->tried = egs_realloc(t->tried, (st->held.len + 1) * sizeof(*t->tried));
	t->ntried = all ? st->held.len : 1;
	memcpy(t->tried, st->held.items, t->ntried * sizeof(*t->tried));
	t->gen = st->generation;
}

/* The real walk, after the trials (void: a change came during one). */
static void trial_end(struct egs_plan *p, bool void_)
{
	struct egs_state *st = p->st;
	int64_t now = p->now, next = p->base_next;
	bool keep = p->keep;
	egs__plan_retire(p); /* the trials' plans: freed by the next step */
	egs__walk_defer(p, st, now, next, keep);
	p->trial_void = void_;
}

/* The first step of an adopt walk: lift takes the snapshots' spare buffers and the due time a
 * walk starts from (as walk_first_state sets it). */
static void adopt_begin(struct egs_plan *p, struct trial *t)
{
	struct egs_plan *l = &t->lift;
	egs__snap_spare(l, p->spare, p->nspare);
	free(p->spare);
	p->spare = NULL;
	p->nspare = 0;
	l->keep = true;
	l->run_next = egs__stale_next(l, p->base_next);
	t->lift_t = egs_malloc((t->n + 1) * sizeof(*t->lift_t));
	t->snap_at = 0; /* lift's order is empty */
}

/* g's turn in an adopt walk: what walk_step and egs__plan_one do, the start only noted. */
static int64_t adopt_one(struct trial *t, struct egs_gpr *g)
{
	struct egs_plan *l = &t->lift;
	struct egs_state *st = l->st;
	size_t i = l->norder;
	if (i == t->snap_at) { /* every plan_snap_every GPRs, without a division a GPR */
		egs__snap_take(l, i);
		t->snap_at += st->cfg.plan_snap_every ? st->cfg.plan_snap_every : SNAP_EVERY;
	}
	egs__order_push(l, g);
	bool starts;
	int64_t at = egs__plan_note(l, g, &starts), due = at;
	t->lift_t[i] = at;
	if (starts) {
		size_t k = (size_t)g->node_count;
		if (t->nstart_nodes + k > t->cap_start_nodes) {
			t->cap_start_nodes = 2 * (t->nstart_nodes + k) + 16;
			t->start_nodes = egs_realloc(t->start_nodes, t->cap_start_nodes * sizeof(*t->start_nodes));
		}
		memcpy(t->start_nodes + t->nstart_nodes, l->chosen, k * sizeof(*l->chosen));
		t->nstart_nodes += k;
		egs__started_push(l, i, g);
		due = l->now + st->cfg.provision_timeout_s; /* due again at its provisioning time-out */
	} else if (at == l->now) {
		l->stuck = true;
	}
	if (due != EGS_NEVER && due > l->now && due < l->run_next)
		l->run_next = due;
	return at;
}

/*
 * Every hold passed (and was dropped): the run's walk would now walk the state lift walked (the
 * generation is as the trial found it, the holds and the lifted ghosts are gone as lift had them
 * gone), placing GPR by GPR as lift placed them; so lift, walked as that walk (adopt), becomes the
 * run's plan and the walk is not made again.  Its steps then apply, in order, what lift noted:
 * every estimate, and the starts (egs__adopt_step, as egs__plan_one would at that GPR's turn, so
 * a change between the steps is met as in any walk).  Returns false (nothing done) when lift is
 * not that walk, or when a start it noted could not be made now (the walk would not make it, and
 * its due time and the GPRs after it would differ).
 */
static bool trial_adopt(struct egs_plan *p)
{
	struct trial *t = p->trial;
	struct egs_plan *l = &t->lift;
	struct egs_state *st = p->st;
	if (!t->adopt || st->held.len || l->shared || l->norder != t->cursor - t->nghosts)
		return false;
	for (size_t j = 0, off = 0; j < l->nstarted; j++) { /* the walk would make every start lift noted */
		struct egs_gpr *g = l->started[j].g;
		memcpy(l->chosen, t->start_nodes + off, (size_t)g->node_count * sizeof(*l->chosen));
		off += (size_t)g->node_count;
		if (!egs__plan_still_free(l, g))
			return false;
	}
	struct adoption *a = egs_calloc(1, sizeof(*a));
	a->t = t->lift_t;
	a->nodes = t->start_nodes;
	t->lift_t = NULL;
	t->start_nodes = NULL;
	struct snap *spare = p->spare;
	size_t nspare = p->nspare;
	int64_t base_next = p->base_next;
	EGS_ASSERT(!p->old && !p->adopting);
	*p = *l; /* p held only st, now, keep, base_next, the trial and spares */
	memset(l, 0, sizeof(*l));
	egs__trial_free(t);
	egs__snap_spare(p, spare, nspare);
	free(spare);
	p->trial = NULL;
	p->adopting = a;
	p->base_next = base_next;
	p->keep = p->adopted = p->walking = true;
	p->valid = p->stale = p->foreign = p->trial_void = p->deferred = p->splice = false;
	p->from = p->cursor = 0;
	p->gen_seen = st->generation;
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
	return true;
}

void egs__adopt_step(struct egs_plan *p, size_t end)
{
	struct adoption *a = p->adopting;
	for (size_t i = p->cursor; i < end; i++) {
		struct egs_gpr *g = p->order[i];
		egs__gpr_prefetch(p->order, i, end);
		bool starts = a->next < p->nstarted && p->started[a->next].pos == i;
		if (starts) {
			memcpy(p->chosen, a->nodes + a->off, (size_t)g->node_count * sizeof(*p->chosen));
			a->off += (size_t)g->node_count;
			a->next++;
		}
		if (!egs__plan_apply(p, g, a->t[i], starts))
			p->stale = p->foreign = true; /* a start it noted cannot be made: walk again */
	}
	if (end == p->norder)
		egs__adopt_free(p);
}

void egs__adopt_free(struct egs_plan *p)
{
	if (!p->adopting)
		return;
	free(p->adopting->t);
	free(p->adopting->nodes);
	free(p->adopting);
	p->adopting = NULL;
}

/* A trial has walked to its end or to the first GPR it starts later (later): applies it and
 * begins the next trial, or the real walk (or, when lift can be, adopts it as the real walk). */
static void trial_done(struct egs_plan *p, bool later)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	if (!later) {
		for (size_t i = 0; i < t->ntried; i++) {
			size_t k = held_index(st, t->tried[i]);
			if (k != SIZE_MAX)
				egs_held_drop(st, k);
		}
		if (trial_adopt(p))
			return;
	} else if (!t->all) {
		egs_held_rotate(st); /* the next run tries the others first */
	}
	if (t->all) { /* one at a time; with a single hold its own try would repeat this one */
		t->tries = 0;
		t->nheld = st->held.len;
	} else {
		t->tries++;
	}
	if (t->nheld > 1 && t->tries < HELD_TRIES && t->tries < t->nheld && st->held.len)
		egs__trial_begin(p, false);
	else
		trial_end(p, false);
}

/* Lifts (on: false) or restores the holds the trial tries. */
static void trial_set(struct trial *t, struct egs_state *st, bool on)
{
	for (size_t i = 0; i < t->ntried; i++)
		egs_held_set(st, held_index(st, t->tried[i]), on);
}

/* The pools of a trial's plan (part 1 of its first state): one piece when sliced (max <
 * SIZE_MAX), else all; true when they are complete. */
static bool pools_pieces(struct egs_plan *q, size_t max)
{
	while (!egs__plan_pools_piece(q))
		if (max < SIZE_MAX)
			return false;
	return true;
}

/* One step of the trial in progress: a plan, the order, or at most max GPRs walked side by side. */
void egs__trial_step(struct egs_plan *p, size_t max)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	if (st->generation != t->gen) {
		trial_end(p, true);
		return;
	}
	if (p->old) {
		egs__plan_free_old(p);
		if (max < SIZE_MAX)
			return;
	}
	for (; t->phase < 7; t->phase++) { /* the set-up, a piece a step when sliced */
		if (t->phase < 3) { /* base's first state, in three pieces (pools made afresh: more) */
			if (!t->kept_base && t->phase == 1 && !pools_pieces(&t->base, max))
				return;
			if (!t->kept_base && t->phase != 1)
				egs__plan_init_part(&t->base, st, p->now, t->phase);
			else if (t->kept_base && max < SIZE_MAX && t->phase < 2)
				continue; /* nothing to make: no empty steps */
		} else if (t->phase < 6) { /* lift's, with the holds tried lifted */
			trial_set(t, st, false);
			bool made = t->phase != 4 || pools_pieces(&t->lift, max);
			if (t->phase != 4)
				egs__plan_init_part(&t->lift, st, p->now, t->phase - 3);
			trial_set(t, st, true);
			if (!made)
				return;
		} else {
			t->order = egs__plan_order(st, &t->n, NULL);
		}
		if (max < SIZE_MAX) {
			t->phase++;
			return;
		}
	}
	if (t->adopt && !t->lift_t)
		adopt_begin(p, t);
	size_t end = t->n - t->cursor > max ? t->cursor + max : t->n;
	bool later = false;
	for (; t->cursor < end && !later; t->cursor++) {
		struct egs_gpr *g = t->order[t->cursor];
		egs__gpr_prefetch(t->order, t->cursor, end);
		int64_t tb = t->kept_base ? (g->est_start ? g->est_start : EGS_NEVER) : EGS_NEVER;
		if (!t->kept_base)
			tb = egs__place_dry(&t->base, g);
		if (g->ghost) { /* reserves, is not compared; out of lift's order when it is lifted */
			if (!t->all && g != t->tried[0])
				egs__place_dry(&t->lift, g);
			t->nghosts++;
			continue;
		}
		if (g->share_centi)
			t->adopt = false; /* a shared start reads the node's shares as they are: walk */
		later = (t->adopt ? adopt_one(t, g) : egs__place_dry(&t->lift, g)) > tb;
	}
	if (later || t->cursor == t->n)
		trial_done(p, later);
}
