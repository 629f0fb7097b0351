/*
 * api_agent_gpr.c: GPRs made for GPUProvisioningRequest custom resources (docs/kubernetes.md, "GPR custom
 * resources").  An egs-agent on Kubernetes watches the CRs in its cluster's slice namespaces and asks egsd,
 * with its agent token, to create, update or end the GPR of each.  egsd does it on the slice's behalf
 * through the user API's own code (validation, templates, policies and quotas: egs_gpr_api_create() and
 * egs_gpr_api_update()), acting as an Owner of the workspace that lists the CR's namespace, and only when
 * that namespace is the workspace's on the agent's own cluster.  So a CR can do what that workspace's
 * Owner could, nothing more, and a bad spec gets the user API's 422 naming the field.
 *
 * The link: a struct egs_doc of kind EGS_KIND_GPRLINK named after the CR's uid, whose spec is
 * {"gprId", "cluster", "namespace", "name", "generation"}.  It makes the create idempotent: a CR whose
 * uid has a link is updated, never created again, whatever the agent remembers (a restart, a re-list).
 * generation is the CR's metadata.generation last applied: an apply of it again changes nothing, so the
 * agent may repeat itself at will.
 *
 * Routes (Agent role; a link is seen and changed only by the agent of its cluster):
 *   POST   /api/v1/agent/gprs  {namespace, name, uid, generation, spec}  create or update: {gprId}
 *   DELETE /api/v1/agent/gprs  {uid}  cancel the GPR if it waits, release it if it runs, forget the link
 *   GET    /api/v1/agent/gprs  {items: [every link of the cluster with its GPR's view and recent events]}
 */
#include "server/server.h"
#include "server/template.h"

#include "core/gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID_MAX 64      /* Kubernetes uids are 36 characters */
#define OBJ_NAME_MAX 254 /* RFC 1123 subdomain */
#define EVENTS_KEPT 5   /* the newest events of a GPR shown in its CR's status */
#define EVENTS_SCAN 4000 /* how far back in the event ring they are looked for */

static bool uid_valid(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-'))
			return false;
	return true;
}

