/*
 * buf.h: a growable byte buffer, the one every writer of bytes of unknown length appends to (a GPR's
 * rendered view, a PostgreSQL batch's binary arrays and the change log's text arrays, the answers
 * the client and the agent read with curl, the agent's registration body).
 *
 * Caller-owned storage; zero-initialised is empty.  Room grows by doubling (256 bytes first) and is
 * kept until egs_buf_cleanup, so a buffer emptied by setting len to 0 and reused makes no fresh
 * allocations once it has held its largest contents.  Every reserve leaves one byte more than asked
 * free, so egs_buf_cstr can always end the contents with a NUL.  No cap of its own: a buffer
 * filled from network input appends through egs_buf_put_max.  The appends are inline: they are the
 * inner loop of a rendered status read.
 */
#ifndef EGS_BUF_H
#define EGS_BUF_H

#include "core/common.h"

#include <string.h>

struct egs_buf {
	char *p; /* owned; NULL while nothing was ever reserved */
	size_t len, cap;
};

/* Grows b to room for n more bytes and a NUL (egs_buf_reserve's slow path). */
void egs_buf_grow(struct egs_buf *b, size_t n);
/* Frees b's bytes and leaves it empty. */
void egs_buf_cleanup(struct egs_buf *b);

/* Makes room for n more bytes and a NUL after them: b->p + b->len has n + 1 writable bytes. */
static inline void egs_buf_reserve(struct egs_buf *b, size_t n)
{
	if (n >= b->cap - b->len)
		egs_buf_grow(b, n);
}

/* Appends n bytes of s (borrowed). */
static inline void egs_buf_put(struct egs_buf *b, const void *s, size_t n)
{
	egs_buf_reserve(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* Appends n bytes of s (borrowed) unless the contents would pass max bytes: false, and nothing
 * appended, then (the hard cap of a buffer filled from network input; b->len <= max). */
static inline bool egs_buf_put_max(struct egs_buf *b, const void *s, size_t n, size_t max)
{
	if (n > max - b->len)
		return false;
	egs_buf_put(b, s, n);
	return true;
}

/* Appends one byte. */
static inline void egs_buf_putc(struct egs_buf *b, char c)
{
	egs_buf_reserve(b, 1);
	b->p[b->len++] = c;
}

/* Appends a string literal (its length known at compile time). */
#define EGS_BUF_LIT(b, lit) egs_buf_put((b), (lit), sizeof(lit) - 1)

/* Ends the contents with a NUL (not counted in len) and returns them (borrowed: valid until the
 * next append or cleanup); "" for a buffer never written. */
static inline const char *egs_buf_cstr(struct egs_buf *b)
{
	egs_buf_reserve(b, 0);
	b->p[b->len] = '\0';
	return b->p;
}

#endif
