/*
 * api_usage.c: cost and usage, and insights from the GPR queue.
 *
 *   GET /api/v1/prices                 hourly price per GPU of each shape, with its history
 *   PUT /api/v1/prices                 (admin) {"gpuShape", "pricePerGpuHour", "currency"?}
 *   GET /api/v1/usage                  ?sliceName= &since= &until=   GPU-hours, cost and GPRs per workspace
 *   GET /api/v1/insights/queue         ?since= &until= &bucket=1d   demand against capacity per shape
 *                                      and cluster, wait times by bucket, the shapes most waited
 *                                      for, early-release rates per workspace
 *
 * A GPR holds GPUs (egs_gpr_gpus: gpusPerNode x nodes, or its share when Shared) from its startTimestamp until it leaves Provisioned: the
 * exit time, or its completion when released early (draining included), capped at the exit time.
 * Cost integrates the price over that interval, following price changes: a price set at time t
 * applies from t on (prices are kept in the store's meta table, at most 100 changes per shape).
 * Capacity is today's inventory (the control plane keeps no inventory history).
 */
#include "server/aged.h"
#include "server/observe.h"

#include "core/gpr.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRICES_KEY "observability.prices"
#define MAX_PRICE_CHANGES 100
#define MAX_BUCKETS 1000

/* ---- prices ---- */

static json_t *history(const struct egs_server *srv, const char *shape)
{
	return json_object_get(json_object_get(srv->obs->prices, "shapes"), shape);
}

static const char *currency(const struct egs_server *srv)
{
	const char *c = json_string_value(json_object_get(srv->obs->prices, "currency"));
	return c ? c : "USD";
}

double egs_price_at(const struct egs_server *srv, const char *shape, int64_t t)
{
	double p = 0;
	size_t i;
	json_t *e;
	json_array_foreach(history(srv, shape), i, e) {
		if (json_integer_value(json_object_get(e, "from")) > t)
			break;
		p = json_number_value(json_object_get(e, "price"));
	}
	return p;
}

double egs_price_cost(const struct egs_server *srv, const char *shape, double gpus, int64_t from, int64_t to)
{
	json_t *h = history(srv, shape);
	double cost = 0;
	size_t n = json_array_size(h);
	for (size_t i = 0; i < n; i++) {
		int64_t a = json_integer_value(json_object_get(json_array_get(h, i), "from"));
		int64_t b = i + 1 < n ? json_integer_value(json_object_get(json_array_get(h, i + 1), "from")) : INT64_MAX;
		int64_t lo = a > from ? a : from, hi = b < to ? b : to;
		if (hi > lo)
			cost += json_number_value(json_object_get(json_array_get(h, i), "price")) * gpus *
				(double)(hi - lo) / 3600.0;
	}
	return cost;
}

const char *egs_gpr_shape(const struct egs_server *srv, const struct egs_gpr *g)
{
	if (g->gpu_shape[0])
		return g->gpu_shape;
	const struct egs_node *n = g->nodes.n ? egs_map_get(&srv->st.nodes, g->nodes.v[0]) : NULL;
	return n ? n->gpu_shape : "";
}

bool egs_gpr_held(const struct egs_gpr *g, int64_t now, int64_t *from, int64_t *to)
{
	if (!g->start_ts || g->state == EGS_GPR_QUEUED || g->state == EGS_GPR_PENDING)
		return false;
	*from = g->start_ts;
	int64_t end = g->completion_ts && g->state != EGS_GPR_PROVISIONED && g->state != EGS_GPR_RELEASING
			      ? g->completion_ts : now;
	if (g->exit_at && end > g->exit_at)
		end = g->exit_at;
	*to = end > *from ? end : *from;
	return true;
}

double egs_gpr_cost(const struct egs_server *srv, const struct egs_gpr *g, int64_t now)
{
	int64_t from, to;
	if (!srv->obs || !egs_gpr_held(g, now, &from, &to))
		return 0;
	return egs_price_cost(srv, egs_gpr_shape(srv, g), egs_gpr_gpus(g), from, to);
}

static json_t *time_json(int64_t t)
{
	char b[32];
	egs_time_format(t, b, sizeof(b));
	return json_string(b);
}

