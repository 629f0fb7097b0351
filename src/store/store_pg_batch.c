/*
 * store_pg_batch.c: many rows of one table in one PostgreSQL statement (docs/internals/store.md).
 *
 * A turn's rows of one table travel as one array parameter per column, in PostgreSQL's binary format
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
 * Each array is sent in binary (array_send's layout: one dimension, a null flag, the element type,
 * the length, the lower bound, then per element its length, -1 for SQL NULL, and its bytes), so the
 * server copies strings as they are, with nothing to escape or to scan for quotes, and numbers as
 * 8 big-endian bytes (a double's IEEE bits: exact).  The element types are the columns' own, read
 * from the catalog when the statements are prepared (s->types); a value bound as another type fails
 * its row here, and the server checks the arrays' types again: nothing is ever converted.  The server
 * validates each string's encoding as it did the text form's.
 *
 * An upsert may not touch one key twice in a statement, so egs__pg_turn_rows() orders a turn's
 * changes by kind and key and keeps only the last change of each object: the row the turn ends with.
 */
#include "store/store_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the arrays, in PostgreSQL's binary format ---- */

/* Element type OIDs (pg_type.dat: fixed since PostgreSQL 7). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701
#define HEADER 20 /* ndim, flags, element type, length, lower bound: five int32 */

static void put_u32(char *o, uint32_t v)
{
	o[0] = (char)(v >> 24);
	o[1] = (char)(v >> 16);
	o[2] = (char)(v >> 8);
	o[3] = (char)v;
}

/* Appends the next column's element of the row being bound: its length (-1: SQL NULL) and n bytes
 * of data, in an array of element type oid. */
static void put_elem(struct egs_pg_batch *b, uint32_t oid, const void *data, int32_t n)
{
	EGS_ASSERT(b->col < b->ncols); /* a bind function binds each column once */
	int i = b->col++;
	struct egs_buf *t = &b->cols[i];
	if (n >= 0) { /* a NULL fits any column */
		if (b->oid[i] && b->oid[i] != oid && !b->why)
			b->why = "a value of another type than its column's";
		b->oid[i] = oid;
	}
	egs_buf_reserve(t, 4 + (n > 0 ? (size_t)n : 0));
	put_u32(t->p + t->len, (uint32_t)n);
	t->len += 4;
	if (n > 0)
		egs_buf_put(t, data, (size_t)n);
	b->nulls[i] |= n < 0;
}

static void put_text(struct egs_pg_batch *b, uint32_t oid, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > INT32_MAX && !b->why)
		b->why = "a value longer than 2 GiB";
	put_elem(b, oid, s, !s ? -1 : n > INT32_MAX ? 0 : (int32_t)n);
}

static void b_text(void *ctx, const char *s)
{
	put_text(ctx, OID_TEXT, s);
}

static void put_u64(struct egs_pg_batch *b, uint32_t oid, uint64_t v)
{
	char be[8];
	put_u32(be, (uint32_t)(v >> 32));
	put_u32(be + 4, (uint32_t)v);
	put_elem(b, oid, be, 8);
}

static void b_int(void *ctx, int64_t v)
{
	put_u64(ctx, OID_INT8, (uint64_t)v);
}

/* A double travels as its IEEE 754 bits: every value, NaN, infinities and -0 included, exactly. */
static void b_real(void *ctx, double v)
{
	uint64_t bits;
	memcpy(&bits, &v, sizeof(bits));
	put_u64(ctx, OID_FLOAT8, bits);
}

