/*
 * test_gpr_render.c: the hand-written GPR view (server/gpr_render.h) against jansson.  For every
 * generated GPR (every state, shared and dedicated, strings with quotes, backslashes, slashes, every
 * control character, DEL and UTF-8 of two to four bytes, empty strings, check runs, evictions, idle
 * timeouts, timestamps from 0 and negative through year 9999 to beyond it, estimates in the past and
 * the future, costs from 0 to huge), egs_render_gpr's bytes equal jansson's JSON_COMPACT dump of
 * egs_json_gpr_at() byte for byte, and the reply is that dump inside the success envelope.  A field
 * written in any other way (a real trimmed, a slash escaped, a key moved) fails it at its offset.
 * The queue's part of a view (egs_json_gpr_queued) holds the same values as the whole view.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "server/gpr_render.h"
#include "server/server.h"

#include "rng.h"

/* Pieces strings are made of: plain text, everything JSON escapes, what jansson leaves alone. */
static const char *const pieces[] = {
	"a", "gpr", "Z9", " ", "-", ".", "_", "\"", "\\", "/", "\\/", "\b", "\f", "\n", "\r", "\t",
	"\x01", "\x02", "\x07", "\x0b", "\x0e", "\x10", "\x1a", "\x1b", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac",
	"\xf0\x9f\x98\x80", "\xd0\x96", "\\u0041", "%s", "%%", "'", "{}", "[]", ":", ",", "null", "0",
};

/* A random string of up to max - 1 bytes made of whole pieces (so valid UTF-8), "" at times. */
static void gen_str(char *out, size_t max)
{
	size_t len = 0, want = rng_below(4) == 0 ? 0 : rng_below(max);
	out[0] = '\0';
	while (len < want) {
		const char *p = pieces[rng_below(EGS_ARRAY_LEN(pieces))];
		size_t n = strlen(p);
		if (len + n >= max)
			break;
		memcpy(out + len, p, n + 1);
		len += n;
	}
}

static char *gen_dup(size_t max)
{
	char buf[256];
	gen_str(buf, max < sizeof(buf) ? max : sizeof(buf));
	char *s = malloc(strlen(buf) + 1);
	memcpy(s, buf, strlen(buf) + 1);
	return s;
}

/* A timestamp of any of the forms a view must write. */
static int64_t gen_time(int64_t now)
{
	switch (rng_below(12)) {
	case 0: return 0;
	case 1: return -rng_range(1, 4000000000LL);
	case 10: return -rng_range(1, 200000); /* just before 1970 */
	case 11: return 253402300800LL + rng_range(0, 100000); /* the first day of year 10000 */
	case 2: return rng_range(1, 100000);
	case 3: return 253402300800LL + rng_range(-3, 2); /* the turn of year 9999 */
	case 4: return 253402300800LL + rng_range(0, 1000000000000LL); /* year 10000 and on */
	case 5: return 951782400LL + rng_range(-86400, 86400); /* around 2000-02-29 */
	case 6: return now - rng_range(0, 1000000);
	default: return now + rng_range(-100000, 10000000);
	}
}

static double gen_cost(void)
{
	switch (rng_below(6)) {
	case 0: return 0;
	case 1: return rng_range(0, 100000) / 100.0;
	case 2: return (double)rng_range(0, 1LL << 50) / 7.0;
	case 3: return 1e300;
	case 4: return 0.005;
	default: return (double)rng_next() / 1e12;
	}
}

static const char *const checks_texts[] = {
	"[]",
	"[{\"name\":\"gpu-visible\",\"ok\":true}]",
	"[ {\"name\" : \"nccl\", \"ok\" : false, \"ms\" : 1.5, \"detail\": \"a/b \\u00e9\\n\"}, 3, null ]",
	"[{\"b\":1,\"a\":2,\"n\":-0.25e3,\"big\":12345678901234}]",
};

