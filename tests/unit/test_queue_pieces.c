/*
 * test_queue_pieces.c: the queue's order taken in pieces (egs_queue_order_begin/sort/step,
 * core/queue.h) against a fresh sort. Random pushes, removals and priority changes run between the
 * pieces of an order in progress, the sort of the changes it took in pieces of 1 to 16 element
 * moves (or left to its first step), then pieces of 1 to 40 entries: every order, once complete, must be exactly
 * the queue as it stood at its beginning (the GPRs and their keys then, sorted afresh), and every
 * egs_queue_sorted (a merge of the kept order with all the changes since) the queue as it stands.
 * An order dropped by another beginning or by egs_queue_sorted must say so (its next step returns
 * SIZE_MAX) and lose none of the changes it had taken. Many seeds, few priorities (ties decide by
 * the fair key and seq), and a pool small enough that GPRs leave and come back often.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/queue.h"
#include "rng.h"

/*
 * The queue order written out here, so the test does not trust the code it checks.
 */
static bool key_before(const struct egs_queue_slot *a, const struct egs_queue_slot *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	if (a->fair != b->fair)
		return a->fair < b->fair;
	return a->seq < b->seq;
}

static int key_cmp(const void *x, const void *y)
{
	const struct egs_queue_slot *a = x, *b = y;
	return key_before(a, b) ? -1 : key_before(b, a) ? 1 : 0;
}

/*
 * The queued GPRs of pool (n) with their keys now, sorted afresh into out; returns how many.
 */
static size_t fresh_sort(const struct egs_queue *q, struct egs_gpr *pool, size_t n, struct egs_queue_slot *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (egs_queue_contains(q, &pool[i]))
			out[k++] = (struct egs_queue_slot){pool[i].priority, pool[i].fair, pool[i].seq, &pool[i]};
	qsort(out, k, sizeof(*out), key_cmp);
	return k;
}

static uint64_t seq;

/*
 * One random change: a push of a GPR not queued, or a removal or priority change of one.
 */
static void change(struct egs_queue *q, struct egs_gpr *pool, size_t n)
{
	static const double keys[] = {0.5, 1.5, 2.0};
	struct egs_gpr *g = &pool[rng_below(n)];
	if (!egs_queue_contains(q, g)) {
		g->priority = (int)rng_below(4);
		g->fair = keys[rng_below(3)];
		if (!g->seq || rng_below(4)) /* sometimes the old seq, as a retried GPR keeps its place */
			g->seq = ++seq;
		egs_queue_push(q, g);
	} else if (rng_below(2)) {
		assert_true(egs_queue_remove(q, g));
	} else {
		egs_queue_set_priority(q, g, g->priority + (int)rng_below(3) - 1);
	}
}

/*
 * Someone else takes an order (a whole one, or begins one): the order under ticket t is dropped,
 * and its next step must say so.
 */
static void drop(struct egs_queue *q, uint64_t t, size_t piece)
{
	const struct egs_queue_entry *span;
	if (rng_below(2)) {
		struct egs_gpr **all = malloc((egs_queue_len(q) + 1) * sizeof(*all));
		egs_queue_sorted(q, all);
		free(all);
	} else {
		egs_queue_order_begin(q);
	}
	assert_true(egs_queue_order_sort(q, t, piece)); /* nothing to sort under a dropped ticket */
	assert_int_equal(egs_queue_order_step(q, t, piece, &span), SIZE_MAX);
}

/*
 * One order in pieces with changes between them; true when it completed (false: dropped).
 */
