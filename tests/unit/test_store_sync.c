/*
 * test_store_sync.c: the SQLite store's durability apart from the commit (store.h "durability",
 * store_sqlite_sync.c): write numbers, a requested sync that moves egs_store_durable once its
 * descriptor is readable, coalescing of requests made during a (slowed) fdatasync, the blocking
 * wait, a failed fdatasync that is sticky (EGS_TEST_FSYNC_FAIL_IF_EXISTS), and checkpoints made by the
 * store's own thread, not inside the caller's commit (EGS_TEST_CHECKPOINT_FRAMES and
 * EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS), that keep the WAL bounded, with a catch-up that holds the next
 * commit and not the replies; and the timings of each that /metrics shows (egs_store_stats).
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#include "tmpdb.h"

/* A store file's directory (tmpdb.h) and the test knobs' files beside it. */
struct tmp {
	struct tmpdb d;
	char flag[400]; /* EGS_TEST_FSYNC_FAIL_IF_EXISTS */
	char hold[400]; /* EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS */
};

static void tmp_make(struct tmp *t)
{
	tmpdb_make(&t->d, "egs-test-sync");
	snprintf(t->flag, sizeof(t->flag), "%s/fail", t->d.dir);
	snprintf(t->hold, sizeof(t->hold), "%s/hold", t->d.dir);
}

static void tmp_remove(struct tmp *t)
{
	unlink(t->flag);
	unlink(t->hold);
	tmpdb_cleanup(&t->d);
}

/* Waits (up to 10 s) for the sync descriptor, then takes its news. */
static enum egs_err await_sync(struct egs_store *s)
{
	struct pollfd p = { .fd = egs_store_sync_fd(s), .events = POLLIN };
	assert_true(p.fd >= 0);
	assert_int_equal(poll(&p, 1, 10000), 1);
	return egs_store_sync_done(s);
}

static void test_sync_moves_durable(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	uint64_t w0 = egs_store_written(s);
	assert_int_equal(egs_store_durable(s), 0);
	assert_int_equal(egs_store_meta_set(s, "k", "v"), EGS_OK);
	assert_int_equal(egs_store_written(s), w0 + 1);
	assert_true(egs_store_durable(s) < egs_store_written(s)); /* committed, not yet synced */
	egs_store_sync(s);
	while (egs_store_durable(s) < egs_store_written(s))
		assert_int_equal(await_sync(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), w0 + 1);
	struct egs_store_stats st;
	assert_true(egs_store_stats(s, &st));
	assert_true(st.fsync.count >= 1);
	uint64_t in_buckets = 0;
	for (int i = 0; i <= EGS_STORE_TIME_BUCKETS; i++)
		in_buckets += st.fsync.buckets[i];
	assert_int_equal(in_buckets, st.fsync.count);
	assert_true(st.fsync.max_us <= st.fsync.sum_us);
	assert_int_equal(st.catch_up.count, 0); /* a short WAL is never caught up */
	egs_store_free(s);
	tmp_remove(&t);
}

static void test_requests_coalesce_and_wait_blocks(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	setenv("EGS_TEST_FSYNC_DELAY_MS", "200", 1);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	unsetenv("EGS_TEST_FSYNC_DELAY_MS");
	assert_int_equal(egs_store_meta_set(s, "a", "1"), EGS_OK);
	egs_store_sync(s); /* the thread takes this one and sleeps 200 ms before its fdatasync */
	for (int i = 0; i < 5; i++) {
		assert_int_equal(egs_store_meta_set(s, "b", "2"), EGS_OK);
		egs_store_sync(s);
	}
	uint64_t last = egs_store_written(s);
	int wakes = 0;
	while (egs_store_durable(s) < last) {
		assert_int_equal(await_sync(s), EGS_OK);
		wakes++;
	}
	/* Requests made during an fdatasync are covered by the next one, not one each (on an idle
	 * machine all five by one more; fewer than six however slow the commits are). */
	assert_true(wakes < 6);
	assert_int_equal(egs_store_meta_set(s, "c", "3"), EGS_OK);
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	/* Each fdatasync was slowed by 200 ms, and its timing says so: all over the last bound (100 ms). */
	struct egs_store_stats st;
	assert_true(egs_store_stats(s, &st));
	assert_true(st.fsync.count >= 2 && st.fsync.count <= 7);
	assert_int_equal(st.fsync.buckets[EGS_STORE_TIME_BUCKETS], st.fsync.count);
	assert_true(st.fsync.max_us >= 200000);
	assert_true(st.fsync.sum_us >= (int64_t)st.fsync.count * 200000);
	egs_store_free(s);
	tmp_remove(&t);
}

