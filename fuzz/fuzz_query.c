/*
 * fuzz_query.c: libFuzzer target for the query strings of the GET routes (src/server/query.c and each
 * handler's own parameters: times, limits, continue tokens, filters).  The first byte picks a route, the
 * rest becomes its query string: bytes that cannot stand in a request target (controls, space, '#',
 * non-ASCII) are sent percent-encoded, so every input is a well-framed request that reaches the handler,
 * with the admin's key, cluster c1's agent token for the agent routes.  The routes added after the
 * first fuzzing round are here (audit, agent events, agent GPR links).  Checks as fuzz_body.c's: no 500,
 * consistent envelopes, egsd's own assertions.  The SSE watch and the agent's
 * long poll are left out: they hold their connection open.
 */
#include "egsd_harness.h"

#include <stdio.h>

static const struct {
	const char *path;
	enum egs_fuzz_who who;
} routes[] = {
	{ "/api/v1/audit", EGS_FUZZ_ADMIN },		/* 0 */
	{ "/api/v1/events", EGS_FUZZ_ADMIN },		/* 1 */
	{ "/api/v1/agent/events", EGS_FUZZ_AGENT },	/* 2 */
	{ "/api/v1/agent/gprs", EGS_FUZZ_AGENT },	/* 3 */
	{ "/api/v1/gpr/list", EGS_FUZZ_ADMIN },		/* 4 */
	{ "/api/v1/gpr", EGS_FUZZ_ADMIN },
	{ "/api/v1/usage", EGS_FUZZ_ADMIN },
	{ "/api/v1/gpus/series", EGS_FUZZ_ADMIN },
	{ "/api/v1/gpus/table", EGS_FUZZ_ADMIN },
	{ "/api/v1/alerts", EGS_FUZZ_ADMIN },		/* 9 */
	{ "/api/v1/inventory/list", EGS_FUZZ_ADMIN },
	{ "/api/v1/queue", EGS_FUZZ_ADMIN },
	{ "/api/v1/schedule", EGS_FUZZ_ADMIN },
	{ "/api/v1/insights/queue", EGS_FUZZ_ADMIN },
	{ "/api/v1/slice-workspace", EGS_FUZZ_ADMIN },	/* 14 */
	{ "/api/v1/slice-workspace/kube-config", EGS_FUZZ_ADMIN },
	{ "/api/v1/workloads", EGS_FUZZ_ADMIN },
	{ "/api/v1/notifications", EGS_FUZZ_ADMIN },
	{ "/api/v1/gpr-template", EGS_FUZZ_ADMIN },
	{ "/api/v1/inference-endpoint/list", EGS_FUZZ_ADMIN }, /* 19 */
	{ "/api/v1/inference-endpoint", EGS_FUZZ_ADMIN },
	{ "/api/v1/agent/inference-endpoints", EGS_FUZZ_AGENT },
};

#define QUERY_MAX 120 /* 3 bytes a byte at worst: the target fits, and the harness's 1 KiB request head */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char target[512];
	if (!size)
		return 0;
	egs_fuzz_egsd_ready();
	size_t r = data[0] % (sizeof(routes) / sizeof(routes[0]));
	int n = snprintf(target, sizeof(target), "%s?", routes[r].path);
	for (size_t i = 1; i < size && i <= QUERY_MAX; i++) {
		unsigned char c = data[i];
		bool plain = c > 0x20 && c < 0x7f && c != '#';
		n += snprintf(target + n, sizeof(target) - (size_t)n, plain ? "%c" : "%%%02X", c);
	}
	egs_fuzz_egsd_call("GET", target, routes[r].who, NULL, 0);
	return 0;
}
