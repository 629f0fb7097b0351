/*
 * api.c: libegs's typed calls (include/egs/egs.h): one function per route of the public API, each
 * a thin layer over egs_client_call() that builds the path (query values percent-encoded), sends
 * the borrowed request body and unwraps the member of the answer that callers want.
 *
 * Invariant: on failure every out-parameter is NULL (or an empty string), so callers free
 * unconditionally; the failure's details stay on the client (egs_client_errmsg() and friends).
 */
#include "core/common.h"

#include "client/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define PATH_MAX_LEN 2048

/* A path under construction: "/api/v1/x" then "?k=v&k2=v2" with the values percent-encoded. */
struct path {
	char buf[PATH_MAX_LEN];
	size_t len;
	bool has_query;
	bool overflow;
};

static void path_init(struct path *p, const char *base)
{
	p->len = 0;
	p->has_query = false;
	p->overflow = !egs_strlcpy(p->buf, base, sizeof(p->buf));
	p->len = strlen(p->buf);
}

/* Appends "?name=value" or "&name=value" with value percent-encoded (RFC 3986 unreserved kept). */
static void path_query(struct path *p, const char *name, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t need = strlen(name) + 2;

	if (!value || p->overflow)
		return;
	for (const unsigned char *v = (const unsigned char *)value; *v; v++)
		need += strchr("-._~", *v) || (*v < 0x80 && isalnum(*v)) ? 1 : 3;
	if (p->len + need >= sizeof(p->buf)) {
		p->overflow = true;
		return;
	}
	p->buf[p->len++] = p->has_query ? '&' : '?';
	memcpy(p->buf + p->len, name, strlen(name));
	p->len += strlen(name);
	p->buf[p->len++] = '=';
	for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
		if (strchr("-._~", *v) || (*v < 0x80 && isalnum(*v))) {
			p->buf[p->len++] = (char)*v;
			continue;
		}
		p->buf[p->len++] = '%';
		p->buf[p->len++] = hex[*v >> 4];
		p->buf[p->len++] = hex[*v & 15];
	}
	p->buf[p->len] = '\0';
	p->has_query = true;
}

/*
 * Calls method on path and hands back the answer's member `key` (the whole data when key is NULL)
 * as a new reference in *out (may be NULL: the answer is dropped).  A 2xx answer without that
 * member yields an empty array for list keys, so callers can iterate without checking.
 */
static enum egs_err call_get(struct egs_client *c, const char *method, const struct path *p, json_t *body,
			     const char *key, json_t **out)
{
	json_t *data = NULL, *member;
	enum egs_err err;

	if (out)
		*out = NULL;
	if (p->overflow)
		return EGS_ERR_INVALID; /* a name far longer than any the server accepts */
	err = egs_client_call(c, method, p->buf, body, egs__client_timeout(c), NULL, &data);
	if (err != EGS_OK || !out)
		goto out;
	if (!key) {
		*out = data;
		data = NULL;
		goto out;
	}
	member = json_object_get(data, key);
	*out = json_is_array(member) ? json_incref(member) : json_array();
out:
	json_decref(data);
	return err;
}

static enum egs_err simple(struct egs_client *c, const char *method, const char *route, json_t *body,
			   const char *key, json_t **out)
{
	struct path p;

	path_init(&p, route);
	return call_get(c, method, &p, body, key, out);
}

/* A body {field: value}; the caller frees it. */
static json_t *one_field(const char *field, const char *value)
{
	json_t *o = json_object();
	json_object_set_new(o, field, json_string(value ? value : ""));
	return o;
}

enum egs_err egs_client_inventory(struct egs_client *c, json_t **items)
{
	return simple(c, "GET", "/api/v1/inventory/list", NULL, "items", items);
}

enum egs_err egs_client_inventory_workspace(struct egs_client *c, const char *workspace, json_t **items)
{
	struct path p;

	path_init(&p, "/api/v1/inventory");
	path_query(&p, "sliceName", workspace ? workspace : "");
	return call_get(c, "GET", &p, NULL, "items", items);
}

enum egs_err egs_client_nodes(struct egs_client *c, const char *cluster, json_t **items)
{
	struct path p;

