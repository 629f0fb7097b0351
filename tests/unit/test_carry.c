/*
 * test_carry.c: a fresh model takes the runtime-only fields of the model it replaces by GPR id
 * (server/reload.c egs_carry_gprs), in steps as a follower's swap carries them (replica_load.c):
 * carried in steps of any size it equals one carry of every GPR at once, and each GPR gets the rule's
 * value (the old one's phase time when the state is the same, now otherwise; 0 for one old lacks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"
#include "server/server.h"

#define N 10000
#define NOW 5000000

static void add(struct egs_state *st, int i, enum egs_gpr_state s, int64_t t)
{
	struct egs_gpr *g = egs_gpr_new();
	snprintf(g->id, sizeof(g->id), "gpr-%08x-00", (unsigned)i);
	snprintf(g->name, sizeof(g->name), "g%d", i);
	egs_strlcpy(g->workspace, "w", sizeof(g->workspace));
	g->state = s;
	g->gpus_per_node = g->node_count = 1;
	g->created_at = 1;
	g->seq = (uint64_t)i + 1;
	g->phase_since = t;
	g->idle_since = t + 1;
	g->est_start = t + 2;
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
}

/* old: GPRs 0 .. N-1 (every third Provisioned, the others Queued); fresh: 100 .. N+99 with the
 * runtime fields zero, every fifth of them Complete now, as a load that saw them change finds them. */
static void models(struct egs_state *old, struct egs_state *fresh)
{
	struct egs_state_config cfg = { 0 };
	egs_state_init(old, &cfg);
	egs_state_init(fresh, &cfg);
	for (int i = 0; i < N; i++)
		add(old, i, i % 3 ? EGS_GPR_QUEUED : EGS_GPR_PROVISIONED, 1000 + i);
	for (int i = 100; i < N + 100; i++)
		add(fresh, i, i % 5 == 0 ? EGS_GPR_COMPLETE : i % 3 ? EGS_GPR_QUEUED : EGS_GPR_PROVISIONED, 0);
}

static void test_steps_equal_one_carry(void **state)
{
	(void)state;
	struct egs_state old, once, stepped;
	models(&old, &once);
	struct egs_state scratch;
	models(&scratch, &stepped);
	egs_state_cleanup(&scratch);
	size_t pos = 0;
	assert_true(egs_carry_gprs(&old, &once, &pos, SIZE_MAX, NOW));
	size_t steps[] = { 1, 7, 4096, 1000, SIZE_MAX };
	pos = 0;
	int calls = 0;
	for (bool done = false; !done; calls++)
		done = egs_carry_gprs(&old, &stepped, &pos, steps[calls < 4 ? calls : 4], NOW);
	assert_int_equal(calls, 5); /* 5,104 GPRs in the first four steps, the rest in the last */
	int fresh_ones = 0;
	for (int i = 100; i < N + 100; i++) {
		char id[EGS_ID_MAX];
		snprintf(id, sizeof(id), "gpr-%08x-00", (unsigned)i);
		const struct egs_gpr *a = egs_state_gpr(&once, id), *b = egs_state_gpr(&stepped, id);
		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(a->phase_since, b->phase_since);
		assert_int_equal(a->idle_since, b->idle_since);
		assert_int_equal(a->est_start, b->est_start);
		const struct egs_gpr *o = egs_state_gpr(&old, id);
		if (!o) {
			fresh_ones++;
			assert_int_equal(b->phase_since, NOW);
			assert_int_equal(b->idle_since, 0);
			assert_int_equal(b->est_start, 0);
			continue;
		}
		assert_int_equal(b->phase_since, o->state == b->state ? 1000 + i : NOW);
		assert_int_equal(b->idle_since, 1001 + i);
		assert_int_equal(b->est_start, 1002 + i);
	}
	assert_int_equal(fresh_ones, 100);
	egs_state_cleanup(&old);
	egs_state_cleanup(&once);
	egs_state_cleanup(&stepped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steps_equal_one_carry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
