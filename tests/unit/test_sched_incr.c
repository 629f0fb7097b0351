/*
 * test_sched_incr.c: incremental planning (core/sched_kept.c walk_resume).  When only creates came since
 * the kept plan was made, a run resumes the walk from the plan's snapshot before the first of them
 * instead of walking the whole queue.  Two states are built and changed identically (creates at
 * random priorities, time passing, agents' acks, cancels, early releases, creates between the
 * slices of a walk, and while the first one takes the queue's order in pieces); the first plans with its kept plan (resuming where it can), the second walks
 * afresh every time.  After every run every GPR's state, estimate, delay count, cluster and nodes,
 * and the next due time, must be the same in both, over several seeds, backfill off and on; and
 * most runs after creates must have resumed (so the equality covers the incremental path).  The
 * second twin also never takes a held releases' trial walk as its plan (cfg.plan_no_adopt), so
 * the runs where the first one does (sched_held.c trial_adopt) are compared with real walks, and
 * makes its first state afresh every run while the first takes the last one's pools when the
 * inventory allows (nodes going unhealthy and back, and re-registering with another memory size,
 * change it between runs).
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
#define QUEUED0 600
#define SNAP_EVERY 32 /* the kept plan's snapshots (egsd: 2,048): many places to resume from */
#define ROUNDS 80
#define NWS 24

struct twin {
	struct egs_state *st;
	struct egs_plan *plan;
};
static struct twin tw[2]; /* 0 resumes from its kept plan, 1 walks afresh */
static size_t ngprs;
static uint64_t rng;
static size_t creates, resumed; /* runs after creates, and those that resumed */
static size_t adopted;          /* runs whose plan was the held releases' trial walk (twin 0 only) */
static bool inventory_ops;      /* the rounds change the inventory too (inventory_change) */

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

static void add_node(struct egs_state *st, const char *cluster, const char *name, const char *shape, int gpus)
{
	if (!egs_state_cluster(st, cluster)) {
		struct egs_cluster *c = egs_calloc(1, sizeof(*c));
		egs_strlcpy(c->name, cluster, sizeof(c->name));
		assert_int_equal(egs_state_add_cluster(st, c), EGS_OK);
	}
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->cluster, cluster, sizeof(n->cluster));
	egs_strlcpy(n->gpu_shape, shape, sizeof(n->gpu_shape));
	egs_strlcpy(n->instance_type, shape, sizeof(n->instance_type));
	n->gpu_count = gpus;
	n->memory_mib = 81920;
	n->health = EGS_HEALTH_HEALTHY;
	n->last_heartbeat = T0;
	assert_int_equal(egs_state_add_node(st, n), EGS_OK);
}

static void add_ws(struct egs_state *st, const char *name, const char *c1, const char *c2)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlist_add(&w->clusters, c1);
	if (c2)
		egs_strlist_add(&w->clusters, c2);
	assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
}

/* Two clusters, two shapes (one in both clusters), 24 workspaces over one or both clusters (one
 * GPR runs per workspace: many workspaces make GPRs deep in the queue start). */
static struct egs_state *world(int backfill)
{
	struct egs_state_config cfg = { .heartbeat_timeout_s = LONG_HEARTBEAT, .backfill = backfill, .plan_snap_every = SNAP_EVERY };
	struct egs_state *st = egs_calloc(1, sizeof(*st));
	egs_state_init(st, &cfg);
	char name[32];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "h%d", i);
		add_node(st, "c1", name, "H100", 8);
		snprintf(name, sizeof(name), "k%d", i);
		add_node(st, "c2", name, "H100", 8);
	}
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "a%d", i);
		add_node(st, "c1", name, "A100", 4);
	}
	for (int i = 0; i < NWS; i++) {
		snprintf(name, sizeof(name), "ws%d", i);
		add_ws(st, name, i % 3 == 2 ? "c2" : "c1", i % 3 == 0 ? "c2" : NULL);
	}
	return st;
}

/* Submits the same random GPR to both states, at a priority from lowest up to 300. */
static void create(int64_t now, int lowest)
{
	char id[EGS_ID_MAX];
	snprintf(id, sizeof(id), "g%05zu", ngprs++);
	bool a100 = rnd(4) == 0;
	int ws = (int)rnd(NWS), nodes = rnd(8) == 0 ? 2 : 1, gpus = 1 + (int)rnd(a100 ? 4 : 8);
	int prio = lowest + (int)rnd((uint64_t)(301 - lowest));
	int64_t dur = 300 * (1 + (int64_t)rnd(12));
	for (int k = 0; k < 2; k++) {
		struct egs_gpr *g = egs_gpr_new();
		egs_strlcpy(g->id, id, sizeof(g->id));
		egs_strlcpy(g->name, id, sizeof(g->name));
		snprintf(g->workspace, sizeof(g->workspace), "ws%d", ws);
		egs_strlcpy(g->gpu_shape, a100 ? "A100" : "H100", sizeof(g->gpu_shape));
		g->node_count = nodes;
		g->gpus_per_node = gpus;
		g->exit_duration_s = dur;
		g->priority = prio;
		assert_int_equal(egs_gpr_submit(tw[k].st, g, now), EGS_OK);
	}
}

