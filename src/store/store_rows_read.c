/*
 * store_rows_read.c: the other half of store_rows.c, for both stores: how a loaded row becomes its
 * object again.  Each store hands its result row over as a struct egs_row_source (SQLite's
 * sqlite3_column_*, libpq's text values); the read functions here take the columns in the order of
 * the kind's column list in egs_rows_kinds, the one table of every kind's table, columns, load
 * order and codecs.  Load trusts nothing: a JSON column that does not parse, an unknown enum name,
 * a value that is not the column's type or a string longer than its field fails the row, naming
 * the column.
 */
#include "store/store_rows.h"

#include "core/aging.h"
#include "core/share.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading columns 0, 1, ... in order; the first failure names its column ---- */

static void r_fail(struct egs_row_reader *r, int col, const char *why)
{
	if (!r->bad) {
		r->bad = r->src->name(r, col);
		r->why = why;
	}
}

static const char *r_text(struct egs_row_reader *r, int col, size_t *len) /* NULL for SQL NULL */
{
	size_t n;
	return r->src->text(r, col, len ? len : &n);
}

static void r_str(struct egs_row_reader *r, char *dst, size_t n)
{
	int col = r->i++;
	const char *s = r_text(r, col, NULL);
	if (!egs_strlcpy(dst, s ? s : "", n))
		r_fail(r, col, "value too long");
}

static char *r_dup(struct egs_row_reader *r) /* caller frees; NULL for SQL NULL */
{
	return egs_strdup(r_text(r, r->i++, NULL));
}

static int64_t r_int(struct egs_row_reader *r)
{
	int col = r->i++;
	int64_t v = 0;
	if (!r->src->int64(r, col, &v))
		r_fail(r, col, "not an integer");
	return v;
}

static double r_real(struct egs_row_reader *r)
{
	int col = r->i++;
	double v = 0;
	if (!r->src->real(r, col, &v))
		r_fail(r, col, "not a number");
	return v;
}

/* Parses a JSON array column; returns it (caller decrefs) or NULL after recording the failure. */
static json_t *r_json_array(struct egs_row_reader *r)
{
	int col = r->i++;
	size_t len;
	const char *s = r_text(r, col, &len);
	json_t *v = s ? json_loadb(s, len, 0, NULL) : NULL;
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

static void r_strlist(struct egs_row_reader *r, struct egs_strlist *l)
{
	json_t *a = r_json_array(r);
	if (a && !strlist_from_json(a, l))
		r_fail(r, r->i - 1, "JSON list holds a non-string");
	json_decref(a);
}

/* Reads a JSON array column into a new array (returned, owned by the caller's object; NULL when
 * the list is empty) of *n slots of size bytes, filling slot i from entry i through fill; the first
 * entry fill refuses fails the row with why (the slots before it stay filled, for the free). */
static void *r_entries(struct egs_row_reader *r, size_t *n, size_t size, bool (*fill)(const json_t *e, void *slot),
		       const char *why)
{
	int col = r->i;
	json_t *a = r_json_array(r), *e;
	char *slots = NULL;
	size_t i;
	if (!a)
		return NULL;
	if (json_array_size(a) > 0) {
		slots = egs_calloc(json_array_size(a), size);
		*n = json_array_size(a);
	}
	json_array_foreach(a, i, e) {
		if (!fill(e, slots + i * size)) {
			r_fail(r, col, why);
			break;
		}
	}
	json_decref(a);
	return slots;
}

/* ---- one entry per object kind ---- */

static void read_project(struct egs_row_reader *r, void *obj)
{
	struct egs_project *p = obj;
	r_str(r, p->name, sizeof(p->name));
	p->created_at = r_int(r);
}

static void read_cluster(struct egs_row_reader *r, void *obj)
{
	struct egs_cluster *c = obj;
	r_str(r, c->name, sizeof(c->name));
	r_str(r, c->project, sizeof(c->project));
	c->api_server = r_dup(r);
	c->ca_data = r_dup(r);
	r_str(r, c->agent_key_id, sizeof(c->agent_key_id));
	c->created_at = r_int(r);
}

static bool gpu_entry(const json_t *e, void *slot)
{
	struct egs_gpu *g = slot;
	const char *uuid;
	int index;
	if (json_unpack((json_t *)e, "{s:s, s:i}", "uuid", &uuid, "index", &index) ||
	    !egs_strlcpy(g->uuid, uuid, sizeof(g->uuid)))
		return false;
	g->index = index;
	return true;
}

static void read_node(struct egs_row_reader *r, void *obj)
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
	size_t n_gpus = 0;
	n->gpus = r_entries(r, &n_gpus, sizeof(*n->gpus), gpu_entry, "malformed GPU entry");
	n->n_gpus = (int)n_gpus;
	r_str(r, n->zone, sizeof(n->zone));
	/* The state keys nodes by cluster/name; a key that disagrees would make two rows one node. */
	snprintf(key, sizeof(key), "%s/%s", n->cluster, n->name);
	if (strcmp(key, n->key) != 0)
		r_fail(r, 0, "key is not cluster/name");
}

