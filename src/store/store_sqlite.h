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

/*
 * What one prepared statement's parameters hold since its last row, so that a row binds only the
 * values that differ from the row before (issue 16: a create's three rows bind 52 parameters at
 * ~150-200 instructions each, and most are the same from one row to the next: the workspace, the
 * state, zeros, the caller's key).  SQLite keeps a statement's bindings across sqlite3_reset; a
 * kept text is bound from this structure's own copy (SQLITE_STATIC), which stays unchanged until
 * it is bound again, so a skipped bind can never leave SQLite pointing at freed memory.  Only the
 * binder below may bind a statement that has one.
 */
struct egs_sqlite_kept;
/* One slot per parameter of stmt (borrowed; the kept values are only valid for it). */
struct egs_sqlite_kept *egs__sqlite_kept_new(sqlite3_stmt *stmt);
void egs__sqlite_kept_free(struct egs_sqlite_kept *k); /* NULL is a no-op */

/* Binds parameters 1, 2, ... in order and remembers the first failure, so the encoders of
 * store_rows.c read as a plain list of fields.  With kept set, a parameter whose value (type and
 * bytes) is what that statement's parameter holds already is not bound again. */
struct egs_sqlite_binder {
	sqlite3_stmt *stmt;
	struct egs_sqlite_kept *kept; /* NULL: bind every parameter (SQLITE_STATIC from the caller) */
	int i;
	int rc;
	const char *why; /* set for failures that are ours, not SQLite's */
};

/* The binder store_rows.c encodes through; ctx is b (borrowed for as long as the binder is used). */
struct egs_row_binder egs__sqlite_row_binder(struct egs_sqlite_binder *b);

/*
 * A table's rows written up to EGS_SQLITE_PUT_MAX to a statement (store_sqlite_put.c): prepared
 * INSERTs (upserts on the first column with upsert) of 16, 4 and 1 rows, each with its kept
 * parameters.  bind binds one object's columns in the order of cols; key or else id names a row in
 * error messages.  new: NULL (printed) when a statement does not prepare.  free: NULL is a no-op.
 */
typedef void (*egs_sqlite_bind_fn)(const struct egs_row_binder *b, const void *obj);
#define EGS_SQLITE_PUT_MAX 16
struct egs_sqlite_put;
struct egs_sqlite_put *egs__sqlite_put_new(sqlite3 *db, const char *table /* static */, const char *cols,
					   bool upsert, egs_sqlite_bind_fn bind, const char *(*key)(const void *obj),
					   int64_t (*id)(const void *obj));
void egs__sqlite_put_free(struct egs_sqlite_put *p);
/* Writes the rows of objs[0..n) (borrowed) in order, with as few statements as the sizes allow,
 * inside the caller's transaction.  False (printed, naming the table and a row) when a bind or a
 * statement failed; a failed statement's result code goes to *last_rc. */
bool egs__sqlite_put_rows(struct egs_sqlite_put *p, void *const *objs, size_t n, int *last_rc);

/* The columns of a stepped statement's row for store_rows_read.c (a reader's res is the
 * sqlite3_stmt). */
extern const struct egs_row_source egs__sqlite_row_source;

/* The durability thread (store_sqlite_sync.c): fdatasyncs the WAL of the database at db_path off the
 * loop thread, and a checkpoint thread copies the WAL into the database file off it too.  Write
 * numbers are the store's (store.c counts them); each function below is called from the loop thread
 * only.  new: db is the loop's connection (borrowed until free), whose WAL hook it takes (SQLite's
 * automatic checkpoint is then off); NULL (printed) when a thread or the checkpoints' own connection
 * cannot start; reads the test knobs EGS_TEST_FSYNC_DELAY_MS, EGS_TEST_FSYNC_FAIL_IF_EXISTS,
 * EGS_TEST_CHECKPOINT_FRAMES and EGS_TEST_CHECKPOINT_HOLD_IF_EXISTS.  free (NULL is a no-op): syncs
 * what was requested, then stops and joins the threads, and gives db's WAL hook back. */
struct egs_sqlite_sync;
struct egs_sqlite_sync *egs__sqlite_sync_new(const char *db_path, sqlite3 *db);
void egs__sqlite_sync_free(struct egs_sqlite_sync *y);
/* Asks for every write numbered <= upto to be made durable; returns at once. */
void egs__sqlite_sync_request(struct egs_sqlite_sync *y, uint64_t upto);
/* Readable (an eventfd) after each fdatasync; egs__sqlite_sync_poll drains it. */
int egs__sqlite_sync_fd(const struct egs_sqlite_sync *y);
/* *durable gets the highest write number on disk; EGS_ERR_IO (printed) once an fdatasync or a
 * checkpoint failed. */
enum egs_err egs__sqlite_sync_poll(struct egs_sqlite_sync *y, uint64_t *durable);
/* Requests upto and blocks until it is durable (or an fdatasync failed: EGS_ERR_IO). */
enum egs_err egs__sqlite_sync_wait(struct egs_sqlite_sync *y, uint64_t upto, uint64_t *durable);
/* Whether a catch-up is copying the WAL out, which the next commit should wait for (store.h
 * egs_store_commit_held); the descriptor is readable again when it ended. */
bool egs__sqlite_sync_held(struct egs_sqlite_sync *y);
/* Copies the threads' timings (store.h's egs_store_stats). */
void egs__sqlite_sync_stats(struct egs_sqlite_sync *y, struct egs_store_stats *out);

/* The loop connection's VFS (store_sqlite_vfs.c): the default VFS, with a WAL file that writes a
 * transaction's frames as one write (at its commit frame) instead of two per frame.  Returns its
 * name for sqlite3_open_v2, registered on the first call (not as the default); NULL (printed) when
 * it could not be: the caller then opens with the default VFS.  Any thread. */
const char *egs__sqlite_vfs(void);
/* Process-wide counts, for tests: writes SQLite asked of such WAL files, and writes they made. */
void egs__sqlite_vfs_counts(unsigned long long *asked, unsigned long long *made);

#endif
