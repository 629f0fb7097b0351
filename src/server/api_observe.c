/*
 * api_observe.c: the user guide's observability views, active alerts and the admin's knobs.
 *
 *   GET /api/v1/gpus/table     ?sliceName= &gprId= &workload= &namespace= &sort=power|temperature|utilization
 *                              GPUs hottest first (power, then temperature), with hotspots marked
 *   GET /api/v1/gpus/series    ?uuid= &window=1h (or &since=, &until=) one GPU's time series
 *   GET /api/v1/workloads      ?sliceName= &gprId=   AI workloads (pods or processes) with their GPUs
 *   GET /api/v1/models         ?sliceName= &model=   model details: GPUs committed, hottest GPUs
 *   GET /api/v1/alerts         ?sliceName= &node= &reason=   active alerts
 *   PUT /api/v1/nodes/thresholds        (admin) gpuTempThreshold / gpuPowerThreshold of nodes
 *   GET|PUT /api/v1/settings/observability (admin)
 *   GET /api/v1/notifications  ?sliceName=   the workspace's webhook and its delivery record
 *
 * A GPU belongs to a workspace while a GPR of that workspace holds its node.  Callers see the GPUs
 * of the workspaces in their scope; admins see every GPU of their projects.
 */
#include "server/observe.h"

#include "core/util.h"
#include "server/notify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOT_FRACTION 0.9 /* a GPU within 10% of a threshold is a hotspot */

/* The workspace filter of a view: sliceName (or workspace); when given it must be visible. */
static bool view_ws(struct egs_req *r, const char **out)
{
	const char *ws = egs_query(r, "sliceName");
	if (!ws)
		ws = egs_query(r, "workspace");
	*out = ws;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return false;
	if (ws && !egs_obs_ws_visible(r, ws)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found");
		return false;
	}
	return true;
}

/* Is node n in the view: visible, held by ws's GPR (when ws), by gpr (when gpr)? */
static bool node_in_view(struct egs_req *r, const struct egs_node *n, const char *ws, const char *gpr,
			 const struct egs_gpr **holder)
{
	const struct egs_gpr *g = egs_obs_node_gpr(r->srv, n);
	*holder = g;
	if ((ws || gpr) && !g)
		return false;
	if (ws && strcmp(g->workspace, ws) != 0)
		return false;
	if (gpr && strcmp(g->id, gpr) != 0)
		return false;
	return egs_obs_node_visible(r, n);
}

