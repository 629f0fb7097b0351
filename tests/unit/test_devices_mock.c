/*
 * test_devices_mock.c: the mock device backend: parsing the devices YAML (good files, missing keys,
 * bad types with their line numbers, duplicates), the generated GPU UUIDs, and the samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum egs_err parse(const char *yaml, struct egs_devices **d, char *err, size_t errsz)
{
	return egs_devices_mock_parse(yaml, strlen(yaml), "devices.yaml", "worker-1", d, err, errsz);
}

/* Parses yaml, expects EGS_ERR_INVALID and an error that starts with "devices.yaml:<line>:" and
 * contains want. */
static void expect_error(const char *yaml, int line, const char *want)
{
	struct egs_devices *d = (struct egs_devices *)1;
	char err[512], prefix[64];

	assert_int_equal(parse(yaml, &d, err, sizeof(err)), EGS_ERR_INVALID);
	assert_null(d);
	snprintf(prefix, sizeof(prefix), "devices.yaml:%d: ", line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, want))
		fail_msg("error '%s' does not start with '%s' or lacks '%s'", err, prefix, want);
}

static bool is_nvidia_uuid(const char *u)
{
	static const char pattern[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
	if (strlen(u) != strlen(pattern))
		return false;
	for (size_t i = 0; pattern[i]; i++) {
		if (pattern[i] == 'x' ? !strchr("0123456789abcdef", u[i]) || !u[i] : u[i] != pattern[i])
			return false;
	}
	return true;
}

static void test_parse_good(void **state)
{
	static const char yaml[] = "# two nodes\n"
				   "nodes:\n"
				   "  - name: h100-node-1\n"
				   "    instanceType: p5.48xlarge\n"
				   "    gpuModel: NVIDIA-H100-80GB-HBM3\n"
				   "    gpuCount: 8\n"
				   "    memoryMiB: 81920\n"
				   "  - name: t4-node-1\n"
				   "    instanceType: g4dn.xlarge\n"
				   "    gpuModel: Tesla-T4\n"
				   "    gpuCount: 2\n"
				   "    memoryMiB: 15360\n"
				   "    cloudProvider: aws\n"
				   "    region: us-east-1\n"
				   "    futureKey: {ignored: true}\n"
				   "    gpus:\n"
				   "      - uuid: GPU-11111111-2222-3333-4444-555555555555\n"
				   "      - {}\n";
	struct egs_devices *d = NULL;
	char err[256] = "", want[64];
	(void)state;

	assert_int_equal(parse(yaml, &d, err, sizeof(err)), EGS_OK);
	assert_non_null(d);
	assert_int_equal(d->n_nodes, 2);

	const struct egs_dev_node *n = &d->nodes[0];
	assert_string_equal(n->name, "h100-node-1");
	assert_string_equal(n->instance_type, "p5.48xlarge");
	assert_string_equal(n->gpu_model, "NVIDIA-H100-80GB-HBM3");
	assert_int_equal(n->gpu_count, 8);
	assert_int_equal(n->memory_mib, 81920);
	assert_string_equal(n->cloud_provider, "");
	assert_string_equal(n->region, "");
	for (int i = 0; i < 8; i++) {
		assert_int_equal(n->gpus[i].index, i);
		assert_true(is_nvidia_uuid(n->gpus[i].uuid));
		egs_devices_mock_uuid("worker-1", "h100-node-1", i, want, sizeof(want));
		assert_string_equal(n->gpus[i].uuid, want);
	}

	n = egs_devices_find(d, "t4-node-1");
	assert_ptr_equal(n, &d->nodes[1]);
	assert_string_equal(n->cloud_provider, "aws");
	assert_string_equal(n->region, "us-east-1");
	assert_string_equal(n->gpus[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
	egs_devices_mock_uuid("worker-1", "t4-node-1", 1, want, sizeof(want));
	assert_string_equal(n->gpus[1].uuid, want);
	assert_null(egs_devices_find(d, "nope"));
	egs_devices_free(d);
}

static void test_parse_empty_list(void **state)
{
	struct egs_devices *d = NULL;
	char err[256];
	(void)state;

	assert_int_equal(parse("nodes: []\n", &d, err, sizeof(err)), EGS_OK);
	assert_int_equal(d->n_nodes, 0);
	egs_devices_free(d);
}

static void test_missing_key(void **state)
{
	(void)state;
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: p5.48xlarge\n"
		     "    gpuModel: H100\n"
		     "    memoryMiB: 81920\n",
		     2, "node 'a': missing key 'gpuCount'");
	expect_error("nodes:\n"
		     "  - instanceType: p5.48xlarge\n",
		     2, "nodes[0]: missing key 'name'");
	expect_error("servers: []\n", 1, "missing key 'nodes'");
	expect_error("", 1, "the file is empty");
}

static void test_bad_type_has_line(void **state)
{
	(void)state;
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: p5.48xlarge\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: 8\n"
		     "    memoryMiB: 81920\n"
		     "  - name: b\n"
		     "    instanceType: p5.48xlarge\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: eight\n"
		     "    memoryMiB: 81920\n",
		     10, "node 'b': gpuCount: expected an integer, got 'eight'");
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: p5.48xlarge\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: \"8\"\n"
		     "    memoryMiB: 81920\n",
		     5, "gpuCount: expected an integer, got '8'");
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: [p5]\n",
		     3, "instanceType: expected a non-empty string");
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: p5\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: 0\n"
		     "    memoryMiB: 81920\n",
		     5, "gpuCount: 0 is out of range 1..64");
	expect_error("nodes: {a: 1}\n", 1, "nodes: expected a list");
	expect_error("nodes:\n  - name: 'bad name'\n", 2, "name: 'bad name'");
}

