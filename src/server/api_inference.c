/*
 * api_inference.c: the public SDK's inference endpoint routes (inference.h; docs/kubernetes.md,
 * "Inference endpoints").
 *
 *   GET    /api/v1/inference-endpoint/list?workspace=W   {endpoints: [brief]}
 *   GET    /api/v1/inference-endpoint?workspace&endpoint&cluster   {endpoint: {...}}
 *   POST   /api/v1/inference-endpoint   {clusterName, endpointName, workspace, modelSpec|rawModelSpec, gpuSpec}
 *   DELETE /api/v1/inference-endpoint   {endpoint, workspace, cluster}
 *
 * A create is all or nothing: every field is checked and the objects rendered before the GPR is made
 * through the user API's own code (egs_gpr_api_submit(): the same validation, policies and quotas as
 * POST /api/v1/gpr), and the endpoint is stored in the same turn.  Names are unique per workspace.
 * Reads need the workspace in the caller's scope; writes need Admin, or the workspace's Owner.
 */
#include "server/inference.h"
#include "server/template.h"

#include "core/gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URL_MAX 400

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* The endpoint called name in workspace ws: its doc, and *spec a new reference (NULL when none). */
static struct egs_doc *find_endpoint(const struct egs_state *st, const char *ws, const char *name, json_t **spec)
{
	const char *k;
	void *v;

	*spec = NULL;
	for (size_t i = 0; egs_map_next(&st->endpoints, &i, &k, &v);) {
		json_t *s = egs_doc_spec(v);
		if (!strcmp(str_at(s, "workspace"), ws) && !strcmp(str_at(s, "endpointName"), name)) {
			*spec = s;
			return v;
		}
		json_decref(s);
	}
	return NULL;
}

static json_t *brief(const struct egs_state *st, json_t *s, int64_t now)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "endpointName", str_at(s, "endpointName"), "modelName",
			 str_at(s, "modelName"), "status", egs_infer_status(st, s, now), "endpoint", str_at(s, "url"),
			 "clusterName", str_at(s, "cluster"), "namespace", str_at(s, "namespace"));
}

static json_t *gpu_requests(const struct egs_state *st, json_t *s)
{
	const char *gid = str_at(s, "gprId");
	const struct egs_gpr *g = *gid ? egs_state_gpr(st, gid) : NULL;
	json_t *spec = json_object_get(s, "gpuSpec");
	char mem[32] = "";

	if (!*gid)
		return json_array();
	if (g ? g->memory_mib : json_integer_value(json_object_get(spec, "memoryPerGPU")))
		snprintf(mem, sizeof(mem), "%lld", g ? (long long)g->memory_mib
						      : (long long)json_integer_value(json_object_get(spec, "memoryPerGPU")));
	return json_pack("[{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s}]", "gprName", str_at(s, "endpointName"), "gprId",
			 gid, "instanceType", g ? g->instance_type : str_at(spec, "instanceType"), "gpuShape",
			 g ? g->gpu_shape : str_at(spec, "gpuShape"), "numberOfGPUs",
			 g ? (json_int_t)g->gpus_per_node : json_integer_value(json_object_get(spec, "numberOfGPUs")),
			 "numberOfGPUNodes",
			 g ? (json_int_t)g->node_count : json_integer_value(json_object_get(spec, "numberOfGPUNodes")),
			 "memoryPerGPU", mem, "status", g ? egs_gpr_state_name(g->state) : "Released");
}

static json_t *detail(const struct egs_state *st, json_t *s, int64_t now)
{
	json_t *d = brief(st, s, now), *obs = json_object_get(s, "observed");
	const char *url = str_at(s, "url");
	char cmd[URL_MAX + 120];

	bool ready = !strcmp(str_at(d, "status"), "Ready");

	json_object_set_new(d, "predictStatus", json_string(ready ? "Ready" : "NotReady"));
	json_object_set_new(d, "ingressStatus", json_string("NotConfigured"));
	json_object_set_new(d, "tryCommand", json_array());
	if (*url) {
		if (json_is_true(json_object_get(s, "custom")))
			snprintf(cmd, sizeof(cmd), "curl -s %s/", url);
		else
			snprintf(cmd, sizeof(cmd), "curl -s %s/v1/models/%s", url, str_at(s, "endpointName"));
		json_array_append_new(json_object_get(d, "tryCommand"), json_string(cmd));
	}
	json_object_set_new(d, "dnsRecords", json_array());
	json_object_set_new(d, "gpuRequests", gpu_requests(st, s));
	json_object_set_new(d, "message", json_string(str_at(obs, "message")));
	json_object_set_new(d, "readyReplicas", json_integer(json_integer_value(json_object_get(obs, "readyReplicas"))));
	json_object_set_new(d, "replicas", json_integer(json_integer_value(json_object_get(obs, "replicas"))));
	return d;
}

