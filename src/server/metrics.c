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
#include "server/conn.h"
#include "server/notify.h"

#include <event2/buffer.h>
#include <stdio.h>
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

/* Writes a label value with the format's escapes (backslash, quote, newline). */
static void esc(struct evbuffer *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

static void head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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

static void gpu_series(struct egs_req *r, struct evbuffer *b, int64_t now)
{
	struct egs_server *srv = r->srv;
	int64_t fresh = 3 * srv->st.cfg.heartbeat_timeout_s;
	for (size_t m = 0; m < EGS_ARRAY_LEN(dcgm); m++) {
		head(b, dcgm[m].name, "gauge", dcgm[m].help);
		void *v;
		for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
			const struct egs_node *n = v;
			if (!egs_obs_node_visible(r, n))
				continue;
			const struct egs_gpr *g = egs_obs_node_gpr(srv, n);
			for (int k = 0; k < n->n_gpus; k++) {
				const struct egs_gpu *u = &n->gpus[k];
				if (!u->sampled_at || now - u->sampled_at > fresh)
					continue;
				double val[] = { u->temp_c, u->power_w, u->util_pct, (double)u->mem_used_mib,
						 (double)(n->memory_mib > u->mem_used_mib ? n->memory_mib - u->mem_used_mib : 0) };
				json_t *wl = workload_on(srv, n, u->uuid);
				evbuffer_add_printf(b, "%s{gpu=\"%d\",UUID=\"", dcgm[m].name, u->index);
				esc(b, u->uuid);
				evbuffer_add_printf(b, "\",device=\"nvidia%d\",modelName=\"", u->index);
				esc(b, n->gpu_shape);
				evbuffer_add_printf(b, "\",Hostname=\"");
				esc(b, n->name);
				evbuffer_add_printf(b, "\",cluster=\"");
				esc(b, n->cluster);
				evbuffer_add_printf(b, "\",workspace=\"");
				esc(b, g ? g->workspace : "");
				evbuffer_add_printf(b, "\",gpr=\"");
				esc(b, g ? g->id : "");
				evbuffer_add_printf(b, "\",namespace=\"");
				esc(b, wl ? json_string_value(json_object_get(wl, "namespace")) : "");
				evbuffer_add_printf(b, "\",pod=\"");
				esc(b, wl ? json_string_value(json_object_get(wl, "name")) : "");
				evbuffer_add_printf(b, "\"} %.17g\n", val[m]);
			}
		}
	}
}

static const char *shape_or_any(const char *s)
{
	return s[0] ? s : "any";
}

static void queue_series(struct egs_server *srv, struct evbuffer *b, int64_t now)
{
	json_t *len = json_object(), *oldest = json_object(), *v;
	void *x;
	for (size_t i = 0; egs_map_next(&srv->st.gprs, &i, NULL, &x);) {
		const struct egs_gpr *g = x;
		if (g->state != EGS_GPR_QUEUED && g->state != EGS_GPR_PENDING)
			continue;
		const char *s = shape_or_any(g->gpu_shape);
		json_object_set_new(len, s, json_integer(json_integer_value(json_object_get(len, s)) + 1));
		int64_t w = now - g->created_at;
		if (w > json_integer_value(json_object_get(oldest, s)))
			json_object_set_new(oldest, s, json_integer(w));
	}
	const char *k;
	head(b, "egs_gpr_queue_length", "gauge", "GPRs waiting (Queued or Pending) per requested GPU shape.");
	json_object_foreach(len, k, v) {
		evbuffer_add_printf(b, "egs_gpr_queue_length{gpu_shape=\"");
		esc(b, k);
		evbuffer_add_printf(b, "\"} %lld\n", (long long)json_integer_value(v));
	}
	head(b, "egs_gpr_queue_oldest_wait_seconds", "gauge", "How long the oldest waiting GPR of each GPU shape has waited.");
	json_object_foreach(oldest, k, v) {
		evbuffer_add_printf(b, "egs_gpr_queue_oldest_wait_seconds{gpu_shape=\"");
		esc(b, k);
		evbuffer_add_printf(b, "\"} %lld\n", (long long)json_integer_value(v));
	}
	json_decref(len);
	json_decref(oldest);
	size_t by_state[EGS_GPR_NSTATES] = { 0 };
	for (size_t i = 0; egs_map_next(&srv->st.gprs, &i, NULL, &x);)
		by_state[((const struct egs_gpr *)x)->state]++;
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		by_state[s] += srv->st.aged[s]; /* finished ones that left memory by age (core/aging.h) */
	head(b, "egs_gprs_in_memory", "gauge", "GPRs egsd holds in memory (finished ones leave by age: --finished-retention).");
	evbuffer_add_printf(b, "egs_gprs_in_memory %zu\n", srv->st.gprs.len);
	head(b, "egs_gprs", "gauge", "GPRs by provisioning status, in memory or not.");
	for (int s = 0; s < EGS_GPR_NSTATES; s++)
		evbuffer_add_printf(b, "egs_gprs{state=\"%s\"} %zu\n", egs_gpr_state_name((enum egs_gpr_state)s), by_state[s]);
}

