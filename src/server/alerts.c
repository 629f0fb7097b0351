/*
 * alerts.c: threshold alerts with hysteresis; see alerts.h.
 * Invariant: an alert is in `active` from its raise event to its resolve event, so each crossing
 * writes exactly one event each way however many samples stay above or below the threshold.
 */
#include "server/alerts.h"

#include "core/util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define REPEAT_WINDOW_S 600 /* Kubernetes' aggregation window */

static const struct {
	const char *raise, *resolve, *unit;
} kinds[EGS_ALERT_NKINDS] = {
	[EGS_ALERT_GPU_TEMP] = { "GPUTemperatureHigh", "GPUTemperatureNormal", "C" },
	[EGS_ALERT_GPU_POWER] = { "GPUPowerHigh", "GPUPowerNormal", "W" },
	[EGS_ALERT_GPU_UTIL] = { "GPUUtilizationHigh", "GPUUtilizationNormal", "%" },
	[EGS_ALERT_NODE_UNHEALTHY] = { "NodeUnhealthy", "NodeHealthy", "" },
	[EGS_ALERT_NODE_SILENT] = { "NodeNotReporting", "NodeReporting", "s" },
};

void egs_alerts_init(struct egs_alerts *a)
{
	memset(a, 0, sizeof(*a));
	egs_map_init(&a->active);
}

void egs_alerts_cleanup(struct egs_alerts *a)
{
	void *v;
	for (size_t i = 0; egs_map_next(&a->active, &i, NULL, &v);)
		free(v);
	egs_map_cleanup(&a->active);
}

const char *egs_alert_reason(enum egs_alert_kind k)
{
	return (size_t)k < EGS_ALERT_NKINDS ? kinds[k].raise : "Unknown";
}

const char *egs_alert_resolved_reason(enum egs_alert_kind k)
{
	return (size_t)k < EGS_ALERT_NKINDS ? kinds[k].resolve : "Unknown";
}

bool egs_alert_is_alert_reason(const char *reason)
{
	for (size_t k = 0; k < EGS_ALERT_NKINDS; k++)
		if (!strcmp(reason, kinds[k].raise) || !strcmp(reason, kinds[k].resolve))
			return true;
	return false;
}

bool egs_alert_kind_parse(const char *s, enum egs_alert_kind *out)
{
	for (size_t k = 0; k < EGS_ALERT_NKINDS; k++) {
		if (!strcmp(s, kinds[k].raise)) {
			*out = (enum egs_alert_kind)k;
			return true;
		}
	}
	return false;
}

/* ---- the stored mirror (EGS_KIND_ALERT documents) ---- */

static json_t *alert_spec(const struct egs_alert *al)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:f, s:f, s:f, s:I, s:I}", "key", al->key, "kind",
			 kinds[al->kind].raise, "node", al->node, "gpu", al->gpu, "gpuIndex", al->gpu_index,
			 "workspace", al->workspace, "gpr", al->gpr, "value", al->value, "peak", al->peak,
			 "threshold", al->threshold, "since", (json_int_t)al->since, "updated", (json_int_t)al->updated);
}

/* Writes al's document (new or changed) into the turn's changes. */
static void save(struct egs_state *st, const struct egs_alert *al)
{
	json_t *spec = alert_spec(al);
	char *text = spec ? json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(spec);
	if (!text)
		return; /* names are ASCII: cannot happen, and an alert unsaved is only raised again */
	struct egs_doc *d = egs_state_doc(st, EGS_KIND_ALERT, al->doc);
	if (!d) {
		d = egs_calloc(1, sizeof(*d));
		egs_strlcpy(d->name, al->doc, sizeof(d->name));
		d->created_at = al->since;
		EGS_ASSERT(egs_state_add_doc(st, EGS_KIND_ALERT, d) == EGS_OK);
	}
	free(d->spec);
	d->spec = text;
	d->updated_at = al->updated;
	egs_state_touch(st, EGS_KIND_ALERT, d);
}

static void forget(struct egs_state *st, const struct egs_alert *al)
{
	struct egs_doc *d = egs_state_doc(st, EGS_KIND_ALERT, al->doc);
	if (d)
		egs_state_del(st, EGS_KIND_ALERT, d);
}