static const char *label(json_t *wl, const char *k)
{
	json_t *v = json_object_get(json_object_get(wl, "labels"), k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The model a workload runs: its egs.io/model label, else model, else app.kubernetes.io/name,
 * else the workload's own name. */
static const char *model_of(json_t *wl)
{
	static const char *const keys[] = { "egs.io/model", "model", "app.kubernetes.io/name" };
	for (size_t i = 0; i < EGS_ARRAY_LEN(keys); i++)
		if (label(wl, keys[i]))
			return label(wl, keys[i]);
	return json_string_value(json_object_get(wl, "name"));
}

/* Does ws own namespace ns (processes, with no namespace, always count)? */
static bool ns_of_ws(const struct egs_server *srv, const char *ws, const char *ns)
{
	const struct egs_workspace *w = egs_state_workspace(&srv->st, ws);
	if (!ns || !*ns || !w || !w->n_namespaces)
		return true;
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (!strcmp(w->namespaces[i].name, ns))
			return true;
	return false;
}

/* The workloads of node n that belong to its holder's workspace (borrowed array or NULL). */
static json_t *node_workloads(struct egs_server *srv, const struct egs_node *n)
{
	struct egs_node_workloads *w = egs_map_get(&srv->obs->workloads, n->key);
	return w ? w->items : NULL;
}

static bool uses_gpu(json_t *wl, const char *uuid)
{
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(wl, "gpus"), i, g)
		if (!strcmp(json_string_value(g), uuid))
			return true;
	return false;
}

static bool alert_on(struct egs_server *srv, enum egs_alert_kind k, const struct egs_node *n, const char *uuid)
{
	char key[EGS_KEY_MAX + EGS_NAME_MAX + 8];
	snprintf(key, sizeof(key), "%d|%s|%s", (int)k, n->key, uuid);
	return egs_map_get(&srv->obs->alerts.active, key) != NULL;
}

static json_t *time_json(int64_t t)
{
	char b[32];
	if (!t)
		return json_null();
	egs_time_format(t, b, sizeof(b));
	return json_string(b);
}

/* One row of the GPU table. */
static json_t *gpu_row(struct egs_server *srv, const struct egs_node *n, const struct egs_gpu *u,
		       const struct egs_gpr *g, json_t *wls)
{
	bool hot_t = alert_on(srv, EGS_ALERT_GPU_TEMP, n, u->uuid), hot_p = alert_on(srv, EGS_ALERT_GPU_POWER, n, u->uuid);
	bool hot = hot_t || hot_p || (n->temp_threshold > 0 && u->temp_c >= HOT_FRACTION * n->temp_threshold) ||
		   (n->power_threshold > 0 && u->power_w >= HOT_FRACTION * n->power_threshold);
	json_t *names = json_array(), *alerts = json_array(), *wl;
	size_t i;
	json_array_foreach(wls, i, wl) {
		if (!uses_gpu(wl, u->uuid))
			continue;
		const char *ns = json_string_value(json_object_get(wl, "namespace"));
		char full[400];
		snprintf(full, sizeof(full), "%s%s%s", ns, *ns ? "/" : "", json_string_value(json_object_get(wl, "name")));
		json_array_append_new(names, json_string(full));
	}
	for (int k = 0; k < EGS_ALERT_NKINDS; k++)
		if (alert_on(srv, (enum egs_alert_kind)k, n, u->uuid))
			json_array_append_new(alerts, json_string(egs_alert_reason((enum egs_alert_kind)k)));
	json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:s, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:b, s:o, s:o, s:o, s:o, s:o}",
			      "uuid", u->uuid, "index", u->index, "gpuNodeName", n->name, "clusterName", n->cluster,
			      "gpuShape", n->gpu_shape, "powerW", u->power_w, "tempC", u->temp_c, "utilPct", u->util_pct,
			      "memUsedMiB", (json_int_t)u->mem_used_mib, "memTotalMiB", (json_int_t)n->memory_mib,
			      "gpuPowerThreshold", n->power_threshold, "gpuTempThreshold", n->temp_threshold, "hotspot",
			      hot, "alerts", alerts, "workloads", names, "sampledAt", time_json(u->sampled_at), "gprId",
			      g ? json_string(g->id) : json_null(), "sliceName", g ? json_string(g->workspace) : json_null());
	EGS_ASSERT(o);
	return o;
}

static double sort_val(json_t *row, const char *k)
{
	return json_number_value(json_object_get(row, k));
}

static int hottest_first(const void *a, const void *b, void *arg)
{
	const char *sort_key = arg;
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	static const char *const order[][3] = { { "powerW", "tempC", "utilPct" },
						 { "tempC", "powerW", "utilPct" },
						 { "utilPct", "powerW", "tempC" } };
	size_t o = !strcmp(sort_key, "temperature") ? 1 : !strcmp(sort_key, "utilization") ? 2 : 0;
	for (size_t i = 0; i < 3; i++) {
		double dx = sort_val(x, order[o][i]), dy = sort_val(y, order[o][i]);
		if (dx != dy)
			return dx > dy ? -1 : 1;
	}
	return strcmp(json_string_value(json_object_get(x, "uuid")), json_string_value(json_object_get(y, "uuid")));
}

