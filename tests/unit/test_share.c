/*
 * test_share.c: the arithmetic of GPU sharing (core/share.h): the allocation rule against seed 003's
 * scenario (0.2 then 1.2 on two free devices leave 0.80 and 0.60) and its edges (best fit, ties,
 * uneven splits, the fewest devices, refusal), the number and text forms of a share, and the node
 * timeline the planner asks for the earliest start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "core/share.h"

/* room of ndev devices from their allocated hundredths */
static void room_of(const int *alloc, int ndev, int *room)
{
	for (int i = 0; i < ndev; i++)
		room[i] = EGS_SHARE_WHOLE - alloc[i];
}

static void assert_take(const int *take, const int *want, int ndev)
{
	for (int i = 0; i < ndev; i++)
		assert_int_equal(take[i], want[i]);
}

static void test_seed_scenario(void **state)
{
	(void)state;
	int alloc[2] = { 0, 0 }, room[2], take[2];
	room_of(alloc, 2, room);
	assert_true(egs_share_fit(room, 2, 20, take));
	assert_take(take, (int[]){ 20, 0 }, 2); /* one device: ties go to the lowest index */
	alloc[0] += take[0];
	room_of(alloc, 2, room);
	assert_true(egs_share_fit(room, 2, 120, take));
	assert_take(take, (int[]){ 60, 60 }, 2); /* no device holds 1.2: spread evenly over two */
	alloc[0] += take[0];
	alloc[1] += take[1];
	assert_int_equal(alloc[0], 80);
	assert_int_equal(alloc[1], 60);
	/* A third request of 0.5 fits neither one device (0.20 and 0.40 free) nor two (0.25 each). */
	room_of(alloc, 2, room);
	assert_false(egs_share_fit(room, 2, 50, take));
	assert_take(take, (int[]){ 0, 0 }, 2);
	/* 0.4 fits device 1 whole; 0.3 too (best fit: 0.40 free beats nothing else that fits). */
	assert_true(egs_share_fit(room, 2, 40, take));
	assert_take(take, (int[]){ 0, 40 }, 2);
	assert_true(egs_share_fit(room, 2, 20, take));
	assert_take(take, (int[]){ 20, 0 }, 2); /* the least room that still fits */
}

static void test_best_fit_and_ties(void **state)
{
	(void)state;
	int take[4];
	assert_true(egs_share_fit((int[]){ 100, 50, 30, 50 }, 4, 40, take));
	assert_take(take, (int[]){ 0, 40, 0, 0 }, 4); /* 0.50 is the tightest fit; the first of two */
	assert_true(egs_share_fit((int[]){ 100, 50, 30, 50 }, 4, 100, take));
	assert_take(take, (int[]){ 100, 0, 0, 0 }, 4);
	assert_true(egs_share_fit((int[]){ 30, 30, 30, 30 }, 4, 30, take));
	assert_take(take, (int[]){ 30, 0, 0, 0 }, 4);
}

static void test_spread(void **state)
{
	(void)state;
	int take[4];
	/* 1.01 over two devices: 0.51 on the roomier one, 0.50 on the other. */
	assert_true(egs_share_fit((int[]){ 50, 60, 0, 0 }, 4, 101, take));
	assert_take(take, (int[]){ 50, 51, 0, 0 }, 4);
	/* 2.0 on four free devices: the smallest k is 2 (1.00 each), the first two by index. */
	assert_true(egs_share_fit((int[]){ 100, 100, 100, 100 }, 4, 200, take));
	assert_take(take, (int[]){ 100, 100, 0, 0 }, 4);
	/* 2.0 where no two devices have 1.00 free: three take 0.67, 0.67, 0.66, the roomiest first. */
	assert_true(egs_share_fit((int[]){ 70, 90, 80, 10 }, 4, 200, take));
	assert_take(take, (int[]){ 66, 67, 67, 0 }, 4);
	/* 0.9 with 0.50 free on each of two devices: one is not enough, two take 0.45 each. */
	assert_true(egs_share_fit((int[]){ 50, 50 }, 2, 90, take));
	assert_take(take, (int[]){ 45, 45 }, 2);
	/* 0.03 with 0.01 free on three devices: three devices, 0.01 each, never a device with 0. */
	assert_true(egs_share_fit((int[]){ 1, 1, 1 }, 3, 3, take));
	assert_take(take, (int[]){ 1, 1, 1 }, 3);
	assert_false(egs_share_fit((int[]){ 1, 1, 1 }, 3, 4, take));
}

