/*
 * test_store_write.c: the SQLite store's write path as a durable create uses it (issue 16): the
 * process-wide SQLite settings the store makes before its first connection, and a create's three
 * rows (the GPR, its event, its audit entry) read back from the file column by column, as a second
 * connection sees them, so that what a create stores stays what it was while its cost moves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/state.h"
#include "store/store.h"
#include "tmpdb.h"

/* SQLite's allocation statistics are off once a store was opened: with them on, every SQLite
 * allocation and free took a global mutex (~3,200 instructions a create).  The setting is made
 * before SQLite initialises, so it must be in effect (memory used reads 0 with an open connection)
 * and can no longer be changed. */
static void test_memstatus_off(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_store *s = NULL;
	tmpdb_make(&t, "egs-test-store-write");
	assert_int_equal(egs_store_open(t.path, &s), EGS_OK);
	assert_int_equal(sqlite3_memory_used(), 0);
	assert_int_equal(sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 1), SQLITE_MISUSE);
	egs_store_free(s);
	tmpdb_cleanup(&t);
}

/* ---- rows whose parameters are bound only when they change ---- */

/* One GPR row of the sequence: each differs from the one before in a way a kept parameter could
 * get wrong (NULL to text and back, a prefix, an empty string, a long text bound from the caller,
 * a list's JSON, -inf as NULL, 0.0 then -0.0). */
struct row_spec {
	const char *name;
	int fail; /* 0: NULL, 1: "x", 2: "y", 3: "", 4: 2,000 bytes */
	int priority;
	int nprefer;
	int nnodes;
	double fair;
};

static const struct row_spec specs[] = {
	{ "a", 0, 5, 0, 0, -INFINITY }, { "a", 0, 5, 0, 0, -INFINITY }, { "b", 1, 5, 0, 0, 0.0 },
	{ "b", 2, 6, 1, 0, -0.0 },      { "bb", 0, 6, 1, 0, 1.5 },      { "b", 4, 6, 2, 150, 1.5 },
	{ "b", 4, 6, 2, 150, 1.5 },     { "b", 3, 7, 0, 150, 2.0 },     { "b", 0, 7, 0, 0, 2.0 },
};
enum { NSPECS = sizeof(specs) / sizeof(specs[0]) };

static char long_text[2001];

static const char *fail_text(int f)
{
	static const char *const t[] = { NULL, "x", "y", "", long_text };
	return t[f];
}

static struct egs_gpr *spec_gpr(int i, uint64_t seq)
{
	const struct row_spec *sp = &specs[i];
	struct egs_gpr *g = egs_gpr_new();
	snprintf(g->id, sizeof(g->id), "gpr-%08x-0001", (unsigned)seq);
	egs_strlcpy(g->name, sp->name, sizeof(g->name));
	egs_strlcpy(g->workspace, "ws-a", sizeof(g->workspace));
	egs_strlcpy(g->created_by, "key-owner-1", sizeof(g->created_by));
	g->gpus_per_node = 1;
	g->node_count = 1;
	g->exit_duration_s = 3600;
	g->priority = sp->priority;
	g->state = EGS_GPR_QUEUED;
	g->created_at = 1700000000;
	g->seq = seq;
	g->fair = sp->fair;
	g->failure_reason = egs_strdup(fail_text(sp->fail));
	for (int k = 0; k < sp->nprefer; k++)
		egs_strlist_add(&g->preferred_clusters, k ? "c2" : "c1");
	for (int k = 0; k < sp->nnodes; k++) {
		char n[32];
		snprintf(n, sizeof(n), "cluster-1/node-%03d", k);
		egs_strlist_add(&g->nodes, n);
	}
	return g;
}

/* The JSON text egsd writes for the nodes list of spec_gpr. */
static void nodes_json(char *out, size_t cap, int n)
{
	size_t at = (size_t)snprintf(out, cap, "[");
	for (int k = 0; k < n; k++)
		at += (size_t)snprintf(out + at, cap - at, "%s\"cluster-1/node-%03d\"", k ? "," : "", k);
	snprintf(out + at, cap - at, "]");
}

