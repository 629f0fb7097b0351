/*
 * test_util.c: the pure helpers of core/util.h: the duration syntax (accepted forms, every way to
 * get it wrong, the one-year bound), duration and RFC 3339 time formatting, time parsing (round
 * trip, UTC only, strictness), the two name validators at their documented edges, and the memory
 * unit rule of the Contracts (below 1024 is GB, from 1024 up is MiB), UTF-8 sanitising (core/common.h),
 * the decimal writers (egs_u64_digits, egs_i64_digits) against snprintf at the edges and on random
 * values, and FNV-1a against the published test vectors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "rng.h"

/* ---- durations ---- */

static void assert_duration_ok(const char *s, int64_t want)
{
	int64_t got = -42;
	const char *why = NULL;
	bool ok = egs_duration_parse(s, &got, &why);
	if (!ok)
		fprintf(stderr, "duration \"%s\" rejected: %s\n", s, why ? why : "(no reason)");
	assert_true(ok);
	assert_int_equal(got, want);
}

static void assert_duration_bad(const char *s)
{
	int64_t got = -42;
	const char *why = NULL;
	bool ok = egs_duration_parse(s, &got, &why);
	if (ok)
		fprintf(stderr, "duration \"%s\" accepted as %lld\n", s, (long long)got);
	assert_false(ok);
	/* A rejected value leaves the output alone and always says why, for the 422 message. */
	assert_int_equal(got, -42);
	assert_non_null(why);
	assert_true(strlen(why) > 0);
}

static void test_duration_parse_accepts(void **state)
{
	(void)state;
	assert_duration_ok("0d6h0m", 21600);
	assert_duration_ok("6h", 21600);
	assert_duration_ok("90m", 5400);
	assert_duration_ok("1h15m0s", 4500);
	assert_duration_ok("45s", 45);
	assert_duration_ok("1d", 86400);
	assert_duration_ok("1d1h1m1s", 86400 + 3600 + 60 + 1);
	assert_duration_ok("2d0s", 2 * 86400);
	assert_duration_ok("1h30s", 3630);
	assert_duration_ok("0h0m1s", 1);
	assert_duration_ok("007m", 420);
	assert_duration_ok("150h0m0s", 540000);
	/* The bound is inclusive: exactly 366 days is accepted, in any unit. */
	assert_duration_ok("366d", EGS_MAX_DURATION_S);
	assert_duration_ok("8784h", EGS_MAX_DURATION_S);
	assert_duration_ok("527040m", EGS_MAX_DURATION_S);
	assert_duration_ok("31622400s", EGS_MAX_DURATION_S);
}

static void test_duration_parse_rejects(void **state)
{
	(void)state;
	assert_duration_bad("");
	assert_duration_bad("0d0h0m"); /* zero */
	assert_duration_bad("0s");
	assert_duration_bad("0d");
	assert_duration_bad("6");  /* no unit */
	assert_duration_bad("6h5"); /* trailing number without unit */
	assert_duration_bad("h");  /* no number */
	assert_duration_bad("6x"); /* unknown unit */
	assert_duration_bad("6H"); /* units are lowercase */
	assert_duration_bad("1m2h"); /* order */
	assert_duration_bad("1s1d");
	assert_duration_bad("1h1h"); /* repeat */
	assert_duration_bad("1h2m3m");
	assert_duration_bad("1dh");  /* unit without a number */
	assert_duration_bad("-1h");
	assert_duration_bad("+1h");
	assert_duration_bad("1.5h");
	assert_duration_bad("99999999999h"); /* too big for any sane parser */
	assert_duration_bad("1000000000s"); /* ten digits */
	assert_duration_bad("999999999d");
	assert_duration_bad("366d1s"); /* one second past the bound */
	assert_duration_bad("8785h");
	assert_duration_bad("1h "); /* trailing space */
	assert_duration_bad(" 1h"); /* leading space */
	assert_duration_bad("1 h");
	assert_duration_bad("1h\n");
	assert_duration_bad("\xef\xbc\x96h"); /* fullwidth digit six (U+FF16) */
	assert_duration_bad("6\xe6\x97\xb6"); /* 6 and the CJK hour sign */
	assert_duration_bad("1h\xc2\xa0");  /* trailing no-break space */
}

