/*
 * metrics.c: GET /metrics in the Prometheus text format (version 0.0.4).
 *
 * GPU series carry the DCGM exporter's metric names and labels (gpu, UUID, device, modelName,
 * Hostname, and namespace/pod when a workload uses the GPU) plus cluster, workspace and gpr, so
 * dashboards built for dcgm-exporter work unchanged and can also group by workspace or GPR.
 * `modelName` and `UUID` are the exporter's spelling; promtool's lint calls modelName camelCase,
 * which we keep on purpose for compatibility (docs/observability.md).  A GPU is exported while its
 * samples are fresh (within three heartbeat time-outs).
 *
 * Control-plane series: queue length and oldest wait per GPU shape, GPRs by state, nodes and GPUs,
 * alerts, events, webhooks, event streams, the start-estimate error histogram and per-route API
 * latency histograms.  Admins see every series of their projects; other callers only the GPU
 * series of the workspaces in their scope.
 */
#include "server/observe.h"

#include "core/gpr.h"
#include "core/util.h"
#include "server/conn.h"
#include "server/notify.h"

#include <event2/buffer.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double lat_le[EGS_LAT_BUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
						0.05,   0.1,   0.25,   0.5,   1,    2.5 };
static const double est_le[EGS_EST_BUCKETS] = { -3600, -600, -60, 0, 60, 600, 3600, 21600, 86400 };

/* ---- request latency ---- */


const char *egs_metrics_route(const char *path)
{
	const char *pattern = egs_route_pattern(path);
	return pattern ? pattern : "other"; /* unknown paths share one series: no cardinality blow-up */
}

void egs_obs_request(struct egs_server *srv, const char *method, const char *path, int status, int64_t t0_us)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	const char *route = egs_metrics_route(path);
	struct egs_route_stats *rs = NULL;
	for (size_t i = 0; i < ob->n_routes && !rs; i++)
		if (ob->routes[i].route == route && !strcmp(ob->routes[i].method, method))
			rs = &ob->routes[i];
	if (!rs) {
		ob->routes = egs_realloc(ob->routes, (ob->n_routes + 1) * sizeof(*ob->routes));
		rs = &ob->routes[ob->n_routes++];
		memset(rs, 0, sizeof(*rs));
		egs_strlcpy(rs->method, method, sizeof(rs->method));
		rs->route = route;
	}
	double s = (double)(egs_mono_us() - t0_us) / 1e6;
	size_t b = 0;
	while (b < EGS_LAT_BUCKETS && s > lat_le[b])
		b++;
	rs->buckets[b]++;
	rs->sum_s += s;
	rs->count++;
	if (status >= 100 && status < 600)
		rs->codes[status / 100]++;
}

/* ---- exposition ---- */

/*
 * The exposition is written straight into the reply's buffer, in spans of OUT_SPAN bytes reserved
 * at a time (evbuffer_reserve_space) and filled with memcpy and hand-written numbers: at 10,000
 * nodes the per-node series are 20,000 lines, and a formatted write per fragment (and one per
 * character of every escaped label) made a scrape tens of milliseconds of the loop.
 */
#define OUT_SPAN 65536

struct out {
	struct evbuffer *b;
	struct evbuffer_iovec v; /* the span reserved, v.iov_base NULL when none */
	size_t used;             /* bytes of it written */
};

/* Commits what was written of the span reserved (before anything else touches o->b). */
static void out_flush(struct out *o)
{
	if (!o->v.iov_base)
		return;
	o->v.iov_len = o->used;
	EGS_ASSERT(evbuffer_commit_space(o->b, &o->v, 1) == 0);
	o->v.iov_base = NULL;
	o->used = 0;
}

/* Room for n more bytes at the end of the span (a new span when it lacks them). */
static char *out_room(struct out *o, size_t n)
{
	if (!o->v.iov_base || o->v.iov_len - o->used < n) {
		out_flush(o);
		EGS_ASSERT(evbuffer_reserve_space(o->b, (ev_ssize_t)(n > OUT_SPAN ? n : OUT_SPAN), &o->v, 1) == 1);
	}
	return (char *)o->v.iov_base + o->used;
}

static void out_mem(struct out *o, const char *s, size_t n)
{
	memcpy(out_room(o, n), s, n);
	o->used += n;
}