static bool namespace_entry(const json_t *e, void *slot)
{
	struct egs_ws_namespace *ns = slot;
	const char *name;
	json_t *clusters;
	return !json_unpack((json_t *)e, "{s:s, s:o}", "name", &name, "clusters", &clusters) &&
	       egs_strlcpy(ns->name, name, sizeof(ns->name)) && strlist_from_json(clusters, &ns->clusters);
}

static bool user_entry(const json_t *e, void *slot)
{
	struct egs_ws_user *u = slot;
	const char *user, *email;
	return !json_unpack((json_t *)e, "{s:s, s:s}", "username", &user, "email", &email) &&
	       egs_strlcpy(u->username, user, sizeof(u->username)) && egs_strlcpy(u->email, email, sizeof(u->email));
}

static void read_workspace(struct egs_row_reader *r, void *obj)
{
	struct egs_workspace *w = obj;
	r_str(r, w->name, sizeof(w->name));
	r_str(r, w->project, sizeof(w->project));
	w->description = r_dup(r);
	r_strlist(r, &w->clusters);
	w->namespaces = r_entries(r, &w->n_namespaces, sizeof(*w->namespaces), namespace_entry,
				  "malformed namespace entry");
	w->users = r_entries(r, &w->n_users, sizeof(*w->users), user_entry, "malformed user entry");
	w->created_at = r_int(r);
	w->webhook_url = r_dup(r);
	w->policy_json = r_dup(r); /* parsed by the server at start (api_policy.c) */
}

static void r_shares(struct egs_row_reader *r, struct egs_gpr *g)
{
	int col = r->i++;
	size_t len;
	const char *s = r_text(r, col, &len);
	if (!s)
		return;
	json_t *v = json_loadb(s, len, 0, NULL), *devices, *c;
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

static void read_gpr(struct egs_row_reader *r, void *obj)
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
	if (r->src->is_null(r, r->i)) { /* never given a fair-share key */
		g->fair = -INFINITY;
		r->i++;
	} else {
		g->fair = r_real(r);
	}
	r_shares(r, g);
	char *held = r_dup(r);
	if (held && !egs_rows_parse_held(held, g))
		r_fail(r, r->i - 1, "not a JSON object {until, ghost, nodes}");
	free(held);
}

static void read_apikey(struct egs_row_reader *r, void *obj)
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
	int col = r->i++;
	const char *why = r->src->bytes(r, col, k->hash, sizeof(k->hash));
	if (why)
		r_fail(r, col, why);
	k->created_at = r_int(r);
	k->expires_at = r_int(r);
}

static void read_doc(struct egs_row_reader *r, void *obj)
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

