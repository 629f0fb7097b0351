/*
 * store_sqlite.h: what the SQLite store's files share (store_sqlite.c: connection, load and group
 * commit; store_sqlite_rows.c: binding and reading rows, the table of kinds; store_sqlite_schema.c:
 * the migrations).  Internal to src/store.
 */
#ifndef EGS_STORE_SQLITE_H
#define EGS_STORE_SQLITE_H

#include "core/state.h"
#include "store/store_impl.h"
#include "store/store_rows.h"

#include <sqlite3.h>

/* The schema: egs_store_schema_version() SQL scripts, entry i from user_version i to i + 1. */
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

/* Reads columns 0, 1, ... in order; the first failure names its column. */
struct egs_sqlite_reader {
	sqlite3_stmt *stmt;
	int i;
	const char *bad; /* column name of the first failure, NULL when all is well */
	const char *why;
};

struct egs_sqlite_kind {
	const char *table;
	const char *cols;  /* the first column is the primary key */
	const char *order; /* load order */
	void *(*alloc)(void);
	void (*free)(void *obj);
	void (*bind)(const struct egs_row_binder *b, const void *obj); /* store_rows.c */
	void (*read)(struct egs_sqlite_reader *r, void *obj);
	enum egs_err (*add)(struct egs_state *st, void *obj); /* takes ownership on success */
	const char *(*key)(const void *obj);
};

/* Indexed by enum egs_kind, in load order: GPRs by seq so that st->active is in enqueue order too. */
#define EGS_SQLITE_NKINDS (EGS_KIND_ENDPOINT + 1)
extern const struct egs_sqlite_kind egs__sqlite_kinds[EGS_SQLITE_NKINDS];

/* Reads one events row (the columns of store_sqlite.c's EVENT_COLS, in order) into ev; failures are recorded in r. */
void egs__sqlite_read_event(struct egs_sqlite_reader *r, struct egs_event *ev);

#endif
