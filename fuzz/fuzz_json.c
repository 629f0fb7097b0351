/*
 * fuzz_json.c: libFuzzer target for the fast body parser (src/server/json_fast.c), differential
 * against jansson.  Beyond memory safety (it must never read past the input): whenever the fast
 * parser returns a tree, json_loadb with JSON_REJECT_DUPLICATES must accept the same bytes and
 * return an equal tree with the keys of every object in the same order; otherwise it aborts.
 */
#include "server/json_fast.h"

#include <stdlib.h>
#include <string.h>

static int same_order(json_t *a, json_t *b)
{
	if (json_is_array(a)) {
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!same_order(json_array_get(a, i), json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (!json_is_object(a))
		return 1;
	void *ia = json_object_iter(a), *ib = json_object_iter(b);
	for (; ia && ib; ia = json_object_iter_next(a, ia), ib = json_object_iter_next(b, ib))
		if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) != 0 ||
		    !same_order(json_object_iter_value(ia), json_object_iter_value(ib)))
			return 0;
	return !ia && !ib;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	json_t *f = egs_json_fast_object((const char *)data, size);
	if (!f)
		return 0;
	json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!j || !json_equal(f, j) || !same_order(f, j))
		abort();
	json_decref(f);
	json_decref(j);
	return 0;
}
