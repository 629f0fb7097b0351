/*
 * test_buf.c: the growable byte buffer of core/buf.h.  Random appends (bytes, single bytes,
 * literals, zero-length ones, runs far longer than the first room) against a plain reference
 * array; every reserve leaves room for what was asked and a NUL; egs_buf_cstr ends the contents
 * without counting the NUL, also on a buffer never written; a buffer emptied and filled again no
 * larger keeps its memory; cleanup leaves it empty and usable; egs_buf_put_max appends up to its
 * cap exactly and refuses, appending nothing, past it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "rng.h"

static void test_empty(void **state)
{
	(void)state;
	struct egs_buf b = { 0 };
	assert_string_equal(egs_buf_cstr(&b), "");
	assert_int_equal(b.len, 0);
	assert_true(b.cap > 0);
	egs_buf_put(&b, "", 0); /* nothing appended, still valid */
	assert_int_equal(b.len, 0);
	egs_buf_cleanup(&b);
	assert_null(b.p);
	assert_int_equal(b.cap, 0);
	egs_buf_cleanup(&b); /* again: a no-op */
	EGS_BUF_LIT(&b, "abc");
	egs_buf_putc(&b, 'd');
	assert_int_equal(b.len, 4);
	assert_string_equal(egs_buf_cstr(&b), "abcd");
	assert_int_equal(b.len, 4); /* the NUL is not counted */
	egs_buf_cleanup(&b);
}

static void test_against_reference(void **state)
{
	(void)state;
	enum { MAX = 1 << 20 };
	char *ref = malloc(MAX), *chunk = malloc(70000);
	assert_non_null(ref);
	assert_non_null(chunk);
	struct egs_buf b = { 0 };
	rng_seed(3);
	for (int round = 0; round < 4; round++) {
		size_t n = 0;
		char *kept = b.p;
		size_t kept_cap = b.cap;
		b.len = 0; /* emptied for reuse */
		while (n < MAX - 70000) {
			size_t k;
			switch (rng_below(5)) {
			case 0: k = rng_below(8); break;
			case 1: k = rng_below(300); break;
			case 2: k = rng_below(70000); break;
			case 3: k = 1; break;
			default: k = 0; break;
			}
			for (size_t i = 0; i < k; i++)
				chunk[i] = (char)(rng_next() | 1); /* no NUL inside */
			if (k == 1 && rng_below(2)) {
				egs_buf_putc(&b, chunk[0]);
			} else if (k && rng_below(4) == 0) { /* reserve, then write in place */
				egs_buf_reserve(&b, k);
				assert_true(b.cap - b.len > k);
				memcpy(b.p + b.len, chunk, k);
				b.len += k;
			} else {
				egs_buf_put(&b, chunk, k);
			}
			memcpy(ref + n, chunk, k);
			n += k;
			assert_int_equal(b.len, n);
			assert_true(b.cap > b.len);
			if (rng_below(50) == 0) {
				assert_int_equal(strlen(egs_buf_cstr(&b)), n);
				assert_memory_equal(b.p, ref, n);
			}
		}
		assert_memory_equal(b.p, ref, n);
		if (round > 0 && n <= kept_cap - 1) { /* no larger than before: the same memory */
			assert_ptr_equal(b.p, kept);
			assert_int_equal(b.cap, kept_cap);
		}
	}
	egs_buf_cleanup(&b);
	free(ref);
	free(chunk);
}

static void test_put_max(void **state)
{
	(void)state;
	struct egs_buf b = { 0 };
	assert_true(egs_buf_put_max(&b, "", 0, 0)); /* nothing, at a cap of nothing */
	assert_false(egs_buf_put_max(&b, "x", 1, 0));
	assert_int_equal(b.len, 0);
	assert_true(egs_buf_put_max(&b, "0123456789", 10, 16));
	assert_false(egs_buf_put_max(&b, "abcdefg", 7, 16)); /* 17 > 16: refused whole */
	assert_int_equal(b.len, 10);
	assert_true(egs_buf_put_max(&b, "abcdef", 6, 16)); /* exactly the cap */
	assert_false(egs_buf_put_max(&b, "z", 1, 16));
	assert_int_equal(b.len, 16);
	assert_string_equal(egs_buf_cstr(&b), "0123456789abcdef");
	volatile size_t huge = SIZE_MAX; /* (volatile: the compiler sees no memcpy of it then) */
	assert_false(egs_buf_put_max(&b, "z", huge, 16)); /* a length no cap allows: no overflow */
	assert_int_equal(b.len, 16);
	egs_buf_cleanup(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_against_reference),
		cmocka_unit_test(test_put_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