static void test_duration_parse_null(void **state)
{
	(void)state;
	int64_t got = -42;
	const char *why = NULL;
	assert_false(egs_duration_parse(NULL, &got, &why));
	assert_non_null(why);
	assert_int_equal(got, -42);
}

static void assert_duration_fmt(int64_t secs, const char *want)
{
	char buf[64];
	memset(buf, 'X', sizeof(buf));
	egs_duration_format(secs, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

static void test_duration_format(void **state)
{
	(void)state;
	assert_duration_fmt(0, "0h0m0s");
	assert_duration_fmt(160, "0h2m40s");
	assert_duration_fmt(4500, "1h15m0s");
	assert_duration_fmt(540000, "150h0m0s");
	assert_duration_fmt(59, "0h0m59s");
	assert_duration_fmt(3599, "0h59m59s");
	assert_duration_fmt(3600, "1h0m0s");
	assert_duration_fmt(86400 + 61, "24h1m1s");
	assert_duration_fmt(-1, "0h0m0s");
	assert_duration_fmt(-100000, "0h0m0s");

	/* A short buffer is cut but always terminated. */
	char small[5];
	memset(small, 'X', sizeof(small));
	egs_duration_format(4500, small, sizeof(small));
	assert_string_equal(small, "1h15");
}

static void test_duration_round_trip(void **state)
{
	(void)state;
	/* What we print is what we accept: every formatted positive duration parses back to itself. */
	srand(7);
	for (int i = 0; i < 20000; i++) {
		int64_t secs = 1 + (int64_t)((((uint64_t)rand() << 16) ^ (uint64_t)rand()) % (uint64_t)EGS_MAX_DURATION_S);
		if (i < 100)
			secs = i + 1;
		char buf[64];
		egs_duration_format(secs, buf, sizeof(buf));
		int64_t back = 0;
		const char *why = NULL;
		assert_true(egs_duration_parse(buf, &back, &why));
		assert_int_equal(back, secs);
	}
}

/* ---- times ---- */

static void test_time_format(void **state)
{
	(void)state;
	char buf[32];
	egs_time_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00Z");
	egs_time_format(1795428000, buf, sizeof(buf));
	assert_string_equal(buf, "2026-11-23T10:00:00Z");
	egs_time_format(951782400, buf, sizeof(buf)); /* a leap day */
	assert_string_equal(buf, "2000-02-29T00:00:00Z");
	egs_time_format(4102444799LL, buf, sizeof(buf));
	assert_string_equal(buf, "2099-12-31T23:59:59Z");
	/* 21 bytes is enough, as documented. */
	char exact[21];
	egs_time_format(1795428000, exact, sizeof(exact));
	assert_string_equal(exact, "2026-11-23T10:00:00Z");
}

static void test_time_parse(void **state)
{
	(void)state;
	int64_t t = -1;
	assert_true(egs_time_parse("2026-11-23T10:00:00Z", &t));
	assert_int_equal(t, 1795428000);
	t = -1;
	assert_true(egs_time_parse("2026-11-23T10:00:00+00:00", &t));
	assert_int_equal(t, 1795428000);
	t = -1;
	assert_true(egs_time_parse("2026-11-23T10:00:00.123456Z", &t));
	assert_int_equal(t, 1795428000); /* fractions are dropped, not rounded */
	t = -1;
	assert_true(egs_time_parse("2026-11-23T10:00:00.9+00:00", &t));
	assert_int_equal(t, 1795428000);
	t = -1;
	assert_true(egs_time_parse("1970-01-01T00:00:00Z", &t));
	assert_int_equal(t, 0);
	t = -1;
	assert_true(egs_time_parse("2000-02-29T00:00:00Z", &t));
	assert_int_equal(t, 951782400);
}

static void test_time_parse_rejects(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"2026-11-23T10:00:00", /* no zone: local time is not UTC */
		"2026-11-23T10:00:00+01:00",
		"2026-11-23T10:00:00-05:00",
		"2026-11-23T10:00:00-00:00", /* RFC 3339's "unknown offset", not UTC */
		"2026-11-23T10:00:00+0000",
		"2026-11-23T10:00:00z0",
		"2026-11-23T10:00:00ZZ",
		"2026-11-23T10:00:00Z ",
		"2026-11-23T10:00:00 Z",
		"2026-11-23 10:00:00Z",
		"2026-11-23",
		"2026-13-01T00:00:00Z",
		"2026-11-32T00:00:00Z",
		"2026-11-23T25:00:00Z",
		"2026-11-23T10:61:00Z",
		"yesterday",
		"1795428000",
	};
	for (size_t i = 0; i < EGS_ARRAY_LEN(bad); i++) {
		int64_t t = -7;
		bool ok = egs_time_parse(bad[i], &t);
		if (ok)
			fprintf(stderr, "time \"%s\" accepted as %lld\n", bad[i], (long long)t);
		assert_false(ok);
		assert_int_equal(t, -7);
	}
}

/*
 * RFC 3339 is a fixed-width format: what does not name a real instant in exactly that shape is
 * malformed.  The parser must not quietly turn February 30 into March 2 (an API key would then
 * expire on a day nobody typed) nor accept shapes no RFC 3339 writer produces.
 */
static void test_time_parse_strict(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"2026-02-30T00:00:00Z",  /* no such day: glibc's strptime takes any 1..31 */
		"2025-02-29T00:00:00Z",  /* not a leap year */
		"2026-04-31T12:00:00Z",
		" 2026-11-23T10:00:00Z", /* leading space */
		"2026-1-2T3:4:5Z",       /* fields are two digits */
		"2026-11-23T10:00:00.Z", /* a fraction has at least one digit */
	};
	int accepted = 0; /* count first, so a failure lists every case that slips through */
	for (size_t i = 0; i < EGS_ARRAY_LEN(bad); i++) {
		int64_t t = -7;
		if (egs_time_parse(bad[i], &t)) {
			char back[32];
			egs_time_format(t, back, sizeof(back));
			fprintf(stderr, "time \"%s\" accepted as %s\n", bad[i], back);
			accepted++;
		}
	}
	assert_int_equal(accepted, 0);
}

