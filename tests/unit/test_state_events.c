/*
 * test_state_events.c: the event log of core/state.h as observability uses it: Kubernetes-style
 * aggregation (egs_state_event_repeat) within a turn and across commits, the window and the key it
 * aggregates on, that a repeat is written again without being listed twice, resizing the listing
 * ring, and a repeat evicted in the turn that bumped it (run under ASan by `make test`).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "core/state.h"

static const struct egs_event *ring(const struct egs_state *st, size_t i)
{
	return st->events[(st->events_head + i) % st->cfg.event_retention];
}

static const struct egs_event *newest(const struct egs_state *st)
{
	return st->events_len ? ring(st, st->events_len - 1) : NULL;
}

static void repeat(struct egs_state *st, int64_t now, const char *reason, const char *node, const char *msg)
{
	egs_state_event_repeat(st, now, 600, "Warning", reason, "Node", node, "w", "%s", msg);
}

static void test_repeat_within_a_turn(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	repeat(&st, 100, "GPUTemperatureHigh", "c/n1", "91 C");
	repeat(&st, 105, "GPUTemperatureHigh", "c/n1", "93 C");
	assert_int_equal(st.new_events.len, 1);
	const struct egs_event *e = st.new_events.items[0];
	assert_int_equal(e->count, 2);
	assert_int_equal(e->first_time, 100);
	assert_int_equal(e->time, 105);
	assert_string_equal(e->message, "93 C");
	egs_state_clear_changes(&st);
	assert_int_equal(st.events_len, 1);
	egs_state_cleanup(&st);
}

static void test_repeat_across_commits_is_written_again_once(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	repeat(&st, 100, "GPUTemperatureHigh", "c/n1", "91 C");
	egs_state_clear_changes(&st);
	int64_t id = newest(&st)->id;
	egs_state_event(&st, 110, "Normal", "Other", "GPR", "g1", "w", "unrelated");
	repeat(&st, 120, "GPUTemperatureHigh", "c/n1", "95 C");
	repeat(&st, 130, "GPUTemperatureHigh", "c/n1", "96 C");
	/* The committed event is in the turn's log (so the store writes it again), once. */
	assert_int_equal(st.new_events.len, 2);
	const struct egs_event *again = st.new_events.items[1];
	assert_int_equal(again->id, id);
	assert_int_equal(again->count, 3);
	assert_true(again->listed);
	egs_state_clear_changes(&st);
	assert_int_equal(st.events_len, 2); /* listed once, plus the unrelated event */
	assert_int_equal(ring(&st, 0)->id, id);
	assert_int_equal(ring(&st, 0)->time, 130);
	assert_string_equal(ring(&st, 0)->message, "96 C");
	egs_state_cleanup(&st);
}

static void test_window_and_key(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	repeat(&st, 100, "GPUTemperatureHigh", "c/n1", "a");
	egs_state_clear_changes(&st);
	repeat(&st, 701, "GPUTemperatureHigh", "c/n1", "b"); /* 601 s later: outside the window */
	repeat(&st, 702, "GPUTemperatureHigh", "c/n2", "c"); /* another object */
	repeat(&st, 703, "GPUPowerHigh", "c/n1", "d");       /* another reason */
	egs_state_event_repeat(&st, 704, 600, "Normal", "GPUTemperatureHigh", "Node", "c/n1", "w", "e"); /* type */
	egs_state_event_repeat(&st, 705, 600, "Warning", "GPUTemperatureHigh", "Node", "c/n1", "v", "f"); /* ws */
	assert_int_equal(st.new_events.len, 5);
	for (size_t i = 0; i < st.new_events.len; i++)
		assert_int_equal(((const struct egs_event *)st.new_events.items[i])->count, 1);
	/* A clock that went back never matches an event "from the future". */
	repeat(&st, 50, "GPUPowerHigh", "c/n1", "g");
	assert_int_equal(st.new_events.len, 6);
	egs_state_cleanup(&st);
}

static void test_resize_ring(void **state)
{
	(void)state;
	struct egs_state st;
	struct egs_state_config cfg = { .event_retention = 200 };
	egs_state_init(&st, &cfg);
	for (int i = 0; i < 300; i++)
		egs_state_event(&st, i, "Normal", "R", "GPR", "g", "w", "%d", i);
	egs_state_clear_changes(&st);
	assert_int_equal(st.events_len, 200);
	assert_string_equal(ring(&st, 0)->message, "100");
	egs_state_set_event_retention(&st, 128);
	assert_int_equal(st.events_len, 128);
	assert_string_equal(ring(&st, 0)->message, "172");
	assert_string_equal(newest(&st)->message, "299");
	egs_state_set_event_retention(&st, 1000);
	assert_int_equal(st.events_len, 128);
	for (int i = 300; i < 400; i++)
		egs_state_event(&st, i, "Normal", "R", "GPR", "g", "w", "%d", i);
	egs_state_clear_changes(&st);
	assert_int_equal(st.events_len, 228);
	assert_string_equal(ring(&st, 0)->message, "172");
	assert_string_equal(newest(&st)->message, "399");
	egs_state_cleanup(&st);
}

static void test_bumped_event_evicted_in_its_turn(void **state)
{
	(void)state;
	struct egs_state st;
	struct egs_state_config cfg = { .event_retention = 128 };
	egs_state_init(&st, &cfg);
	for (int i = 0; i < 127; i++)
		egs_state_event(&st, 100, "Normal", "R", "GPR", "g", "w", "%d", i);
	repeat(&st, 100, "GPUTemperatureHigh", "c/n1", "first");
	egs_state_clear_changes(&st);
	repeat(&st, 110, "GPUTemperatureHigh", "c/n1", "bumped");
	assert_int_equal(newest(&st)->count, 2);
	for (int i = 0; i < 200; i++)
		egs_state_event(&st, 110, "Normal", "R", "GPR", "g", "w", "x%d", i);
	egs_state_clear_changes(&st); /* evicts everything older, the bumped event included */
	assert_int_equal(st.events_len, 128);
	assert_string_equal(newest(&st)->message, "x199");
	egs_state_cleanup(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repeat_within_a_turn),
		cmocka_unit_test(test_repeat_across_commits_is_written_again_once),
		cmocka_unit_test(test_window_and_key),
		cmocka_unit_test(test_resize_ring),
		cmocka_unit_test(test_bumped_event_evicted_in_its_turn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