/* The summary the model details page shows over a list of GPU rows. */
static json_t *summarize_rows(json_t *rows)
{
	json_t *hp = NULL, *ht = NULL, *row;
	double util = 0, power = 0;
	size_t i, hot = 0;
	json_array_foreach(rows, i, row) {
		if (!hp || sort_val(row, "powerW") > sort_val(hp, "powerW"))
			hp = row;
		if (!ht || sort_val(row, "tempC") > sort_val(ht, "tempC"))
			ht = row;
		util += sort_val(row, "utilPct");
		power += sort_val(row, "powerW");
		hot += json_is_true(json_object_get(row, "hotspot"));
	}
	size_t n = json_array_size(rows);
	return json_pack("{s:i, s:i, s:f, s:f, s:o, s:o}", "gpus", (int)n, "hotspots", (int)hot, "avgUtilPct",
			 n ? util / (double)n : 0.0, "totalPowerW", power, "highestPowerGpu",
			 hp ? json_deep_copy(hp) : json_null(), "highestTempGpu", ht ? json_deep_copy(ht) : json_null());
}

static void gpus_table(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	const char *ws, *gpr = egs_query(r, "gprId"), *wl_name = egs_query(r, "workload"), *wl_ns = egs_query(r, "namespace");
	const char *sort = egs_query(r, "sort");
	if (!view_ws(r, &ws))
		return;
	if (sort && strcmp(sort, "power") && strcmp(sort, "temperature") && strcmp(sort, "utilization")) {
		egs_reply_invalid(r, "sort", "sort must be power, temperature or utilization");
		return;
	}
	json_t *rows = json_array();
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		const struct egs_gpr *g;
		if (!node_in_view(r, n, ws, gpr, &g))
			continue;
		json_t *wls = node_workloads(srv, n);
		for (int k = 0; k < n->n_gpus; k++) {
			bool in = !wl_name && !wl_ns;
			size_t j;
			json_t *wl;
			json_array_foreach(wls, j, wl) {
				const char *nm = json_string_value(json_object_get(wl, "name"));
				const char *ns = json_string_value(json_object_get(wl, "namespace"));
				if ((!wl_name || !strcmp(nm, wl_name) || !strcmp(model_of(wl), wl_name)) &&
				    (!wl_ns || !strcmp(ns, wl_ns)) && uses_gpu(wl, n->gpus[k].uuid))
					in = true;
			}
			if (in)
				json_array_append_new(rows, gpu_row(srv, n, &n->gpus[k], g, wls));
		}
	}
	size_t n = json_array_size(rows);
	json_t **tmp = egs_malloc((n + 1) * sizeof(*tmp));
	for (size_t i = 0; i < n; i++)
		tmp[i] = json_incref(json_array_get(rows, i));
	qsort_r(tmp, n, sizeof(*tmp), hottest_first, (void *)(sort ? sort : "power"));
	json_array_clear(rows);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(rows, tmp[i]);
	free(tmp);
	egs_reply_ok(r, json_pack("{s:o, s:o}", "summary", summarize_rows(rows), "items", rows));
}

/* Finds the node holding GPU uuid (NULL when none). */
static const struct egs_node *gpu_node(struct egs_server *srv, const char *uuid, const struct egs_gpu **gpu)
{
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		for (int k = 0; k < n->n_gpus; k++)
			if (!strcmp(n->gpus[k].uuid, uuid)) {
				*gpu = &n->gpus[k];
				return n;
			}
	}
	return NULL;
}