static void b_blob(void *ctx, const void *data, int n)
{
	put_elem(ctx, OID_BYTEA, data, n > 0 ? n : 0);
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

void egs__pg_batch_start(struct egs_pg_batch *b, int ncols, const uint32_t *types)
{
	EGS_ASSERT(ncols > 0 && ncols <= EGS_PG_MAX_COLS);
	b->ncols = ncols;
	b->types = types;
	b->nrows = 0;
	b->col = 0;
	b->why = NULL;
	for (int i = 0; i < ncols; i++) {
		b->cols[i].len = 0;
		egs_buf_reserve(&b->cols[i], HEADER);
		b->cols[i].len = HEADER; /* written by finish, once the rows are counted */
		b->oid[i] = types ? types[i] : 0;
		b->nulls[i] = false;
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
	EGS_ASSERT(b->nrows > 0); /* an empty array has no dimension: never sent */
	for (int i = 0; i < b->ncols; i++) {
		struct egs_buf *t = &b->cols[i];
		EGS_ASSERT(t->len <= INT32_MAX);
		put_u32(t->p, 1); /* one dimension */
		put_u32(t->p + 4, b->nulls[i]);
		put_u32(t->p + 8, b->oid[i] ? b->oid[i] : OID_TEXT); /* (all NULL, no type given) */
		put_u32(t->p + 12, (uint32_t)b->nrows);
		put_u32(t->p + 16, 1); /* the lower bound */
		b->params[i] = t->p;
		b->lengths[i] = (int)t->len;
		b->formats[i] = 1; /* binary */
	}
	return b->params;
}

void egs__pg_batch_cleanup(struct egs_pg_batch *b)
{
	for (int i = 0; i < EGS_PG_MAX_COLS; i++)
		egs_buf_cleanup(&b->cols[i]);
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

/* The row of column col (len bytes) in a result of (attname, type name, type oid) rows; -1 when
 * absent. */
static int col_row(const PGresult *types, const char *col, size_t len)
{
	for (int i = 0; i < PQntuples(types); i++) {
		const char *name = PQgetvalue(types, i, 0);
		if (strlen(name) == len && memcmp(name, col, len) == 0)
			return i;
	}
	return -1;
}

/* Appends "unnest($1::t1[]),unnest($2::t2[]),.." for an upsert, "ANY($1::t1[])" (the key alone)
 * for a delete, and sets oids[i] to column i's type (one the binder sends). */
static bool add_arrays(struct egs_sqlbuf *q, const PGresult *types, const char *table, const char *cols, bool del,
		       uint32_t *oids)
{
	char num[32];
	int i = 0;
	for (const char *p = cols; *p; i++) {
		size_t len = strcspn(p, ",");
		int row = col_row(types, p, len);
		if (row < 0) {
			fprintf(stderr, "store: table %s has no column %.*s\n", table, (int)len, p);
			return false;
		}
		oids[i] = (uint32_t)strtoul(PQgetvalue(types, row, 2), NULL, 10);
		if (oids[i] != OID_TEXT && oids[i] != OID_INT8 && oids[i] != OID_FLOAT8 && oids[i] != OID_BYTEA) {
			fprintf(stderr, "store: column %s.%.*s is of a type the store does not send\n", table, (int)len, p);
			return false;
		}
		snprintf(num, sizeof(num), "%s%s($%d::", i ? "," : "", del ? "ANY" : "unnest", i + 1);
		egs_sql_str(q, num);
		egs_sql_str(q, PQgetvalue(types, row, 1));
		egs_sql_str(q, "[])");
		p += len + (p[len] == ',');
		if (del)
			break;
	}
	return true;
}

/* INSERT INTO t(c1,..) SELECT unnest(..),.. [ON CONFLICT(c1) DO UPDATE SET c2=excluded.c2, ..]
 * or, for a delete, DELETE FROM t WHERE c1 = ANY(..). */
static bool batch_sql(struct egs_sqlbuf *q, const PGresult *types, const char *table, const char *cols, char mode,
		      uint32_t *oids)
{
	size_t keylen = strcspn(cols, ",");
	q->n = 0;
	if (mode == 'd') {
		egs_sql_str(q, "DELETE FROM ");
		egs_sql_str(q, table);
		egs_sql_str(q, " WHERE ");
		egs_sql_add(q, cols, keylen);
		egs_sql_str(q, " = ");
		return add_arrays(q, types, table, cols, true, oids);
	}
	egs_sql_str(q, "INSERT INTO ");
	egs_sql_str(q, table);
	egs_sql_str(q, "(");
	egs_sql_str(q, cols);
	egs_sql_str(q, ") SELECT ");
	if (!add_arrays(q, types, table, cols, false, oids))
		return false;
	if (mode != 'i')
		egs_sql_upsert_tail(q, cols);
	return true;
}

/* Prepares name as the batch upsert (mode 'u'), plain insert ('i') or delete ('d') of table t (a
 * kind's, or EGS_PG_EVENTS or EGS_PG_AUDIT), its types read from the catalog into s->types[t]. */
static bool prepare_batch(struct pg_store *s, const char *name, int t, const char *table, const char *cols, char mode)
{
	char sql[256];
	struct egs_sqlbuf q;
	snprintf(sql, sizeof(sql),
		 "SELECT attname, format_type(atttypid, atttypmod), atttypid FROM pg_attribute "
		 "WHERE attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped",
		 table); /* table: one of our own names */
	PGresult *types = egs__pg_run(s, sql, true);
	bool ok = types && batch_sql(&q, types, table, cols, mode, s->types[t]) && egs__pg_prepare(s, name, q.b);
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
			if (!prepare_batch(s, name, i, k->table, k->cols, modes[m]))
				return false;
		}
	}
	/* Events and audit entries: plain inserts for new ones, upserts for an event repeated (its count
	 * and time move) and for a turn sent again, whose ids may be stored already. */
	return prepare_batch(s, "ev", EGS_PG_EVENTS, "events", EGS_PG_EVENT_COLS, 'u') &&
	       prepare_batch(s, "evi", EGS_PG_EVENTS, "events", EGS_PG_EVENT_COLS, 'i') &&
	       prepare_batch(s, "au", EGS_PG_AUDIT, "audit", EGS_AUDIT_COLS, 'u') &&
	       prepare_batch(s, "aui", EGS_PG_AUDIT, "audit", EGS_AUDIT_COLS, 'i');
}

bool egs__pg_fresh(const struct pg_store *s, const struct egs_change *c)
{
	if (c->deleted || c->kind != EGS_KIND_GPR || s->seq_floor == 0)
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
