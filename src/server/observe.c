/*
 * observe.c: the observability runtime's lifecycle and the hooks egsd's loop calls: settings (kept
 * in the store's meta table), heartbeat samples into series, workloads and alerts, exit warnings,
 * silent-node alerts, event retention, and the delivery of each turn's committed events to event
 * streams and webhooks.
 *
 * Ordering: events are streamed and notified only after their commit, so a client never hears of
 * an event the store could still lose; hooks that record events run before the commit so their
 * events share the turn's transaction.
 */
#include "server/observe.h"

#include "core/gpr.h"
#include "core/util.h"
#include "server/audit.h"
#include "server/notify.h"
#include "server/outbox.h"

#include <stdio.h>
#include <string.h>

#define SETTINGS_KEY "observability.settings"
#define MAX_WORKLOADS 256
#define MAX_WL_GPUS 64
#define MAX_LABELS 32
#define PRUNE_EVERY_S 60
#define PING_EVERY_S 15

/* ---- settings ---- */

static void settings_default(struct egs_obs_settings *c)
{
	c->exit_warning_s = 600;
	c->event_retention = 10000;
	c->event_ttl_s = 30 * 24 * 3600;
	c->temp_threshold = 85;
	c->power_threshold = 700;
	c->rules = (struct egs_alert_rules){ 95, 5, 50, 10 };
	c->series_step_s = 60;
	c->series_points = 120;
}

static json_t *dur(int64_t s)
{
	char b[48];
	egs_duration_format(s, b, sizeof(b));
	return json_string(b);
}

json_t *egs_obs_settings_json(const struct egs_obs_settings *c)
{
	json_t *o = json_pack("{s:o, s:I, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:i}", "exitWarning",
			      c->exit_warning_s ? dur(c->exit_warning_s) : json_string("off"), "eventRetention",
			      (json_int_t)c->event_retention, "eventTTL", dur(c->event_ttl_s), "defaultGpuTempThreshold",
			      c->temp_threshold, "defaultGpuPowerThreshold", c->power_threshold, "gpuUtilThreshold",
			      c->rules.util_threshold, "tempHysteresis", c->rules.temp_hysteresis, "powerHysteresis",
			      c->rules.power_hysteresis, "utilHysteresis", c->rules.util_hysteresis, "seriesStep",
			      dur(c->series_step_s), "seriesPoints", (int)c->series_points);
	EGS_ASSERT(o);
	return o;
}

/* A duration field: "off"/"0" allowed when allow_off.  false with why set on error. */
static bool get_dur(json_t *s, const char *k, int64_t min, int64_t max, bool allow_off, int64_t *out, char *why,
		    size_t whylen)
{
	json_t *v = json_object_get(s, k);
	const char *reason;
	if (!v)
		return true;
	if (!json_is_string(v)) {
		snprintf(why, whylen, "%s must be a duration such as \"10m\"", k);
		return false;
	}
	const char *t = json_string_value(v);
	if (allow_off && (!strcmp(t, "off") || !strcmp(t, "0"))) {
		*out = 0;
		return true;
	}
	int64_t secs;
	if (!egs_duration_parse(t, &secs, &reason)) {
		snprintf(why, whylen, "%s %s", k, reason);
		return false;
	}
	if (secs < min || secs > max) {
		snprintf(why, whylen, "%s must be between %llds and %llds", k, (long long)min, (long long)max);
		return false;
	}
	*out = secs;
	return true;
}

static bool get_num(json_t *s, const char *k, double min, double max, double *out, char *why, size_t whylen)
{
	json_t *v = json_object_get(s, k);
	bool whole = !strcmp(k, "eventRetention") || !strcmp(k, "seriesPoints");
	if (!v)
		return true;
	if (!(whole ? json_is_integer(v) : json_is_number(v)) || json_number_value(v) < min || json_number_value(v) > max) {
		snprintf(why, whylen, "%s must be %s from %g to %g", k, whole ? "an integer" : "a number", min, max);
		return false;
	}
	*out = json_number_value(v);
	return true;
}

