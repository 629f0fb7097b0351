/*
 * fuzz_agent.c: libFuzzer target for the agent protocol's messages (src/server/api_agent.c,
 * kubecred.c): registration, heartbeats (health, GPU samples, workloads), action results (with
 * health-check runs), slice-access and slice-namespace reports, and the GPR custom-resource
 * controller's apply and delete (api_agent_gpr.c), and the inference endpoint reports (api_agent_infer.c).  The first byte picks the message, the rest is its
 * JSON body, sent with cluster c1's agent token to an egsd running in this process whose world has
 * a GPR waiting for its attach results (egsd_harness.h).  Byte 4 polls the pending actions instead.
 * Checks as fuzz_body.c's: no 500, consistent envelopes, egsd's own assertions.
 */
#include "egsd_harness.h"

static const char *const paths[] = {
	"/api/v1/agent/register",	/* 0 */
	"/api/v1/agent/heartbeat",	/* 1 */
	"/api/v1/agent/actions/result", /* 2 */
	"/api/v1/agent/slice-access",	/* 3 */
	NULL,				/* 4: the poll */
	"/api/v1/agent/slice-namespaces", /* 5 */
	"/api/v1/agent/gprs",		/* 6: POST, a GPR custom resource's spec */
	"/api/v1/agent/gprs",		/* 7: DELETE */
	"/api/v1/agent/inference-endpoints", /* 8: an inference endpoint's observed state */
};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (!size)
		return 0;
	egs_fuzz_egsd_ready();
	unsigned pick = data[0] % (sizeof(paths) / sizeof(paths[0]));
	if (pick == 4)
		egs_fuzz_egsd_call("GET", "/api/v1/agent/actions?wait=0", EGS_FUZZ_AGENT, NULL, 0);
	else
		egs_fuzz_egsd_call(pick == 7 ? "DELETE" : "POST", paths[pick], EGS_FUZZ_AGENT, data + 1, size - 1);
	return 0;
}
