/*
 * api_template.c: GPR templates and template bindings, the routes of the public EGS SDK.
 *
 * A GPR template is an admin-defined request shape: cluster, GPUs per node, nodes, memory per GPU,
 * GPU shape, instance type, duration, priority and the idle/eviction/requeue flags.  A template
 * binding, named after its workspace, says which templates the workspace may use on each of its
 * clusters and which one is the default there.  A GPR created with `templateName` takes the whole
 * shape from the template (a template fixes the shape: the request may add its name only), and only
 * when the workspace's binding lists that template for the template's cluster; the GPR then goes
 * through the same checks as any other, the workspace's policy included, so a template never grants
 * what the policy forbids.
 *
 * Both are stored as struct egs_doc (canonical JSON written here, read only here).  A template's
 * spec holds the GPR request fields it fixes, memory in MiB and durations as "1h0m0s"; a binding's
 * spec is {"clusters": [{"clusterName", "defaultTemplateName", "templates": [..]}], "enableAutoGPR"}.
 * enableAutoGPR is kept and shown; egsd creates no GPR by itself (that needs the Kubernetes backend).
 * Invariants: every template a binding lists exists and is for that cluster (deleting or moving a
 * bound template is refused), and a binding goes when its workspace is deleted.
 */
#include "server/template.h"

#include "core/util.h"

#include <stdio.h>
#include <string.h>

#define MAX_GPUS_PER_NODE 64
#define MAX_NODES 1024

static const char *const template_fields[] = {
	"name", "clusterName", "numberOfGPUs", "numberOfGPUNodes", "memoryPerGpu", "memoryPerGPU", "gpuShape",
	"instanceType", "exitDuration", "priority", "enforceIdleTimeOut", "enableEviction", "requeueOnFailure",
	"idleTimeOutDuration", NULL,
};

/* A duration field: "" when absent or empty, else its canonical text ("1h0m0s"). */
static bool get_duration(struct egs_req *r, const char *field, bool required, char *out, size_t n)
{
	char buf[40];
	int64_t secs;
	const char *why;
	out[0] = '\0';
	if (!egs_get_str(r, r->body, field, required, buf, sizeof(buf)))
		return false;
	if (!buf[0])
		return true;
	if (!egs_duration_parse(buf, &secs, &why)) {
		egs_reply_invalid(r, field, "%s %s", field, why);
		return false;
	}
	egs_duration_format(secs, out, n);
	return true;
}

/* An optional label field (shape, instance type): "" when absent. */
static bool get_label(struct egs_req *r, const char *field, char *out, size_t n)
{
	return egs_get_str(r, r->body, field, false, out, n) && (!out[0] || egs_check_name(r, field, out, false));
}