static void out_str(struct out *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static void out_uint(struct out *o, unsigned long long v)
{
	char tmp[24], *e = tmp + sizeof(tmp), *d = egs_u64_digits(e, v);
	out_mem(o, d, (size_t)(e - d));
}

static void out_int(struct out *o, long long v)
{
	char *p = out_room(o, 21);
	o->used += (size_t)(egs_i64_digits(p, v) - p);
}

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *d = out_room(o, 512);
	int n = vsnprintf(d, 512, fmt, ap);
	va_end(ap);
	EGS_ASSERT(n >= 0);
	if (n >= 512) { /* longer than a span's usual line: again, with room for it */
		va_start(ap, fmt);
		d = out_room(o, (size_t)n + 1);
		vsnprintf(d, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	o->used += (size_t)n;
}

/* Writes a label value with the format's escapes (backslash, quote, newline). */
static void esc(struct out *o, const char *s)
{
	size_t n = strlen(s);
	char *d = out_room(o, 2 * n), *d0 = d;
	for (; *s; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			*d++ = '\\';
			*d++ = *s == '\n' ? 'n' : *s;
		} else {
			*d++ = *s;
		}
	}
	o->used += (size_t)(d - d0);
}

static void head(struct out *b, const char *name, const char *type, const char *help)
{
	out_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

struct gpu_metric {
	const char *name, *help;
};

static const struct gpu_metric dcgm[] = {
	{ "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)." },
	{ "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)." },
	{ "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)." },
	{ "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)." },
	{ "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)." },
};

/* The first workload on GPU uuid of node n: its namespace and name (borrowed) or NULL. */
static json_t *workload_on(struct egs_server *srv, const struct egs_node *n, const char *uuid)
{
	struct egs_node_workloads *w = egs_map_get(&srv->obs->workloads, n->key);
	size_t i, j;
	json_t *wl, *g;
	if (!w)
		return NULL;
	json_array_foreach(w->items, i, wl) {
		json_array_foreach(json_object_get(wl, "gpus"), j, g) {
			if (!strcmp(json_string_value(g), uuid))
				return wl;
		}
	}
	return NULL;
}

/* A node with fresh GPU samples, with what its series' labels need. */
struct gpu_node {
	const struct egs_node *n;
	const struct egs_gpr *g;
};

/* The DCGM series of the GPUs sampled within three heartbeat time-outs: the nodes with such GPUs
 * are found once (a lookup of each node's GPR for each of five metrics was most of a scrape with
 * no samples at all), then each metric is written over them. */
static void gpu_series(struct egs_req *r, struct out *b, int64_t now)
{
	struct egs_server *srv = r->srv;
	int64_t fresh = 3 * srv->st.cfg.heartbeat_timeout_s;
	struct gpu_node *nodes = NULL;
	size_t nn = 0, cap = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		bool any = false;
		for (int k = 0; k < n->n_gpus && !any; k++)
			any = n->gpus[k].sampled_at && now - n->gpus[k].sampled_at <= fresh;
		if (!any || !egs_obs_node_visible(r, n))
			continue;
		if (nn == cap) {
			cap = cap ? 2 * cap : 64;
			nodes = egs_realloc(nodes, cap * sizeof(*nodes));
		}
		nodes[nn++] = (struct gpu_node){ n, egs_obs_node_gpr(srv, n) };
	}
	for (size_t m = 0; m < EGS_ARRAY_LEN(dcgm); m++) {
		head(b, dcgm[m].name, "gauge", dcgm[m].help);
		for (size_t i = 0; i < nn; i++) {
			const struct egs_node *n = nodes[i].n;
			const struct egs_gpr *g = nodes[i].g;
			for (int k = 0; k < n->n_gpus; k++) {
				const struct egs_gpu *u = &n->gpus[k];
				if (!u->sampled_at || now - u->sampled_at > fresh)
					continue;
				double val[] = { u->temp_c, u->power_w, u->util_pct, (double)u->mem_used_mib,
						 (double)(n->memory_mib > u->mem_used_mib ? n->memory_mib - u->mem_used_mib : 0) };
				json_t *wl = workload_on(srv, n, u->uuid);
				out_str(b, dcgm[m].name);
				out_str(b, "{gpu=\"");
				out_int(b, u->index);
				out_str(b, "\",UUID=\"");
				esc(b, u->uuid);
				out_str(b, "\",device=\"nvidia");
				out_int(b, u->index);
				out_str(b, "\",modelName=\"");
				esc(b, n->gpu_shape);
				out_str(b, "\",Hostname=\"");
				esc(b, n->name);
				out_str(b, "\",cluster=\"");
				esc(b, n->cluster);
				out_str(b, "\",workspace=\"");
				esc(b, g ? g->workspace : "");
				out_str(b, "\",gpr=\"");
				esc(b, g ? g->id : "");
				out_str(b, "\",namespace=\"");
				esc(b, wl ? json_string_value(json_object_get(wl, "namespace")) : "");
				out_str(b, "\",pod=\"");
				esc(b, wl ? json_string_value(json_object_get(wl, "name")) : "");
				out_printf(b, "\"} %.17g\n", val[m]);
			}
		}
	}
	free(nodes);
}

static const char *shape_or_any(const char *s)
{
	return s[0] ? s : "any";
}

/* Waiting GPRs of one requested GPU shape. */
struct shape_wait {
	char shape[EGS_NAME_MAX];
	size_t n;
	int64_t oldest;
};

static int cmp_shape_wait(const void *a, const void *b)
{
	return strcmp(((const struct shape_wait *)a)->shape, ((const struct shape_wait *)b)->shape);
}

/*
 * A scrape by an admin reads every GPR (queue length and oldest wait per shape, GPRs by state) and
 * every node (their series): at 100,000 GPRs and 10,000 nodes that was 60-90 ms of the loop, most
 * of it two cache misses a GPR.  So it goes in pieces of SCRAPE_PIECE GPRs or nodes, one a loop
 * turn (a zero timer: requests are served in between), and is answered when the last is done.  A
 * pass whose map was rehashed between pieces (it grew) starts again; entries deleted meanwhile
 * leave tombstones and keep the places.  The counts are those of the pass (a GPR created or
 * changed during it may count in either state), as any scrape sees a moment of a moving system.
 */
#define SCRAPE_PIECE 2048

struct scrape {
	struct egs_server *srv;
	struct egs_hreq *hq;
	int64_t t0_us, now;
	struct out o;       /* the reply: the GPU series, then the rest when the passes end */
	struct out node[2]; /* the nodes' egs_node_healthy and egs_node_gpus lines so far */
	struct event *ev;   /* the next piece */
	const void *gtab, *ntab; /* the maps' tables when their passes began */
	size_t gmoved, nmoved;   /* and how far a growth of each had moved (map.h) */
	size_t git, nit;
	bool gdone, ndone;
	struct shape_wait *w;
	size_t nw, wcap;
	uint32_t *idx; /* shape_index's table */
	size_t idxcap;
	size_t by_state[EGS_GPR_NSTATES];
};

/* (Re)makes sc's index of its shapes: an open-addressing table of w's places + 1, half empty. */
static void shape_reindex(struct scrape *sc)
{
	sc->idxcap = sc->idxcap ? 2 * sc->idxcap : 64;
	free(sc->idx);
	sc->idx = egs_calloc(sc->idxcap, sizeof(*sc->idx));
	for (size_t i = 0; i < sc->nw; i++) {
		size_t h = (size_t)egs_fnv1a_str(EGS_FNV_OFFSET, sc->w[i].shape) & (sc->idxcap - 1);
		while (sc->idx[h])
			h = (h + 1) & (sc->idxcap - 1);
		sc->idx[h] = (uint32_t)i + 1;
	}
}

/* The place in sc->w of shape s, added when new (a search of every shape with strcmp, for each
 * GPR, was 44% of a scrape's instructions at 20 shapes). */
static size_t shape_index(struct scrape *sc, const char *s)
{
	if (2 * (sc->nw + 1) > sc->idxcap)
		shape_reindex(sc);
	size_t h = (size_t)egs_fnv1a_str(EGS_FNV_OFFSET, s) & (sc->idxcap - 1);
	for (; sc->idx[h]; h = (h + 1) & (sc->idxcap - 1))
		if (!strcmp(sc->w[sc->idx[h] - 1].shape, s))
			return sc->idx[h] - 1;
	if (sc->nw == sc->wcap) {
		sc->wcap = sc->wcap ? 2 * sc->wcap : 16;
		sc->w = egs_realloc(sc->w, sc->wcap * sizeof(*sc->w));
	}
	/* the shape is copied: the GPR may be freed before the pass ends */
	sc->w[sc->nw] = (struct shape_wait){ { 0 }, 0, 0 };
	egs_strlcpy(sc->w[sc->nw].shape, s, sizeof(sc->w->shape));
	sc->idx[h] = (uint32_t)++sc->nw;
	return sc->nw - 1;
}

/* At most *budget GPRs more of sc's pass (taken off it); true when it has seen every GPR. */
static bool gprs_piece(struct scrape *sc, size_t *budget)
{
	struct egs_map *m = &sc->srv->st.gprs;
	if (sc->gtab != m->slots || sc->gmoved != m->moved) { /* rehashed, or moving (map.h), or the first piece: from the start */
		sc->gtab = m->slots;
		sc->gmoved = m->moved;
		sc->git = sc->nw = 0;
		memset(sc->idx, 0, sc->idxcap * sizeof(*sc->idx));
		memset(sc->by_state, 0, sizeof(sc->by_state));
	}
	void *x;
	for (; *budget && egs_map_next(m, &sc->git, NULL, &x); --*budget) {
		const struct egs_gpr *g = x;
		sc->by_state[g->state]++;
		if (g->state != EGS_GPR_QUEUED && g->state != EGS_GPR_PENDING)
			continue;
		size_t at = shape_index(sc, shape_or_any(g->gpu_shape)); /* may move sc->w */
		struct shape_wait *w = &sc->w[at];
		w->n++;
		if (sc->now - g->created_at > w->oldest)
			w->oldest = sc->now - g->created_at;
	}
	return sc->git >= egs_map_span(m);
}

/* Queue length and oldest wait per shape, and GPRs by state, from sc's pass. */
static void queue_series(struct scrape *sc, struct out *b)
{
	struct egs_server *srv = sc->srv;
	struct shape_wait *w = sc->w;
	size_t nw = sc->nw;
	if (nw)
		qsort(w, nw, sizeof(*w), cmp_shape_wait);
	head(b, "egs_gpr_queue_length", "gauge", "GPRs waiting (Queued or Pending) per requested GPU shape.");
	for (size_t i = 0; i < nw; i++) {
		out_str(b, "egs_gpr_queue_length{gpu_shape=\"");
		esc(b, w[i].shape);
		out_str(b, "\"} ");
		out_uint(b, w[i].n);
		out_mem(b, "\n", 1);
	}
	head(b, "egs_gpr_queue_oldest_wait_seconds", "gauge", "How long the oldest waiting GPR of each GPU shape has waited.");
	for (size_t i = 0; i < nw; i++) {
		out_str(b, "egs_gpr_queue_oldest_wait_seconds{gpu_shape=\"");
		esc(b, w[i].shape);
		out_str(b, "\"} ");
		out_int(b, w[i].oldest);
		out_mem(b, "\n", 1);
	}
	size_t by_state[EGS_GPR_NSTATES];
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		by_state[s] = sc->by_state[s] + srv->st.aged[s]; /* and those that left memory by age (core/aging.h) */
	head(b, "egs_gprs_in_memory", "gauge", "GPRs egsd holds in memory (finished ones leave by age: --finished-retention).");
	out_printf(b, "egs_gprs_in_memory %zu\n", srv->st.gprs.len);
	head(b, "egs_gprs", "gauge", "GPRs by provisioning status, in memory or not.");
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		out_printf(b, "egs_gprs{state=\"%s\"} %zu\n", egs_gpr_state_name((enum egs_gpr_state)s), by_state[s]);
}

/* One node's series line up to its last label's value: NAME{cluster="..",Hostname="..",gpu_shape="..  */
static void node_labels(struct out *b, const char *name, const struct egs_node *n)
{
	out_str(b, name);
	out_str(b, "{cluster=\"");
	esc(b, n->cluster);
	out_str(b, "\",Hostname=\"");
	esc(b, n->name);
	out_str(b, "\",gpu_shape=\"");
	esc(b, n->gpu_shape);
}

/* At most *budget nodes more of sc's pass (taken off it), each written to both node series; true
 * when it has seen every node. */
static bool nodes_piece(struct scrape *sc, size_t *budget)
{
	struct egs_server *srv = sc->srv;
	struct egs_map *m = &srv->st.nodes;
	if (sc->ntab != m->slots || sc->nmoved != m->moved) { /* rehashed, or moving (map.h), or the first piece: from the start */
		sc->ntab = m->slots;
		sc->nmoved = m->moved;
		sc->nit = 0;
		for (int k = 0; k < 2; k++) {
			out_flush(&sc->node[k]);
			evbuffer_drain(sc->node[k].b, evbuffer_get_length(sc->node[k].b));
		}
	}
	void *x;
	for (; *budget && egs_map_next(m, &sc->nit, NULL, &x); --*budget) {
		const struct egs_node *n = x;
		bool ok = n->health == EGS_HEALTH_HEALTHY && n->last_heartbeat &&
			  sc->now - n->last_heartbeat <= srv->st.cfg.heartbeat_timeout_s;
		node_labels(&sc->node[0], "egs_node_healthy", n);
		out_str(&sc->node[0], ok ? "\"} 1\n" : "\"} 0\n");
		node_labels(&sc->node[1], "egs_node_gpus", n);
		out_str(&sc->node[1], n->gpr_id[0] ? "\",allocated=\"true\"} " : "\",allocated=\"false\"} ");
		out_int(&sc->node[1], n->gpu_count);
		out_mem(&sc->node[1], "\n", 1);
	}
	return sc->nit >= egs_map_span(m);
}

/* The nodes' series from sc's pass. */
static void inventory_series(struct scrape *sc, struct out *b)
{
	head(b, "egs_node_healthy", "gauge", "1 when the node is Healthy and reporting, else 0.");
	out_flush(b);
	out_flush(&sc->node[0]);
	evbuffer_add_buffer(b->b, sc->node[0].b);
	head(b, "egs_node_gpus", "gauge", "GPUs of each node, and whether a GPR holds it (allocated=\"true\").");
	out_flush(b);
	out_flush(&sc->node[1]);
	evbuffer_add_buffer(b->b, sc->node[1].b);
}

static void histogram(struct out *b, const char *name, const char *labels, const double *le, size_t nle,
		      const uint64_t *buckets, double sum, uint64_t count)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= nle; i++) {
		cum += buckets[i];
		if (i < nle)
			out_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "", le[i],
					    (unsigned long long)cum);
		else
			out_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
					    (unsigned long long)cum);
	}
	out_printf(b, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
			    *labels ? "}" : "", sum, name, *labels ? "{" : "", labels, *labels ? "}" : "",
			    (unsigned long long)count);
}