static void test_failed_fdatasync_is_sticky(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	setenv("EGS_TEST_FSYNC_FAIL_IF_EXISTS", t.flag, 1);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	unsetenv("EGS_TEST_FSYNC_FAIL_IF_EXISTS");
	assert_int_equal(egs_store_meta_set(s, "a", "1"), EGS_OK);
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	uint64_t durable = egs_store_durable(s);
	FILE *f = fopen(t.flag, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(egs_store_meta_set(s, "b", "2"), EGS_OK);
	assert_int_equal(egs_store_sync_wait(s), EGS_ERR_IO);
	assert_int_equal(egs_store_durable(s), durable);
	unlink(t.flag); /* a later fdatasync proves nothing about the pages of the failed one */
	assert_int_equal(egs_store_meta_set(s, "c", "3"), EGS_OK);
	assert_int_equal(egs_store_sync_wait(s), EGS_ERR_IO);
	assert_int_equal(egs_store_durable(s), durable);
	egs_store_free(s);
	tmp_remove(&t);
}

/* A checksum (FNV-1a) of the file at path: the database file changes only when a checkpoint copies
 * the WAL into it. */
static uint64_t file_sum(const char *path)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint64_t h = 1469598103934665603ull;
	int c;
	while ((c = fgetc(f)) != EOF)
		h = (h ^ (uint64_t)c) * 1099511628211ull;
	fclose(f);
	return h;
}

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

/* The checkpoint is the store's thread's: while it is held, commits and fdatasyncs go on (a
 * checkpoint inside the commit, as SQLite's automatic one made, would hang this test), and once let
 * go it copies the WAL into the database file without another write asking for it. */
static void test_checkpoint_off_the_commit(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK); /* the schema, checkpointed at close */
	egs_store_free(s);
	touch(t.hold);
	setenv("EGS_TEST_CHECKPOINT_FRAMES", "4", 1);
	setenv("EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS", t.hold, 1);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	unsetenv("EGS_TEST_CHECKPOINT_FRAMES");
	unsetenv("EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS");
	uint64_t before = file_sum(t.d.path);
	char key[16];
	for (int i = 0; i < 6; i++) { /* > 4 pages into the WAL: a checkpoint is due, and held */
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(egs_store_meta_set(s, key, "v"), EGS_OK);
		assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	}
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	assert_true(file_sum(t.d.path) == before); /* nothing copied while held */
	unlink(t.hold);
	bool copied = false;
	for (int i = 0; i < 1000 && !copied; i++) { /* up to 10 s on a loaded machine */
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
		copied = file_sum(t.d.path) != before;
	}
	assert_true(copied);
	egs_store_free(s);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	char *v = NULL;
	assert_int_equal(egs_store_meta_get(s, "k5", &v), EGS_OK);
	assert_non_null(v);
	assert_string_equal(v, "v");
	free(v);
	egs_store_free(s);
	tmp_remove(&t);
}

/* Waits (up to 10 s) while a catch-up holds the next commit, as egsd's loop does (commit_turn). */
static void await_commit_allowed(struct egs_store *s)
{
	for (int i = 0; i < 1000 && egs_store_commit_held(s); i++) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	assert_false(egs_store_commit_held(s));
}

/* Under a stream of commits the WAL stays bounded: copied out and written again from its start once
 * it is RESTART_PARTS (8) times the checkpoint's pages long and the concurrent checkpoints left
 * little to copy, or at twice that whatever is left; not grown. */