static void gpus_series(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_obs *ob = srv->obs;
	const char *uuid = egs_query(r, "uuid"), *win = egs_query(r, "window"), *why;
	const char *since_s = egs_query(r, "since"), *until_s = egs_query(r, "until");
	int64_t now = egs_now(srv), window = 3600, since, until = now + 1;
	const struct egs_gpu *u;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	if (!uuid || !*uuid) {
		egs_reply_invalid(r, "uuid", "uuid is required");
		return;
	}
	if (win && !egs_duration_parse(win, &window, &why)) {
		egs_reply_invalid(r, "window", "window %s", why);
		return;
	}
	since = now - window;
	if ((since_s && !egs_time_parse(since_s, &since)) || (until_s && !egs_time_parse(until_s, &until))) {
		egs_reply_invalid(r, since_s && !egs_time_parse(since_s, &since) ? "since" : "until",
				  "since and until must be RFC 3339 times");
		return;
	}
	const struct egs_node *n = gpu_node(srv, uuid, &u);
	if (!n || !egs_obs_node_visible(r, n)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPU_NOT_FOUND", "uuid", "GPU %.64s not found", uuid);
		return;
	}
	const struct egs_series *s = egs_series_set_get(&ob->series, uuid);
	size_t cap = ob->series.cap, np = 0;
	struct egs_point *pts = egs_malloc((cap + 1) * sizeof(*pts));
	if (s)
		np = egs_series_range(&ob->series, s, since, until, pts, cap);
	json_t *arr = json_array();
	for (size_t i = 0; i < np; i++)
		json_array_append_new(arr, json_pack("{s:o, s:f, s:f, s:f, s:f, s:i}", "t", time_json(pts[i].t), "powerW",
						     (double)pts[i].power_w, "tempC", (double)pts[i].temp_c, "utilPct",
						     (double)pts[i].util_pct, "memUsedMiB", (double)pts[i].mem_used_mib,
						     "samples", (int)pts[i].n));
	free(pts);
	struct egs_series_summary sum;
	json_t *summary = json_null();
	if (s && egs_series_summarize(&ob->series, s, since, until, &sum))
		summary = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "powerMeanW", sum.power_mean, "powerMaxW",
				    sum.power_max, "tempMeanC", sum.temp_mean, "tempMaxC", sum.temp_max, "utilMeanPct",
				    sum.util_mean, "utilMaxPct", sum.util_max, "memMaxMiB", sum.mem_max);
	char step[48];
	egs_duration_format(ob->series.step, step, sizeof(step));
	egs_reply_ok(r, json_pack("{s:s, s:i, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "uuid", uuid, "index", u->index,
				  "gpuNodeName", n->name, "clusterName", n->cluster, "step", step, "maxPoints",
				  (int)ob->series.cap, "since", time_json(since), "until", time_json(until), "summary",
				  summary, "points", arr));
}

/* Appends the workloads of the view (each with its GPUs' rows) to out. */
static void collect_workloads(struct egs_req *r, const char *ws, const char *gpr, json_t *out)
{
	struct egs_server *srv = r->srv;
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		const struct egs_gpr *g;
		json_t *wls = node_workloads(srv, n), *wl;
		size_t j;
		if (!wls || !node_in_view(r, n, ws, gpr, &g))
			continue;
		json_array_foreach(wls, j, wl) {
			const char *ns = json_string_value(json_object_get(wl, "namespace"));
			if (g && !ns_of_ws(srv, g->workspace, ns))
				continue;
			json_t *rows = json_array();
			for (int k = 0; k < n->n_gpus; k++)
				if (uses_gpu(wl, n->gpus[k].uuid))
					json_array_append_new(rows, gpu_row(srv, n, &n->gpus[k], g, wls));
			const char *cfg = label(wl, "egs.io/model-config"), *job = label(wl, "egs.io/job-type");
			json_t *o = json_pack("{s:O, s:O, s:s, s:o, s:o, s:O, s:s, s:s, s:o, s:o, s:o}", "name",
					      json_object_get(wl, "name"), "namespace", json_object_get(wl, "namespace"),
					      "model", model_of(wl), "modelConfig", cfg ? json_string(cfg) : json_null(),
					      "jobType", job ? json_string(job) : json_null(), "labels",
					      json_object_get(wl, "labels"), "gpuNodeName", n->name, "clusterName", n->cluster,
					      "gprId", g ? json_string(g->id) : json_null(), "sliceName",
					      g ? json_string(g->workspace) : json_null(), "summary", summarize_rows(rows));
			EGS_ASSERT(o);
			json_object_set_new(o, "gpus", rows);
			if (json_object_get(wl, "phase")) /* pods of the kubernetes agent */
				json_object_set(o, "phase", json_object_get(wl, "phase"));
			if (json_object_get(wl, "gpuRequest"))
				json_object_set(o, "gpuRequest", json_object_get(wl, "gpuRequest"));
			json_array_append_new(out, o);
		}
	}
}

