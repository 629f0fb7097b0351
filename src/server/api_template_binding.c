/*
 * api_template_binding.c: GPR template bindings (/api/v1/gpr-template-binding), see template.h.
 *
 * A binding is named after its workspace (the public SDK creates one with workspaceName and reads or
 * deletes it by that name).  Its answers carry exactly the keys the public SDK's classes take as
 * keyword arguments: create and update answer {name, namespace, clusters, enableAutoGPR}, get and
 * list items {name, clusters, enableAutoGPR}, and each cluster entry {clusterName,
 * defaultTemplateName, templates, defaultTemplateStatus, templateStatus}.  `namespace` is the
 * project's namespace as public EGS names it ("kubeslice-<project>").
 */
#include "server/template.h"

#include "core/util.h"

#include <stdio.h>
#include <string.h>

#define MAX_CLUSTERS 64
#define MAX_TEMPLATES 64 /* per cluster */

/* The first key of object o not in allowed (NULL-terminated), or NULL. */
static const char *unknown_key(json_t *o, const char *const *allowed)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		bool known = false;
		for (const char *const *a = allowed; *a; a++)
			known = known || !strcmp(*a, key);
		if (!known)
			return key;
	}
	return NULL;
}

/* Validates one entry of `clusters` (index i) of workspace w; appends its canonical form to out. */
static bool parse_cluster(struct egs_req *r, const struct egs_workspace *w, json_t *c, size_t i, json_t *out)
{
	char field[64], cluster[EGS_NAME_MAX], def[EGS_NAME_MAX], tname[EGS_NAME_MAX];
	static const char *const allowed[] = { "clusterName", "defaultTemplateName", "templates", NULL };
	json_t *templates = json_array(), *t;
	size_t j;

	snprintf(field, sizeof(field), "clusters[%zu]", i);
	if (!json_is_object(c)) {
		egs_reply_invalid(r, field, "%s must be an object {clusterName, defaultTemplateName, templates}", field);
		goto fail;
	}
	const char *unknown = unknown_key(c, allowed);
	if (unknown) {
		egs_reply_invalid(r, field, "%s.%s is not a field of a binding's cluster", field, unknown);
		goto fail;
	}
	snprintf(field, sizeof(field), "clusters[%zu].clusterName", i);
	if (!egs_get_str(r, c, "clusterName", true, cluster, sizeof(cluster)))
		goto fail;
	if (!egs_strlist_has(&w->clusters, cluster)) {
		egs_reply_invalid(r, field, "%s: cluster %s is not part of workspace %s", field, cluster, w->name);
		goto fail;
	}
	json_t *list = json_object_get(c, "templates");
	snprintf(field, sizeof(field), "clusters[%zu].templates", i);
	if (list && !json_is_null(list) && (!json_is_array(list) || json_array_size(list) > MAX_TEMPLATES)) {
		egs_reply_invalid(r, field, "%s must be a list of at most %d template names", field, MAX_TEMPLATES);
		goto fail;
	}
	json_array_foreach(list, j, t)
	{
		const struct egs_doc *d = json_is_string(t) ? egs_state_doc(&r->srv->st, EGS_KIND_TEMPLATE, json_string_value(t)) : NULL;
		egs_strlcpy(tname, json_is_string(t) ? json_string_value(t) : "", sizeof(tname));
		if (!d || !egs_in_project(r, d->project)) {
			egs_reply_err(r, EGS_ERR_INVALID, "GPR_TEMPLATE_NOT_FOUND", field, "%s: GPR template %s not found",
				      field, tname);
			goto fail;
		}
		json_t *spec = egs_doc_spec(d);
		bool here = !strcmp(json_string_value(json_object_get(spec, "clusterName")), cluster);
		json_decref(spec);
		if (!here) {
			egs_reply_invalid(r, field, "%s: GPR template %s is for another cluster than %s", field, tname, cluster);
			goto fail;
		}
		bool dup = false;
		json_t *o;
		size_t k;
		json_array_foreach(templates, k, o)
			dup = dup || !strcmp(json_string_value(o), tname);
		if (!dup)
			json_array_append_new(templates, json_string(tname));
	}
	snprintf(field, sizeof(field), "clusters[%zu].defaultTemplateName", i);
	if (!egs_get_str(r, c, "defaultTemplateName", false, def, sizeof(def)))
		goto fail;
	if (def[0]) {
		bool listed = false;
		json_array_foreach(templates, j, t)
			listed = listed || !strcmp(json_string_value(t), def);
		if (!listed) {
			egs_reply_invalid(r, field, "%s: %s must be one of the cluster's templates", field, def);
			goto fail;
		}
	}
	json_array_append_new(out, json_pack("{s:s, s:s, s:o}", "clusterName", cluster, "defaultTemplateName", def,
					     "templates", templates));
	return true;
fail:
	json_decref(templates);
	return false;
}

