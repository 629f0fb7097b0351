/*
 * test_series.c: the per-GPU ring buffers of core/series.h.  Averaging within a step, a new point per
 * step, wrap-around at capacity keeping the newest points, dropping samples older than the newest
 * step, the bound on the number of GPUs, range queries (bounds, "newest max"), weighted summaries,
 * and a long random run against a naive reference that keeps every sample.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/series.h"

#include "rng.h"

static struct egs_sample smp(double power, double temp, double util, double mem)
{
	struct egs_sample s = { power, temp, util, mem };
	return s;
}

static void test_average_within_step(void **state)
{
	(void)state;
	struct egs_series_set set;
	egs_series_set_init(&set, 4, 60, 10);
	struct egs_sample a = smp(100, 40, 10, 1000), b = smp(300, 60, 30, 3000);
	assert_true(egs_series_set_add(&set, "GPU-a", 6000, &a));
	assert_true(egs_series_set_add(&set, "GPU-a", 6059, &b));
	const struct egs_series *s = egs_series_set_get(&set, "GPU-a");
	assert_non_null(s);
	assert_int_equal(s->len, 1);
	struct egs_point p[4];
	assert_int_equal(egs_series_range(&set, s, 0, INT64_MAX, p, 4), 1);
	assert_int_equal(p[0].t, 6000);
	assert_int_equal(p[0].n, 2);
	assert_float_equal(p[0].power_w, 200, 1e-3);
	assert_float_equal(p[0].temp_c, 50, 1e-3);
	assert_float_equal(p[0].util_pct, 20, 1e-3);
	assert_float_equal(p[0].mem_used_mib, 2000, 1e-3);
	/* The next step starts a new point, aligned down to the step. */
	assert_true(egs_series_set_add(&set, "GPU-a", 6061, &a));
	assert_int_equal(egs_series_range(&set, s, 0, INT64_MAX, p, 4), 2);
	assert_int_equal(p[1].t, 6060);
	assert_int_equal(p[1].n, 1);
	assert_null(egs_series_set_get(&set, "GPU-b"));
	egs_series_set_cleanup(&set);
}

static void test_wraps_keeping_newest(void **state)
{
	(void)state;
	struct egs_series_set set;
	egs_series_set_init(&set, 3, 10, 10);
	for (int i = 0; i < 7; i++) {
		struct egs_sample x = smp(i, i, i, i);
		assert_true(egs_series_set_add(&set, "GPU-a", 100 + 10 * i, &x));
	}
	const struct egs_series *s = egs_series_set_get(&set, "GPU-a");
	assert_int_equal(s->len, 3);
	struct egs_point p[8];
	assert_int_equal(egs_series_range(&set, s, 0, INT64_MAX, p, 8), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(p[i].t, 140 + 10 * i);
		assert_float_equal(p[i].power_w, 4 + i, 1e-6);
	}
	/* A gap of many steps is one new point, not a run of empty ones. */
	struct egs_sample y = smp(9, 9, 9, 9);
	assert_true(egs_series_set_add(&set, "GPU-a", 100000, &y));
	assert_int_equal(egs_series_range(&set, s, 0, INT64_MAX, p, 8), 3);
	assert_int_equal(p[0].t, 150);
	assert_int_equal(p[2].t, 100000);
	egs_series_set_cleanup(&set);
}

static void test_drops_old_and_bad_samples(void **state)
{
	(void)state;
	struct egs_series_set set;
	egs_series_set_init(&set, 8, 60, 2);
	struct egs_sample x = smp(1, 2, 3, 4);
	assert_true(egs_series_set_add(&set, "GPU-a", 1200, &x));
	assert_false(egs_series_set_add(&set, "GPU-a", 1199, &x)); /* an earlier step */
	assert_true(egs_series_set_add(&set, "GPU-a", 1200, &x));  /* the same step is fine */
	assert_false(egs_series_set_add(&set, "", 1200, &x));
	char longid[EGS_SERIES_UUID_MAX + 1];
	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	assert_false(egs_series_set_add(&set, longid, 1200, &x));
	assert_true(egs_series_set_add(&set, "GPU-b", 1200, &x));
	assert_false(egs_series_set_add(&set, "GPU-c", 1200, &x)); /* max_series reached */
	assert_true(egs_series_set_add(&set, "GPU-b", 1300, &x)); /* known GPUs keep recording */
	assert_int_equal(egs_series_set_bytes(&set), 2 * (sizeof(struct egs_series) + 8 * sizeof(struct egs_point)));
	assert_true(egs_series_set_remove(&set, "GPU-a"));
	assert_false(egs_series_set_remove(&set, "GPU-a"));
	assert_true(egs_series_set_add(&set, "GPU-c", 1200, &x));
	assert_true(egs_series_set_add(&set, "GPU-c", 1300, &x));
	egs_series_set_cleanup(&set);
	/* Negative times align down too. */
	egs_series_set_init(&set, 2, 60, 1);
	assert_true(egs_series_set_add(&set, "GPU-n", -1, &x));
	struct egs_point p[2];
	assert_int_equal(egs_series_range(&set, egs_series_set_get(&set, "GPU-n"), INT64_MIN, INT64_MAX, p, 2), 1);
	assert_int_equal(p[0].t, -60);
	egs_series_set_cleanup(&set);
}

