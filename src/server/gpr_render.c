/*
 * gpr_render.c: a GPR's view written as compact JSON bytes, the same bytes jansson's dump of
 * egs_json_gpr_at() gives (gpr_render.h states the promise; tests/unit/test_gpr_render.c checks it).
 *
 * How jansson writes each kind of value, and so how this file must:
 *   - strings: '"' and '\\' and bytes below 0x20 escaped (\b \f \n \r \t by name, the others as
 *     \u00XX with upper-case hex); '/' and DEL are not escaped, bytes of UTF-8 pass through;
 *   - integers: "%lld";
 *   - reals (a shared GPR's GPUs): "%.17g", then ".0" appended when neither '.' nor 'e' appears and
 *     the exponent's '+' and leading zeros removed (jansson's jsonp_dtostr), so 0.2 is
 *     0.20000000000000001;
 *   - objects keep their keys in insertion order; a key set again keeps its first position
 *     (idleTimeOutDuration), keys added after the pack come last (status.checks, status.evictedBy).
 * A check run's checks are stored JSON text: they are parsed and dumped by jansson, as in the tree.
 */
#include "server/gpr_render.h"

#include "core/gpr.h"
#include "core/share.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON string, escaped as jansson escapes it (file comment). */
static void put_str(struct egs_buf *b, const char *s)
{
	egs_buf_putc(b, '"');
	for (;;) {
		const char *run = s;
		while ((unsigned char)*s >= 0x20 && *s != '"' && *s != '\\')
			s++;
		egs_buf_put(b, run, (size_t)(s - run));
		if (!*s)
			break;
		char esc[8] = { '\\', 0 };
		size_t n = 2;
		switch (*s) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default: {
			static const char hex[] = "0123456789ABCDEF";
			unsigned char c = (unsigned char)*s;
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		}
		}
		egs_buf_put(b, esc, n);
		s++;
	}
	egs_buf_putc(b, '"');
}

static void put_int(struct egs_buf *b, int64_t v)
{
	char buf[24], *end = buf + sizeof(buf);
	char *p = egs_u64_digits(end, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	egs_buf_put(b, p, (size_t)(end - p));
}

static void put_bool(struct egs_buf *b, bool v)
{
	if (v)
		EGS_BUF_LIT(b, "true");
	else
		EGS_BUF_LIT(b, "false");
}

/* Two digits of v (0..99) at p. */
static void two(char *p, unsigned v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
}

/* The date of a day count since 1970-01-01 (proleptic Gregorian; H. Hinnant's civil_from_days). */
static void civil(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	unsigned doe = (unsigned)(days - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

#define YEAR_10000 253402300800LL /* 10000-01-01T00:00:00Z: from there %Y has five digits */

/* A time as egs_time_format writes it, as a string, or null for 0.  Years 1970-9999 are written
 * here (gmtime_r takes glibc's time zone lock); others go through egs_time_format itself. */
static void put_time(struct egs_buf *b, int64_t t)
{
	if (!t) {
		EGS_BUF_LIT(b, "null");
		return;
	}
	char s[48];
	size_t n;
	if (t > 0 && t < YEAR_10000) {
		int64_t y;
		unsigned mo, d, sod = (unsigned)(t % 86400);
		civil(t / 86400, &y, &mo, &d);
		memcpy(s, "\"0000-00-00T00:00:00Z\"", 22);
		two(s + 1, (unsigned)(y / 100));
		two(s + 3, (unsigned)(y % 100));
		two(s + 6, mo);
		two(s + 9, d);
		two(s + 12, sod / 3600);
		two(s + 15, sod / 60 % 60);
		two(s + 18, sod % 60);
		n = 22;
	} else {
		s[0] = '"';
		egs_time_format(t, s + 1, sizeof(s) - 2);
		n = strlen(s);
		s[n++] = '"';
	}
	egs_buf_put(b, s, n);
}

/* A duration as egs_duration_format writes it ("<h>h<m>m<s>s"), as a string. */
static void put_duration(struct egs_buf *b, int64_t secs)
{
	if (secs < 0)
		secs = 0;
	char buf[64], *end = buf + sizeof(buf), *p = end;
	*--p = '"';
	*--p = 's';
	p = egs_u64_digits(p, (uint64_t)(secs % 60));
	*--p = 'm';
	p = egs_u64_digits(p, (uint64_t)(secs % 3600 / 60));
	*--p = 'h';
	p = egs_u64_digits(p, (uint64_t)(secs / 3600));
	*--p = '"';
	egs_buf_put(b, p, (size_t)(end - p));
}

/* A real as jansson's jsonp_dtostr writes it (file comment). */
static void put_real(struct egs_buf *b, double v)
{
	char s[64];
	int n = snprintf(s, sizeof(s) - 3, "%.17g", v);
	EGS_ASSERT(n > 0 && (size_t)n < sizeof(s) - 3);
	if (!strchr(s, '.') && !strchr(s, 'e')) {
		memcpy(s + n, ".0", 3);
		n += 2;
	}
	char *e = strchr(s, 'e');
	if (e) {
		char *start = e + 1, *end = e + 2;
		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, (size_t)(s + n - end) + 1);
			n -= (int)(end - start);
		}
	}
	egs_buf_put(b, s, (size_t)n);
}

/* A number of GPUs in hundredths: an integer when whole, else a real (views.c gpus_json). */
static void put_gpus(struct egs_buf *b, int centi)
{
	if (centi % EGS_SHARE_WHOLE)
		put_real(b, centi / (double)EGS_SHARE_WHOLE);
	else
		put_int(b, centi / EGS_SHARE_WHOLE);
}

/* A node key "cluster/name" as the view names it: the part after the first '/'. */
static void put_node(struct egs_buf *b, const char *key)
{
	const char *slash = strchr(key, '/');
	put_str(b, slash ? slash + 1 : key);
}

static void put_strlist(struct egs_buf *b, const struct egs_strlist *l, bool nodes)
{
	EGS_BUF_LIT(b, "[");
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			EGS_BUF_LIT(b, ",");
		if (nodes)
			put_node(b, l->v[i]);
		else
			put_str(b, l->v[i]);
	}
	EGS_BUF_LIT(b, "]");
}