static void test_refusals(void **state)
{
	(void)state;
	int take[2] = { 7, 7 };
	assert_false(egs_share_fit((int[]){ 100, 100 }, 2, 300, take)); /* more than the node */
	assert_take(take, (int[]){ 0, 0 }, 2);
	assert_true(egs_share_fit((int[]){ 100, 100 }, 2, 200, take));
	assert_false(egs_share_fit((int[]){ 100, 99 }, 2, 200, take));
	assert_false(egs_share_fit((int[]){ 0, 0 }, 2, 1, take));
	assert_false(egs_share_fit((int[]){ 100, 100 }, 2, 0, take));
	assert_false(egs_share_fit((int[]){ 100 }, 0, 10, take));
}

static void test_numbers_and_text(void **state)
{
	(void)state;
	int c = -1;
	assert_true(egs_share_from_number(0.2, 6400, &c));
	assert_int_equal(c, 20);
	assert_true(egs_share_from_number(1.2, 6400, &c));
	assert_int_equal(c, 120);
	assert_true(egs_share_from_number(0.29, 6400, &c)); /* 28.999999999999996 hundredths */
	assert_int_equal(c, 29);
	assert_true(egs_share_from_number(2, 6400, &c));
	assert_int_equal(c, 200);
	assert_true(egs_share_from_number(0.01, 6400, &c));
	assert_int_equal(c, 1);
	assert_true(egs_share_from_number(64, 6400, &c));
	assert_false(egs_share_from_number(64.01, 6400, &c));
	assert_false(egs_share_from_number(0.001, 6400, &c));
	assert_false(egs_share_from_number(0.125, 6400, &c));
	assert_false(egs_share_from_number(0, 6400, &c));
	assert_false(egs_share_from_number(-0.2, 6400, &c));
	assert_false(egs_share_from_number(1e9, 6400, &c));
	assert_false(egs_share_from_number(__builtin_nan(""), 6400, &c));
	assert_false(egs_share_from_number(__builtin_inf(), 6400, &c));

	char b[EGS_SHARE_TEXT_MAX];
	egs_share_format(60, b, sizeof(b));
	assert_string_equal(b, "0.60");
	egs_share_format(100, b, sizeof(b));
	assert_string_equal(b, "1.00");
	egs_share_format(0, b, sizeof(b));
	assert_string_equal(b, "0.00");
	egs_share_format(6400, b, sizeof(b));
	assert_string_equal(b, "64.00");

	const char *good[] = { "0.60", "0.6", "1", "1.00", "0.01" };
	const int want[] = { 60, 60, 100, 100, 1 };
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		assert_true(egs_share_parse(good[i], 100, &c));
		assert_int_equal(c, want[i]);
	}
	const char *bad[] = { "", "0", "0.00", "1.01", "0.601", ".5", "1.", "-0.5", "0.5x", "1e2", " 0.5", "99999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_false(egs_share_parse(bad[i], 100, &c));
}

static void test_timeline(void **state)
{
	(void)state;
	struct egs_share_timeline tl;
	int take[2];
	egs_share_timeline_init(&tl, 2);
	assert_int_equal(egs_share_timeline_end(&tl), INT64_MIN);
	/* An idle node: now. */
	assert_int_equal(egs_share_timeline_earliest(NULL, 2, 1000, 120, take), 1000);
	assert_take(take, (int[]){ 60, 60 }, 2);
	assert_int_equal(egs_share_timeline_earliest(NULL, 2, 1000, 201, take), INT64_MAX);
	/* The seed's node: 0.2 until 3600, 1.2 until 7200. */
	egs_share_timeline_add(&tl, 0, 3600, (int[]){ 20, 0 });
	egs_share_timeline_add(&tl, 0, 7200, (int[]){ 60, 60 });
	assert_int_equal(egs_share_timeline_end(&tl), 7200);
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 0, 20, take), 0); /* fits now: 0.20 free */
	assert_take(take, (int[]){ 20, 0 }, 2);
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 0, 50, take), 3600); /* when 0.2 leaves */
	assert_take(take, (int[]){ 25, 25 }, 2);
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 0, 150, take), 7200);
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 5000, 50, take), 5000); /* the floor */
	/* A reservation moves the floor: nothing placed after it starts before its start. */
	egs_share_timeline_add(&tl, 3600, 9000, (int[]){ 25, 25 });
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 0, 10, take), 3600);
	assert_int_equal(egs_share_timeline_earliest(&tl, 2, 0, 100, take), 7200);
	assert_take(take, (int[]){ 50, 50 }, 2);
	egs_share_timeline_cleanup(&tl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_scenario), cmocka_unit_test(test_best_fit_and_ties),
		cmocka_unit_test(test_spread),	      cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_numbers_and_text), cmocka_unit_test(test_timeline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
