/*
 * test_devices_mock_timeline.c: the mock backend's scripted timelines: a temperature ramp, step keys,
 * XID events (fatal and not), uncorrectable ECC errors, a GPU that falls off the bus, a node that stops
 * answering and answers again, scripted processes, the health rules applied to all of them, and the
 * errors a bad timeline gives (with their line numbers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/devices.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define T0 1700000000LL

static struct egs_devices *parse_ok(const char *yaml)
{
	struct egs_devices *d = NULL;
	char err[512] = "";

	if (egs_devices_mock_parse(yaml, strlen(yaml), "devices.yaml", "worker-1", &d, err, sizeof(err)) != EGS_OK)
		fail_msg("parse failed: %s", err);
	egs_devices_mock_set_start(d, T0);
	return d;
}

static void expect_error(const char *yaml, int line, const char *want)
{
	struct egs_devices *d = NULL;
	char err[512], prefix[64];

	assert_int_equal(egs_devices_mock_parse(yaml, strlen(yaml), "devices.yaml", "worker-1", &d, err, sizeof(err)),
			 EGS_ERR_INVALID);
	assert_null(d);
	snprintf(prefix, sizeof(prefix), "devices.yaml:%d: ", line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("error '%s' does not start with '%s' or lacks '%s'", err, prefix, want);
}

/* Samples node 0 at T0 + t; returns the health and fills s and why. */
static enum egs_health sample_at(struct egs_devices *d, int64_t t, struct egs_gpu_sample *s, char *why,
				 size_t whysz, enum egs_err *rc)
{
	enum egs_health h = EGS_HEALTH_HEALTHY;
	enum egs_err r = egs_devices_sample(d, 0, T0 + t, &h, why, whysz, s);
	if (rc)
		*rc = r;
	return h;
}

#define NODE_HEAD                                                                                          \
	"nodes:\n"                                                                                         \
	"  - name: n1\n"                                                                                   \
	"    instanceType: p5\n"                                                                           \
	"    gpuModel: H100\n"                                                                             \
	"    memoryMiB: 81920\n"

static void test_temperature_ramp(void **state)
{
	struct egs_devices *d = parse_ok(NODE_HEAD "    gpuCount: 2\n"
						   "    gpus:\n"
						   "      - timeline:\n"
						   "          - {at: 0, tempC: 40, utilPct: 0}\n"
						   "          - {at: 100, tempC: 90, utilPct: 100, powerW: 650}\n"
						   "          - {at: 2m, tempC: 95}\n"
						   "      - {}\n");
	struct egs_gpu_sample s[2], idle[2];
	char why[160];
	(void)state;

	assert_int_equal(sample_at(d, -10, idle, why, sizeof(why), NULL), EGS_HEALTH_HEALTHY);
	assert_true(idle[0].temp_c >= 33 && idle[0].temp_c <= 37); /* before the start: idle */

	sample_at(d, 0, s, why, sizeof(why), NULL);
	assert_true(fabs(s[0].temp_c - 40) < 1e-9);
	sample_at(d, 50, s, why, sizeof(why), NULL);
	assert_true(fabs(s[0].temp_c - 65) < 1e-9);
	assert_true(fabs(s[0].util_pct - 50) < 1e-9);
	/* powerW is first set at 100: the idle value holds until then, then steps. */
	assert_true(s[0].power_w >= 68 && s[0].power_w <= 72);
	sample_at(d, 110, s, why, sizeof(why), NULL);
	assert_true(fabs(s[0].temp_c - 92.5) < 1e-9);
	assert_true(fabs(s[0].power_w - 650) < 1e-9);
	assert_true(fabs(s[0].util_pct - 100) < 1e-9);
	assert_int_equal(sample_at(d, 10000, s, why, sizeof(why), NULL), EGS_HEALTH_HEALTHY);
	assert_true(fabs(s[0].temp_c - 95) < 1e-9); /* holds after the last point */
	assert_string_equal(why, "");
	/* The other GPU is untouched. */
	assert_true(s[1].temp_c == idle[1].temp_c && s[1].power_w == idle[1].power_w);
	assert_int_equal(s[1].mem_total_mib, 81920);
	egs_devices_free(d);
}