static void check_gpr_row(sqlite3_stmt *q, int i)
{
	const struct row_spec *sp = &specs[i];
	char want[4096];
	assert_string_equal(sqlite3_column_text(q, 0), sp->name);
	const char *f = fail_text(sp->fail);
	if (!f)
		assert_int_equal(sqlite3_column_type(q, 1), SQLITE_NULL);
	else
		assert_string_equal(sqlite3_column_text(q, 1), f);
	assert_int_equal(sqlite3_column_int(q, 2), sp->priority);
	static const char *const prefer[] = { "[]", "[\"c1\"]", "[\"c1\",\"c2\"]" };
	assert_string_equal(sqlite3_column_text(q, 3), prefer[sp->nprefer]);
	nodes_json(want, sizeof(want), sp->nnodes);
	assert_string_equal(sqlite3_column_text(q, 4), want);
	if (isinf(sp->fair))
		assert_int_equal(sqlite3_column_type(q, 5), SQLITE_NULL);
	else
		assert_true(sqlite3_column_double(q, 5) == sp->fair);
	assert_string_equal(sqlite3_column_text(q, 6), "ws-a");
	assert_string_equal(sqlite3_column_text(q, 7), "Queued");
}

static void add_spec(struct egs_state *st, int i, int64_t now)
{
	struct egs_gpr *g = spec_gpr(i, st->next_seq);
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	egs_state_touch(st, EGS_KIND_GPR, g);
	/* Events: the same message twice in a row, then another; the object name changes each time. */
	egs_state_event(st, now, "Normal", "Created", "GPR", g->id, "ws-a", "GPR created%s", i % 3 == 2 ? " again" : "");
	struct egs_audit *a = egs_calloc(1, sizeof(*a));
	a->time = now;
	egs_strlcpy(a->key_id, "key-owner-1", sizeof(a->key_id));
	egs_strlcpy(a->role, "Owner", sizeof(a->role));
	egs_strlcpy(a->method, "POST", sizeof(a->method));
	egs_strlcpy(a->route, "/api/v1/gpr", sizeof(a->route));
	egs_strlcpy(a->target, g->id, sizeof(a->target));
	a->status = i == 4 ? 422 : 200;
	egs_strlcpy(a->error_key, i == 4 ? "INVALID" : "", sizeof(a->error_key));
	egs_strlcpy(a->peer, "127.0.0.1", sizeof(a->peer));
	egs_state_audit(st, a);
}

/*
 * A sequence of GPRs, events and audit entries over several turns, each row differing from the one
 * before in one way, read back from the file by a second connection column by column: a
 * parameter skipped because its value was unchanged must still hold that value, and one that
 * changed must be bound anew.  The rows' source objects are freed between turns (the commit's
 * deletions), so a binding left pointing at the caller's memory would show under ASan.
 */