void egs_rows_read_event(struct egs_row_reader *r, struct egs_event *ev)
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
static void *alloc_template(void) { return egs_calloc(1, sizeof(struct egs_doc)); }
#define alloc_binding alloc_template
#define alloc_kubecred alloc_template
#define alloc_alert alloc_template
#define alloc_outbox alloc_template
#define alloc_gprlink alloc_template
#define alloc_endpoint alloc_template
static void free_project(void *o) { egs_project_free(o); }
static void free_cluster(void *o) { egs_cluster_free(o); }
static void free_node(void *o) { egs_node_free(o); }
static void free_workspace(void *o) { egs_workspace_free(o); }
static void free_gpr(void *o) { egs_gpr_free(o); }
static void free_apikey(void *o) { egs_apikey_free(o); }
static void free_template(void *o) { egs_doc_free(o); }
#define free_binding free_template
#define free_kubecred free_template
#define free_alert free_template
#define free_outbox free_template
#define free_gprlink free_template
#define free_endpoint free_template
static enum egs_err add_project(struct egs_state *st, void *o) { return egs_state_add_project(st, o); }
static enum egs_err add_cluster(struct egs_state *st, void *o) { return egs_state_add_cluster(st, o); }
static enum egs_err add_node(struct egs_state *st, void *o) { return egs_state_add_node(st, o); }
static enum egs_err add_workspace(struct egs_state *st, void *o) { return egs_state_add_workspace(st, o); }
static enum egs_err add_gpr(struct egs_state *st, void *o) { return egs_aging_load_gpr(st, o); }
static enum egs_err add_apikey(struct egs_state *st, void *o) { return egs_state_add_apikey(st, o); }
static enum egs_err add_template(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_TEMPLATE, o); }
static enum egs_err add_binding(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_BINDING, o); }
static enum egs_err add_kubecred(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_KUBECRED, o); }
static enum egs_err add_alert(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ALERT, o); }
static enum egs_err add_outbox(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_OUTBOX, o); }
static enum egs_err add_gprlink(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_GPRLINK, o); }
static enum egs_err add_endpoint(struct egs_state *st, void *o) { return egs_state_add_doc(st, EGS_KIND_ENDPOINT, o); }
static const char *key_project(const void *o) { return ((const struct egs_project *)o)->name; }
static const char *key_cluster(const void *o) { return ((const struct egs_cluster *)o)->name; }
static const char *key_node(const void *o) { return ((const struct egs_node *)o)->key; }
static const char *key_workspace(const void *o) { return ((const struct egs_workspace *)o)->name; }
static const char *key_gpr(const void *o) { return ((const struct egs_gpr *)o)->id; }
static const char *key_apikey(const void *o) { return ((const struct egs_apikey *)o)->id; }
static const char *key_template(const void *o) { return ((const struct egs_doc *)o)->name; }
#define key_binding key_template
#define key_kubecred key_template
#define key_alert key_template
#define key_outbox key_template
#define egs_rows_bind_template egs_rows_bind_doc
#define egs_rows_bind_binding egs_rows_bind_doc
#define egs_rows_bind_kubecred egs_rows_bind_doc
#define egs_rows_bind_alert egs_rows_bind_doc
#define egs_rows_bind_outbox egs_rows_bind_doc
#define read_template read_doc
#define read_binding read_doc
#define read_kubecred read_doc
#define read_alert read_doc
#define read_outbox read_doc
#define key_gprlink key_template
#define egs_rows_bind_gprlink egs_rows_bind_doc
#define read_gprlink read_doc
#define key_endpoint key_template
#define egs_rows_bind_endpoint egs_rows_bind_doc
#define read_endpoint read_doc

#define KIND(k, tbl, cols, order, x)                                                              \
	[k] = { tbl, cols, order, alloc_##x, free_##x, egs_rows_bind_##x, read_##x, add_##x, key_##x }

/* Loaded in this order: GPRs by seq so that st->active is in enqueue order too. */
const struct egs_row_kind egs_rows_kinds[] = {
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
	KIND(EGS_KIND_TEMPLATE, "gpr_templates", "name,project,spec,created_at,updated_at", "name", template),
	KIND(EGS_KIND_BINDING, "gpr_template_bindings", "name,project,spec,created_at,updated_at", "name", binding),
	KIND(EGS_KIND_KUBECRED, "kube_credentials", "name,project,spec,created_at,updated_at", "name", kubecred),
	KIND(EGS_KIND_ALERT, "alerts", "name,project,spec,created_at,updated_at", "name", alert),
	KIND(EGS_KIND_OUTBOX, "webhook_outbox", "name,project,spec,created_at,updated_at", "created_at, name", outbox),
	KIND(EGS_KIND_GPRLINK, "gpr_links", "name,project,spec,created_at,updated_at", "name", gprlink),
	KIND(EGS_KIND_ENDPOINT, "inference_endpoints", "name,project,spec,created_at,updated_at", "name", endpoint),
};

void *egs_rows_read_obj(const struct egs_row_kind *k, struct egs_row_reader *r)
{
	void *obj = k->alloc();
	k->read(r, obj);
	if (!r->bad)
		return obj;
	const char *key = r_text(r, 0, NULL);
	fprintf(stderr, "store: %s row '%s': column %s: %s\n", k->table, key ? key : "", r->bad, r->why);
	k->free(obj);
	return NULL;
}

bool egs_rows_load_obj(const struct egs_row_kind *k, struct egs_row_reader *r, struct egs_state *st)
{
	void *obj = egs_rows_read_obj(k, r);
	if (!obj)
		return false;
	if (k->add(st, obj) == EGS_OK)
		return true;
	const char *key = r_text(r, 0, NULL);
	fprintf(stderr, "store: %s row '%s': duplicate object\n", k->table, key ? key : "");
	k->free(obj);
	return false;
}

bool egs_rows_load_event(struct egs_row_reader *r, struct egs_state *st)
{
	struct egs_event *ev = egs_calloc(1, sizeof(*ev));
	egs_rows_read_event(r, ev);
	if (r->bad) {
		fprintf(stderr, "store: events row %lld: column %s: %s\n", (long long)ev->id, r->bad, r->why);
		egs_event_free(ev);
		return false;
	}
	egs_state_add_event(st, ev);
	return true;
}
