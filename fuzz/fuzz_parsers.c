/*
 * fuzz_parsers.c: libFuzzer target for the small parsers every API field goes through (src/core):
 * durations ("0d6h0m"), times, names (DNS labels and labels), integers in a range, GPU shares
 * ("0.2").  The first byte picks the parser; the rest is the text.  Checks, beyond memory safety:
 * a parser that accepts returns a value in its documented range and a reason when it refuses.
 */
#include "core/share.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size < 1 || size > 4096)
		return 0;
	char *s = malloc(size);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	const char *why = NULL;
	int64_t v = 0;
	int centi = 0;
	switch (data[0] % 6) {
	case 0:
		if (egs_duration_parse(s, &v, &why) ? v < 0 : !why)
			abort();
		break;
	case 1:
		(void)egs_time_parse(s, &v);
		break;
	case 2:
		if (egs_dns_label_valid(s, &why) ? strlen(s) > 63 || !strlen(s) : !why)
			abort();
		break;
	case 3:
		if (!egs_label_valid(s, &why) && !why)
			abort();
		break;
	case 4:
		if (egs_int_parse(s, -1000, 1000, &v) && (v < -1000 || v > 1000))
			abort();
		break;
	default:
		if (egs_share_parse(s, 800, &centi) && (centi < 1 || centi > 800))
			abort();
		break;
	}
	free(s);
	return 0;
}