	path_init(&p, "/api/v1/nodes");
	path_query(&p, "clusterName", cluster);
	return call_get(c, "GET", &p, NULL, "items", items);
}

enum egs_err egs_client_gpus(struct egs_client *c, json_t **items)
{
	return simple(c, "GET", "/api/v1/gpus", NULL, "items", items);
}

enum egs_err egs_client_clusters(struct egs_client *c, json_t **items)
{
	return simple(c, "GET", "/api/v1/clusters", NULL, "items", items);
}

enum egs_err egs_client_cluster_register(struct egs_client *c, json_t *spec, json_t **answer)
{
	return simple(c, "POST", "/api/v1/clusters", spec, NULL, answer);
}

enum egs_err egs_client_cluster_update(struct egs_client *c, json_t *spec)
{
	return simple(c, "PUT", "/api/v1/clusters", spec, NULL, NULL);
}

enum egs_err egs_client_workspace_list(struct egs_client *c, json_t **items)
{
	return simple(c, "GET", "/api/v1/slice-workspace/list", NULL, "workspaces", items);
}

enum egs_err egs_client_workspace_get(struct egs_client *c, const char *name, json_t **ws)
{
	struct path p;

	path_init(&p, "/api/v1/slice-workspace");
	path_query(&p, "workspaceName", name ? name : "");
	return call_get(c, "GET", &p, NULL, NULL, ws);
}

enum egs_err egs_client_workspace_create(struct egs_client *c, json_t *spec)
{
	return simple(c, "POST", "/api/v1/slice-workspace", spec, NULL, NULL);
}

enum egs_err egs_client_workspace_update(struct egs_client *c, json_t *changes, json_t **ws)
{
	return simple(c, "PUT", "/api/v1/slice-workspace", changes, NULL, ws);
}

enum egs_err egs_client_workspace_delete(struct egs_client *c, const char *name)
{
	json_t *body = one_field("workspaceName", name);
	enum egs_err err = simple(c, "DELETE", "/api/v1/slice-workspace", body, NULL, NULL);

	json_decref(body);
	return err;
}

enum egs_err egs_client_policy_get(struct egs_client *c, const char *workspace, json_t **policy)
{
	struct path p;

	path_init(&p, "/api/v1/slice-workspace/policy");
	path_query(&p, "workspaceName", workspace ? workspace : "");
	return call_get(c, "GET", &p, NULL, NULL, policy);
}

enum egs_err egs_client_policy_set(struct egs_client *c, json_t *body, json_t **policy)
{
	return simple(c, "PUT", "/api/v1/slice-workspace/policy", body, NULL, policy);
}

enum egs_err egs_client_policy_delete(struct egs_client *c, const char *workspace)
{
	json_t *body = one_field("workspaceName", workspace);
	enum egs_err err = simple(c, "DELETE", "/api/v1/slice-workspace/policy", body, NULL, NULL);

	json_decref(body);
	return err;
}

enum egs_err egs_client_policy_global(struct egs_client *c, json_t **policy)
{
	return simple(c, "GET", "/api/v1/settings/policy", NULL, NULL, policy);
}

#define TEMPLATE_ROUTE(binding) ((binding) ? "/api/v1/gpr-template-binding" : "/api/v1/gpr-template")
#define TEMPLATE_KEY(binding) ((binding) ? "gprTemplateBindingName" : "gprTemplateName")

enum egs_err egs_client_template_get(struct egs_client *c, bool binding, const char *name, json_t **obj)
{
	struct path p;

	path_init(&p, TEMPLATE_ROUTE(binding));
	path_query(&p, TEMPLATE_KEY(binding), name ? name : "");
	return call_get(c, "GET", &p, NULL, NULL, obj);
}

enum egs_err egs_client_template_list(struct egs_client *c, bool binding, json_t **items)
{
	return simple(c, "GET", binding ? "/api/v1/gpr-template-binding/list" : "/api/v1/gpr-template/list", NULL,
		      binding ? "templateBindings" : "items", items);
}

enum egs_err egs_client_template_put(struct egs_client *c, bool binding, bool create, json_t *body, json_t **obj)
{
	return simple(c, create ? "POST" : "PUT", TEMPLATE_ROUTE(binding), body, NULL, obj);
}

