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
		q->heap[i].g->heap_idx = SIZE_MAX;
	free(q->heap);
	free(q->order);
	free(q->added);
	free(q->gone);
	free(q->spare);
	free(q->merge.added);
	free(q->merge.gone);
	egs_msort_cleanup(&q->merge.sort);
	memset(q, 0, sizeof(*q));
}

/* Appends e to the list v (n entries, room for *cap). */
static void entry_add(struct egs_queue_entry **v, size_t *n, size_t *cap, struct egs_queue_entry e)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		*v = egs_realloc(*v, *cap * sizeof(**v));
	}
	(*v)[(*n)++] = e;
}

/* Notes g (just pushed or given a new priority; its heap slot is key) for the next
 * egs_queue_sorted. */
static void note_added(struct egs_queue *q, struct egs_gpr *g, struct egs_queue_slot key)
{
	g->queue_stamp = ++q->stamps;
	if (!q->order_ok)
		return;
	entry_add(&q->added, &q->nadded, &q->capadded, (struct egs_queue_entry){ key, g->queue_stamp });
	if (q->nadded + q->ngone > 2 * q->len + 4096) /* nobody sorts (a follower): stop noting */
		q->order_ok = false;
}

/* Notes that the entry of g under key (its heap slot as it was) and its current stamp stops
 * holding (g leaves the queue or changes priority). */
static void note_gone(struct egs_queue *q, const struct egs_gpr *g, struct egs_queue_slot key)
{
	if (!q->order_ok)
		return;
	entry_add(&q->gone, &q->ngone, &q->capgone, (struct egs_queue_entry){ key, g->queue_stamp });
	if (q->nadded + q->ngone > 2 * q->len + 4096)
		q->order_ok = false;
}

/* The queue order on keys: higher priority, then lower fair key, then earlier seq. */
static bool slot_before(const struct egs_queue_slot *a, const struct egs_queue_slot *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority;
	if (a->fair != b->fair)
		return a->fair < b->fair;
	return a->seq < b->seq;
}

bool egs_queue_before(const struct egs_gpr *a, const struct egs_gpr *b)
{
	struct egs_queue_slot x = { a->priority, a->fair, a->seq, NULL }, y = { b->priority, b->fair, b->seq, NULL };
	return slot_before(&x, &y);
}

static void place(struct egs_queue *q, size_t i, struct egs_queue_slot s)
{
	q->heap[i] = s;
	s.g->heap_idx = i;
}

static void sift_up(struct egs_queue *q, size_t i)
{
	struct egs_queue_slot s = q->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (!slot_before(&s, &q->heap[parent]))
			break;
		place(q, i, q->heap[parent]);
		i = parent;
	}
	place(q, i, s);
}

static void sift_down(struct egs_queue *q, size_t i)
{
	struct egs_queue_slot s = q->heap[i];
	for (;;) {
		size_t l = 2 * i + 1, best = i;
		const struct egs_queue_slot *b = &s;
		if (l < q->len && slot_before(&q->heap[l], b))
			best = l, b = &q->heap[l];
		if (l + 1 < q->len && slot_before(&q->heap[l + 1], b))
			best = l + 1, b = &q->heap[l + 1];
		if (best == i)
			break;
		place(q, i, *b);
		i = best;
	}
	place(q, i, s);
}

static struct egs_queue_slot slot_of(struct egs_gpr *g)
{
	return (struct egs_queue_slot){ g->priority, g->fair, g->seq, g };
}

void egs_queue_push(struct egs_queue *q, struct egs_gpr *g)
{
	EGS_ASSERT(!egs_queue_contains(q, g));
	if (q->len == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->heap = egs_realloc(q->heap, q->cap * sizeof(*q->heap));
	}
	q->heap[q->len] = slot_of(g);
	g->heap_idx = q->len++;
	sift_up(q, g->heap_idx);
	note_added(q, g, q->heap[g->heap_idx]);
}