/* Every attach and detach the control plane wants, acknowledged at now (as an agent would). */
static void ack_all(struct egs_state *st, int64_t now)
{
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		char id[EGS_ID_MAX];
		struct egs_gpr *g = n->gpr_id[0] ? egs_state_gpr(st, n->gpr_id) : NULL;
		bool wants = g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED);
		if (n->attached_gpr[0] && !(wants && !strcmp(n->attached_gpr, g->id))) {
			egs_strlcpy(id, n->attached_gpr, sizeof(id));
			egs_gpr_detach_result(st, n, id, true, NULL, now);
		} else if (!n->attached_gpr[0] && wants) {
			egs_strlcpy(id, g->id, sizeof(id));
			egs_gpr_attach_result(st, n, id, true, NULL, now);
		}
	}
}

/* A random GPR (by index) in state s of both twins, or -1 after a few misses. */
static long pick(enum egs_gpr_state s)
{
	char id[EGS_ID_MAX];
	for (int tries = 0; tries < 64 && ngprs; tries++) {
		long i = (long)rnd(ngprs);
		snprintf(id, sizeof(id), "g%05ld", i);
		if (egs_state_gpr(tw[0].st, id)->state == s)
			return i;
	}
	return -1;
}

static struct egs_gpr *gpr_of(int k, long i)
{
	char id[EGS_ID_MAX];
	snprintf(id, sizeof(id), "g%05ld", i);
	return egs_state_gpr(tw[k].st, id);
}

/* Both twins' GPRs agree in everything the plan decides. */
static void compare(void)
{
	for (size_t i = 0; i < ngprs; i++) {
		const struct egs_gpr *a = gpr_of(0, (long)i), *b = gpr_of(1, (long)i);
		if (a->state != b->state || a->est_start != b->est_start || a->delayed_count != b->delayed_count ||
		    strcmp(a->cluster, b->cluster) || a->nodes.n != b->nodes.n)
			fail_msg("%s: state %d/%d, estimate %lld/%lld, delays %d/%d, cluster %s/%s (resumed vs fresh)",
				 a->id, (int)a->state, (int)b->state, (long long)a->est_start, (long long)b->est_start,
				 (int)a->delayed_count, (int)b->delayed_count, a->cluster, b->cluster);
		for (size_t j = 0; j < a->nodes.n; j++)
			assert_string_equal(a->nodes.v[j], b->nodes.v[j]);
	}
}

static size_t mid_runs; /* runs with creates between slices so far */

/* Runs both twins at now: the first from its kept plan, the second afresh.  With mid, the runs go
 * in slices of 100 GPRs and two creates come once both have placed some (the walks leave them for
 * the next run).  Returns true when the first resumed. */
static bool run_both(int64_t now, bool mid)
{
	int64_t next[2];
	bool from_kept = false;
	egs_plan_invalidate(tw[1].plan);
	free(tw[1].st->plan_pools); /* and its first state is made afresh too (core/sched_fresh.c pools_reuse) */
	tw[1].st->plan_pools = NULL;
	if (!mid) {
		for (int k = 0; k < 2; k++)
			next[k] = egs_sched_run(tw[k].st, now, tw[k].plan);
		from_kept = egs_sched_from(tw[0].plan) > 0;
	} else {
		/* Until each walk has its order (its first pieces vary); every other time the first twin
		 * stops in the middle of its order instead (pieces of 7 GPRs: one_seed), so that the creates
		 * come while the queue's order is being taken. */
		bool in_order = mid_runs++ % 2;
		for (int k = 0; k < 2; k++) {
			egs_sched_begin(tw[k].st, now, tw[k].plan);
			if (k == 0 && in_order) {
				while (egs_sched_walking(tw[k].plan) && strncmp(egs_sched_piece(tw[k].plan), "queue order", 11))
					egs_sched_step(tw[k].plan, 100);
				egs_sched_step(tw[k].plan, 100); /* its first piece */
				assert_true(!strncmp(egs_sched_piece(tw[k].plan), "queue order", 11));
				continue;
			}
			while (egs_sched_walking(tw[k].plan) &&
			       egs_sched_progress(tw[k].plan) <= egs_sched_from(tw[k].plan))
				egs_sched_step(tw[k].plan, 100);
		}
		from_kept = egs_sched_from(tw[0].plan) > 0;
		create(now, 1);
		create(now, 1);
		for (int k = 0; k < 2; k++) {
			do
				while (!egs_sched_step(tw[k].plan, 100))
					;
			while (!egs_sched_end(tw[k].plan, &next[k]));
		}
	}
	compare();
	assert_int_equal(next[0], next[1]);
	assert_false(egs_sched_adopted(tw[1].plan));
	adopted += egs_sched_adopted(tw[0].plan);
	for (int k = 0; k < 2; k++)
		egs_state_clear_changes(tw[k].st);
	return from_kept;
}

