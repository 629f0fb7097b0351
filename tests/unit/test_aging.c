/*
 * test_aging.c: finished GPRs leaving memory by age (core/aging.c) and coming back from the store
 * (egs_store_gprs_find, the load's cut-off and its restore of GPRs a node names), on SQLite in a
 * temporary directory, and the load and finder again on a throwaway PostgreSQL (pgtest.h), whose
 * load sums the aged rows in SQL.  The sweep must skip what is still referred to (a pending commit, a hold,
 * a node, the caller's pin) and take it once it is not; the load must leave out exactly the old
 * finished rows, keep next_seq past them and count them; the finder must page in id order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/aging.h"
#include "core/fair.h"
#include "core/util.h"
#include "store/store.h"

#include "pgtest.h"

static struct egs_gpr *gpr(struct egs_state *st, const char *id, const char *ws, enum egs_gpr_state s,
			   int64_t completion, uint64_t seq)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->name, id, sizeof(g->name));
	egs_strlcpy(g->workspace, ws, sizeof(g->workspace));
	g->state = s;
	g->gpus_per_node = g->node_count = 1;
	g->created_at = 1;
	g->completion_ts = completion;
	g->start_ts = s == EGS_GPR_COMPLETE ? completion - 50 : 0; /* ran 50 s: fair-share usage */
	g->seq = seq;
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	return g;
}

static struct egs_node *node(struct egs_state *st, const char *name)
{
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->cluster, "c1", sizeof(n->cluster));
	egs_strlcpy(n->name, name, sizeof(n->name));
	n->gpu_count = 1;
	assert_int_equal(egs_state_add_node(st, n), EGS_OK);
	return n;
}

static bool pin_f(void *ctx, const struct egs_gpr *g)
{
	return ctx && !strcmp(g->id, "f");
}

static void test_sweep_skips_what_is_referred_to(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, &(struct egs_state_config){ .finished_retention_s = 100 });
	struct egs_node *n1 = node(&st, "n1");
	gpr(&st, "a", "w", EGS_GPR_COMPLETE, 10, 1);
	struct egs_gpr *b = gpr(&st, "b", "w", EGS_GPR_CANCELLED, 20, 2);
	gpr(&st, "c", "w", EGS_GPR_ERROR, 30, 3)->held_until = 500;
	struct egs_gpr *d = gpr(&st, "d", "w", EGS_GPR_COMPLETE, 40, 4);
	gpr(&st, "f", "w", EGS_GPR_COMPLETE, 50, 5);
	gpr(&st, "e", "w", EGS_GPR_COMPLETE, 200, 6);
	gpr(&st, "q", "w", EGS_GPR_QUEUED, 0, 7);
	egs_strlist_add(&d->nodes, "c1/n1");
	egs_strlcpy(n1->attached_gpr, "d", sizeof(n1->attached_gpr));
	egs_state_touch(&st, EGS_KIND_GPR, b); /* a change not yet committed */
	assert_int_equal(st.finished.len, 6);

	assert_int_equal(egs_aging_sweep(&st, 150, 100, true, pin_f, &st), 1);
	assert_null(egs_state_gpr(&st, "a"));
	assert_int_equal(st.aged[EGS_GPR_COMPLETE], 1);
	assert_int_equal(st.gprs.len, 6);
	assert_int_equal(egs_aging_total(&st), 7);

	egs_state_clear_changes(&st); /* b committed */
	n1->attached_gpr[0] = '\0';   /* the agent reported d detached */
	assert_int_equal(egs_aging_sweep(&st, 150, 100, true, pin_f, NULL), 3);
	assert_null(egs_state_gpr(&st, "b"));
	assert_null(egs_state_gpr(&st, "d"));
	assert_null(egs_state_gpr(&st, "f"));
	assert_non_null(egs_state_gpr(&st, "c")); /* held */
	assert_non_null(egs_state_gpr(&st, "e")); /* young */
	assert_non_null(egs_state_gpr(&st, "q")); /* never ages */
	assert_int_equal(st.aged[EGS_GPR_CANCELLED], 1);
	assert_int_equal(st.aged[EGS_GPR_COMPLETE], 3);

	egs_state_gpr(&st, "c")->held_until = 0;
	assert_int_equal(egs_aging_sweep(&st, 1000, 1, true, NULL, NULL), 1); /* at most max per sweep */
	assert_int_equal(egs_aging_sweep(&st, 1000, 100, true, NULL, NULL), 1);
	assert_int_equal(st.gprs.len, 1);
	assert_int_equal(egs_aging_total(&st), 7);
	egs_state_cleanup(&st);
}

