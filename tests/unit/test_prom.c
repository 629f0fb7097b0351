/*
 * test_prom.c: the Prometheus text format parser (src/agent/prom.c) on dcgm-exporter's real output and
 * on every rule it enforces: HELP/TYPE, label escapes, NaN and infinities, timestamps, and the malformed
 * lines that refuse a whole scrape with the line number.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct seen {
	int n;
	char names[16][64];
	char labels[16][256]; /* "k=v;k=v" */
	double values[16];
	int64_t ts[16];
	int stop_after; /* 0: never */
};

static bool collect(void *arg, const struct egs_prom_sample *s)
{
	struct seen *z = arg;
	if (z->n < 16) {
		snprintf(z->names[z->n], sizeof(z->names[0]), "%s", s->name);
		z->labels[z->n][0] = '\0';
		for (size_t i = 0; i < s->n_labels; i++) {
			size_t l = strlen(z->labels[z->n]);
			snprintf(z->labels[z->n] + l, sizeof(z->labels[0]) - l, "%s%s=%s", i ? ";" : "", s->labels[i].name,
				 s->labels[i].value);
		}
		z->values[z->n] = s->value;
		z->ts[z->n] = s->has_timestamp ? s->timestamp_ms : -1;
	}
	z->n++;
	return !z->stop_after || z->n < z->stop_after;
}

static enum egs_err parse(const char *text, struct seen *z, char *err)
{
	memset(z, 0, sizeof(*z));
	return egs_prom_parse(text, strlen(text), collect, z, err, 200);
}

static void test_dcgm_exporter_output(void **state)
{
	static const char text[] =
		"# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
		"# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
		"DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-6f0c1d2e\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\","
		"Hostname=\"gpu-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\",container=\"main\",namespace=\"ws-dev\",pod=\"train-0\"} 61\n"
		"# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\r\n"
		"# TYPE DCGM_FI_DEV_POWER_USAGE gauge\r\n"
		"DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-6f0c1d2e\"} 312.517000\r\n"
		"\n"
		"   \t\n"
		"# an ordinary comment\n"
		"DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-x\",} 4.0211e4 1700000000000\n";
	struct seen z;
	char err[200];
	(void)state;

	assert_int_equal(parse(text, &z, err), EGS_OK);
	assert_int_equal(z.n, 3);
	assert_string_equal(z.names[0], "DCGM_FI_DEV_GPU_TEMP");
	assert_true(strstr(z.labels[0], "modelName=NVIDIA H100 80GB HBM3;Hostname=gpu-1") != NULL);
	assert_true(strstr(z.labels[0], "namespace=ws-dev;pod=train-0") != NULL);
	assert_true(z.values[0] == 61);
	assert_true(z.ts[0] == -1);
	assert_true(fabs(z.values[1] - 312.517) < 1e-9);
	assert_string_equal(z.labels[2], "gpu=1;UUID=GPU-x"); /* a trailing comma is allowed */
	assert_true(z.values[2] == 40211);
	assert_true(z.ts[2] == 1700000000000LL);
}

static void test_escapes_and_special_values(void **state)
{
	struct seen z;
	char err[200];
	(void)state;

	assert_int_equal(parse("m{a=\"q\\\"uote\",b=\"back\\\\slash\",c=\"new\\nline\"} NaN\n"
			       "m +Inf -5\nm -Inf\nm Inf\n:m_x:y{ a = \"\" } -1.5e-3\nno_newline_at_end 7",
			       &z, err),
			 EGS_OK);
	assert_int_equal(z.n, 6);
	assert_string_equal(z.labels[0], "a=q\"uote;b=back\\slash;c=new\nline");
	assert_true(isnan(z.values[0]));
	assert_true(isinf(z.values[1]) && z.values[1] > 0);
	assert_true(z.ts[1] == -5);
	assert_true(isinf(z.values[2]) && z.values[2] < 0);
	assert_true(isinf(z.values[3]) && z.values[3] > 0);
	assert_string_equal(z.names[4], ":m_x:y");
	assert_string_equal(z.labels[4], "a=");
	assert_true(z.values[4] == -1.5e-3);
	assert_true(z.values[5] == 7);

	/* The callback can stop the walk; that is not an error. */
	memset(&z, 0, sizeof(z));
	z.stop_after = 1;
	assert_int_equal(egs_prom_parse("a 1\nb 2\n", 8, collect, &z, err, sizeof(err)), EGS_OK);
	assert_int_equal(z.n, 1);
}

static void test_malformed_lines_refuse_the_scrape(void **state)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "ok 1\nm{a=\"x\"\n", "line 2: " },
		{ "m{a=\"x} 1\n", "unterminated" },
		{ "m{a=\"\\t\"} 1\n", "bad escape" },
		{ "m{a=x} 1\n", "quoted value" },
		{ "m{1a=\"x\"} 1\n", "label name" },
		{ "m{a=\"1\",a=\"2\"} 1\n", "given twice" },
		{ "m\n", "no value" },
		{ "m 0x10\n", "not a number" },
		{ "m infinity\n", "not a number" },
		{ "m 1e\n", "not a number" },
		{ "m 1 12.5\n", "timestamp" },
		{ "m 1 2 3\n", "unexpected text" },
		{ "m-x 1\n", "bad character" },
		{ "1m 1\n", "metric name expected" },
		{ "# TYPE m gauge\n# TYPE m gauge\n", "second # TYPE" },
		{ "m 1\n# TYPE m gauge\n", "after its samples" },
		{ "# TYPE m meter\n", "must be counter" },
		{ "# HELP\n", "needs a metric name" },
		{ "# HELP m bad \\q escape\n", "bad escape" },
	};
	struct seen z;
	char err[200];
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum egs_err rc = parse(bad[i].text, &z, err);
		if (rc != EGS_ERR_INVALID || !strstr(err, bad[i].why))
			fail_msg("%s: got %d, '%s' (wanted '%s')", bad[i].text, rc, err, bad[i].why);
		assert_true(strncmp(err, "line ", 5) == 0);
	}
	char nul[] = "a 1\nb\0 2\n";
	memset(&z, 0, sizeof(z));
	assert_int_equal(egs_prom_parse(nul, sizeof(nul) - 1, collect, &z, err, sizeof(err)), EGS_ERR_INVALID);
	assert_string_equal(err, "line 2: a NUL byte");
}

static void test_limits(void **state)
{
	struct seen z;
	char err[200];
	size_t n = EGS_PROM_LINE_MAX + 10;
	char *big = malloc(n + 1);
	(void)state;

	memset(big, 'a', n);
	big[n] = '\0';
	assert_int_equal(parse(big, &z, err), EGS_ERR_INVALID);
	assert_true(strstr(err, "longer than") != NULL);
	free(big);

	char many[8192] = "m{";
	for (int i = 0; i <= EGS_PROM_LABELS_MAX; i++) {
		size_t l = strlen(many);
		snprintf(many + l, sizeof(many) - l, "l%d=\"v\",", i);
	}
	snprintf(many + strlen(many), sizeof(many) - strlen(many), "} 1\n");
	assert_int_equal(parse(many, &z, err), EGS_ERR_INVALID);
	assert_true(strstr(err, "more than") != NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dcgm_exporter_output),
		cmocka_unit_test(test_escapes_and_special_values),
		cmocka_unit_test(test_malformed_lines_refuse_the_scrape),
		cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
