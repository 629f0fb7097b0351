/*
 * test_nvml.c: the NVML device backend against tests/fake-nvml (no GPU on the test machines): the node
 * it builds (count, model, memory, UUIDs), every metric, a GPU that falls off the bus, XID events
 * (delivered once, fatal or not), ECC errors, NOT_SUPPORTED metrics, compute processes (more than fit
 * the first buffer), a library without most symbols (metrics degrade, the backend still opens), a GPU
 * lost before the start with --expect-gpus, and the failures: no library, nvmlInit failing, no GPU.
 *
 * The fake libraries are found next to this binary: <build>/tests/test_nvml -> <build>/lib/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/checks.h"
#include "agent/devices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fake_full[4096], fake_min[4096];
static char state_path[64], state_tmp[80];

/* Replaces the fake's state file (write and rename, so the fake sees a new file). */
static void write_state(const char *text)
{
	FILE *f = fopen(state_tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(state_tmp, state_path), 0);
}

static struct egs_devices *open_ok(const char *lib)
{
	struct egs_devices_nvml_config cfg = {.library = lib, .node_name = "gpu-host-1", .instance_type = "p5.48xlarge"};
	struct egs_devices *d = NULL;
	char err[512] = "";

	if (egs_devices_nvml_open(&cfg, &d, err, sizeof(err)) != EGS_OK)
		fail_msg("egs_devices_nvml_open: %s", err);
	return d;
}

static enum egs_health sample(struct egs_devices *d, struct egs_gpu_sample *s, char *why, size_t whysz)
{
	enum egs_health h = EGS_HEALTH_UNSCHEDULABLE;
	egs_devices_sample(d, 0, 0, &h, why, whysz, s);
	return h;
}

static const char eight_gpus[] = "gpus 8\n"
				 "gpu all name NVIDIA H100 80GB HBM3\n"
				 "gpu 5 mem_total_mib 81000   # a GPU with retired pages reads a little less\n"
				 "gpu 2 temp_c 61\n"
				 "gpu 2 power_mw 312500\n"
				 "gpu 2 util 87\n"
				 "gpu 2 mem_used_mib 40211\n";

static void test_node_and_metrics(void **state)
{
	struct egs_devices *d;
	struct egs_gpu_sample s[8];
	const struct egs_dev_node *n;
	char why[160];
	(void)state;

	write_state(eight_gpus);
	d = open_ok(fake_full);
	assert_int_equal(d->n_nodes, 1);
	n = &d->nodes[0];
	assert_string_equal(n->name, "gpu-host-1");
	assert_string_equal(n->instance_type, "p5.48xlarge");
	assert_string_equal(n->gpu_model, "NVIDIA-H100-80GB-HBM3");
	assert_string_equal(n->cloud_provider, "");
	assert_int_equal(n->gpu_count, 8);
	assert_int_equal(n->memory_mib, 81000); /* the smallest GPU's */
	assert_string_equal(n->gpus[7].uuid, "GPU-fa4e0000-0000-0000-0000-000000000007");
	assert_int_equal(n->gpus[7].index, 7);

	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);
	assert_string_equal(why, "");
	for (int i = 0; i < 8; i++) {
		assert_int_equal(s[i].valid, EGS_GPU_POWER | EGS_GPU_POWER_LIMIT | EGS_GPU_TEMP | EGS_GPU_UTIL |
						     EGS_GPU_MEM_USED | EGS_GPU_MEM_TOTAL | EGS_GPU_ECC | EGS_GPU_XID);
		assert_false(s[i].lost);
		assert_true(fabs(s[i].power_limit_w - 700.0) < 1e-9);
	}
	assert_true(fabs(s[2].power_w - 312.5) < 1e-9); /* NVML reports milliwatts */
	assert_true(fabs(s[2].temp_c - 61) < 1e-9);
	assert_true(fabs(s[2].util_pct - 87) < 1e-9);
	assert_int_equal(s[2].mem_used_mib, 40211);
	assert_int_equal(s[2].mem_total_mib, 81559);
	assert_int_equal(s[5].mem_total_mib, 81000);
	assert_true(fabs(s[0].temp_c - 35) < 1e-9);
	egs_devices_free(d);
}

