/*
 * msort.h: a stable bottom-up merge sort that runs in pieces: each call makes at most a budget of
 * element moves and the next call goes on where it stopped, so that a long sort never holds its
 * caller (egsd's loop) for long.  The queue sorts the changes of its kept order with it
 * (core/queue.c), the planner the nodes' names of a first state (core/sched_fresh.c).
 *
 * The array is sorted in runs of w sorted elements, merged pairwise into a second buffer of the
 * same size; at the end of a pass the two buffers swap and w doubles.  Every pass copies all n
 * elements, so at any stop the caller's array (*v) holds every element (in no useful order until
 * the sort is done): a caller that gives up may take them all back.
 */
#ifndef EGS_MSORT_H
#define EGS_MSORT_H

#include "core/common.h"

#include <string.h>

/* True when the element at a goes strictly before the one at b (elements that are equal keep
 * their order: the sort is stable). */
typedef bool (*egs_msort_before_fn)(const void *a, const void *b);

/* A sort in progress, and the second buffer, kept between sorts (no fresh pages each time).
 * Zero-initialised storage is an idle sort with no buffer. */
struct egs_msort {
	char *tmp; /* owned: room for captmp elements of size bytes */
	size_t captmp;
	size_t n, size;
	/* Runs of w sorted elements; the pair of runs at lo is merged up to ia, ib (its two runs'
	 * next) and k (the output's next) while merging. */
	size_t w, lo, ia, ib, k;
	bool merging;
};

/* Starts the sort of n elements of size bytes each (the array itself goes to each
 * egs_msort_piece); the second buffer grows to room for n when it lacks it (or is made anew for
 * another element size). */
void egs_msort_start(struct egs_msort *s, size_t n, size_t size);
/* Goes on with the sort of *v (n elements from start, at *v; room for *cap of them; size as
 * given to start) for at most *budget element moves, which it takes off *budget; true once *v is
 * sorted in the order of before.  At a pass's end *v and the second buffer swap (with their
 * capacities), so *v may point to another buffer after a call: the caller owns whichever buffer
 * *v names, s the other.
 *
 * Inline, and always so: with size a constant and before a function of the caller's, each caller
 * gets its own copy in which a move is a plain copy and the comparison is inlined; through a
 * memcpy of a variable size and a call through a pointer per move, bench_plan's sorts took 5.2M
 * more instructions (+6%) than each caller's own merge loop did. */
static inline __attribute__((always_inline)) bool egs_msort_piece(struct egs_msort *s, void *v, size_t *cap,
								  size_t size, egs_msort_before_fn before,
								  size_t *budget)
{
	char **pv = v;
	size_t n = s->n;
	EGS_ASSERT(size == s->size);
	while (s->w < n && *budget) {
		if (!s->merging) {
			if (s->lo >= n) { /* a pass is done: the next one merges runs twice as long */
				char *t = *pv;
				size_t c = *cap;
				*pv = s->tmp, *cap = s->captmp;
				s->tmp = t, s->captmp = c;
				s->w *= 2;
				s->lo = 0;
				continue;
			}
			s->ia = s->k = s->lo;
			s->ib = s->lo + s->w < n ? s->lo + s->w : n;
			s->merging = true;
		}
		const char *a = *pv;
		size_t mid = s->lo + s->w < n ? s->lo + s->w : n, hi = s->lo + 2 * s->w < n ? s->lo + 2 * s->w : n;
		for (; *budget && s->k < hi; (*budget)--) {
			if (s->ib >= hi || (s->ia < mid && !before(a + s->ib * size, a + s->ia * size)))
				memcpy(s->tmp + s->k++ * size, a + s->ia++ * size, size);
			else
				memcpy(s->tmp + s->k++ * size, a + s->ib++ * size, size);
		}
		if (s->k == hi) {
			s->merging = false;
			s->lo = hi;
		}
	}
	return s->w >= n;
}
/* Frees the second buffer (s may be started again). */
void egs_msort_cleanup(struct egs_msort *s);

#endif