/* jansson's dump callback into an egs_buf. */
static int dump_into(const char *data, size_t len, void *arg)
{
	egs_buf_put(arg, data, len);
	return 0;
}

static void put_check_runs(struct egs_buf *b, const struct egs_gpr *g)
{
	EGS_BUF_LIT(b, ",\"checks\":[");
	for (size_t i = 0; i < g->n_check_runs; i++) {
		const struct egs_check_run *run = &g->check_runs[i];
		if (i)
			EGS_BUF_LIT(b, ",");
		EGS_BUF_LIT(b, "{\"node\":");
		put_node(b, run->node);
		if (run->post)
			EGS_BUF_LIT(b, ",\"phase\":\"post\",\"time\":");
		else
			EGS_BUF_LIT(b, ",\"phase\":\"pre\",\"time\":");
		put_time(b, run->time);
		EGS_BUF_LIT(b, ",\"ok\":");
		put_bool(b, run->ok);
		EGS_BUF_LIT(b, ",\"checks\":");
		json_t *checks = json_loads(run->checks, 0, NULL);
		EGS_ASSERT(json_is_array(checks)); /* written by api_agent.c from a validated array */
		EGS_ASSERT(json_dump_callback(checks, dump_into, b, JSON_COMPACT) == 0);
		json_decref(checks);
		EGS_BUF_LIT(b, "}");
	}
	EGS_BUF_LIT(b, "]");
}

/* The view's "status" object. */
static void put_status(struct egs_buf *b, const struct egs_gpr *g, const struct egs_gpr_facts *f, double cost)
{
	EGS_BUF_LIT(b, "{\"provisioningStatus\":");
	put_str(b, egs_gpr_state_name(g->state));
	EGS_BUF_LIT(b, ",\"failureReason\":");
	put_str(b, g->failure_reason ? g->failure_reason : "");
	EGS_BUF_LIT(b, ",\"numGpusAllocated\":");
	if (g->share_centi)
		put_gpus(b, f->allocated ? g->share_centi : 0);
	else
		put_int(b, f->allocated);
	EGS_BUF_LIT(b, ",\"startTimestamp\":");
	put_time(b, g->start_ts);
	EGS_BUF_LIT(b, ",\"completionTimestamp\":");
	put_time(b, g->completion_ts);
	EGS_BUF_LIT(b, ",\"cost\":");
	if (cost == 0 && !signbit(cost)) {
		EGS_BUF_LIT(b, "\"0.00\"");
	} else {
		char c[400]; /* "%.2f" of DBL_MAX is 312 bytes */
		snprintf(c, sizeof(c), "%.2f", cost);
		put_str(b, c);
	}
	EGS_BUF_LIT(b, ",\"nodes\":");
	put_strlist(b, &g->nodes, true);
	EGS_BUF_LIT(b, ",\"internalState\":");
	put_str(b, f->internal_state);
	EGS_BUF_LIT(b, ",\"retryCount\":");
	put_int(b, g->retry_count);
	EGS_BUF_LIT(b, ",\"delayedCount\":");
	put_int(b, g->delayed_count);
	EGS_BUF_LIT(b, ",\"pendingReason\":");
	if (g->pending_reason && *g->pending_reason)
		put_str(b, g->pending_reason);
	else
		EGS_BUF_LIT(b, "null");
	EGS_BUF_LIT(b, ",\"exitTimestamp\":");
	put_time(b, g->exit_at);
	EGS_BUF_LIT(b, ",\"remainingDuration\":");
	put_duration(b, f->remaining);
	EGS_BUF_LIT(b, ",\"createdTimestamp\":");
	put_time(b, g->created_at);
	if (g->n_check_runs)
		put_check_runs(b, g);
	EGS_BUF_LIT(b, ",\"evictedBy\":");
	if (g->evicted_by[0])
		put_str(b, g->evicted_by);
	else
		EGS_BUF_LIT(b, "null");
	EGS_BUF_LIT(b, "}");
}