static void test_xid_and_ecc(void **state)
{
	struct egs_devices *d = parse_ok(NODE_HEAD "    gpuCount: 2\n"
						   "    gpus:\n"
						   "      - timeline:\n"
						   "          - {at: 10, xid: 13}\n"
						   "          - {at: 20, xid: 79}\n"
						   "      - timeline:\n"
						   "          - {at: 5, eccErrors: 0, memTotalMiB: 80000}\n"
						   "          - {at: 30, eccErrors: 2}\n");
	struct egs_gpu_sample s[2];
	char why[160];
	enum egs_err rc;
	(void)state;

	assert_int_equal(sample_at(d, 15, s, why, sizeof(why), &rc), EGS_HEALTH_HEALTHY);
	assert_int_equal(rc, EGS_OK);
	assert_int_equal(s[0].xid_count, 1);
	assert_int_equal(s[0].last_xid, 13); /* an application fault: not a health problem */
	assert_int_equal(s[0].fatal_xid, 0);
	assert_int_equal(s[1].mem_total_mib, 80000);
	assert_true(s[1].valid & EGS_GPU_ECC);

	assert_int_equal(sample_at(d, 25, s, why, sizeof(why), &rc), EGS_HEALTH_UNHEALTHY);
	assert_int_equal(rc, EGS_OK); /* it answered; it is just not healthy */
	assert_int_equal(s[0].xid_count, 2);
	assert_int_equal(s[0].fatal_xid, 79);
	assert_non_null(strstr(why, "GPU 0"));
	assert_non_null(strstr(why, "XID 79"));
	egs_devices_free(d);

	d = parse_ok(NODE_HEAD "    gpuCount: 2\n"
			       "    gpus:\n"
			       "      - {}\n"
			       "      - timeline: [{at: 30, eccErrors: 2}]\n");
	assert_int_equal(sample_at(d, 29, s, why, sizeof(why), NULL), EGS_HEALTH_HEALTHY);
	assert_int_equal(sample_at(d, 30, s, why, sizeof(why), NULL), EGS_HEALTH_UNHEALTHY);
	assert_non_null(strstr(why, "GPU 1"));
	assert_non_null(strstr(why, "2 uncorrectable ECC errors"));
	egs_devices_free(d);
}

static void test_gpu_falls_off_the_bus(void **state)
{
	struct egs_devices *d = parse_ok(NODE_HEAD "    gpuCount: 2\n"
						   "    gpus:\n"
						   "      - {}\n"
						   "      - uuid: GPU-lost-1\n"
						   "        timeline:\n"
						   "          - {at: 0, processes: [{pid: 7, name: train}]}\n"
						   "          - {at: 120, lost: true}\n"
						   "          - {at: 200, lost: false}\n");
	struct egs_gpu_sample s[2];
	struct egs_gpu_proc procs[4];
	size_t n = 0;
	char why[160];
	(void)state;

	assert_int_equal(sample_at(d, 119, s, why, sizeof(why), NULL), EGS_HEALTH_HEALTHY);
	assert_int_equal(egs_devices_processes(d, 0, T0 + 119, procs, 4, &n), EGS_OK);
	assert_int_equal(n, 1);
	assert_int_equal(sample_at(d, 120, s, why, sizeof(why), NULL), EGS_HEALTH_UNHEALTHY);
	assert_true(s[1].lost);
	assert_int_equal(s[1].valid, 0);
	assert_false(s[0].lost);
	assert_string_equal(why, "GPU 1 (GPU-lost-1) fell off the bus");
	/* A lost GPU lists no processes. */
	assert_int_equal(egs_devices_processes(d, 0, T0 + 150, procs, 4, &n), EGS_OK);
	assert_int_equal(n, 0);
	assert_int_equal(sample_at(d, 200, s, why, sizeof(why), NULL), EGS_HEALTH_HEALTHY);
	egs_devices_free(d);
}

static void test_node_stops_answering(void **state)
{
	struct egs_devices *d = parse_ok(NODE_HEAD "    gpuCount: 1\n"
						   "    timeline:\n"
						   "      - {at: 300, silent: true}\n"
						   "      - {at: 10m, silent: false}\n");
	struct egs_gpu_sample s[1];
	struct egs_gpu_proc procs[1];
	size_t n;
	char why[160];
	enum egs_err rc;
	(void)state;

	assert_int_equal(sample_at(d, 299, s, why, sizeof(why), &rc), EGS_HEALTH_HEALTHY);
	assert_int_equal(rc, EGS_OK);
	assert_int_equal(sample_at(d, 300, s, why, sizeof(why), &rc), EGS_HEALTH_UNSCHEDULABLE);
	assert_int_equal(rc, EGS_ERR_IO);
	assert_string_equal(why, "node n1 does not answer");
	assert_int_equal(egs_devices_processes(d, 0, T0 + 300, procs, 1, &n), EGS_ERR_IO);
	assert_int_equal(sample_at(d, 600, s, why, sizeof(why), &rc), EGS_HEALTH_HEALTHY);
	assert_int_equal(rc, EGS_OK);
	egs_devices_free(d);
}