bool egs_queue_remove(struct egs_queue *q, struct egs_gpr *g)
{
	if (!egs_queue_contains(q, g))
		return false;
	size_t i = g->heap_idx;
	note_gone(q, g, q->heap[i]);
	struct egs_queue_slot last = q->heap[--q->len];
	g->heap_idx = SIZE_MAX;
	if (last.g != g) {
		place(q, i, last);
		if (i > 0 && slot_before(&last, &q->heap[(i - 1) / 2]))
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
	note_gone(q, g, q->heap[g->heap_idx]); /* its old place in the kept order no longer holds */
	q->heap[g->heap_idx].priority = priority;
	note_added(q, g, q->heap[g->heap_idx]);
	if (priority > old)
		sift_up(q, g->heap_idx);
	else
		sift_down(q, g->heap_idx);
}

struct egs_gpr *egs_queue_peek(const struct egs_queue *q)
{
	return q->len ? q->heap[0].g : NULL;
}

struct egs_gpr *egs_queue_pop(struct egs_queue *q)
{
	struct egs_gpr *g = egs_queue_peek(q);
	if (g)
		egs_queue_remove(q, g);
	return g;
}

int egs_queue_cmp(const void *a, const void *b)
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

/* The queue order from scratch into out: priorities are small integers, so bucket by priority
 * (counting sort), then order each bucket by fair key and seq, which is cheaper than a comparison
 * sort of the whole queue. */
static void sort_all(const struct egs_queue *q, struct egs_gpr **out)
{
	size_t *count = egs_calloc(SORT_MAX_PRIORITY + 2, sizeof(*count));
	for (size_t i = 0; i < q->len; i++) {
		int pr = q->heap[i].priority;
		if (pr < 0 || pr > SORT_MAX_PRIORITY) {
			free(count);
			for (size_t k = 0; k < q->len; k++)
				out[k] = q->heap[k].g;
			qsort(out, q->len, sizeof(*out), egs_queue_cmp);
			return;
		}
		count[SORT_MAX_PRIORITY - pr + 1]++;
	}
	for (size_t b = 1; b <= SORT_MAX_PRIORITY + 1; b++)
		count[b] += count[b - 1];
	for (size_t i = 0; i < q->len; i++)
		out[count[SORT_MAX_PRIORITY - q->heap[i].priority]++] = q->heap[i].g;
	size_t start = 0;
	for (size_t i = 1; i <= q->len; i++) {
		if (i == q->len || out[i]->priority != out[start]->priority) {
			qsort(out + start, i - start, sizeof(*out), cmp_fair_seq);
			start = i;
		}
	}
	free(count);
}

bool egs_queue_key_before(const struct egs_queue_slot *a, const struct egs_queue_slot *b)
{
	return slot_before(a, b);
}

/* True when entry x is among the entries gone[*j ..] of the merge m (sorted; x comes in queue
 * order, so *j only moves forward): the same GPR under the same stamp. */
static bool entry_gone(const struct egs_queue_merge *m, const struct egs_queue_entry *x, size_t *j)
{
	while (*j < m->ngone && slot_before(&m->gone[*j].key, &x->key))
		(*j)++;
	for (size_t k = *j; k < m->ngone && !slot_before(&x->key, &m->gone[k].key); k++)
		if (m->gone[k].key.g == x->key.g && m->gone[k].stamp == x->stamp)
			return true;
	return false;
}

/* Drops the order in progress, if any: the changes it took go back to the lists, so that the
 * next order merges them (the kept order is still the one before it). */
static void merge_drop(struct egs_queue *q)
{
	struct egs_queue_merge *m = &q->merge;
	if (!m->ticket)
		return;
	for (size_t k = 0; q->order_ok && k < m->nadded; k++)
		entry_add(&q->added, &q->nadded, &q->capadded, m->added[k]);
	for (size_t k = 0; q->order_ok && k < m->ngone; k++)
		entry_add(&q->gone, &q->ngone, &q->capgone, m->gone[k]);
	if (q->nadded + q->ngone > 2 * q->len + 4096)
		q->order_ok = false;
	m->nadded = m->ngone = 0;
	m->ticket = 0;
	m->sorting = 0;
}

/* The queue's order sorted afresh into the kept order (the one place that reads every GPR);
 * the lists of changes are emptied. */
static void sort_fresh(struct egs_queue *q)
{
	if (q->caporder < q->len) {
		q->caporder = q->len + q->len / 2 + 64;
		free(q->order);
		q->order = egs_malloc(q->caporder * sizeof(*q->order));
	}
	struct egs_gpr **tmp = egs_malloc((q->len + 1) * sizeof(*tmp));
	sort_all(q, tmp);
	for (size_t i = 0; i < q->len; i++) {
		const struct egs_gpr *g = tmp[i];
		q->order[i] = (struct egs_queue_entry){ q->heap[g->heap_idx], g->queue_stamp };
	}
	free(tmp);
	q->norder = q->len;
	q->nadded = q->ngone = 0;
	q->order_ok = true;
}

/* Swaps the list (*a, *na, *capa) with (*b, *nb, *capb). */
static void list_swap(struct egs_queue_entry **a, size_t *na, size_t *capa, struct egs_queue_entry **b, size_t *nb,
		      size_t *capb)
{
	struct egs_queue_entry *v = *a;
	size_t n = *na, cap = *capa;
	*a = *b, *na = *nb, *capa = *capb;
	*b = v, *nb = n, *capb = cap;
}

/* The queue order on entries, for the sort of the lists of changes. */
static bool entry_before(const void *a, const void *b)
{
	return slot_before(&((const struct egs_queue_entry *)a)->key, &((const struct egs_queue_entry *)b)->key);
}

/* Starts the sort of the list `which` (1 added, 2 gone; n entries) in pieces. */
static void sort_start(struct egs_queue_merge *m, int which, size_t n)
{
	egs_msort_start(&m->sort, n, sizeof(struct egs_queue_entry));
	m->sorting = which;
}

uint64_t egs_queue_order_begin(struct egs_queue *q)
{
	struct egs_queue_merge *m = &q->merge;
	merge_drop(q);
	m->i = m->a = m->j = m->n = m->served = 0;
	m->len = q->len;
	m->ticket = ++q->tickets;
	m->sorting = 0;
	if (!q->order_ok || !q->len) {
		sort_fresh(q);
		m->fresh = true;
		m->n = q->len;
		return m->ticket;
	}
	m->fresh = false; /* the merge takes the lists; changes from now on go to fresh ones */
	list_swap(&m->added, &m->nadded, &m->capadded, &q->added, &q->nadded, &q->capadded);
	list_swap(&m->gone, &m->ngone, &m->capgone, &q->gone, &q->ngone, &q->capgone);
	q->nadded = q->ngone = 0;
	/* The lists are sorted by egs_queue_order_sort, in pieces: at 100,000 queued under creates
	 * at random priorities a run takes thousands of changes, and one qsort of them was a piece
	 * of its own that no slice bounded. */
	sort_start(m, 1, m->nadded);
	if (q->capspare < q->len + 1) { /* the last order's buffer, reused: no fresh pages each time */
		q->capspare = q->len + q->len / 2 + 64;
		free(q->spare);
		q->spare = egs_malloc(q->capspare * sizeof(*q->spare));
	}
	return m->ticket;
}

bool egs_queue_order_sort(struct egs_queue *q, uint64_t ticket, size_t max)
{
	struct egs_queue_merge *m = &q->merge;
	size_t budget = max ? max : 1;
	if (!ticket || ticket != m->ticket)
		return true; /* dropped: egs_queue_order_step says so */
	if (m->sorting == 1) {
		if (!egs_msort_piece(&m->sort, &m->added, &m->capadded, sizeof(*m->added), entry_before, &budget))
			return false;
		sort_start(m, 2, m->ngone); /* the second buffer may be added's old one now, smaller */
	}
	if (m->sorting == 2) {
		if (!egs_msort_piece(&m->sort, &m->gone, &m->capgone, sizeof(*m->gone), entry_before, &budget))
			return false;
		m->sorting = 0;
	}
	return true;
}

/* Merges at most max more entries of the order in progress into q->spare: the kept order and
 * the entries added since, less those gone since (all three in queue order).  Only the entries
 * are read, no GPR. */
static void merge_some(struct egs_queue *q, size_t max)
{
	struct egs_queue_merge *m = &q->merge;
	struct egs_queue_entry *out = q->spare;
	size_t stop = m->len - m->n > max ? m->n + max : m->len;
	while (m->n < stop) {
		const struct egs_queue_entry *e = m->i < q->norder ? &q->order[m->i] : NULL;
		const struct egs_queue_entry *ad = m->a < m->nadded ? &m->added[m->a] : NULL;
		if (ad && (!e || slot_before(&ad->key, &e->key))) {
			if (!entry_gone(m, ad, &m->j))
				out[m->n++] = *ad;
			m->a++;
			continue;
		}
		EGS_ASSERT(e); /* n < len: the kept order and the added ones hold the rest */
		/* The kept entries before the next added or gone key go as a block: none of them is gone
		 * (a gone entry has a gone key equal to its own) and no added one goes before them. */
		const struct egs_queue_slot *lim = ad ? &ad->key : NULL;
		if (m->j < m->ngone && (!lim || slot_before(&m->gone[m->j].key, lim)))
			lim = &m->gone[m->j].key;
		size_t run = m->i, end = m->i + (stop - m->n) < q->norder ? m->i + (stop - m->n) : q->norder;
		while (run < end && (!lim || slot_before(&q->order[run].key, lim)))
			run++;
		if (run > m->i) {
			memcpy(out + m->n, q->order + m->i, (run - m->i) * sizeof(*out));
			m->n += run - m->i;
			m->i = run;
			continue;
		}
		if (!entry_gone(m, e, &m->j))
			out[m->n++] = *e;
		m->i++;
	}
	if (m->n < m->len)
		return;
	/* Complete (what is left of the kept order and the added ones is all gone): the new order is
	 * kept, and the one before becomes the next merge's buffer. */
	struct egs_queue_entry *v = q->order;
	size_t cap = q->caporder;
	q->order = q->spare;
	q->caporder = q->capspare;
	q->spare = v;
	q->capspare = cap;
	q->norder = m->len;
	m->nadded = m->ngone = 0;
	m->fresh = true; /* all of it is in q->order now */
}

size_t egs_queue_order_step(struct egs_queue *q, uint64_t ticket, size_t max, const struct egs_queue_entry **span)
{
	struct egs_queue_merge *m = &q->merge;
	if (!ticket || ticket != m->ticket)
		return SIZE_MAX; /* dropped (another order began): begin again */
	if (!max)
		max = 1;
	if (m->sorting) /* a caller that took no sort pieces: the rest of the sort in one go */
		egs_queue_order_sort(q, ticket, SIZE_MAX);
	if (!m->fresh)
		merge_some(q, max);
	size_t made = m->fresh ? m->len : m->n, k = made - m->served < max ? made - m->served : max;
	if (!k) {
		m->ticket = 0;
		return 0;
	}
	*span = (m->fresh ? q->order : q->spare) + m->served;
	m->served += k;
	return k;
}

void egs_queue_sorted(struct egs_queue *q, struct egs_gpr **out)
{
	uint64_t t = egs_queue_order_begin(q);
	const struct egs_queue_entry *span = NULL;
	size_t n = 0, k;
	while ((k = egs_queue_order_step(q, t, SIZE_MAX, &span)) != 0)
		for (size_t i = 0; i < k; i++)
			out[n++] = span[i].key.g;
	EGS_ASSERT(n == q->len);
}