static void test_range_bounds_and_limit(void **state)
{
	(void)state;
	struct egs_series_set set;
	egs_series_set_init(&set, 100, 10, 1);
	for (int i = 0; i < 50; i++) {
		struct egs_sample x = smp(i, 0, 0, 0);
		egs_series_set_add(&set, "GPU-a", 10 * i, &x);
	}
	const struct egs_series *s = egs_series_set_get(&set, "GPU-a");
	struct egs_point p[100];
	/* from inclusive, to exclusive */
	assert_int_equal(egs_series_range(&set, s, 100, 200, p, 100), 10);
	assert_int_equal(p[0].t, 100);
	assert_int_equal(p[9].t, 190);
	/* with a limit, the newest points of the range, oldest first */
	assert_int_equal(egs_series_range(&set, s, 100, 200, p, 3), 3);
	assert_int_equal(p[0].t, 170);
	assert_int_equal(p[2].t, 190);
	assert_int_equal(egs_series_range(&set, s, 1000, 2000, p, 100), 0);
	assert_int_equal(egs_series_range(&set, s, 0, 0, p, 100), 0);
	egs_series_set_cleanup(&set);
}

static void test_summary_weights_by_samples(void **state)
{
	(void)state;
	struct egs_series_set set;
	egs_series_set_init(&set, 10, 60, 1);
	struct egs_sample lo = smp(100, 30, 0, 0), hi = smp(400, 90, 100, 800);
	egs_series_set_add(&set, "GPU-a", 0, &lo);
	egs_series_set_add(&set, "GPU-a", 1, &lo);
	egs_series_set_add(&set, "GPU-a", 2, &lo);
	egs_series_set_add(&set, "GPU-a", 60, &hi);
	const struct egs_series *s = egs_series_set_get(&set, "GPU-a");
	struct egs_series_summary sum;
	assert_true(egs_series_summarize(&set, s, 0, 3600, &sum));
	assert_int_equal(sum.points, 2);
	assert_int_equal(sum.first, 0);
	assert_int_equal(sum.last, 60);
	assert_float_equal(sum.power_mean, 175, 1e-6); /* (3*100 + 400) / 4 */
	assert_float_equal(sum.power_max, 400, 1e-6);
	assert_float_equal(sum.temp_max, 90, 1e-6);
	assert_float_equal(sum.util_mean, 25, 1e-6);
	assert_float_equal(sum.mem_max, 800, 1e-6);
	assert_true(egs_series_summarize(&set, s, 0, 60, &sum));
	assert_int_equal(sum.points, 1);
	assert_float_equal(sum.power_max, 100, 1e-6);
	assert_false(egs_series_summarize(&set, s, 120, 3600, &sum));
	assert_int_equal(sum.points, 0);
	egs_series_set_cleanup(&set);
}

/* ---- random run against a reference that keeps every accepted sample ---- */

struct ref_sample {
	int64_t t;
	double power;
};

static void test_random_against_reference(void **state)
{
	(void)state;
	enum { N = 20000, CAP = 17, STEP = 7 };
	static struct ref_sample ref[N];
	size_t nref = 0;
	struct egs_series_set set;
	egs_series_set_init(&set, CAP, STEP, 1);
	int64_t t = 1000;
	for (int i = 0; i < N; i++) {
		t += (int64_t)(rng_next() % 12) - 2; /* mostly forward, sometimes back */
		struct egs_sample x = smp((double)(rng_next() % 1000), 0, 0, 0);
		int64_t newest = nref ? ref[nref - 1].t - ((ref[nref - 1].t % STEP) + STEP) % STEP : INT64_MIN;
		int64_t at = t - ((t % STEP) + STEP) % STEP;
		bool want = at >= newest;
		assert_int_equal(egs_series_set_add(&set, "GPU-r", t, &x), want);
		if (want)
			ref[nref++] = (struct ref_sample){ t, x.power_w };
	}
	/* Rebuild the expected last CAP steps from the reference. */
	struct egs_point got[CAP];
	size_t n = egs_series_range(&set, egs_series_set_get(&set, "GPU-r"), INT64_MIN, INT64_MAX, got, CAP);
	assert_int_equal(n, CAP);
	size_t k = nref;
	for (size_t j = n; j-- > 0;) {
		int64_t at = got[j].t;
		double sum = 0;
		uint32_t cnt = 0;
		while (k > 0 && ref[k - 1].t - ((ref[k - 1].t % STEP) + STEP) % STEP == at) {
			sum += ref[k - 1].power;
			cnt++;
			k--;
		}
		assert_int_equal(cnt, got[j].n);
		assert_true(fabs(sum / cnt - got[j].power_w) < 0.05);
		if (j > 0)
			assert_true(got[j - 1].t < got[j].t);
	}
	egs_series_set_cleanup(&set);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_average_within_step),
		cmocka_unit_test(test_wraps_keeping_newest),
		cmocka_unit_test(test_drops_old_and_bad_samples),
		cmocka_unit_test(test_range_bounds_and_limit),
		cmocka_unit_test(test_summary_weights_by_samples),
		cmocka_unit_test(test_random_against_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
