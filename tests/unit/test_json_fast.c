/*
 * test_json_fast.c: the fast body parser of server/json_fast.h.  Plain bodies (a GPR create, nested
 * objects and lists, every literal, integers at the subset's edges) give the very tree jansson gives,
 * keys in the same order; everything outside the subset or invalid (escapes, UTF-8, control bytes,
 * reals, leading zeros, 19-digit integers, duplicate keys, trailing bytes or commas, unterminated
 * strings, words that only begin like literals, nesting past the limit, non-objects) is declined, so
 * jansson words the error.  A generated run of 20,000 mutated bodies checks the promise on each:
 * whenever the fast parser answers, jansson accepts the same bytes with an equal tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_fast.h"

#include "rng.h"

/* The fast parser accepts s, and its tree is jansson's. */
static void accepts(const char *s)
{
	json_t *f = egs_json_fast_object(s, strlen(s));
	json_t *j = json_loadb(s, strlen(s), JSON_REJECT_DUPLICATES, NULL);
	if (!f || !j || !json_equal(f, j) || !egs_json_same_order(f, j))
		fail_msg("fast parser disagrees with jansson on: %s", s);
	json_decref(f);
	json_decref(j);
}

static void declines(const char *s, size_t n)
{
	json_t *f = egs_json_fast_object(s, n);
	if (f)
		fail_msg("fast parser took what it must leave to jansson: %.*s", (int)n, s);
}
#define DECLINES(lit) declines(lit, sizeof(lit) - 1)

