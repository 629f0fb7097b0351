/*
 * test_store_sqlite_vfs.c: the loop connection's VFS (store_sqlite_vfs.c), which writes a
 * transaction's WAL frames in one write.  A writer on that VFS and a reader on SQLite's default
 * one share a database: the reader sees each commit whole and at once (what the checkpoint thread
 * relies on), one commit of many frames is one write, a transaction that spilled pages to the WAL
 * (a tiny page cache) and rewrote them commits or rolls back correctly, the WAL restarts after a
 * checkpoint, the file is intact when opened afresh, and a write the file system refuses (a file
 * size limit, as a full disk) fails the commit and leaves the last one readable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "store/store_sqlite.h"

#include "tmpdb.h"

static void exec_ok(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "%s: %s\n", sql, msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	assert_int_equal(rc, SQLITE_OK);
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void integrity_ok(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
}

static sqlite3 *open_db(const char *path, const char *vfs)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs), SQLITE_OK);
	char mode[8] = "";
	sqlite3_stmt *st = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(mode, sizeof(mode), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	assert_string_equal(mode, "wal");
	exec_ok(db, "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0");
	return db;
}

/* The rows' checksum as the reader computes it: ids and blob lengths and bytes, summed. */
#define SUM_SQL "SELECT count(*) * 1000003 + coalesce(sum(id * length(b) + unicode(substr(b, 1 + id % 97, 1))), 0) FROM t"

struct pair {
	struct tmpdb d;
	sqlite3 *w, *r; /* the writer (the VFS) and a reader (the default VFS) */
};

static void pair_open(struct pair *p)
{
	tmpdb_make(&p->d, "egs-test-vfs");
	assert_non_null(egs__sqlite_vfs());
	p->w = open_db(p->d.path, egs__sqlite_vfs());
	exec_ok(p->w, "CREATE TABLE t(id INTEGER PRIMARY KEY, b TEXT NOT NULL)");
	p->r = open_db(p->d.path, NULL);
}

static void pair_close(struct pair *p)
{
	assert_int_equal(sqlite3_close(p->r), SQLITE_OK);
	assert_int_equal(sqlite3_close(p->w), SQLITE_OK);
	tmpdb_cleanup(&p->d);
}

/* Inserts rows [from, from + n) of blobs of size bytes, in one transaction, then commits. */
static void insert(sqlite3 *db, int from, int n, int size, bool commit)
{
	char sql[256];
	exec_ok(db, "BEGIN");
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(x) AS (SELECT %d UNION ALL SELECT x + 1 FROM c WHERE x < %d) "
		 "INSERT INTO t SELECT x, printf('%%.*c', %d, char(65 + x %% 26)) FROM c",
		 from, from + n - 1, size);
	exec_ok(db, sql);
	exec_ok(db, commit ? "COMMIT" : "ROLLBACK");
}

static void test_commit_is_one_write_and_read_whole(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	unsigned long long a0, m0, a1, m1;
	for (int i = 0; i < 20; i++) {
		egs__sqlite_vfs_counts(&a0, &m0);
		insert(p.w, i * 60, 60, 200 + i * 50, true); /* ~12-70 KiB: 4-20 frames */
		egs__sqlite_vfs_counts(&a1, &m1);
		assert_true(a1 - a0 >= 8); /* four frames at least, two writes each asked... */
		assert_int_equal(m1 - m0, 1); /* ...made as one */
		/* The reader sees the whole commit at once, as the writer does. */
		assert_int_equal(query_int(p.r, SUM_SQL), query_int(p.w, SUM_SQL));
		assert_int_equal(query_int(p.r, "SELECT count(*) FROM t"), (i + 1) * 60);
	}
	/* A commit of ~100 frames: a write per 31 frames at most 128 KiB (the default VFS's limit). */
	egs__sqlite_vfs_counts(&a0, &m0);
	insert(p.w, 10000, 100, 4000, true);
	egs__sqlite_vfs_counts(&a1, &m1);
	assert_true(a1 - a0 >= 200);
	assert_true(m1 - m0 >= (a1 - a0) / 2 / 31 && m1 - m0 <= (a1 - a0) / 2 / 31 + 1);
	assert_int_equal(query_int(p.r, SUM_SQL), query_int(p.w, SUM_SQL));
	/* One row: one frame (or a few), one write. */
	egs__sqlite_vfs_counts(&a0, &m0);
	exec_ok(p.w, "UPDATE t SET b = 'x' WHERE id = 7");
	egs__sqlite_vfs_counts(&a1, &m1);
	assert_int_equal(m1 - m0, 1);
	assert_int_equal(query_int(p.r, "SELECT length(b) FROM t WHERE id = 7"), 1);
	integrity_ok(p.r);
	pair_close(&p);
}