static void test_time_round_trip(void **state)
{
	(void)state;
	srand(11);
	for (int i = 0; i < 20000; i++) {
		/* 1970 .. 2099 */
		int64_t t = (int64_t)((((uint64_t)rand() << 16) ^ (uint64_t)rand()) % 4102444800ULL);
		char buf[32];
		egs_time_format(t, buf, sizeof(buf));
		assert_int_equal(strlen(buf), 20);
		int64_t back = -1;
		assert_true(egs_time_parse(buf, &back));
		assert_int_equal(back, t);
	}
}

/* ---- names ---- */

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void assert_dns(const char *s, bool want)
{
	const char *why = NULL;
	bool ok = egs_dns_label_valid(s, &why);
	if (ok != want)
		fprintf(stderr, "dns label \"%s\": got %d want %d\n", s ? s : "(null)", ok, want);
	assert_int_equal(ok, want);
	if (!ok) {
		assert_non_null(why);
		assert_true(strlen(why) > 0);
	}
}

static void assert_label(const char *s, bool want)
{
	const char *why = NULL;
	bool ok = egs_label_valid(s, &why);
	if (ok != want)
		fprintf(stderr, "label \"%s\": got %d want %d\n", s ? s : "(null)", ok, want);
	assert_int_equal(ok, want);
	if (!ok) {
		assert_non_null(why);
		assert_true(strlen(why) > 0);
	}
}

static void test_dns_subdomain(void **state)
{
	(void)state;
	char *s253 = repeat('a', 253), *s254 = repeat('a', 254);
	assert_true(egs_dns_subdomain_valid("a"));
	assert_true(egs_dns_subdomain_valid("llama-3.1-8b"));
	assert_true(egs_dns_subdomain_valid("0.a-b.9"));
	assert_true(egs_dns_subdomain_valid(s253));
	assert_false(egs_dns_subdomain_valid(s254));
	assert_false(egs_dns_subdomain_valid(""));
	assert_false(egs_dns_subdomain_valid(NULL));
	assert_false(egs_dns_subdomain_valid("-a"));
	assert_false(egs_dns_subdomain_valid("a."));
	assert_false(egs_dns_subdomain_valid(".a"));
	assert_false(egs_dns_subdomain_valid("Model"));
	assert_false(egs_dns_subdomain_valid("a_b"));
	assert_false(egs_dns_subdomain_valid("a b"));
	free(s253);
	free(s254);
}

