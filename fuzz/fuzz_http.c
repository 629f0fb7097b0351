/*
 * fuzz_http.c: libFuzzer target for egsd's whole request path: the input is sent as raw bytes on a
 * TCP connection to an egsd running in this process (egsd_harness.h), then the connection's write side
 * is shut down.  The bytes go through the connection front (framing, src/server/conn.c and frame.c),
 * evhttp, the dispatcher (routes, authentication, the body check) and the handlers.  Seeds carry the
 * harness's admin key (EGS_FUZZ_ADMIN_KEY), so the fuzzer starts with requests that get past
 * authentication.  Checks, beyond memory safety and egsd's own assertions: no answer is a 500, every
 * JSON envelope's statusCode is its HTTP status, and every error envelope has an errorKey.
 */
#include "egsd_harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	egs_fuzz_egsd_ready();
	size_t len;
	char *answer = egs_fuzz_egsd_raw(data, size, &len);
	egs_fuzz_check_answer(answer, len);
	free(answer);
	return 0;
}