/* The same node of both twins goes unhealthy while the one that was comes back (as many nodes
 * are schedulable, others: the schedulable nodes change, the inventory does not), or with reshape
 * re-registers with half or all of its memory (its pool changes: registration bumps
 * inventory_gen).  The first twin's first state takes its pools from the last one's while they
 * apply; the second makes them afresh every run. */
static void inventory_change(bool reshape)
{
	static char down[EGS_KEY_MAX];
	char key[EGS_KEY_MAX];
	static const char *const names[] = { "c1/h", "c2/k", "c1/a" };
	int which = (int)rnd(3);
	snprintf(key, sizeof(key), "%s%d", names[which], (int)rnd(which == 2 ? 4 : 10));
	if (!reshape && !strcmp(key, down))
		return;
	for (int k = 0; k < 2; k++) {
		struct egs_node *n = egs_map_get(&tw[k].st->nodes, key);
		assert_non_null(n);
		if (reshape) {
			n->memory_mib = n->memory_mib == 81920 ? 40960 : 81920;
			tw[k].st->inventory_gen++;
		} else {
			struct egs_node *up = down[0] ? egs_map_get(&tw[k].st->nodes, down) : NULL;
			if (up) {
				up->health = EGS_HEALTH_HEALTHY;
				egs_state_touch(tw[k].st, EGS_KIND_NODE, up);
			}
			n->health = EGS_HEALTH_UNHEALTHY;
		}
		egs_state_touch(tw[k].st, EGS_KIND_NODE, n);
	}
	if (!reshape)
		egs_strlcpy(down, key, sizeof(down));
}

static void one_seed(uint64_t seed, int backfill)
{
	rng = seed * 2654435761u + 1;
	ngprs = 0;
	for (int k = 0; k < 2; k++) {
		tw[k].st = world(backfill);
		tw[k].plan = egs_plan_new();
	}
	tw[1].st->cfg.plan_no_adopt = true; /* walks after every trial of held releases */
	tw[0].st->cfg.plan_order_piece = 7;   /* a sliced run takes the queue's order in many pieces */
	int64_t now = T0;
	for (int i = 0; i < QUEUED0; i++) /* the creates after these land after or among them */
		create(now, 1);
	run_both(now, false);
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t op = rnd(100);
		bool mid = false, made = false;
		if (op < 60) { /* creates, time passing (or not) before them */
			if (op >= 45)
				now += (int64_t)rnd(4) * 300;
			for (uint64_t n = 1 + rnd(2); n > 0; n--)
				create(now, 1);
			made = true;
		} else if (op < 68) {
			now += (int64_t)rnd(3) * 600;
		} else if (op < 75) {
			for (int k = 0; k < 2; k++)
				ack_all(tw[k].st, now);
		} else if (op < 79) {
			long i = pick(EGS_GPR_QUEUED);
			for (int k = 0; i >= 0 && k < 2; k++)
				assert_int_equal(egs_gpr_cancel(tw[k].st, gpr_of(k, i), now), EGS_OK);
		} else if (op < 82) {
			long i = pick(EGS_GPR_PROVISIONED);
			for (int k = 0; i >= 0 && k < 2; k++)
				assert_int_equal(egs_gpr_release(tw[k].st, gpr_of(k, i), now), EGS_OK);
		} else if (inventory_ops && op < 88) {
			inventory_change(op >= 86);
		} else {
			mid = made = true;
		}
		bool r = run_both(now, mid);
		creates += made;
		resumed += made && r;
	}
	for (int k = 0; k < 2; k++) {
		egs_plan_free(tw[k].plan);
		egs_state_cleanup(tw[k].st);
		free(tw[k].st);
		tw[k].st = NULL;
	}
}

/* Creates resume unless the first of them goes before the first snapshot, a cancel or release is
 * still held (with backfill, more are held and for longer), or time passed a due time: here 59%
 * of them resume without backfill and 32% with it; a quarter must. */
static void check_resumed(int backfill)
{
	printf("backfill %d: %zu of %zu runs after creates resumed, %zu runs took their trial's walk\n", backfill,
	       resumed, creates, adopted);
	assert_true(creates > 0 && resumed * 4 > creates);
	assert_true(adopted > 0);
	creates = resumed = adopted = 0;
}

static void test_resumed_equals_fresh(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 6; seed++)
		one_seed(seed, 0);
	check_resumed(0);
}

static void test_resumed_equals_fresh_backfill(void **state)
{
	(void)state;
	for (uint64_t seed = 11; seed <= 16; seed++)
		one_seed(seed, 1);
	check_resumed(1);
}

/* With nodes going unhealthy and back and re-registering between runs: the first state taken from
 * the last one's pools where they apply equals one made afresh (fewer runs resume: not counted). */
static void test_inventory_changes_equal_fresh(void **state)
{
	(void)state;
	inventory_ops = true;
	for (uint64_t seed = 21; seed <= 26; seed++)
		one_seed(seed, (int)(seed % 2));
	inventory_ops = false;
	printf("with inventory changes: %zu of %zu runs after creates resumed\n", resumed, creates);
	creates = resumed = adopted = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resumed_equals_fresh),
		cmocka_unit_test(test_resumed_equals_fresh_backfill),
		cmocka_unit_test(test_inventory_changes_equal_fresh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
