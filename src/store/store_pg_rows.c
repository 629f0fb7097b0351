/*
 * store_pg_rows.c: the PostgreSQL store's row reader: how a loaded row becomes the object again
 * (store_pg_batch.c writes rows, through store_rows.c's binders).  The read functions mirror those
 * of store_sqlite.c column for column (docs/internals/store.md), with values in PostgreSQL's text
 * format.  Load trusts nothing: a
 * JSON column that does not parse, an unknown enum name, a number that is not one or a string
 * longer than its field fails the row, naming the column.
 */
#include "store/store_pg.h"

#include "core/aging.h"
#include "core/share.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

static void r_fail(struct egs_pg_reader *r, int col, const char *why)
{
	if (!r->bad) {
		r->bad = PQfname(r->res, col);
		r->why = why;
	}
}

static const char *r_val(struct egs_pg_reader *r, int col) /* NULL for SQL NULL */
{
	return PQgetisnull(r->res, r->row, col) ? NULL : PQgetvalue(r->res, r->row, col);
}

static void r_str(struct egs_pg_reader *r, char *dst, size_t n)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	if (!egs_strlcpy(dst, s ? s : "", n))
		r_fail(r, col, "value too long");
}

static char *r_dup(struct egs_pg_reader *r) /* caller frees; NULL for SQL NULL */
{
	return egs_strdup(r_val(r, r->i++));
}

static int64_t r_int(struct egs_pg_reader *r)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	char *end;
	errno = 0;
	long long v = s ? strtoll(s, &end, 10) : 0;
	if (!s || errno || *end || end == s)
		r_fail(r, col, "not an integer");
	return v;
}

static double r_real(struct egs_pg_reader *r)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	char *end;
	double v = s ? strtod(s, &end) : 0;
	if (!s || *end || end == s)
		r_fail(r, col, "not a number");
	return v;
}

/* Parses a JSON array column; returns it (caller decrefs) or NULL after recording the failure. */
static json_t *r_json_array(struct egs_pg_reader *r)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	json_t *v = s ? json_loads(s, 0, NULL) : NULL;
	if (!json_is_array(v)) {
		json_decref(v);
		r_fail(r, col, "not a valid JSON array (truncated?)");
		return NULL;
	}
	return v;
}

static bool strlist_from_json(const json_t *a, struct egs_strlist *l)
{
	size_t i;
	json_t *e;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, e) {
		if (!json_is_string(e))
			return false;
		egs_strlist_add(l, json_string_value(e));
	}
	return true;
}

static void r_strlist(struct egs_pg_reader *r, struct egs_strlist *l)
{
	json_t *a = r_json_array(r);
	if (a && !strlist_from_json(a, l))
		r_fail(r, r->i - 1, "JSON list holds a non-string");
	json_decref(a);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads a bytea column (text format: \x followed by hex) of exactly n bytes into dst. */
static void r_bytes(struct egs_pg_reader *r, unsigned char *dst, size_t n)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	if (!s || strncmp(s, "\\x", 2) != 0 || strlen(s + 2) != 2 * n) {
		r_fail(r, col, "hash is not 32 bytes");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 + 2 * i]), lo = hexval(s[3 + 2 * i]);
		if (hi < 0 || lo < 0) {
			r_fail(r, col, "hash is not hex");
			return;
		}
		dst[i] = (unsigned char)(hi << 4 | lo);
	}
}

/* ---- one entry per object kind ---- */

static void read_project(struct egs_pg_reader *r, void *obj)
{
	struct egs_project *p = obj;
	r_str(r, p->name, sizeof(p->name));
	p->created_at = r_int(r);
}

static void read_cluster(struct egs_pg_reader *r, void *obj)
{
	struct egs_cluster *c = obj;
	r_str(r, c->name, sizeof(c->name));
	r_str(r, c->project, sizeof(c->project));
	c->api_server = r_dup(r);
	c->ca_data = r_dup(r);
	r_str(r, c->agent_key_id, sizeof(c->agent_key_id));
	c->created_at = r_int(r);
}