/* The cluster a template names, registered and in the caller's project; else replies 404. */
static const struct egs_cluster *template_cluster(struct egs_req *r, const char *name)
{
	const struct egs_cluster *c = egs_state_cluster(&r->srv->st, name);
	if (!c || !egs_in_project(r, c->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s is not registered", name);
		return NULL;
	}
	return c;
}

/* Validates a template body (POST and PUT send the whole template).  On success *spec is the new
 * canonical spec (caller owns it), name and project are filled; false = replied. */
static bool parse_template(struct egs_req *r, char name[EGS_NAME_MAX], char project[EGS_NAME_MAX], json_t **spec)
{
	char cluster[EGS_NAME_MAX], shape[EGS_NAME_MAX], itype[EGS_NAME_MAX], exit_d[40], idle_d[40];
	int64_t gpus, nodes, prio, m1 = 0, m2 = 0;
	bool p1, p2, has_prio, enforce, evict, requeue;
	const struct egs_cluster *c;

	*spec = NULL;
	if (!egs_body_required(r) || !egs_body_only(r, template_fields) ||
	    !egs_get_str(r, r->body, "name", true, name, EGS_NAME_MAX) || !egs_check_name(r, "name", name, true) ||
	    !egs_get_str(r, r->body, "clusterName", true, cluster, sizeof(cluster)) ||
	    !egs_check_name(r, "clusterName", cluster, true) ||
	    !egs_get_int(r, r->body, "numberOfGPUs", true, 1, MAX_GPUS_PER_NODE, &gpus, NULL) ||
	    !egs_get_int(r, r->body, "numberOfGPUNodes", true, 1, MAX_NODES, &nodes, NULL) ||
	    !egs_get_int(r, r->body, "memoryPerGpu", false, 0, (int64_t)1 << 30, &m2, &p2) ||
	    !egs_get_int(r, r->body, "memoryPerGPU", false, 0, (int64_t)1 << 30, &m1, &p1) ||
	    !get_label(r, "gpuShape", shape, sizeof(shape)) || !get_label(r, "instanceType", itype, sizeof(itype)) ||
	    !get_duration(r, "exitDuration", true, exit_d, sizeof(exit_d)) ||
	    !egs_get_int(r, r->body, "priority", false, 1, 1000, &prio, &has_prio) ||
	    !egs_get_bool(r, r->body, "enforceIdleTimeOut", &enforce, NULL) ||
	    !egs_get_bool(r, r->body, "enableEviction", &evict, NULL) ||
	    !egs_get_bool(r, r->body, "requeueOnFailure", &requeue, NULL) ||
	    !get_duration(r, "idleTimeOutDuration", false, idle_d, sizeof(idle_d)))
		return false;
	if (p1 && p2 && m1 != m2) {
		egs_reply_invalid(r, "memoryPerGpu", "memoryPerGPU and memoryPerGpu disagree (%lld, %lld)", (long long)m1,
				  (long long)m2);
		return false;
	}
	if (enforce && !idle_d[0]) {
		egs_reply_invalid(r, "idleTimeOutDuration", "idleTimeOutDuration is required when enforceIdleTimeOut is true");
		return false;
	}
	if (!(c = template_cluster(r, cluster)))
		return false;
	egs_strlcpy(project, c->project, EGS_NAME_MAX);
	*spec = json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:I, s:b, s:b, s:b, s:s}", "clusterName", cluster,
			  "numberOfGPUs", (json_int_t)gpus, "numberOfGPUNodes", (json_int_t)nodes, "memoryPerGpu",
			  (json_int_t)egs_memory_to_mib(p2 ? m2 : m1), "gpuShape", shape, "instanceType", itype,
			  "exitDuration", exit_d, "priority", (json_int_t)(has_prio ? prio : 101), "enforceIdleTimeOut",
			  enforce, "enableEviction", evict, "requeueOnFailure", requeue, "idleTimeOutDuration", idle_d);
	EGS_ASSERT(*spec);
	return true;
}

json_t *egs_doc_spec(const struct egs_doc *d)
{
	json_t *j = json_loads(d->spec, 0, NULL);
	EGS_ASSERT(json_is_object(j));
	return j;
}

char *egs_doc_dump(json_t *spec)
{
	char *s = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
	EGS_ASSERT(s);
	return s;
}

struct egs_doc *egs_doc_put(struct egs_server *srv, enum egs_kind kind, const char *name, const char *project,
			    json_t *spec)
{
	struct egs_doc *d = egs_state_doc(&srv->st, kind, name);
	int64_t now = egs_now(srv);
	bool fresh = !d;

	if (fresh) {
		d = egs_calloc(1, sizeof(*d));
		egs_strlcpy(d->name, name, sizeof(d->name));
		egs_strlcpy(d->project, project, sizeof(d->project));
		d->created_at = now;
	}
	free(d->spec);
	d->spec = egs_doc_dump(spec);
	d->updated_at = now;
	if (fresh)
		EGS_ASSERT(egs_state_add_doc(&srv->st, kind, d) == EGS_OK);
	egs_state_touch(&srv->st, kind, d);
	return d;
}