static void prices_get(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	int64_t now = egs_now(srv);
	json_t *items = json_array(), *h;
	const char *shape;
	json_object_foreach(json_object_get(srv->obs->prices, "shapes"), shape, h) {
		json_t *hist = json_array(), *e;
		size_t i;
		json_array_foreach(h, i, e)
			json_array_append_new(hist, json_pack("{s:o, s:O}", "from",
							      time_json(json_integer_value(json_object_get(e, "from"))),
							      "pricePerGpuHour", json_object_get(e, "price")));
		json_array_append_new(items, json_pack("{s:s, s:f, s:o}", "gpuShape", shape, "pricePerGpuHour",
						       egs_price_at(srv, shape, now), "history", hist));
	}
	egs_reply_ok(r, json_pack("{s:s, s:o}", "currency", currency(srv), "items", items));
}

static void prices_put(struct egs_req *r)
{
	static const char *const allowed[] = { "gpuShape", "pricePerGpuHour", "currency", NULL };
	struct egs_server *srv = r->srv;
	char shape[EGS_NAME_MAX], cur[8];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "gpuShape", true, shape, sizeof(shape)) || !egs_check_name(r, "gpuShape", shape, false) ||
	    !egs_get_str(r, r->body, "currency", false, cur, sizeof(cur)))
		return;
	if (r->who.project[0]) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "only an admin of every project may set prices");
		return;
	}
	json_t *pv = json_object_get(r->body, "pricePerGpuHour");
	if (!json_is_number(pv) || json_number_value(pv) < 0 || json_number_value(pv) > 1e6) {
		egs_reply_invalid(r, "pricePerGpuHour", "pricePerGpuHour must be a number from 0 to 1000000");
		return;
	}
	for (const char *c = cur; *c; c++)
		if (*c < 'A' || *c > 'Z' || c - cur >= 3) {
			egs_reply_invalid(r, "currency", "currency must be an ISO 4217 code such as USD");
			return;
		}
	int64_t now = egs_now(srv);
	json_t *next = json_deep_copy(srv->obs->prices);
	if (!json_object_get(next, "shapes"))
		json_object_set_new(next, "shapes", json_object());
	if (cur[0])
		json_object_set_new(next, "currency", json_string(cur));
	json_t *shapes = json_object_get(next, "shapes"), *h = json_object_get(shapes, shape);
	if (!h) {
		h = json_array();
		json_object_set_new(shapes, shape, h);
	}
	size_t n = json_array_size(h);
	if (n && json_integer_value(json_object_get(json_array_get(h, n - 1), "from")) >= now)
		json_array_remove(h, n - 1); /* two changes in one second: the later wins */
	json_array_append_new(h, json_pack("{s:I, s:f}", "from", (json_int_t)now, "price", json_number_value(pv)));
	while (json_array_size(h) > MAX_PRICE_CHANGES)
		json_array_remove(h, 0);
	char *text = json_dumps(next, JSON_COMPACT);
	enum egs_err err = egs_store_meta_set(srv->store, PRICES_KEY, text);
	free(text);
	if (err) {
		json_decref(next);
		egs_reply_err(r, err, NULL, NULL, "the price could not be stored");
		return;
	}
	json_decref(srv->obs->prices);
	srv->obs->prices = next;
	egs_state_shown_change(&srv->st); /* a cost a status view shows may move (durable.c, "Shown") */
	srv->shown.prices = srv->st.view_clock;
	egs_state_event(&srv->st, now, "Normal", "PriceChanged", "GPUShape", shape, NULL,
			"price of %s set to %.4f %s per GPU-hour", shape, json_number_value(pv), currency(srv));
	egs_reply_ok(r, json_pack("{s:s, s:f, s:s, s:o}", "gpuShape", shape, "pricePerGpuHour", json_number_value(pv),
				  "currency", currency(srv), "from", time_json(now)));
}

/* ---- period parameters ---- */

static bool period(struct egs_req *r, int64_t now, int64_t def_span, int64_t *since, int64_t *until)
{
	const char *s = egs_query(r, "since"), *u = egs_query(r, "until"), *why;
	int64_t d;
	*until = now + 1; /* "until now" includes what happened this second */
	if (u && !egs_time_parse(u, until)) {
		egs_reply_invalid(r, "until", "until must be an RFC 3339 time");
		return false;
	}
	*since = *until - def_span;
	if (s && !egs_time_parse(s, since)) {
		if (!egs_duration_parse(s, &d, &why)) {
			egs_reply_invalid(r, "since", "since must be an RFC 3339 time or a duration such as 7d");
			return false;
		}
		*since = *until - d;
	}
	if (*since >= *until) {
		egs_reply_invalid(r, "since", "since must be before until");
		return false;
	}
	return true;
}