/* Validates a binding body (POST and PUT send the whole binding).  On success *spec is the
 * canonical spec (caller owns it) and *wp the workspace; false = replied. */
static bool parse_binding(struct egs_req *r, const struct egs_workspace **wp, json_t **spec)
{
	static const char *const allowed[] = { "workspaceName", "clusters", "enableAutoGPR", NULL };
	char ws[EGS_NAME_MAX];
	bool auto_gpr;
	json_t *clusters, *c, *out = NULL;
	size_t i;

	*spec = NULL;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_required(r) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "workspaceName", true, ws, sizeof(ws)) ||
	    !egs_get_bool(r, r->body, "enableAutoGPR", &auto_gpr, NULL))
		return false;
	const struct egs_workspace *w = egs_state_workspace(&r->srv->st, ws);
	if (!w || !egs_in_project(r, w->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "workspaceName", "Slice Workspace Not Found: %s", ws);
		return false;
	}
	clusters = json_object_get(r->body, "clusters");
	if (clusters && !json_is_null(clusters) && (!json_is_array(clusters) || json_array_size(clusters) > MAX_CLUSTERS)) {
		egs_reply_invalid(r, "clusters", "clusters must be a list of at most %d entries", MAX_CLUSTERS);
		return false;
	}
	out = json_array();
	json_array_foreach(clusters, i, c)
	{
		if (!parse_cluster(r, w, c, i, out))
			goto fail;
		const char *name = json_string_value(json_object_get(json_array_get(out, i), "clusterName"));
		for (size_t k = 0; k < i; k++)
			if (!strcmp(json_string_value(json_object_get(json_array_get(out, k), "clusterName")), name)) {
				egs_reply_invalid(r, "clusters", "clusters: cluster %s is listed twice", name);
				goto fail;
			}
	}
	*wp = w;
	*spec = json_pack("{s:o, s:b}", "clusters", out, "enableAutoGPR", auto_gpr);
	return true;
fail:
	json_decref(out);
	return false;
}

/* The view of binding d; with_namespace for the create and update answers. */
static json_t *binding_view(struct egs_state *st, const struct egs_doc *d, bool with_namespace)
{
	json_t *spec = egs_doc_spec(d), *clusters = json_array(), *c, *t;
	size_t i, j;
	json_array_foreach(json_object_get(spec, "clusters"), i, c)
	{
		json_t *status = json_object();
		json_array_foreach(json_object_get(c, "templates"), j, t)
			json_object_set_new(status, json_string_value(t),
					    json_string(egs_state_doc(st, EGS_KIND_TEMPLATE, json_string_value(t)) ? "Ready"
														    : "NotFound"));
		const char *def = json_string_value(json_object_get(c, "defaultTemplateName"));
		json_array_append_new(clusters, json_pack("{s:O, s:s, s:O, s:s, s:o}", "clusterName",
							  json_object_get(c, "clusterName"), "defaultTemplateName", def,
							  "templates", json_object_get(c, "templates"),
							  "defaultTemplateStatus", *def ? "Ready" : "", "templateStatus",
							  status));
	}
	json_t *o = json_pack("{s:s, s:o, s:O}", "name", d->name, "clusters", clusters, "enableAutoGPR",
			      json_object_get(spec, "enableAutoGPR"));
	EGS_ASSERT(o);
	if (with_namespace) {
		char ns[EGS_NAME_MAX + 16];
		snprintf(ns, sizeof(ns), "kubeslice-%s", d->project);
		json_object_set_new(o, "namespace", json_string(ns));
	}
	json_decref(spec);
	return o;
}

