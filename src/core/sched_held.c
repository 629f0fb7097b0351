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
	free(t);
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
	egs__plan_cleanup(&t->base);
	egs__plan_cleanup(&t->lift);
	free(t->order);
	t->order = NULL;
	t->n = t->cursor = 0;
	t->phase = 0;
	t->all = all;
	t->kept_base = false;
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

/* A trial has walked to its end or to the first GPR it starts later (later): applies it and
 * begins the next trial, or the real walk. */
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
		if (t->phase < 3) { /* base's first state, in three pieces */
			if (!t->kept_base)
				egs__plan_init_part(&t->base, st, p->now, t->phase);
			else if (max < SIZE_MAX && t->phase < 2)
				continue; /* nothing to make: no empty steps */
		} else if (t->phase < 6) { /* lift's, with the holds tried lifted */
			trial_set(t, st, false);
			egs__plan_init_part(&t->lift, st, p->now, t->phase - 3);
			trial_set(t, st, true);
		} else {
			t->order = egs__plan_order(st, &t->n);
		}
		if (max < SIZE_MAX) {
			t->phase++;
			return;
		}
	}
	size_t end = t->n - t->cursor > max ? t->cursor + max : t->n;
	bool later = false;
	for (; t->cursor < end && !later; t->cursor++) {
		struct egs_gpr *g = t->order[t->cursor];
		int64_t tb = t->kept_base ? (g->est_start ? g->est_start : EGS_NEVER) : EGS_NEVER;
		if (!t->kept_base)
			tb = egs__place_dry(&t->base, g);
		if (g->ghost) { /* reserves, is not compared; out of lift's order when it is lifted */
			if (!t->all && g != t->tried[0])
				egs__place_dry(&t->lift, g);
			continue;
		}
		later = egs__place_dry(&t->lift, g) > tb;
	}
	if (later || t->cursor == t->n)
		trial_done(p, later);
}
