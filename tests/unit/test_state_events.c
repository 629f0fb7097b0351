/*
 * test_state_events.c: the event log of core/state.h as observability uses it: Kubernetes-style
 * aggregation (egs_state_event_repeat) within a turn and across commits, the window and the key it
 * aggregates on, that a repeat is written again without being listed twice, resizing the listing
 * ring, a repeat evicted in the turn that bumped it, and the creation event written without printf
 * (run under ASan by `make test`).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/gpr.h"
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

/* A GPR's Queued event, written by hand on the create path, says what the printf form said, for
 * every name length up to the longest and priorities of one to four digits; and a message given
 * ready is cut and made valid UTF-8 as a formatted one is. */
static void test_queued_event_text(void **state)
{
	(void)state;
	static const int prios[] = { 1, 9, 10, 101, 300, 1000 };
	struct egs_state st;
	egs_state_init(&st, NULL);
	for (size_t len = 1; len < EGS_NAME_MAX; len += 7)
		for (size_t p = 0; p < sizeof(prios) / sizeof(prios[0]); p++) {
			struct egs_gpr *g = egs_gpr_new();
			char want[EGS_EVENT_MESSAGE_MAX];
			snprintf(g->id, sizeof(g->id), "gpr-%04zx-%04zx", len, p);
			memset(g->name, 'n', len);
			g->name[len] = '\0';
			g->name[0] = 'a' + (char)(p % 26);
			egs_strlcpy(g->workspace, "w", sizeof(g->workspace));
			g->priority = prios[p];
			g->node_count = g->gpus_per_node = 1;
			size_t before = st.new_events.len;
			assert_int_equal(egs_gpr_submit(&st, g, 100), EGS_OK);
			assert_int_equal(st.new_events.len, before + 1);
			const struct egs_event *ev = st.new_events.items[before];
			snprintf(want, sizeof(want), "GPR %s created and queued at priority %d", g->name, g->priority);
			assert_string_equal(ev->message, want);
			assert_string_equal(ev->reason, "Queued");
			assert_string_equal(ev->object_name, g->id);
			assert_string_equal(ev->workspace, "w");
		}
	char longer[700];
	memset(longer, 'x', sizeof(longer) - 3);
	memcpy(longer + 510, "\xc3\xa9", 2); /* a two-byte character across the cut at 511 */
	longer[sizeof(longer) - 3] = '\0';
	egs_state_event_msg(&st, 100, "Normal", "R", "GPR", "x", "w", longer);
	egs_state_event(&st, 100, "Normal", "R", "GPR", "x", "w", "%s", longer);
	const struct egs_event *a = st.new_events.items[st.new_events.len - 2], *b = st.new_events.items[st.new_events.len - 1];
	assert_string_equal(a->message, b->message);
	assert_int_equal(strlen(a->message), 511);
	assert_int_equal(a->message[510], '?'); /* half a character is not kept */
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
		cmocka_unit_test(test_queued_event_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
