/*
 * test_query.c: the query parser of server/query.h against evhttp_parse_query_str, which it replaces
 * on every request.  Hand-picked strings (empty parts, '=' in values, '+', percent escapes that are
 * complete, cut short or not hex, %00, names left undecoded) and 50,000 generated ones from an
 * alphabet of the bytes that matter must give the same answer: both refuse, or both give the same
 * pairs in the same order.  Queries over the arena's bounds are declined, never cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <event2/http.h>
#include <stdio.h>
#include <string.h>

#include "server/query.h"

#include "rng.h"

/* Both parsers give the same answer on q (n bytes: the pairs' values compared by their C strings). */
static void agrees(const char *q)
{
	struct evkeyvalq ours, theirs;
	struct egs_query_arena a;
	TAILQ_INIT(&theirs);
	enum egs_query_result got = egs_query_parse(q, &ours, &a);
	int want = evhttp_parse_query_str(q, &theirs);
	if (got == EGS_QUERY_TOO_BIG) {
		evhttp_clear_headers(&theirs);
		fail_msg("declined a small query: %s", q);
	}
	if ((got == EGS_QUERY_OK) != (want == 0))
		fail_msg("ours %d, evhttp %d on: %s", (int)got, want, q);
	struct evkeyval *o = ours.tqh_first, *t = theirs.tqh_first;
	for (; o && t; o = o->next.tqe_next, t = t->next.tqe_next)
		if (strcmp(o->key, t->key) != 0 || strcmp(o->value, t->value) != 0)
			fail_msg("pair %s=%s, evhttp %s=%s on: %s", o->key, o->value, t->key, t->value, q);
	if (o || t)
		fail_msg("pair counts differ on: %s", q);
	evhttp_clear_headers(&theirs);
}

static void test_hand_picked(void **state)
{
	(void)state;
	static const char *const cases[] = {
		"", "a=1", "gprId=gpr-0123abcd-4567", "a=1&b=2", "a=1&", "a=1&&b=2", "&a=1", "a", "a&b=1", "=1",
		"a=", "a=&b=", "a==b", "a=b=c", "a=1+2", "a+b=1", "a%20b=1", "a=%41%42", "a=%4", "a=%", "a=%%41",
		"a=%zz", "a=%4g", "a=%00", "a=x%00y", "a=%2B", "a=%26&b=%3D", "a=1&a=2", "A=1&a=2", "a=?b", "a=1;b=2",
		"a=%e2%82%ac", "k=%ff%fe", "a=1&b", "&", "&&", "a=1&&", "limit=10&continue=abc&state=Queued",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		agrees(cases[i]);
}

static void test_generated(void **state)
{
	(void)state;
	static const char alphabet[] = "ab=&%+4Fg0?;x";
	char q[24];
	rng_seed(16);
	for (int i = 0; i < 50000; i++) {
		size_t n = rng_below(sizeof(q));
		for (size_t j = 0; j < n; j++)
			q[j] = alphabet[rng_below(sizeof(alphabet) - 1)];
		q[n] = '\0';
		agrees(q);
	}
}

static void test_bounds(void **state)
{
	(void)state;
	struct evkeyvalq out;
	struct egs_query_arena a;
	char q[4 * EGS_QUERY_ARENA_TEXT];
	/* as many pairs as the arena holds, then one more */
	size_t n = 0;
	for (int i = 0; i < EGS_QUERY_ARENA_PAIRS; i++)
		n += (size_t)snprintf(q + n, sizeof(q) - n, "%sk%d=v", i ? "&" : "", i);
	agrees(q);
	snprintf(q + n, sizeof(q) - n, "&last=v");
	assert_int_equal(egs_query_parse(q, &out, &a), EGS_QUERY_TOO_BIG);
	assert_null(out.tqh_first);
	/* text that fills the arena exactly (with its NUL), then one byte more */
	memset(q, 'x', EGS_QUERY_ARENA_TEXT - 1);
	q[0] = 'k';
	q[1] = '=';
	q[EGS_QUERY_ARENA_TEXT - 1] = '\0';
	assert_int_equal(egs_query_parse(q, &out, &a), EGS_QUERY_OK);
	assert_int_equal(strlen(out.tqh_first->value), EGS_QUERY_ARENA_TEXT - 3);
	q[EGS_QUERY_ARENA_TEXT - 1] = 'x';
	q[EGS_QUERY_ARENA_TEXT] = '\0';
	assert_int_equal(egs_query_parse(q, &out, &a), EGS_QUERY_TOO_BIG);
	assert_null(out.tqh_first);
	/* a malformed query leaves nothing behind, even after good pairs */
	assert_int_equal(egs_query_parse("a=1&b=2&c", &out, &a), EGS_QUERY_MALFORMED);
	assert_null(out.tqh_first);
	assert_int_equal(egs_query_parse(NULL, &out, &a), EGS_QUERY_OK);
	assert_null(out.tqh_first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hand_picked),
		cmocka_unit_test(test_generated),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