static void inventory_series(struct egs_server *srv, struct evbuffer *b, int64_t now)
{
	head(b, "egs_node_healthy", "gauge", "1 when the node is Healthy and reporting, else 0.");
	void *x;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &x);) {
		const struct egs_node *n = x;
		bool ok = n->health == EGS_HEALTH_HEALTHY && n->last_heartbeat &&
			  now - n->last_heartbeat <= srv->st.cfg.heartbeat_timeout_s;
		evbuffer_add_printf(b, "egs_node_healthy{cluster=\"");
		esc(b, n->cluster);
		evbuffer_add_printf(b, "\",Hostname=\"");
		esc(b, n->name);
		evbuffer_add_printf(b, "\",gpu_shape=\"");
		esc(b, n->gpu_shape);
		evbuffer_add_printf(b, "\"} %d\n", ok);
	}
	head(b, "egs_node_gpus", "gauge", "GPUs of each node, and whether a GPR holds it (allocated=\"true\").");
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &x);) {
		const struct egs_node *n = x;
		evbuffer_add_printf(b, "egs_node_gpus{cluster=\"");
		esc(b, n->cluster);
		evbuffer_add_printf(b, "\",Hostname=\"");
		esc(b, n->name);
		evbuffer_add_printf(b, "\",gpu_shape=\"");
		esc(b, n->gpu_shape);
		evbuffer_add_printf(b, "\",allocated=\"%s\"} %d\n", n->gpr_id[0] ? "true" : "false", n->gpu_count);
	}
}

static void histogram(struct evbuffer *b, const char *name, const char *labels, const double *le, size_t nle,
		      const uint64_t *buckets, double sum, uint64_t count)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= nle; i++) {
		cum += buckets[i];
		if (i < nle)
			evbuffer_add_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "", le[i],
					    (unsigned long long)cum);
		else
			evbuffer_add_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "",
					    (unsigned long long)cum);
	}
	evbuffer_add_printf(b, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels,
			    *labels ? "}" : "", sum, name, *labels ? "{" : "", labels, *labels ? "}" : "",
			    (unsigned long long)count);
}