static void r_gpus(struct egs_pg_reader *r, struct egs_node *n)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		n->gpus = egs_calloc(json_array_size(a), sizeof(*n->gpus));
		n->n_gpus = (int)json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *uuid;
		int index;
		if (json_unpack(e, "{s:s, s:i}", "uuid", &uuid, "index", &index) ||
		    !egs_strlcpy(n->gpus[i].uuid, uuid, sizeof(n->gpus[i].uuid))) {
			r_fail(r, col, "malformed GPU entry");
			break;
		}
		n->gpus[i].index = index;
	}
	json_decref(a);
}

static void read_node(struct egs_pg_reader *r, void *obj)
{
	struct egs_node *n = obj;
	char health[32], key[EGS_KEY_MAX];
	r_str(r, n->key, sizeof(n->key));
	r_str(r, n->cluster, sizeof(n->cluster));
	r_str(r, n->name, sizeof(n->name));
	r_str(r, n->instance_type, sizeof(n->instance_type));
	r_str(r, n->gpu_shape, sizeof(n->gpu_shape));
	r_str(r, n->cloud_provider, sizeof(n->cloud_provider));
	r_str(r, n->region, sizeof(n->region));
	n->gpu_count = (int)r_int(r);
	n->memory_mib = r_int(r);
	n->temp_threshold = r_real(r);
	n->power_threshold = r_real(r);
	r_str(r, health, sizeof(health));
	if (!egs_health_parse(health, &n->health))
		r_fail(r, r->i - 1, "unknown health");
	r_str(r, n->gpr_id, sizeof(n->gpr_id));
	r_str(r, n->attached_gpr, sizeof(n->attached_gpr));
	n->allocated_at = r_int(r);
	r_gpus(r, n);
	r_str(r, n->zone, sizeof(n->zone));
	/* The state keys nodes by cluster/name; a key that disagrees would make two rows one node. */
	snprintf(key, sizeof(key), "%s/%s", n->cluster, n->name);
	if (strcmp(key, n->key) != 0)
		r_fail(r, 0, "key is not cluster/name");
}

static void r_namespaces(struct egs_pg_reader *r, struct egs_workspace *w)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		w->namespaces = egs_calloc(json_array_size(a), sizeof(*w->namespaces));
		w->n_namespaces = json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *name;
		json_t *clusters;
		if (json_unpack(e, "{s:s, s:o}", "name", &name, "clusters", &clusters) ||
		    !egs_strlcpy(w->namespaces[i].name, name, sizeof(w->namespaces[i].name)) ||
		    !strlist_from_json(clusters, &w->namespaces[i].clusters)) {
			r_fail(r, col, "malformed namespace entry");
			break;
		}
	}
	json_decref(a);
}

static void r_users(struct egs_pg_reader *r, struct egs_workspace *w)
{
	int col = r->i;
	json_t *a = r_json_array(r);
	size_t i;
	json_t *e;
	if (!a)
		return;
	if (json_array_size(a) > 0) {
		w->users = egs_calloc(json_array_size(a), sizeof(*w->users));
		w->n_users = json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		const char *user, *email;
		if (json_unpack(e, "{s:s, s:s}", "username", &user, "email", &email) ||
		    !egs_strlcpy(w->users[i].username, user, sizeof(w->users[i].username)) ||
		    !egs_strlcpy(w->users[i].email, email, sizeof(w->users[i].email))) {
			r_fail(r, col, "malformed user entry");
			break;
		}
	}
	json_decref(a);
}

static void read_workspace(struct egs_pg_reader *r, void *obj)
{
	struct egs_workspace *w = obj;
	r_str(r, w->name, sizeof(w->name));
	r_str(r, w->project, sizeof(w->project));
	w->description = r_dup(r);
	r_strlist(r, &w->clusters);
	r_namespaces(r, w);
	r_users(r, w);
	w->created_at = r_int(r);
	w->webhook_url = r_dup(r);
	w->policy_json = r_dup(r); /* parsed by the server at start (api_policy.c) */
}