/* A string member of o, or "" (borrowed). */
static const char *str_of(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* The link of CR uid if it belongs to the calling agent's cluster, else NULL. */
static struct egs_doc *find_link(struct egs_req *r, const char *uid, json_t **spec)
{
	struct egs_doc *d = egs_state_doc(&r->srv->st, EGS_KIND_GPRLINK, uid);
	*spec = NULL;
	if (!d)
		return NULL;
	*spec = egs_doc_spec(d);
	if (!json_is_object(*spec) ||
	    strcmp(str_of(*spec, "cluster"), r->who.cluster) != 0) {
		json_decref(*spec);
		*spec = NULL;
		return NULL;
	}
	return d;
}

/* The workspace that lists namespace ns on cluster (borrowed), or NULL. */
static struct egs_workspace *ns_workspace(const struct egs_state *st, const char *ns, const char *cluster)
{
	const char *k;
	void *v;
	for (size_t i = 0; egs_map_next(&st->workspaces, &i, &k, &v);) {
		struct egs_workspace *w = v;
		for (size_t j = 0; j < w->n_namespaces; j++)
			if (!strcmp(w->namespaces[j].name, ns) && egs_strlist_has(&w->namespaces[j].clusters, cluster))
				return w;
	}
	return NULL;
}

/* The fields of an apply; false after replying 422 naming the field. */
struct apply {
	char ns[EGS_NAME_MAX], name[OBJ_NAME_MAX], uid[UID_MAX];
	int64_t generation;
	json_t *spec; /* borrowed from r->body */
};

static bool parse_apply(struct egs_req *r, struct apply *a)
{
	static const char *const fields[] = { "namespace", "name", "uid", "generation", "spec", NULL };
	if (!egs_body_required(r) || !egs_body_only(r, fields) ||
	    !egs_get_str(r, r->body, "namespace", true, a->ns, sizeof(a->ns)) ||
	    !egs_check_name(r, "namespace", a->ns, true) ||
	    !egs_get_str(r, r->body, "name", true, a->name, sizeof(a->name)) ||
	    !egs_get_str(r, r->body, "uid", true, a->uid, sizeof(a->uid)) ||
	    !egs_get_int(r, r->body, "generation", true, 1, (int64_t)1 << 53, &a->generation, NULL))
		return false;
	if (!egs_dns_subdomain_valid(a->name)) {
		egs_reply_invalid(r, "name", "name must be a Kubernetes object name (RFC 1123 subdomain)");
		return false;
	}
	if (!uid_valid(a->uid)) {
		egs_reply_invalid(r, "uid", "uid must be a Kubernetes uid (letters, digits and '-')");
		return false;
	}
	a->spec = json_object_get(r->body, "spec");
	if (!json_is_object(a->spec)) {
		egs_reply_invalid(r, "spec", "spec must be an object (a GPUProvisioningRequest's spec)");
		return false;
	}
	if (json_object_get(a->spec, "sliceName") && !json_is_string(json_object_get(a->spec, "sliceName"))) {
		egs_reply_invalid(r, "sliceName", "sliceName must be a string");
		return false;
	}
	return true;
}

/* The user API called on the agent's request: r acts as an Owner of workspace w with body (taken) until
 * owner_leave() restores it. */
struct owner_ctx {
	struct egs_principal who;
	json_t *body;
};

static void owner_enter(struct egs_req *r, const struct egs_workspace *w, json_t *body, struct owner_ctx *c)
{
	c->who = r->who;
	c->body = r->body;
	r->who.role = EGS_ROLE_OWNER;
	egs_strlcpy(r->who.project, w->project, sizeof(r->who.project));
	egs_strlcpy(r->who.workspace, w->name, sizeof(r->who.workspace));
	r->who.cluster[0] = '\0';
	r->body = body;
}

static void owner_leave(struct egs_req *r, struct owner_ctx *c)
{
	json_decref(r->body); /* the handler may have replaced it (a template's request) */
	r->body = c->body;
	r->who = c->who;
}

/* Stores the link of a (new or changed generation) to gpr_id. */
static void put_link(struct egs_req *r, const struct apply *a, const struct egs_workspace *w, const char *gpr_id)
{
	json_t *spec = json_pack("{s:s, s:s, s:s, s:s, s:I}", "gprId", gpr_id, "cluster", r->who.cluster, "namespace",
				 a->ns, "name", a->name, "generation", (json_int_t)a->generation);
	egs_doc_put(r->srv, EGS_KIND_GPRLINK, a->uid, w->project, spec);
	json_decref(spec);
	egs_server_changed(r->srv); /* the reply may have gone out already (nothing else changed) */
}

static void apply_create(struct egs_req *r, const struct apply *a, const struct egs_workspace *w)
{
	json_t *body = json_deep_copy(a->spec);
	struct owner_ctx c;
	struct egs_gpr *g;

	json_object_set_new(body, "sliceName", json_string(w->name));
	if (!json_object_get(body, "gprName") && !json_object_get(body, "requestName"))
		json_object_set_new(body, "gprName", json_string(a->name));
	owner_enter(r, w, body, &c);
	g = egs_gpr_api_create(r);
	owner_leave(r, &c);
	if (g)
		put_link(r, a, w, g->id);
}

/* A new generation of a linked CR: earlyRelease releases, other fields update the waiting GPR. */
static void apply_update(struct egs_req *r, const struct apply *a, const struct egs_workspace *w, const char *gpr_id)
{
	struct egs_gpr *g = egs_state_gpr(&r->srv->st, gpr_id);
	json_t *body;

	if (json_is_true(json_object_get(a->spec, "earlyRelease"))) {
		if (g && (g->state == EGS_GPR_RELEASING || egs_gpr_state_terminal(g->state))) {
			put_link(r, a, w, gpr_id); /* released already: nothing left to do */
			egs_reply_ok(r, json_pack("{s:s}", "gprId", gpr_id));
			return;
		}
		body = json_pack("{s:s, s:b}", "gprId", gpr_id, "earlyRelease", 1);
	} else {
		body = json_deep_copy(a->spec);
		json_object_del(body, "sliceName");    /* checked against the namespace's workspace above */
		json_object_del(body, "templateName"); /* a template shapes the GPR at its creation only */
		json_object_del(body, "earlyRelease");
		json_object_set_new(body, "gprId", json_string(gpr_id));
	}
	struct owner_ctx c;
	owner_enter(r, w, body, &c);
	egs_gpr_api_update(r);
	owner_leave(r, &c);
	if (r->status == 200)
		put_link(r, a, w, gpr_id);
}

static void agent_gpr_apply(struct egs_req *r)
{
	struct apply a = { 0 };
	json_t *link = NULL;

	if (!egs_require_role(r, EGS_R(AGENT)) || !parse_apply(r, &a))
		return;
	struct egs_workspace *w = ns_workspace(&r->srv->st, a.ns, r->who.cluster);
	if (!w) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "namespace",
			      "namespace %s is not a namespace of any workspace on cluster %s", a.ns, r->who.cluster);
		return;
	}
	const char *slice = json_string_value(json_object_get(a.spec, "sliceName"));
	if (slice && *slice && strcmp(slice, w->name) != 0) {
		egs_reply_invalid(r, "sliceName", "sliceName %s is not the workspace of namespace %s (%s)", slice, a.ns,
				  w->name);
		return;
	}
	struct egs_doc *d = find_link(r, a.uid, &link);
	if (!d && egs_state_doc(&r->srv->st, EGS_KIND_GPRLINK, a.uid)) {
		egs_reply_err(r, EGS_ERR_CONFLICT, NULL, "uid", "uid %s is linked to a GPR of another cluster", a.uid);
		return;
	}
	if (!d) {
		apply_create(r, &a, w);
		return;
	}
	char gpr_id[EGS_ID_MAX];
	egs_strlcpy(gpr_id, str_of(link, "gprId"), sizeof(gpr_id));
	json_int_t have = json_integer_value(json_object_get(link, "generation"));
	json_decref(link);
	if (have >= a.generation) /* applied already: the same answer, nothing changes */
		egs_reply_ok(r, json_pack("{s:s}", "gprId", gpr_id));
	else
		apply_update(r, &a, w, gpr_id);
}

