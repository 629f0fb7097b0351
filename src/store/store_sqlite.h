/*
 * store_sqlite.h: what the SQLite store's files share (store_sqlite.c: connection, load and group
 * commit; store_sqlite_rows.c: binding parameters and reading columns for the row codec of
 * store_rows.h; store_schema.c: the migrations, shared with PostgreSQL).  Internal to src/store.
 */
#ifndef EGS_STORE_SQLITE_H
#define EGS_STORE_SQLITE_H

#include "core/state.h"
#include "store/store_impl.h"
#include "store/store_rows.h"

#include <sqlite3.h>

/* The schema (store_schema.c, from store_schema.inc): egs_store_schema_version() SQL scripts, entry i from user_version i to i + 1. */
extern const char *const egs__sqlite_migrations[];

/* Binds parameters 1, 2, ... in order and remembers the first failure, so the encoders of
 * store_rows.c read as a plain list of fields. */
struct egs_sqlite_binder {
	sqlite3_stmt *stmt;
	int i;
	int rc;
	const char *why; /* set for failures that are ours, not SQLite's */
};

/* The binder store_rows.c encodes through; ctx is b (borrowed for as long as the binder is used). */
struct egs_row_binder egs__sqlite_row_binder(struct egs_sqlite_binder *b);

/* The columns of a stepped statement's row for store_rows_read.c (a reader's res is the
 * sqlite3_stmt). */
extern const struct egs_row_source egs__sqlite_row_source;

#endif
