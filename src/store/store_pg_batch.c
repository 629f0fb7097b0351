/*
 * store_pg_batch.c: many rows of one table in one PostgreSQL statement (docs/internals/store.md).
 *
 * A turn's rows of one table travel as one array parameter per column, in PostgreSQL's text format
 * for arrays, and one prepared statement writes them all:
 *
 *     INSERT INTO gprs(id,name,..) SELECT unnest($1::text[]), unnest($2::text[]), unnest($3::bigint[]), ..
 *         ON CONFLICT(id) DO UPDATE SET name = excluded.name, ..
 *     DELETE FROM gprs WHERE id = ANY($1::text[])
 *
 * Rows known new (egs__pg_fresh: GPRs created since the last commit, new events, audit entries) go
 * in through the same INSERT without its ON CONFLICT clause: an upsert first probes the primary key
 * for the row, then inserts speculatively and confirms, which was a fifth of the server's CPU per
 * create.  Should such a row exist after all (a commit whose outcome was unknown, say), the INSERT
 * fails on its key, and store_pg.c sends the whole turn again as upserts.
 *
 * The unnest calls stand in the SELECT list, where PostgreSQL steps through all the arrays in
 * lockstep (ProjectSet); in FROM (unnest($1, $2, ..)) it would first copy each column's rows into a
 * tuplestore of its own, which cost the server more per row than the one-row statements saved.
 *
 * The element types are read from the catalog when the statements are prepared, so the server parses
 * every element with the column type's own input function, exactly as it parsed the one-row text
 * parameters before.  Every element is written double-quoted with `"` and `\` escaped by a backslash
 * (the only two characters special inside quotes), numbers bare, SQL NULL as the bare word NULL; so
 * braces, commas, spaces, the string "NULL" and the empty string all arrive as they left.
 *
 * An upsert may not touch one key twice in a statement, so egs__pg_turn_rows() orders a turn's
 * changes by kind and key and keeps only the last change of each object: the row the turn ends with.
 */
#include "store/store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the array literals ---- */

static void reserve(struct egs_pg_text *t, size_t more)
{
	if (t->n + more + 1 <= t->cap)
		return;
	size_t cap = t->cap ? t->cap : 256;
	while (cap < t->n + more + 1)
		cap *= 2;
	t->b = egs_realloc(t->b, cap);
	t->cap = cap;
}

/* The next column of the row being bound, with the separator from the previous row's element. */
static struct egs_pg_text *next_col(struct egs_pg_batch *b, size_t more)
{
	EGS_ASSERT(b->col < b->ncols); /* a bind function binds each column once */
	struct egs_pg_text *t = &b->cols[b->col++];
	reserve(t, more + 1);
	if (b->nrows > 0)
		t->b[t->n++] = ',';
	return t;
}

static void put_bare(struct egs_pg_batch *b, const char *s)
{
	size_t n = strlen(s);
	struct egs_pg_text *t = next_col(b, n);
	memcpy(t->b + t->n, s, n);
	t->n += n;
}

/* Appends s[0..n) double-quoted, `"` and `\` escaped: the text of one array element. */
static void put_quoted(struct egs_pg_batch *b, const char *s, size_t n)
{
	struct egs_pg_text *t = next_col(b, 2 * n + 2);
	char *o = t->b + t->n;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			*o++ = '\\';
		*o++ = s[i];
	}
	*o++ = '"';
	t->n = (size_t)(o - t->b);
}

static void b_text(void *ctx, const char *s)
{
	if (s)
		put_quoted(ctx, s, strlen(s));
	else
		put_bare(ctx, "NULL");
}

static void b_int(void *ctx, int64_t v)
{
	char num[32];
	snprintf(num, sizeof(num), "%" PRId64, v);
	put_bare(ctx, num);
}

static void b_real(void *ctx, double v)
{
	char num[40];
	snprintf(num, sizeof(num), "%.17g", v); /* round-trips every finite double */
	put_bare(ctx, num);
}

/* A bytea element in its hex text form, \x followed by two digits a byte. */
static void b_blob(void *ctx, const void *data, int n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *d = data;
	struct egs_pg_text *t = next_col(ctx, 2 * (size_t)n + 5);
	char *o = t->b + t->n;
	memcpy(o, "\"\\\\x", 4); /* "\\x: the backslash escaped inside the quotes */
	o += 4;
	for (int i = 0; i < n; i++) {
		*o++ = hex[d[i] >> 4];
		*o++ = hex[d[i] & 15];
	}
	*o++ = '"';
	t->n = (size_t)(o - t->b);
}