bool egs_obs_settings_parse(json_t *s, struct egs_obs_settings *c, const char **field, char *why, size_t whylen)
{
	static const char *const known[] = { "exitWarning", "eventRetention", "eventTTL", "defaultGpuTempThreshold",
					     "defaultGpuPowerThreshold", "gpuUtilThreshold", "tempHysteresis",
					     "powerHysteresis", "utilHysteresis", "seriesStep", "seriesPoints" };
	const char *k;
	json_t *v;
	double d;
	json_object_foreach(s, k, v) {
		bool ok = false;
		for (size_t i = 0; i < EGS_ARRAY_LEN(known); i++)
			ok = ok || !strcmp(k, known[i]);
		if (!ok) {
			*field = "settings";
			snprintf(why, whylen, "unknown setting %.60s", k);
			return false;
		}
	}
#define FIELD(name, expr)            \
	do {                         \
		*field = name;       \
		if (!(expr))         \
			return false; \
	} while (0)
	FIELD("exitWarning", get_dur(s, "exitWarning", 60, 7 * 24 * 3600, true, &c->exit_warning_s, why, whylen));
	FIELD("eventTTL", get_dur(s, "eventTTL", 3600, EGS_MAX_DURATION_S, false, &c->event_ttl_s, why, whylen));
	FIELD("seriesStep", get_dur(s, "seriesStep", 1, 3600, false, &c->series_step_s, why, whylen));
	d = (double)c->event_retention;
	FIELD("eventRetention", get_num(s, "eventRetention", 128, 1000000, &d, why, whylen));
	c->event_retention = (size_t)d;
	d = c->series_points;
	FIELD("seriesPoints", get_num(s, "seriesPoints", 2, 10000, &d, why, whylen));
	c->series_points = (uint32_t)d;
	FIELD("defaultGpuTempThreshold", get_num(s, "defaultGpuTempThreshold", 1, 200, &c->temp_threshold, why, whylen));
	FIELD("defaultGpuPowerThreshold",
	      get_num(s, "defaultGpuPowerThreshold", 1, 10000, &c->power_threshold, why, whylen));
	FIELD("gpuUtilThreshold", get_num(s, "gpuUtilThreshold", 0, 100, &c->rules.util_threshold, why, whylen));
	FIELD("tempHysteresis", get_num(s, "tempHysteresis", 0, 100, &c->rules.temp_hysteresis, why, whylen));
	FIELD("powerHysteresis", get_num(s, "powerHysteresis", 0, 5000, &c->rules.power_hysteresis, why, whylen));
	FIELD("utilHysteresis", get_num(s, "utilHysteresis", 0, 100, &c->rules.util_hysteresis, why, whylen));
#undef FIELD
	*field = NULL;
	return true;
}

/* ---- visibility ---- */

const struct egs_gpr *egs_obs_node_gpr(const struct egs_server *srv, const struct egs_node *n)
{
	const char *id = n->gpr_id[0] ? n->gpr_id : n->attached_gpr;
	const struct egs_gpr *g = id[0] ? egs_state_gpr(&srv->st, id) : NULL;
	return g && egs_gpr_is_active(g) ? g : NULL;
}

bool egs_obs_ws_visible(const struct egs_req *r, const char *ws)
{
	if (r->who.role == EGS_ROLE_AGENT)
		return false;
	if (r->who.role == EGS_ROLE_ADMIN && !r->who.project[0])
		return true;
	const struct egs_workspace *w = ws[0] ? egs_state_workspace(&r->srv->st, ws) : NULL;
	if (!w || !egs_in_project(r, w->project))
		return false;
	return r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0] || !strcmp(r->who.workspace, w->name);
}

bool egs_obs_node_visible(const struct egs_req *r, const struct egs_node *n)
{
	if (r->who.role == EGS_ROLE_ADMIN) {
		const struct egs_cluster *c = egs_state_cluster(&r->srv->st, n->cluster);
		return c && egs_in_project(r, c->project);
	}
	const struct egs_gpr *g = egs_obs_node_gpr(r->srv, n);
	return g && egs_obs_ws_visible(r, g->workspace);
}