static void test_dns_label(void **state)
{
	(void)state;
	char *s63 = repeat('a', 63), *s64 = repeat('a', 64);
	assert_dns("a", true);
	assert_dns("0", true);
	assert_dns("worker-1", true);
	assert_dns("1st-cluster", true); /* DNS-1123 labels may start with a digit */
	assert_dns("a--b", true);
	assert_dns(s63, true);
	assert_dns(s64, false);
	assert_dns("", false);
	assert_dns(NULL, false);
	assert_dns("Worker-1", false); /* uppercase */
	assert_dns("WORKER", false);
	assert_dns("-worker", false);
	assert_dns("worker-", false);
	assert_dns("-", false);
	assert_dns("a.b", false);
	assert_dns("a..b", false);
	assert_dns("a_b", false);
	assert_dns("a/b", false);
	assert_dns("a b", false);
	assert_dns(" a", false);
	assert_dns("a\tb", false);
	assert_dns("a\x01", false);
	assert_dns("a\x7f", false);
	assert_dns("caf\xc3\xa9", false); /* UTF-8 e-acute */
	assert_dns("\xff", false);
	s63[62] = '-';
	assert_dns(s63, false);
	s63[62] = '9';
	assert_dns(s63, true);
	free(s63);
	free(s64);
}

static void test_label(void **state)
{
	(void)state;
	char *s63 = repeat('Z', 63), *s64 = repeat('Z', 64);
	assert_label("a", true);
	assert_label("A", true);
	assert_label("7", true);
	assert_label("NVIDIA-H100-80GB-HBM3", true);
	assert_label("p5.48xlarge", true);
	assert_label("my_gpr.v2-final", true);
	assert_label("a..b", true); /* the contract restricts the set and the first byte only */
	assert_label("a-", true);
	assert_label("a.", true);
	assert_label(s63, true);
	assert_label(s64, false);
	assert_label("", false);
	assert_label(NULL, false);
	assert_label("-a", false);
	assert_label(".a", false);
	assert_label("_a", false);
	assert_label("..", false);
	assert_label("a/b", false);
	assert_label("a b", false);
	assert_label("a:b", false);
	assert_label("a\nb", false);
	assert_label("a\x1b", false);
	assert_label("a\x7f", false);
	assert_label("gpu\xc3\xa9", false);
	assert_label("\xc3\xa9", false);
	assert_label("a\xe2\x80\x8b", false); /* zero-width space */
	free(s63);
	free(s64);
}

/* ---- memory units ---- */

static void test_memory_to_mib(void **state)
{
	(void)state;
	assert_int_equal(egs_memory_to_mib(15), 15360);  /* 16 GB T4 example: GB */
	assert_int_equal(egs_memory_to_mib(81920), 81920); /* 80 GB H100 example: MiB */
	assert_int_equal(egs_memory_to_mib(80), 81920);  /* the same H100 in GB */
	assert_int_equal(egs_memory_to_mib(1023), 1047552);
	assert_int_equal(egs_memory_to_mib(1024), 1024);
	assert_int_equal(egs_memory_to_mib(1), 1024);
	assert_int_equal(egs_memory_to_mib(0), 0);
	assert_int_equal(egs_memory_to_mib(-1), -1);
	assert_int_equal(egs_memory_to_mib(INT64_MIN), -1);
	assert_int_equal(egs_memory_to_mib((int64_t)1 << 40), (int64_t)1 << 40);
	assert_int_equal(egs_memory_to_mib(((int64_t)1 << 40) + 1), -1);
	assert_int_equal(egs_memory_to_mib(INT64_MAX), -1);
}

/* ---- UTF-8 ---- */

static void assert_sanitized(const char *in, const char *want)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", in);
	egs_utf8_sanitize(buf);
	assert_string_equal(buf, want);
}

