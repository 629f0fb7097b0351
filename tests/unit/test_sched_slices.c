/*
 * test_sched_slices.c: the scheduler's walk run in slices (egs_sched_begin/step/end), with the
 * state changing between slices the way requests change it in egsd: a cancel, a node going
 * unhealthy, a new GPR.  The walk must not start what is no longer startable, must leave what came
 * after it began to the next walk, and must say it is stale; a trial of held releases that a
 * change interrupts must apply nothing and be tried again, and one adopted as the run's walk applies
 * its results in slices like a walk.  (tests/unit/test_sched.c reruns the
 * exactness tests with every run sliced and nothing in between.)
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

static struct egs_state *st;
static struct egs_plan *plan;

static int setup(void **state)
{
	(void)state;
	struct egs_state_config cfg = { .heartbeat_timeout_s = LONG_HEARTBEAT, .backfill = 1 };
	st = egs_calloc(1, sizeof(*st));
	egs_state_init(st, &cfg);
	plan = egs_plan_new();
	struct egs_cluster *c = egs_calloc(1, sizeof(*c));
	egs_strlcpy(c->name, "c1", sizeof(c->name));
	assert_int_equal(egs_state_add_cluster(st, c), EGS_OK);
	for (int i = 1; i <= 4; i++) {
		struct egs_node *n = egs_calloc(1, sizeof(*n));
		snprintf(n->name, sizeof(n->name), "n%d", i);
		egs_strlcpy(n->cluster, "c1", sizeof(n->cluster));
		egs_strlcpy(n->gpu_shape, "H100", sizeof(n->gpu_shape));
		egs_strlcpy(n->instance_type, "p5", sizeof(n->instance_type));
		n->gpu_count = 8;
		n->memory_mib = 81920;
		n->last_heartbeat = T0;
		assert_int_equal(egs_state_add_node(st, n), EGS_OK);
	}
	for (int i = 1; i <= 6; i++) {
		struct egs_workspace *w = egs_calloc(1, sizeof(*w));
		snprintf(w->name, sizeof(w->name), "ws%d", i);
		egs_strlist_add(&w->clusters, "c1");
		assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	egs_plan_free(plan);
	egs_state_cleanup(st);
	free(st);
	return 0;
}

/* Submits a one-node GPR of an hour in workspace ws at priority prio. */
static struct egs_gpr *gpr(const char *id, const char *ws, int prio, int64_t now)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->name, id, sizeof(g->name));
	egs_strlcpy(g->workspace, ws, sizeof(g->workspace));
	g->node_count = 1;
	g->gpus_per_node = 8;
	g->exit_duration_s = 3600;
	g->priority = prio;
	assert_int_equal(egs_gpr_submit(st, g, now), EGS_OK);
	return g;
}

/* Steps the walk in progress to its end, one GPR at a time. */
static void finish(void)
{
	int64_t next;
	do {
		while (!egs_sched_step(plan, 1))
			;
	} while (!egs_sched_end(plan, &next));
	assert_false(egs_sched_walking(plan));
}

/*
 * Four GPRs, one per workspace, each could start now on one of four nodes.  After the first
 * slice (a starts on n1): b is cancelled, n3 (where c would go) turns unhealthy, and e arrives
 * at the top priority.  The walk goes on over the queue as it began: b keeps its place without
 * starting, c does not start on the unhealthy node, d starts on n4, e is left alone; the walk is
 * stale, and the next run (in one go) is not, and gives e its place.
 */
static void test_requests_between_slices(void **state)
{
	(void)state;
	int64_t now = T0;
	struct egs_gpr *a = gpr("a", "ws1", 100, now), *b = gpr("b", "ws2", 90, now);
	struct egs_gpr *c = gpr("c", "ws3", 80, now), *d = gpr("d", "ws4", 70, now);
	egs_sched_begin(st, now, plan);
	assert_true(egs_sched_walking(plan));
	int pieces = 0; /* the first state: slots, pools (made afresh: several), workspaces */
	for (; !strncmp(egs_sched_piece(plan), "first state", 11); pieces++)
		assert_false(egs_sched_step(plan, 1));
	assert_true(pieces >= 3);
	assert_int_equal(egs_sched_progress(plan), 0);
	assert_false(egs_sched_step(plan, 1)); /* the next step takes the queue's order */
	assert_int_equal(egs_sched_progress(plan), 0);
	assert_int_equal(a->state, EGS_GPR_QUEUED);
	assert_false(egs_sched_step(plan, 1));
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(b->state, EGS_GPR_QUEUED);
	assert_false(egs_sched_stale(plan));

	assert_int_equal(egs_gpr_cancel(st, b, now), EGS_OK);
	struct egs_node *n3 = egs_state_node(st, "c1", "n3");
	n3->health = EGS_HEALTH_UNHEALTHY;
	st->generation++;
	struct egs_gpr *e = gpr("e", "ws5", 300, now);
	/* The plan is not usable while the walk goes on: a create takes no append. */
	assert_int_equal(egs_sched_append(st, gpr("f", "ws6", 1, now), now, plan), EGS_NEVER - 1);
	finish();
	assert_true(egs_sched_stale(plan));
	assert_int_equal(b->state, EGS_GPR_CANCELLED);
	assert_int_equal(b->nodes.n, 0);
	assert_int_equal(c->state, EGS_GPR_QUEUED);
	assert_string_equal(n3->gpr_id, "");
	assert_int_equal(d->state, EGS_GPR_PROVISIONING);
	assert_string_equal(d->nodes.v[0], "c1/n4");
	assert_int_equal(e->state, EGS_GPR_QUEUED);
	assert_int_equal(e->est_start, 0); /* not placed by a walk that began before it came */

	egs_sched_run(st, now, plan);
	assert_false(egs_sched_stale(plan));
	assert_int_equal(c->state, EGS_GPR_QUEUED); /* n2 is held for the cancelled b's place */
	assert_true(e->state == EGS_GPR_PROVISIONING || e->est_start > now);
	assert_string_equal(n3->gpr_id, "");
}

