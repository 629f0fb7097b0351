/*
 * store_pg.h: what the PostgreSQL store's files share (store_pg.c: connection, leadership, group
 * commit, load; store_pg_rows.c: the binder for store_rows.c and one read function per object kind;
 * store_pg_schema.c: the migrations).
 * Internal to src/store.
 *
 * Parameters travel in text format (numbers printed, JSON as text) except the API key hash,
 * which is sent as binary bytea; results are read in text format.  The column lists in
 * egs__pg_kinds are the single source of the bind order and of the load's column order, like
 * kinds[] in store_sqlite.c (the same tables and columns: a new column goes into both files).
 */
#ifndef EGS_STORE_PG_H
#define EGS_STORE_PG_H

#include "core/state.h"
#include "store/store_rows.h"

#include <libpq-fe.h>

#define EGS_PG_MAX_COLS 40

/* One row's parameters for PQexecPrepared / PQsendQueryPrepared. */
struct egs_pg_params {
	int n;
	const char *v[EGS_PG_MAX_COLS]; /* NULL is SQL NULL */
	int len[EGS_PG_MAX_COLS];       /* only for binary parameters */
	int fmt[EGS_PG_MAX_COLS];       /* 0 text, 1 binary */
	char *own[EGS_PG_MAX_COLS];     /* allocated values, freed by egs__pg_params_clear */
	char num[EGS_PG_MAX_COLS][32];  /* printed numbers */
	const char *why;                /* the first failure of ours (e.g. unencodable JSON), or NULL */
};

/* Reads columns 0, 1, ... of one result row in order; the first failure names its column. */
struct egs_pg_reader {
	const PGresult *res; /* borrowed */
	int row;
	int i;
	const char *bad; /* the column of the first failure, NULL when all is well */
	const char *why;
};

struct egs_pg_kind {
	const char *table;
	const char *cols;  /* the first column is the primary key */
	const char *order; /* load order */
	void *(*alloc)(void);
	void (*free)(void *obj);
	void (*bind)(const struct egs_row_binder *b, const void *obj); /* store_rows.c */
	void (*read)(struct egs_pg_reader *r, void *obj);
	enum egs_err (*add)(struct egs_state *st, void *obj); /* takes ownership on success */
	const char *(*key)(const void *obj);
};

/* Indexed by enum egs_kind; egs__pg_nkinds entries. */
extern const struct egs_pg_kind egs__pg_kinds[];
extern const int egs__pg_nkinds;

#define EGS_PG_EVENT_COLS "id,time,first_time,count,type,reason,object_kind,object_name,workspace,message"

void egs__pg_read_event(struct egs_pg_reader *r, struct egs_event *ev);

/* The schema (store_pg_schema.c): egs__pg_nmigrations SQL scripts, entry i from version i to i + 1. */
extern const char *const egs__pg_migrations[];
extern const int egs__pg_nmigrations;

/* The binder that appends store_rows.c's column values to p (ctx is p). */
struct egs_row_binder egs__pg_row_binder(struct egs_pg_params *p);

/* Frees the values the binds allocated and empties p for the next row. */
void egs__pg_params_clear(struct egs_pg_params *p);

#endif