/* ASCII (controls included) and well-formed sequences pass unchanged; each byte that starts no
 * well-formed sequence becomes '?' (stray continuations, overlong forms, surrogates, over U+10FFFF,
 * a sequence cut short), wherever it stands among ASCII. */
static void test_utf8_sanitize(void **unused)
{
	(void)unused;
	assert_sanitized("", "");
	assert_sanitized("GPR deep created and queued at priority 17\t\x01", "GPR deep created and queued at priority 17\t\x01");
	assert_sanitized("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	assert_sanitized("a\x80" "b", "a?b");
	assert_sanitized("\xc0\xafx", "??x");         /* overlong '/' */
	assert_sanitized("x\xed\xa0\x80", "x???");      /* a surrogate */
	assert_sanitized("\xf4\x90\x80\x80y", "????y"); /* over U+10FFFF */
	assert_sanitized("ab\xe2\x82", "ab??");          /* cut short */
	assert_sanitized("\xff", "?");
}

/* ---- decimal writers ---- */

static void check_digits(int64_t v, uint64_t u)
{
	char want[32], buf[32], *end = buf + sizeof(buf);
	char *start = egs_u64_digits(end, u);
	snprintf(want, sizeof(want), "%llu", (unsigned long long)u);
	assert_int_equal((size_t)(end - start), strlen(want));
	assert_memory_equal(start, want, strlen(want));
	memset(buf, 'x', sizeof(buf));
	end = egs_i64_digits(buf + 1, v);
	snprintf(want, sizeof(want), "%lld", (long long)v);
	assert_int_equal((size_t)(end - (buf + 1)), strlen(want));
	assert_memory_equal(buf + 1, want, strlen(want));
	assert_int_equal(buf[0], 'x'); /* nothing written before p... */
	assert_int_equal(*end, 'x');   /* ...or after the end */
}

static void test_digits(void **state)
{
	(void)state;
	static const int64_t edges[] = { 0, 1, -1, 9, 10, -10, 99, 100, 1000000, INT64_MAX, INT64_MIN, INT64_MIN + 1 };
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		check_digits(edges[i], (uint64_t)edges[i]);
	check_digits(0, UINT64_MAX);
	rng_seed(11);
	for (int i = 0; i < 100000; i++) {
		uint64_t r = rng_next() >> rng_below(64);
		check_digits((int64_t)r, r);
	}
}

/* ---- FNV-1a ---- */

static void test_fnv1a(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t h;
	} v[] = { { "", 0xcbf29ce484222325ull }, { "a", 0xaf63dc4c8601ec8cull }, { "foobar", 0x85944171f73967e8ull } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		assert_true(egs_fnv1a_str(EGS_FNV_OFFSET, v[i].s) == v[i].h);
		assert_true(egs_fnv1a(EGS_FNV_OFFSET, v[i].s, strlen(v[i].s)) == v[i].h);
	}
	/* continuing from h is hashing the concatenation */
	assert_true(egs_fnv1a_str(egs_fnv1a_str(EGS_FNV_OFFSET, "foo"), "bar") == 0x85944171f73967e8ull);
	assert_true(egs_fnv1a(EGS_FNV_OFFSET, "a\0", 2) != egs_fnv1a_str(EGS_FNV_OFFSET, "a")); /* the NUL counts */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duration_parse_accepts),
		cmocka_unit_test(test_duration_parse_rejects),
		cmocka_unit_test(test_duration_parse_null),
		cmocka_unit_test(test_duration_format),
		cmocka_unit_test(test_duration_round_trip),
		cmocka_unit_test(test_time_format),
		cmocka_unit_test(test_time_parse),
		cmocka_unit_test(test_time_parse_rejects),
		cmocka_unit_test(test_time_parse_strict),
		cmocka_unit_test(test_time_round_trip),
		cmocka_unit_test(test_dns_label),
		cmocka_unit_test(test_dns_subdomain),
		cmocka_unit_test(test_label),
		cmocka_unit_test(test_memory_to_mib),
		cmocka_unit_test(test_utf8_sanitize),
		cmocka_unit_test(test_digits),
		cmocka_unit_test(test_fnv1a),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