static void test_plain_bodies(void **state)
{
	(void)state;
	accepts("{\"gprName\":\"bench\",\"sliceName\":\"bench\",\"clusterName\":\"bench-1\",\"numberOfGPUs\":1,"
		"\"numberOfGPUNodes\":1,\"exitDuration\":\"1h\",\"priority\":101}");
	accepts("{}");
	accepts(" \t\r\n{ } \n");
	accepts("{\"a\":{\"b\":[1,-2,0,\"x\",true,false,null,[],{}]},\"c\":[]}");
	accepts("{\"\":\"\",\"k\":\" ~!#$%&'()*+,-./:;<=>?@[]^_`{|}\"}");
	accepts("{\"big\":999999999999999999,\"small\":-999999999999999999}");
	accepts("{ \"a\" : [ 1 , 2 ] , \"b\" : { \"c\" : null } }");
	accepts("{\"z\":1,\"a\":2,\"m\":3}"); /* insertion order kept, not sorted */
	/* 32 levels of nesting: the deepest the fast path takes */
	char deep[256] = "{\"a\":";
	size_t n = strlen(deep);
	for (int i = 0; i < 31; i++)
		deep[n++] = '[';
	for (int i = 0; i < 31; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	accepts(deep);
}

static void test_declines_outside_subset(void **state)
{
	(void)state;
	DECLINES("{\"a\":\"line\\nbreak\"}");       /* escapes */
	DECLINES("{\"a\\u0000\":1}");              /* a NUL in a key: jansson's own error */
	DECLINES("{\"caf\xc3\xa9\":1}");           /* UTF-8 */
	DECLINES("{\"a\":\"\xff\"}");              /* not UTF-8 */
	DECLINES("{\"a\":\"tab\there\"}");         /* a control byte */
	DECLINES("{\"a\":\"del\x7f\"}");           /* DEL: valid, but left to jansson */
	DECLINES("{\"a\":1.5}");
	DECLINES("{\"a\":1e3}");
	DECLINES("{\"a\":1E3}");
	DECLINES("{\"a\":01}");
	DECLINES("{\"a\":-0}");
	DECLINES("{\"a\":-}");
	DECLINES("{\"a\":1234567890123456789}");  /* 19 digits */
	DECLINES("{\"a\":99999999999999999999999999}");
	DECLINES("{\"a\":1,\"a\":2}");             /* duplicate key */
	DECLINES("{\"a\":{\"b\":1,\"b\":1}}");
	DECLINES("{\"a\":1,}");
	DECLINES("{\"a\":[1,]}");
	DECLINES("{,}");
	DECLINES("{\"a\" 1}");
	DECLINES("{\"a\":1 \"b\":2}");
	DECLINES("{\"a\":1}x");
	DECLINES("{\"a\":1}{}");
	DECLINES("{\"a\":1");
	DECLINES("{\"a\":\"open");
	DECLINES("{\"a");
	DECLINES("{");
	DECLINES("");
	DECLINES("   ");
	DECLINES("{\"a\":truex}");
	DECLINES("{\"a\":tru}");
	DECLINES("{\"a\":nul}");
	DECLINES("{\"a\":True}");
	DECLINES("{\"a\":12true}");
	DECLINES("{\"a\":NaN}");
	DECLINES("{\"a\":'x'}");
	DECLINES("{a:1}");
	DECLINES("[1,2]");                        /* not an object: the caller's own answer */
	DECLINES("\"x\"");
	DECLINES("null");
	DECLINES("{\"a\":1}\0");                  /* a NUL after the object */
	DECLINES("{\"a\":\"x\0y\"}");              /* a NUL inside a string */
	/* 33 levels */
	char deep[256] = "{\"a\":";
	size_t n = strlen(deep);
	for (int i = 0; i < 32; i++)
		deep[n++] = '[';
	for (int i = 0; i < 32; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	declines(deep, n);
	/* a key longer than the stack copy */
	char key[400];
	memset(key, 'k', sizeof(key));
	memcpy(key, "{\"", 2);
	memcpy(key + sizeof(key) - 5, "\":1}", 4);
	declines(key, sizeof(key) - 1);
}

/* Never reads past len: a body cut anywhere is declined (or, cut after its '}', accepted), and the
 * byte after the cut is never looked at (the copy ends at a heap boundary for ASan). */
static void test_bounded_by_len(void **state)
{
	(void)state;
	const char *body = "{\"a\":[1,{\"b\":\"c\"},true],\"d\":-12,\"e\":null}";
	size_t len = strlen(body);
	for (size_t cut = 0; cut <= len; cut++) {
		char *copy = malloc(cut ? cut : 1);
		memcpy(copy, body, cut);
		json_t *f = egs_json_fast_object(copy, cut);
		assert_true(cut == len ? f != NULL : f == NULL);
		json_decref(f);
		free(copy);
	}
}

/* Mutated bodies: when the fast parser answers, jansson must accept the same bytes, equal. */
static void test_mutations_agree_with_jansson(void **state)
{
	(void)state;
	static const char seed[] = "{\"gprName\":\"bench\",\"n\":[1,-20,0,{\"x\":true}],\"o\":{\"p\":null,\"q\":false},"
				   "\"priority\":101}";
	static const char alphabet[] = "{}[]\":,-0123456789.eEtrufalsn \t\\\x7f\x01\xc3";
	int accepted = 0;
	for (int round = 0; round < 20000; round++) {
		char buf[sizeof(seed) + 8];
		size_t n = sizeof(seed) - 1;
		memcpy(buf, seed, n);
		for (int m = 0, muts = 1 + (int)(rng_next() % 3); m < muts; m++) {
			size_t at = rng_next() % n;
			char c = alphabet[rng_next() % (sizeof(alphabet) - 1)];
			switch (rng_next() % 3) {
			case 0:
				buf[at] = c;
				break;
			case 1: /* delete */
				memmove(buf + at, buf + at + 1, n - at - 1);
				n--;
				break;
			default: /* insert, while there is room */
				if (n < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, n - at);
					buf[at] = c;
					n++;
				}
			}
		}
		json_t *f = egs_json_fast_object(buf, n);
		if (!f)
			continue;
		accepted++;
		json_t *j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, NULL);
		if (!j || !json_equal(f, j) || !egs_json_same_order(f, j))
			fail_msg("fast parser disagrees with jansson on: %.*s", (int)n, buf);
		json_decref(f);
		json_decref(j);
	}
	assert_true(accepted > 100); /* the mutations did leave valid bodies to compare */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_bodies),
		cmocka_unit_test(test_declines_outside_subset),
		cmocka_unit_test(test_bounded_by_len),
		cmocka_unit_test(test_mutations_agree_with_jansson),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
