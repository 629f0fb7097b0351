/*
 * test_sched_fresh.c: a first state's slots and pools made afresh in pieces (core/sched_pool.c,
 * core/sched_fresh.c).  Two identical states: the first runs its walks in one go, the second in
 * steps of one GPR with the nodes' name sort cut into pieces of 1 to 64 moves
 * (cfg.plan_sort_piece), so that pieces end anywhere inside a merge, and the slots and the hashing
 * in pieces of 1 to 17 nodes (cfg.plan_slots_piece).  A node registered while the slots are taken
 * starts them again.  After every run both must agree on every GPR's state, estimate and
 * nodes, the sliced run must have taken several name-order pieces, and every node's name_rank must
 * be its place in name order.  A node registered while the sort is under way is not in that walk;
 * the next runs must still agree, with ranks over the new inventory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gpr.h"
#include "core/sched.h"
#include "core/state.h"

#define T0 1800000000LL
#define LONG_HEARTBEAT (1000LL * 24 * 3600)
#define NODES 150
#define NWS 8
#define GPRS 200

static struct egs_state *st[2]; /* 0: runs in one go, 1: in steps, the name sort in pieces */
static struct egs_plan *plan[2];
static uint64_t rng;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

static void add_node(struct egs_state *s, const char *cluster, const char *name, const char *shape)
{
	if (!egs_state_cluster(s, cluster)) {
		struct egs_cluster *c = egs_calloc(1, sizeof(*c));
		egs_strlcpy(c->name, cluster, sizeof(c->name));
		assert_int_equal(egs_state_add_cluster(s, c), EGS_OK);
	}
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->cluster, cluster, sizeof(n->cluster));
	egs_strlcpy(n->gpu_shape, shape, sizeof(n->gpu_shape));
	egs_strlcpy(n->instance_type, shape, sizeof(n->instance_type));
	n->gpu_count = 8;
	n->memory_mib = 81920;
	n->health = EGS_HEALTH_HEALTHY;
	n->last_heartbeat = T0;
	assert_int_equal(egs_state_add_node(s, n), EGS_OK);
	s->inventory_gen++; /* as a registration does (api_agent.c) */
}

/* Both states: NODES nodes with names in random order (some equal across clusters) in three
 * clusters of two shapes, NWS workspaces over every cluster, GPRS GPRs at random priorities. */
static void worlds(size_t sort_piece)
{
	for (int k = 0; k < 2; k++) {
		struct egs_state_config cfg = { .heartbeat_timeout_s = LONG_HEARTBEAT, .backfill = 1,
						.plan_sort_piece = k ? sort_piece : 0,
						.plan_slots_piece = k ? 1 + sort_piece % 17 : 0 };
		st[k] = egs_calloc(1, sizeof(*st[k]));
		egs_state_init(st[k], &cfg);
		plan[k] = egs_plan_new();
	}
	char name[32], cl[8];
	for (int i = 0; i < NODES; i++) {
		unsigned r = (unsigned)rnd(1000);
		snprintf(name, sizeof(name), "node-%u", r);
		snprintf(cl, sizeof(cl), "c%d", i % 3);
		for (int k = 0; k < 2; k++)
			if (!egs_state_node(st[k], cl, name))
				add_node(st[k], cl, name, i % 2 ? "H100" : "A100");
	}
	for (int w = 0; w < NWS; w++)
		for (int k = 0; k < 2; k++) {
			struct egs_workspace *ws = egs_calloc(1, sizeof(*ws));
			snprintf(ws->name, sizeof(ws->name), "ws%d", w);
			egs_strlist_add(&ws->clusters, "c0");
			egs_strlist_add(&ws->clusters, "c1");
			egs_strlist_add(&ws->clusters, "c2");
			assert_int_equal(egs_state_add_workspace(st[k], ws), EGS_OK);
		}
}

static void create(int i, int64_t now)
{
	char id[EGS_ID_MAX];
	snprintf(id, sizeof(id), "g%04d", i);
	int ws = (int)rnd(NWS), prio = 1 + (int)rnd(300), nodes = 1 + (int)rnd(3);
	bool h100 = rnd(2);
	int64_t dur = 600 * (1 + (int64_t)rnd(8));
	for (int k = 0; k < 2; k++) {
		struct egs_gpr *g = egs_gpr_new();
		egs_strlcpy(g->id, id, sizeof(g->id));
		egs_strlcpy(g->name, id, sizeof(g->name));
		snprintf(g->workspace, sizeof(g->workspace), "ws%d", ws);
		egs_strlcpy(g->gpu_shape, h100 ? "H100" : "A100", sizeof(g->gpu_shape));
		g->node_count = nodes;
		g->gpus_per_node = 8;
		g->exit_duration_s = dur;
		g->priority = prio;
		assert_int_equal(egs_gpr_submit(st[k], g, now), EGS_OK);
	}
}

/* Every node's name_rank is its place in name order: a permutation, names never descending. */
static void check_ranks(struct egs_state *s)
{
	size_t n = s->nodes.len;
	const struct egs_node **by = egs_calloc(n + 1, sizeof(*by));
	void *v;
	for (size_t i = 0; egs_map_next(&s->nodes, &i, NULL, &v);) {
		const struct egs_node *x = v;
		assert_true(x->name_rank < n);
		assert_null(by[x->name_rank]);
		by[x->name_rank] = x;
	}
	for (size_t r = 1; r < n; r++)
		assert_true(strcmp(by[r - 1]->name, by[r]->name) <= 0);
	free(by);
}