enum egs_err egs_client_template_delete(struct egs_client *c, bool binding, const char *name)
{
	json_t *body = one_field(TEMPLATE_KEY(binding), name);
	enum egs_err err = simple(c, "DELETE", TEMPLATE_ROUTE(binding), body, NULL, NULL);

	json_decref(body);
	return err;
}

enum egs_err egs_client_gpr_create(struct egs_client *c, json_t *request, char id[EGS_CLIENT_ID_MAX])
{
	json_t *data = NULL;
	enum egs_err err = simple(c, "POST", "/api/v1/gpr", request, NULL, &data);
	const char *gid = json_string_value(json_object_get(data, "gprId"));

	id[0] = '\0';
	if (err == EGS_OK && (!gid || !egs_strlcpy(id, gid, EGS_CLIENT_ID_MAX)))
		err = EGS_ERR_IO; /* a 2xx without a usable id: not an EGS server */
	json_decref(data);
	return err;
}

enum egs_err egs_client_gpr_update(struct egs_client *c, const char *id, json_t *changes)
{
	json_t *body = changes ? json_deep_copy(changes) : json_object();
	enum egs_err err;

	EGS_ASSERT(body);
	json_object_set_new(body, "gprId", json_string(id ? id : ""));
	err = simple(c, "PUT", "/api/v1/gpr", body, NULL, NULL);
	json_decref(body);
	return err;
}

enum egs_err egs_client_gpr_cancel(struct egs_client *c, const char *id)
{
	json_t *body = one_field("gprId", id);
	enum egs_err err = simple(c, "DELETE", "/api/v1/gpr", body, NULL, NULL);

	json_decref(body);
	return err;
}

enum egs_err egs_client_gpr_release(struct egs_client *c, const char *id)
{
	json_t *body = one_field("gprId", id);
	enum egs_err err;

	json_object_set_new(body, "earlyRelease", json_true());
	err = simple(c, "PUT", "/api/v1/gpr", body, NULL, NULL);
	json_decref(body);
	return err;
}

enum egs_err egs_client_gpr_status(struct egs_client *c, const char *id, json_t **gpr)
{
	struct path p;

	path_init(&p, "/api/v1/gpr");
	path_query(&p, "gprId", id ? id : "");
	return call_get(c, "GET", &p, NULL, NULL, gpr);
}

enum egs_err egs_client_gpr_list(struct egs_client *c, const char *workspace, const char *status, json_t **items)
{
	struct path p;

	path_init(&p, "/api/v1/gpr/list");
	path_query(&p, "sliceName", workspace);
	path_query(&p, "status", status);
	return call_get(c, "GET", &p, NULL, "items", items);
}

enum egs_err egs_client_gpr_waittime(struct egs_client *c, json_t *request, json_t **answer)
{
	return simple(c, "POST", "/api/v1/gpr/waittime", request, NULL, answer);
}

enum egs_err egs_client_queue(struct egs_client *c, json_t **answer)
{
	return simple(c, "GET", "/api/v1/queue", NULL, NULL, answer);
}

enum egs_err egs_client_events(struct egs_client *c, const struct egs_client_event_filter *f, json_t **items)
{
	struct path p;
	char limit[16];

	path_init(&p, "/api/v1/events");
	if (f) {
		path_query(&p, "workspace", f->workspace);
		path_query(&p, "gprId", f->gpr_id);
		path_query(&p, "type", f->type);
		path_query(&p, "since", f->since);
		if (f->limit > 0) {
			snprintf(limit, sizeof(limit), "%d", f->limit);
			path_query(&p, "limit", limit);
		}
	}
	return call_get(c, "GET", &p, NULL, "items", items);
}

enum egs_err egs_client_audit(struct egs_client *c, const struct egs_client_audit_filter *f, json_t **answer)
{
	struct path p;
	char limit[16];

	path_init(&p, "/api/v1/audit");
	if (f) {
		path_query(&p, "since", f->since);
		path_query(&p, "until", f->until);
		path_query(&p, "actor", f->actor);
		path_query(&p, "continue", f->cont);
		if (f->limit > 0) {
			snprintf(limit, sizeof(limit), "%d", f->limit);
			path_query(&p, "limit", limit);
		}
	}
	return call_get(c, "GET", &p, NULL, NULL, answer);
}
