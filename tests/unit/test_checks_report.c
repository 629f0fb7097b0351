/*
 * test_checks_report.c: the JSON egs-agent sends (report.c): action results with and without the
 * checks array, heartbeat nodes (metrics left out when not read, lost GPUs, health reasons, workloads
 * from GPU processes), registration nodes with their check-port address, probe lines, and the UTF-8
 * cleaning of messages that come from hooks and commands.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/report.h"

#include <string.h>

static struct egs_dev_gpu gpus[2] = {{.uuid = "GPU-a", .index = 0}, {.uuid = "GPU-b", .index = 1}};
static struct egs_dev_node node = {
	.name = "h100-1", .instance_type = "p5", .gpu_model = "H100", .cloud_provider = "", .region = "eu-1",
	.address = "", .gpu_count = 2, .memory_mib = 81920, .gpus = gpus,
};

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static void test_result_with_and_without_checks(void **state)
{
	struct egs_check_report rep = {.phase = EGS_CHECK_PRE, .n = 2, .failed = 1};
	json_t *r, *c;
	(void)state;

	rep.results[0] = (struct egs_check_result){.name = "node-health", .status = EGS_CHECK_PASSED, .output = "ok"};
	rep.results[1] = (struct egs_check_result){.name = "gpu-processes", .status = EGS_CHECK_FAILED,
						   .output = "GPU 1 runs pid 7", .duration_ms = 3};
	r = egs_report_result("attach:g:n", "attach", "g", "n", false, "pre-check gpu-processes failed", NULL);
	assert_string_equal(str(r, "actionId"), "attach:g:n");
	assert_true(json_is_false(json_object_get(r, "ok")));
	assert_null(json_object_get(r, "checks")); /* egsd refuses unknown fields unless it asked for them */
	assert_int_equal(json_object_size(r), 6);
	json_decref(r);

	r = egs_report_result("attach:g:n", "attach", "g", "n", false, "x", &rep);
	c = json_object_get(r, "checks");
	assert_int_equal(json_array_size(c), 2);
	assert_string_equal(str(json_array_get(c, 1), "name"), "gpu-processes");
	assert_string_equal(str(json_array_get(c, 1), "status"), "failed");
	assert_string_equal(str(json_array_get(c, 1), "phase"), "pre");
	assert_string_equal(str(json_array_get(c, 1), "output"), "GPU 1 runs pid 7");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(c, 1), "durationMs")), 3);
	json_decref(r);

	assert_null(egs_report_result("bad\xff", "attach", "g", "n", true, "x", NULL));
}

static void test_message_cleaned_and_cut(void **state)
{
	char big[1000], out[16];
	json_t *r;
	(void)state;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	r = egs_report_result("i", "attach", "g", "n", true, big, NULL);
	assert_int_equal(strlen(str(r, "message")), EGS_REPORT_MSG_MAX - 1);
	json_decref(r);

	egs_report_clean("caf\xc3\xa9 \xff ok", out, sizeof(out));
	assert_string_equal(out, "caf\xc3\xa9 ? ok");
	egs_report_clean("abcdefghijklm\xc3\xa9", out, 15); /* never cuts inside a character */
	assert_string_equal(out, "abcdefghijklm");
}

