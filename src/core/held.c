/*
 * held.c: early releases and cancels whose capacity the planner holds back; see held.h.  A hold of
 * nodes sets held_until on the GPR (the workspace is held through it) and on each node it lists in
 * held_nodes; a ghost has held_until INT64_MAX and no nodes until its start.
 */
#include "core/held.h"

#include <stdlib.h>
#include <string.h>

/* A hold is stored with its GPR (the gprs column `held`), so every change of one is a change of g. */
static void save(struct egs_state *st, struct egs_gpr *g)
{
	if (egs_state_gpr(st, g->id) == g)
		egs_state_touch(st, EGS_KIND_GPR, g);
}

static void set_nodes(struct egs_state *st, const struct egs_gpr *g, int64_t from, int64_t to)
{
	for (size_t i = 0; i < g->held_nodes.n; i++) {
		struct egs_node *n = egs_map_get(&st->nodes, g->held_nodes.v[i]);
		if (n && n->held_until == from)
			n->held_until = to;
	}
}

static void hold_nodes(struct egs_state *st, struct egs_gpr *g, int64_t until)
{
	g->held_until = until;
	for (size_t i = 0; i < g->held_nodes.n; i++) {
		struct egs_node *n = egs_map_get(&st->nodes, g->held_nodes.v[i]);
		if (n && n->held_until < until)
			n->held_until = until;
	}
	st->generation++;
	save(st, g);
}

void egs_held_add(struct egs_state *st, struct egs_gpr *g, int64_t until, int64_t now)
{
	if (until <= now || g->share_centi || g->held_until)
		return;
	egs_strlist_copy(&g->held_nodes, &g->nodes);
	hold_nodes(st, g, until);
	egs_vec_push(&st->held, g);
}

void egs_held_ghost(struct egs_state *st, struct egs_gpr *g)
{
	if (g->share_centi || g->held_until)
		return;
	g->ghost = true;
	g->held_until = INT64_MAX;
	egs_vec_push(&st->held, g);
	st->generation++;
	save(st, g);
}

void egs_held_ghost_start(struct egs_state *st, struct egs_gpr *g, const char *const *nodes, size_t n,
			  int64_t until)
{
	EGS_ASSERT(g->ghost && !g->held_lifted);
	g->ghost = false;
	egs_strlist_cleanup(&g->held_nodes);
	for (size_t i = 0; i < n; i++)
		egs_strlist_add(&g->held_nodes, nodes[i]);
	hold_nodes(st, g, until);
}

void egs_held_set(struct egs_state *st, size_t i, bool on)
{
	struct egs_gpr *g = st->held.items[i];
	EGS_ASSERT(g->held_until > 0);
	if (!g->ghost) {
		if (on)
			set_nodes(st, g, 0, g->held_until);
		else
			set_nodes(st, g, g->held_until, 0);
	}
	g->held_lifted = !on;
}

void egs_held_drop(struct egs_state *st, size_t i)
{
	struct egs_gpr *g = st->held.items[i];
	if (!g->held_lifted && !g->ghost)
		set_nodes(st, g, g->held_until, 0);
	g->held_until = 0;
	g->held_lifted = false;
	g->ghost = false;
	egs_strlist_cleanup(&g->held_nodes);
	save(st, g);
	/* Keep the order: the planner tries them in it. */
	memmove(&st->held.items[i], &st->held.items[i + 1], (st->held.len - i - 1) * sizeof(void *));
	st->held.len--;
	st->generation++;
}

void egs_held_rotate(struct egs_state *st)
{
	if (st->held.len < 2)
		return;
	void *first = st->held.items[0];
	memmove(&st->held.items[0], &st->held.items[1], (st->held.len - 1) * sizeof(void *));
	st->held.items[st->held.len - 1] = first;
}

void egs_held_expire(struct egs_state *st, int64_t now)
{
	for (size_t i = st->held.len; i-- > 0;) {
		struct egs_gpr *g = st->held.items[i];
		if (g->held_until > now)
			continue;
		/* Held to the end, the release never happened for the plan: its free nodes count as
		 * free from the old exit, not from the release, or the order in which the plan takes
		 * free nodes (earliest free first) would change and move estimates. */
		for (size_t k = 0; k < g->held_nodes.n; k++) {
			struct egs_node *n = egs_map_get(&st->nodes, g->held_nodes.v[k]);
			if (n && n->held_until == g->held_until && n->free_since < g->held_until)
				n->free_since = g->held_until;
		}
		egs_held_drop(st, i);
	}
}

int64_t egs_node_held(const struct egs_node *n, int64_t now)
{
	return n->held_until > now ? n->held_until : 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct egs_gpr *x = *(const struct egs_gpr *const *)a, *y = *(const struct egs_gpr *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void egs_held_restore(struct egs_state *st)
{
	void *v;
	st->held.len = 0;
	for (size_t i = 0; egs_map_next(&st->gprs, &i, NULL, &v);) {
		struct egs_gpr *g = v;
		if (g->held_until > 0)
			egs_vec_push(&st->held, g);
	}
	if (st->held.len > 1)
		qsort(st->held.items, st->held.len, sizeof(void *), by_seq);
	for (size_t i = 0; i < st->held.len; i++) {
		struct egs_gpr *g = st->held.items[i];
		g->held_lifted = false;
		if (g->ghost)
			continue;
		for (size_t k = 0; k < g->held_nodes.n; k++) {
			struct egs_node *n = egs_map_get(&st->nodes, g->held_nodes.v[k]);
			if (n && n->held_until < g->held_until)
				n->held_until = g->held_until;
		}
	}
	st->generation++;
}