static bool order_in_pieces(struct egs_queue *q, struct egs_gpr *pool, size_t n, struct egs_queue_slot *want,
			    struct egs_queue_slot *got)
{
	size_t nwant = fresh_sort(q, pool, n, want), ngot = 0, piece = 1 + rng_below(40), k;
	uint64_t t = egs_queue_order_begin(q);
	assert_true(t != 0);
	assert_int_equal(egs_queue_order_len(q), nwant);
	const struct egs_queue_entry *span;
	size_t sort_piece = 1 + rng_below(16);
	while (rng_below(4) && !egs_queue_order_sort(q, t, sort_piece)) { /* else its first step sorts */
		for (size_t c = rng_below(3); c > 0; c--)
			change(q, pool, n);
		if (rng_below(60) == 0) {
			drop(q, t, piece);
			return false;
		}
	}
	while ((k = egs_queue_order_step(q, t, piece, &span)) != 0) {
		assert_true(k <= piece && ngot + k <= nwant);
		for (size_t i = 0; i < k; i++)
			got[ngot++] = span[i].key;
		for (size_t c = rng_below(6); c > 0; c--)
			change(q, pool, n);
		if (rng_below(50) == 0) {
			drop(q, t, piece);
			return false;
		}
	}
	assert_int_equal(ngot, nwant);
	for (size_t i = 0; i < nwant; i++) {
		assert_ptr_equal(got[i].g, want[i].g);
		assert_int_equal(got[i].priority, want[i].priority);
		assert_true(got[i].seq == want[i].seq && got[i].fair == want[i].fair);
	}
	assert_int_equal(egs_queue_order_step(q, t, piece, &span), SIZE_MAX); /* over */
	return true;
}

static void run_seed(uint64_t s, size_t n, size_t rounds)
{
	rng_seed(s);
	struct egs_gpr *pool = calloc(n, sizeof(*pool));
	struct egs_queue_slot *want = calloc(n + 1, sizeof(*want)), *got = calloc(n + 1, sizeof(*got));
	struct egs_gpr **all = calloc(n + 1, sizeof(*all));
	assert_true(pool && want && got && all);
	for (size_t i = 0; i < n; i++)
		pool[i].heap_idx = SIZE_MAX;
	struct egs_queue q;
	egs_queue_init(&q);
	size_t completed = 0, dropped = 0;
	for (size_t r = 0; r < rounds; r++) {
		for (size_t c = rng_below(3 * n / 2); c > 0; c--)
			change(&q, pool, n);
		if (order_in_pieces(&q, pool, n, want, got))
			completed++;
		else
			dropped++;
		if (rng_below(3) == 0) { /* the whole order at once, the queue as it stands */
			size_t k = fresh_sort(&q, pool, n, want);
			egs_queue_sorted(&q, all);
			for (size_t i = 0; i < k; i++)
				assert_ptr_equal(all[i], want[i].g);
		}
	}
	assert_true(completed > rounds / 2 && dropped > 0);
	egs_queue_cleanup(&q);
	free(pool);
	free(want);
	free(got);
	free(all);
}

static void test_pieces_against_fresh_sort(void **state)
{
	(void)state;
	for (uint64_t s = 1; s <= 12; s++)
		run_seed(s, 60 + 40 * (size_t)(s % 4), 300);
}

/*
 * A large queue taken in pieces while nothing changes, then again after a burst of changes larger
 * than the queue (the lists stop growing there and the next order is sorted afresh).
 */
static void test_many_changes(void **state)
{
	(void)state;
	rng_seed(99);
	size_t n = 5000;
	struct egs_gpr *pool = calloc(n, sizeof(*pool));
	struct egs_queue_slot *want = calloc(n + 1, sizeof(*want)), *got = calloc(n + 1, sizeof(*got));
	assert_true(pool && want && got);
	for (size_t i = 0; i < n; i++)
		pool[i].heap_idx = SIZE_MAX;
	struct egs_queue q;
	egs_queue_init(&q);
	for (size_t c = 0; c < 4 * n; c++)
		change(&q, pool, n);
	for (int r = 0; r < 4; r++) {
		size_t nwant = fresh_sort(&q, pool, n, want), ngot = 0, k;
		uint64_t t = egs_queue_order_begin(&q);
		const struct egs_queue_entry *span;
		while ((k = egs_queue_order_step(&q, t, 777, &span)) != 0)
			for (size_t i = 0; i < k; i++)
				got[ngot++] = span[i].key;
		assert_int_equal(ngot, nwant);
		for (size_t i = 0; i < nwant; i++)
			assert_ptr_equal(got[i].g, want[i].g);
		for (size_t c = r == 2 ? 3 * n + 5000 : 50; c > 0; c--)
			change(&q, pool, n);
	}
	egs_queue_cleanup(&q);
	free(pool);
	free(want);
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pieces_against_fresh_sort),
		cmocka_unit_test(test_many_changes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
