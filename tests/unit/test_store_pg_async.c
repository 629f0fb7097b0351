/*
 * test_store_pg_async.c: the PostgreSQL store's turn in flight (store_pg_commit.c) against a real
 * server of its own (pgtest.h).
 *
 * A second session holds a lock on the GPR table, so that a turn sent with egs_store_commit_send
 * stays in flight as long as the test wants.  Then: the turn's write number is not durable while it
 * runs, and the store's descriptor stays quiet; it becomes readable when the COMMIT answers, and the
 * write counts durable; another call on the session reads the turn to its end and makes the
 * descriptor readable too.  A turn whose COMMIT fails after the send (the tests' injected failure) is
 * told once, as egs_store_sync_done's error, and no write after it (a meta write that read the turn
 * to its end first) counts durable before it was told.  A session that breaks with the turn in
 * flight (its backend terminated) gets the kept turn sent again on a new session: every row stored
 * once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_pg.h"

#include "pgtest.h"

static struct pgtest pg;

static void schema_url(const char *schema, char *url, size_t n)
{
	snprintf(url, n, "%s&options=-csearch_path%%3D%s", pg.url, schema);
}

static struct egs_store *open_pg(const char *schema)
{
	char sql[128], url[768];
	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema, schema);
	assert_true(pgtest_exec(pg.url, sql));
	schema_url(schema, url, sizeof(url));
	struct egs_store *s = NULL;
	assert_int_equal(egs_store_open(url, &s), EGS_OK);
	return s;
}

/* A second session on schema that holds the GPR table locked until unlock(). */
static PGconn *lock_gprs(const char *schema)
{
	char url[768];
	schema_url(schema, url, sizeof(url));
	PGconn *c = PQconnectdb(url);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	PGresult *r = PQexec(c, "BEGIN; LOCK TABLE gprs IN ACCESS EXCLUSIVE MODE");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	return c;
}

static void run(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	assert_true(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
	PQclear(r);
}

static void unlock(PGconn *c)
{
	run(c, "ROLLBACK");
	PQfinish(c);
}

/* A turn of one new GPR and its event. */
static void add_gpr(struct egs_state *st, const char *id)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->workspace, "ws", sizeof(g->workspace));
	g->gpus_per_node = 1;
	g->node_count = 1;
	g->state = EGS_GPR_QUEUED;
	g->seq = st->next_seq++;
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	egs_state_touch(st, EGS_KIND_GPR, g);
	egs_state_event(st, 1700000000, "Normal", "Created", "GPR", id, "ws", "created");
}

