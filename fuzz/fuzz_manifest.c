/*
 * fuzz_manifest.c: libFuzzer target for egsctl's YAML manifest loader (src/client/manifest.c): YAML
 * documents (anchors, aliases, tags, multi-document streams) into typed objects, then the cross-object
 * checks of egs_manifest_finish.  Checks, beyond memory safety: a refused input appends nothing and
 * says why.
 */
#include "client/manifest.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size > 64 * 1024)
		return 0;
	struct egs_manifest m;
	char err[2048] = "";
	egs_manifest_init(&m);
	enum egs_err rc = egs_manifest_parse(&m, (const char *)data, size, "fuzz.yaml", err, sizeof(err));
	if (rc != EGS_OK && (m.n || !err[0]))
		abort();
	if (rc == EGS_OK)
		(void)egs_manifest_finish(&m, err, sizeof(err));
	egs_manifest_cleanup(&m);
	return 0;
}