/* One of the store's timings: a histogram in seconds and its maximum since egsd started. */
static void store_timing(struct out *b, const char *name, const char *max_name, const char *help,
			 const struct egs_store_timing *t)
{
	double le[EGS_STORE_TIME_BUCKETS];
	for (size_t i = 0; i < EGS_STORE_TIME_BUCKETS; i++)
		le[i] = (double)egs_store_time_le_us[i] / 1e6;
	head(b, name, "histogram", help);
	histogram(b, name, "", le, EGS_STORE_TIME_BUCKETS, t->buckets, (double)t->sum_us / 1e6, t->count);
	head(b, max_name, "gauge", "The longest of them since egsd started.");
	out_printf(b, "%s %.6f\n", max_name, (double)t->max_us / 1e6);
}

/* The store's own timings (SQLite's durability and checkpoint threads; none for PostgreSQL). */
static void store_series(struct egs_server *srv, struct out *b)
{
	struct egs_store_stats st;
	if (!egs_store_stats(srv->store, &st))
		return;
	store_timing(b, "egs_store_fsync_seconds", "egs_store_fsync_max_seconds",
		     "fdatasyncs of the store's WAL (its durability thread): an acknowledged write waits for one.",
		     &st.fsync);
	store_timing(b, "egs_store_checkpoint_seconds", "egs_store_checkpoint_max_seconds",
		     "Checkpoints copying the WAL into the database file (the store's checkpoint thread).", &st.checkpoint);
	store_timing(b, "egs_store_catch_up_seconds", "egs_store_catch_up_max_seconds",
		     "Catch-ups of a long WAL: each held the next commit for that long.", &st.catch_up);
	head(b, "egs_store_wal_restarts_total", "counter",
	     "Commits that wrote the WAL again from its start (each fsyncs the WAL's header on the loop).");
	out_printf(b, "egs_store_wal_restarts_total %llu\n", (unsigned long long)st.wal_restarts);
}

