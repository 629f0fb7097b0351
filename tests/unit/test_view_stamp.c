/*
 * test_view_stamp.c: the view stamps of core/state.h that server/gpr_view.c keys kept status views
 * by.  A GPR gets a stamp never given out before when it enters the state and on every touch, the
 * second touch of a turn included (the dirty flag makes the rest of a second touch a no-op, and a
 * view built between two changes of one turn must not outlive the second); touching another GPR
 * leaves its stamp alone.
 *
 * The stamps come from the state's change clock (view_clock), which server/durable.c pairs with
 * each commit's write number: every change of any kind moves it (a touch, a deletion, a price
 * change through egs_state_shown_change), or a status view could count durable while it shows a
 * change not yet on disk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "core/state.h"
#include "core/util.h"

static struct egs_gpr *add(struct egs_state *st, const char *id)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	g->state = EGS_GPR_COMPLETE;
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	return g;
}

static void test_stamps_move_with_every_change_of_the_gpr(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	struct egs_gpr *a = add(&st, "gpr-a"), *b = add(&st, "gpr-b");
	assert_true(a->view_stamp > 0 && b->view_stamp > a->view_stamp);

	uint64_t s = a->view_stamp, sb = b->view_stamp;
	egs_state_touch(&st, EGS_KIND_GPR, a);
	assert_true(a->view_stamp > b->view_stamp);
	uint64_t first = a->view_stamp;
	egs_state_touch(&st, EGS_KIND_GPR, a); /* already dirty in this turn: still a new stamp */
	assert_true(a->view_stamp > first);
	assert_int_equal(b->view_stamp, sb);
	assert_int_not_equal(a->view_stamp, s);

	egs_state_clear_changes(&st);
	uint64_t after = a->view_stamp;
	egs_state_touch(&st, EGS_KIND_GPR, b); /* another GPR's change */
	assert_int_equal(a->view_stamp, after);
	egs_state_restamp(&st, a);
	assert_true(a->view_stamp > b->view_stamp);
	egs_state_clear_changes(&st);
	egs_state_cleanup(&st);
}

static void test_every_change_moves_the_change_clock(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	struct egs_gpr *a = add(&st, "gpr-a");
	assert_int_equal(st.view_clock, a->view_stamp); /* the last stamp given out */
	struct egs_project *p = egs_calloc(1, sizeof(*p));
	egs_strlcpy(p->name, "p", sizeof(p->name));
	assert_int_equal(egs_state_add_project(&st, p), EGS_OK);

	uint64_t c = st.view_clock;
	egs_state_touch(&st, EGS_KIND_PROJECT, p);
	assert_true(st.view_clock > c);
	c = st.view_clock;
	egs_state_touch(&st, EGS_KIND_PROJECT, p); /* already dirty: still a change */
	assert_true(st.view_clock > c);
	c = st.view_clock;
	egs_state_shown_change(&st);
	assert_true(st.view_clock > c);
	c = st.view_clock;
	egs_state_del(&st, EGS_KIND_PROJECT, p);
	assert_true(st.view_clock > c);
	c = st.view_clock;
	egs_state_touch(&st, EGS_KIND_GPR, a);
	assert_true(st.view_clock > c && a->view_stamp == st.view_clock);
	egs_state_clear_changes(&st);
	egs_state_cleanup(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stamps_move_with_every_change_of_the_gpr),
		cmocka_unit_test(test_every_change_moves_the_change_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