bool egs_get_webhook_url(struct egs_req *r, const char *field, char *out, size_t outsz)
{
	const char *why;
	if (!egs_get_str(r, r->body, field, false, out, outsz))
		return false;
	if (out[0] && !egs_notify_url_valid(out, &why)) {
		egs_reply_invalid(r, field, "%s %s", field, why);
		return false;
	}
	if (out[0] && !r->srv->allow_private_webhooks && egs_notify_url_private(out)) {
		egs_reply_invalid(r, field,
				  "%s must not point to a loopback, link-local or metadata address (egsd "
				  "--allow-private-webhooks permits it)", field);
		return false;
	}
	return true;
}

/* ---- lifecycle ---- */

static void series_reset(struct egs_obs *ob)
{
	egs_series_set_cleanup(&ob->series);
	egs_series_set_init(&ob->series, ob->cfg.series_points, ob->cfg.series_step_s, 200000);
}

enum egs_err egs_obs_start(struct egs_server *srv)
{
	struct egs_obs *ob = egs_calloc(1, sizeof(*ob));
	char *saved = NULL;
	enum egs_err err;
	srv->obs = ob;
	settings_default(&ob->cfg);
	egs_map_init(&ob->workloads);
	egs_map_init(&ob->pending);
	egs_map_init(&ob->first_est);
	egs_map_init(&ob->webhook_ws);
	egs_alerts_init(&ob->alerts);
	egs_series_set_init(&ob->series, ob->cfg.series_points, ob->cfg.series_step_s, 200000);
	if ((err = egs_store_meta_get(srv->store, SETTINGS_KEY, &saved)))
		goto out;
	if (saved) {
		json_t *s = json_loads(saved, 0, NULL);
		const char *field;
		char why[160];
		if (!json_is_object(s) || !egs_obs_settings_parse(s, &ob->cfg, &field, why, sizeof(why)))
			fprintf(srv->log, "level=warn msg=\"stored observability settings ignored: %s\"\n",
				s ? why : "not JSON");
		json_decref(s);
		series_reset(ob);
	}
	if (ob->cfg.event_retention != srv->st.cfg.event_retention)
		egs_state_set_event_retention(&srv->st, ob->cfg.event_retention);
	free(saved);
	saved = NULL;
	if ((err = egs_store_meta_get(srv->store, "observability.prices", &saved)))
		goto out;
	ob->prices = saved ? json_loads(saved, 0, NULL) : NULL;
	if (!json_is_object(ob->prices)) {
		json_decref(ob->prices);
		ob->prices = json_object();
	}
	struct egs_notify_config ncfg = { .allow_private = srv->allow_private_webhooks };
	err = egs_notify_new(srv->base, &ncfg, egs_outbox_done, srv, &ob->notify);
	ob->started = err == EGS_OK;
	egs_alerts_restore(&ob->alerts, &srv->st, srv->log); /* active before the restart (alerts.h) */
	if (ob->started && !srv->follower) /* a follower sends nothing: the leader does, or it when it leads */
		egs_outbox_resume(srv); /* undelivered webhook messages (outbox.h) */
out:
	free(saved);
	return err;
}

void egs_obs_stop(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	egs_events_close_all(srv);
	egs_metrics_finish_all(srv);
	egs_notify_free(ob->notify);
	ob->notify = NULL;
}

static void free_all(struct egs_map *m, void (*fn)(void *))
{
	void *v;
	for (size_t i = 0; egs_map_next(m, &i, NULL, &v);)
		fn(v);
	egs_map_cleanup(m);
}

static void workloads_free(void *v)
{
	struct egs_node_workloads *w = v;
	json_decref(w->items);
	free(w);
}