/* An aborted walk leaves no kept plan (appends refuse) and the next run starts afresh. */
static void test_abort(void **state)
{
	(void)state;
	int64_t now = T0;
	struct egs_gpr *a = gpr("a", "ws1", 100, now), *b = gpr("b", "ws2", 90, now);
	egs_sched_begin(st, now, plan);
	assert_false(egs_sched_step(plan, 1));
	egs_sched_abort(plan);
	assert_false(egs_sched_walking(plan));
	assert_int_equal(egs_sched_append(st, gpr("c", "ws3", 1, now), now, plan), EGS_NEVER - 1);
	egs_sched_abort(plan); /* no walk: a no-op */
	egs_sched_run(st, now, plan);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(b->state, EGS_GPR_PROVISIONING);
	assert_true(egs_sched_append(st, gpr("d", "ws4", 1, now), now, plan) != EGS_NEVER - 1);
}

/* Attaches every node assigned to a GPR (the agents' acks): the GPRs become Provisioned. */
static void attach_all(int64_t now)
{
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		char id[EGS_ID_MAX];
		if (n->gpr_id[0] && !n->attached_gpr[0]) {
			egs_strlcpy(id, n->gpr_id, sizeof(id));
			egs_gpr_attach_result(st, n, id, true, NULL, now);
		}
	}
}

/* Four GPRs a, b, c, d (priority 100, workspaces ws1 to ws4) created at now: one a node, every
 * node.  Returns a. */
static struct egs_gpr *four(int64_t now)
{
	struct egs_gpr *a = gpr("a", "ws1", 100, now);
	gpr("b", "ws2", 100, now);
	gpr("c", "ws3", 100, now);
	gpr("d", "ws4", 100, now);
	return a;
}

/* Starts what fits at now (a run, the agents attach, a run), then 600 s later releases a early,
 * its capacity held.  Returns that later now. */
static int64_t run_then_release(struct egs_gpr *a, int64_t now)
{
	egs_sched_run(st, now, plan);
	attach_all(now);
	egs_sched_run(st, now, plan);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	now += 600;
	assert_int_equal(egs_gpr_release(st, a, now), EGS_OK);
	assert_int_equal(st->held.len, 1);
	return now;
}

/*
 * A held early release is tried in the run's slices (a walk with it and one without, side by
 * side) before the walk.  A change during the trial voids it: the hold stays, and the next run
 * tries it again and applies it (e, waiting behind four running GPRs, gets a's node at once).
 */
static void test_held_trial_between_slices(void **state)
{
	(void)state;
	int64_t now = T0;
	struct egs_gpr *a = four(now), *e = gpr("e", "ws5", 50, now);
	now = run_then_release(a, now);
	assert_int_equal(e->est_start, now + 3000); /* behind the four, before the release */

	egs_sched_begin(st, now, plan);
	assert_false(egs_sched_step(plan, 1)); /* the trial's first piece: the last plan freed */
	gpr("f", "ws6", 1, now);               /* a change: the trial compared another state */
	finish();
	assert_int_equal(st->held.len, 1);
	assert_int_equal(e->est_start, now + 3000); /* a's nodes held until its old exit */

	egs_sched_begin(st, now, plan);
	finish();
	assert_int_equal(st->held.len, 0); /* lifting it moves no one later: applied */
	assert_int_equal(e->est_start, now); /* on a's node, once its agent has detached */
}

/*
 * A trial of every held release that passes is the run's walk (adopted, not walked again): its
 * steps then apply, in the run's slices, the estimates and starts the trial's walk noted.  A
 * change between those steps makes the run stale as in any walk: a GPR cancelled meanwhile keeps
 * its cancel and gets no estimate, and the next run (in one go) is not stale.
 */
static void test_adopted_trial_in_slices(void **state)
{
	(void)state;
	int64_t now = T0;
	struct egs_gpr *a = four(now), *e = gpr("e", "ws5", 50, now), *f = gpr("f", "ws6", 40, now);
	struct egs_gpr *g = gpr("g", "ws1", 30, now);
	now = run_then_release(a, now);
	assert_false(egs_sched_adopted(plan));
	assert_int_equal(f->est_start, now + 3000);

	egs_sched_begin(st, now, plan);
	for (int steps = 0; !egs_sched_adopted(plan); steps++) /* the trial's pieces and walk */
		assert_true(steps < 32 && !egs_sched_step(plan, 1));
	assert_true(egs_sched_walking(plan));
	assert_int_equal(st->held.len, 0); /* lifting it moved no one later: dropped */
	assert_int_equal(egs_sched_progress(plan), 0);
	assert_false(egs_sched_step(plan, 1)); /* e's estimate goes in: a's node, once detached */
	assert_int_equal(e->est_start, now);
	assert_int_equal(f->est_start, now + 3000);
	assert_int_equal(egs_gpr_cancel(st, f, now), EGS_OK);
	finish();
	assert_true(egs_sched_stale(plan));
	assert_int_equal(f->state, EGS_GPR_CANCELLED);
	assert_int_equal(g->est_start, now + 3000); /* ws1 is free once a has left */

	egs_sched_run(st, now, plan);
	assert_false(egs_sched_stale(plan));
	assert_int_equal(e->est_start, now);
	assert_int_equal(g->est_start, now + 3000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_requests_between_slices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_trial_between_slices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_adopted_trial_in_slices, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