static void control_series(struct egs_server *srv, struct out *b)
{
	struct egs_obs *ob = srv->obs;
	head(b, "egs_gpr_start_estimate_error_seconds", "histogram",
	     "Actual start minus the first estimated start of GPRs that waited (negative: earlier than estimated).");
	histogram(b, "egs_gpr_start_estimate_error_seconds", "", est_le, EGS_EST_BUCKETS, ob->est.buckets, ob->est.sum_s,
		  ob->est.count);
	head(b, "egs_api_request_duration_seconds", "histogram", "API request latency by route and method.");
	for (size_t i = 0; i < ob->n_routes; i++) {
		const struct egs_route_stats *rs = &ob->routes[i];
		char labels[400];
		snprintf(labels, sizeof(labels), "method=\"%s\",route=\"%s\"", rs->method, rs->route);
		histogram(b, "egs_api_request_duration_seconds", labels, lat_le, EGS_LAT_BUCKETS, rs->buckets, rs->sum_s,
			  rs->count);
	}
	head(b, "egs_api_requests_total", "counter", "API requests answered, by route, method and status class.");
	for (size_t i = 0; i < ob->n_routes; i++)
		for (int c = 1; c < 6; c++)
			if (ob->routes[i].codes[c])
				out_printf(b, "egs_api_requests_total{method=\"%s\",route=\"%s\",code=\"%dxx\"} %llu\n",
						    ob->routes[i].method, ob->routes[i].route, c,
						    (unsigned long long)ob->routes[i].codes[c]);
	head(b, "egs_alerts_active", "gauge", "Active alerts by reason.");
	for (int k = 0; k < EGS_ALERT_NKINDS; k++)
		out_printf(b, "egs_alerts_active{reason=\"%s\"} %zu\n", egs_alert_reason((enum egs_alert_kind)k),
				    egs_alerts_count(&ob->alerts, (enum egs_alert_kind)k));
	head(b, "egs_alerts_raised_total", "counter", "Alerts raised since egsd started, by reason.");
	for (int k = 0; k < EGS_ALERT_NKINDS; k++)
		out_printf(b, "egs_alerts_raised_total{reason=\"%s\"} %llu\n",
				    egs_alert_reason((enum egs_alert_kind)k), (unsigned long long)ob->alerts.raised[k]);
	head(b, "egs_events_total", "counter", "Events committed since egsd started, by type.");
	out_printf(b, "egs_events_total{type=\"Normal\"} %llu\negs_events_total{type=\"Warning\"} %llu\n",
			    (unsigned long long)ob->events_total[0], (unsigned long long)ob->events_total[1]);
	head(b, "egs_webhook_deliveries_total", "counter", "Webhook notifications by final outcome.");
	static const char *const outcome[] = { "delivered", "failed", "dropped" };
	for (int i = 0; i < 3; i++)
		out_printf(b, "egs_webhook_deliveries_total{outcome=\"%s\"} %llu\n", outcome[i],
				    (unsigned long long)ob->webhooks[i]);
	head(b, "egs_webhook_retries_total", "counter", "Webhook delivery attempts that were retries.");
	out_printf(b, "egs_webhook_retries_total %llu\n", (unsigned long long)ob->webhooks[3]);
	head(b, "egs_webhook_queue_length", "gauge", "Webhook notifications waiting or in flight.");
	out_printf(b, "egs_webhook_queue_length %zu\n", ob->notify ? egs_notify_pending(ob->notify) : 0);
	head(b, "egs_scheduler_slice_max_seconds", "gauge",
	     "The longest the scheduler held the loop in one go (a slice of a run, or its set-up) since egsd started.");
	out_printf(b, "egs_scheduler_slice_max_seconds %.6f\n", (double)srv->slice_max_us / 1e6);
	head(b, "egs_scheduler_slice_max_cpu_seconds", "gauge",
	     "The most CPU time one such slice took (on a loaded machine its wall time also counts others' time).");
	out_printf(b, "egs_scheduler_slice_max_cpu_seconds %.6f\n", (double)srv->slice_max_cpu_us / 1e6);
	static const double slice_le[EGS_SLICE_BUCKETS] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05 };
	static const char *const slice_name[2] = { "egs_scheduler_slice_seconds", "egs_scheduler_slice_cpu_seconds" };
	static const char *const slice_help[2] = {
		"How long the scheduler held the loop in one go (a slice, or a run's set-up and first slice), wall time.",
		"The CPU time of those slices.",
	};
	for (int k = 0; k < 2; k++) {
		head(b, slice_name[k], "histogram", slice_help[k]);
		uint64_t n = 0;
		for (size_t i = 0; i <= EGS_SLICE_BUCKETS; i++)
			n += srv->slice_hist[k][i];
		histogram(b, slice_name[k], "", slice_le, EGS_SLICE_BUCKETS, srv->slice_hist[k],
			  (double)srv->slice_sum_us[k] / 1e6, n);
	}
	head(b, "egs_scheduler_step_max_cpu_seconds", "gauge",
	     "The most CPU time one step of a scheduler run took (a slice takes several), and what it did.");
	out_printf(b, "egs_scheduler_step_max_cpu_seconds{piece=\"%s\"} %.6f\n",
			    srv->step_max_what ? srv->step_max_what : "none", (double)srv->step_max_cpu_us / 1e6);
	head(b, "egs_scheduler_slow_steps_total", "counter",
	     "Steps of scheduler runs that took over 5 ms of CPU, by what they did.");
	for (size_t k = 0; k < EGS_SLOW_KINDS && srv->slow_steps[k].what; k++) {
		out_str(b, "egs_scheduler_slow_steps_total{piece=\"");
		esc(b, srv->slow_steps[k].what);
		out_str(b, "\"} ");
		out_uint(b, srv->slow_steps[k].n);
		out_mem(b, "\n", 1);
	}
	head(b, "egs_scheduler_cpu_seconds_total", "counter",
	     "CPU time of the loop thread spent in scheduler runs (set-up, slices, end).");
	out_printf(b, "egs_scheduler_cpu_seconds_total %.6f\n", (double)srv->plan_cpu_us / 1e6);
	head(b, "egs_store_commit_cpu_seconds_total", "counter",
	     "CPU time of the loop thread spent committing the turns' changes to the store (not the fsyncs).");
	out_printf(b, "egs_store_commit_cpu_seconds_total %.6f\n", (double)srv->commit_cpu_us / 1e6);
	store_series(srv, b);
	head(b, "egs_scheduler_runs_total", "counter",
	     "Scheduler runs ended, by walk: resumed from the kept plan's snapshot, or full.");
	out_printf(b, "egs_scheduler_runs_total{walk=\"full\"} %llu\n",
			    (unsigned long long)(srv->runs - srv->runs_resumed));
	out_printf(b, "egs_scheduler_runs_total{walk=\"resumed\"} %llu\n", (unsigned long long)srv->runs_resumed);
	head(b, "egs_scheduler_runs_stale_total", "counter",
	     "Runs that requests made stale on the way (the plan was due again at their end).");
	out_printf(b, "egs_scheduler_runs_stale_total %llu\n", (unsigned long long)srv->runs_stale);
	head(b, "egs_scheduler_run_seconds_total", "counter",
	     "Wall time of the runs from begin to end (slices and the requests served between them).");
	out_printf(b, "egs_scheduler_run_seconds_total %.6f\n", (double)srv->run_wall_us / 1e6);
	head(b, "egs_scheduler_run_max_seconds", "gauge", "The longest wall time of one run from begin to end.");
	out_printf(b, "egs_scheduler_run_max_seconds %.6f\n", (double)srv->run_wall_max_us / 1e6);
	uint64_t kept, built;
	egs_views_counts(srv->views, &kept, &built);
	head(b, "egs_gpr_views_total", "counter",
	     "GPR status reads answered from a kept view, and views built (gpr_view.c), since egsd started.");
	out_printf(b, "egs_gpr_views_total{result=\"kept\"} %llu\negs_gpr_views_total{result=\"built\"} %llu\n",
			    (unsigned long long)kept, (unsigned long long)built);
	uint64_t hits, misses;
	egs_auth_cache_counts(&hits, &misses);
	head(b, "egs_auth_cache_total", "counter",
	     "Authenticated requests whose credential was found in the credential cache (hit) or checked (miss).");
	out_printf(b, "egs_auth_cache_total{result=\"hit\"} %llu\negs_auth_cache_total{result=\"miss\"} %llu\n",
			    (unsigned long long)hits, (unsigned long long)misses);
	head(b, "egs_event_streams", "gauge", "Open server-sent event streams.");
	out_printf(b, "egs_event_streams %zu\n", ob->watchers.len);
	head(b, "egs_gpu_series_bytes", "gauge", "Memory held by the per-GPU time series.");
	out_printf(b, "egs_gpu_series_bytes %zu\n", egs_series_set_bytes(&ob->series));
}

