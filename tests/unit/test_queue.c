/*
 * test_queue.c: the indexed binary heap of core/queue.h against a naive reference (an unordered
 * array searched linearly for the first GPR by priority desc, fair-share key asc, seq asc).  Long random sequences of
 * push, remove, set_priority (up, down, unchanged), pop and peek run under several fixed seeds, and
 * after every operation the heap must agree with the reference on length and first element, keep
 * its position index exact (heap[i]->heap_idx == i, SIZE_MAX when not queued) and its heap order,
 * and egs_queue_sorted must give the reference order.  Edge cases follow: removing what is not
 * queued, reprioritising what is not queued, FIFO among equal priorities, an empty queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/queue.h"
#include "rng.h"

/* ---- the reference ---- */

/* Written out here rather than calling egs_queue_before, so the test does not trust the code it checks. */
static bool ref_before(const struct egs_gpr *a, const struct egs_gpr *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	if (a->fair != b->fair)
		return a->fair < b->fair;
	return a->seq < b->seq;
}

static int ref_cmp(const void *x, const void *y)
{
	const struct egs_gpr *a = *(struct egs_gpr *const *)x, *b = *(struct egs_gpr *const *)y;
	if (a == b)
		return 0;
	return ref_before(a, b) ? -1 : 1;
}

struct ref {
	struct egs_gpr *base; /* the pool: pos[] is indexed by g - base */
	struct egs_gpr **v;
	size_t *pos; /* index in v, SIZE_MAX when not in the reference */
	size_t n;
};

static struct egs_gpr *ref_first(const struct ref *r)
{
	struct egs_gpr *best = NULL;
	for (size_t i = 0; i < r->n; i++)
		if (!best || ref_before(r->v[i], best))
			best = r->v[i];
	return best;
}

static bool ref_has(const struct ref *r, const struct egs_gpr *g)
{
	return r->pos[g - r->base] != SIZE_MAX;
}

static void ref_add(struct ref *r, struct egs_gpr *g)
{
	r->pos[g - r->base] = r->n;
	r->v[r->n++] = g;
}

static bool ref_remove(struct ref *r, struct egs_gpr *g)
{
	size_t i = r->pos[g - r->base];
	if (i == SIZE_MAX)
		return false;
	r->pos[g - r->base] = SIZE_MAX;
	r->v[i] = r->v[--r->n];
	if (i < r->n)
		r->pos[r->v[i] - r->base] = i;
	return true;
}

/* ---- checks ---- */

/* The heap's own invariants: exact positions and heap order, O(len). */
static void check_heap(const struct egs_queue *q)
{
	for (size_t i = 0; i < q->len; i++) {
		struct egs_gpr *g = egs_queue_at(q, i);
		assert_non_null(g);
		assert_int_equal(g->heap_idx, i);
		/* the slot's key is its GPR's */
		assert_int_equal(q->heap[i].priority, g->priority);
		assert_true(q->heap[i].seq == g->seq && q->heap[i].fair == g->fair);
		if (i > 0)
			assert_false(ref_before(g, egs_queue_at(q, (i - 1) / 2)));
	}
}

static void check_against_ref(struct egs_queue *q, struct ref *r, struct egs_gpr *pool, size_t npool,
			      bool full, struct egs_gpr **scratch_a, struct egs_gpr **scratch_b)
{
	assert_int_equal(egs_queue_len(q), r->n);
	assert_ptr_equal(egs_queue_peek(q), ref_first(r));
	check_heap(q);
	if (!full)
		return;
	/* Membership agrees for every GPR, and what is not queued says so (heap_idx SIZE_MAX). */
	for (size_t i = 0; i < npool; i++) {
		bool in = ref_has(r, &pool[i]);
		assert_int_equal(egs_queue_contains(q, &pool[i]), in);
		if (!in)
			assert_int_equal(pool[i].heap_idx, SIZE_MAX);
	}
	if (r->n)
		memcpy(scratch_b, r->v, r->n * sizeof(*scratch_b));
	qsort(scratch_b, r->n, sizeof(*scratch_b), ref_cmp);
	egs_queue_sorted(q, scratch_a);
	for (size_t i = 0; i < r->n; i++)
		assert_ptr_equal(scratch_a[i], scratch_b[i]);
}

/*
 * One random run: npool GPRs, priorities drawn from nprio values (few values: many ties, so seq
 * decides often), nops operations.  sorted_every: how often the O(n log n) order check runs.
 */