/* The workspace named by query or body field `field` that the caller may read (write); NULL after a reply. */
static struct egs_workspace *workspace_of(struct egs_req *r, const char *name, bool write)
{
	struct egs_workspace *ws;

	if (!name || !*name) {
		egs_reply_invalid(r, "workspace", "workspace is required");
		return NULL;
	}
	if (!egs_find_ws(r, name, &ws))
		return NULL;
	return (write ? egs_can_write_ws(r, ws) : egs_can_read_ws(r, ws)) ? ws : NULL;
}

static void endpoint_list(struct egs_req *r)
{
	const struct egs_workspace *ws;
	json_t *out;
	const char *k;
	void *v;

	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) ||
	    !(ws = workspace_of(r, egs_query(r, "workspace"), false)))
		return;
	out = json_array();
	for (size_t i = 0; egs_map_next(&r->srv->st.endpoints, &i, &k, &v);) {
		json_t *s = egs_doc_spec(v);
		if (!strcmp(str_at(s, "workspace"), ws->name))
			json_array_append_new(out, brief(&r->srv->st, s, egs_now(r->srv)));
		json_decref(s);
	}
	egs_reply_ok(r, json_pack("{s:o}", "endpoints", out));
}

/* The endpoint of (workspace, endpoint, cluster) the caller may read (write), with *spec; NULL after a reply. */
static struct egs_doc *endpoint_of(struct egs_req *r, const char *wsname, const char *name, const char *cluster,
				   bool write, json_t **spec)
{
	const struct egs_workspace *ws = workspace_of(r, wsname, write);
	struct egs_doc *d;

	*spec = NULL;
	if (!ws)
		return NULL;
	if (!name || !*name) {
		egs_reply_invalid(r, "endpoint", "endpoint is required");
		return NULL;
	}
	d = find_endpoint(&r->srv->st, ws->name, name, spec);
	if (!d || (cluster && *cluster && strcmp(str_at(*spec, "cluster"), cluster) != 0)) {
		json_decref(*spec);
		*spec = NULL;
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "ENDPOINT_NOT_FOUND", "endpoint",
			      "inference endpoint %s not found in workspace %s%s%s", name, ws->name,
			      cluster && *cluster ? " on cluster " : "", cluster && *cluster ? cluster : "");
		return NULL;
	}
	return d;
}

static void endpoint_get(struct egs_req *r)
{
	json_t *spec;

	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) ||
	    !endpoint_of(r, egs_query(r, "workspace"), egs_query(r, "endpoint"), egs_query(r, "cluster"), false, &spec))
		return;
	egs_reply_ok(r, json_pack("{s:o}", "endpoint", detail(&r->srv->st, spec, egs_now(r->srv))));
	json_decref(spec);
}

/* Stores spec (taken) as endpoint doc d, new when d is NULL. */
static void store_endpoint(struct egs_req *r, struct egs_doc *d, const char *project, json_t *spec)
{
	char id[EGS_ID_MAX];

	if (d) {
		egs_strlcpy(id, d->name, sizeof(id));
	} else {
		do
			egs_new_id("iep", id);
		while (egs_state_doc(&r->srv->st, EGS_KIND_ENDPOINT, id));
	}
	egs_doc_put(r->srv, EGS_KIND_ENDPOINT, id, project, spec);
	json_decref(spec);
}

static void endpoint_delete(struct egs_req *r)
{
	static const char *const fields[] = { "endpoint", "workspace", "cluster", NULL };
	char ws[EGS_NAME_MAX] = "", name[EGS_NAME_MAX] = "", cluster[EGS_NAME_MAX] = "";
	struct egs_state *st = &r->srv->st;
	json_t *spec;
	struct egs_doc *d;

	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !egs_body_required(r) || !egs_body_only(r, fields) ||
	    !egs_get_str(r, r->body, "workspace", true, ws, sizeof(ws)) ||
	    !egs_get_str(r, r->body, "endpoint", true, name, sizeof(name)) ||
	    !egs_get_str(r, r->body, "cluster", false, cluster, sizeof(cluster)) ||
	    !(d = endpoint_of(r, ws, name, cluster, true, &spec)))
		return;
	struct egs_gpr *g = egs_state_gpr(st, str_at(spec, "gprId"));
	int64_t now = egs_now(r->srv);
	if (g && (g->state == EGS_GPR_PENDING || g->state == EGS_GPR_QUEUED))
		EGS_ASSERT(egs_gpr_cancel(st, g, now) == EGS_OK);
	else if (g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED))
		EGS_ASSERT(egs_gpr_release(st, g, now) == EGS_OK);
	if (json_is_true(json_object_get(spec, "offered"))) { /* the agent removes the objects, then it goes */
		json_object_set_new(spec, "deleting", json_true());
		store_endpoint(r, d, d->project, spec);
	} else {
		json_decref(spec);
		egs_state_del(st, EGS_KIND_ENDPOINT, d);
	}
	egs_reply_ok(r, json_object());
}