/* Sends st's turn while the GPR table is locked: it must stay in flight. */
static void send_blocked(struct egs_store *s, struct egs_state *st)
{
	uint64_t w = egs_store_written(s);
	assert_int_equal(egs_store_commit_send(s, st), EGS_OK);
	egs_state_clear_changes(st);
	assert_int_equal(egs_store_written(s), w + 1);
	assert_int_equal(egs_store_sync_done(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), w); /* in flight: not durable */
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

static size_t stored_gprs(struct egs_store *s, const char *id)
{
	struct egs_state back;
	egs_state_init(&back, NULL);
	assert_int_equal(egs_store_load(s, &back), EGS_OK);
	size_t n = back.gprs.len;
	if (id)
		assert_non_null(egs_state_gpr(&back, id));
	assert_int_equal(back.events_len, n); /* one event each, never twice */
	egs_state_cleanup(&back);
	return n;
}

/* The turn stays in flight while PostgreSQL runs it; the descriptor becomes readable when its COMMIT
 * answers, and only then does its write count durable. */
static void test_turn_in_flight_until_commit_answers(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("inflight");
	struct egs_state st;
	egs_state_init(&st, NULL);
	int fd = egs_store_sync_fd(s);
	assert_true(fd >= 0);
	PGconn *lk = lock_gprs("inflight");
	add_gpr(&st, "gpr-a");
	send_blocked(s, &st);
	assert_false(readable(fd, 200));
	assert_int_equal(egs_store_sync_done(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), 0);
	unlock(lk);
	assert_true(readable(fd, 10000));
	for (int i = 0; i < 100 && egs_store_durable(s) < 1; i++) { /* the answers may come in parts */
		assert_int_equal(egs_store_sync_done(s), EGS_OK);
		if (egs_store_durable(s) < 1)
			readable(fd, 100);
	}
	assert_int_equal(egs_store_durable(s), 1);
	assert_false(readable(fd, 50)); /* nothing in flight: quiet */

	/* Another use of the session reads a turn in flight to its end first. */
	lk = lock_gprs("inflight");
	add_gpr(&st, "gpr-b");
	send_blocked(s, &st);
	unlock(lk);
	char *v = NULL;
	assert_int_equal(egs_store_meta_get(s, "nothing", &v), EGS_OK);
	assert_null(v);
	assert_true(readable(fd, 0)); /* the loop is told */
	assert_int_equal(egs_store_sync_done(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), 2);
	assert_false(readable(fd, 0));
	assert_int_equal(stored_gprs(s, "gpr-b"), 2);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

/* A COMMIT that fails after the send is told once; a meta write after it does not count durable
 * before it was told, and the failed turn's rows are not stored. */
static void test_failure_after_send_told_once(void **unused)
{
	(void)unused;
	char path[] = "/tmp/egs-test-pg-fail-XXXXXX";
	int tmp = mkstemp(path);
	assert_true(tmp >= 0);
	close(tmp);
	setenv("EGS_STORE_FAIL_IF_EXISTS", path, 1);
	struct egs_store *s = open_pg("failsent");
	unsetenv("EGS_STORE_FAIL_IF_EXISTS");
	struct egs_state st;
	egs_state_init(&st, NULL);
	PGconn *lk = lock_gprs("failsent");
	add_gpr(&st, "gpr-lost");
	send_blocked(s, &st);
	unlock(lk);
	assert_int_equal(egs_store_meta_set(s, "k", "v"), EGS_OK); /* reads the failed turn first */
	assert_int_equal(egs_store_written(s), 2);
	assert_int_equal(egs_store_durable(s), 0);
	assert_int_equal(egs_store_sync_done(s), EGS_ERR_STORAGE_FULL);
	assert_int_equal(egs_store_durable(s), 2); /* told: every write so far has ended */
	assert_int_equal(egs_store_sync_done(s), EGS_OK); /* once */
	assert_int_equal(stored_gprs(s, NULL), 0);
	char *v = NULL;
	assert_int_equal(egs_store_meta_get(s, "k", &v), EGS_OK);
	assert_string_equal(v, "v");
	free(v);

	/* The same told by a wait. */
	lk = lock_gprs("failsent");
	add_gpr(&st, "gpr-lost-2");
	send_blocked(s, &st);
	unlock(lk);
	assert_int_equal(egs_store_sync_wait(s), EGS_ERR_STORAGE_FULL);
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);

	unlink(path);
	add_gpr(&st, "gpr-kept");
	assert_int_equal(egs_store_commit_send(s, &st), EGS_OK);
	egs_state_clear_changes(&st);
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	assert_int_equal(stored_gprs(s, "gpr-kept"), 1);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

/* The session breaks with the turn in flight: the kept turn is sent again on a new session and
 * every row is stored once. */
static void test_broken_session_sends_turn_again(void **unused)
{
	(void)unused;
	struct egs_store *s = open_pg("resend");
	struct pg_store *ps = (struct pg_store *)s;
	struct egs_state st;
	egs_state_init(&st, NULL);
	add_gpr(&st, "gpr-first");
	assert_int_equal(egs_store_commit_changes(s, &st), EGS_OK);
	egs_state_clear_changes(&st);
	PGconn *lk = lock_gprs("resend");
	add_gpr(&st, "gpr-again"); /* new: a plain INSERT on the first try, an upsert on the next */
	send_blocked(s, &st);
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", PQbackendPID(ps->conn));
	run(lk, sql);
	unlock(lk);
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	assert_int_equal(ps->retried, 1);
	assert_int_equal(stored_gprs(s, "gpr-again"), 2);
	egs_state_cleanup(&st);
	egs_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_turn_in_flight_until_commit_answers),
		cmocka_unit_test(test_failure_after_send_told_once),
		cmocka_unit_test(test_broken_session_sends_turn_again),
	};
	if (!pgtest_start(&pg))
		return 1;
	int failed = cmocka_run_group_tests_name("postgres turn in flight", tests, NULL, NULL);
	pgtest_cleanup(&pg);
	return failed;
}
