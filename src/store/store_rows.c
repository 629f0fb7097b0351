/*
 * store_rows.c: the one place that says how each object kind becomes the column values of its row,
 * for both stores (store_sqlite.c and store_pg.c).  Every egs_rows_bind_* lists the fields in the
 * order of the kind's column list and hands each value to a binder that the store implements
 * (SQLite's sqlite3_bind_*, PostgreSQL's text parameters), so both stores write the same columns in
 * the same order with the same encodings: lists and nested objects as compact JSON text, enums by
 * name, an empty list as the literal "[]".  The reverse direction (row to object) is
 * store_rows_read.c's, also shared.
 */
#include "store/store_rows.h"

#include "core/aging.h"
#include "core/fair.h"

#include "core/share.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns a JSON array of l's strings, or NULL when one is not valid UTF-8. */
static json_t *strlist_json(const struct egs_strlist *l)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < l->n; i++) {
		if (json_array_append_new(a, json_string(l->v[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static void b_strlist(const struct egs_row_binder *b, const struct egs_strlist *l)
{
	if (l->n == 0)
		b->text(b->ctx, "[]"); /* the common case, without an allocation */
	else
		b->json(b->ctx, strlist_json(l));
}

void egs_rows_bind_project(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_project *p = obj;
	b->text(b->ctx, p->name);
	b->int64(b->ctx, p->created_at);
}

void egs_rows_bind_cluster(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_cluster *c = obj;
	b->text(b->ctx, c->name);
	b->text(b->ctx, c->project);
	b->text(b->ctx, c->api_server);
	b->text(b->ctx, c->ca_data);
	b->text(b->ctx, c->agent_key_id);
	b->int64(b->ctx, c->created_at);
}

static json_t *gpus_json(const struct egs_node *n)
{
	json_t *a = json_array();
	for (int i = 0; a && i < n->n_gpus; i++) {
		json_t *g = json_pack("{s:s, s:i}", "uuid", n->gpus[i].uuid, "index", n->gpus[i].index);
		if (json_array_append_new(a, g)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void egs_rows_bind_node(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_node *n = obj;
	b->text(b->ctx, n->key);
	b->text(b->ctx, n->cluster);
	b->text(b->ctx, n->name);
	b->text(b->ctx, n->instance_type);
	b->text(b->ctx, n->gpu_shape);
	b->text(b->ctx, n->cloud_provider);
	b->text(b->ctx, n->region);
	b->int64(b->ctx, n->gpu_count);
	b->int64(b->ctx, n->memory_mib);
	b->real(b->ctx, n->temp_threshold);
	b->real(b->ctx, n->power_threshold);
	b->text(b->ctx, egs_health_name(n->health));
	b->text(b->ctx, n->gpr_id);
	b->text(b->ctx, n->attached_gpr);
	b->int64(b->ctx, n->allocated_at);
	if (n->n_gpus == 0)
		b->text(b->ctx, "[]");
	else
		b->json(b->ctx, gpus_json(n));
	b->text(b->ctx, n->zone);
}

static json_t *namespaces_json(const struct egs_workspace *w)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < w->n_namespaces; i++) {
		json_t *ns = json_pack("{s:s, s:o}", "name", w->namespaces[i].name, "clusters",
				       strlist_json(&w->namespaces[i].clusters));
		if (json_array_append_new(a, ns)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *users_json(const struct egs_workspace *w)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < w->n_users; i++) {
		json_t *u = json_pack("{s:s, s:s}", "username", w->users[i].username, "email", w->users[i].email);
		if (json_array_append_new(a, u)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void egs_rows_bind_workspace(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_workspace *w = obj;
	b->text(b->ctx, w->name);
	b->text(b->ctx, w->project);
	b->text(b->ctx, w->description);
	b_strlist(b, &w->clusters);
	b->json(b->ctx, namespaces_json(w));
	b->json(b->ctx, users_json(w));
	b->int64(b->ctx, w->created_at);
	b->text(b->ctx, w->webhook_url);
	b->text(b->ctx, w->policy_json);
}

/* The early release or cancel the planner holds (core/held.h) as JSON {until, ghost, nodes}; NULL
 * when none.  The trial flag held_lifted is never stored: the planner puts every hold back. */
static void b_held(const struct egs_row_binder *b, const struct egs_gpr *g)
{
	if (!g->held_until) {
		b->text(b->ctx, NULL);
		return;
	}
	json_t *nodes = json_array();
	for (size_t i = 0; nodes && i < g->held_nodes.n; i++)
		if (json_array_append_new(nodes, json_string(g->held_nodes.v[i]))) {
			json_decref(nodes);
			nodes = NULL;
		}
	b->json(b->ctx, nodes ? json_pack("{s:I, s:b, s:o}", "until", (json_int_t)g->held_until, "ghost", g->ghost,
					  "nodes", nodes)
			      : NULL);
}

bool egs_rows_parse_held(const char *text, struct egs_gpr *g)
{
	json_t *v = json_loads(text, 0, NULL), *nodes, *e;
	json_int_t until;
	int ghost;
	size_t i;
	bool ok = false;
	if (json_unpack(v, "{s:I, s:b, s:o}", "until", &until, "ghost", &ghost, "nodes", &nodes) || until <= 0 ||
	    !json_is_array(nodes) || json_array_size(nodes) > 4096)
		goto out;
	json_array_foreach(nodes, i, e) {
		if (!json_is_string(e) || json_string_length(e) == 0 || json_string_length(e) >= EGS_KEY_MAX)
			goto out;
		egs_strlist_add(&g->held_nodes, json_string_value(e));
	}
	g->held_until = until;
	g->ghost = ghost;
	ok = true;
out:
	json_decref(v);
	if (!ok)
		egs_strlist_cleanup(&g->held_nodes);
	return ok;
}

/* A shared GPR's request and shares (core/share_gpr.h) as JSON text; NULL for a dedicated GPR. */
static void b_shares(const struct egs_row_binder *b, const struct egs_gpr *g)
{
	if (!g->share_centi) {
		b->text(b->ctx, NULL);
		return;
	}
	json_t *devices = json_object();
	for (int i = 0; devices && i < g->n_shares; i++)
		if (json_object_set_new(devices, g->shares[i].uuid, json_integer(g->shares[i].centi))) {
			json_decref(devices);
			devices = NULL;
		}
	b->json(b->ctx, devices ? json_pack("{s:i, s:o}", "request", g->share_centi, "devices", devices) : NULL);
}

void egs_rows_bind_gpr(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_gpr *g = obj;
	b->text(b->ctx, g->id);
	b->text(b->ctx, g->name);
	b->text(b->ctx, g->workspace);
	b->text(b->ctx, g->cluster);
	b->text(b->ctx, g->instance_type);
	b->text(b->ctx, g->gpu_shape);
	b->text(b->ctx, g->created_by);
	b->int64(b->ctx, g->gpus_per_node);
	b->int64(b->ctx, g->node_count);
	b->int64(b->ctx, g->memory_mib);
	b->int64(b->ctx, g->exit_duration_s);
	b->int64(b->ctx, g->idle_timeout_s);
	b->int64(b->ctx, g->priority);
	b->int64(b->ctx, g->flags);
	b_strlist(b, &g->preferred_clusters);
	b->text(b->ctx, egs_gpr_state_name(g->state));
	b->text(b->ctx, g->failure_reason);
	b->text(b->ctx, g->pending_reason);
	b->int64(b->ctx, g->created_at);
	b->int64(b->ctx, g->start_ts);
	b->int64(b->ctx, g->exit_at);
	b->int64(b->ctx, g->completion_ts);
	b->int64(b->ctx, g->retry_count);
	b->int64(b->ctx, g->delayed_count);
	b->int64(b->ctx, (int64_t)g->seq);
	b_strlist(b, &g->nodes);
	b->int64(b->ctx, g->marks_sent);
	b->text(b->ctx, g->evicted_by);
	if (g->fair == -INFINITY) /* SQLite keeps no infinities */
		b->text(b->ctx, NULL);
	else
		b->real(b->ctx, g->fair);
	b_shares(b, g);
	b_held(b, g);
}

void egs_rows_bind_apikey(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_apikey *k = obj;
	b->text(b->ctx, k->id);
	b->text(b->ctx, k->name);
	b->text(b->ctx, k->user_name);
	b->text(b->ctx, k->description);
	b->text(b->ctx, egs_role_name(k->role));
	b->text(b->ctx, k->project);
	b->text(b->ctx, k->workspace);
	b->text(b->ctx, k->cluster);
	b->blob(b->ctx, k->hash, (int)sizeof(k->hash));
	b->int64(b->ctx, k->created_at);
	b->int64(b->ctx, k->expires_at);
}

/* GPR templates, bindings and kube credentials share one row shape. */
void egs_rows_bind_doc(const struct egs_row_binder *b, const void *obj)
{
	const struct egs_doc *d = obj;
	b->text(b->ctx, d->name);
	b->text(b->ctx, d->project);
	b->text(b->ctx, d->spec);
	b->int64(b->ctx, d->created_at);
	b->int64(b->ctx, d->updated_at);
}

void egs_rows_bind_event(const struct egs_row_binder *b, const struct egs_event *ev)
{
	b->int64(b->ctx, ev->id);
	b->int64(b->ctx, ev->time);
	b->int64(b->ctx, ev->first_time);
	b->int64(b->ctx, ev->count);
	b->text(b->ctx, ev->type);
	b->text(b->ctx, ev->reason);
	b->text(b->ctx, ev->object_kind);
	b->text(b->ctx, ev->object_name);
	b->text(b->ctx, ev->workspace);
	b->text(b->ctx, ev->message ? ev->message : "");
}

void egs_rows_bind_audit(const struct egs_row_binder *b, const struct egs_audit *a)
{
	b->int64(b->ctx, a->id);
	b->int64(b->ctx, a->time);
	b->text(b->ctx, a->key_id);
	b->text(b->ctx, a->key_name);
	b->text(b->ctx, a->role);
	b->text(b->ctx, a->method);
	b->text(b->ctx, a->route);
	b->text(b->ctx, a->target);
	b->int64(b->ctx, a->status);
	b->text(b->ctx, a->error_key);
	b->text(b->ctx, a->peer);
}

int egs_rows_find_sql(const struct egs_gpr_find *f, const char *cols, char ph, char *buf, size_t n,
		      const char *vals[4])
{
	const char *str[4] = { f->id, f->workspace, f->state, f->after_id };
	static const char *const test[4] = { "id =", "workspace =", "state =", "id >" };
	int np = 0;
	size_t at = (size_t)snprintf(buf, n, "SELECT %s FROM gprs WHERE " EGS_ROWS_FINISHED, cols);
	for (int i = 0; i < 4 && at < n; i++) {
		if (!str[i])
			continue;
		vals[np++] = str[i];
		at += (size_t)snprintf(buf + at, n - at, " AND %s %c%d", test[i], ph, np);
	}
	if (f->ended_since && at < n)
		at += (size_t)snprintf(buf + at, n - at, " AND completion_ts >= %lld", (long long)f->ended_since);
	if (at < n)
		at += (size_t)snprintf(buf + at, n - at, " ORDER BY id");
	if (f->limit && at < n)
		at += (size_t)snprintf(buf + at, n - at, " LIMIT %zu", f->limit);
	return at < n ? np : -1;
}

/* A finished row that finished before the cut-off and holds nothing: egs_aging_load_gpr's rule. */
static void aged_cond(const struct egs_state *st, char *buf, size_t n)
{
	snprintf(buf, n, EGS_ROWS_AGEABLE " AND " EGS_ROWS_END " < %lld", (long long)st->aged_before);
}

void egs_rows_load_where(const struct egs_state *st, char *buf, size_t n)
{
	char cond[320];
	buf[0] = '\0';
	if (!st->aged_before)
		return;
	aged_cond(st, cond, sizeof(cond));
	snprintf(buf, n, " WHERE NOT (%s)", cond);
}

void egs_rows_load_kept_sql(const struct egs_state *st, const char *cols, const char *order, char *buf, size_t n)
{
	if (!st->aged_before) {
		snprintf(buf, n, "SELECT %s FROM gprs ORDER BY %s", cols, order);
		return;
	}
	snprintf(buf, n,
		 "SELECT %s FROM gprs WHERE NOT " EGS_ROWS_AGEABLE " UNION ALL SELECT %s FROM gprs WHERE " EGS_ROWS_AGEABLE
		 " AND " EGS_ROWS_END " >= %lld ORDER BY %s",
		 cols, cols, (long long)st->aged_before, order);
}

void egs_rows_aged_sql(const struct egs_state *st, char *buf, size_t n)
{
	char cond[320];
	aged_cond(st, cond, sizeof(cond));
	snprintf(buf, n,
		 "SELECT workspace, state, seq, start_ts, completion_ts, exit_at, gpus_per_node, node_count, shares"
		 " FROM gprs WHERE %s",
		 cond);
}

static bool int_of(const char *s, int64_t *out)
{
	char *end;
	if (!s || !*s)
		return false;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	*out = v;
	return !*end && !errno;
}

bool egs_rows_count_aged(struct egs_state *st, const char *const v[EGS_ROWS_AGED_COLS])
{
	struct egs_gpr g = { 0 };
	int64_t seq, gpn, nc, request = 0;
	if (!v[0] || !egs_strlcpy(g.workspace, v[0], sizeof(g.workspace)) || !v[1] ||
	    !egs_gpr_state_parse(v[1], &g.state) || !int_of(v[2], &seq) || !int_of(v[3], &g.start_ts) ||
	    !int_of(v[4], &g.completion_ts) || !int_of(v[5], &g.exit_at) || !int_of(v[6], &gpn) || !int_of(v[7], &nc))
		return false;
	if (v[8]) { /* a shared GPR: its request in hundredths of a GPU */
		json_t *j = json_loads(v[8], 0, NULL);
		bool ok = !json_unpack(j, "{s:I}", "request", &request) && request > 0;
		json_decref(j);
		if (!ok)
			return false;
	}
	g.seq = (uint64_t)seq;
	g.gpus_per_node = (int)gpn;
	g.node_count = (int)nc;
	g.share_centi = (int)request;
	egs_aging_count(st, &g);
	return true;
}

void egs_rows_aged_sum_sql(const struct egs_state *st, char *buf, size_t n)
{
	char cond[320];
	/* Each term is 2^((end - cut-off) / half-life), never below 2^-900: PostgreSQL fails a float that
	 * underflows, and such a term is nothing next to any GPU time of the last years anyway. */
	int64_t h = st->cfg.fair_half_life_s > 0 ? st->cfg.fair_half_life_s : 1;
	aged_cond(st, cond, sizeof(cond));
	snprintf(buf, n,
		 "SELECT workspace, state, count(*), max(seq), sum(CASE WHEN start_ts > 0 AND e > start_ts AND g > 0"
		 " THEN g * (e - start_ts) / 3600.0 * power(2::float8, greatest((e - %lld)::float8 / %lld, -900))"
		 " ELSE 0 END) FROM (SELECT workspace, state, seq, start_ts,"
		 " CASE WHEN completion_ts <> 0 THEN completion_ts ELSE exit_at END AS e,"
		 " CASE WHEN shares IS NULL THEN (gpus_per_node * node_count)::float8"
		 " ELSE (shares::json->>'request')::float8 / %d * node_count END AS g"
		 " FROM gprs WHERE %s) t GROUP BY workspace, state",
		 (long long)st->aged_before, (long long)h, EGS_SHARE_WHOLE, cond);
}

bool egs_rows_count_aged_sum(struct egs_state *st, const char *const v[EGS_ROWS_AGED_SUM_COLS])
{
	enum egs_gpr_state s;
	int64_t count, seq;
	char *end;
	if (!v[0] || !v[1] || !egs_gpr_state_parse(v[1], &s) || !int_of(v[2], &count) || !int_of(v[3], &seq) ||
	    !v[4] || count < 0)
		return false;
	double sum = strtod(v[4], &end);
	if (*end || !(sum >= 0))
		return false;
	st->aged[s] += (size_t)count;
	if ((uint64_t)seq >= st->next_seq)
		st->next_seq = (uint64_t)seq + 1;
	if (sum > 0 && st->cfg.fair_half_life_s > 0)
		egs_fair_add_key(st, v[0], log2(sum) + (double)st->aged_before / (double)st->cfg.fair_half_life_s);
	return true;
}

void egs_sql_add(struct egs_sqlbuf *q, const char *s, size_t len)
{
	EGS_ASSERT(q->n + len < sizeof(q->b));
	memcpy(q->b + q->n, s, len);
	q->n += len;
	q->b[q->n] = '\0';
}

void egs_sql_str(struct egs_sqlbuf *q, const char *s)
{
	egs_sql_add(q, s, strlen(s));
}

void egs_sql_upsert_tail(struct egs_sqlbuf *q, const char *cols)
{
	size_t keylen = strcspn(cols, ",");
	egs_sql_str(q, " ON CONFLICT(");
	egs_sql_add(q, cols, keylen);
	egs_sql_str(q, ") DO UPDATE SET ");
	for (const char *p = cols + keylen; *p;) {
		p++; /* the comma */
		size_t len = strcspn(p, ",");
		if (p != cols + keylen + 1)
			egs_sql_str(q, ",");
		egs_sql_add(q, p, len);
		egs_sql_str(q, "=excluded.");
		egs_sql_add(q, p, len);
		p += len;
	}
}