/* Is g in the caller's scope (and in ws, when given)? */
static bool gpr_visible(struct egs_req *r, const struct egs_gpr *g, const char *ws)
{
	if (ws && strcmp(g->workspace, ws) != 0)
		return false;
	return egs_obs_ws_visible(r, g->workspace);
}

/* ---- usage ---- */

static void bump(json_t *o, const char *k, double by)
{
	json_t *v = json_object_get(o, k);
	if (json_is_integer(v))
		json_object_set_new(o, k, json_integer(json_integer_value(v) + (json_int_t)by));
	else
		json_object_set_new(o, k, json_real(json_number_value(v) + by));
}

static double cents(double v)
{
	return round(v * 100) / 100;
}

/* Adds the part [lo, hi) of g's holding to its workspace's entry of per_ws. */
static void usage_add(struct egs_server *srv, json_t *per_ws, const struct egs_gpr *g, int64_t lo, int64_t hi)
{
	json_t *acc = json_object_get(per_ws, g->workspace);
	if (!acc) {
		acc = json_pack("{s:s, s:f, s:f, s:i, s:{}, s:[]}", "sliceName", g->workspace, "gpuHours", 0.0, "cost", 0.0,
				"gprs", 0, "byShape", "items");
		json_object_set_new(per_ws, g->workspace, acc);
	}
	const char *shape = egs_gpr_shape(srv, g);
	double gpus = egs_gpr_gpus(g);
	double h = gpus * (double)(hi - lo) / 3600.0, c = egs_price_cost(srv, shape, gpus, lo, hi);
	json_t *by = json_object_get(json_object_get(acc, "byShape"), shape);
	if (!by) {
		by = json_pack("{s:f, s:f}", "gpuHours", 0.0, "cost", 0.0);
		json_object_set_new(json_object_get(acc, "byShape"), shape, by);
	}
	bump(by, "gpuHours", h);
	bump(by, "cost", c);
	bump(acc, "gpuHours", h);
	bump(acc, "cost", c);
	bump(acc, "gprs", 1);
	json_array_append_new(json_object_get(acc, "items"),
			      json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:f, s:s}", "gprId", g->id, "gprName", g->name,
					"gpuShape", shape, "gpus",
					gpus == (double)(json_int_t)gpus ? json_integer((json_int_t)gpus) : json_real(gpus), "from", time_json(lo), "to", time_json(hi), "gpuHours",
					h, "cost", cents(c), "provisioningStatus", egs_gpr_state_name(g->state)));
}

struct usage_walk {
	struct egs_req *r;
	json_t *per_ws;
	const char *ws;
	int64_t now, since, until;
};

/* Adds g's part of the period to the report; true when it had one. */
static bool usage_gpr(void *ctx, const struct egs_gpr *g)
{
	struct usage_walk *u = ctx;
	int64_t from, to;
	if (!gpr_visible(u->r, g, u->ws) || !egs_gpr_held(g, u->now, &from, &to))
		return false;
	int64_t lo = from > u->since ? from : u->since, hi = to < u->until ? to : u->until;
	if (hi <= lo)
		return false;
	usage_add(u->r->srv, u->per_ws, g, lo, hi);
	return true;
}

static void usage_report(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv), since, until;
	const char *ws = egs_query(r, "sliceName");
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) ||
	    !period(r, now, 30 * 24 * 3600, &since, &until))
		return;
	if (ws && !egs_obs_ws_visible(r, ws)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found");
		return;
	}
	json_t *per_ws = json_object();
	struct usage_walk u = { r, per_ws, ws, now, since, until };
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.gprs, &i, NULL, &v);)
		usage_gpr(&u, v);
	/* Finished GPRs that left memory by age (server/aged.h): only those that ended in the period
	 * can have a part of it. */
	egs_aged_each(srv, &(struct egs_gpr_find){ .workspace = ws, .ended_since = since }, 0, usage_gpr, &u, NULL);
	json_t *items = json_array(), *acc;
	const char *k;
	json_object_foreach(per_ws, k, acc) {
		json_object_set_new(acc, "cost", json_real(cents(json_real_value(json_object_get(acc, "cost")))));
		json_t *shapes = json_array(), *s;
		const char *sk;
		json_object_foreach(json_object_get(acc, "byShape"), sk, s)
			json_array_append_new(shapes, json_pack("{s:s, s:O, s:f}", "gpuShape", sk, "gpuHours",
								json_object_get(s, "gpuHours"), "cost",
								cents(json_real_value(json_object_get(s, "cost")))));
		json_object_set_new(acc, "byShape", shapes);
		json_array_append(items, acc);
	}
	json_decref(per_ws);
	egs_reply_ok(r, json_pack("{s:o, s:o, s:s, s:o}", "since", time_json(since), "until", time_json(until),
				  "currency", currency(srv), "items", items));
}