void egs_obs_free(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	egs_obs_stop(srv);
	egs_vec_cleanup(&ob->watchers);
	egs_series_set_cleanup(&ob->series);
	free_all(&ob->workloads, workloads_free);
	egs_observe_pending_free(srv);
	free_all(&ob->first_est, free);
	free_all(&ob->webhook_ws, free);
	egs_alerts_cleanup(&ob->alerts);
	for (size_t i = 0; i < ob->outbox_new.len; i++)
		free(ob->outbox_new.items[i]);
	egs_vec_cleanup(&ob->outbox_new);
	json_decref(ob->prices);
	free(ob->routes);
	free(ob);
	srv->obs = NULL;
}

/* ---- heartbeat ---- */

/* A bounded copy of one string field, or NULL when absent or not a string. */
static json_t *bounded_str(json_t *o, const char *k, size_t max)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_string(v) || json_string_length(v) == 0)
		return NULL;
	return json_stringn(json_string_value(v), json_string_length(v) < max ? json_string_length(v) : max);
}

/* Keeps what the views need of one reported workload, with hard caps (network input). */
static json_t *clean_workload(const struct egs_node *n, json_t *w)
{
	json_t *name = json_is_object(w) ? bounded_str(w, "name", 253) : NULL;
	if (!name)
		return NULL;
	json_t *ns = bounded_str(w, "namespace", 63);
	json_t *o = json_pack("{s:o, s:o, s:[], s:{}}", "name", name, "namespace", ns ? ns : json_string(""), "gpus",
			      "labels");
	json_t *gpus = json_object_get(w, "gpus"), *g, *out = json_object_get(o, "gpus");
	size_t i;
	json_array_foreach(gpus, i, g) {
		for (int k = 0; json_is_string(g) && k < n->n_gpus && json_array_size(out) < MAX_WL_GPUS; k++)
			if (!strcmp(n->gpus[k].uuid, json_string_value(g)))
				json_array_append_new(out, json_string(n->gpus[k].uuid));
	}
	json_t *labels = json_object_get(w, "labels"), *lv, *lo = json_object_get(o, "labels");
	const char *lk;
	json_object_foreach(labels, lk, lv) {
		if (json_object_size(lo) >= MAX_LABELS)
			break;
		if (json_is_string(lv) && strlen(lk) <= 128 && json_string_length(lv) <= 256)
			json_object_set(lo, lk, lv);
	}
	json_t *pid = json_object_get(w, "pid"), *phase = bounded_str(w, "phase", 32), *req = json_object_get(w, "gpuRequest");
	if (json_is_integer(pid))
		json_object_set(o, "pid", pid);
	if (phase) /* pods (the kubernetes agent): Running, or Pending while bound to the node */
		json_object_set_new(o, "phase", phase);
	if (json_is_integer(req) && json_integer_value(req) >= 0 && json_integer_value(req) <= 1 << 20)
		json_object_set(o, "gpuRequest", req);
	return o;
}

static void keep_workloads(struct egs_obs *ob, const struct egs_node *n, json_t *list, int64_t now)
{
	struct egs_node_workloads *w = egs_map_get(&ob->workloads, n->key);
	if (!json_is_array(list))
		return;
	json_t *items = json_array(), *x;
	size_t i;
	json_array_foreach(list, i, x) {
		json_t *c = i < MAX_WORKLOADS ? clean_workload(n, x) : NULL;
		if (c)
			json_array_append_new(items, c);
	}
	if (!w) {
		w = egs_calloc(1, sizeof(*w));
		egs_strlcpy(w->node, n->key, sizeof(w->node));
		egs_map_put(&ob->workloads, w->node, w);
	}
	json_decref(w->items);
	w->items = items;
	w->at = now;
}

