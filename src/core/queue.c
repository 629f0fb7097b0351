/*
 * queue.c: indexed binary heap; see queue.h.  Invariant: for every i, heap[i]->heap_idx == i and
 * no child goes before its parent.
 */
#include "core/queue.h"

#include <stdlib.h>
#include <string.h>

void egs_queue_init(struct egs_queue *q)
{
	memset(q, 0, sizeof(*q));
}

void egs_queue_cleanup(struct egs_queue *q)
{
	for (size_t i = 0; i < q->len; i++)
		q->heap[i]->heap_idx = SIZE_MAX;
	free(q->heap);
	memset(q, 0, sizeof(*q));
}

bool egs_queue_before(const struct egs_gpr *a, const struct egs_gpr *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	if (a->fair != b->fair)
		return a->fair < b->fair;
	return a->seq < b->seq;
}

static void place(struct egs_queue *q, size_t i, struct egs_gpr *g)
{
	q->heap[i] = g;
	g->heap_idx = i;
}

static void sift_up(struct egs_queue *q, size_t i)
{
	struct egs_gpr *g = q->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!egs_queue_before(g, q->heap[parent]))
			break;
		place(q, i, q->heap[parent]);
		i = parent;
	}
	place(q, i, g);
}

static void sift_down(struct egs_queue *q, size_t i)
{
	struct egs_gpr *g = q->heap[i];
	for (;;) {
		size_t l = 2 * i + 1, best = i;
		struct egs_gpr *bg = g;
		if (l < q->len && egs_queue_before(q->heap[l], bg))
			best = l, bg = q->heap[l];
		if (l + 1 < q->len && egs_queue_before(q->heap[l + 1], bg))
			best = l + 1, bg = q->heap[l + 1];
		if (best == i)
			break;
		place(q, i, bg);
		i = best;
	}
	place(q, i, g);
}

void egs_queue_push(struct egs_queue *q, struct egs_gpr *g)
{
	EGS_ASSERT(!egs_queue_contains(q, g));
	if (q->len == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->heap = egs_realloc(q->heap, q->cap * sizeof(*q->heap));
	}
	q->heap[q->len] = g;
	g->heap_idx = q->len++;
	sift_up(q, g->heap_idx);
}

bool egs_queue_remove(struct egs_queue *q, struct egs_gpr *g)
{
	if (!egs_queue_contains(q, g))
		return false;
	size_t i = g->heap_idx;
	struct egs_gpr *last = q->heap[--q->len];
	g->heap_idx = SIZE_MAX;
	if (last != g) {
		place(q, i, last);
		if (i > 0 && egs_queue_before(last, q->heap[(i - 1) / 2]))
			sift_up(q, i);
		else
			sift_down(q, i);
	}
	return true;
}

void egs_queue_set_priority(struct egs_queue *q, struct egs_gpr *g, int priority)
{
	int old = g->priority;
	g->priority = priority;
	if (!egs_queue_contains(q, g) || old == priority)
		return;
	if (priority > old)
		sift_up(q, g->heap_idx);
	else
		sift_down(q, g->heap_idx);
}

struct egs_gpr *egs_queue_peek(const struct egs_queue *q)
{
	return q->len ? q->heap[0] : NULL;
}

struct egs_gpr *egs_queue_pop(struct egs_queue *q)
{
	struct egs_gpr *g = egs_queue_peek(q);
	if (g)
		egs_queue_remove(q, g);
	return g;
}

static int cmp_order(const void *a, const void *b)
{
	const struct egs_gpr *x = *(struct egs_gpr *const *)a, *y = *(struct egs_gpr *const *)b;
	if (x == y)
		return 0;
	return egs_queue_before(x, y) ? -1 : 1;
}

/* Within one priority: fair key, then seq. */
static int cmp_fair_seq(const void *a, const void *b)
{
	const struct egs_gpr *x = *(struct egs_gpr *const *)a, *y = *(struct egs_gpr *const *)b;
	if (x->fair != y->fair)
		return x->fair < y->fair ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

#define SORT_MAX_PRIORITY 1000

void egs_queue_sorted(const struct egs_queue *q, struct egs_gpr **out)
{
	if (!q->len)
		return;
	/* Priorities are small integers: bucket by priority (counting sort), then order each bucket by
	 * fair key and seq, which is cheaper than a comparison sort of the whole queue. */
	size_t *count = egs_calloc(SORT_MAX_PRIORITY + 2, sizeof(*count));
	for (size_t i = 0; i < q->len; i++) {
		int pr = q->heap[i]->priority;
		if (pr < 0 || pr > SORT_MAX_PRIORITY) {
			free(count);
			memcpy(out, q->heap, q->len * sizeof(*out));
			qsort(out, q->len, sizeof(*out), cmp_order);
			return;
		}
		count[SORT_MAX_PRIORITY - pr + 1]++;
	}
	for (size_t b = 1; b <= SORT_MAX_PRIORITY + 1; b++)
		count[b] += count[b - 1];
	for (size_t i = 0; i < q->len; i++)
		out[count[SORT_MAX_PRIORITY - q->heap[i]->priority]++] = q->heap[i];
	size_t start = 0;
	for (size_t i = 1; i <= q->len; i++) {
		if (i == q->len || out[i]->priority != out[start]->priority) {
			qsort(out + start, i - start, sizeof(*out), cmp_fair_seq);
			start = i;
		}
	}
	free(count);
}