/* Appends the slice pods that wait for a GPR's nodes (observe_pods.c) as workloads without a node. */
static void waiting_pods(struct egs_req *r, const char *ws, json_t *out)
{
	json_t *waiting = json_array(), *x;
	size_t i;
	egs_observe_pending_view(r, ws, waiting);
	json_array_foreach(waiting, i, x) {
		json_t *rows = json_array();
		json_object_set_new(x, "model", json_string(json_string_value(json_object_get(x, "name"))));
		json_object_set_new(x, "modelConfig", json_null());
		json_object_set_new(x, "jobType", json_null());
		json_object_set_new(x, "labels", json_object());
		json_object_set_new(x, "gprId", json_null());
		json_object_set_new(x, "summary", summarize_rows(rows));
		json_decref(rows);
		json_array_append(out, x);
	}
	json_decref(waiting);
}

static void workloads_list(struct egs_req *r)
{
	const char *ws;
	if (!view_ws(r, &ws))
		return;
	json_t *items = json_array();
	collect_workloads(r, ws, egs_query(r, "gprId"), items);
	if (!egs_query(r, "gprId")) /* pods that wait hold no GPR's node yet */
		waiting_pods(r, ws, items);
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static bool has(json_t *list, json_t *x)
{
	size_t i;
	json_t *y;
	json_array_foreach(list, i, y)
		if (json_equal(x, y))
			return true;
	return false;
}

/* Folds workload wl (a collect_workloads entry) into its model's entry of models. */
static void add_to_model(json_t *models, json_t *wl)
{
	const char *m = json_string_value(json_object_get(wl, "model"));
	json_t *e = json_object_get(models, m);
	if (!e) {
		e = json_pack("{s:s, s:O, s:O, s:[], s:[], s:[], s:[]}", "model", m, "modelConfig",
			      json_object_get(wl, "modelConfig"), "jobType", json_object_get(wl, "jobType"), "workloads",
			      "nodes", "gprIds", "gpus");
		json_object_set_new(models, m, e);
	}
	const char *ns = json_string_value(json_object_get(wl, "namespace"));
	char full[400], node[EGS_KEY_MAX];
	snprintf(full, sizeof(full), "%s%s%s", ns, *ns ? "/" : "", json_string_value(json_object_get(wl, "name")));
	json_array_append_new(json_object_get(e, "workloads"), json_string(full));
	snprintf(node, sizeof(node), "%s/%s", json_string_value(json_object_get(wl, "clusterName")),
		 json_string_value(json_object_get(wl, "gpuNodeName")));
	json_t *nj = json_string(node), *gid = json_object_get(wl, "gprId"), *g;
	if (!has(json_object_get(e, "nodes"), nj))
		json_array_append(json_object_get(e, "nodes"), nj);
	json_decref(nj);
	if (json_is_string(gid) && !has(json_object_get(e, "gprIds"), gid))
		json_array_append(json_object_get(e, "gprIds"), gid);
	size_t k;
	json_array_foreach(json_object_get(wl, "gpus"), k, g) {
		bool dup = false; /* GPUs shared by two pods of one model count once */
		size_t j;
		json_t *y;
		json_array_foreach(json_object_get(e, "gpus"), j, y)
			dup = dup || json_equal(json_object_get(y, "uuid"), json_object_get(g, "uuid"));
		if (!dup)
			json_array_append(json_object_get(e, "gpus"), g);
	}
}

static void models_list(struct egs_req *r)
{
	const char *ws, *only = egs_query(r, "model");
	if (!view_ws(r, &ws))
		return;
	json_t *wls = json_array(), *models = json_object(), *wl, *e;
	collect_workloads(r, ws, egs_query(r, "gprId"), wls);
	size_t i;
	json_array_foreach(wls, i, wl)
		if (!only || !strcmp(json_string_value(json_object_get(wl, "model")), only))
			add_to_model(models, wl);
	json_t *items = json_array();
	const char *k;
	json_object_foreach(models, k, e) {
		json_t *sum = summarize_rows(json_object_get(e, "gpus"));
		json_object_set(e, "gpusCommitted", json_object_get(sum, "gpus"));
		json_object_update(e, sum);
		json_object_del(e, "gpus");
		json_decref(sum);
		json_array_append(items, e);
	}
	json_decref(models);
	json_decref(wls);
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static void alerts_list(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	const char *ws, *node = egs_query(r, "node"), *reason = egs_query(r, "reason");
	if (!view_ws(r, &ws))
		return;
	struct egs_vec all = { 0 };
	egs_alerts_list(&srv->obs->alerts, &all);
	json_t *items = json_array();
	for (size_t i = 0; i < all.len; i++) {
		const struct egs_alert *al = all.items[i];
		const char *slash = strchr(al->node, '/');
		if ((ws && strcmp(al->workspace, ws) != 0) || (reason && strcmp(egs_alert_reason(al->kind), reason) != 0) ||
		    (node && strcmp(slash ? slash + 1 : al->node, node) != 0 && strcmp(al->node, node) != 0))
			continue;
		const struct egs_node *n = egs_map_get(&srv->st.nodes, al->node);
		bool vis = r->who.role == EGS_ROLE_ADMIN ? n && egs_obs_node_visible(r, n)
							 : al->workspace[0] && egs_obs_ws_visible(r, al->workspace);
		if (vis)
			json_array_append_new(items, egs_json_alert(al));
	}
	egs_vec_cleanup(&all);
	egs_reply_ok(r, json_pack("{s:o, s:i}", "items", items, "total", (int)json_array_size(items)));
}

static bool threshold(struct egs_req *r, const char *field, double max, double *out, bool *given)
{
	json_t *v = json_object_get(r->body, field);
	*given = v && !json_is_null(v);
	if (!*given)
		return true;
	if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > max) {
		egs_reply_invalid(r, field, "%s must be a number above 0 and at most %g", field, max);
		return false;
	}
	*out = json_number_value(v);
	return true;
}

static void nodes_thresholds(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "gpuNodeName", "gpuTempThreshold", "gpuPowerThreshold",
					       NULL };
	struct egs_server *srv = r->srv;
	char cluster[EGS_NAME_MAX], node[EGS_NAME_MAX];
	double t = 0, p = 0;
	bool tg, pg;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "clusterName", true, cluster, sizeof(cluster)) ||
	    !egs_get_str(r, r->body, "gpuNodeName", false, node, sizeof(node)) ||
	    !threshold(r, "gpuTempThreshold", 200, &t, &tg) || !threshold(r, "gpuPowerThreshold", 10000, &p, &pg))
		return;
	const struct egs_cluster *c = egs_state_cluster(&srv->st, cluster);
	if (!c || !egs_in_project(r, c->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s is not registered", cluster);
		return;
	}
	if (!tg && !pg) {
		egs_reply_invalid(r, "gpuTempThreshold", "give gpuTempThreshold, gpuPowerThreshold or both");
		return;
	}
	int count = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (strcmp(n->cluster, cluster) != 0 || (node[0] && strcmp(n->name, node) != 0))
			continue;
		if (tg)
			n->temp_threshold = t;
		if (pg)
			n->power_threshold = p;
		egs_state_touch(&srv->st, EGS_KIND_NODE, n);
		count++;
	}
	if (node[0] && !count) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "NODE_NOT_FOUND", "gpuNodeName", "node %s is not registered in cluster %s",
			      node, cluster);
		return;
	}
	egs_reply_ok(r, json_pack("{s:s, s:i}", "clusterName", cluster, "nodes", count));
}