static void test_structural_errors(void **state)
{
	(void)state;
	/* A YAML syntax error: libyaml's mark gives the line. */
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    gpuCount: [8\n"
		     "    memoryMiB: 1\n"
		     "oops: }\n",
		     4, "did not find expected ',' or ']'");
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    name: b\n",
		     3, "duplicate key 'name'");
	expect_error("nodes:\n"
		     "  - {name: a, instanceType: p5, gpuModel: H100, gpuCount: 1, memoryMiB: 1}\n"
		     "  - {name: a, instanceType: p5, gpuModel: H100, gpuCount: 1, memoryMiB: 1}\n",
		     3, "listed twice");
	expect_error("nodes:\n"
		     "  - name: a\n"
		     "    instanceType: p5\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: 2\n"
		     "    memoryMiB: 1\n"
		     "    gpus:\n"
		     "      - uuid: GPU-1\n",
		     8, "gpus: lists 1 GPUs but gpuCount is 2");
	expect_error("nodes:\n"
		     "  - {name: a, instanceType: p5, gpuModel: H100, gpuCount: 1, memoryMiB: 1, gpus: [{uuid: GPU-1}]}\n"
		     "  - name: b\n"
		     "    instanceType: p5\n"
		     "    gpuModel: H100\n"
		     "    gpuCount: 1\n"
		     "    memoryMiB: 1\n"
		     "    gpus:\n"
		     "      - uuid: GPU-1\n",
		     9, "GPU uuid 'GPU-1' appears twice");
}

static void test_uuid_stable(void **state)
{
	char a[64], b[64], c[64];
	(void)state;

	egs_devices_mock_uuid("worker-1", "h100-node-1", 0, a, sizeof(a));
	egs_devices_mock_uuid("worker-1", "h100-node-1", 0, b, sizeof(b));
	assert_string_equal(a, b);
	assert_true(is_nvidia_uuid(a));
	/* Pinned: the control plane stores these, so they must never change between releases. */
	assert_string_equal(a, "GPU-ce9acb4d-21d8-b7a8-3536-4c9ccc8fcb84");

	egs_devices_mock_uuid("worker-1", "h100-node-1", 1, c, sizeof(c));
	assert_string_not_equal(a, c);
	egs_devices_mock_uuid("worker-2", "h100-node-1", 0, c, sizeof(c));
	assert_string_not_equal(a, c);
	egs_devices_mock_uuid("worker-1", "h100-node-2", 0, c, sizeof(c));
	assert_string_not_equal(a, c);
	/* The fields are separated, so moving characters between them changes the UUID. */
	egs_devices_mock_uuid("worker-1h", "100-node-1", 0, c, sizeof(c));
	assert_string_not_equal(a, c);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/egs-test-devices-XXXXXX", err[512];
	struct egs_devices *d = NULL, *d2 = NULL;
	const char *yaml = "nodes:\n  - {name: n1, instanceType: p5, gpuModel: H100, gpuCount: 2, memoryMiB: 1024}\n";
	int fd = mkstemp(path);
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
	assert_int_equal(egs_devices_mock_load(path, "worker-1", &d, err, sizeof(err)), EGS_OK);
	assert_int_equal(egs_devices_mock_load(path, "worker-1", &d2, err, sizeof(err)), EGS_OK);
	assert_int_equal(d->n_nodes, 1);
	assert_string_equal(d->nodes[0].gpus[1].uuid, d2->nodes[0].gpus[1].uuid); /* stable across loads */
	egs_devices_free(d);
	egs_devices_free(d2);
	unlink(path);

	assert_int_equal(egs_devices_mock_load(path, "worker-1", &d, err, sizeof(err)), EGS_ERR_IO);
	assert_null(d);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "No such file"));
}

static void test_samples(void **state)
{
	struct egs_devices *d = NULL;
	struct egs_gpu_sample s1[4], s2[4];
	enum egs_health h = EGS_HEALTH_UNHEALTHY;
	char err[256];
	(void)state;

	assert_int_equal(parse("nodes:\n  - {name: n1, instanceType: p5, gpuModel: H100, gpuCount: 4, memoryMiB: 1}\n",
			       &d, err, sizeof(err)),
			 EGS_OK);
	assert_int_equal(egs_devices_sample(d, 0, 1000, &h, NULL, 0, s1), EGS_OK);
	assert_int_equal(h, EGS_HEALTH_HEALTHY);
	assert_int_equal(egs_devices_sample(d, 0, 2000, &h, NULL, 0, s2), EGS_OK);
	for (int i = 0; i < 4; i++) {
		assert_true(s1[i].power_w >= 60 && s1[i].power_w <= 80);
		assert_true(s1[i].temp_c >= 30 && s1[i].temp_c <= 40);
		assert_true(s1[i].util_pct == 0.0);
		assert_int_equal(s1[i].mem_used_mib, 0);
		assert_true(s1[i].power_w == s2[i].power_w && s1[i].temp_c == s2[i].temp_c);
	}
	egs_devices_free(d);
	egs_devices_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),     cmocka_unit_test(test_parse_empty_list),
		cmocka_unit_test(test_missing_key),    cmocka_unit_test(test_bad_type_has_line),
		cmocka_unit_test(test_structural_errors), cmocka_unit_test(test_uuid_stable),
		cmocka_unit_test(test_load_file),      cmocka_unit_test(test_samples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