static void control_series(struct egs_server *srv, struct evbuffer *b)
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
				evbuffer_add_printf(b, "egs_api_requests_total{method=\"%s\",route=\"%s\",code=\"%dxx\"} %llu\n",
						    ob->routes[i].method, ob->routes[i].route, c,
						    (unsigned long long)ob->routes[i].codes[c]);
	head(b, "egs_alerts_active", "gauge", "Active alerts by reason.");
	for (int k = 0; k < EGS_ALERT_NKINDS; k++)
		evbuffer_add_printf(b, "egs_alerts_active{reason=\"%s\"} %zu\n", egs_alert_reason((enum egs_alert_kind)k),
				    egs_alerts_count(&ob->alerts, (enum egs_alert_kind)k));
	head(b, "egs_alerts_raised_total", "counter", "Alerts raised since egsd started, by reason.");
	for (int k = 0; k < EGS_ALERT_NKINDS; k++)
		evbuffer_add_printf(b, "egs_alerts_raised_total{reason=\"%s\"} %llu\n",
				    egs_alert_reason((enum egs_alert_kind)k), (unsigned long long)ob->alerts.raised[k]);
	head(b, "egs_events_total", "counter", "Events committed since egsd started, by type.");
	evbuffer_add_printf(b, "egs_events_total{type=\"Normal\"} %llu\negs_events_total{type=\"Warning\"} %llu\n",
			    (unsigned long long)ob->events_total[0], (unsigned long long)ob->events_total[1]);
	head(b, "egs_webhook_deliveries_total", "counter", "Webhook notifications by final outcome.");
	static const char *const outcome[] = { "delivered", "failed", "dropped" };
	for (int i = 0; i < 3; i++)
		evbuffer_add_printf(b, "egs_webhook_deliveries_total{outcome=\"%s\"} %llu\n", outcome[i],
				    (unsigned long long)ob->webhooks[i]);
	head(b, "egs_webhook_retries_total", "counter", "Webhook delivery attempts that were retries.");
	evbuffer_add_printf(b, "egs_webhook_retries_total %llu\n", (unsigned long long)ob->webhooks[3]);
	head(b, "egs_webhook_queue_length", "gauge", "Webhook notifications waiting or in flight.");
	evbuffer_add_printf(b, "egs_webhook_queue_length %zu\n", ob->notify ? egs_notify_pending(ob->notify) : 0);
	head(b, "egs_scheduler_slice_max_seconds", "gauge",
	     "The longest the scheduler held the loop in one go (a slice of a run, or its set-up) since egsd started.");
	evbuffer_add_printf(b, "egs_scheduler_slice_max_seconds %.6f\n", (double)srv->slice_max_us / 1e6);
	head(b, "egs_scheduler_slice_max_cpu_seconds", "gauge",
	     "The most CPU time one such slice took (on a loaded machine its wall time also counts others' time).");
	evbuffer_add_printf(b, "egs_scheduler_slice_max_cpu_seconds %.6f\n", (double)srv->slice_max_cpu_us / 1e6);
	head(b, "egs_scheduler_step_max_cpu_seconds", "gauge",
	     "The most CPU time one step of a scheduler run took (a slice takes several), and what it did.");
	evbuffer_add_printf(b, "egs_scheduler_step_max_cpu_seconds{piece=\"%s\"} %.6f\n",
			    srv->step_max_what ? srv->step_max_what : "none", (double)srv->step_max_cpu_us / 1e6);
	head(b, "egs_scheduler_cpu_seconds_total", "counter",
	     "CPU time of the loop thread spent in scheduler runs (set-up, slices, end).");
	evbuffer_add_printf(b, "egs_scheduler_cpu_seconds_total %.6f\n", (double)srv->plan_cpu_us / 1e6);
	head(b, "egs_store_commit_cpu_seconds_total", "counter",
	     "CPU time of the loop thread spent committing the turns' changes to the store (not the fsyncs).");
	evbuffer_add_printf(b, "egs_store_commit_cpu_seconds_total %.6f\n", (double)srv->commit_cpu_us / 1e6);
	head(b, "egs_scheduler_runs_total", "counter",
	     "Scheduler runs ended, by walk: resumed from the kept plan's snapshot, or full.");
	evbuffer_add_printf(b, "egs_scheduler_runs_total{walk=\"full\"} %llu\n",
			    (unsigned long long)(srv->runs - srv->runs_resumed));
	evbuffer_add_printf(b, "egs_scheduler_runs_total{walk=\"resumed\"} %llu\n", (unsigned long long)srv->runs_resumed);
	head(b, "egs_scheduler_runs_stale_total", "counter",
	     "Runs that requests made stale on the way (the plan was due again at their end).");
	evbuffer_add_printf(b, "egs_scheduler_runs_stale_total %llu\n", (unsigned long long)srv->runs_stale);
	head(b, "egs_scheduler_run_seconds_total", "counter",
	     "Wall time of the runs from begin to end (slices and the requests served between them).");
	evbuffer_add_printf(b, "egs_scheduler_run_seconds_total %.6f\n", (double)srv->run_wall_us / 1e6);
	head(b, "egs_scheduler_run_max_seconds", "gauge", "The longest wall time of one run from begin to end.");
	evbuffer_add_printf(b, "egs_scheduler_run_max_seconds %.6f\n", (double)srv->run_wall_max_us / 1e6);
	uint64_t kept, built;
	egs_views_counts(srv->views, &kept, &built);
	head(b, "egs_gpr_views_total", "counter",
	     "GPR status reads answered from a kept view, and views built (gpr_view.c), since egsd started.");
	evbuffer_add_printf(b, "egs_gpr_views_total{result=\"kept\"} %llu\negs_gpr_views_total{result=\"built\"} %llu\n",
			    (unsigned long long)kept, (unsigned long long)built);
	uint64_t hits, misses;
	egs_auth_cache_counts(&hits, &misses);
	head(b, "egs_auth_cache_total", "counter",
	     "Authenticated requests whose credential was found in the credential cache (hit) or checked (miss).");
	evbuffer_add_printf(b, "egs_auth_cache_total{result=\"hit\"} %llu\negs_auth_cache_total{result=\"miss\"} %llu\n",
			    (unsigned long long)hits, (unsigned long long)misses);
	head(b, "egs_event_streams", "gauge", "Open server-sent event streams.");
	evbuffer_add_printf(b, "egs_event_streams %zu\n", ob->watchers.len);
	head(b, "egs_gpu_series_bytes", "gauge", "Memory held by the per-GPU time series.");
	evbuffer_add_printf(b, "egs_gpu_series_bytes %zu\n", egs_series_set_bytes(&ob->series));
}

static void metrics(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	int64_t now = egs_now(srv);
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	struct evbuffer *b = evbuffer_new();
	EGS_ASSERT(b);
	gpu_series(r, b, now);
	if (r->who.role == EGS_ROLE_ADMIN) {
		queue_series(srv, b, now);
		inventory_series(srv, b, now);
		control_series(srv, b);
	}
	egs_hreq_content_type(r->hq, "text/plain; version=0.0.4; charset=utf-8");
	egs_hreq_reply(r->hq, 200, b);
	evbuffer_free(b);
	egs_obs_request(srv, "GET", r->path, 200, r->t0_us);
	r->hq = NULL; /* answered here: the Prometheus format is not the JSON envelope */
}

const struct egs_route egs_routes_metrics[] = {
	{ EVHTTP_REQ_GET, "/metrics", metrics, false },
	{ 0, NULL, NULL, false },
};
