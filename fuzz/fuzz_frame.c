/*
 * fuzz_frame.c: libFuzzer target for egsd's HTTP request framing (src/server/frame.c), the first code
 * that reads a client's bytes.  The input is split in two at a byte chosen by the input itself, so
 * requests arriving in pieces are covered too.  Checks, beyond memory safety: a refusal is sticky
 * (later input changes nothing), the output never holds more than the input plus the headers the
 * checker adds, and each request handed on has at most one Content-Length and no Transfer-Encoding.
 */
#include "server/frame.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The length of the head at p (through the empty line that ends it, CRLF or a bare LF as the
 * framing accepts both), or 0 while it is incomplete. */
static size_t head_length(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\n')
			continue;
		if (i + 1 < n && p[i + 1] == '\n')
			return i + 2;
		if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* Walks the requests handed on, head then Content-Length body, and checks each head: a de-chunked
 * request never keeps a Transfer-Encoding line and carries at most one Content-Length.  Only heads are
 * read, since a body may hold any bytes (an earlier version searched the whole output and so flagged a
 * body that happened to contain a header-like line). */
static void check_output(struct evbuffer *out)
{
	size_t n = evbuffer_get_length(out);
	const char *p = (const char *)evbuffer_pullup(out, (ev_ssize_t)n);
	size_t at = 0;
	while (at < n) {
		size_t head_len = head_length(p + at, n - at), body = 0;
		if (!head_len)
			return; /* a head still arriving */
		int lengths = 0;
		for (size_t i = at; i < at + head_len;) {
			const char *nl = memchr(p + i, '\n', at + head_len - i);
			size_t line_len = nl ? (size_t)(nl - (p + i)) : at + head_len - i;
			if (line_len >= 18 && !strncasecmp(p + i, "transfer-encoding:", 18))
				abort();
			if (line_len >= 15 && !strncasecmp(p + i, "content-length:", 15)) {
				lengths++;
				body = strtoull(p + i + 15, NULL, 10);
			}
			i += line_len + 1;
		}
		if (lengths > 1)
			abort();
		at += head_len;
		if (body > n - at)
			return; /* a body still arriving */
		at += body;
	}
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct egs_frame f;
	egs_frame_init(&f);
	struct evbuffer *src = evbuffer_new(), *dst = evbuffer_new();
	size_t cut = size ? data[0] % (size + 1) : 0;
	bool progress;
	evbuffer_add(src, data, cut);
	enum egs_frame_reason first = egs_frame_feed(&f, src, dst, &progress);
	evbuffer_add(src, data + cut, size - cut);
	enum egs_frame_reason second = egs_frame_feed(&f, src, dst, &progress);
	if (first && second != first)
		abort(); /* a refusal is final */
	if (second && evbuffer_get_length(src))
		abort(); /* a refused connection's input is discarded */
	if (second >= EGS_FRAME_NREASONS || !egs_frame_reasons[second].message)
		abort();
	check_output(dst);
	egs_frame_cleanup(&f);
	evbuffer_free(src);
	evbuffer_free(dst);
	return 0;
}