static void test_lost_gpu_xid_and_ecc(void **state)
{
	struct egs_devices *d;
	struct egs_gpu_sample s[4];
	char why[160], text[512];
	(void)state;

	write_state("gpus 4\n");
	d = open_ok(fake_full);
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);

	/* The GPU stops answering. */
	write_state("gpus 4\ngpu 3 lost 1\n");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_true(s[3].lost);
	assert_int_equal(s[3].valid, 0);
	assert_false(s[2].lost);
	assert_string_equal(why, "GPU 3 (GPU-fa4e0000-0000-0000-0000-000000000003) fell off the bus");
	write_state("gpus 4\n");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);

	/* An application XID: counted, the node stays healthy. */
	write_state("gpus 4\ngpu 1 xid 13 1\n");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);
	assert_int_equal(s[1].xid_count, 1);
	assert_int_equal(s[1].last_xid, 13);
	assert_int_equal(s[0].xid_count, 0);
	/* The same event is not counted twice. */
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);
	assert_int_equal(s[1].xid_count, 1);

	/* XID 79 (fell off the bus) is fatal, and remembered: the node stays Unhealthy until the agent
	 * restarts (after the GPU was reset or repaired). */
	write_state("gpus 4\ngpu 1 xid 13 1\ngpu 1 xid 79 2\n");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_int_equal(s[1].xid_count, 2);
	assert_int_equal(s[1].fatal_xid, 79);
	assert_string_equal(why, "GPU 1 (GPU-fa4e0000-0000-0000-0000-000000000001) reported XID 79");
	write_state("gpus 4\n");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_int_equal(s[1].xid_count, 2);

	egs_devices_free(d);

	/* Uncorrectable ECC errors. */
	snprintf(text, sizeof(text), "gpus 4\ngpu 0 ecc_uncorrected 3\n");
	write_state(text);
	d = open_ok(fake_full);
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_string_equal(why, "GPU 0 (GPU-fa4e0000-0000-0000-0000-000000000000) has 3 uncorrectable ECC errors");
	egs_devices_free(d);
}

static void test_not_supported_metrics(void **state)
{
	struct egs_devices *d;
	struct egs_gpu_sample s[2];
	char why[160];
	(void)state;

	write_state("gpus 2\ngpu 0 notsup power\ngpu 0 notsup ecc\ngpu all notsup util\n");
	d = open_ok(fake_full);
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);
	assert_false(s[0].valid & EGS_GPU_POWER);
	assert_false(s[0].valid & EGS_GPU_ECC);
	assert_false(s[0].valid & EGS_GPU_UTIL);
	assert_true(s[0].valid & EGS_GPU_TEMP);
	assert_true(s[0].power_w == 0);
	assert_true(s[1].valid & EGS_GPU_POWER);
	assert_false(s[1].valid & EGS_GPU_UTIL);
	egs_devices_free(d);
}