/* ---- insights ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted values. */
static int64_t pct(const int64_t *v, size_t n, double p)
{
	size_t rank = (size_t)ceil(p * (double)n);
	return n ? v[rank ? rank - 1 : 0] : 0;
}

struct waits {
	int64_t *v;
	size_t n, cap;
};

static void waits_add(struct waits *w, int64_t x)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 16;
		w->v = egs_realloc(w->v, w->cap * sizeof(*w->v));
	}
	w->v[w->n++] = x;
}

static json_t *waits_json(struct waits *w)
{
	if (w->n) /* qsort of NULL is undefined even for 0 elements (UBSan) */
		qsort(w->v, w->n, sizeof(*w->v), cmp_i64);
	return json_pack("{s:i, s:I, s:I}", "count", (int)w->n, "medianSeconds", (json_int_t)pct(w->v, w->n, 0.5),
			 "p95Seconds", (json_int_t)pct(w->v, w->n, 0.95));
}

/* The series key of a GPR: "<shape>|<cluster>" ("any" for what it left open). */
static void series_key(const struct egs_server *srv, const struct egs_gpr *g, char *out, size_t len)
{
	const char *shape = egs_gpr_shape(srv, g);
	snprintf(out, len, "%s|%s", shape[0] ? shape : "any", g->cluster[0] ? g->cluster : "any");
}

static json_t *series_get(json_t *all, const char *key, size_t nb)
{
	json_t *s = json_object_get(all, key);
	if (s)
		return s;
	const char *bar = strchr(key, '|');
	s = json_pack("{s:s%, s:s, s:i, s:[]}", "gpuShape", key, (size_t)(bar - key), "clusterName", bar + 1,
		      "capacityGpus", 0, "points");
	for (size_t b = 0; b < nb; b++)
		json_array_append_new(json_object_get(s, "points"),
				      json_pack("{s:f, s:f, s:f, s:i}", "demandGpuHours", 0.0, "capacityGpuHours", 0.0,
						"usedGpuHours", 0.0, "requests", 0));
	json_object_set_new(all, key, s);
	return s;
}


