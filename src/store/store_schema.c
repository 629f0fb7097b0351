/*
 * store_schema.c: the schema of both stores, from one list of migrations (store_schema.inc)
 * expanded once per SQL dialect.  What the two dialects share is written once; the few column
 * types and functions that differ are macros, and a migration only one store needs is IF_SQLITE /
 * IF_PG (the other runs "SELECT 1;" for that number, so the versions count alike).  store_sqlite.c
 * and store_pg.c run the entries; the texts are the ones each store always ran, to the byte
 * (SQLite keeps each CREATE's text in sqlite_master).
 */
#include "store/store_pg.h"
#include "store/store_sqlite.h"

#define SQL_INT "INTEGER"
#define SQL_REAL "REAL"
#define SQL_BLOB "BLOB"
#define SQL_BYTE_LENGTH "length"
#define IF_SQLITE(sql) sql
#define IF_PG(sql)
const char *const egs__sqlite_migrations[] = {
#include "store/store_schema.inc"
};

#define SQL_INT "BIGINT"
#define SQL_REAL "DOUBLE PRECISION"
#define SQL_BLOB "BYTEA"
#define SQL_BYTE_LENGTH "octet_length"
#define IF_SQLITE(sql)
#define IF_PG(sql) sql
const char *const egs__pg_migrations[] = {
#include "store/store_schema.inc"
};

const int egs__pg_nmigrations = (int)EGS_ARRAY_LEN(egs__pg_migrations);

_Static_assert(EGS_ARRAY_LEN(egs__sqlite_migrations) == EGS_ARRAY_LEN(egs__pg_migrations),
	       "one schema version for both stores");

int egs_store_schema_version(void)
{
	return (int)EGS_ARRAY_LEN(egs__sqlite_migrations);
}
