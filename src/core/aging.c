/*
 * aging.c: finished GPRs leave memory by age; see aging.h.
 * Invariant: g->aging_listed iff g is in st->finished at or after finished_head or in
 * st->finished_kept, and a listed GPR is freed only by egs_aging_sweep (GPRs are never deleted
 * otherwise) or by the state's cleanup.
 */
#include "core/aging.h"

#include "core/fair.h"

#include <stdlib.h>
#include <string.h>

int64_t egs_aging_finished_at(const struct egs_gpr *g)
{
	return g->completion_ts ? g->completion_ts : g->created_at;
}

void egs_aging_note(struct egs_state *st, struct egs_gpr *g)
{
	if (st->cfg.finished_retention_s <= 0 || g->aging_listed || !egs_gpr_state_terminal(g->state))
		return;
	g->aging_listed = true;
	egs_vec_push(&st->finished, g);
}

enum egs_err egs_aging_load_gpr(struct egs_state *st, struct egs_gpr *g)
{
	if (!st->aged_before || !egs_gpr_state_terminal(g->state) || egs_aging_finished_at(g) >= st->aged_before ||
	    g->held_until || g->ghost) {
		/* Loaded in seq order, mostly in completion order too; the sweep sorts what is not. */
		st->finished_unsorted |= egs_gpr_state_terminal(g->state);
		return egs_state_add_gpr(st, g);
	}
	egs_aging_count(st, g);
	egs_gpr_free(g);
	return EGS_OK;
}

void egs_aging_count(struct egs_state *st, const struct egs_gpr *g)
{
	if (g->seq >= st->next_seq)
		st->next_seq = g->seq + 1;
	egs_fair_note_loaded(st, g); /* its GPU time still counts against its workspace */
	st->aged[g->state]++;
}

enum egs_err egs_aging_restore(struct egs_state *st, struct egs_gpr *g)
{
	enum egs_gpr_state s = g->state;
	enum egs_err err = egs_state_add_gpr(st, g);
	if (!err && st->aged[s])
		st->aged[s]--;
	st->finished_unsorted = true;
	return err;
}

bool egs_aging_node_refers(const struct egs_state *st, const struct egs_gpr *g)
{
	for (size_t i = 0; i < g->nodes.n; i++) {
		const struct egs_node *n = egs_map_get(&st->nodes, g->nodes.v[i]);
		if (n && (!strcmp(n->gpr_id, g->id) || !strcmp(n->attached_gpr, g->id) ||
			  egs_strlist_has(&n->attached_shared, g->id)))
			return true;
	}
	return false;
}

static int by_finish(const void *a, const void *b)
{
	int64_t x = egs_aging_finished_at(*(struct egs_gpr *const *)a);
	int64_t y = egs_aging_finished_at(*(struct egs_gpr *const *)b);
	return x < y ? -1 : x > y;
}

/* Drops the taken front of the list once it is at least half of it. */
static void compact(struct egs_state *st)
{
	struct egs_vec *f = &st->finished;
	if (st->finished_head < 1024 || st->finished_head < f->len / 2)
		return;
	memmove(f->items, f->items + st->finished_head, (f->len - st->finished_head) * sizeof(void *));
	f->len -= st->finished_head;
	st->finished_head = 0;
}

static void forget(struct egs_state *st, struct egs_gpr *g)
{
	EGS_ASSERT(!g->dirty && g->heap_idx == SIZE_MAX && !g->held_until && !g->share_node);
	egs_map_del(&st->gprs, g->id);
	st->aged[g->state]++;
	egs_gpr_clear_check_runs(g);
	egs_gpr_free(g);
}

static bool referred(const struct egs_state *st, const struct egs_gpr *g, egs_aging_pinned_fn pinned, void *ctx)
{
	return g->dirty || g->held_until || g->ghost || g->share_node || egs_aging_node_refers(st, g) ||
	       (pinned && pinned(ctx, g));
}

/* Looks at the kept GPRs again, forgetting at most max that nothing refers to any more. */
static size_t recheck(struct egs_state *st, size_t max, egs_aging_pinned_fn pinned, void *ctx)
{
	struct egs_vec *k = &st->finished_kept;
	size_t taken = 0, out = 0;
	for (size_t i = 0; i < k->len; i++) {
		struct egs_gpr *g = k->items[i];
		if (taken < max && !referred(st, g, pinned, ctx)) {
			forget(st, g);
			taken++;
		} else {
			k->items[out++] = g;
		}
	}
	k->len = out;
	return taken;
}

size_t egs_aging_sweep(struct egs_state *st, int64_t before, size_t max, bool again, egs_aging_pinned_fn pinned,
		       void *ctx)
{
	struct egs_vec *f = &st->finished;
	if (st->finished_unsorted) {
		qsort(f->items + st->finished_head, f->len - st->finished_head, sizeof(void *), by_finish);
		st->finished_unsorted = false;
	}
	size_t taken = again ? recheck(st, max, pinned, ctx) : 0;
	while (taken < max && st->finished_head < f->len) {
		struct egs_gpr *g = f->items[st->finished_head];
		if (egs_aging_finished_at(g) >= before)
			break;
		st->finished_head++;
		if (referred(st, g, pinned, ctx)) {
			egs_vec_push(&st->finished_kept, g); /* old enough, but still referred to */
			continue;
		}
		forget(st, g);
		taken++;
	}
	compact(st);
	return taken;
}

void egs_aging_cutoff(struct egs_state *st, int64_t now)
{
	st->aged_before = st->cfg.finished_retention_s > 0 ? now - st->cfg.finished_retention_s : 0;
}

size_t egs_aging_total(const struct egs_state *st)
{
	size_t n = st->gprs.len;
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		n += st->aged[s];
	return n;
}