static void gen_gpr(struct egs_gpr *g, int64_t now)
{
	memset(g, 0, sizeof(*g));
	g->state = (enum egs_gpr_state)rng_below(EGS_GPR_NSTATES);
	gen_str(g->id, sizeof(g->id));
	gen_str(g->name, sizeof(g->name));
	gen_str(g->workspace, sizeof(g->workspace));
	gen_str(g->cluster, sizeof(g->cluster));
	gen_str(g->instance_type, sizeof(g->instance_type));
	gen_str(g->gpu_shape, sizeof(g->gpu_shape));
	if (rng_below(3) == 0)
		gen_str(g->evicted_by, sizeof(g->evicted_by));
	g->node_count = (int)rng_range(0, 64);
	g->share_centi = rng_below(2) ? 0 : (int)rng_range(1, 800);
	g->gpus_per_node = (int)rng_range(0, 16);
	g->memory_mib = rng_below(5) == 0 ? rng_range(-5, INT64_MAX / 2) : rng_range(0, 200000);
	g->priority = (int)rng_range(-5, 1000000);
	g->retry_count = (int)rng_range(0, 20);
	g->delayed_count = (int)rng_range(0, 20);
	g->flags = (uint32_t)rng_below(1u << 10);
	g->exit_duration_s = rng_below(8) == 0 ? rng_range(-100, 0) : rng_range(0, 400LL * 86400);
	g->idle_timeout_s = rng_below(2) ? 0 : rng_range(1, 86400 * 10);
	g->est_start = rng_below(4) == 0 ? 0 : gen_time(now);
	g->start_ts = gen_time(now);
	g->exit_at = gen_time(now);
	g->completion_ts = gen_time(now);
	g->created_at = gen_time(now);
	g->phase_since = gen_time(now);
	if (rng_below(3))
		g->failure_reason = gen_dup(200);
	if (rng_below(3))
		g->pending_reason = gen_dup(rng_below(4) ? 200 : 1);
	for (size_t i = 0, n = rng_below(4); i < n; i++) {
		char name[80], key[160];
		gen_str(name, 40);
		snprintf(key, sizeof(key), "%s%s", rng_below(4) ? "cluster-a/" : "", name);
		egs_strlist_add(&g->nodes, key);
	}
	for (size_t i = 0, n = rng_below(3); i < n; i++) {
		char c[64];
		gen_str(c, sizeof(c));
		egs_strlist_add(&g->preferred_clusters, c);
	}
	if (rng_below(4) == 0) {
		g->n_check_runs = 1 + rng_below(3);
		g->check_runs = calloc(g->n_check_runs, sizeof(*g->check_runs));
		for (size_t i = 0; i < g->n_check_runs; i++) {
			struct egs_check_run *run = &g->check_runs[i];
			char name[40];
			gen_str(name, sizeof(name));
			snprintf(run->node, sizeof(run->node), "%s%s", rng_below(4) ? "c1/" : "", name);
			run->post = rng_below(2);
			run->ok = rng_below(2);
			run->time = gen_time(now);
			const char *t = checks_texts[rng_below(EGS_ARRAY_LEN(checks_texts))];
			run->checks = malloc(strlen(t) + 1);
			memcpy(run->checks, t, strlen(t) + 1);
		}
	}
}

static void free_gpr(struct egs_gpr *g)
{
	free(g->failure_reason);
	free(g->pending_reason);
	egs_strlist_cleanup(&g->nodes);
	egs_strlist_cleanup(&g->preferred_clusters);
	for (size_t i = 0; i < g->n_check_runs; i++)
		free(g->check_runs[i].checks);
	free(g->check_runs);
}

/* jansson's bytes of g's view (and of its reply when env). */
static char *jansson_bytes(const struct egs_gpr *g, int64_t now, double cost, bool env)
{
	json_t *o = egs_json_gpr_at(g, now, cost);
	if (env)
		o = json_pack("{s:i, s:s, s:s, s:o}", "statusCode", 200, "status", "OK", "message", "Success", "data", o);
	assert_non_null(o);
	char *s = json_dumps(o, JSON_COMPACT);
	assert_non_null(s);
	json_decref(o);
	return s;
}

/* Fails at the first byte where the renderer's bytes leave jansson's, showing both around it. */
static void same_bytes(const char *want, const struct egs_buf *b, unsigned iter)
{
	size_t wn = strlen(want), i = 0;
	while (i < wn && i < b->len && want[i] == b->p[i])
		i++;
	if (i == wn && i == b->len)
		return;
	size_t from = i > 60 ? i - 60 : 0;
	fail_msg("GPR %u: rendered bytes leave jansson's at offset %zu\n jansson: %.*s\n render:  %.*s", iter, i,
		 (int)(wn - from < 120 ? wn - from : 120), want + from,
		 (int)(b->len - from < 120 ? b->len - from : 120), b->p + from);
}

static void test_generated_gprs_match_jansson(void **state)
{
	(void)state;
	rng_seed(16);
	struct egs_buf b = { 0 };
	unsigned shared = 0, checked = 0, states[EGS_GPR_NSTATES] = { 0 };
	for (unsigned iter = 0; iter < 5000; iter++) {
		int64_t now = 1790000000LL + rng_range(-1000000, 1000000);
		double cost = gen_cost();
		struct egs_gpr g;
		gen_gpr(&g, now);
		shared += g.share_centi != 0;
		checked += g.n_check_runs != 0;
		states[g.state]++;

		char *want = jansson_bytes(&g, now, cost, false);
		b.len = 0;
		egs_render_gpr(&b, &g, now, cost);
		same_bytes(want, &b, iter);
		free(want);

		want = jansson_bytes(&g, now, cost, true);
		b.len = 7; /* appends: what the buffer held stays */
		memcpy(b.p, "prefix:", 7);
		egs_render_gpr_reply(&b, &g, now, cost);
		assert_memory_equal(b.p, "prefix:", 7);
		struct egs_buf tail = { .p = b.p + 7, .len = b.len - 7 };
		same_bytes(want, &tail, iter);
		free(want);
		free_gpr(&g);
	}
	/* the generator reached every form */
	assert_true(shared > 1000 && checked > 500);
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		assert_true(states[s] > 100);
	egs_buf_cleanup(&b);
	assert_null(b.p);
}

/* Every whole and fractional GPU count a shared GPR may ask for, written as jansson writes its real
 * (0.2 is 0.20000000000000001) or integer. */
