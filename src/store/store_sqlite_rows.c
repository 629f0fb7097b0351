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

/* ---- kept parameters ---- */

enum kept_type { KEPT_NONE, KEPT_NULL, KEPT_INT, KEPT_REAL, KEPT_TEXT };

/* Texts up to this long are kept (copied); a longer one is bound from the caller's memory and
 * its slot forgotten, so the next row binds that parameter again. */
#define KEPT_TEXT_MAX 1024

struct kept_slot {
	enum kept_type type;
	int64_t i;      /* KEPT_INT */
	double r;       /* KEPT_REAL (compared by its bytes: -0.0 and NaNs stay themselves) */
	char *text;     /* KEPT_TEXT: the bytes SQLite reads, NUL-terminated (owned) */
	size_t len;     /* KEPT_TEXT */
	size_t cap;     /* text's allocation */
};

struct egs_sqlite_kept {
	int n;
	struct kept_slot slot[];
};

struct egs_sqlite_kept *egs__sqlite_kept_new(sqlite3_stmt *stmt)
{
	int n = sqlite3_bind_parameter_count(stmt);
	struct egs_sqlite_kept *k = egs_calloc(1, sizeof(*k) + (size_t)n * sizeof(k->slot[0]));
	k->n = n;
	return k;
}

void egs__sqlite_kept_free(struct egs_sqlite_kept *k)
{
	if (!k)
		return;
	for (int i = 0; i < k->n; i++)
		free(k->slot[i].text);
	free(k);
}

/* The slot of the binder's next parameter (advancing b->i), or NULL without kept values. */
static struct kept_slot *next_slot(struct egs_sqlite_binder *b)
{
	b->i++;
	if (!b->kept)
		return NULL;
	EGS_ASSERT(b->i >= 1 && b->i <= b->kept->n);
	return &b->kept->slot[b->i - 1];
}

/* Records what parameter k holds after a bind that returned rc (unknown after a failure: SQLite
 * may have cleared it). */
static void kept_set(struct kept_slot *k, int rc, enum kept_type type)
{
	if (k)
		k->type = rc == SQLITE_OK ? type : KEPT_NONE;
}

/* Binds text s of n bytes as the binder's next parameter, copied into its slot when kept. */
static void bind_text_n(struct egs_sqlite_binder *b, const char *s, size_t n)
{
	struct kept_slot *k = next_slot(b);
	if (k && k->type == KEPT_TEXT && k->len == n && memcmp(k->text, s, n) == 0)
		return;
	if (!k || n > KEPT_TEXT_MAX) {
		b->rc = sqlite3_bind_text(b->stmt, b->i, s, (int)n, SQLITE_STATIC);
		kept_set(k, SQLITE_ERROR, KEPT_NONE);
		return;
	}
	if (k->cap < n + 1) { /* SQLite may point at the old copy: it is bound anew just below */
		free(k->text);
		k->cap = n + 1 < 32 ? 32 : n + 1;
		k->text = egs_malloc(k->cap);
	}
	memcpy(k->text, s, n);
	k->text[n] = '\0';
	k->len = n;
	b->rc = sqlite3_bind_text(b->stmt, b->i, k->text, (int)n, SQLITE_STATIC);
	kept_set(k, b->rc, KEPT_TEXT);
}

/* ---- binding: parameters 1, 2, ... ---- */

static void b_text(void *ctx, const char *s /* borrowed until the step; NULL binds NULL */)
{
	struct egs_sqlite_binder *b = ctx;
	if (b->rc)
		return;
	if (s) {
		bind_text_n(b, s, strlen(s));
		return;
	}
	struct kept_slot *k = next_slot(b);
	if (k && k->type == KEPT_NULL)
		return;
	b->rc = sqlite3_bind_null(b->stmt, b->i);
	kept_set(k, b->rc, KEPT_NULL);
}

static void b_int(void *ctx, int64_t v)
{
	struct egs_sqlite_binder *b = ctx;
	if (b->rc)
		return;
	struct kept_slot *k = next_slot(b);
	if (k && k->type == KEPT_INT && k->i == v)
		return;
	b->rc = sqlite3_bind_int64(b->stmt, b->i, v);
	kept_set(k, b->rc, KEPT_INT);
	if (k)
		k->i = v;
}

static void b_real(void *ctx, double v)
{
	struct egs_sqlite_binder *b = ctx;
	if (b->rc)
		return;
	struct kept_slot *k = next_slot(b);
	if (k && k->type == KEPT_REAL && memcmp(&k->r, &v, sizeof(v)) == 0)
		return;
	b->rc = sqlite3_bind_double(b->stmt, b->i, v);
	kept_set(k, b->rc, KEPT_REAL);
	if (k)
		k->r = v;
}

/* Blobs (an API key's hash) are rare and bound every time. */
static void b_blob(void *ctx, const void *p, int n)
{
	struct egs_sqlite_binder *b = ctx;
	if (b->rc)
		return;
	struct kept_slot *k = next_slot(b);
	b->rc = sqlite3_bind_blob(b->stmt, b->i, p, n, SQLITE_STATIC);
	kept_set(k, SQLITE_ERROR, KEPT_NONE);
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
	size_t n = strlen(s);
	if (b->kept && n <= KEPT_TEXT_MAX) { /* copied into the slot (or equal to it) */
		bind_text_n(b, s, n);
		free(s);
		return;
	}
	struct kept_slot *k = next_slot(b);
	b->rc = sqlite3_bind_text(b->stmt, b->i, s, (int)n, free); /* SQLite frees s */
	kept_set(k, SQLITE_ERROR, KEPT_NONE);
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
