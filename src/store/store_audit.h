/*
 * store_audit.h: the audit log's reads and pruning in each store (internal to src/store).  The
 * writes are part of each store's group commit (store_sqlite.c, store_pg.c), through
 * egs_rows_bind_audit; these run outside it, on the loop thread, when an admin lists the log or the
 * retention pass runs.  Contracts: store.h's egs_store_audit_*.
 */
#ifndef EGS_STORE_AUDIT_H
#define EGS_STORE_AUDIT_H

#include "store/store.h"
#include "store/store_rows.h"

#include <libpq-fe.h>
#include <sqlite3.h>

/* The one query both stores run, in each one's parameter syntax: $1 after_id, $2 since, $3 until
 * (0: none), $4 actor (NULL: all), $5 limit. */
#define EGS_AUDIT_WHERE(after, since, until, actor, limit)                                              \
	" FROM audit WHERE id > " after " AND time >= " since " AND (" until " = 0 OR time < " until ")" \
	" AND (" actor " IS NULL OR key_id = " actor " OR key_name = " actor ") ORDER BY id LIMIT " limit

enum egs_err egs__sqlite_audit_list(sqlite3 *db, const struct egs_audit_filter *f, struct egs_vec *out);
enum egs_err egs__sqlite_audit_prune(sqlite3 *db, int64_t before, int64_t *deleted);
enum egs_err egs__sqlite_audit_last_id(sqlite3 *db, int64_t *out);

/* conn: a ready session outside any transaction (borrowed). */
enum egs_err egs__pg_audit_list(PGconn *conn, const struct egs_audit_filter *f, struct egs_vec *out);
enum egs_err egs__pg_audit_prune(PGconn *conn, int64_t before, int64_t *deleted);
enum egs_err egs__pg_audit_last_id(PGconn *conn, int64_t *out);

#endif