static json_t *template_view(const struct egs_doc *d)
{
	json_t *o = egs_doc_spec(d);
	char created[32], updated[32];
	egs_time_format(d->created_at, created, sizeof(created));
	egs_time_format(d->updated_at, updated, sizeof(updated));
	json_object_set_new(o, "name", json_string(d->name));
	json_object_set_new(o, "projectName", json_string(d->project));
	json_object_set_new(o, "createdAt", json_string(created));
	json_object_set_new(o, "updatedAt", json_string(updated));
	return o;
}

const struct egs_doc *egs_template_bound(struct egs_state *st, const char *name, char cluster[EGS_NAME_MAX])
{
	void *v;
	for (size_t i = 0; egs_map_next(&st->bindings, &i, NULL, &v);) {
		const struct egs_doc *b = v;
		json_t *spec = egs_doc_spec(b), *c, *t;
		size_t k, j;
		bool found = false;
		json_array_foreach(json_object_get(spec, "clusters"), k, c)
		{
			json_array_foreach(json_object_get(c, "templates"), j, t)
				found = found || !strcmp(json_string_value(t), name);
			if (found) {
				if (cluster)
					egs_strlcpy(cluster, json_string_value(json_object_get(c, "clusterName")), EGS_NAME_MAX);
				break;
			}
		}
		json_decref(spec);
		if (found)
			return b;
	}
	return NULL;
}

static void template_create(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	char name[EGS_NAME_MAX], project[EGS_NAME_MAX];
	json_t *spec;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !parse_template(r, name, project, &spec))
		return;
	if (egs_state_doc(st, EGS_KIND_TEMPLATE, name)) {
		json_decref(spec);
		egs_reply_err(r, EGS_ERR_EXISTS, "GPR_TEMPLATE_ALREADY_EXISTS", "name", "GPR template %s already exists", name);
		return;
	}
	struct egs_doc *d = egs_calloc(1, sizeof(*d));
	egs_strlcpy(d->name, name, sizeof(d->name));
	egs_strlcpy(d->project, project, sizeof(d->project));
	d->spec = egs_doc_dump(spec);
	json_decref(spec);
	d->created_at = d->updated_at = egs_now(r->srv);
	EGS_ASSERT(egs_state_add_doc(st, EGS_KIND_TEMPLATE, d) == EGS_OK);
	egs_state_touch(st, EGS_KIND_TEMPLATE, d);
	egs_reply_ok(r, json_pack("{s:s}", "gprTemplateName", name));
}

struct egs_doc *egs_template_find(struct egs_req *r, const char *name, const char *field)
{
	struct egs_doc *d = name && *name ? egs_state_doc(&r->srv->st, EGS_KIND_TEMPLATE, name) : NULL;
	if (!d || !egs_in_project(r, d->project) || r->who.role == EGS_ROLE_AGENT) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_TEMPLATE_NOT_FOUND", field, "GPR template %s not found",
			      name ? name : "");
		return NULL;
	}
	return d;
}

static void template_update(struct egs_req *r)
{
	char name[EGS_NAME_MAX], project[EGS_NAME_MAX];
	json_t *spec;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !parse_template(r, name, project, &spec))
		return;
	struct egs_doc *d = egs_template_find(r, name, "name");
	char bound_on[EGS_NAME_MAX];
	const struct egs_doc *b = d ? egs_template_bound(&r->srv->st, name, bound_on) : NULL;
	if (d && b && strcmp(json_string_value(json_object_get(spec, "clusterName")), bound_on) != 0) {
		egs_reply_err(r, EGS_ERR_CONFLICT, "GPR_TEMPLATE_IN_USE", "clusterName",
			      "GPR template %s is bound to workspace %s on cluster %s: unbind it before moving it", name,
			      b->name, bound_on);
		d = NULL;
	}
	if (!d) {
		json_decref(spec);
		return;
	}
	free(d->spec);
	d->spec = egs_doc_dump(spec);
	json_decref(spec);
	d->updated_at = egs_now(r->srv);
	egs_state_touch(&r->srv->st, EGS_KIND_TEMPLATE, d);
	egs_reply_ok(r, json_pack("{s:s}", "gprTemplateName", name));
}

