/*
 * test_policy_wire.c: the JSON form of a policy (src/server/policy_wire.h): a full policy parses and
 * writes back canonically (durations as 6h0m0s, only what is set, null = unset); what the parser
 * refuses names the member by its wire path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/policy_wire.h"

/* Parses text; on success returns the canonical JSON text (caller frees), else NULL with field set. */
static char *round_trip(const char *text, const char *const *skip, char *field, size_t fieldsz)
{
	char why[400];
	struct egs_policy p;
	json_t *o = json_loads(text, 0, NULL), *back;
	char *out = NULL;
	assert_non_null(o);
	egs_policy_init(&p);
	if (egs_policy_parse(o, skip, &p, field, fieldsz, why, sizeof(why))) {
		back = egs_policy_json(&p);
		out = json_dumps(back, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(back);
	} else {
		assert_non_null(strstr(why, field)); /* the sentence names the member */
	}
	egs_policy_cleanup(&p);
	json_decref(o);
	return out;
}

static void test_full_policy_round_trip(void **unused)
{
	(void)unused;
	static const char *const skip[] = {"workspaceName", NULL};
	char field[96];
	char *out = round_trip("{\"workspaceName\": \"w\", \"maxGPRs\": 0, \"maxExitDurationPerGPR\": \"0d6h0m\","
			       " \"priorityRange\": {\"max\": 200, \"min\": 1}, \"gpuShapes\": [\"B\", \"A\", \"B\"],"
			       " \"maxGPUPerGpr\": 16, \"maxMemoryPerGpr\": 640, \"concurrentGpuQuota\": 0,"
			       " \"maxNodesPerGpr\": 4, \"enableAutoEviction\": false, \"requeueOnFailure\": null,"
			       " \"softLimits\": {\"maxExitDurationPerGPR\": \"90m\", \"gpuShapes\": [\"A\"], \"maxGPRs\": null}}",
			       skip, field, sizeof(field));
	assert_non_null(out);
	assert_string_equal(out, "{\"concurrentGpuQuota\":0,\"enableAutoEviction\":false,\"gpuShapes\":[\"B\",\"A\"],"
				 "\"maxExitDurationPerGPR\":\"6h0m0s\",\"maxGPRs\":0,\"maxGPUPerGpr\":16,"
				 "\"maxMemoryPerGpr\":640,\"maxNodesPerGpr\":4,\"priorityRange\":{\"max\":200,\"min\":1},"
				 "\"softLimits\":{\"gpuShapes\":[\"A\"],\"maxExitDurationPerGPR\":\"1h30m0s\"}}");
	free(out);
	/* Nothing set is an empty object; an empty gpuShapes list allows every shape (not set). */
	out = round_trip("{\"gpuShapes\": [], \"softLimits\": {}}", NULL, field, sizeof(field));
	assert_string_equal(out, "{}");
	free(out);
}

static void test_refusals_name_the_member(void **unused)
{
	(void)unused;
	static const struct {
		const char *text, *field;
	} bad[] = {
		{"{\"workspaceName\": \"w\"}", "workspaceName"}, /* not skipped here */
		{"{\"maxGPRs\": -1}", "maxGPRs"},
		{"{\"maxGPRs\": 1.0}", "maxGPRs"},
		{"{\"maxNodesPerGpr\": 1025}", "maxNodesPerGpr"},
		{"{\"maxExitDurationPerGPR\": \"0s\"}", "maxExitDurationPerGPR"},
		{"{\"maxExitDurationPerGPR\": 60}", "maxExitDurationPerGPR"},
		{"{\"priorityRange\": [1, 2]}", "priorityRange"},
		{"{\"priorityRange\": {\"min\": 3, \"max\": 2}}", "priorityRange"},
		{"{\"priorityRange\": {\"min\": 3}}", "priorityRange.max"},
		{"{\"priorityRange\": {\"min\": 1, \"max\": 2, \"x\": 0}}", "priorityRange.x"},
		{"{\"gpuShapes\": [\"a b\"]}", "gpuShapes"},
		{"{\"enableAutoEviction\": 0}", "enableAutoEviction"},
		{"{\"softLimits\": {\"requeueOnFailure\": true}}", "softLimits.requeueOnFailure"},
		{"{\"softLimits\": {\"priorityRange\": {\"min\": 0, \"max\": 2}}}", "softLimits.priorityRange.min"},
		{"{\"maxGPUPerGpr\": 8, \"softLimits\": {\"maxGPUPerGpr\": 9}}", "softLimits.maxGPUPerGpr"},
		{"{\"softLimits\": \"x\"}", "softLimits"},
	};
	char field[96];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = round_trip(bad[i].text, NULL, field, sizeof(field));
		if (out)
			fail_msg("accepted %s as %s", bad[i].text, out);
		if (strcmp(field, bad[i].field) != 0)
			fail_msg("%s: field %s, expected %s", bad[i].text, field, bad[i].field);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_policy_round_trip),
		cmocka_unit_test(test_refusals_name_the_member),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
