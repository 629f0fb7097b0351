/*
 * store_pg_rows.c: the PostgreSQL store's row source for store_rows_read.c (store_rows.h): the
 * columns of one row of a PGresult, in PostgreSQL's text format.  Text comes back as is; a number
 * must parse whole (an integer column holding "12x" or NULL fails the row, where SQLite would
 * convert); the API key hash is bytea, "\x" and two hex digits per byte.
 */
#include "store/store_pg.h"
#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *c_text(const struct egs_row_reader *r, int col, size_t *len)
{
	if (PQgetisnull(r->res, r->row, col)) {
		*len = 0;
		return NULL;
	}
	*len = (size_t)PQgetlength(r->res, r->row, col);
	return PQgetvalue(r->res, r->row, col);
}

static bool c_is_null(const struct egs_row_reader *r, int col)
{
	return PQgetisnull(r->res, r->row, col);
}

static bool c_int64(const struct egs_row_reader *r, int col, int64_t *out)
{
	size_t len;
	const char *s = c_text(r, col, &len);
	char *end;
	if (!s)
		return false;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	*out = v;
	return !errno && !*end && end != s;
}

static bool c_real(const struct egs_row_reader *r, int col, double *out)
{
	size_t len;
	const char *s = c_text(r, col, &len);
	char *end;
	if (!s)
		return false;
	*out = strtod(s, &end);
	return !*end && end != s;
}

/* A bytea column (text format: \x followed by hex) of exactly n bytes. */
static const char *c_bytes(const struct egs_row_reader *r, int col, unsigned char *dst, size_t n)
{
	size_t len;
	const char *s = c_text(r, col, &len);
	if (!s || strncmp(s, "\\x", 2) != 0 || len != 2 + 2 * n)
		return "hash is not 32 bytes";
	for (size_t i = 0; i < n; i++) {
		int hi = egs_hex_digit(s[2 + 2 * i]), lo = egs_hex_digit(s[3 + 2 * i]);
		if (hi < 0 || lo < 0)
			return "hash is not hex";
		dst[i] = (unsigned char)(hi << 4 | lo);
	}
	return NULL;
}

static const char *c_name(const struct egs_row_reader *r, int col)
{
	return PQfname(r->res, col);
}

const struct egs_row_source egs__pg_row_source = { c_text, c_is_null, c_int64, c_real, c_bytes, c_name };
