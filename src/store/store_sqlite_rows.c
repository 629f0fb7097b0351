/*
 * store_sqlite_rows.c: the SQLite store's side of the row codec of store_rows.h: the binder that
 * store_rows.c's encoders write through (parameters 1, 2, ... of a prepared statement) and the row
 * source that store_rows_read.c's readers take columns from (sqlite3_column_* of a stepped
 * statement).  SQLite converts between its value types itself, so a number column never fails
 * here; a blob must have exactly the length asked for.
 */
#include "store/store_sqlite.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- binding: parameters 1, 2, ... ---- */

static void b_text(void *ctx, const char *s /* borrowed until the step; NULL binds NULL */)
{
	struct egs_sqlite_binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_text(b->stmt, ++b->i, s, -1, SQLITE_STATIC);
}

static void b_int(void *ctx, int64_t v)
{
	struct egs_sqlite_binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_int64(b->stmt, ++b->i, v);
}

static void b_real(void *ctx, double v)
{
	struct egs_sqlite_binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_double(b->stmt, ++b->i, v);
}

static void b_blob(void *ctx, const void *p, int n)
{
	struct egs_sqlite_binder *b = ctx;
	if (!b->rc)
		b->rc = sqlite3_bind_blob(b->stmt, ++b->i, p, n, SQLITE_STATIC);
}

/* Binds v as compact JSON text (takes ownership of v; NULL means encoding failed already). */
static void b_json(void *ctx, json_t *v)
{
	struct egs_sqlite_binder *b = ctx;
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (b->rc) {
		free(s);
		return;
	}
	if (!s) {
		b->rc = SQLITE_ERROR;
		b->why = "a list cannot be encoded as JSON (invalid UTF-8?)";
		return;
	}
	b->rc = sqlite3_bind_text(b->stmt, ++b->i, s, -1, free); /* SQLite frees s */
}

struct egs_row_binder egs__sqlite_row_binder(struct egs_sqlite_binder *b)
{
	return (struct egs_row_binder){ b, b_text, b_int, b_real, b_blob, b_json };
}

/* ---- reading: the columns of the row the statement (r->res) was stepped to ---- */

static sqlite3_stmt *stmt_of(const struct egs_row_reader *r)
{
	return r->res;
}

static const char *c_text(const struct egs_row_reader *r, int col, size_t *len)
{
	const char *s = (const char *)sqlite3_column_text(stmt_of(r), col);
	*len = s ? (size_t)sqlite3_column_bytes(stmt_of(r), col) : 0;
	return s;
}

static bool c_is_null(const struct egs_row_reader *r, int col)
{
	return sqlite3_column_type(stmt_of(r), col) == SQLITE_NULL;
}

static bool c_int64(const struct egs_row_reader *r, int col, int64_t *out)
{
	*out = sqlite3_column_int64(stmt_of(r), col);
	return true;
}

static bool c_real(const struct egs_row_reader *r, int col, double *out)
{
	*out = sqlite3_column_double(stmt_of(r), col);
	return true;
}

static const char *c_bytes(const struct egs_row_reader *r, int col, unsigned char *dst, size_t n)
{
	const void *p = sqlite3_column_blob(stmt_of(r), col);
	if (!p || sqlite3_column_bytes(stmt_of(r), col) != (int)n)
		return "hash is not 32 bytes";
	memcpy(dst, p, n);
	return NULL;
}

static const char *c_name(const struct egs_row_reader *r, int col)
{
	return sqlite3_column_name(stmt_of(r), col);
}

const struct egs_row_source egs__sqlite_row_source = { c_text, c_is_null, c_int64, c_real, c_bytes, c_name };