static void test_retention_zero_lists_nothing(void **state)
{
	(void)state;
	struct egs_state st;
	egs_state_init(&st, NULL);
	gpr(&st, "a", "w", EGS_GPR_COMPLETE, 10, 1);
	assert_int_equal(st.finished.len, 0);
	assert_int_equal(egs_aging_sweep(&st, 1000, 100, true, NULL, NULL), 0);
	assert_non_null(egs_state_gpr(&st, "a"));
	egs_state_cleanup(&st);
}

/* ---- the store ---- */

struct found {
	char ids[16][EGS_ID_MAX];
	size_t n;
};

static void note(void *ctx, struct egs_gpr *g)
{
	struct found *f = ctx;
	assert_true(f->n < 16);
	egs_strlcpy(f->ids[f->n++], g->id, EGS_ID_MAX);
	egs_gpr_free(g);
}

static const char *find(struct egs_store *s, const struct egs_gpr_find *q, struct found *f)
{
	static char joined[16 * EGS_ID_MAX];
	memset(f, 0, sizeof(*f));
	assert_int_equal(egs_store_gprs_find(s, q, note, f), EGS_OK);
	joined[0] = '\0';
	for (size_t i = 0; i < f->n; i++) {
		size_t at = strlen(joined);
		snprintf(joined + at, sizeof(joined) - at, "%s%s", i ? "," : "", f->ids[i]);
	}
	return joined;
}