static void doc_name(const char *key, char out[EGS_NAME_MAX])
{
	unsigned char h[16];
	char hex[33];
	crypto_generichash(h, sizeof(h), (const unsigned char *)key, strlen(key), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, EGS_NAME_MAX, "alert-%s", hex);
}

/* Parses one stored alert; NULL when the document is not one. */
static struct egs_alert *alert_parse(const struct egs_doc *d)
{
	json_t *v = json_loads(d->spec, 0, NULL);
	const char *key, *kind, *node, *gpu, *ws, *gpr;
	json_int_t since, updated;
	struct egs_alert *al = egs_calloc(1, sizeof(*al));
	bool ok = !json_unpack(v, "{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:F, s:F, s:F, s:I, s:I}", "key", &key, "kind",
			       &kind, "node", &node, "gpu", &gpu, "gpuIndex", &al->gpu_index, "workspace", &ws, "gpr",
			       &gpr, "value", &al->value, "peak", &al->peak, "threshold", &al->threshold, "since",
			       &since, "updated", &updated) &&
		  egs_alert_kind_parse(kind, &al->kind) && egs_strlcpy(al->key, key, sizeof(al->key)) &&
		  egs_strlcpy(al->node, node, sizeof(al->node)) && egs_strlcpy(al->gpu, gpu, sizeof(al->gpu)) &&
		  egs_strlcpy(al->workspace, ws, sizeof(al->workspace)) && egs_strlcpy(al->gpr, gpr, sizeof(al->gpr));
	json_decref(v);
	if (!ok) {
		free(al);
		return NULL;
	}
	al->since = since;
	al->updated = updated;
	egs_strlcpy(al->doc, d->name, sizeof(al->doc));
	return al;
}

void egs_alerts_restore(struct egs_alerts *a, struct egs_state *st, FILE *log)
{
	void *v;
	struct egs_vec bad = { 0 };
	for (size_t i = 0; egs_map_next(&a->active, &i, NULL, &v);)
		free(v);
	egs_map_cleanup(&a->active);
	egs_map_init(&a->active);
	for (size_t i = 0; egs_map_next(&st->alerts, &i, NULL, &v);) {
		struct egs_alert *al = alert_parse(v);
		if (al && !egs_map_get(&a->active, al->key)) {
			egs_map_put(&a->active, al->key, al);
			continue;
		}
		free(al);
		egs_vec_push(&bad, v);
	}
	for (size_t i = 0; i < bad.len; i++) {
		struct egs_doc *d = bad.items[i];
		if (log)
			fprintf(log, "level=warn msg=\"stored alert dropped: not a valid alert document\" doc=%s\n", d->name);
		egs_state_del(st, EGS_KIND_ALERT, d);
	}
	egs_vec_cleanup(&bad);
}

/* Describes the alert's subject: "GPU 3 (GPU-..) of node n1 in cluster c1" or "node n1 ...". */
static void subject(const struct egs_alert *al, const struct egs_node *n, char *out, size_t len)
{
	if (al->gpu[0])
		snprintf(out, len, "GPU %d (%s) of node %s in cluster %s", al->gpu_index, al->gpu, n->name, n->cluster);
	else
		snprintf(out, len, "node %s in cluster %s", n->name, n->cluster);
}

static void holder(const struct egs_alert *al, char *out, size_t len)
{
	if (al->gpr[0])
		snprintf(out, len, " (GPR %s of workspace %s)", al->gpr, al->workspace);
	else
		out[0] = '\0';
}