/* ---- create ---- */

/* What a create asks for; the json_t pointers are borrowed from r->body, NULL when absent or null. */
struct create {
	char ws[EGS_NAME_MAX], cluster[EGS_NAME_MAX], name[EGS_NAME_MAX];
	const char *ns; /* borrowed from w */
	struct egs_workspace *w;
	json_t *model, *raw, *gpu;
};

static json_t *member(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_null(v) ? NULL : v;
}

/* An RFC 1035 label: the endpoint names a Service. */
static bool endpoint_name_ok(struct egs_req *r, const char *name)
{
	if (!egs_check_name(r, "endpointName", name, true))
		return false;
	if (name[0] < 'a' || name[0] > 'z') {
		egs_reply_invalid(r, "endpointName", "endpointName must start with a letter (it names a Service: RFC 1035)");
		return false;
	}
	return true;
}

/* The workspace's namespace on cluster (borrowed), or NULL. */
static const char *namespace_on(const struct egs_workspace *w, const char *cluster)
{
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (egs_strlist_has(&w->namespaces[i].clusters, cluster))
			return w->namespaces[i].name;
	return NULL;
}

static bool parse_specs(struct egs_req *r, struct create *c)
{
	static const char *const gpu_fields[] = { "gpuShape", "instanceType", "memoryPerGPU", "numberOfGPUNodes",
						  "numberOfGPUs", "exitDuration", "priority", NULL };
	const char *k;
	json_t *v;

	c->model = member(r->body, "modelSpec");
	c->raw = member(r->body, "rawModelSpec");
	c->gpu = member(r->body, "gpuSpec");
	if (c->model && c->raw) {
		egs_reply_invalid(r, "rawModelSpec", "give modelSpec or rawModelSpec, not both");
		return false;
	}
	if (!c->model && !c->raw) {
		egs_reply_invalid(r, "modelSpec", "modelSpec (or rawModelSpec, the model server's own manifests) is required");
		return false;
	}
	if (c->model && !c->gpu) {
		egs_reply_invalid(r, "gpuSpec", "gpuSpec is required with modelSpec (the GPUs the model server runs on)");
		return false;
	}
	json_object_foreach(c->gpu, k, v) {
		size_t i;
		for (i = 0; gpu_fields[i] && strcmp(gpu_fields[i], k) != 0; i++)
			;
		if (!gpu_fields[i]) {
			char field[80];
			snprintf(field, sizeof(field), "gpuSpec.%.60s", k);
			egs_reply_invalid(r, field, "%s is not a field of gpuSpec", field);
			return false;
		}
	}
	return true;
}

static bool parse_create(struct egs_req *r, struct create *c)
{
	static const char *const fields[] = { "clusterName", "endpointName", "workspace", "modelSpec", "gpuSpec",
					      "rawModelSpec", NULL };
	json_t *dup;

	if (!egs_body_required(r) || !egs_body_only(r, fields) ||
	    !egs_get_str(r, r->body, "workspace", true, c->ws, sizeof(c->ws)) ||
	    !(c->w = workspace_of(r, c->ws, true)) ||
	    !egs_get_str(r, r->body, "endpointName", true, c->name, sizeof(c->name)) || !endpoint_name_ok(r, c->name) ||
	    !egs_get_str(r, r->body, "clusterName", true, c->cluster, sizeof(c->cluster)) ||
	    !egs_check_name(r, "clusterName", c->cluster, true))
		return false;
	if (!egs_strlist_has(&c->w->clusters, c->cluster)) {
		egs_reply_invalid(r, "clusterName", "cluster %s is not part of workspace %s", c->cluster, c->ws);
		return false;
	}
	if (!(c->ns = namespace_on(c->w, c->cluster))) {
		egs_reply_invalid(r, "clusterName", "workspace %s has no namespace on cluster %s", c->ws, c->cluster);
		return false;
	}
	if (!parse_specs(r, c))
		return false;
	if (find_endpoint(&r->srv->st, c->ws, c->name, &dup)) {
		json_decref(dup);
		egs_reply_err(r, EGS_ERR_EXISTS, NULL, "endpointName", "inference endpoint %s exists in workspace %s",
			      c->name, c->ws);
		return false;
	}
	return true;
}

static json_t *render(struct egs_req *r, const struct create *c, const char *gpr_id, char *url, size_t urlsz)
{
	struct egs_infer_target t = { c->name, c->ns, gpr_id, (int)json_number_value(json_object_get(c->gpu, "numberOfGPUs")),
				      (int)json_integer_value(json_object_get(c->gpu, "numberOfGPUNodes")) };
	return c->raw ? egs_infer_render_raw(r, &t, json_string_value(c->raw), url, urlsz)
		      : egs_infer_render_standard(r, &t, c->model, url, urlsz);
}

