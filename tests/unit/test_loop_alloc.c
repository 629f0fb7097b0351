/*
 * test_loop_alloc.c: the loop thread's blocks through server/loop_alloc.h: freed blocks are kept per
 * size class on the installing thread and handed out again, up to the caps; larger blocks are not
 * kept; blocks cross threads both ways; jansson's trees and libevent's buffers built and freed through
 * it stay whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/loop_alloc.h"

#include <event2/buffer.h>
#include <jansson.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* A string of 100 characters: jansson copies it into a 101-byte block (the 97..120 class), its
 * struct goes to a smaller class. */
#define S100 "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"

static void test_kept_and_reused(void **unused)
{
	(void)unused;
	json_t *s = json_string(S100);
	const char *block = json_string_value(s); /* its 101-byte copy */
	size_t before = egs_loop_alloc_kept(101);
	json_decref(s);
	assert_int_equal(egs_loop_alloc_kept(101), before + 1);
#if defined(__SANITIZE_ADDRESS__)
	/* Kept, the block is poisoned: a use after free of it is still ASan's to report. */
	assert_true(__asan_address_is_poisoned(block + 8)); /* past the list's link */
#else
	(void)block;
#endif
	json_t *t = json_string(S100);
	assert_int_equal(egs_loop_alloc_kept(101), before); /* the kept block was handed out again */
	assert_string_equal(json_string_value(t), S100);
	json_decref(t);

	/* A tree built and dumped through the lists reads back whole. */
	json_t *o = json_object();
	for (int i = 0; i < 300; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(o, k, i % 2 ? json_integer(i) : json_string(k));
	}
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_t *back = json_loads(text, 0, NULL);
	assert_true(json_equal(o, back));
	free(text); /* json_dumps's text is a plain malloc block, as egsd frees it */
	json_decref(o);
	json_decref(back);
}

static void test_large_blocks_not_kept(void **unused)
{
	(void)unused;
	char big[1100]; /* over the largest class */
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	json_t *s = json_string(big);
	json_decref(s);
	assert_int_equal(egs_loop_alloc_kept(sizeof(big)), 0);
}

static void test_cap(void **unused)
{
	(void)unused;
	enum { N = EGS_LOOP_ALLOC_KEEP + 50 };
	static json_t *v[N];
	for (int i = 0; i < N; i++)
		v[i] = json_string("twenty-four bytes......"); /* a 24-byte copy: the 17..32 class */
	for (int i = 0; i < N; i++)
		json_decref(v[i]);
	assert_int_equal(egs_loop_alloc_kept(24), EGS_LOOP_ALLOC_KEEP);
}

/* The largest class keeps EGS_LOOP_ALLOC_CLASS_BYTES of blocks, not EGS_LOOP_ALLOC_KEEP blocks. */
static void test_cap_by_bytes(void **unused)
{
	(void)unused;
	enum { N = EGS_LOOP_ALLOC_CLASS_BYTES / 1032 + 50 };
	static void *v[N];
	for (int i = 0; i < N; i++)
		v[i] = egs_loop_malloc(1024);
	for (int i = 0; i < N; i++)
		egs_loop_free(v[i]);
	assert_int_equal(egs_loop_alloc_kept(1024), EGS_LOOP_ALLOC_CLASS_BYTES / 1032);
	egs_loop_free(NULL); /* nothing */
}

/* libevent's blocks (an evbuffer, its 1 KiB chains) go through the lists too, and the bytes read
 * back whole after chains were kept and handed out again. */
static void test_libevent(void **unused)
{
	(void)unused;
	struct evbuffer *b = evbuffer_new();
	assert_non_null(b);
	char line[100];
	memset(line, 'x', sizeof(line));
	for (int i = 0; i < 100; i++) /* 10,000 bytes: several chains */
		assert_int_equal(evbuffer_add(b, line, sizeof(line)), 0);
	evbuffer_free(b);
	size_t kept = egs_loop_alloc_kept(1024);
	assert_true(kept > 0); /* libevent's 1 KiB chain (1,024 bytes with its header) */
	b = evbuffer_new();
	assert_int_equal(evbuffer_add(b, "hello", 5), 0); /* takes a kept chain */
	assert_int_equal(egs_loop_alloc_kept(1024), kept - 1);
	char out[8] = { 0 };
	assert_int_equal(evbuffer_remove(b, out, sizeof(out)), 5);
	assert_string_equal(out, "hello");
	evbuffer_free(b);
	assert_int_equal(egs_loop_alloc_kept(1024), kept);
}

static void *free_elsewhere(void *arg)
{
	json_decref(arg); /* a block of the installing thread, freed here: to malloc's free */
	assert_int_equal(egs_loop_alloc_kept(101), 0); /* this thread keeps nothing */
	return json_string(S100 "x"); /* made here by malloc: 102 bytes, the same class */
}

static void test_other_threads(void **unused)
{
	(void)unused;
	pthread_t t;
	void *made;
	json_decref(json_string(S100)); /* at least one kept block of the class */
	size_t kept = egs_loop_alloc_kept(101);
	json_t *here = json_string(S100); /* takes it */
	assert_int_equal(egs_loop_alloc_kept(101), kept - 1);
	assert_int_equal(pthread_create(&t, NULL, free_elsewhere, here), 0);
	assert_int_equal(pthread_join(t, &made), 0);
	assert_int_equal(egs_loop_alloc_kept(101), kept - 1); /* not given back to this thread's list */
	assert_string_equal(json_string_value(made), S100 "x");
	json_decref(made); /* freed on the installing thread: kept by its usable size */
	assert_int_equal(egs_loop_alloc_kept(101), kept);
}

int main(void)
{
	egs_loop_alloc_install(); /* before the first jansson call */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kept_and_reused),
		cmocka_unit_test(test_large_blocks_not_kept),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_cap_by_bytes),
		cmocka_unit_test(test_libevent),
		cmocka_unit_test(test_other_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