void egs_observe_node(struct egs_server *srv, struct egs_node *n, json_t *o, int64_t now)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	const struct egs_gpr *g = egs_obs_node_gpr(srv, n);
	const char *ws = g ? g->workspace : "", *gid = g ? g->id : "";
	for (int i = 0; i < n->n_gpus; i++) {
		const struct egs_gpu *u = &n->gpus[i];
		if (u->sampled_at != now)
			continue;
		struct egs_sample s = { u->power_w, u->temp_c, u->util_pct, (double)u->mem_used_mib };
		egs_series_set_add(&ob->series, u->uuid, now, &s);
		egs_alerts_check_gpu(&ob->alerts, &srv->st, &ob->cfg.rules, n, u, ws, gid, now);
	}
	json_t *why = json_object_get(o, "healthReason");
	const char *reason = json_is_string(why) && egs_text_clean(json_string_value(why)) ? json_string_value(why) : NULL;
	egs_alerts_check_node(&ob->alerts, &srv->st, n, false, reason, ws, gid, now);
	keep_workloads(ob, n, json_object_get(o, "workloads"), now);
}

/* ---- the commit turn ---- */

/* Writes the exit warnings that are due; returns how many. */
static int exit_warnings(struct egs_server *srv, int64_t now, bool record)
{
	struct egs_obs *ob = srv->obs;
	int due = 0;
	if (!ob->cfg.exit_warning_s)
		return 0;
	for (size_t i = 0; i < srv->st.active.len; i++) {
		struct egs_gpr *g = srv->st.active.items[i];
		if (g->state != EGS_GPR_PROVISIONED || (g->marks_sent & EGS_MARK_EXIT_WARNED) || now >= g->exit_at ||
		    now < g->exit_at - ob->cfg.exit_warning_s)
			continue;
		due++;
		if (!record)
			continue;
		char left[48], at[32];
		egs_duration_format(g->exit_at - now, left, sizeof(left));
		egs_time_format(g->exit_at, at, sizeof(at));
		g->marks_sent |= EGS_MARK_EXIT_WARNED;
		egs_state_touch(&srv->st, EGS_KIND_GPR, g);
		egs_state_event(&srv->st, now, "Warning", "ExitWarning", "GPR", g->id, g->workspace,
				"GPR %s exits in %s (at %s): save checkpoints now; its %zu node(s) are then drained "
				"and leave workspace %s",
				g->name, left, at, g->nodes.n, g->workspace);
	}
	return due;
}

static void observe_estimate(struct egs_obs *ob, double err_s)
{
	static const double le[EGS_EST_BUCKETS] = { -3600, -600, -60, 0, 60, 600, 3600, 21600, 86400 };
	size_t b = 0;
	while (b < EGS_EST_BUCKETS && err_s > le[b])
		b++;
	ob->est.buckets[b]++;
	ob->est.sum_s += err_s;
	ob->est.count++;
}

/* The first estimated start of a queued GPR (keyed by a copy of its id). */
struct first_est {
	char id[EGS_ID_MAX];
	int64_t at;
};

/* Follows estimates: the first estimated start of each queued GPR, and its error once it starts. */
static void track_estimate(struct egs_server *srv, const struct egs_event *e, int64_t now)
{
	struct egs_obs *ob = srv->obs;
	struct egs_gpr *g = egs_state_gpr(&srv->st, e->object_name);
	if (!g)
		return;
	bool provisioning = !strcmp(e->reason, "Provisioning");
	/* A waiting GPR without an estimate has nothing to record or drop: every create placed inside
	 * a deep queue (its estimate comes with the next run), one lookup of the map saved. */
	if (!provisioning && (g->state == EGS_GPR_PENDING || (g->state == EGS_GPR_QUEUED && !g->est_start)))
		return;
	struct first_est *est = egs_map_get(&ob->first_est, g->id);
	if (provisioning) {
		if (est)
			observe_estimate(ob, (double)(now - est->at));
		else if (g->created_at == now)
			observe_estimate(ob, 0); /* started the moment it was created */
	}
	if (g->state == EGS_GPR_QUEUED && g->est_start && !est && ob->first_est.len < 1000000) {
		est = egs_malloc(sizeof(*est));
		egs_strlcpy(est->id, g->id, sizeof(est->id));
		est->at = g->est_start;
		egs_map_put(&ob->first_est, est->id, est);
	} else if (g->state != EGS_GPR_QUEUED && g->state != EGS_GPR_PENDING && est) {
		egs_map_del(&ob->first_est, est->id);
		free(est);
	}
}