static void scrape_free(struct scrape *sc)
{
	if (sc->ev)
		event_free(sc->ev);
	for (int k = 0; k < 2; k++) {
		out_flush(&sc->node[k]);
		evbuffer_free(sc->node[k].b);
	}
	out_flush(&sc->o);
	evbuffer_free(sc->o.b);
	free(sc->w);
	free(sc->idx);
	free(sc);
}

/* The passes are done: the rest of the exposition, and the answer. */
static void scrape_answer(struct scrape *sc)
{
	struct egs_server *srv = sc->srv;
	queue_series(sc, &sc->o);
	inventory_series(sc, &sc->o);
	control_series(srv, &sc->o);
	out_flush(&sc->o);
	egs_hreq_content_type(sc->hq, "text/plain; version=0.0.4; charset=utf-8");
	egs_hreq_reply(sc->hq, 200, sc->o.b);
	egs_obs_request(srv, "GET", "/metrics", 200, sc->t0_us);
	if (srv->obs)
		egs_vec_remove(&srv->obs->scrapes, sc);
	scrape_free(sc);
}

/* One piece of sc (max GPRs and nodes in all), and its answer after the last; true when answered
 * (sc is freed). */
static bool scrape_piece(struct scrape *sc, size_t max)
{
	size_t budget = max;
	if (!sc->gdone)
		sc->gdone = gprs_piece(sc, &budget);
	if (sc->gdone && !sc->ndone && budget)
		sc->ndone = nodes_piece(sc, &budget);
	if (!sc->gdone || !sc->ndone)
		return false;
	scrape_answer(sc);
	return true;
}

