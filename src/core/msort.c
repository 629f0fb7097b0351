/*
 * msort.c: the merge sort in pieces of msort.h: its buffer's life (the pieces themselves are
 * inline, in msort.h).  Invariant between pieces: the elements [0, lo) of the pass in progress
 * are merged into tmp, and while merging, the pair of runs at lo has its first k - lo elements
 * merged (ia and ib are the next of each run).
 */
#include "core/msort.h"

#include <string.h>

void egs_msort_start(struct egs_msort *s, size_t n, size_t size)
{
	if (s->captmp < n || s->size != size) { /* room is counted in elements of the last size */
		s->captmp = n + n / 2 + 64;
		free(s->tmp);
		s->tmp = egs_malloc(s->captmp * size);
	}
	s->n = n;
	s->size = size;
	s->w = 1;
	s->lo = 0;
	s->merging = false;
}

void egs_msort_cleanup(struct egs_msort *s)
{
	free(s->tmp);
	memset(s, 0, sizeof(*s));
}