static void settings_get(struct egs_req *r)
{
	if (egs_require_role(r, EGS_R(ADMIN)))
		egs_reply_ok(r, egs_obs_settings_json(&r->srv->obs->cfg));
}

static void settings_put(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_obs *ob = srv->obs;
	struct egs_obs_settings next = ob->cfg;
	const char *field;
	char why[200];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_required(r))
		return;
	if (r->who.project[0]) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, NULL, "only an admin of every project may change settings");
		return;
	}
	if (!egs_obs_settings_parse(r->body, &next, &field, why, sizeof(why))) {
		egs_reply_invalid(r, field, "%s", why);
		return;
	}
	json_t *j = egs_obs_settings_json(&next);
	char *text = json_dumps(j, JSON_COMPACT);
	enum egs_err err = egs_store_meta_set(srv->store, "observability.settings", text);
	free(text);
	if (err) {
		json_decref(j);
		egs_reply_err(r, err, NULL, NULL, "the settings could not be stored");
		return;
	}
	bool reseries = next.series_points != ob->cfg.series_points || next.series_step_s != ob->cfg.series_step_s;
	ob->cfg = next;
	if (next.event_retention != srv->st.cfg.event_retention)
		egs_state_set_event_retention(&srv->st, next.event_retention);
	if (reseries) {
		egs_series_set_cleanup(&ob->series);
		egs_series_set_init(&ob->series, next.series_points, next.series_step_s, 200000);
	}
	egs_reply_ok(r, j);
}