static void b_json(void *ctx, json_t *v)
{
	struct egs_pg_batch *b = ctx;
	char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!s && !b->why)
		b->why = "a list cannot be encoded as JSON (invalid UTF-8?)";
	b_text(ctx, s ? s : "[]");
	free(s);
}

struct egs_row_binder egs__pg_batch_binder(struct egs_pg_batch *b)
{
	return (struct egs_row_binder){ b, b_text, b_int, b_real, b_blob, b_json };
}

void egs__pg_batch_start(struct egs_pg_batch *b, int ncols)
{
	EGS_ASSERT(ncols > 0 && ncols <= EGS_PG_MAX_COLS);
	b->ncols = ncols;
	b->nrows = 0;
	b->col = 0;
	b->why = NULL;
	for (int i = 0; i < ncols; i++) {
		b->cols[i].n = 0;
		reserve(&b->cols[i], 1);
		b->cols[i].b[b->cols[i].n++] = '{';
	}
}

void egs__pg_batch_row_begin(struct egs_pg_batch *b)
{
	b->col = 0;
}

bool egs__pg_batch_row_end(struct egs_pg_batch *b)
{
	EGS_ASSERT(b->col == b->ncols); /* every column bound */
	b->nrows++;
	return b->why == NULL;
}

void egs__pg_batch_key(struct egs_pg_batch *b, const char *key)
{
	egs__pg_batch_row_begin(b);
	b_text(b, key);
	egs__pg_batch_row_end(b);
}

const char *const *egs__pg_batch_finish(struct egs_pg_batch *b)
{
	for (int i = 0; i < b->ncols; i++) {
		struct egs_pg_text *t = &b->cols[i];
		reserve(t, 1);
		t->b[t->n++] = '}';
		t->b[t->n] = '\0';
		b->params[i] = t->b;
	}
	return b->params;
}

void egs__pg_batch_cleanup(struct egs_pg_batch *b)
{
	for (int i = 0; i < EGS_PG_MAX_COLS; i++)
		free(b->cols[i].b);
	memset(b, 0, sizeof(*b));
}

/* ---- the statements ---- */

int egs__pg_ncols(const char *cols)
{
	int n = 1;
	for (const char *p = cols; *p; p++)
		n += *p == ',';
	return n;
}

/* The type of column col (len bytes) in a result of (attname, type) rows; NULL when absent. */
static const char *col_type(const PGresult *types, const char *col, size_t len)
{
	for (int i = 0; i < PQntuples(types); i++) {
		const char *name = PQgetvalue(types, i, 0);
		if (strlen(name) == len && memcmp(name, col, len) == 0)
			return PQgetvalue(types, i, 1);
	}
	return NULL;
}

/* Appends "unnest($1::t1[]),unnest($2::t2[]),.." for an upsert, "ANY($1::t1[])" (the key alone)
 * for a delete. */
static bool add_arrays(struct egs_sqlbuf *q, const PGresult *types, const char *table, const char *cols, bool del)
{
	char num[32];
	int i = 0;
	for (const char *p = cols; *p; i++) {
		size_t len = strcspn(p, ",");
		const char *type = col_type(types, p, len);
		if (!type) {
			fprintf(stderr, "store: table %s has no column %.*s\n", table, (int)len, p);
			return false;
		}
		snprintf(num, sizeof(num), "%s%s($%d::", i ? "," : "", del ? "ANY" : "unnest", i + 1);
		egs_sql_str(q, num);
		egs_sql_str(q, type);
		egs_sql_str(q, "[])");
		p += len + (p[len] == ',');
		if (del)
			break;
	}
	return true;
}

/* INSERT INTO t(c1,..) SELECT unnest(..),.. [ON CONFLICT(c1) DO UPDATE SET c2=excluded.c2, ..]
 * or, for a delete, DELETE FROM t WHERE c1 = ANY(..). */