static int slot_pieces, hash_pieces; /* of the last sliced run */

/* Steps the sliced run in progress to its end, one GPR at a time; returns the name-order pieces
 * (and counts those of the slots and the hashing). */
static int finish_sliced(void)
{
	int sort_pieces = 0;
	int64_t next;
	slot_pieces = hash_pieces = 0;
	do {
		for (bool done = false; !done;) {
			const char *what = egs_sched_piece(plan[1]);
			sort_pieces += !strcmp(what, "first state (pools: name order)");
			slot_pieces += !strcmp(what, "first state (slots)");
			hash_pieces += !strcmp(what, "first state (pools: hashing)");
			done = egs_sched_step(plan[1], 1);
		}
	} while (!egs_sched_end(plan[1], &next));
	return sort_pieces;
}

static void compare(void)
{
	void *v;
	for (size_t i = 0; egs_map_next(&st[0]->gprs, &i, NULL, &v);) {
		const struct egs_gpr *a = v, *b = egs_state_gpr(st[1], a->id);
		assert_non_null(b);
		if (a->state != b->state || a->est_start != b->est_start || a->nodes.n != b->nodes.n)
			fail_msg("%s: state %d/%d, estimate %lld/%lld (one go vs pieces)", a->id, (int)a->state,
				 (int)b->state, (long long)a->est_start, (long long)b->est_start);
		for (size_t j = 0; j < a->nodes.n; j++)
			assert_string_equal(a->nodes.v[j], b->nodes.v[j]);
	}
}

/* Both states run at now (the second in steps) and agree; returns the name-order pieces taken. */
static int run_both(int64_t now)
{
	egs_sched_run(st[0], now, plan[0]);
	egs_sched_begin(st[1], now, plan[1]);
	int pieces = finish_sliced();
	compare();
	check_ranks(st[0]);
	check_ranks(st[1]);
	for (int k = 0; k < 2; k++)
		egs_state_clear_changes(st[k]);
	return pieces;
}

static void one_piece_size(size_t sort_piece)
{
	rng = 0x9e3779b97f4a7c15ull ^ sort_piece;
	worlds(sort_piece);
	int64_t now = T0;
	for (int i = 0; i < GPRS; i++)
		create(i, now);
	int pieces = run_both(now);
	assert_true(pieces > 1); /* the sort went in several pieces, and the slots and the hashing */
	assert_true(slot_pieces > 1 && hash_pieces > 1);

	/* Nodes register while the second state's slots are being taken: they start again, and the
	 * walk sees them, as the first state's run after them does. */
	now += 30;
	egs_sched_begin(st[1], now, plan[1]);
	while (strcmp(egs_sched_piece(plan[1]), "first state (slots)"))
		assert_false(egs_sched_step(plan[1], 1));
	assert_false(egs_sched_step(plan[1], 1));
	assert_false(egs_sched_step(plan[1], 1));
	for (int i = 0; i < 60; i++) { /* the node map grows, and free nodes come before the walk's place */
		char late[32];
		snprintf(late, sizeof(late), "late-%d", i);
		for (int k = 0; k < 2; k++)
			add_node(st[k], i % 2 ? "c2" : "c0", late, i % 2 ? "A100" : "H100");
	}
	egs_sched_run(st[0], now, plan[0]);
	finish_sliced();
	compare();
	check_ranks(st[0]);
	check_ranks(st[1]);
	for (int k = 0; k < 2; k++)
		egs_state_clear_changes(st[k]);

	/* A node registers while the second state's name sort is under way (after the one-go run of
	 * the first: the walk does not see the node, its slots were taken before).  The runs after
	 * see it in both, and the ranks cover it: the sort's ranks hold for the inventory it began on. */
	now += 60;
	for (int k = 0; k < 2; k++)
		st[k]->inventory_gen++; /* a re-registration: the pools are made afresh, names sorted */
	egs_sched_run(st[0], now, plan[0]);
	egs_sched_begin(st[1], now, plan[1]);
	while (strcmp(egs_sched_piece(plan[1]), "first state (pools: name order)"))
		assert_false(egs_sched_step(plan[1], 1));
	assert_false(egs_sched_step(plan[1], 1));
	assert_false(egs_sched_step(plan[1], 1));
	for (int k = 0; k < 2; k++)
		add_node(st[k], "c1", "node-0500b", "H100");
	assert_true(finish_sliced() > 0);
	compare();
	for (int k = 0; k < 2; k++)
		egs_state_clear_changes(st[k]);
	create(GPRS, now);
	assert_true(run_both(now) > 1);
	now += 600;
	create(GPRS + 1, now);
	run_both(now); /* pools and ranks kept: no sort */
	for (int k = 0; k < 2; k++) {
		egs_plan_free(plan[k]);
		egs_state_cleanup(st[k]);
		free(st[k]);
	}
}

static void test_sorted_in_pieces_equals_one_go(void **state)
{
	(void)state;
	static const size_t sizes[] = { 1, 2, 3, 5, 7, 64 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		one_piece_size(sizes[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sorted_in_pieces_equals_one_go),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
