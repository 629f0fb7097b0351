/*
 * store_rows.h: the row codec both stores share.  Writing (store_rows.c): a store implements one
 * egs_row_binder over its own parameter API; the egs_rows_bind_* functions then call it once per
 * column, in the order of that kind's column list (docs/internals/store.md).  Reading
 * (store_rows_read.c): a store implements one egs_row_source over its own result rows; the read
 * functions of egs_rows_kinds take the columns back in the same order.  So the tables, the column
 * order and the value encodings live in one place for SQLite and PostgreSQL alike.
 */
#ifndef EGS_STORE_ROWS_H
#define EGS_STORE_ROWS_H

#include "core/state.h"
#include "store/store.h"

#include <jansson.h>
#include <stdint.h>

/* One value sink per column type; each call binds the next column.  A binder remembers its first
 * failure itself (the encoders do not check), so a bind function reads as a plain field list. */
struct egs_row_binder {
	void *ctx; /* the store's own parameter state, passed to every call */
	void (*text)(void *ctx, const char *s /* borrowed until the row is sent; NULL binds NULL */);
	void (*int64)(void *ctx, int64_t v);
	void (*real)(void *ctx, double v);
	void (*blob)(void *ctx, const void *data, int n /* borrowed like text */);
	/* Binds v as compact JSON text and takes ownership of v; NULL means encoding failed already
	 * (a string that is not UTF-8) and must fail the row. */
	void (*json)(void *ctx, json_t *v);
};

/* Each binds every column of one object of its kind (obj points at that kind's struct) through b. */
void egs_rows_bind_project(const struct egs_row_binder *b, const void *obj);
void egs_rows_bind_cluster(const struct egs_row_binder *b, const void *obj);
void egs_rows_bind_node(const struct egs_row_binder *b, const void *obj);
void egs_rows_bind_workspace(const struct egs_row_binder *b, const void *obj);
void egs_rows_bind_gpr(const struct egs_row_binder *b, const void *obj);
void egs_rows_bind_apikey(const struct egs_row_binder *b, const void *obj);
/* struct egs_doc: GPR templates, template bindings and kube credentials share one row shape. */
void egs_rows_bind_doc(const struct egs_row_binder *b, const void *obj);
/* Reads the gprs column `held` (JSON text written by egs_rows_bind_gpr, borrowed) into g's
 * held_until, ghost and held_nodes; false when it is not that shape (g's held fields stay unset). */
bool egs_rows_parse_held(const char *text, struct egs_gpr *g);
/* The finished states, as SQL: the WHERE of the partial indexes over gprs (migration 14) and of every
 * egs_store_gprs_find query, word for word (SQLite uses a partial index only for a query that
 * repeats its condition).  An OR of equalities, not an IN list: SQLite checks a partial index's
 * condition on every write of a row, and an IN list of more than two values costs a temporary b-tree
 * each time. */
#define EGS_ROWS_FINISHED \
	"(state = 'Complete' OR state = 'Cancelled' OR state = 'Rejected' OR state = 'Error')"
/* A finished row that holds nothing: it may age (core/aging.h), by EGS_ROWS_END, the time it ended
 * (its completion, or its creation when it has none).  Both are word for word the predicate and the
 * expression of PostgreSQL's migration 17 indexes over the rows a load keeps, and of its loads. */
#define EGS_ROWS_AGEABLE "(" EGS_ROWS_FINISHED " AND held IS NULL)"
#define EGS_ROWS_END "(CASE WHEN completion_ts <> 0 THEN completion_ts ELSE created_at END)"
/* Writes egs_store_gprs_find's query for f into buf (n bytes): SELECT cols FROM gprs WHERE ...
 * ORDER BY id, with its string parameters as placeholders `ph`1, `ph`2... ('?' for SQLite, '$'
 * for PostgreSQL) whose values go to vals (borrowed from f) in order.  Returns how many, or -1 when
 * buf is too small. */
int egs_rows_find_sql(const struct egs_gpr_find *f, const char *cols, char ph, char *buf, size_t n,
		      const char *vals[4]);
/* The load of gprs when st->aged_before is set (core/aging.h): egs_rows_load_where writes the WHERE
 * that leaves the aged rows out of the full load (finished before the cut-off, no hold; "" when
 * aging is off), egs_rows_aged_sql the query of just what the aged rows leave behind (its
 * EGS_ROWS_AGED_COLS columns), and egs_rows_count_aged counts one of its rows, given as text (NULL
 * for SQL NULL), into st; false when a value is not what egsd writes. */
#define EGS_ROWS_AGED_COLS 9
void egs_rows_load_where(const struct egs_state *st, char *buf, size_t n);
/* PostgreSQL's form of the same: writes the whole query of the rows to keep (SELECT cols FROM gprs
 * ... ORDER BY order) as a UNION ALL of the rows that never age (NOT EGS_ROWS_AGEABLE) and the
 * ageable rows that ended at or after the cut-off, each the predicate of an index of migration 17,
 * so that neither branch reads the aged rows; a plain query of every row when aging is off. */
