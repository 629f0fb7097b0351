/*
 * test_store_schema.c: the shipped schema migrations never change.  Both stores run their entries
 * from one list (src/store/store_schema.inc); an edit to a shipped entry would give a new database a
 * schema that the users' databases, migrated long ago, do not have (and SQLite keeps each CREATE's
 * text in sqlite_master).  Each entry of each dialect is pinned here by its BLAKE2b-128 digest, and
 * a migration not pinned yet fails the test, printing the two lines to add to the tables below;
 * nothing else should change them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "store/store_pg.h"
#include "store/store_sqlite.h"

static const char *const sqlite_digests[] = {
	"65abcf593278a491bda4d891674d0833", /* 1 */
	"8ca1544f9ac83fe9872970cb0e0c3585", /* 2 */
	"4bf7be1416f1537cff0baa20c4c3cf1c", /* 3 */
	"11c4fbb0b89c37bf524295d4099a453e", /* 4 */
	"eee282d61f7850f7f2553972b8560bd2", /* 5 */
	"5848ea456a7df0aa01dba50d8a55a41d", /* 6 */
	"fe29f31b9083f598f49c80ef37814fd5", /* 7 */
	"21ee281d60d4db34f4434b90d720c110", /* 8 */
	"7e3f0ee3fed95327a17ae33596c99bde", /* 9 */
	"57e7f11422e49cff3fbcac534ae27aa3", /* 10 */
	"551b4ad8d9d821f3bc86e8020263c19b", /* 11 */
	"a5c4a00627b97ebe6f862bcd40820164", /* 12 */
	"39a3311985d677ca8c0222f3503f1500", /* 13 */
	"63fac95fcd15013854ff261f272fe9f0", /* 14 */
	"338eac23810c952982f92b9c0b7a67b2", /* 15: SELECT 1; */
	"338eac23810c952982f92b9c0b7a67b2", /* 16: SELECT 1; */
	"338eac23810c952982f92b9c0b7a67b2", /* 17: SELECT 1; */
};

static const char *const pg_digests[] = {
	"d473ad24be12d6baf831469ea4d60f3c", /* 1 */
	"8ca1544f9ac83fe9872970cb0e0c3585", /* 2 */
	"41cc639b6d5dcef5c3b1575df664b483", /* 3 */
	"11c4fbb0b89c37bf524295d4099a453e", /* 4 */
	"eee282d61f7850f7f2553972b8560bd2", /* 5 */
	"8bbc8ac5be2d81329019fb1ff7a9132c", /* 6 */
	"95fe85a1499b0a10ef230308bc31080d", /* 7 */
	"91b38144dd8025de425d3007092b7559", /* 8 */
	"dd6a697cd3a2a4d72842915aca742a73", /* 9 */
	"57e7f11422e49cff3fbcac534ae27aa3", /* 10 */
	"e3a7fe85acadc77dfe9f2f5125bce415", /* 11 */
	"831fd5ca8b21925e83f6fb212a0f6331", /* 12 */
	"39a3311985d677ca8c0222f3503f1500", /* 13 */
	"63fac95fcd15013854ff261f272fe9f0", /* 14 */
	"7b2ad06ab1086bdf6b394fd2cd07fa7a", /* 15 */
	"3ecae461513dcd1aaac1739a2647f4c1", /* 16 */
	"2ac8c0800a95fb3d29157130e49d6b4e", /* 17 */
};

struct hex {
	char s[33];
};

/* The BLAKE2b-128 digest of sql, in hex. */
static struct hex digest_hex(const char *sql)
{
	unsigned char d[16];
	struct hex h;
	crypto_generichash(d, sizeof(d), (const unsigned char *)sql, strlen(sql), NULL, 0);
	sodium_bin2hex(h.s, sizeof(h.s), d, sizeof(d));
	return h;
}

/* Checks entries 0..n-1 of migrations against digests, naming the first that differs. */
static void assert_pinned(const char *dialect, const char *const *migrations, const char *const *digests,
			  size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct hex h = digest_hex(migrations[i]);
		if (strcmp(h.s, digests[i]) != 0)
			fail_msg("%s migration %zu changed (digest %s, shipped %s)", dialect, i + 1, h.s, digests[i]);
	}
}

static void test_shipped_migrations_unchanged(void **state)
{
	(void)state;
	/* A new migration fails here until its digests join the tables (from this test's message). */
	assert_int_equal(EGS_ARRAY_LEN(sqlite_digests), EGS_ARRAY_LEN(pg_digests));
	if (egs_store_schema_version() != (int)EGS_ARRAY_LEN(sqlite_digests)) {
		for (int i = (int)EGS_ARRAY_LEN(sqlite_digests); i < egs_store_schema_version(); i++)
			print_message("migration %d is not pinned: SQLite %s, PostgreSQL %s\n", i + 1,
				      digest_hex(egs__sqlite_migrations[i]).s, digest_hex(egs__pg_migrations[i]).s);
		fail_msg("schema version %d, %zu migrations pinned", egs_store_schema_version(), EGS_ARRAY_LEN(sqlite_digests));
	}
	assert_int_equal(egs__pg_nmigrations, egs_store_schema_version());
	assert_pinned("SQLite", egs__sqlite_migrations, sqlite_digests, EGS_ARRAY_LEN(sqlite_digests));
	assert_pinned("PostgreSQL", egs__pg_migrations, pg_digests, EGS_ARRAY_LEN(pg_digests));
}

/* The dialect pieces landed where they belong: SQLite's texts hold none of PostgreSQL's types. */
static void test_dialects_apart(void **state)
{
	(void)state;
	static const char *const pg_only[] = { "BIGINT", "DOUBLE PRECISION", "BYTEA", "octet_length", "brin" };
	for (int i = 0; i < egs_store_schema_version(); i++)
		for (size_t j = 0; j < EGS_ARRAY_LEN(pg_only); j++)
			if (strstr(egs__sqlite_migrations[i], pg_only[j]))
				fail_msg("SQLite migration %d has %s", i + 1, pg_only[j]);
	for (int i = 0; i < egs__pg_nmigrations; i++)
		if (strstr(egs__pg_migrations[i], " INTEGER") || strstr(egs__pg_migrations[i], " BLOB"))
			fail_msg("PostgreSQL migration %d has a SQLite type", i + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_migrations_unchanged),
		cmocka_unit_test(test_dialects_apart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