static void r_shares(struct egs_pg_reader *r, struct egs_gpr *g)
{
	int col = r->i++;
	const char *s = r_val(r, col);
	if (!s)
		return;
	json_t *v = json_loads(s, 0, NULL), *devices, *c;
	json_int_t request = 0;
	const char *uuid;
	if (json_unpack(v, "{s:I, s:o}", "request", &request, "devices", &devices) || request < 1 ||
	    request > EGS_SHARE_DEV_MAX * EGS_SHARE_WHOLE || !json_is_object(devices) ||
	    json_object_size(devices) > EGS_SHARE_DEV_MAX) {
		r_fail(r, col, "not a JSON object {request, devices}");
		goto out;
	}
	g->share_centi = (int)request;
	g->shares = egs_calloc(json_object_size(devices) + 1, sizeof(*g->shares));
	json_object_foreach(devices, uuid, c) {
		struct egs_gpu_share *sh = &g->shares[g->n_shares++];
		if (!json_is_integer(c) || json_integer_value(c) < 1 || json_integer_value(c) > EGS_SHARE_WHOLE ||
		    !egs_strlcpy(sh->uuid, uuid, sizeof(sh->uuid))) {
			r_fail(r, col, "a device share is not 1..100 hundredths of a GPU");
			break;
		}
		sh->centi = (int)json_integer_value(c);
	}
out:
	json_decref(v);
}

static void read_gpr(struct egs_pg_reader *r, void *obj)
{
	struct egs_gpr *g = obj;
	char state[32];
	r_str(r, g->id, sizeof(g->id));
	r_str(r, g->name, sizeof(g->name));
	r_str(r, g->workspace, sizeof(g->workspace));
	r_str(r, g->cluster, sizeof(g->cluster));
	r_str(r, g->instance_type, sizeof(g->instance_type));
	r_str(r, g->gpu_shape, sizeof(g->gpu_shape));
	r_str(r, g->created_by, sizeof(g->created_by));
	g->gpus_per_node = (int)r_int(r);
	g->node_count = (int)r_int(r);
	g->memory_mib = r_int(r);
	g->exit_duration_s = r_int(r);
	g->idle_timeout_s = r_int(r);
	g->priority = (int)r_int(r);
	g->flags = (uint32_t)r_int(r);
	r_strlist(r, &g->preferred_clusters);
	r_str(r, state, sizeof(state));
	if (!egs_gpr_state_parse(state, &g->state))
		r_fail(r, r->i - 1, "unknown state");
	g->failure_reason = r_dup(r);
	g->pending_reason = r_dup(r);
	g->created_at = r_int(r);
	g->start_ts = r_int(r);
	g->exit_at = r_int(r);
	g->completion_ts = r_int(r);
	g->retry_count = (int)r_int(r);
	g->delayed_count = (int)r_int(r);
	g->seq = (uint64_t)r_int(r);
	r_strlist(r, &g->nodes);
	g->marks_sent = (unsigned)r_int(r);
	r_str(r, g->evicted_by, sizeof(g->evicted_by));
	if (r_val(r, r->i))
		g->fair = r_real(r);
	else {
		g->fair = -INFINITY;
		r->i++;
	}
	r_shares(r, g);
	char *held = r_dup(r);
	if (held && !egs_rows_parse_held(held, g))
		r_fail(r, r->i - 1, "not a JSON object {until, ghost, nodes}");
	free(held);
}

