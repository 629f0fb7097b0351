/*
 * buf.c: the growth of a struct egs_buf (buf.h).  Invariant: len < cap once anything was reserved
 * (the room for a NUL), and cap is 0 or 256 times a power of two.
 */
#include "core/buf.h"

void egs_buf_grow(struct egs_buf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	EGS_ASSERT(n < SIZE_MAX / 2 - b->len); /* a length no allocation could hold is a bug */
	while (cap <= b->len + n)
		cap *= 2;
	b->p = egs_realloc(b->p, cap);
	b->cap = cap;
}

void egs_buf_cleanup(struct egs_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