static void binding_create(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const struct egs_workspace *w;
	json_t *spec;
	if (!parse_binding(r, &w, &spec))
		return;
	if (egs_state_doc(st, EGS_KIND_BINDING, w->name)) {
		json_decref(spec);
		egs_reply_err(r, EGS_ERR_EXISTS, "GPR_TEMPLATE_BINDING_ALREADY_EXISTS", "workspaceName",
			      "workspace %s has a GPR template binding already: update it", w->name);
		return;
	}
	struct egs_doc *d = egs_calloc(1, sizeof(*d));
	egs_strlcpy(d->name, w->name, sizeof(d->name));
	egs_strlcpy(d->project, w->project, sizeof(d->project));
	d->spec = egs_doc_dump(spec);
	json_decref(spec);
	d->created_at = d->updated_at = egs_now(r->srv);
	EGS_ASSERT(egs_state_add_doc(st, EGS_KIND_BINDING, d) == EGS_OK);
	egs_state_touch(st, EGS_KIND_BINDING, d);
	egs_reply_ok(r, binding_view(st, d, true));
}

static void binding_update(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const struct egs_workspace *w;
	json_t *spec;
	if (!parse_binding(r, &w, &spec))
		return;
	struct egs_doc *d = egs_state_doc(st, EGS_KIND_BINDING, w->name);
	if (!d) {
		json_decref(spec);
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_TEMPLATE_BINDING_NOT_FOUND", "workspaceName",
			      "workspace %s has no GPR template binding", w->name);
		return;
	}
	free(d->spec);
	d->spec = egs_doc_dump(spec);
	json_decref(spec);
	d->updated_at = egs_now(r->srv);
	egs_state_touch(st, EGS_KIND_BINDING, d);
	egs_reply_ok(r, binding_view(st, d, true));
}

/* The binding named `name` the caller may read (write: manage), or NULL after replying. */
static struct egs_doc *find_binding(struct egs_req *r, const char *name, const char *field, bool write)
{
	struct egs_doc *d = name && *name ? egs_state_doc(&r->srv->st, EGS_KIND_BINDING, name) : NULL;
	const struct egs_workspace *w = d ? egs_state_workspace(&r->srv->st, d->name) : NULL;
	if (!d || !w || !egs_in_project(r, w->project) || r->who.role == EGS_ROLE_AGENT) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_TEMPLATE_BINDING_NOT_FOUND", field,
			      "GPR template binding %s not found", name ? name : "");
		return NULL;
	}
	return (write ? egs_can_write_ws(r, w) : egs_can_read_ws(r, w)) ? d : NULL;
}

static void binding_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "gprTemplateBindingName", NULL };
	char name[EGS_NAME_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_required(r) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "gprTemplateBindingName", true, name, sizeof(name)))
		return;
	struct egs_doc *d = find_binding(r, name, "gprTemplateBindingName", true);
	if (!d)
		return;
	egs_state_del(&r->srv->st, EGS_KIND_BINDING, d);
	egs_reply_ok(r, json_pack("{s:s}", "gprTemplateBindingName", name));
}

static void binding_get(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	const struct egs_doc *d = find_binding(r, egs_query(r, "gprTemplateBindingName"), "gprTemplateBindingName", false);
	if (d)
		egs_reply_ok(r, binding_view(&r->srv->st, d, false));
}

/* Bindings of the workspaces in the caller's scope. */
static bool binding_visible(struct egs_req *r, const struct egs_doc *d)
{
	const struct egs_workspace *w = egs_state_workspace(&r->srv->st, d->name);
	return w && egs_in_project(r, w->project) &&
	       (r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0] || !strcmp(r->who.workspace, w->name));
}

static void binding_list(struct egs_req *r)
{
	size_t n;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	const struct egs_doc **v = egs_docs_sorted(r, &r->srv->st.bindings, binding_visible, &n);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(items, binding_view(&r->srv->st, v[i], false));
	free(v);
	egs_reply_ok(r, json_pack("{s:o}", "templateBindings", items));
}

void egs_template_forget_workspace(struct egs_server *srv, const char *ws)
{
	struct egs_doc *d = egs_state_doc(&srv->st, EGS_KIND_BINDING, ws);
	if (d)
		egs_state_del(&srv->st, EGS_KIND_BINDING, d);
}

const struct egs_route egs_routes_template_binding[] = {
	{ EVHTTP_REQ_POST, "/api/v1/gpr-template-binding", binding_create, false },
	{ EVHTTP_REQ_PUT, "/api/v1/gpr-template-binding", binding_update, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/gpr-template-binding", binding_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr-template-binding", binding_get, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr-template-binding/list", binding_list, false },
	{ 0, NULL, NULL, false },
};