/* Adds capacity (today's inventory) to the series of each shape and cluster in scope. */
static void add_capacity(struct egs_req *r, json_t *all, size_t nb, int64_t bucket)
{
	void *v;
	for (size_t i = 0; egs_map_next(&r->srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		const struct egs_cluster *c = egs_state_cluster(&r->srv->st, n->cluster);
		if (!c || !egs_in_project(r, c->project) || r->who.role == EGS_ROLE_AGENT)
			continue;
		if (r->who.role != EGS_ROLE_ADMIN && r->who.workspace[0]) {
			const struct egs_workspace *w = egs_state_workspace(&r->srv->st, r->who.workspace);
			if (!w || !egs_strlist_has(&w->clusters, n->cluster))
				continue;
		}
		char key[2 * EGS_NAME_MAX + 2];
		snprintf(key, sizeof(key), "%s|%s", n->gpu_shape, n->cluster);
		json_t *s = series_get(all, key, nb);
		bump(s, "capacityGpus", n->gpu_count);
		size_t b;
		json_t *p;
		json_array_foreach(json_object_get(s, "points"), b, p)
			bump(p, "capacityGpuHours", n->gpu_count * (double)bucket / 3600.0);
	}
}

struct insight {
	json_t *series, *waits_by_bucket, *shapes, *early;
	struct waits *bucket_waits;
	size_t nb;
	int64_t since, until, bucket, now;
};

static void shape_wait(struct insight *in, const char *shape, int64_t wait, bool waiting)
{
	json_t *s = json_object_get(in->shapes, shape);
	if (!s) {
		s = json_pack("{s:s, s:i, s:i, s:f, s:[]}", "gpuShape", shape, "requests", 0, "queuedNow", 0,
			      "totalWaitHours", 0.0, "_waits");
		json_object_set_new(in->shapes, shape, s);
	}
	bump(s, "requests", 1);
	bump(s, "totalWaitHours", (double)wait / 3600.0);
	if (waiting)
		bump(s, "queuedNow", 1);
	else
		json_array_append_new(json_object_get(s, "_waits"), json_integer(wait));
}

/* Early release per workspace: GPRs started in the period, those released before their exit, and
 * the GPU-hours they handed back. */
static void insight_early(struct insight *in, const struct egs_gpr *g, double gpus)
{
	int64_t from, to;
	if (!g->start_ts || g->start_ts < in->since || g->start_ts >= in->until)
		return;
	json_t *e = json_object_get(in->early, g->workspace);
	if (!e) {
		e = json_pack("{s:s, s:i, s:i, s:f, s:f}", "sliceName", g->workspace, "provisioned", 0, "earlyReleased", 0,
			      "rate", 0.0, "gpuHoursReturned", 0.0);
		json_object_set_new(in->early, g->workspace, e);
	}
	bump(e, "provisioned", 1);
	if ((g->flags & EGS_GPRF_EARLY_RELEASE) && egs_gpr_held(g, in->now, &from, &to) && g->exit_at > to &&
	    g->state != EGS_GPR_PROVISIONED) {
		bump(e, "earlyReleased", 1);
		bump(e, "gpuHoursReturned", gpus * (double)(g->exit_at - to) / 3600.0);
	}
}

static void insight_gpr(struct egs_server *srv, struct insight *in, const struct egs_gpr *g)
{
	char key[2 * EGS_NAME_MAX + 2];
	series_key(srv, g, key, sizeof(key));
	json_t *pts = json_object_get(series_get(in->series, key, in->nb), "points");
	double gpus = egs_gpr_gpus(g);
	if (g->created_at >= in->since && g->created_at < in->until) {
		json_t *p = json_array_get(pts, (size_t)((g->created_at - in->since) / in->bucket));
		bump(p, "demandGpuHours", gpus * (double)g->exit_duration_s / 3600.0);
		bump(p, "requests", 1);
	}
	int64_t from, to;
	if (egs_gpr_held(g, in->now, &from, &to)) {
		for (size_t b = 0; b < in->nb; b++) {
			int64_t lo = in->since + (int64_t)b * in->bucket, hi = lo + in->bucket;
			lo = lo > from ? lo : from;
			hi = hi < to ? hi : to;
			if (hi > lo)
				bump(json_array_get(pts, b), "usedGpuHours", gpus * (double)(hi - lo) / 3600.0);
		}
	}
	const char *shape = egs_gpr_shape(srv, g);
	shape = shape[0] ? shape : "any";
	bool waiting = g->state == EGS_GPR_QUEUED || g->state == EGS_GPR_PENDING;
	if (g->start_ts && g->start_ts >= in->since && g->start_ts < in->until) {
		int64_t w = g->start_ts - g->created_at;
		waits_add(&in->bucket_waits[(g->start_ts - in->since) / in->bucket], w);
		shape_wait(in, shape, w, false);
	} else if (waiting && g->created_at < in->until) {
		shape_wait(in, shape, in->now - g->created_at, true);
	}
	insight_early(in, g, gpus);
}

static int most_waited(const void *a, const void *b)
{
	double x = json_real_value(json_object_get(*(json_t *const *)a, "totalWaitHours"));
	double y = json_real_value(json_object_get(*(json_t *const *)b, "totalWaitHours"));
	return x > y ? -1 : x < y;
}

/* Turns the accumulators into the answer's lists. */
static json_t *insight_answer(struct insight *in)
{
	json_t *series = json_array(), *waits = json_array(), *shapes = json_array(), *early = json_array(), *s;
	const char *k;
	json_object_foreach(in->series, k, s) {
		size_t b;
		json_t *p;
		json_array_foreach(json_object_get(s, "points"), b, p)
			json_object_set_new(p, "t", time_json(in->since + (int64_t)b * in->bucket));
		json_array_append(series, s);
	}
	for (size_t b = 0; b < in->nb; b++) {
		json_t *w = waits_json(&in->bucket_waits[b]);
		json_object_set_new(w, "t", time_json(in->since + (int64_t)b * in->bucket));
		json_array_append_new(waits, w);
		free(in->bucket_waits[b].v);
	}
	json_t **tmp = egs_malloc((json_object_size(in->shapes) + 1) * sizeof(*tmp));
	size_t n = 0;
	json_object_foreach(in->shapes, k, s) {
		struct waits w = { 0 };
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(s, "_waits"), i, x) waits_add(&w, json_integer_value(x));
		json_t *wj = waits_json(&w);
		free(w.v);
		json_object_update(s, wj);
		json_decref(wj);
		json_object_del(s, "_waits");
		json_object_del(s, "count");
		tmp[n++] = s;
	}
	qsort(tmp, n, sizeof(*tmp), most_waited);
	for (size_t i = 0; i < n; i++)
		json_array_append(shapes, tmp[i]);
	free(tmp);
	json_object_foreach(in->early, k, s) {
		json_int_t p = json_integer_value(json_object_get(s, "provisioned"));
		json_object_set_new(s, "rate", json_real(p ? (double)json_integer_value(json_object_get(s, "earlyReleased")) / (double)p : 0));
		json_array_append(early, s);
	}
	char b[48];
	egs_duration_format(in->bucket, b, sizeof(b));
	return json_pack("{s:o, s:o, s:s, s:o, s:o, s:o, s:o}", "since", time_json(in->since), "until",
			 time_json(in->until), "bucket", b, "series", series, "waitTimes", waits, "mostWaitedShapes", shapes,
			 "earlyRelease", early);
}