static void test_wal_stays_bounded(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK); /* the schema, checkpointed at close */
	egs_store_free(s);
	setenv("EGS_TEST_CHECKPOINT_FRAMES", "2", 1);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	unsetenv("EGS_TEST_CHECKPOINT_FRAMES");
	char key[16], wal[400];
	for (int i = 0; i < 150; i++) { /* each commit adds a page at least: 150 pages without checkpoints */
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(egs_store_meta_set(s, key, "v"), EGS_OK);
		egs_store_sync(s);
		if (i % 3 == 2) {
			assert_int_equal(egs_store_sync_wait(s), EGS_OK);
			await_commit_allowed(s);
		}
	}
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	snprintf(wal, sizeof(wal), "%s-wal", t.d.path);
	struct stat st;
	assert_int_equal(stat(wal, &st), 0);
	/* 32 pages at most before a catch-up, and what came while it was copied; 300 without one */
	assert_true(st.st_size < 64 * (4096 + 24) + 32);
	/* and /metrics' timings saw the checkpoints and the restarts that kept it so */
	struct egs_store_stats ss;
	assert_true(egs_store_stats(s, &ss));
	assert_true(ss.checkpoint.count >= 2);
	assert_true(ss.wal_restarts >= 1);
	assert_true(ss.fsync.count >= 50);
	egs_store_free(s);
	tmp_remove(&t);
}

/* A catch-up holds the next commit, not the replies of the fdatasync before it: with the checkpoints
 * held, the WAL grows to twice RESTART_PARTS times their pages, and the fdatasync after which it is
 * caught up publishes its writes (sync_wait returns) while egs_store_commit_held stays true until
 * the checkpoints are let go; the next commit then writes the WAL again from its start. */
static void test_catch_up_holds_the_commit_not_the_replies(void **state)
{
	(void)state;
	struct tmp t;
	struct egs_store *s = NULL;
	tmp_make(&t);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	egs_store_free(s);
	touch(t.hold);
	setenv("EGS_TEST_CHECKPOINT_FRAMES", "2", 1);
	setenv("EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS", t.hold, 1);
	assert_int_equal(egs_store_open_sqlite(t.d.path, &s), EGS_OK);
	unsetenv("EGS_TEST_CHECKPOINT_FRAMES");
	unsetenv("EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS");
	char key[16];
	int i = 0;
	for (; i < 200 && !egs_store_commit_held(s); i++) { /* 32 pages: a catch-up, whatever is left */
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(egs_store_meta_set(s, key, "v"), EGS_OK);
		egs_store_sync(s);
		assert_int_equal(await_sync(s), EGS_OK); /* comes: the catch-up does not hold the replies */
		assert_int_equal(egs_store_durable(s), egs_store_written(s));
	}
	assert_true(egs_store_commit_held(s));
	assert_int_equal(egs_store_durable(s), egs_store_written(s));
	struct timespec ts = { 0, 50 * 1000000L };
	nanosleep(&ts, NULL);
	assert_true(egs_store_commit_held(s)); /* the checkpoints are still held: so is the commit */
	struct egs_store_stats ss;
	assert_true(egs_store_stats(s, &ss));
	uint64_t restarts = ss.wal_restarts;
	unlink(t.hold);
	await_commit_allowed(s);
	assert_int_equal(egs_store_meta_set(s, "after", "v"), EGS_OK);
	assert_true(egs_store_stats(s, &ss));
	assert_int_equal(ss.wal_restarts, restarts + 1); /* the commit after the catch-up restarted it */
	assert_int_equal(ss.catch_up.count, 1);
	assert_int_equal(egs_store_sync_wait(s), EGS_OK);
	egs_store_free(s);
	tmp_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sync_moves_durable),
		cmocka_unit_test(test_requests_coalesce_and_wait_blocks),
		cmocka_unit_test(test_failed_fdatasync_is_sticky),
		cmocka_unit_test(test_checkpoint_off_the_commit),
		cmocka_unit_test(test_wal_stays_bounded),
		cmocka_unit_test(test_catch_up_holds_the_commit_not_the_replies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