static void read_apikey(struct egs_pg_reader *r, void *obj)
{
	struct egs_apikey *k = obj;
	char role[32];
	r_str(r, k->id, sizeof(k->id));
	r_str(r, k->name, sizeof(k->name));
	r_str(r, k->user_name, sizeof(k->user_name));
	k->description = r_dup(r);
	r_str(r, role, sizeof(role));
	if (!egs_role_parse(role, &k->role))
		r_fail(r, r->i - 1, "unknown role");
	r_str(r, k->project, sizeof(k->project));
	r_str(r, k->workspace, sizeof(k->workspace));
	r_str(r, k->cluster, sizeof(k->cluster));
	r_bytes(r, k->hash, sizeof(k->hash));
	k->created_at = r_int(r);
	k->expires_at = r_int(r);
}

static void read_doc(struct egs_pg_reader *r, void *obj)
{
	struct egs_doc *d = obj;
	r_str(r, d->name, sizeof(d->name));
	r_str(r, d->project, sizeof(d->project));
	d->spec = r_dup(r);
	if (!d->spec)
		r_fail(r, r->i - 1, "spec is NULL");
	d->created_at = r_int(r);
	d->updated_at = r_int(r);
}

void egs__pg_read_event(struct egs_pg_reader *r, struct egs_event *ev)
{
	ev->id = r_int(r);
	ev->time = r_int(r);
	ev->first_time = r_int(r);
	ev->count = (int)r_int(r);
	r_str(r, ev->type, sizeof(ev->type));
	r_str(r, ev->reason, sizeof(ev->reason));
	r_str(r, ev->object_kind, sizeof(ev->object_kind));
	r_str(r, ev->object_name, sizeof(ev->object_name));
	r_str(r, ev->workspace, sizeof(ev->workspace));
	ev->message = r_dup(r);
	if (!ev->message)
		ev->message = egs_strdup("");
}

/* Thin wrappers so one table of function pointers covers every kind without casts. */
static void *alloc_project(void) { return egs_calloc(1, sizeof(struct egs_project)); }
static void *alloc_cluster(void) { return egs_calloc(1, sizeof(struct egs_cluster)); }
static void *alloc_node(void) { return egs_calloc(1, sizeof(struct egs_node)); }
static void *alloc_workspace(void) { return egs_calloc(1, sizeof(struct egs_workspace)); }
static void *alloc_gpr(void) { return egs_gpr_new(); }
static void *alloc_apikey(void) { return egs_calloc(1, sizeof(struct egs_apikey)); }
static void free_project(void *o) { egs_project_free(o); }
static void free_cluster(void *o) { egs_cluster_free(o); }
static void free_node(void *o) { egs_node_free(o); }
static void free_workspace(void *o) { egs_workspace_free(o); }
static void free_gpr(void *o) { egs_gpr_free(o); }
static void free_apikey(void *o) { egs_apikey_free(o); }
static enum egs_err add_project(struct egs_state *st, void *o) { return egs_state_add_project(st, o); }
static enum egs_err add_cluster(struct egs_state *st, void *o) { return egs_state_add_cluster(st, o); }
static enum egs_err add_node(struct egs_state *st, void *o) { return egs_state_add_node(st, o); }
static enum egs_err add_workspace(struct egs_state *st, void *o) { return egs_state_add_workspace(st, o); }
static enum egs_err add_gpr(struct egs_state *st, void *o) { return egs_aging_load_gpr(st, o); }
static enum egs_err add_apikey(struct egs_state *st, void *o) { return egs_state_add_apikey(st, o); }
static const char *key_project(const void *o) { return ((const struct egs_project *)o)->name; }
static const char *key_cluster(const void *o) { return ((const struct egs_cluster *)o)->name; }
static const char *key_node(const void *o) { return ((const struct egs_node *)o)->key; }
static const char *key_workspace(const void *o) { return ((const struct egs_workspace *)o)->name; }
static const char *key_gpr(const void *o) { return ((const struct egs_gpr *)o)->id; }
static const char *key_apikey(const void *o) { return ((const struct egs_apikey *)o)->id; }
static void *alloc_doc(void) { return egs_calloc(1, sizeof(struct egs_doc)); }
static void free_doc(void *o) { egs_doc_free(o); }
static enum egs_err add_template(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_TEMPLATE, o); }
static enum egs_err add_binding(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_BINDING, o); }
static enum egs_err add_kubecred(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_KUBECRED, o); }
static enum egs_err add_alert(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ALERT, o); }
static enum egs_err add_outbox(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_OUTBOX, o); }
static enum egs_err add_gprlink(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_GPRLINK, o); }
static enum egs_err add_endpoint(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ENDPOINT, o); }
static const char *key_doc(const void *o) { return ((const struct egs_doc *)o)->name; }

