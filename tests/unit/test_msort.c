/*
 * test_msort.c: the merge sort in pieces of core/msort.h against a reference (an insertion sort,
 * stable by construction).  Arrays of 0 to 3,000 elements of two sizes (a pointer, as the
 * planner's name sort; a 40-byte record, as the queue's lists of changes) with few distinct keys
 * (ties must keep their order), sorted in pieces of 1 to 70 element moves: no piece may make more
 * moves than its budget, at every stop the array must hold every element once (a caller that
 * drops the sort takes them back), and the end must be exactly the reference.  One egs_msort
 * sorts them all in turn, so its second buffer is reused by larger and smaller sorts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/msort.h"
#include "rng.h"

/* A record as large as a queue entry: a key and the index it had before the sort. */
struct rec {
	uint32_t key;
	uint32_t pad[7];
	uint64_t idx;
};

static bool rec_before(const void *a, const void *b)
{
	return ((const struct rec *)a)->key < ((const struct rec *)b)->key;
}

static bool ptr_before(const void *a, const void *b)
{
	return **(const uint32_t *const *)a < **(const uint32_t *const *)b;
}

/* Element i of v (size bytes each) as its record's original index, whichever the kind. */
static uint64_t idx_of(const void *v, size_t size, size_t i, const struct rec *recs)
{
	if (size == sizeof(struct rec))
		return ((const struct rec *)v)[i].idx;
	return (uint64_t)((const struct rec *)(((const uint32_t *const *)v)[i]) - recs);
}

/* Checks that v (n elements) holds each of the n records exactly once. */
static void check_all_there(const void *v, size_t size, size_t n, const struct rec *recs)
{
	unsigned char *seen = calloc(n + 1, 1);
	assert_non_null(seen);
	for (size_t i = 0; i < n; i++) {
		uint64_t k = idx_of(v, size, i, recs);
		assert_true(k < n);
		assert_int_equal(seen[k], 0);
		seen[k] = 1;
	}
	free(seen);
}

/* Sorts n records (as records, or as pointers to them) in pieces and checks every stop and the end. */
static void sort_one(struct egs_msort *s, const struct rec *recs, size_t n, bool as_ptr, size_t piece)
{
	size_t size = as_ptr ? sizeof(void *) : sizeof(struct rec), cap = n + 1;
	char *v = malloc(cap * size);
	assert_non_null(v);
	for (size_t i = 0; i < n; i++) {
		if (as_ptr)
			((const struct rec **)v)[i] = &recs[i];
		else
			((struct rec *)v)[i] = recs[i];
	}
	/* The reference: record indexes in key order, ties in index order. */
	uint64_t *ref = malloc((n + 1) * sizeof(*ref));
	assert_non_null(ref);
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j > 0 && recs[ref[j - 1]].key > recs[i].key) {
			ref[j] = ref[j - 1];
			j--;
		}
		ref[j] = i;
	}
	egs_msort_start(s, n, size);
	for (size_t pieces = 0;; pieces++) {
		size_t budget = piece;
		bool done = as_ptr ? egs_msort_piece(s, &v, &cap, sizeof(void *), ptr_before, &budget)
				   : egs_msort_piece(s, &v, &cap, sizeof(struct rec), rec_before, &budget);
		assert_true(budget <= piece);
		assert_true(cap >= n);
		if (n <= 300 || done || pieces % 97 == 0)
			check_all_there(v, size, n, recs);
		if (done)
			break;
		assert_int_equal(budget, 0); /* a piece stops early only when the sort is done */
		assert_true(pieces < 64 * (n + 1) * (n + 1));
	}
	for (size_t i = 0; i < n; i++)
		assert_int_equal(idx_of(v, size, i, recs), ref[i]);
	free(ref);
	free(v);
}

static void test_against_reference(void **state)
{
	(void)state;
	static const size_t sizes[] = { 0, 1, 2, 3, 5, 8, 17, 64, 100, 257, 1000, 3000, 31, 2 };
	struct egs_msort s = { 0 };
	rng_seed(7);
	for (size_t t = 0; t < EGS_ARRAY_LEN(sizes); t++) {
		size_t n = sizes[t];
		struct rec *recs = calloc(n + 1, sizeof(*recs));
		assert_non_null(recs);
		uint32_t keys = 1 + (uint32_t)rng_below(t % 3 ? 10 : 1000); /* ties, many or few */
		for (size_t i = 0; i < n; i++)
			recs[i] = (struct rec){ .key = (uint32_t)rng_below(keys), .idx = i };
		size_t piece = 1 + rng_below(70);
		sort_one(&s, recs, n, t % 2 == 0, piece);
		sort_one(&s, recs, n, t % 2 == 1, n > 500 ? 16384 : piece);
		free(recs);
	}
	egs_msort_cleanup(&s);
	egs_msort_cleanup(&s); /* cleaned storage is idle: again is harmless */
}

/* A sort in one piece of SIZE_MAX moves is a plain stable sort, sorted already or reversed. */
static void test_one_piece(void **state)
{
	(void)state;
	struct egs_msort s = { 0 };
	size_t n = 4096;
	struct rec *recs = calloc(n, sizeof(*recs));
	assert_non_null(recs);
	for (int order = 0; order < 2; order++) {
		for (size_t i = 0; i < n; i++)
			recs[i] = (struct rec){ .key = (uint32_t)(order ? n - i : i) / 4, .idx = i };
		sort_one(&s, recs, n, order == 1, SIZE_MAX);
	}
	free(recs);
	egs_msort_cleanup(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_reference),
		cmocka_unit_test(test_one_piece),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