/* The flags part of the view, from earlyRelease to enableRDMA's neighbours, in the tree's order. */
static void put_flag(struct egs_buf *b, const char *key_lit, size_t key_len, bool v)
{
	egs_buf_put(b, key_lit, key_len);
	put_bool(b, v);
}
#define PUT_FLAG(b, key, v) put_flag((b), ",\"" key "\":", sizeof(",\"" key "\":") - 1, (v))

void egs_render_gpr(struct egs_buf *b, const struct egs_gpr *g, int64_t now, double cost)
{
	struct egs_gpr_facts f;
	egs_gpr_facts(g, now, &f);
	EGS_BUF_LIT(b, "{\"gprId\":");
	put_str(b, g->id);
	EGS_BUF_LIT(b, ",\"gprName\":");
	put_str(b, g->name);
	EGS_BUF_LIT(b, ",\"sliceName\":");
	put_str(b, g->workspace);
	EGS_BUF_LIT(b, ",\"clusterName\":");
	put_str(b, g->cluster);
	EGS_BUF_LIT(b, ",\"numberOfGPUs\":");
	if (g->share_centi)
		put_gpus(b, g->share_centi);
	else
		put_int(b, g->gpus_per_node);
	EGS_BUF_LIT(b, ",\"numberOfGPUNodes\":");
	put_int(b, g->node_count);
	EGS_BUF_LIT(b, ",\"instanceType\":");
	put_str(b, g->instance_type);
	EGS_BUF_LIT(b, ",\"memoryPerGPU\":");
	put_int(b, g->memory_mib);
	EGS_BUF_LIT(b, ",\"memoryPerGpu\":");
	put_int(b, g->memory_mib);
	EGS_BUF_LIT(b, ",\"priority\":");
	put_int(b, g->priority);
	if (g->share_centi)
		EGS_BUF_LIT(b, ",\"gpuSharingMode\":\"Shared\",\"estimatedStartTime\":");
	else
		EGS_BUF_LIT(b, ",\"gpuSharingMode\":\"Dedicated\",\"estimatedStartTime\":");
	put_time(b, f.est);
	EGS_BUF_LIT(b, ",\"estimatedWaitTime\":");
	if (f.has_wait)
		put_duration(b, f.wait);
	else
		EGS_BUF_LIT(b, "null");
	EGS_BUF_LIT(b, ",\"exitDuration\":");
	put_duration(b, g->exit_duration_s);
	PUT_FLAG(b, "earlyRelease", g->flags & EGS_GPRF_EARLY_RELEASE);
	EGS_BUF_LIT(b, ",\"gpuShape\":");
	put_str(b, g->gpu_shape);
	PUT_FLAG(b, "multiNode", g->node_count > 1);
	PUT_FLAG(b, "dedicatedNodes", !g->share_centi);
	PUT_FLAG(b, "enableRDMA", g->flags & EGS_GPRF_RDMA);
	PUT_FLAG(b, "enableSecondaryNetwork", g->flags & EGS_GPRF_SECONDARY_NET);
	EGS_BUF_LIT(b, ",\"idleTimeOutDuration\":");
	if (g->idle_timeout_s)
		put_duration(b, g->idle_timeout_s);
	else
		EGS_BUF_LIT(b, "\"\"");
	PUT_FLAG(b, "enforceIdleTimeOut", g->flags & EGS_GPRF_ENFORCE_IDLE);
	PUT_FLAG(b, "enableEviction", g->flags & EGS_GPRF_EVICTION);
	PUT_FLAG(b, "requeueOnFailure", g->flags & EGS_GPRF_REQUEUE);
	EGS_BUF_LIT(b, ",\"preferredClusters\":");
	put_strlist(b, &g->preferred_clusters, false);
	PUT_FLAG(b, "enableAutoClusterSelection", g->flags & EGS_GPRF_AUTO_CLUSTER);
	PUT_FLAG(b, "enableAutoGpuSelection", g->flags & EGS_GPRF_AUTO_GPU);
	EGS_BUF_LIT(b, ",\"status\":");
	put_status(b, g, &f, cost);
	EGS_BUF_LIT(b, "}");
}

void egs_render_str(struct egs_buf *b, const char *s)
{
	put_str(b, s);
}

void egs_render_raw(struct egs_buf *b, const char *s, size_t n)
{
	egs_buf_put(b, s, n);
}

void egs_render_gpr_reply(struct egs_buf *b, const struct egs_gpr *g, int64_t now, double cost)
{
	EGS_BUF_LIT(b, "{\"statusCode\":200,\"status\":\"OK\",\"message\":\"Success\",\"data\":");
	egs_render_gpr(b, g, now, cost);
	EGS_BUF_LIT(b, "}");
}