static void raise_alert(struct egs_alerts *a, struct egs_state *st, struct egs_alert *al, const struct egs_node *n,
			const char *detail)
{
	char subj[240], hold[120];
	subject(al, n, subj, sizeof(subj));
	holder(al, hold, sizeof(hold));
	egs_map_put(&a->active, al->key, al);
	save(st, al);
	a->raised[al->kind]++;
	if (al->kind == EGS_ALERT_NODE_UNHEALTHY || al->kind == EGS_ALERT_NODE_SILENT)
		egs_state_event_repeat(st, al->since, REPEAT_WINDOW_S, "Warning", kinds[al->kind].raise, "Node", n->key,
				       al->workspace, "%s %s%s", subj, detail, hold);
	else
		egs_state_event_repeat(st, al->since, REPEAT_WINDOW_S, "Warning", kinds[al->kind].raise, "Node", n->key,
				       al->workspace, "%s is at %.0f %s, above its %.0f %s threshold%s", subj, al->value,
				       kinds[al->kind].unit, al->threshold, kinds[al->kind].unit, hold);
}

static void resolve_alert(struct egs_alerts *a, struct egs_state *st, struct egs_alert *al, const struct egs_node *n,
			  int64_t now)
{
	char subj[240], hold[120];
	subject(al, n, subj, sizeof(subj));
	holder(al, hold, sizeof(hold));
	EGS_ASSERT(egs_map_del(&a->active, al->key) == al);
	forget(st, al);
	if (al->kind == EGS_ALERT_NODE_UNHEALTHY)
		egs_state_event_repeat(st, now, REPEAT_WINDOW_S, "Normal", kinds[al->kind].resolve, "Node", n->key,
				       al->workspace, "%s is Healthy again after %llds%s", subj,
				       (long long)(now - al->since), hold);
	else if (al->kind == EGS_ALERT_NODE_SILENT)
		egs_state_event_repeat(st, now, REPEAT_WINDOW_S, "Normal", kinds[al->kind].resolve, "Node", n->key,
				       al->workspace, "%s is reporting again after %llds of silence%s", subj,
				       (long long)(now - al->since), hold);
	else
		egs_state_event_repeat(st, now, REPEAT_WINDOW_S, "Normal", kinds[al->kind].resolve, "Node", n->key,
				       al->workspace, "%s is back to %.0f %s (threshold %.0f %s, peak %.0f %s)%s", subj,
				       al->value, kinds[al->kind].unit, al->threshold, kinds[al->kind].unit, al->peak,
				       kinds[al->kind].unit, hold);
	free(al);
}

/* One rule for one subject: raise when over, resolve when back (hysteresis lies between). */
static void check(struct egs_alerts *a, struct egs_state *st, enum egs_alert_kind kind, const struct egs_node *n,
		  const struct egs_gpu *g, double value, double threshold, bool over, bool back, const char *ws,
		  const char *gpr, const char *detail, int64_t now)
{
	char key[sizeof(((struct egs_alert *)0)->key)];
	snprintf(key, sizeof(key), "%d|%s|%s", (int)kind, n->key, g ? g->uuid : "");
	struct egs_alert *al = egs_map_get(&a->active, key);
	if (al) {
		al->value = value;
		al->updated = now;
		if (back) {
			resolve_alert(a, st, al, n, now);
		} else if (value > al->peak) {
			al->peak = value;
			/* The stored peak; value and lastUpdated follow the next sample.  A silence's peak grows
			 * every second by definition (it is the silence so far): storing it each tick would
			 * write a row per silent node per second; after a restart the next check sets it. */
			if (kind != EGS_ALERT_NODE_SILENT)
				save(st, al);
		}
		return;
	}
	if (!over)
		return;
	al = egs_calloc(1, sizeof(*al));
	egs_strlcpy(al->key, key, sizeof(al->key));
	doc_name(key, al->doc);
	al->kind = kind;
	egs_strlcpy(al->node, n->key, sizeof(al->node));
	if (g) {
		egs_strlcpy(al->gpu, g->uuid, sizeof(al->gpu));
		al->gpu_index = g->index;
	}
	egs_strlcpy(al->workspace, ws ? ws : "", sizeof(al->workspace));
	egs_strlcpy(al->gpr, gpr ? gpr : "", sizeof(al->gpr));
	al->value = al->peak = value;
	al->threshold = threshold;
	al->since = al->updated = now;
	raise_alert(a, st, al, n, detail);
}