static void template_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "gprTemplateName", NULL };
	char name[EGS_NAME_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_required(r) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "gprTemplateName", true, name, sizeof(name)))
		return;
	struct egs_doc *d = egs_template_find(r, name, "gprTemplateName");
	if (!d)
		return;
	const struct egs_doc *b = egs_template_bound(&r->srv->st, name, NULL);
	if (b) {
		egs_reply_err(r, EGS_ERR_CONFLICT, "GPR_TEMPLATE_IN_USE", "gprTemplateName",
			      "GPR template %s is bound to workspace %s: remove it from the binding first", name, b->name);
		return;
	}
	egs_state_del(&r->srv->st, EGS_KIND_TEMPLATE, d);
	egs_reply_ok(r, json_pack("{s:s}", "gprTemplateName", name));
}

static void template_get(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	const struct egs_doc *d = egs_template_find(r, egs_query(r, "gprTemplateName"), "gprTemplateName");
	if (d)
		egs_reply_ok(r, template_view(d));
}

static int cmp_doc(const void *a, const void *b)
{
	return strcmp((*(const struct egs_doc *const *)a)->name, (*(const struct egs_doc *const *)b)->name);
}

const struct egs_doc **egs_docs_sorted(struct egs_req *r, struct egs_map *m,
				       bool (*keep)(struct egs_req *r, const struct egs_doc *d), size_t *n)
{
	const struct egs_doc **v = egs_malloc((m->len + 1) * sizeof(*v));
	void *x;
	*n = 0;
	for (size_t i = 0; egs_map_next(m, &i, NULL, &x);)
		if (keep(r, x))
			v[(*n)++] = x;
	qsort(v, *n, sizeof(*v), cmp_doc);
	return v;
}

static bool template_visible(struct egs_req *r, const struct egs_doc *d)
{
	return egs_in_project(r, d->project);
}