struct insight_walk {
	struct egs_req *r;
	struct insight *in;
	const char *ws;
};

/* A finished GPR that left memory by age, ended in the period (server/aged.h). */
static bool insight_aged(void *ctx, const struct egs_gpr *g)
{
	struct insight_walk *w = ctx;
	if (!gpr_visible(w->r, g, w->ws))
		return false;
	insight_gpr(w->r->srv, w->in, g);
	return true;
}

static void insights_queue(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct insight in = { 0 };
	const char *bs = egs_query(r, "bucket"), *why, *ws = egs_query(r, "sliceName");
	in.now = egs_now(srv);
	in.bucket = 24 * 3600;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) ||
	    !period(r, in.now, 7 * 24 * 3600, &in.since, &in.until))
		return;
	if (bs && (!egs_duration_parse(bs, &in.bucket, &why) || in.bucket < 60)) {
		egs_reply_invalid(r, "bucket", "bucket must be a duration of at least 1m, such as 1h or 1d");
		return;
	}
	if ((in.until - in.since + in.bucket - 1) / in.bucket > MAX_BUCKETS) {
		egs_reply_invalid(r, "bucket", "at most %d buckets: widen the bucket or shorten the period", MAX_BUCKETS);
		return;
	}
	if (ws && !egs_obs_ws_visible(r, ws)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found");
		return;
	}
	in.nb = (size_t)((in.until - in.since + in.bucket - 1) / in.bucket);
	in.series = json_object();
	in.shapes = json_object();
	in.early = json_object();
	in.bucket_waits = egs_calloc(in.nb, sizeof(*in.bucket_waits));
	add_capacity(r, in.series, in.nb, in.bucket);
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.gprs, &i, NULL, &v);)
		if (gpr_visible(r, v, ws))
			insight_gpr(srv, &in, v);
	struct insight_walk iw = { r, &in, ws };
	egs_aged_each(srv, &(struct egs_gpr_find){ .workspace = ws, .ended_since = in.since }, 0, insight_aged, &iw, NULL);
	json_t *ans = insight_answer(&in);
	json_decref(in.series);
	json_decref(in.shapes);
	json_decref(in.early);
	free(in.bucket_waits);
	egs_reply_ok(r, ans);
}

const struct egs_route egs_routes_usage[] = {
	{ EVHTTP_REQ_GET, "/api/v1/prices", prices_get, false },
	{ EVHTTP_REQ_PUT, "/api/v1/prices", prices_put, false },
	{ EVHTTP_REQ_GET, "/api/v1/usage", usage_report, false },
	{ EVHTTP_REQ_GET, "/api/v1/insights/queue", insights_queue, false },
	{ 0, NULL, NULL, false },
};