void egs_alerts_check_gpu(struct egs_alerts *a, struct egs_state *st, const struct egs_alert_rules *rules,
			  const struct egs_node *n, const struct egs_gpu *g, const char *ws, const char *gpr,
			  int64_t now)
{
	double t = n->temp_threshold, p = n->power_threshold, u = rules->util_threshold;
	check(a, st, EGS_ALERT_GPU_TEMP, n, g, g->temp_c, t, t > 0 && g->temp_c > t,
	      t <= 0 || g->temp_c <= t - rules->temp_hysteresis, ws, gpr, NULL, now);
	check(a, st, EGS_ALERT_GPU_POWER, n, g, g->power_w, p, p > 0 && g->power_w > p,
	      p <= 0 || g->power_w <= p - rules->power_hysteresis, ws, gpr, NULL, now);
	check(a, st, EGS_ALERT_GPU_UTIL, n, g, g->util_pct, u, u > 0 && g->util_pct >= u,
	      u <= 0 || g->util_pct < u - rules->util_hysteresis, ws, gpr, NULL, now);
}

void egs_alerts_check_node(struct egs_alerts *a, struct egs_state *st, const struct egs_node *n, bool silent,
			   const char *why, const char *ws, const char *gpr, int64_t now)
{
	char detail[320];
	bool unhealthy = n->health == EGS_HEALTH_UNHEALTHY;
	snprintf(detail, sizeof(detail), "is reported %s by its agent%s%.256s", egs_health_name(n->health),
		 why && *why ? ": " : "", why ? why : "");
	egs_utf8_sanitize(detail); /* the cut may fall inside a character */
	check(a, st, EGS_ALERT_NODE_UNHEALTHY, n, NULL, unhealthy, 0, unhealthy, !unhealthy, ws, gpr, detail, now);
	int64_t quiet = n->last_heartbeat ? now - n->last_heartbeat : 0;
	snprintf(detail, sizeof(detail), "has sent no heartbeat for %llds", (long long)quiet);
	check(a, st, EGS_ALERT_NODE_SILENT, n, NULL, (double)quiet, (double)st->cfg.heartbeat_timeout_s, silent,
	      !silent, ws, gpr, detail, now);
}

size_t egs_alerts_count(const struct egs_alerts *a, enum egs_alert_kind k)
{
	if (k == EGS_ALERT_NKINDS)
		return a->active.len;
	size_t n = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&a->active, &i, NULL, &v);)
		n += ((const struct egs_alert *)v)->kind == k;
	return n;
}

static int newest_first(const void *x, const void *y)
{
	const struct egs_alert *a = *(const struct egs_alert *const *)x, *b = *(const struct egs_alert *const *)y;
	if (a->since != b->since)
		return a->since > b->since ? -1 : 1;
	return strcmp(a->key, b->key);
}

void egs_alerts_list(const struct egs_alerts *a, struct egs_vec *out)
{
	out->len = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&a->active, &i, NULL, &v);)
		egs_vec_push(out, v);
	if (out->len)
		qsort(out->items, out->len, sizeof(void *), newest_first);
}

json_t *egs_json_alert(const struct egs_alert *al)
{
	char since[32], updated[32];
	egs_time_format(al->since, since, sizeof(since));
	egs_time_format(al->updated, updated, sizeof(updated));
	const char *slash = strchr(al->node, '/');
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:s, s:s, s:s, s:s, s:o, s:o}", "id", al->key,
			      "reason", kinds[al->kind].raise, "severity", "Warning", "clusterName", al->node,
			      "value", al->value, "peak", al->peak, "threshold", al->threshold, "unit", kinds[al->kind].unit,
			      "since", since, "lastUpdated", updated, "gpuNodeName", slash ? slash + 1 : al->node,
			      "sliceName", al->workspace[0] ? json_string(al->workspace) : json_null(), "gprId",
			      al->gpr[0] ? json_string(al->gpr) : json_null());
	EGS_ASSERT(o);
	json_object_set_new(o, "clusterName", json_stringn(al->node, slash ? (size_t)(slash - al->node) : 0));
	if (al->gpu[0]) {
		json_object_set_new(o, "gpuUuid", json_string(al->gpu));
		json_object_set_new(o, "gpuIndex", json_integer(al->gpu_index));
	}
	return o;
}