/* The endpoint's GPR through POST /api/v1/gpr's code; NULL after its refusal was replied. */
static struct egs_gpr *make_gpr(struct egs_req *r, const struct create *c)
{
	json_t *body = json_object(), *saved = r->body, *v;
	struct egs_gpr *g;
	const char *k;

	json_object_foreach(c->gpu, k, v)
		if (!json_is_null(v))
			json_object_set(body, k, v);
	json_object_set_new(body, "sliceName", json_string(c->ws));
	json_object_set_new(body, "clusterName", json_string(c->cluster));
	json_object_set_new(body, "gprName", json_string(c->name));
	r->body = body;
	g = egs_gpr_api_submit(r);
	json_decref(r->body);
	r->body = saved;
	return g;
}

static void endpoint_create(struct egs_req *r)
{
	struct create c = { 0 };
	struct egs_gpr *g = NULL;
	char url[URL_MAX];
	json_t *objs, *spec;

	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !parse_create(r, &c))
		return;
	if (!(objs = render(r, &c, "", url, sizeof(url)))) /* every refusal before the GPR exists */
		return;
	json_decref(objs);
	if (c.gpu && !(g = make_gpr(r, &c)))
		return;
	objs = render(r, &c, g ? g->id : "", url, sizeof(url));
	EGS_ASSERT(objs); /* the same input passed above */
	spec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O?, s:b, s:o, s:s, s:b, s:b, s:{s:b, s:b, s:i, s:i, s:s}}",
			 "workspace", c.ws, "cluster", c.cluster, "namespace", c.ns, "endpointName", c.name, "modelName",
			 c.model ? str_at(c.model, "modelName") : "custom", "gprId", g ? g->id : "", "gpuSpec", c.gpu,
			 "custom", c.raw != NULL, "objects", objs, "url", url, "deleting", 0, "offered", 0, "observed",
			 "present", 0, "ready", 0, "readyReplicas", 0, "replicas", 0, "message", "");
	EGS_ASSERT(spec);
	store_endpoint(r, NULL, c.w->project, spec);
	egs_reply_ok(r, json_pack("{s:s}", "endpointName", c.name));
}

void egs_infer_forget_cluster(struct egs_server *srv, const char *ws, const char *cluster)
{
	struct egs_state *st = &srv->st;
	struct egs_vec gone = { 0 };
	void *v;

	for (size_t i = 0; egs_map_next(&st->endpoints, &i, NULL, &v);) {
		json_t *s = egs_doc_spec(v);
		if (!strcmp(str_at(s, "workspace"), ws) && !strcmp(str_at(s, "cluster"), cluster))
			egs_vec_push(&gone, v);
		json_decref(s);
	}
	for (size_t i = 0; i < gone.len; i++) /* not while iterating the map */
		egs_state_del(st, EGS_KIND_ENDPOINT, gone.items[i]);
	egs_vec_cleanup(&gone);
}

void egs_infer_forget_workspace(struct egs_server *srv, const char *ws)
{
	struct egs_state *st = &srv->st;
	struct egs_vec gone = { 0 };
	const char *k;
	void *v;

	for (size_t i = 0; egs_map_next(&st->endpoints, &i, &k, &v);) {
		struct egs_doc *d = v;
		json_t *s = egs_doc_spec(d);
		if (!strcmp(str_at(s, "workspace"), ws)) {
			if (json_is_true(json_object_get(s, "offered")) && !json_is_true(json_object_get(s, "deleting"))) {
				json_object_set_new(s, "deleting", json_true()); /* the agent removes the objects first */
				free(d->spec);
				d->spec = egs_doc_dump(s);
				d->updated_at = egs_now(srv);
				egs_state_touch(st, EGS_KIND_ENDPOINT, d);
			} else if (!json_is_true(json_object_get(s, "offered"))) {
				egs_vec_push(&gone, d);
			}
		}
		json_decref(s);
	}
	for (size_t i = 0; i < gone.len; i++) /* not while iterating the map */
		egs_state_del(st, EGS_KIND_ENDPOINT, gone.items[i]);
	egs_vec_cleanup(&gone);
}

const struct egs_route egs_routes_inference[] = {
	{ EVHTTP_REQ_GET, "/api/v1/inference-endpoint/list", endpoint_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/inference-endpoint", endpoint_get, false },
	{ EVHTTP_REQ_POST, "/api/v1/inference-endpoint", endpoint_create, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/inference-endpoint", endpoint_delete, false },
	{ 0, NULL, NULL, false },
};