static bool batch_sql(struct egs_sqlbuf *q, const PGresult *types, const char *table, const char *cols, char mode)
{
	size_t keylen = strcspn(cols, ",");
	q->n = 0;
	if (mode == 'd') {
		egs_sql_str(q, "DELETE FROM ");
		egs_sql_str(q, table);
		egs_sql_str(q, " WHERE ");
		egs_sql_add(q, cols, keylen);
		egs_sql_str(q, " = ");
		return add_arrays(q, types, table, cols, true);
	}
	egs_sql_str(q, "INSERT INTO ");
	egs_sql_str(q, table);
	egs_sql_str(q, "(");
	egs_sql_str(q, cols);
	egs_sql_str(q, ") SELECT ");
	if (!add_arrays(q, types, table, cols, false))
		return false;
	if (mode == 'i')
		return true;
	egs_sql_str(q, " ON CONFLICT(");
	egs_sql_add(q, cols, keylen);
	egs_sql_str(q, ") DO UPDATE SET ");
	for (const char *p = cols + keylen; *p;) {
		p++; /* the comma */
		size_t len = strcspn(p, ",");
		if (p != cols + keylen + 1)
			egs_sql_str(q, ",");
		egs_sql_add(q, p, len);
		egs_sql_str(q, "=excluded.");
		egs_sql_add(q, p, len);
		p += len;
	}
	return true;
}

/* Prepares name as the batch upsert (mode 'u'), plain insert ('i') or delete ('d') of table, its
 * types read from the catalog. */
static bool prepare_batch(struct pg_store *s, const char *name, const char *table, const char *cols, char mode)
{
	char sql[256];
	struct egs_sqlbuf q;
	snprintf(sql, sizeof(sql),
		 "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
		 "WHERE attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped",
		 table); /* table: one of our own names */
	PGresult *types = egs__pg_run(s, sql, true);
	bool ok = types && batch_sql(&q, types, table, cols, mode) && egs__pg_prepare(s, name, q.b);
	PQclear(types);
	return ok;
}

bool egs__pg_prepare_batches(struct pg_store *s)
{
	static const char modes[] = { 'u', 'i', 'd' };
	static const char *const prefix[] = { "put", "ins", "del" };
	char name[16];
	for (int i = 0; i < egs__pg_nkinds; i++) {
		const struct egs_pg_kind *k = &egs__pg_kinds[i];
		for (int m = 0; m < 3; m++) {
			snprintf(name, sizeof(name), "%s%d", prefix[m], i);
			if (!prepare_batch(s, name, k->table, k->cols, modes[m]))
				return false;
		}
	}
	/* Events and audit entries: plain inserts for new ones, upserts for an event repeated (its count
	 * and time move) and for a turn sent again, whose ids may be stored already. */
	return prepare_batch(s, "ev", "events", EGS_PG_EVENT_COLS, 'u') &&
	       prepare_batch(s, "evi", "events", EGS_PG_EVENT_COLS, 'i') &&
	       prepare_batch(s, "au", "audit", EGS_AUDIT_COLS, 'u') &&
	       prepare_batch(s, "aui", "audit", EGS_AUDIT_COLS, 'i');
}

bool egs__pg_fresh(const struct pg_store *s, const struct egs_change *c)
{
	if (s->upsert_only || c->deleted || c->kind != EGS_KIND_GPR || s->seq_floor == 0)
		return false;
	return ((const struct egs_gpr *)c->obj)->seq >= s->seq_floor;
}

/* ---- the turn's rows ---- */

static int cmp_ref(const void *a, const void *b)
{
	const struct egs_pg_ref *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

size_t egs__pg_turn_rows(const struct egs_state *st, struct egs_pg_ref *out)
{
	size_t n = st->changes.len, kept = 0;
	for (size_t i = 0; i < n; i++) {
		const struct egs_change *c = st->changes.items[i];
		EGS_ASSERT((int)c->kind >= 0 && (int)c->kind < egs__pg_nkinds);
		out[i] = (struct egs_pg_ref){ (int)c->kind, egs__pg_kinds[c->kind].key(c->obj), i, c };
	}
	qsort(out, n, sizeof(*out), cmp_ref);
	for (size_t i = 0; i < n; i++) /* the last of each run of one kind and key */
		if (i + 1 == n || out[i + 1].kind != out[i].kind || strcmp(out[i + 1].key, out[i].key) != 0)
			out[kept++] = out[i];
	return kept;
}