#define KIND(k, tbl, cols, order, x)                                                              \
	[k] = { tbl, cols, order, alloc_##x, free_##x, egs_rows_bind_##x, read_##x, add_##x, key_##x }

/* The same tables, columns and load order as egs__sqlite_kinds in store_sqlite_rows.c. */
const struct egs_pg_kind egs__pg_kinds[] = {
	KIND(EGS_KIND_PROJECT, "projects", "name,created_at", "name", project),
	KIND(EGS_KIND_CLUSTER, "clusters", "name,project,api_server,ca_data,agent_key_id,created_at",
	     "name", cluster),
	KIND(EGS_KIND_NODE, "nodes",
	     "key,cluster,name,instance_type,gpu_shape,cloud_provider,region,gpu_count,memory_mib,"
	     "temp_threshold,power_threshold,health,gpr_id,attached_gpr,allocated_at,gpus,zone",
	     "key", node),
	KIND(EGS_KIND_WORKSPACE, "workspaces",
	     "name,project,description,clusters,namespaces,users,created_at,webhook_url,policy", "name",
	     workspace),
	KIND(EGS_KIND_GPR, "gprs",
	     "id,name,workspace,cluster,instance_type,gpu_shape,created_by,gpus_per_node,node_count,"
	     "memory_mib,exit_duration_s,idle_timeout_s,priority,flags,preferred_clusters,state,"
	     "failure_reason,pending_reason,created_at,start_ts,exit_at,completion_ts,retry_count,"
	     "delayed_count,seq,nodes,marks_sent,evicted_by,fair_key,shares,held",
	     "seq, id", gpr),
	KIND(EGS_KIND_APIKEY, "api_keys",
	     "id,name,user_name,description,role,project,workspace,cluster,hash,created_at,expires_at",
	     "id", apikey),
	[EGS_KIND_TEMPLATE] = { "gpr_templates", "name,project,spec,created_at,updated_at", "name", alloc_doc, free_doc,
				egs_rows_bind_doc, read_doc, add_template, key_doc },
	[EGS_KIND_BINDING] = { "gpr_template_bindings", "name,project,spec,created_at,updated_at", "name", alloc_doc,
			       free_doc, egs_rows_bind_doc, read_doc, add_binding, key_doc },
	[EGS_KIND_KUBECRED] = { "kube_credentials", "name,project,spec,created_at,updated_at", "name", alloc_doc,
				free_doc, egs_rows_bind_doc, read_doc, add_kubecred, key_doc },
	[EGS_KIND_ALERT] = { "alerts", "name,project,spec,created_at,updated_at", "name", alloc_doc, free_doc,
			     egs_rows_bind_doc, read_doc, add_alert, key_doc },
	[EGS_KIND_OUTBOX] = { "webhook_outbox", "name,project,spec,created_at,updated_at", "created_at, name", alloc_doc,
			      free_doc, egs_rows_bind_doc, read_doc, add_outbox, key_doc },
	[EGS_KIND_GPRLINK] = { "gpr_links", "name,project,spec,created_at,updated_at", "name", alloc_doc, free_doc,
			       egs_rows_bind_doc, read_doc, add_gprlink, key_doc },
	[EGS_KIND_ENDPOINT] = { "inference_endpoints", "name,project,spec,created_at,updated_at", "name", alloc_doc,
				free_doc, egs_rows_bind_doc, read_doc, add_endpoint, key_doc },
};
const int egs__pg_nkinds = (int)EGS_ARRAY_LEN(egs__pg_kinds);