/* GPRs and nodes a piece reads: SCRAPE_PIECE, or fewer where tests ask (EGS_TEST_SCRAPE_PIECE:
 * tests/api/test_metrics.py; nothing else sets it). */
static size_t piece_size(void)
{
	const char *e = getenv("EGS_TEST_SCRAPE_PIECE");
	long v = e ? strtol(e, NULL, 10) : 0;
	return v > 0 && v < SCRAPE_PIECE ? (size_t)v : SCRAPE_PIECE;
}

static void on_scrape(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct scrape *sc = arg;
	if (!scrape_piece(sc, piece_size())) {
		struct timeval tv = { 0, 0 };
		evtimer_add(sc->ev, &tv);
	}
}

void egs_metrics_finish_all(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	while (ob && ob->scrapes.len)
		while (!scrape_piece(ob->scrapes.items[ob->scrapes.len - 1], SIZE_MAX))
			;
	if (ob)
		egs_vec_cleanup(&ob->scrapes);
}

static void metrics(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	struct scrape *sc = egs_calloc(1, sizeof(*sc));
	sc->srv = srv;
	sc->now = now;
	sc->t0_us = r->t0_us;
	sc->o.b = evbuffer_new();
	for (int k = 0; k < 2; k++)
		sc->node[k].b = evbuffer_new();
	EGS_ASSERT(sc->o.b && sc->node[0].b && sc->node[1].b);
	gpu_series(r, &sc->o, now);
	sc->hq = r->hq;
	r->hq = NULL; /* answered by scrape_answer: the Prometheus format is not the JSON envelope */
	if (r->who.role != EGS_ROLE_ADMIN) { /* the GPU series of the caller's workspaces only */
		out_flush(&sc->o);
		egs_hreq_content_type(sc->hq, "text/plain; version=0.0.4; charset=utf-8");
		egs_hreq_reply(sc->hq, 200, sc->o.b);
		egs_obs_request(srv, "GET", r->path, 200, r->t0_us);
		scrape_free(sc);
		return;
	}
	if (scrape_piece(sc, piece_size()))
		return;
	sc->ev = evtimer_new(srv->base, on_scrape, sc);
	EGS_ASSERT(sc->ev);
	struct timeval tv = { 0, 0 };
	evtimer_add(sc->ev, &tv);
	egs_vec_push(&srv->obs->scrapes, sc);
}

const struct egs_route egs_routes_metrics[] = {
	{ EVHTTP_REQ_GET, "/metrics", metrics, false },
	{ 0, NULL, NULL, false },
};
