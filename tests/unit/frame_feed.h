/*
 * frame_feed.h: drives egsd's request parser (server/frame.h) the way the connection front does, for
 * tests/unit/test_frame.c and fuzz/fuzz_frame.c: the input arrives in pieces that are appended to a
 * buffer; after each piece every complete request is taken from the buffer's front, and the rest is
 * kept for the next piece.  The result is a transcript (each request's method, target, header fields,
 * close flag and body, then the refusal if any), so that feeding the same bytes whole, byte by byte or
 * in random pieces can be compared: the parse must not depend on how the bytes arrive.
 * Header-only, test code: aborts on out of memory.
 */
#ifndef EGS_TESTS_FRAME_FEED_H
#define EGS_TESTS_FRAME_FEED_H

#include "server/frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

struct feed_text {
	char *p;
	size_t len, cap;
};

static void feed_put(struct feed_text *t, const void *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		if (!t->p)
			abort();
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void feed_puts(struct feed_text *t, const char *s)
{
	feed_put(t, s, strlen(s));
}

static void feed_request(struct feed_text *t, const unsigned char *p, const struct egs_frame_req *req)
{
	char line[96];
	if (req->body_len > EGS_FRAME_MAX_BODY || req->head_len > EGS_FRAME_MAX_HEAD)
		abort(); /* the bounds hold */
	snprintf(line, sizeof(line), "M%d v1.%d close=%d ka=%d T", (int)req->method, req->http10 ? 0 : 1, req->close,
		 req->keep_alive);
	feed_puts(t, line);
	feed_put(t, p + req->target_off, req->target_len);
	struct egs_frame_field f[8];
	size_t k, done = 0;
	while ((k = egs_frame_fields(p, req, f, done, 8)) > 0) {
		for (size_t i = 0; i < k; i++) {
			feed_puts(t, " H ");
			feed_put(t, f[i].name, f[i].name_len);
			feed_puts(t, "=");
			feed_put(t, f[i].value, f[i].value_len);
		}
		done += k;
	}
	if (done != req->nfields)
		abort(); /* every field counted is found */
	snprintf(line, sizeof(line), " B%zu:", req->body_len);
	feed_puts(t, line);
	feed_put(t, p + req->head_len, req->body_len);
	feed_puts(t, "\n");
}

/* Feeds data[0..n) in pieces: mode 0 whole, 1 byte by byte, 2 random pieces of 1 to 97 bytes (from
 * the rng's sequence).  Returns the transcript (caller frees); *why gets the refusal or OK. */
static char *frame_transcript(const unsigned char *data, size_t n, int mode, enum egs_frame_reason *why)
{
	struct egs_frame f;
	struct feed_text t = { NULL, 0, 0 };
	unsigned char *buf = malloc(n + 1);
	size_t len = 0, fed = 0;
	if (!buf)
		abort();
	egs_frame_init(&f);
	feed_puts(&t, "");
	*why = EGS_FRAME_OK;
	while (fed < n && !*why) {
		size_t piece = mode == 0 ? n : mode == 1 ? 1 : 1 + rng_below(97);
		if (piece > n - fed)
			piece = n - fed;
		memcpy(buf + len, data + fed, piece);
		len += piece;
		fed += piece;
		size_t at = 0, used;
		const struct egs_frame_req *req;
		while (!(*why = egs_frame_parse(&f, buf + at, len - at, &used, &req)) && used) {
			if (req)
				feed_request(&t, buf + at, req);
			at += used;
		}
		memmove(buf, buf + at, len - at);
		len -= at;
	}
	if (*why) {
		size_t used;
		const struct egs_frame_req *req;
		if (egs_frame_parse(&f, buf, len, &used, &req) != *why || used || req)
			abort(); /* a refusal is final */
		char line[32];
		snprintf(line, sizeof(line), "R%d\n", (int)*why);
		feed_puts(&t, line);
	}
	free(buf);
	return t.p;
}

#endif