static void random_run(uint64_t seed, size_t npool, int nprio, size_t nops, size_t sorted_every)
{
	rng_seed(seed);
	struct egs_gpr *pool = calloc(npool, sizeof(*pool));
	struct ref r = { pool, calloc(npool, sizeof(struct egs_gpr *)), calloc(npool, sizeof(size_t)), 0 };
	struct egs_gpr **sa = calloc(npool + 1, sizeof(*sa)), **sb = calloc(npool + 1, sizeof(*sb));
	assert_non_null(pool);
	assert_non_null(r.v);
	assert_non_null(r.pos);
	assert_non_null(sa);
	assert_non_null(sb);
	for (size_t i = 0; i < npool; i++) {
		pool[i].heap_idx = SIZE_MAX;
		r.pos[i] = SIZE_MAX;
	}
	struct egs_queue q;
	egs_queue_init(&q);
	uint64_t seq = 0;
	size_t counts[8] = { 0 };

	for (size_t op = 0; op < nops; op++) {
		struct egs_gpr *g = &pool[rng_below(npool)];
		size_t kind = rng_below(100);
		if (kind < 35) { /* push (or, when g is queued already, remove it) */
			if (!ref_has(&r, g)) {
				g->priority = (int)rng_below((size_t)nprio) * 10;
				/* Mostly a fresh seq; sometimes the old one, as a retried GPR keeps its place. */
				if (!g->seq || rng_below(4))
					g->seq = ++seq;
				/* The workspace's usage key: none (-inf) or one of a few values, many ties. */
				static const double keys[] = { -INFINITY, 1.5, 2.0, 40.25 };
				g->fair = keys[rng_below(4)];
				egs_queue_push(&q, g);
				ref_add(&r, g);
				counts[0]++;
			} else {
				assert_true(egs_queue_remove(&q, g));
				assert_true(ref_remove(&r, g));
				assert_int_equal(g->heap_idx, SIZE_MAX);
				counts[1]++;
			}
		} else if (kind < 50) { /* remove a random element, queued or not */
			bool was = ref_has(&r, g);
			assert_int_equal(egs_queue_remove(&q, g), was);
			if (was)
				ref_remove(&r, g);
			assert_int_equal(g->heap_idx, SIZE_MAX);
			counts[was ? 1 : 2]++;
		} else if (kind < 75) { /* set_priority up, down or unchanged */
			int want = g->priority + (int)rng_below(5) * 10 - 20;
			size_t len = egs_queue_len(&q);
			egs_queue_set_priority(&q, g, want);
			assert_int_equal(g->priority, want);
			assert_int_equal(egs_queue_len(&q), len);
			counts[3]++;
		} else if (kind < 88) { /* pop */
			struct egs_gpr *want = ref_first(&r);
			struct egs_gpr *got = egs_queue_pop(&q);
			assert_ptr_equal(got, want);
			if (got) {
				ref_remove(&r, got);
				assert_int_equal(got->heap_idx, SIZE_MAX);
			}
			counts[4]++;
		} else { /* peek, with a set_priority of the first element to the top or bottom */
			struct egs_gpr *first = egs_queue_peek(&q);
			assert_ptr_equal(first, ref_first(&r));
			if (first && rng_below(2))
				egs_queue_set_priority(&q, first, rng_below(2) ? 1000 : -1000);
			counts[5]++;
		}
		check_against_ref(&q, &r, pool, npool, op % sorted_every == 0, sa, sb);
	}
	/* Every kind of operation ran many times. */
	for (size_t i = 0; i < 6; i++)
		assert_true(counts[i] > nops / 100);
	/* Drain: pops come out in reference order. */
	size_t n = r.n;
	memcpy(sb, r.v, n * sizeof(*sb));
	qsort(sb, n, sizeof(*sb), ref_cmp);
	for (size_t i = 0; i < n; i++)
		assert_ptr_equal(egs_queue_pop(&q), sb[i]);
	assert_null(egs_queue_pop(&q));
	assert_int_equal(egs_queue_len(&q), 0);
	egs_queue_cleanup(&q);
	free(pool);
	free(r.v);
	free(r.pos);
	free(sa);
	free(sb);
}

static void test_random_small_pool(void **state)
{
	(void)state;
	/* Few GPRs and two priorities: the heap is often empty or tiny, pops and ties everywhere. */
	random_run(1, 12, 2, 200000, 1);
	random_run(2, 3, 1, 50000, 1);
}

static void test_random_medium_pool(void **state)
{
	(void)state;
	random_run(3, 200, 5, 200000, 1);
	random_run(4, 200, 50, 200000, 1);
}

static void test_random_large_pool(void **state)
{
	(void)state;
	random_run(5, 2000, 8, 100000, 97);
	random_run(6, 2000, 1000, 100000, 97);
}

/* ---- edge cases ---- */

