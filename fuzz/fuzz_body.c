/*
 * fuzz_body.c: libFuzzer target for the JSON body validation of every route that takes one.  The
 * first byte of the input picks a route (modulo the table below), the rest is sent as its body, by
 * the admin (or anonymously for /auth), in a well-framed request to an egsd running in this process
 * (egsd_harness.h), so every input reaches the body check (src/server/body_check.c) and the handler.
 * Checks, beyond memory safety and egsd's own assertions (every handler replies exactly once): no 500,
 * envelopes whose statusCode is the HTTP status, an errorKey on every error.  The agent's routes have
 * their own target (fuzz_agent.c).
 */
#include "egsd_harness.h"

#include <stdint.h>

static const struct {
	const char *method, *path;
	enum egs_fuzz_who who;
} routes[] = {
	{ "POST", "/api/v1/gpr", EGS_FUZZ_ADMIN },	/* 0 */
	{ "PUT", "/api/v1/gpr", EGS_FUZZ_ADMIN },	/* 1 */
	{ "POST", "/api/v1/gpr/waittime", EGS_FUZZ_ADMIN },
	{ "DELETE", "/api/v1/gpr", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/slice-workspace", EGS_FUZZ_ADMIN },	/* 4 */
	{ "PUT", "/api/v1/slice-workspace", EGS_FUZZ_ADMIN },	/* 5 */
	{ "DELETE", "/api/v1/slice-workspace", EGS_FUZZ_ADMIN },
	{ "PUT", "/api/v1/slice-workspace/policy", EGS_FUZZ_ADMIN }, /* 7 */
	{ "DELETE", "/api/v1/slice-workspace/policy", EGS_FUZZ_ADMIN },
	{ "PUT", "/api/v1/settings/policy", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/gpr-template", EGS_FUZZ_ADMIN },	/* 10 */
	{ "PUT", "/api/v1/gpr-template", EGS_FUZZ_ADMIN },
	{ "DELETE", "/api/v1/gpr-template", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/gpr-template-binding", EGS_FUZZ_ADMIN }, /* 13 */
	{ "PUT", "/api/v1/gpr-template-binding", EGS_FUZZ_ADMIN },
	{ "DELETE", "/api/v1/gpr-template-binding", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/auth", EGS_FUZZ_ANON },	/* 16 */
	{ "POST", "/api/v1/api-key", EGS_FUZZ_ADMIN },	/* 17 */
	{ "DELETE", "/api/v1/api-key", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/projects", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/clusters", EGS_FUZZ_ADMIN },	/* 20 */
	{ "PUT", "/api/v1/clusters", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/slice-workspace/kube-config", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/slice-workspace/kube-config/regenerate", EGS_FUZZ_ADMIN },
	{ "PUT", "/api/v1/nodes/thresholds", EGS_FUZZ_ADMIN }, /* 24 */
	{ "POST", "/api/v1/gpr/approve", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/gpr/reject", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/gpr/evict", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/queue/top", EGS_FUZZ_ADMIN },
	{ "PUT", "/api/v1/settings/observability", EGS_FUZZ_ADMIN }, /* 29 */
	{ "PUT", "/api/v1/prices", EGS_FUZZ_ADMIN },	/* 30 */
	{ "POST", "/api/v1/debug/clock", EGS_FUZZ_ADMIN },
	{ "GET", "/api/v1/slice-workspace/kube-config", EGS_FUZZ_ADMIN },
	{ "POST", "/api/v1/inference-endpoint", EGS_FUZZ_ADMIN }, /* 33: modelSpec, or rawModelSpec's YAML */
	{ "DELETE", "/api/v1/inference-endpoint", EGS_FUZZ_ADMIN },
};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (!size)
		return 0;
	egs_fuzz_egsd_ready();
	size_t r = data[0] % (sizeof(routes) / sizeof(routes[0]));
	egs_fuzz_egsd_call(routes[r].method, routes[r].path, routes[r].who, data + 1, size - 1);
	return 0;
}