static void test_every_share_count(void **state)
{
	(void)state;
	struct egs_gpr g;
	memset(&g, 0, sizeof(g));
	g.state = EGS_GPR_PROVISIONED;
	egs_strlist_add(&g.nodes, "c/n1");
	struct egs_buf b = { 0 };
	for (int centi = 1; centi <= 20000; centi++) {
		g.share_centi = centi;
		char *want = jansson_bytes(&g, 1790000000LL, 0, false);
		b.len = 0;
		egs_render_gpr(&b, &g, 1790000000LL, 0);
		same_bytes(want, &b, (unsigned)centi);
		free(want);
	}
	egs_strlist_cleanup(&g.nodes);
	egs_buf_cleanup(&b);
}

/* Timestamps across four centuries, every end of February among them (leap years, 2100 not one),
 * as egs_time_format (gmtime_r and strftime) writes them. */
static void test_timestamps(void **state)
{
	(void)state;
	rng_seed(1970);
	struct egs_gpr g;
	memset(&g, 0, sizeof(g));
	g.state = EGS_GPR_COMPLETE;
	struct egs_buf b = { 0 };
	for (int64_t year = 1969; year <= 2400; year++) {
		/* Feb 27 of year, from the days since 1970 of its Jan 1 */
		int64_t y = year - 1, jan1 = (year - 1970) * 365 + (y / 4 - 492) - (y / 100 - 19) + (y / 400 - 4);
		for (int day = 57; day <= 60; day++) {
			int64_t t = (jan1 + day) * 86400;
			g.created_at = t + rng_range(0, 86399);
			g.start_ts = t - 1;
			g.exit_at = t;
			g.completion_ts = t + 86399;
			char *want = jansson_bytes(&g, t, 0, false);
			b.len = 0;
			egs_render_gpr(&b, &g, t, 0);
			same_bytes(want, &b, (unsigned)year);
			free(want);
		}
	}
	egs_buf_cleanup(&b);
}

/* A queue entry's part of the view (egs_json_gpr_queued) holds the very values of the whole view,
 * keys in the queue's order, provisioningStatus taken from the view's status. */
static void test_queue_entry_matches_view(void **state)
{
	(void)state;
	static const char *const keys[] = { "gprId", "gprName", "sliceName", "clusterName", "gpuShape", "instanceType",
					    "numberOfGPUNodes", "numberOfGPUs", "priority", "estimatedStartTime",
					    "estimatedWaitTime", "provisioningStatus" };
	rng_seed(300);
	for (unsigned iter = 0; iter < 2000; iter++) {
		int64_t now = 1790000000LL + rng_range(-1000000, 1000000);
		struct egs_gpr g;
		gen_gpr(&g, now);
		json_t *view = egs_json_gpr_at(&g, now, 0), *q = egs_json_gpr_queued(&g, now);
		assert_int_equal(json_object_size(q), EGS_ARRAY_LEN(keys));
		size_t i = 0;
		const char *k;
		json_t *v;
		json_object_foreach(q, k, v) {
			assert_string_equal(k, keys[i++]);
			json_t *want = strcmp(k, "provisioningStatus") ? json_object_get(view, k)
								       : json_object_get(json_object_get(view, "status"), k);
			if (!json_equal(v, want))
				fail_msg("GPR %u: queue entry's %s differs from the view's", iter, k);
		}
		json_decref(view);
		json_decref(q);
		free_gpr(&g);
	}
}

/* Fixed cases whose bytes are known, so that a change in jansson and renderer alike still shows. */
static void test_known_bytes(void **state)
{
	(void)state;
	struct egs_gpr g;
	memset(&g, 0, sizeof(g));
	g.state = EGS_GPR_QUEUED;
	memcpy(g.id, "gpr-1", 6);
	memcpy(g.name, "a/\"b\\\x01\xc3\xa9", 9);
	g.share_centi = 20;
	g.est_start = 1790000100LL;
	struct egs_buf b = { 0 };
	egs_render_gpr(&b, &g, 1790000000LL, 0);
	char *s = strndup(b.p, b.len);
	assert_non_null(strstr(s, "\"gprName\":\"a/\\\"b\\\\\\u0001\xc3\xa9\""));
	assert_non_null(strstr(s, "\"numberOfGPUs\":0.20000000000000001"));
	assert_non_null(strstr(s, "\"estimatedStartTime\":\"2026-09-21T14:15:00Z\",\"estimatedWaitTime\":\"0h1m40s\""));
	assert_non_null(strstr(s, "\"idleTimeOutDuration\":\"\",\"enforceIdleTimeOut\""));
	assert_non_null(strstr(s, "\"cost\":\"0.00\""));
	assert_non_null(strstr(s, "\"createdTimestamp\":null,\"evictedBy\":null}}"));
	free(s);
	egs_buf_cleanup(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generated_gprs_match_jansson),
		cmocka_unit_test(test_every_share_count),
		cmocka_unit_test(test_timestamps),
		cmocka_unit_test(test_queue_entry_matches_view),
		cmocka_unit_test(test_known_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
