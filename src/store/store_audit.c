/*
 * store_audit.c: the audit log's reads and pruning on SQLite and on PostgreSQL; see store_audit.h.
 * None of this is on a hot path: each call prepares its statement afresh.
 */
#include "store/store_audit.h"

#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy(char *dst, size_t n, const char *src)
{
	egs_strlcpy(dst, src ? src : "", n);
}

/* ---- SQLite ---- */

enum egs_err egs__sqlite_audit_list(sqlite3 *db, const struct egs_audit_filter *f, struct egs_vec *out)
{
	sqlite3_stmt *q = NULL;
	enum egs_err err = EGS_ERR_STORE;
	int rc;
	if (sqlite3_prepare_v2(db, "SELECT " EGS_AUDIT_COLS EGS_AUDIT_WHERE("?1", "?2", "?3", "?4", "?5"), -1, &q, NULL))
		goto out;
	sqlite3_bind_int64(q, 1, f->after_id);
	sqlite3_bind_int64(q, 2, f->since);
	sqlite3_bind_int64(q, 3, f->until);
	if (f->actor)
		sqlite3_bind_text(q, 4, f->actor, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 5, (sqlite3_int64)f->limit);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct egs_audit *a = egs_calloc(1, sizeof(*a));
		a->id = sqlite3_column_int64(q, 0);
		a->time = sqlite3_column_int64(q, 1);
		copy(a->key_id, sizeof(a->key_id), (const char *)sqlite3_column_text(q, 2));
		copy(a->key_name, sizeof(a->key_name), (const char *)sqlite3_column_text(q, 3));
		copy(a->role, sizeof(a->role), (const char *)sqlite3_column_text(q, 4));
		copy(a->method, sizeof(a->method), (const char *)sqlite3_column_text(q, 5));
		copy(a->route, sizeof(a->route), (const char *)sqlite3_column_text(q, 6));
		copy(a->target, sizeof(a->target), (const char *)sqlite3_column_text(q, 7));
		a->status = sqlite3_column_int(q, 8);
		copy(a->error_key, sizeof(a->error_key), (const char *)sqlite3_column_text(q, 9));
		copy(a->peer, sizeof(a->peer), (const char *)sqlite3_column_text(q, 10));
		egs_vec_push(out, a);
	}
	if (rc == SQLITE_DONE)
		err = EGS_OK;
out:
	if (err)
		fprintf(stderr, "store: reading audit: %s\n", sqlite3_errmsg(db));
	sqlite3_finalize(q);
	return err;
}

/* Runs one statement with one integer parameter (none when bind is false); *changes gets the rows
 * it changed or the first column of its one row. */
static enum egs_err sqlite_one(sqlite3 *db, const char *sql, bool bind, int64_t v, bool row, int64_t *result)
{
	sqlite3_stmt *q = NULL;
	enum egs_err err = EGS_ERR_STORE;
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		goto out;
	if (bind)
		sqlite3_bind_int64(q, 1, v);
	int rc = sqlite3_step(q);
	if (row && rc == SQLITE_ROW)
		*result = sqlite3_column_int64(q, 0);
	else if (!row && rc == SQLITE_DONE)
		*result = sqlite3_changes64(db);
	else
		goto out;
	err = EGS_OK;
out:
	if (err)
		fprintf(stderr, "store: %.40s: %s\n", sql, sqlite3_errmsg(db));
	sqlite3_finalize(q);
	return err;
}

enum egs_err egs__sqlite_audit_prune(sqlite3 *db, int64_t before, int64_t *deleted)
{
	/* Outside BEGIN..COMMIT one statement is its own durable transaction. */
	return sqlite_one(db, "DELETE FROM audit WHERE time < ?1", true, before, false, deleted);
}

enum egs_err egs__sqlite_audit_last_id(sqlite3 *db, int64_t *out)
{
	return sqlite_one(db, "SELECT COALESCE(MAX(id), 0) FROM audit", false, 0, true, out);
}

/* ---- PostgreSQL ---- */

static PGresult *pg_run(PGconn *conn, const char *sql, int n, const char *const *v, ExecStatusType want)
{
	PGresult *res = PQexecParams(conn, sql, n, NULL, v, NULL, NULL, 0);
	if (PQresultStatus(res) == want)
		return res;
	fprintf(stderr, "store: %.40s: %s", sql, res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	PQclear(res);
	return NULL;
}

enum egs_err egs__pg_audit_list(PGconn *conn, const struct egs_audit_filter *f, struct egs_vec *out)
{
	char after[24], since[24], until[24], limit[24];
	snprintf(after, sizeof(after), "%lld", (long long)f->after_id);
	snprintf(since, sizeof(since), "%lld", (long long)f->since);
	snprintf(until, sizeof(until), "%lld", (long long)f->until);
	snprintf(limit, sizeof(limit), "%zu", f->limit);
	const char *v[5] = { after, since, until, f->actor, limit };
	PGresult *res = pg_run(conn,
			       "SELECT " EGS_AUDIT_COLS EGS_AUDIT_WHERE("$1::bigint", "$2::bigint", "$3::bigint",
									 "$4::text", "$5::bigint"),
			       5, v, PGRES_TUPLES_OK);
	if (!res)
		return EGS_ERR_STORE;
	for (int i = 0; i < PQntuples(res); i++) {
		struct egs_audit *a = egs_calloc(1, sizeof(*a));
		a->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		a->time = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		copy(a->key_id, sizeof(a->key_id), PQgetvalue(res, i, 2));
		copy(a->key_name, sizeof(a->key_name), PQgetvalue(res, i, 3));
		copy(a->role, sizeof(a->role), PQgetvalue(res, i, 4));
		copy(a->method, sizeof(a->method), PQgetvalue(res, i, 5));
		copy(a->route, sizeof(a->route), PQgetvalue(res, i, 6));
		copy(a->target, sizeof(a->target), PQgetvalue(res, i, 7));
		a->status = (int)strtol(PQgetvalue(res, i, 8), NULL, 10);
		copy(a->error_key, sizeof(a->error_key), PQgetvalue(res, i, 9));
		copy(a->peer, sizeof(a->peer), PQgetvalue(res, i, 10));
		egs_vec_push(out, a);
	}
	PQclear(res);
	return EGS_OK;
}

enum egs_err egs__pg_audit_prune(PGconn *conn, int64_t before, int64_t *deleted)
{
	char b[24];
	snprintf(b, sizeof(b), "%lld", (long long)before);
	const char *v[1] = { b };
	PGresult *res = pg_run(conn, "DELETE FROM audit WHERE time < $1::bigint", 1, v, PGRES_COMMAND_OK);
	if (!res)
		return EGS_ERR_STORE;
	*deleted = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return EGS_OK;
}

enum egs_err egs__pg_audit_last_id(PGconn *conn, int64_t *out)
{
	PGresult *res = pg_run(conn, "SELECT COALESCE(MAX(id), 0) FROM audit", 0, NULL, PGRES_TUPLES_OK);
	if (!res)
		return EGS_ERR_STORE;
	*out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return EGS_OK;
}