static void test_processes(void **state)
{
	struct egs_devices *d = parse_ok(NODE_HEAD "    gpuCount: 3\n"
						   "    address: 10.0.0.5:7946\n"
						   "    gpus:\n"
						   "      - timeline:\n"
						   "          - at: 10\n"
						   "            processes:\n"
						   "              - {pid: 4242, name: python, memUsedMiB: 2048}\n"
						   "              - {pid: 4243}\n"
						   "          - {at: 20, processes: []}\n"
						   "      - {}\n"
						   "      - timeline: [{at: 15, processes: [{pid: 99, name: nccl-test}]}]\n");
	struct egs_gpu_proc p[8];
	size_t n = 99;
	(void)state;

	assert_string_equal(d->nodes[0].address, "10.0.0.5:7946");
	assert_int_equal(egs_devices_processes(d, 0, T0 + 5, p, 8, &n), EGS_OK);
	assert_int_equal(n, 0);
	assert_int_equal(egs_devices_processes(d, 0, T0 + 15, p, 8, &n), EGS_OK);
	assert_int_equal(n, 3);
	assert_int_equal(p[0].gpu, 0);
	assert_int_equal(p[0].pid, 4242);
	assert_string_equal(p[0].name, "python");
	assert_int_equal(p[0].mem_used_mib, 2048);
	assert_int_equal(p[1].pid, 4243);
	assert_string_equal(p[1].name, "?");
	assert_int_equal(p[1].mem_used_mib, -1);
	assert_int_equal(p[2].gpu, 2);
	assert_int_equal(p[2].pid, 99);
	/* Only max are stored, but all are counted. */
	assert_int_equal(egs_devices_processes(d, 0, T0 + 15, p, 1, &n), EGS_OK);
	assert_int_equal(n, 3);
	assert_int_equal(egs_devices_processes(d, 0, T0 + 25, p, 8, &n), EGS_OK);
	assert_int_equal(n, 1);
	assert_int_equal(p[0].pid, 99);
	egs_devices_free(d);
}

static void test_timeline_errors(void **state)
{
	(void)state;
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline:\n"
			       "          - {at: 20, tempC: 50}\n"
			       "          - {at: 10, tempC: 60}\n",
		     10, "timeline[1]: at 10s comes before the previous point's 20s");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{tempC: 50}]\n",
		     8, "timeline[0]: missing key 'at'");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: soon}]\n",
		     8, "at: expected seconds or a duration");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, tempC: hot}]\n",
		     8, "tempC: expected a number, got 'hot'");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, utilPct: 120}]\n",
		     8, "utilPct: 120 is out of range 0..100");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, lost: yes}]\n",
		     8, "lost: expected true or false");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, silent: true}]\n",
		     8, "silent: not a key of a GPU timeline");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    timeline: [{at: 1, tempC: 50}]\n",
		     7, "tempC: not a key of a node timeline");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, processes: [{name: x}]}]\n",
		     8, "processes[0]: missing key 'pid'");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    gpus:\n"
			       "      - timeline: [{at: 1, xid: 0}]\n",
		     8, "xid: 0 is out of range 1..999");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    address: nohost\n",
		     7, "address: expected host:port, got 'nohost'");
	expect_error(NODE_HEAD "    gpuCount: 1\n"
			       "    timeline: {at: 1}\n",
		     7, "timeline: expected a list");
}

static void test_xid_fatal_list(void **state)
{
	(void)state;
	assert_true(egs_xid_fatal(79));
	assert_true(egs_xid_fatal(48));
	assert_true(egs_xid_fatal(95));
	assert_false(egs_xid_fatal(13));
	assert_false(egs_xid_fatal(31));
	assert_false(egs_xid_fatal(43));
	assert_false(egs_xid_fatal(0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_temperature_ramp),     cmocka_unit_test(test_xid_and_ecc),
		cmocka_unit_test(test_gpu_falls_off_the_bus), cmocka_unit_test(test_node_stops_answering),
		cmocka_unit_test(test_processes),            cmocka_unit_test(test_timeline_errors),
		cmocka_unit_test(test_xid_fatal_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