static void template_list(struct egs_req *r)
{
	size_t n;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	const struct egs_doc **v = egs_docs_sorted(r, &r->srv->st.templates, template_visible, &n);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(items, template_view(v[i]));
	free(v);
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

/* Is the body's value v for field `key` "unset" (null, "", false, 0) or the template's t by meaning
 * (durations as seconds, memory as MiB)? */
static bool same_or_unset(const char *key, json_t *v, json_t *t)
{
	int64_t a, b;
	const char *why;
	if (json_is_null(v) || json_is_false(v) || (json_is_string(v) && !*json_string_value(v)))
		return true;
	if (json_is_integer(v) && json_integer_value(v) == 0)
		return true;
	if (json_is_string(v) && json_is_string(t) && egs_duration_parse(json_string_value(v), &a, &why) &&
	    egs_duration_parse(json_string_value(t), &b, &why))
		return a == b;
	if (!strcmp(key, "memoryPerGpu") && json_is_integer(v) && json_is_integer(t))
		return egs_memory_to_mib(json_integer_value(v)) == json_integer_value(t);
	return t && json_equal(v, t);
}

/* The binding of workspace ws lists template `name` for `cluster`?  Replies 422 when not. */
static bool template_allowed(struct egs_req *r, const char *ws, const char *name, const char *cluster)
{
	const struct egs_doc *b = egs_state_doc(&r->srv->st, EGS_KIND_BINDING, ws);
	bool ok = false;
	if (b) {
		json_t *spec = egs_doc_spec(b), *c, *t;
		size_t i, j;
		json_array_foreach(json_object_get(spec, "clusters"), i, c)
		{
			if (strcmp(json_string_value(json_object_get(c, "clusterName")), cluster) != 0)
				continue;
			json_array_foreach(json_object_get(c, "templates"), j, t)
				ok = ok || !strcmp(json_string_value(t), name);
		}
		json_decref(spec);
	}
	if (!ok)
		egs_reply_err(r, EGS_ERR_INVALID, "GPR_TEMPLATE_NOT_BOUND", "templateName",
			      "GPR template %s is not bound to workspace %s on cluster %s (see /api/v1/gpr-template-binding)",
			      name, ws, cluster);
	return ok;
}

/* The default template of the workspace named by a body that gives no shape (no numberOfGPUNodes)
 * and no templateName: that of the body's clusterName in the workspace's binding, or the one default
 * when the binding has a single default.  Copies it into name and returns true, else false. */
static bool default_template(struct egs_req *r, char name[EGS_NAME_MAX])
{
	json_t *nodes = json_object_get(r->body, "numberOfGPUNodes"), *c;
	if (nodes && !json_is_null(nodes))
		return false; /* before the other lookups (~190 instructions each): clients send it */
	const char *ws = json_string_value(json_object_get(r->body, "sliceName"));
	const char *cluster = json_string_value(json_object_get(r->body, "clusterName"));
	const struct egs_doc *b = ws ? egs_state_doc(&r->srv->st, EGS_KIND_BINDING, ws) : NULL;
	const struct egs_workspace *w = ws ? egs_state_workspace(&r->srv->st, ws) : NULL;
	int found = 0;
	size_t i;

	if (!b || !w || !egs_in_project(r, w->project))
		return false;
	json_t *spec = egs_doc_spec(b);
	json_array_foreach(json_object_get(spec, "clusters"), i, c)
	{
		const char *def = json_string_value(json_object_get(c, "defaultTemplateName"));
		bool here = cluster && *cluster && !strcmp(json_string_value(json_object_get(c, "clusterName")), cluster);
		if (!def || !*def || (cluster && *cluster && !here))
			continue;
		egs_strlcpy(name, def, EGS_NAME_MAX);
		found++;
	}
	json_decref(spec);
	return found == 1;
}

bool egs_template_apply(struct egs_req *r)
{
	char name[EGS_NAME_MAX], ws[EGS_NAME_MAX], gpr_name[EGS_NAME_MAX], alt[EGS_NAME_MAX];
	if (!json_object_get(r->body, "templateName")) {
		if (!default_template(r, name))
			return true;
		json_object_set_new(r->body, "templateName", json_string(name));
	}
	if (!egs_get_str(r, r->body, "templateName", true, name, sizeof(name)) ||
	    !egs_get_str(r, r->body, "sliceName", true, ws, sizeof(ws)) ||
	    !egs_get_str(r, r->body, "gprName", false, gpr_name, sizeof(gpr_name)) ||
	    !egs_get_str(r, r->body, "requestName", false, alt, sizeof(alt)))
		return false;
	const struct egs_workspace *w = egs_state_workspace(&r->srv->st, ws);
	if (!w || !egs_in_project(r, w->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found: %s", ws);
		return false;
	}
	const struct egs_doc *d = egs_template_find(r, name, "templateName");
	if (!d)
		return false;
	json_t *spec = egs_doc_spec(d);
	const char *key;
	json_t *v;
	json_object_foreach(r->body, key, v)
	{
		if (!strcmp(key, "templateName") || !strcmp(key, "sliceName") || !strcmp(key, "gprName") ||
		    !strcmp(key, "requestName"))
			continue;
		const char *tkey = !strcmp(key, "memoryPerGPU") ? "memoryPerGpu" : key;
		if (!same_or_unset(tkey, v, json_object_get(spec, tkey))) {
			egs_reply_invalid(r, key, "%s is fixed by GPR template %s: leave it out or give the template's value",
					  key, name);
			json_decref(spec);
			return false;
		}
	}
	if (!template_allowed(r, ws, name, json_string_value(json_object_get(spec, "clusterName")))) {
		json_decref(spec);
		return false;
	}
	json_object_set_new(spec, "sliceName", json_string(ws));
	json_object_set_new(spec, "gprName", json_string(gpr_name[0] ? gpr_name : alt[0] ? alt : name));
	json_decref(r->body);
	r->body = spec;
	return true;
}

const struct egs_route egs_routes_template[] = {
	{ EVHTTP_REQ_POST, "/api/v1/gpr-template", template_create, false },
	{ EVHTTP_REQ_PUT, "/api/v1/gpr-template", template_update, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/gpr-template", template_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr-template", template_get, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr-template/list", template_list, false },
	{ 0, NULL, NULL, false },
};