static void agent_gpr_delete(struct egs_req *r)
{
	static const char *const fields[] = { "uid", NULL };
	char uid[UID_MAX];
	json_t *link = NULL;

	if (!egs_require_role(r, EGS_R(AGENT)) || !egs_body_required(r) || !egs_body_only(r, fields) ||
	    !egs_get_str(r, r->body, "uid", true, uid, sizeof(uid)))
		return;
	struct egs_doc *d = find_link(r, uid, &link);
	if (!d) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_LINK_NOT_FOUND", "uid", "no GPR is linked to uid %s", uid);
		return;
	}
	struct egs_state *st = &r->srv->st;
	struct egs_gpr *g = egs_state_gpr(st, str_of(link, "gprId"));
	int64_t now = egs_now(r->srv);
	json_decref(link);
	if (g && (g->state == EGS_GPR_PENDING || g->state == EGS_GPR_QUEUED))
		EGS_ASSERT(egs_gpr_cancel(st, g, now) == EGS_OK);
	else if (g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED))
		EGS_ASSERT(egs_gpr_release(st, g, now) == EGS_OK);
	egs_state_del(st, EGS_KIND_GPRLINK, d);
	egs_reply_ok(r, g ? json_pack("{s:s, s:s}", "gprId", g->id, "provisioningStatus", egs_gpr_state_name(g->state))
			  : json_pack("{s:n, s:n}", "gprId", "provisioningStatus"));
}

/* The newest EVENTS_KEPT events about GPR id, oldest first. */
static json_t *gpr_events(const struct egs_state *st, const char *id)
{
	const struct egs_event *found[EVENTS_KEPT];
	size_t n = 0, cap = st->cfg.event_retention;
	json_t *a = json_array();

	for (size_t i = 0; i < st->events_len && i < EVENTS_SCAN && n < EVENTS_KEPT; i++) {
		const struct egs_event *e = st->events[(st->events_head + st->events_len - 1 - i) % cap];
		if (!strcmp(e->object_kind, "GPR") && !strcmp(e->object_name, id))
			found[n++] = e;
	}
	while (n--) {
		char t[32];
		egs_time_format(found[n]->time, t, sizeof(t));
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "type", found[n]->type, "reason",
						   found[n]->reason, "message", found[n]->message ? found[n]->message : "",
						   "time", t));
	}
	return a;
}

static void agent_gpr_list(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	json_t *items = json_array();
	const char *k;
	void *v;

	if (!egs_require_role(r, EGS_R(AGENT))) {
		json_decref(items);
		return;
	}
	for (size_t i = 0; egs_map_next(&st->gprlinks, &i, &k, &v);) {
		json_t *spec = egs_doc_spec(v);
		const char *cl = json_string_value(json_object_get(spec, "cluster"));
		const char *gid = json_string_value(json_object_get(spec, "gprId"));
		const struct egs_gpr *g = gid ? egs_state_gpr(st, gid) : NULL;
		if (cl && !strcmp(cl, r->who.cluster)) {
			json_object_set_new(spec, "uid", json_string(k));
			json_object_del(spec, "cluster");
			json_object_set_new(spec, "gpr", g ? egs_json_gpr(r->srv, g) : json_null());
			json_object_set_new(spec, "events", g ? gpr_events(st, g->id) : json_array());
			json_array_append(items, spec);
		}
		json_decref(spec);
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

const struct egs_route egs_routes_agent_gpr[] = {
	{ EVHTTP_REQ_POST, "/api/v1/agent/gprs", agent_gpr_apply, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/agent/gprs", agent_gpr_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/agent/gprs", agent_gpr_list, false },
	{ 0, NULL, NULL, false },
};
