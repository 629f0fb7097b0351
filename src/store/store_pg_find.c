/*
 * store_pg_find.c: PostgreSQL's egs_store_gprs_find (store.h): finished GPRs that left memory, read
 * back by key or by the partial indexes of migration 13.  One query with text parameters, waited
 * for like every other query of the session (egs__pg_wait: a leader's lease bounds it).
 */
#include "store/store_pg.h"

#include <stdio.h>
#include <string.h>

/* Runs sql with np text parameters and returns its rows (caller PQclears), or NULL after printing
 * why. */
static PGresult *query(struct pg_store *s, const char *sql, int np, const char *const *vals)
{
	PGresult *res = NULL, *next;
	if (!s->conn || PQsendQueryParams(s->conn, sql, np, NULL, vals, NULL, NULL, 0) != 1) {
		fprintf(stderr, "store: reading gprs: %s", egs__pg_errmsg(s));
		return NULL;
	}
	int64_t deadline = egs__pg_deadline(s);
	while ((next = egs__pg_wait(s, deadline))) {
		PQclear(res);
		res = next;
	}
	if (!s->timed_out && PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	fprintf(stderr, "store: reading gprs: %s", res && !s->timed_out ? PQresultErrorMessage(res) : egs__pg_errmsg(s));
	PQclear(res);
	return NULL;
}

enum egs_err egs__pg_gprs_find(struct egs_store *b, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx)
{
	struct pg_store *s = (struct pg_store *)b;
	const struct egs_pg_kind *k = &egs__pg_kinds[EGS_KIND_GPR];
	char sql[1024];
	const char *vals[4];
	int np = egs_rows_find_sql(f, k->cols, '$', sql, sizeof(sql), vals);
	PGresult *res = np >= 0 && egs__pg_ready(s) ? query(s, sql, np, vals) : NULL;
	enum egs_err err = EGS_ERR_STORE;
	if (!res)
		return EGS_ERR_STORE;
	for (int row = 0; row < PQntuples(res); row++) {
		struct egs_row_reader r = { .src = &egs__pg_row_source, .res = res, .row = row };
		struct egs_gpr *g = egs_rows_read_obj(k, &r);
		if (!g)
			goto out;
		each(ctx, g);
	}
	err = EGS_OK;
out:
	PQclear(res);
	return err;
}
