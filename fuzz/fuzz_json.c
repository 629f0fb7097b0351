/*
 * fuzz_json.c: libFuzzer target for the fast body parser (src/server/json_fast.c), differential
 * against jansson.  Beyond memory safety (it must never read past the input): whenever the fast
 * parser returns a tree, json_loadb with JSON_REJECT_DUPLICATES must accept the same bytes and
 * return an equal tree with the keys of every object in the same order; otherwise it aborts.
 */
#include "server/json_fast.h"

#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	json_t *f = egs_json_fast_object((const char *)data, size);
	if (!f)
		return 0;
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j || !json_equal(f, j) || !egs_json_same_order(f, j))
		abort();
	json_decref(f);
	json_decref(j);
	return 0;
}