static void init_gprs(struct egs_gpr *g, size_t n)
{
	memset(g, 0, n * sizeof(*g));
	for (size_t i = 0; i < n; i++)
		g[i].heap_idx = SIZE_MAX;
}

static void test_empty(void **state)
{
	(void)state;
	struct egs_queue q;
	egs_queue_init(&q);
	assert_int_equal(egs_queue_len(&q), 0);
	assert_null(egs_queue_peek(&q));
	assert_null(egs_queue_pop(&q));
	struct egs_gpr g;
	init_gprs(&g, 1);
	assert_false(egs_queue_contains(&q, &g));
	assert_false(egs_queue_remove(&q, &g));
	egs_queue_sorted(&q, NULL); /* nothing to write: out is not touched */
	egs_queue_cleanup(&q);
	egs_queue_cleanup(&q); /* cleanup leaves an empty queue that can be cleaned again */
}

static void test_remove_not_queued(void **state)
{
	(void)state;
	struct egs_gpr g[4];
	init_gprs(g, 4);
	struct egs_queue q, other;
	egs_queue_init(&q);
	egs_queue_init(&other);
	for (int i = 0; i < 3; i++) {
		g[i].priority = 10 * i;
		g[i].seq = (uint64_t)i + 1;
		egs_queue_push(&q, &g[i]);
	}
	/* Never queued. */
	assert_false(egs_queue_remove(&q, &g[3]));
	assert_int_equal(egs_queue_len(&q), 3);
	/* Queued elsewhere: its heap_idx (0) is a valid slot of q, but that slot holds another GPR. */
	g[3].seq = 99;
	egs_queue_push(&other, &g[3]);
	assert_int_equal(g[3].heap_idx, 0);
	assert_false(egs_queue_contains(&q, &g[3]));
	assert_false(egs_queue_remove(&q, &g[3]));
	assert_int_equal(egs_queue_len(&q), 3);
	assert_int_equal(g[3].heap_idx, 0); /* still queued in `other` */
	assert_true(egs_queue_contains(&other, &g[3]));
	/* Removed already: a second remove is refused. */
	assert_true(egs_queue_remove(&q, &g[1]));
	assert_false(egs_queue_remove(&q, &g[1]));
	assert_int_equal(g[1].heap_idx, SIZE_MAX);
	assert_int_equal(egs_queue_len(&q), 2);
	assert_ptr_equal(egs_queue_pop(&q), &g[2]);
	assert_ptr_equal(egs_queue_pop(&q), &g[0]);
	assert_null(egs_queue_pop(&q));
	egs_queue_cleanup(&q);
	egs_queue_cleanup(&other);
	assert_int_equal(g[3].heap_idx, SIZE_MAX); /* cleanup unmarks what it held */
}

static void test_set_priority_not_queued(void **state)
{
	(void)state;
	struct egs_gpr g[3];
	init_gprs(g, 3);
	struct egs_queue q;
	egs_queue_init(&q);
	g[0].priority = 5, g[0].seq = 1;
	g[1].priority = 7, g[1].seq = 2;
	egs_queue_push(&q, &g[0]);
	egs_queue_push(&q, &g[1]);
	struct egs_gpr *before[2];
	memcpy(before, q.heap, sizeof(before));

	g[2].priority = 1, g[2].seq = 3;
	egs_queue_set_priority(&q, &g[2], 500);
	assert_int_equal(g[2].priority, 500);
	assert_int_equal(g[2].heap_idx, SIZE_MAX);
	assert_int_equal(egs_queue_len(&q), 2);
	assert_memory_equal(q.heap, before, sizeof(before));
	assert_ptr_equal(egs_queue_peek(&q), &g[1]);

	/* Popped GPRs are not queued either: their new priority does not disturb the heap. */
	struct egs_gpr *top = egs_queue_pop(&q);
	assert_ptr_equal(top, &g[1]);
	egs_queue_set_priority(&q, top, 1000);
	assert_int_equal(top->priority, 1000);
	assert_int_equal(top->heap_idx, SIZE_MAX);
	assert_ptr_equal(egs_queue_peek(&q), &g[0]);
	assert_int_equal(egs_queue_len(&q), 1);
	egs_queue_cleanup(&q);
}

