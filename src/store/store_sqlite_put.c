/*
 * store_sqlite_put.c: a turn's rows of one table written several to a statement (store_sqlite.h).
 *
 * Each table the commit writes has three prepared statements, for 16, 4 and 1 rows:
 *
 *     INSERT INTO gprs(id,name,..) VALUES(?,?,..),(?,?,..),.. ON CONFLICT(id) DO UPDATE SET name=excluded.name,..
 *
 * and a run of n rows goes out as n / 16 statements of 16, then of 4, then single rows.  SQLite
 * executes such an INSERT row by row, exactly as that many one-row statements in that order (a
 * second row with the key of an earlier one updates it), but pays once per statement for what each
 * execution costs around its rows: opening a cursor per b-tree (a malloc each: Debian's SQLite has
 * no lookaside), the statement's start and halt, its record buffers.  That was ~12,000 of SQLite's
 * ~38,000 instructions per create in a turn of 64 (issue 16).  Each statement keeps its own
 * parameters (struct egs_sqlite_kept): row r of a 16-row statement is compared with row r of its
 * previous execution.
 */
#include "store/store_sqlite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PUT_SIZES = 3 };
static const int put_rows[PUT_SIZES] = { 16, 4, 1 }; /* largest first; put_rows[0] is EGS_SQLITE_PUT_MAX */
_Static_assert(EGS_SQLITE_PUT_MAX == 16, "the largest statement takes EGS_SQLITE_PUT_MAX rows");

struct egs_sqlite_put {
	const char *table; /* static */
	egs_sqlite_bind_fn bind;
	const char *(*key)(const void *obj); /* NULL: rows are named by id(obj) */
	int64_t (*id)(const void *obj);
	sqlite3_stmt *stmt[PUT_SIZES];
	struct egs_sqlite_kept *kept[PUT_SIZES];
};

/* INSERT INTO table(cols) VALUES(?,..),.. (rows tuples), and with upsert ON CONFLICT(first column)
 * DO UPDATE SET c2=excluded.c2, .. for every other column. */
static void put_sql(struct egs_sqlbuf *q, const char *table, const char *cols, int rows, bool upsert)
{
	int ncols = 1;
	for (const char *p = cols; *p; p++)
		ncols += *p == ',';
	q->n = 0;
	egs_sql_str(q, "INSERT INTO ");
	egs_sql_str(q, table);
	egs_sql_str(q, "(");
	egs_sql_str(q, cols);
	egs_sql_str(q, ") VALUES");
	for (int r = 0; r < rows; r++) {
		egs_sql_str(q, r ? ",(" : "(");
		for (int i = 0; i < ncols; i++)
			egs_sql_str(q, i ? ",?" : "?");
		egs_sql_str(q, ")");
	}
	if (upsert)
		egs_sql_upsert_tail(q, cols);
}

struct egs_sqlite_put *egs__sqlite_put_new(sqlite3 *db, const char *table, const char *cols, bool upsert,
					   egs_sqlite_bind_fn bind, const char *(*key)(const void *obj),
					   int64_t (*id)(const void *obj))
{
	struct egs_sqlite_put *p = egs_calloc(1, sizeof(*p));
	struct egs_sqlbuf q;
	EGS_ASSERT(key || id);
	*p = (struct egs_sqlite_put){ .table = table, .bind = bind, .key = key, .id = id };
	for (int i = 0; i < PUT_SIZES; i++) {
		put_sql(&q, table, cols, put_rows[i], upsert);
		if (sqlite3_prepare_v3(db, q.b, -1, SQLITE_PREPARE_PERSISTENT, &p->stmt[i], NULL) != SQLITE_OK) {
			fprintf(stderr, "store: preparing %.80s: %s\n", q.b, sqlite3_errmsg(db));
			egs__sqlite_put_free(p);
			return NULL;
		}
		p->kept[i] = egs__sqlite_kept_new(p->stmt[i]);
	}
	return p;
}

void egs__sqlite_put_free(struct egs_sqlite_put *p)
{
	if (!p)
		return;
	for (int i = 0; i < PUT_SIZES; i++) {
		sqlite3_finalize(p->stmt[i]); /* before its kept texts, which SQLite may still point at */
		egs__sqlite_kept_free(p->kept[i]);
	}
	free(p);
}

/* Prints "store: <what> <table> '<key of obj>'[ and <more> more]: <why>". */
static void complain(const struct egs_sqlite_put *p, const char *what, const void *obj, int more, const char *why)
{
	char more_text[32] = "";
	if (more > 0)
		snprintf(more_text, sizeof(more_text), " and %d more", more);
	if (p->key)
		fprintf(stderr, "store: %s %s '%s'%s: %s\n", what, p->table, p->key(obj), more_text, why);
	else
		fprintf(stderr, "store: %s %s %lld%s: %s\n", what, p->table, (long long)p->id(obj), more_text, why);
}

/* Writes objs[0..n) with statement i (n == put_rows[i]). */
static bool put_one(struct egs_sqlite_put *p, int i, void *const *objs, int n, int *last_rc)
{
	struct egs_sqlite_binder b = { .stmt = p->stmt[i], .kept = p->kept[i] };
	struct egs_row_binder rb = egs__sqlite_row_binder(&b);
	for (int r = 0; r < n; r++) {
		p->bind(&rb, objs[r]);
		if (b.rc) {
			complain(p, "put", objs[r], 0, b.why ? b.why : sqlite3_errstr(b.rc));
			return false;
		}
	}
	EGS_ASSERT(b.i == sqlite3_bind_parameter_count(b.stmt));
	int rc = sqlite3_step(b.stmt);
	if (rc != SQLITE_DONE) {
		*last_rc = rc;
		complain(p, "put", objs[0], n - 1, sqlite3_errmsg(sqlite3_db_handle(b.stmt)));
	}
	sqlite3_reset(b.stmt);
	return rc == SQLITE_DONE;
}

bool egs__sqlite_put_rows(struct egs_sqlite_put *p, void *const *objs, size_t n, int *last_rc)
{
	for (int i = 0; i < PUT_SIZES; i++)
		for (; n >= (size_t)put_rows[i]; objs += put_rows[i], n -= (size_t)put_rows[i])
			if (!put_one(p, i, objs, put_rows[i], last_rc))
				return false;
	return true;
}