static void test_heartbeat_node(void **state)
{
	struct egs_gpu_sample s[2] = {
		{.valid = EGS_GPU_TEMP | EGS_GPU_MEM_USED | EGS_GPU_XID, .temp_c = 61, .mem_used_mib = 40211,
		 .xid_count = 2, .last_xid = 13, .power_w = 999 /* not valid: must not be sent */},
		{.lost = true},
	};
	struct egs_gpu_proc p[1] = {{.gpu = 0, .pid = 4242, .mem_used_mib = 2048, .name = "python"}};
	json_t *o, *g, *w;
	(void)state;

	o = egs_report_heartbeat_node(&node, EGS_HEALTH_UNHEALTHY, "GPU 1 (GPU-b) fell off the bus", "gpr-1", s, p, 1);
	assert_string_equal(str(o, "health"), "Unhealthy");
	assert_string_equal(str(o, "healthReason"), "GPU 1 (GPU-b) fell off the bus");
	assert_string_equal(str(o, "attachedGpr"), "gpr-1");
	g = json_array_get(json_object_get(o, "gpus"), 0);
	assert_string_equal(str(g, "uuid"), "GPU-a");
	assert_true(json_real_value(json_object_get(g, "tempC")) == 61);
	assert_int_equal(json_integer_value(json_object_get(g, "memUsedMiB")), 40211);
	assert_null(json_object_get(g, "powerW"));
	assert_null(json_object_get(g, "utilPct"));
	assert_int_equal(json_integer_value(json_object_get(g, "xidCount")), 2);
	assert_int_equal(json_integer_value(json_object_get(g, "lastXid")), 13);
	g = json_array_get(json_object_get(o, "gpus"), 1);
	assert_true(json_is_true(json_object_get(g, "lost")));
	assert_int_equal(json_object_size(g), 3); /* uuid, index, lost */
	w = json_array_get(json_object_get(o, "workloads"), 0);
	assert_string_equal(str(w, "name"), "python");
	assert_string_equal(str(w, "namespace"), "");
	assert_int_equal(json_integer_value(json_object_get(w, "pid")), 4242);
	assert_string_equal(json_string_value(json_array_get(json_object_get(w, "gpus"), 0)), "GPU-a");
	json_decref(o);

	/* A GPU with nothing read is left out (egsd would take it as sampled at 0 %). */
	s[0].valid = 0;
	o = egs_report_heartbeat_node(&node, EGS_HEALTH_HEALTHY, "", "", s, NULL, 0);
	assert_int_equal(json_array_size(json_object_get(o, "gpus")), 1);
	assert_true(json_is_true(json_object_get(json_array_get(json_object_get(o, "gpus"), 0), "lost")));
	json_decref(o);

	/* Healthy: no reason; not sampled: no GPUs. */
	o = egs_report_heartbeat_node(&node, EGS_HEALTH_HEALTHY, "stale", "", NULL, NULL, 0);
	assert_null(json_object_get(o, "healthReason"));
	assert_int_equal(json_array_size(json_object_get(o, "gpus")), 0);
	assert_int_equal(json_array_size(json_object_get(o, "workloads")), 0);
	json_decref(o);
}

static void test_register_and_probe(void **state)
{
	struct egs_gpu_sample s = {.valid = EGS_GPU_POWER | EGS_GPU_POWER_LIMIT, .power_w = 312.5, .power_limit_w = 700};
	struct egs_gpu_proc p[2] = {{.gpu = 1, .pid = 1, .mem_used_mib = -1, .name = "a"},
				    {.gpu = 0, .pid = 2, .mem_used_mib = 5, .name = "b\x01\xfe"}};
	json_t *o, *procs;
	(void)state;

	o = egs_report_register_node(&node, "", "10.0.0.5:7946");
	assert_string_equal(str(o, "address"), "10.0.0.5:7946");
	assert_string_equal(str(o, "region"), "eu-1");
	assert_null(json_object_get(o, "cloudProvider"));
	assert_int_equal(json_array_size(json_object_get(o, "gpus")), 2);
	json_decref(o);
	o = egs_report_register_node(&node, "gpr-1", "");
	assert_null(json_object_get(o, "address"));
	json_decref(o);

	/* GPU sharing: attachedShared always (an empty list says "nothing shared"), features at registration. */
	static char *ids_v[] = {"gpr-a", "gpr-b"};
	struct egs_strlist ids = {.v = ids_v, .n = 2}, none = {0};
	o = egs_report_register_node(&node, "", "");
	egs_report_add_sharing(o, &ids, true);
	assert_int_equal(json_array_size(json_object_get(o, "attachedShared")), 2);
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "attachedShared"), 1)), "gpr-b");
	assert_string_equal(json_string_value(json_array_get(json_object_get(o, "features"), 0)), "sharing");
	json_decref(o);
	o = egs_report_heartbeat_node(&node, EGS_HEALTH_HEALTHY, "", "", NULL, NULL, 0);
	egs_report_add_sharing(o, &none, false);
	assert_true(json_is_array(json_object_get(o, "attachedShared")));
	assert_int_equal(json_array_size(json_object_get(o, "attachedShared")), 0);
	assert_null(json_object_get(o, "features"));
	json_decref(o);

	o = egs_report_probe_gpu(&node, 0, EGS_HEALTH_HEALTHY, "", &s, p, 2);
	assert_string_equal(str(o, "node"), "h100-1");
	assert_string_equal(str(o, "gpuModel"), "H100");
	assert_true(json_real_value(json_object_get(o, "powerW")) == 312.5);
	assert_true(json_real_value(json_object_get(o, "powerLimitW")) == 700);
	procs = json_object_get(o, "processes");
	assert_int_equal(json_array_size(procs), 1); /* only GPU 0's */
	assert_int_equal(json_integer_value(json_object_get(json_array_get(procs, 0), "pid")), 2);
	assert_string_equal(str(json_array_get(procs, 0), "name"), "b\x01?");
	assert_null(json_object_get(o, "healthReason"));
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_with_and_without_checks),
		cmocka_unit_test(test_message_cleaned_and_cut),
		cmocka_unit_test(test_heartbeat_node),
		cmocka_unit_test(test_register_and_probe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