/* The load and the finder on the store at url (empty). */
static void load_and_find(const char *url)
{
	struct egs_store *s = NULL;
	assert_int_equal(egs_store_open(url, &s), EGS_OK);
	assert_int_equal(egs_store_lead(s), EGS_OK);
	struct egs_state st;
	egs_state_init(&st, NULL);
	struct egs_gpr *rows[] = {
		gpr(&st, "gpr-01", "w1", EGS_GPR_COMPLETE, 100, 1),  gpr(&st, "gpr-02", "w2", EGS_GPR_CANCELLED, 200, 2),
		gpr(&st, "gpr-03", "w1", EGS_GPR_CANCELLED, 300, 3), gpr(&st, "gpr-04", "w1", EGS_GPR_QUEUED, 0, 4),
		gpr(&st, "gpr-05", "w1", EGS_GPR_COMPLETE, 5000, 5), gpr(&st, "gpr-06", "w1", EGS_GPR_ERROR, 400, 9),
		/* the edges of the cut-off (1000 below): an old one the planner holds, one that ended at the
		 * cut-off itself, and two with no completion time, which age by their creation */
		gpr(&st, "gpr-07", "w2", EGS_GPR_COMPLETE, 900, 10), gpr(&st, "gpr-08", "w2", EGS_GPR_COMPLETE, 1000, 11),
		gpr(&st, "gpr-09", "w2", EGS_GPR_CANCELLED, 0, 12),  gpr(&st, "gpr-10", "w2", EGS_GPR_REJECTED, 0, 13),
	};
	rows[6]->held_until = 5000;
	rows[8]->created_at = 999;
	rows[9]->created_at = 1000;
	for (size_t i = 0; i < EGS_ARRAY_LEN(rows); i++)
		egs_state_touch(&st, EGS_KIND_GPR, rows[i]);
	struct egs_node *n = node(&st, "n1");
	egs_strlcpy(n->attached_gpr, "gpr-03", sizeof(n->attached_gpr)); /* names an old one */
	egs_state_touch(&st, EGS_KIND_NODE, n);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_state_cleanup(&st);
	struct egs_state all; /* retention 0: everything, as before aging */
	egs_state_init(&all, NULL);
	assert_int_equal(egs_store_load(s, &all), EGS_OK);
	assert_int_equal(all.gprs.len, 10);

	struct egs_state ld;
	egs_state_init(&ld, &(struct egs_state_config){ .finished_retention_s = 1000 });
	egs_aging_cutoff(&ld, 2000); /* finished before 1000 stay in the store */
	assert_int_equal(egs_store_load(s, &ld), EGS_OK);
	/* queued 04, young 05, 03 that node n1 names, held 07, 08 and 10 that ended at the cut-off */
	assert_int_equal(ld.gprs.len, 6);
	static const char *const kept[] = { "gpr-03", "gpr-04", "gpr-05", "gpr-07", "gpr-08", "gpr-10" };
	for (size_t i = 0; i < EGS_ARRAY_LEN(kept); i++)
		assert_non_null(egs_state_gpr(&ld, kept[i]));
	assert_null(egs_state_gpr(&ld, "gpr-06"));
	assert_null(egs_state_gpr(&ld, "gpr-09"));
	assert_int_equal(ld.aged[EGS_GPR_COMPLETE] + ld.aged[EGS_GPR_CANCELLED] + ld.aged[EGS_GPR_ERROR], 4);
	assert_true(ld.next_seq > 13); /* a new id never repeats an aged one's sequence */
	/* Aged GPRs' GPU time still orders the queue: the same fair-share key as a load of everything. */
	assert_true(fabs(egs_fair_key(&ld, "w1") - egs_fair_key(&all, "w1")) < 1e-9);
	assert_true(fabs(egs_fair_key(&ld, "w2") - egs_fair_key(&all, "w2")) < 1e-9);
	assert_true(egs_fair_key(&ld, "w1") > -INFINITY);
	egs_state_cleanup(&ld);
	egs_state_cleanup(&all);

	struct found f;
	assert_string_equal(find(s, &(struct egs_gpr_find){ .id = "gpr-06" }, &f), "gpr-06");
	assert_string_equal(find(s, &(struct egs_gpr_find){ .id = "gpr-04" }, &f), ""); /* not finished */
	assert_string_equal(find(s, &(struct egs_gpr_find){ .workspace = "w1" }, &f), "gpr-01,gpr-03,gpr-05,gpr-06");
	assert_string_equal(find(s, &(struct egs_gpr_find){ .state = "Cancelled" }, &f), "gpr-02,gpr-03,gpr-09");
	assert_string_equal(find(s, &(struct egs_gpr_find){ .workspace = "w1", .after_id = "gpr-01", .limit = 2 }, &f),
			    "gpr-03,gpr-05");
	assert_string_equal(find(s, &(struct egs_gpr_find){ .ended_since = 300 }, &f),
			    "gpr-03,gpr-05,gpr-06,gpr-07,gpr-08");
	egs_store_free(s);
}

static void test_load_leaves_old_finished_rows_in_the_store(void **state)
{
	(void)state;
	char dir[] = "/tmp/egs-test-aging-XXXXXX", path[128], p2[160];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/egs.db", dir);
	load_and_find(path);
	snprintf(p2, sizeof(p2), "%s-wal", path);
	unlink(p2);
	snprintf(p2, sizeof(p2), "%s-shm", path);
	unlink(p2);
	unlink(path);
	rmdir(dir);
}

/* PostgreSQL sums the aged rows in SQL (egs_rows_aged_sum_sql): the same counts and fair-share key. */
static struct pgtest pg_test;

static void test_pg_load_leaves_old_finished_rows_in_the_store(void **state)
{
	(void)state;
	char url[768];
	assert_true(pgtest_exec(pg_test.url, "CREATE SCHEMA aging"));
	snprintf(url, sizeof(url), "%s&options=-csearch_path%%3Daging", pg_test.url);
	load_and_find(url);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep_skips_what_is_referred_to),
		cmocka_unit_test(test_retention_zero_lists_nothing),
		cmocka_unit_test(test_load_leaves_old_finished_rows_in_the_store),
	};
	const struct CMUnitTest pg_tests[] = {
		cmocka_unit_test(test_pg_load_leaves_old_finished_rows_in_the_store),
	};
	int failed = cmocka_run_group_tests_name("sqlite", tests, NULL, NULL);
	if (!pgtest_start(&pg_test))
		return 1;
	failed += cmocka_run_group_tests_name("postgres", pg_tests, NULL, NULL);
	pgtest_cleanup(&pg_test);
	return failed;
}