static void test_spilled_transactions_and_restart(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	exec_ok(p.w, "PRAGMA cache_size = 8"); /* pages spill to the WAL inside a transaction */
	insert(p.w, 0, 500, 1000, true);
	int64_t sum = query_int(p.w, SUM_SQL);
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	/* Spilled frames of a rolled-back transaction are never seen. */
	insert(p.w, 1000, 500, 1500, false);
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	assert_int_equal(query_int(p.w, SUM_SQL), sum);
	/* A transaction that spills pages and then changes them again (rewritten in place, their
	 * checksums rewritten at the commit). */
	exec_ok(p.w, "BEGIN");
	exec_ok(p.w, "UPDATE t SET b = b || 'y' WHERE id % 3 = 0");
	exec_ok(p.w, "UPDATE t SET b = substr(b, 2) WHERE id % 2 = 0");
	exec_ok(p.w, "UPDATE t SET b = b || 'z' WHERE id % 3 = 0");
	exec_ok(p.w, "COMMIT");
	sum = query_int(p.w, SUM_SQL);
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	integrity_ok(p.r);
	/* The reader copies the WAL into the database (as the checkpoint thread does); the writer's
	 * next commit starts the WAL again from its header. */
	int log = -1, copied = -1;
	assert_int_equal(sqlite3_wal_checkpoint_v2(p.r, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied), SQLITE_OK);
	assert_int_equal(log, copied);
	insert(p.w, 5000, 50, 300, true);
	insert(p.w, 6000, 50, 300, true);
	sum = query_int(p.w, SUM_SQL);
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	/* Afresh, from the files alone. */
	char path[sizeof(p.d.path)];
	snprintf(path, sizeof(path), "%s", p.d.path);
	assert_int_equal(sqlite3_close(p.r), SQLITE_OK);
	p.r = open_db(path, NULL);
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	integrity_ok(p.r);
	pair_close(&p);
}

static void test_refused_write_fails_the_commit(void **state)
{
	(void)state;
	struct pair p;
	pair_open(&p);
	insert(p.w, 0, 50, 100, true);
	int64_t sum = query_int(p.r, SUM_SQL);
	/* Writes past 1 MiB fail (EFBIG, as a full disk fails them): the WAL cannot take 2 MiB. */
	struct rlimit old, lim;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1 << 20;
	void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	exec_ok(p.w, "BEGIN");
	exec_ok(p.w, "INSERT INTO t SELECT id + 100000, printf('%.*c', 40000, 'q') FROM t");
	int rc = sqlite3_exec(p.w, "COMMIT", NULL, NULL, NULL);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, was);
	assert_int_not_equal(rc, SQLITE_OK);
	if (!sqlite3_get_autocommit(p.w))
		exec_ok(p.w, "ROLLBACK");
	assert_int_equal(query_int(p.r, SUM_SQL), sum);
	assert_int_equal(query_int(p.w, SUM_SQL), sum);
	/* And the next commit goes through. */
	insert(p.w, 200, 10, 100, true);
	assert_int_equal(query_int(p.r, "SELECT count(*) FROM t"), 60);
	integrity_ok(p.r);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_is_one_write_and_read_whole),
		cmocka_unit_test(test_spilled_transactions_and_restart),
		cmocka_unit_test(test_refused_write_fails_the_commit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