static void test_processes(void **state)
{
	struct egs_devices *d;
	struct egs_gpu_proc p[128];
	char text[8192];
	size_t n = 0, len;
	(void)state;

	len = (size_t)snprintf(text, sizeof(text), "gpus 3\ngpu 1 proc %d 2048\ngpu 1 proc 4194000 -1\n", (int)getpid());
	for (int i = 0; i < 100; i++) /* more than the backend's first buffer */
		len += (size_t)snprintf(text + len, sizeof(text) - len, "gpu 2 proc %d 1\n", 100000 + i);
	write_state(text);
	d = open_ok(fake_full);
	assert_int_equal(egs_devices_processes(d, 0, 0, p, 128, &n), EGS_OK);
	assert_int_equal(n, 102);
	assert_int_equal(p[0].gpu, 1);
	assert_int_equal(p[0].pid, (int)getpid());
	assert_int_equal(p[0].mem_used_mib, 2048);
	assert_string_equal(p[0].name, "test_nvml");
	assert_int_equal(p[1].pid, 4194000);
	assert_int_equal(p[1].mem_used_mib, -1); /* NVML_VALUE_NOT_AVAILABLE */
	assert_int_equal(p[101].gpu, 2);
	assert_int_equal(p[101].pid, 100099);

	/* Only max are stored. */
	assert_int_equal(egs_devices_processes(d, 0, 0, p, 2, &n), EGS_OK);
	assert_int_equal(n, 102);

	/* A lost GPU is skipped; a GPU that cannot list processes makes the listing unsupported. */
	write_state("gpus 3\ngpu 0 lost 1\ngpu 1 proc 5 1\n");
	assert_int_equal(egs_devices_processes(d, 0, 0, p, 128, &n), EGS_OK);
	assert_int_equal(n, 1);
	write_state("gpus 3\ngpu 2 notsup procs\n");
	assert_int_equal(egs_devices_processes(d, 0, 0, p, 128, &n), EGS_ERR_NOT_FOUND);
	egs_devices_free(d);
}

static void test_minimal_library_degrades(void **state)
{
	struct egs_devices *d;
	struct egs_gpu_sample s[2];
	struct egs_gpu_proc p[4];
	size_t n = 9;
	char why[160];
	(void)state;

	write_state("gpus 2\ngpu all name Tesla T4\ngpu all mem_total_mib 15360\ngpu 1 temp_c 70\n");
	d = open_ok(fake_min);
	assert_string_equal(d->nodes[0].gpu_model, "Tesla-T4");
	assert_int_equal(d->nodes[0].memory_mib, 15360);
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_HEALTHY);
	assert_int_equal(s[1].valid, EGS_GPU_TEMP | EGS_GPU_MEM_USED | EGS_GPU_MEM_TOTAL);
	assert_true(fabs(s[1].temp_c - 70) < 1e-9);
	assert_int_equal(egs_devices_processes(d, 0, 0, p, 4, &n), EGS_ERR_NOT_FOUND);
	assert_int_equal(n, 0);
	egs_devices_free(d);
}

static void expect_open_error(const char *lib, enum egs_err want, const char *text)
{
	struct egs_devices_nvml_config cfg = {.library = lib};
	struct egs_devices *d = (struct egs_devices *)1;
	char err[512] = "";

	assert_int_equal(egs_devices_nvml_open(&cfg, &d, err, sizeof(err)), want);
	assert_null(d);
	if (!strstr(err, text))
		fail_msg("error '%s' lacks '%s'", err, text);
}

static void test_open_failures(void **state)
{
	struct egs_devices_nvml_config cfg = {0};
	struct egs_devices *d = NULL;
	char err[512];
	(void)state;

	expect_open_error("/nonexistent/libnvidia-ml.so.1", EGS_ERR_IO, "cannot load /nonexistent/libnvidia-ml.so.1");
	write_state("init_error 9\n");
	expect_open_error(fake_full, EGS_ERR_IO, "nvmlInit: Driver Not Loaded");
	write_state("gpus 0\n");
	expect_open_error(fake_full, EGS_ERR_INVALID, "NVML lists 0 GPUs");
	write_state("gpus 1\ngpu 0 uuid bad uuid\n");
	expect_open_error(fake_full, EGS_ERR_INVALID, "is not usable");

	/* $EGS_NVML_LIBRARY names the library when the config does not; the node is this host. */
	write_state("gpus 1\n");
	setenv("EGS_NVML_LIBRARY", fake_full, 1);
	assert_int_equal(egs_devices_nvml_open(&cfg, &d, err, sizeof(err)), EGS_OK);
	assert_true(d->nodes[0].name[0] != '\0');
	assert_true(d->nodes[0].instance_type[0] != '\0');
	egs_devices_free(d);
	unsetenv("EGS_NVML_LIBRARY");
}