static void test_kept_parameters(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st;
	struct egs_store *s = NULL;
	memset(long_text, 'z', sizeof(long_text) - 1);
	tmpdb_make(&t, "egs-test-store-write");
	assert_int_equal(egs_store_open(t.path, &s), EGS_OK);
	egs_state_init(&st, NULL);
	for (int turn = 0, i = 0; i < NSPECS; turn++) {
		for (int k = 0; k < 3 && i < NSPECS; k++, i++)
			add_spec(&st, i, 1700000000 + turn);
		if (turn == 1) { /* a row rewritten under its own key, and one deleted: its memory freed */
			struct egs_gpr *g0 = egs_state_gpr(&st, "gpr-00000001-0001");
			free(g0->failure_reason);
			g0->failure_reason = egs_strdup("later");
			egs_state_touch(&st, EGS_KIND_GPR, g0);
			egs_state_del(&st, EGS_KIND_GPR, egs_state_gpr(&st, "gpr-00000002-0001"));
		}
		assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
		egs_state_clear_changes(&st);
	}
	egs_store_free(s);

	sqlite3 *db;
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_open_v2(t.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT name, failure_reason, priority, preferred_clusters, nodes, fair_key, "
					    "workspace, state, seq FROM gprs ORDER BY seq",
					    -1, &q, NULL),
			 SQLITE_OK);
	int rows = 0;
	while (sqlite3_step(q) == SQLITE_ROW) {
		int i = sqlite3_column_int(q, 8) - 1;
		assert_true(i >= 0 && i < NSPECS && i != 1); /* seq 2 was deleted */
		if (i == 0)
			assert_string_equal(sqlite3_column_text(q, 1), "later");
		else
			check_gpr_row(q, i);
		rows++;
	}
	assert_int_equal(rows, NSPECS - 1);
	sqlite3_finalize(q);

	assert_int_equal(sqlite3_prepare_v2(db, "SELECT object_name, message, time, type FROM events ORDER BY id", -1, &q,
					    NULL),
			 SQLITE_OK);
	for (int i = 0; i < NSPECS; i++) {
		char id[32];
		snprintf(id, sizeof(id), "gpr-%08x-0001", (unsigned)i + 1);
		assert_int_equal(sqlite3_step(q), SQLITE_ROW);
		assert_string_equal(sqlite3_column_text(q, 0), id);
		assert_string_equal(sqlite3_column_text(q, 1), i % 3 == 2 ? "GPR created again" : "GPR created");
		assert_int_equal(sqlite3_column_int64(q, 2), 1700000000 + i / 3);
		assert_string_equal(sqlite3_column_text(q, 3), "Normal");
	}
	assert_int_equal(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);

	assert_int_equal(sqlite3_prepare_v2(db, "SELECT target, status, error_key, peer, role FROM audit ORDER BY id", -1,
					    &q, NULL),
			 SQLITE_OK);
	for (int i = 0; i < NSPECS; i++) {
		char id[32];
		snprintf(id, sizeof(id), "gpr-%08x-0001", (unsigned)i + 1);
		assert_int_equal(sqlite3_step(q), SQLITE_ROW);
		assert_string_equal(sqlite3_column_text(q, 0), id);
		assert_int_equal(sqlite3_column_int(q, 1), i == 4 ? 422 : 200);
		assert_string_equal(sqlite3_column_text(q, 2), i == 4 ? "INVALID" : "");
		assert_string_equal(sqlite3_column_text(q, 3), "127.0.0.1");
		assert_string_equal(sqlite3_column_text(q, 4), "Owner");
	}
	assert_int_equal(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	sqlite3_close(db);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

/* ---- rows written several to a statement ---- */

static struct egs_doc *mk_doc(const char *name, const char *spec)
{
	struct egs_doc *d = egs_calloc(1, sizeof(*d));
	egs_strlcpy(d->name, name, sizeof(d->name));
	egs_strlcpy(d->project, "default", sizeof(d->project));
	d->spec = egs_strdup(spec);
	return d;
}

/* Runs "SELECT COUNT(*) FROM <what>" on db. */
static int count(sqlite3 *db, const char *what)
{
	char sql[128];
	sqlite3_stmt *q;
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", what);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	int n = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	return n;
}

/*
 * Turns of 41 and 45 changes (statements of 16, 4 and 1 rows), with deletions amid a run of
 * upserts, GPRs rewritten by a later turn, and a template deleted and stored again under the same
 * name in one turn: every row holds what its last change said, and none is missing or extra.
 */
static void test_batched_turns(void **unused)
{
	(void)unused;
	enum { FIRST = 41, REWRITTEN = 20, ADDED = 22 };
	struct tmpdb t;
	struct egs_state st;
	struct egs_store *s = NULL;
	memset(long_text, 'z', sizeof(long_text) - 1);
	tmpdb_make(&t, "egs-test-store-write");
	assert_int_equal(egs_store_open(t.path, &s), EGS_OK);
	egs_state_init(&st, NULL);
	for (int i = 0; i < FIRST; i++)
		add_spec(&st, i % NSPECS, 1700000000);
	struct egs_doc *t1 = mk_doc("t1", "{\"v\":1}");
	assert_int_equal(egs_state_add_doc(&st, EGS_KIND_TEMPLATE, t1), EGS_OK);
	egs_state_touch(&st, EGS_KIND_TEMPLATE, t1);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_state_clear_changes(&st);

	/* Turn 2: GPRs 1..20 get a failure reason of their own, every seventh is deleted between
	 * them, 22 are added; t1 is deleted and a new t1 stored. */
	for (int i = 1; i <= REWRITTEN; i++) {
		char id[32];
		snprintf(id, sizeof(id), "gpr-%08x-0001", (unsigned)i);
		struct egs_gpr *g = egs_state_gpr(&st, id);
		if (i % 7 == 0) {
			egs_state_del(&st, EGS_KIND_GPR, g);
			continue;
		}
		free(g->failure_reason);
		g->failure_reason = egs_strdup(id);
		egs_state_touch(&st, EGS_KIND_GPR, g);
	}
	egs_state_del(&st, EGS_KIND_TEMPLATE, t1);
	struct egs_doc *t1b = mk_doc("t1", "{\"v\":2}");
	assert_int_equal(egs_state_add_doc(&st, EGS_KIND_TEMPLATE, t1b), EGS_OK);
	egs_state_touch(&st, EGS_KIND_TEMPLATE, t1b);
	for (int i = 0; i < ADDED; i++)
		add_spec(&st, i % NSPECS, 1700000001);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_state_clear_changes(&st);
	egs_store_free(s);

	sqlite3 *db;
	sqlite3_stmt *q;
	assert_int_equal(sqlite3_open_v2(t.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(count(db, "gprs"), FIRST + ADDED - REWRITTEN / 7);
	assert_int_equal(count(db, "events"), FIRST + ADDED);
	assert_int_equal(count(db, "audit"), FIRST + ADDED);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT name, failure_reason, priority, preferred_clusters, nodes, fair_key, "
					    "workspace, state, seq, id FROM gprs ORDER BY seq",
					    -1, &q, NULL),
			 SQLITE_OK);
	while (sqlite3_step(q) == SQLITE_ROW) {
		int seq = sqlite3_column_int(q, 8);
		char id[32];
		snprintf(id, sizeof(id), "gpr-%08x-0001", (unsigned)seq);
		assert_string_equal(sqlite3_column_text(q, 9), id);
		assert_true(seq > REWRITTEN || seq % 7 != 0);
		if (seq >= 1 && seq <= REWRITTEN)
			assert_string_equal(sqlite3_column_text(q, 1), id);
		else
			check_gpr_row(q, (seq - 1 - (seq > FIRST ? FIRST : 0)) % NSPECS);
	}
	sqlite3_finalize(q);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT spec FROM gpr_templates WHERE name = 't1'", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal(sqlite3_column_text(q, 0), "{\"v\":2}");
	sqlite3_finalize(q);
	sqlite3_close(db);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

/* A row that breaks a constraint in the middle of a 16-row statement fails the whole turn: nothing
 * of it is stored, and the turn before it stays. */
static void test_batched_failure(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_state st;
	struct egs_store *s = NULL;
	tmpdb_make(&t, "egs-test-store-write");
	assert_int_equal(egs_store_open(t.path, &s), EGS_OK);
	egs_state_init(&st, NULL);
	for (int i = 0; i < 5; i++)
		add_spec(&st, 0, 1700000000);
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_state_clear_changes(&st);
	for (int i = 0; i < 20; i++) {
		struct egs_gpr *g = spec_gpr(0, st.next_seq);
		if (i == 9)
			g->id[0] = '\0'; /* CHECK (id <> ''): the row cannot be stored */
		assert_int_equal(egs_state_add_gpr(&st, g), EGS_OK);
		egs_state_touch(&st, EGS_KIND_GPR, g);
	}
	assert_int_not_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_store_free(s);
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(t.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(count(db, "gprs"), 5);
	assert_int_equal(count(db, "events"), 5);
	sqlite3_close(db);
	egs_state_cleanup(&st);
	tmpdb_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memstatus_off),
		cmocka_unit_test(test_kept_parameters),
		cmocka_unit_test(test_batched_turns),
		cmocka_unit_test(test_batched_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