void egs_rows_load_kept_sql(const struct egs_state *st, const char *cols, const char *order, char *buf, size_t n);
void egs_rows_aged_sql(const struct egs_state *st, char *buf, size_t n);
bool egs_rows_count_aged(struct egs_state *st, const char *const v[EGS_ROWS_AGED_COLS]);
/* PostgreSQL's form of the same: one row per workspace and state (EGS_ROWS_AGED_SUM_COLS: workspace,
 * state, count, largest seq, and the fair-share usage summed in SQL relative to the cut-off), so a
 * million aged rows come back as a few dozen.  The sum is egs_fair_charge's, term for term. */
#define EGS_ROWS_AGED_SUM_COLS 5
void egs_rows_aged_sum_sql(const struct egs_state *st, char *buf, size_t n);
bool egs_rows_count_aged_sum(struct egs_state *st, const char *const v[EGS_ROWS_AGED_SUM_COLS]);
void egs_rows_bind_event(const struct egs_row_binder *b, const struct egs_event *ev);
/* An audit entry, in the order of EGS_AUDIT_COLS (table audit, migration 11). */
#define EGS_AUDIT_COLS "id,time,key_id,key_name,role,method,route,target,status,error_key,peer"
void egs_rows_bind_audit(const struct egs_row_binder *b, const struct egs_audit *a);

/* ---- reading rows (store_rows_read.c) ---- */

struct egs_row_reader;

/* One store's accessors for the columns of the reader's current row (col counts from 0). */
struct egs_row_source {
	/* The value as text, NULL for SQL NULL; *len gets its length in bytes.  Borrowed until the
	 * reader moves to another row. */
	const char *(*text)(const struct egs_row_reader *r, int col, size_t *len);
	bool (*is_null)(const struct egs_row_reader *r, int col);
	/* The value as a number into *out; false when it is not one (then *out is unspecified). */
	bool (*int64)(const struct egs_row_reader *r, int col, int64_t *out);
	bool (*real)(const struct egs_row_reader *r, int col, double *out);
	/* Copies the value, exactly n bytes, into dst; returns NULL, or why it is not n bytes. */
	const char *(*bytes)(const struct egs_row_reader *r, int col, unsigned char *dst, size_t n);
	/* The column's name, for the error line (static, or borrowed from res). */
	const char *(*name)(const struct egs_row_reader *r, int col);
};

/* Reads columns 0, 1, ... of one row in order; the first failure names its column. */
struct egs_row_reader {
	const struct egs_row_source *src; /* static */
	void *res;  /* the store's result: a sqlite3_stmt stepped to the row, or a PGresult (borrowed) */
	int row;    /* the row of res (PostgreSQL; 0 for SQLite) */
	int i;      /* the next column */
	const char *bad; /* the column of the first failure, NULL when all is well */
	const char *why;
};

/* One object kind's row: its table, its columns and the functions between row and object. */
struct egs_row_kind {
	const char *table;
	const char *cols;  /* the first column is the primary key */
	const char *order; /* load order */
	void *(*alloc)(void);
	void (*free)(void *obj);
	void (*bind)(const struct egs_row_binder *b, const void *obj); /* store_rows.c */
	void (*read)(struct egs_row_reader *r, void *obj); /* failures are recorded in r */
	enum egs_err (*add)(struct egs_state *st, void *obj); /* takes ownership on success */
	const char *(*key)(const void *obj);
};

/* Indexed by enum egs_kind, in load order (GPRs by seq, so that st->active is in enqueue order). */
#define EGS_ROWS_NKINDS (EGS_KIND_ENDPOINT + 1)
extern const struct egs_row_kind egs_rows_kinds[EGS_ROWS_NKINDS];

/* Reads r's row as one object of kind k; returns it (caller frees with k->free) or NULL after
 * printing "store: <table> row '<key>': column <name>: <why>". */
void *egs_rows_read_obj(const struct egs_row_kind *k, struct egs_row_reader *r);
/* Reads r's row as one object of kind k and adds it to st; false (printed) when the row is bad or
 * the object a duplicate. */
bool egs_rows_load_obj(const struct egs_row_kind *k, struct egs_row_reader *r, struct egs_state *st);
/* The events table: its columns, one row read into ev (failures recorded in r), and one row read
 * and added to st (false, printed, when bad). */
#define EGS_ROWS_EVENT_COLS "id,time,first_time,count,type,reason,object_kind,object_name,workspace,message"
void egs_rows_read_event(struct egs_row_reader *r, struct egs_event *ev);
bool egs_rows_load_event(struct egs_row_reader *r, struct egs_state *st);

/* A small appender for the SQL a store builds once when it opens (statements per table); running out
 * of the buffer is a bug. */
struct egs_sqlbuf {
	char b[4096];
	size_t n;
};
void egs_sql_add(struct egs_sqlbuf *q, const char *s, size_t len);
void egs_sql_str(struct egs_sqlbuf *q, const char *s);
/* Appends " ON CONFLICT(key) DO UPDATE SET c2=excluded.c2, .." for the comma-separated cols, whose
 * first column is the key: the upsert both stores write (same syntax in SQLite and PostgreSQL). */
void egs_sql_upsert_tail(struct egs_sqlbuf *q, const char *cols);

#endif