static void test_equal_priority_fifo(void **state)
{
	(void)state;
	enum { N = 257 };
	struct egs_gpr *g = calloc(N, sizeof(*g));
	assert_non_null(g);
	init_gprs(g, N);
	/* Push in a scrambled order with distinct seqs: pops come out by seq. */
	struct egs_queue q;
	egs_queue_init(&q);
	for (size_t i = 0; i < N; i++) {
		size_t k = (i * 97) % N; /* 97 is coprime with 257: a permutation */
		g[k].priority = 150;
		g[k].seq = k + 1;
		egs_queue_push(&q, &g[k]);
	}
	for (size_t i = 0; i < N; i++) {
		struct egs_gpr *p = egs_queue_pop(&q);
		assert_non_null(p);
		assert_int_equal(p->seq, i + 1);
	}
	/* Raising one to the shared priority of others puts it by seq, not at the front. */
	for (size_t i = 0; i < 5; i++) {
		g[i].priority = i == 2 ? 100 : 150;
		g[i].seq = i + 1;
		egs_queue_push(&q, &g[i]);
	}
	egs_queue_set_priority(&q, &g[2], 150);
	for (size_t i = 0; i < 5; i++)
		assert_ptr_equal(egs_queue_pop(&q), &g[i]);
	/* And lowering to a shared priority puts it back by seq too. */
	for (size_t i = 0; i < 5; i++) {
		g[i].priority = i == 4 ? 300 : 150;
		egs_queue_push(&q, &g[i]);
	}
	assert_ptr_equal(egs_queue_peek(&q), &g[4]);
	egs_queue_set_priority(&q, &g[4], 150);
	for (size_t i = 0; i < 5; i++)
		assert_ptr_equal(egs_queue_pop(&q), &g[i]);
	egs_queue_cleanup(&q);
	free(g);
}

static void test_before(void **state)
{
	(void)state;
	struct egs_gpr a, b;
	init_gprs(&a, 1);
	init_gprs(&b, 1);
	a.priority = 200, a.seq = 10;
	b.priority = 100, b.seq = 1;
	assert_true(egs_queue_before(&a, &b)); /* priority wins over seq */
	assert_false(egs_queue_before(&b, &a));
	b.priority = 200;
	assert_true(egs_queue_before(&b, &a)); /* then the smaller seq */
	assert_false(egs_queue_before(&a, &b));
	assert_false(egs_queue_before(&a, &a));
	a.priority = -5, b.priority = -6;
	assert_true(egs_queue_before(&a, &b)); /* negative priorities order the same way */
}

static void test_sorted_leaves_heap_alone(void **state)
{
	(void)state;
	enum { N = 100 };
	struct egs_gpr g[N];
	init_gprs(g, N);
	struct egs_queue q;
	egs_queue_init(&q);
	for (size_t i = 0; i < N; i++) {
		g[i].priority = (int)((i * 37) % 11);
		g[i].seq = i + 1;
		egs_queue_push(&q, &g[i]);
	}
	struct egs_gpr *heap_before[N], *out[N + 1];
	memcpy(heap_before, q.heap, sizeof(heap_before));
	out[N] = (struct egs_gpr *)(uintptr_t)0x1; /* a canary after the N entries */
	egs_queue_sorted(&q, out);
	assert_memory_equal(q.heap, heap_before, sizeof(heap_before));
	assert_ptr_equal(out[N], (struct egs_gpr *)(uintptr_t)0x1);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(g[i].heap_idx == SIZE_MAX, false);
		if (i)
			assert_true(ref_before(out[i - 1], out[i]));
	}
	/* Pops agree with the sorted view. */
	for (size_t i = 0; i < N; i++)
		assert_ptr_equal(egs_queue_pop(&q), out[i]);
	egs_queue_cleanup(&q);
}

static void test_cleanup_unmarks(void **state)
{
	(void)state;
	struct egs_gpr g[70]; /* more than the first allocation (64) */
	init_gprs(g, 70);
	struct egs_queue q;
	egs_queue_init(&q);
	for (size_t i = 0; i < 70; i++) {
		g[i].seq = i + 1;
		egs_queue_push(&q, &g[i]);
	}
	assert_int_equal(egs_queue_len(&q), 70);
	egs_queue_cleanup(&q);
	for (size_t i = 0; i < 70; i++)
		assert_int_equal(g[i].heap_idx, SIZE_MAX);
	assert_int_equal(egs_queue_len(&q), 0);
	/* The GPRs can be queued again afterwards. */
	egs_queue_push(&q, &g[5]);
	assert_ptr_equal(egs_queue_peek(&q), &g[5]);
	egs_queue_cleanup(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_small_pool),
		cmocka_unit_test(test_random_medium_pool),
		cmocka_unit_test(test_random_large_pool),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_remove_not_queued),
		cmocka_unit_test(test_set_priority_not_queued),
		cmocka_unit_test(test_equal_priority_fifo),
		cmocka_unit_test(test_before),
		cmocka_unit_test(test_sorted_leaves_heap_alone),
		cmocka_unit_test(test_cleanup_unmarks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
