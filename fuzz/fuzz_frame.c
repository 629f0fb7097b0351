/*
 * fuzz_frame.c: libFuzzer target for egsd's HTTP request parser (src/server/frame.c), the first code
 * that reads a client's bytes.  The input is fed as the connection front feeds it
 * (tests/unit/frame_feed.h): whole, byte by byte, and in pieces of sizes drawn from a seed the input
 * picks.  Checks, beyond memory safety: the three transcripts (requests, their fields and bodies, the
 * refusal) are the same, a refusal is final, every reason has a message, every header field counted is
 * found, and no request's body is over the bound.
 */
#include "../tests/unit/frame_feed.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	enum egs_frame_reason w0, w1, w2;
	rng_seed(size ? data[0] : 0);
	char *whole = frame_transcript(data, size, 0, &w0);
	char *bytes = frame_transcript(data, size, 1, &w1);
	char *pieces = frame_transcript(data, size, 2, &w2);
	if (w0 != w1 || w0 != w2 || strcmp(whole, bytes) != 0 || strcmp(whole, pieces) != 0)
		abort(); /* the parse depends on how the bytes arrived */
	if (w0 >= EGS_FRAME_NREASONS || !egs_frame_reasons[w0].message)
		abort();
	free(whole);
	free(bytes);
	free(pieces);
	return 0;
}