/* "https://hooks.slack.com/..." without the secret path. */
static json_t *masked(const char *url)
{
	char out[96];
	const char *host = strstr(url, "://");
	host = host ? host + 3 : url;
	size_t n = strcspn(host, "/?#");
	snprintf(out, sizeof(out), "%.*s%.*s/...", (int)(host - url), url, (int)(n < 60 ? n : 60), host);
	return json_string(out);
}

static void notifications_get(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	const char *ws;
	if (!view_ws(r, &ws))
		return;
	if (!ws) {
		egs_reply_invalid(r, "sliceName", "sliceName is required");
		return;
	}
	const struct egs_workspace *w = egs_state_workspace(&srv->st, ws);
	const struct egs_ws_delivery *d = egs_map_get(&srv->obs->webhook_ws, ws);
	egs_reply_ok(r, json_pack("{s:s, s:b, s:o, s:I, s:I, s:o, s:o, s:s, s:I}", "sliceName", ws, "webhookConfigured",
				  w && w->webhook_url, "webhookUrl", w && w->webhook_url ? masked(w->webhook_url) : json_null(),
				  "delivered", (json_int_t)(d ? d->delivered : 0), "failed", (json_int_t)(d ? d->failed : 0),
				  "lastDelivered", time_json(d ? d->last_ok : 0), "lastFailure", time_json(d ? d->last_fail : 0),
				  "lastError", d ? d->last_error : "", "pending",
				  (json_int_t)(srv->obs->notify ? egs_notify_pending(srv->obs->notify) : 0)));
}

const struct egs_route egs_routes_observe[] = {
	{ EVHTTP_REQ_GET, "/api/v1/gpus/table", gpus_table, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpus/series", gpus_series, false },
	{ EVHTTP_REQ_GET, "/api/v1/workloads", workloads_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/models", models_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/alerts", alerts_list, false },
	{ EVHTTP_REQ_PUT, "/api/v1/nodes/thresholds", nodes_thresholds, false },
	{ EVHTTP_REQ_GET, "/api/v1/settings/observability", settings_get, false },
	{ EVHTTP_REQ_PUT, "/api/v1/settings/observability", settings_put, false },
	{ EVHTTP_REQ_GET, "/api/v1/notifications", notifications_get, false },
	{ 0, NULL, NULL, false },
};