static void test_gpu_lost_at_start_and_expected_count(void **state)
{
	struct egs_devices_nvml_config cfg = {.library = fake_full, .node_name = "h", .expected_gpus = 4};
	struct egs_checks_config checks = {.pre = 1u << 1}; /* gpu-inventory */
	struct egs_check_report rep;
	struct egs_check_ctx ctx = {.cfg = &checks, .node = 0, .cluster = "c", .gpr_id = "g", .phase = EGS_CHECK_PRE};
	struct egs_devices *d = NULL;
	struct egs_gpu_sample s[4];
	char err[256], why[160];
	(void)state;

	/* GPU 2 is already lost when the agent starts: it is left out, the others keep NVML's indices. */
	write_state("gpus 4\ngpu 2 lost 1\n");
	assert_int_equal(egs_devices_nvml_open(&cfg, &d, err, sizeof(err)), EGS_OK);
	assert_int_equal(d->nodes[0].gpu_count, 3);
	assert_int_equal(d->nodes[0].gpus[2].index, 3);
	assert_string_equal(d->nodes[0].gpus[2].uuid, "GPU-fa4e0000-0000-0000-0000-000000000003");
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_string_equal(why, "only 3 of the 4 expected GPUs were found");
	ctx.dev = d;
	egs_checks_run(&ctx, &rep);
	assert_int_equal(rep.results[0].status, EGS_CHECK_FAILED);
	assert_string_equal(rep.results[0].output, "3 of 4 expected GPUs found");
	/* A later loss names the GPU by NVML's index. */
	write_state("gpus 4\ngpu 2 lost 1\ngpu 3 lost 1\n");
	d->nodes[0].expected_gpus = 0;
	assert_int_equal(sample(d, s, why, sizeof(why)), EGS_HEALTH_UNHEALTHY);
	assert_string_equal(why, "GPU 3 (GPU-fa4e0000-0000-0000-0000-000000000003) fell off the bus");
	egs_devices_free(d);

	write_state("gpus 2\ngpu all lost 1\n");
	cfg.expected_gpus = 0;
	assert_int_equal(egs_devices_nvml_open(&cfg, &d, err, sizeof(err)), EGS_ERR_IO);
	assert_string_equal(err, "all 2 GPUs NVML lists are lost");
}

static void test_model_names_become_labels(void **state)
{
	struct egs_devices *d;
	(void)state;

	write_state("gpus 1\ngpu 0 name  NVIDIA A100-SXM4-40GB (MIG)  \n");
	d = open_ok(fake_full);
	assert_string_equal(d->nodes[0].gpu_model, "NVIDIA-A100-SXM4-40GB-MIG");
	egs_devices_free(d);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_and_metrics),      cmocka_unit_test(test_lost_gpu_xid_and_ecc),
		cmocka_unit_test(test_not_supported_metrics), cmocka_unit_test(test_processes),
		cmocka_unit_test(test_minimal_library_degrades), cmocka_unit_test(test_open_failures),
		cmocka_unit_test(test_model_names_become_labels), cmocka_unit_test(test_gpu_lost_at_start_and_expected_count),
	};
	char dir[2048];
	const char *slash = strrchr(argv[0], '/');
	int rc;

	(void)argc;
	/* <build>/tests/test_nvml -> <build>/lib */
	snprintf(dir, sizeof(dir), "%.*s/../lib", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
	snprintf(fake_full, sizeof(fake_full), "%s/libnvidia-ml-fake.so", dir);
	snprintf(fake_min, sizeof(fake_min), "%s/libnvidia-ml-fake-min.so", dir);
	if (access(fake_full, R_OK) != 0 || access(fake_min, R_OK) != 0) {
		fprintf(stderr, "test_nvml: %s missing; build it with make unit\n", fake_full);
		return 1;
	}
	snprintf(state_path, sizeof(state_path), "/tmp/egs-fake-nvml-%d", (int)getpid());
	snprintf(state_tmp, sizeof(state_tmp), "%s.tmp", state_path);
	setenv("EGS_FAKE_NVML_STATE", state_path, 1);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(state_path);
	return rc;
}