void egs_obs_due(struct egs_server *srv, int64_t now)
{
	if (srv->obs)
		exit_warnings(srv, now, true);
}

void egs_obs_before_commit(struct egs_server *srv, int64_t now)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	for (size_t i = 0; i < srv->st.new_events.len; i++) {
		const struct egs_event *e = srv->st.new_events.items[i];
		if (!strcmp(e->object_kind, "GPR")) {
			track_estimate(srv, e, now);
		} else if (!strcmp(e->reason, "NodeRegistered") && !e->listed) {
			struct egs_node *n = egs_map_get(&srv->st.nodes, e->object_name);
			if (n) {
				n->temp_threshold = ob->cfg.temp_threshold;
				n->power_threshold = ob->cfg.power_threshold;
				egs_state_touch(&srv->st, EGS_KIND_NODE, n);
			}
		}
	}
	egs_outbox_before_commit(srv, now); /* last: every event of the turn is recorded by now */
}

void egs_obs_committed(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	for (size_t i = 0; i < srv->st.new_events.len; i++) {
		const struct egs_event *e = srv->st.new_events.items[i];
		if (!e->listed)
			ob->events_total[strcmp(e->type, "Warning") == 0]++;
		egs_events_broadcast(srv, e);
	}
	egs_outbox_committed(srv); /* the turn's webhook messages, stored with it, to the worker */
}

/* Drops alerts of nodes that no longer exist (deregistered). */
static void forget_gone(struct egs_server *srv)
{
	struct egs_obs *ob = srv->obs;
	struct egs_vec gone = { 0 };
	void *v;
	for (size_t i = 0; egs_map_next(&ob->alerts.active, &i, NULL, &v);)
		if (!egs_map_get(&srv->st.nodes, ((struct egs_alert *)v)->node))
			egs_vec_push(&gone, v);
	for (size_t i = 0; i < gone.len; i++) {
		struct egs_alert *al = gone.items[i];
		egs_map_del(&ob->alerts.active, al->key);
		free(al);
	}
	egs_vec_cleanup(&gone);
}

static void prune(struct egs_server *srv, int64_t now)
{
	struct egs_state *st = &srv->st;
	int64_t below = st->events_len == st->cfg.event_retention ? st->events[st->events_head]->id : 0;
	int64_t deleted = 0;
	if (egs_store_prune_events_below(srv->store, now - srv->obs->cfg.event_ttl_s, below, &deleted) != EGS_OK)
		fprintf(srv->log, "level=warn msg=\"event retention: pruning the store failed\"\n");
	else if (deleted)
		fprintf(srv->log, "level=info msg=\"event retention\" pruned=%lld\n", (long long)deleted);
}

void egs_obs_tick(struct egs_server *srv, int64_t now)
{
	struct egs_obs *ob = srv->obs;
	if (!ob)
		return;
	bool changed = exit_warnings(srv, now, false) > 0;
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		if (!n->last_heartbeat || n->health == EGS_HEALTH_UNSCHEDULABLE ||
		    now - n->last_heartbeat <= srv->st.cfg.heartbeat_timeout_s)
			continue;
		const struct egs_gpr *g = egs_obs_node_gpr(srv, n);
		size_t before = srv->st.new_events.len;
		egs_alerts_check_node(&ob->alerts, &srv->st, n, true, NULL, g ? g->workspace : "", g ? g->id : "", now);
		changed = changed || srv->st.new_events.len != before;
	}
	int64_t wall = egs_mono_us() / 1000000;
	if (wall >= ob->next_prune) {
		ob->next_prune = wall + PRUNE_EVERY_S;
		forget_gone(srv);
		if (!egs_state_has_changes(&srv->st)) {
			prune(srv, now);
			egs_audit_prune(srv, now); /* the audit log's retention (audit.h) */
		}
	}
	if (wall >= ob->next_ping) {
		ob->next_ping = wall + PING_EVERY_S;
		egs_events_ping(srv);
	}
	if (changed)
		egs_server_changed(srv);
}
