/*
 * sched_order.c: the walk's order taken in pieces.  At 100,000 queued GPRs the queue's order was
 * one O(queue) step of a sliced run (a merge of the kept order with the changes since, and the
 * walk's copy of it), and on this kind of machine the fresh pages that step first touched cost
 * 15-20 us each: 7-33 ms of the loop in one go in bench/api/deep.sh.  Now the queue hands its
 * order out in spans (egs_queue_order_begin/step) and each step of the run takes one span of at
 * most ORDER_PIECE entries: the ghosts not lifted (core/held.h) are merged in at their places by
 * their keys, and a resumed walk (walk_resume) keeps only what goes after order[from - 1].  The
 * order is the queue's as it stood at the first piece; changes after it make the walk stale (the
 * generation check of every step), as changes after a one-step order did.
 */
#include "core/sched_int.h"

#include <stdlib.h>
#include <string.h>

/* Entries of the queue's order one piece merges: at most 4,096 x 48 bytes of memory written, 48
 * pages.  With 8,192 a piece took 3-5.8 ms of CPU in bench/api/deep.sh when the queue's merge
 * buffer was fresh (it grows by half as the queue does: 93 faults in one piece at 20-35 us each). */
#define ORDER_PIECE 4096

static struct egs_queue_slot key_of(const struct egs_gpr *g)
{
	return (struct egs_queue_slot){ g->priority, g->fair, g->seq, (struct egs_gpr *)g };
}

/* True when x goes in the walk's order: for a resumed walk, only what goes after order[from - 1]. */
static bool wanted(const struct egs_plan *p, const struct egs_queue_slot *x)
{
	return !p->splice || egs_queue_key_before(&p->order_after, x);
}

/* Appends the ghosts that go before x (NULL: all that are left). */
static void ghosts_before(struct egs_plan *p, const struct egs_queue_slot *x)
{
	for (; p->kghost < p->nghosts; p->kghost++) {
		struct egs_gpr *h = p->ghosts[p->kghost];
		struct egs_queue_slot k = key_of(h);
		if (x && !egs_queue_key_before(&k, x))
			return;
		if (wanted(p, &k))
			p->order[p->norder++] = h;
	}
}

/* Sets the order up: room for all of it, the ghosts sorted, the queue's order begun. */
static void order_begin(struct egs_plan *p)
{
	struct egs_state *st = p->st;
	size_t nq = egs_queue_len(&st->queue), base = p->splice ? p->from : 0;
	free(p->ghosts);
	p->ghosts = egs_malloc((st->held.len + 1) * sizeof(*p->ghosts));
	p->nghosts = p->kghost = 0;
	for (size_t i = 0; i < st->held.len; i++) {
		struct egs_gpr *g = st->held.items[i];
		if (g->ghost && !g->held_lifted)
			p->ghosts[p->nghosts++] = g;
	}
	qsort(p->ghosts, p->nghosts, sizeof(*p->ghosts), egs_queue_cmp);
	/* Room for the appends and resumed walks that follow (egs__plan_order's eighth). */
	size_t need = base + nq + p->nghosts + 1;
	if (!p->order || p->caporder < need) {
		p->caporder = need + need / 8 + 64;
		p->order = egs_realloc(p->order, p->caporder * sizeof(*p->order));
	}
	if (p->splice)
		p->order_after = key_of(p->order[p->from - 1]);
	p->norder = base;
	p->order_ticket = egs_queue_order_begin(&st->queue);
	p->ordering = true;
}

bool egs__order_step(struct egs_plan *p, size_t max)
{
	struct egs_queue *q = &p->st->queue;
	size_t piece = p->st->cfg.plan_order_piece ? p->st->cfg.plan_order_piece : ORDER_PIECE;
	if (max == SIZE_MAX)
		piece = SIZE_MAX; /* the whole order in one step */
	if (!p->ordering)
		order_begin(p);
	/* The changes since the queue's last order sorted, in pieces of their own: thousands of
	 * creates come between two runs under load, and their sort in one go was a step no slice
	 * bounded (a dropped order says so at the next egs_queue_order_step, below). */
	if (piece != SIZE_MAX && !egs_queue_order_sort(q, p->order_ticket, piece))
		return false;
	for (;;) {
		const struct egs_queue_entry *span = NULL;
		size_t k = egs_queue_order_step(q, p->order_ticket, piece, &span);
		if (k == SIZE_MAX) { /* another order (egs_queue_sorted) dropped this one: again */
			order_begin(p);
			continue;
		}
		if (!k)
			break;
		for (size_t i = 0; i < k; i++) {
			const struct egs_queue_slot *x = &span[i].key;
			if (!wanted(p, x))
				continue;
			if (p->kghost < p->nghosts)
				ghosts_before(p, x);
			p->order[p->norder++] = x->g;
		}
		if (piece != SIZE_MAX && k == piece)
			return false; /* a piece; one of fewer was the last */
	}
	ghosts_before(p, NULL);
	EGS_ASSERT(p->norder <= p->caporder);
	free(p->ghosts);
	p->ghosts = NULL;
	p->nghosts = p->kghost = 0;
	p->ordering = p->splice = false;
	return true;
}
