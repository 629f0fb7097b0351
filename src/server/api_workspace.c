/*
 * api_workspace.c: slice workspaces: create, delete, list, update (admins).  Their kubeconfigs are
 * kubecred.c's.
 */
#include "server/server.h"
#include "server/inference.h"
#include "server/kubecred.h"
#include "server/kubeslice.h"
#include "server/template.h"

#include "core/gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 64

bool egs_find_ws(struct egs_req *r, const char *name, struct egs_workspace **out)
{
	*out = egs_state_workspace(&r->srv->st, name);
	if (!*out || r->who.role == EGS_ROLE_AGENT || !egs_in_project(r, (*out)->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "workspaceName", "Slice Workspace Not Found: %s",
			      name);
		return false;
	}
	return true;
}

static bool check_clusters(struct egs_req *r, const char *field, const struct egs_strlist *l, const char *project)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct egs_cluster *c = egs_state_cluster(&r->srv->st, l->v[i]);
		if (!c || strcmp(c->project, project) != 0) {
			egs_reply_err(r, EGS_ERR_INVALID, "CLUSTER_NOT_FOUND", field,
				      "%s: cluster %s is not registered in project %s", field, l->v[i], project);
			return false;
		}
	}
	return true;
}

/* Namespaces a slice may not claim: the cluster's own (Kubernetes reserves the kube- prefix), the
 * default namespace every unscoped kubectl lands in, and the one EGS itself is installed in
 * (deploy/kubernetes).  The agent labels and RBACs a slice's namespaces and deletes them with the
 * workspace, so handing it one of these would break the cluster or give a user the agent's secrets. */
static bool ns_reserved(const char *ns)
{
	return strncmp(ns, "kube-", 5) == 0 || strcmp(ns, "default") == 0 || strcmp(ns, "egs-system") == 0;
}

/* The workspace (other than self, borrowed name or NULL) that holds namespace ns on cluster, or NULL.
 * A namespace carries one kubeslice.io/slice label, so two slices may never share one on a cluster. */
static const struct egs_workspace *ns_owner(struct egs_server *srv, const char *self, const char *ns,
					    const char *cluster)
{
	void *v;
	for (size_t i = 0; egs_map_next(&srv->st.workspaces, &i, NULL, &v);) {
		const struct egs_workspace *o = v;
		if (self && strcmp(o->name, self) == 0)
			continue;
		for (size_t j = 0; j < o->n_namespaces; j++)
			if (strcmp(o->namespaces[j].name, ns) == 0 && egs_strlist_has(&o->namespaces[j].clusters, cluster))
				return o;
	}
	return NULL;
}

/* Checks that namespace ns may join workspace self (NULL at create) on each of the clusters; replies
 * 422 (reserved) or 409 NAMESPACE_IN_USE naming field and returns false when not. */
static bool check_namespace(struct egs_req *r, const char *field, const char *self, const char *ns,
			    const struct egs_strlist *clusters)
{
	if (ns_reserved(ns)) {
		egs_reply_invalid(r, field, "%s: namespace %s is reserved (kube-*, default and egs-system belong to the "
				  "cluster and to EGS)", field, ns);
		return false;
	}
	for (size_t i = 0; i < clusters->n; i++) {
		const struct egs_workspace *o = ns_owner(r->srv, self, ns, clusters->v[i]);
		if (o) {
			egs_reply_err(r, EGS_ERR_CONFLICT, "NAMESPACE_IN_USE", field,
				      "%s: namespace %s on cluster %s belongs to workspace %s", field, ns, clusters->v[i],
				      o->name);
			return false;
		}
	}
	return true;
}

static void add_namespace(struct egs_workspace *w, const char *ns)
{
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (strcmp(w->namespaces[i].name, ns) == 0)
			return;
	w->namespaces = egs_realloc(w->namespaces, (w->n_namespaces + 1) * sizeof(*w->namespaces));
	struct egs_ws_namespace *n = &w->namespaces[w->n_namespaces++];
	memset(n, 0, sizeof(*n));
	egs_strlcpy(n->name, ns, sizeof(n->name));
	egs_strlist_copy(&n->clusters, &w->clusters);
}

static bool check_user(struct egs_req *r, const char *user, const char *email)
{
	if (!egs_check_text(r, "username", user) || !egs_check_text(r, "email", email))
		return false;
	if (*email && (!strchr(email, '@') || strchr(email, ' '))) {
		egs_reply_invalid(r, "email", "email must look like name@example.com");
		return false;
	}
	return true;
}

static void add_user(struct egs_workspace *w, const char *user, const char *email)
{
	for (size_t i = 0; i < w->n_users; i++)
		if (strcmp(w->users[i].username, user) == 0)
			return;
	w->users = egs_realloc(w->users, (w->n_users + 1) * sizeof(*w->users));
	struct egs_ws_user *u = &w->users[w->n_users++];
	egs_strlcpy(u->username, user, sizeof(u->username));
	egs_strlcpy(u->email, email, sizeof(u->email));
}

static void ws_create(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", "clusters", "namespaces", "username", "email",
					       "projectName", "description", NULL };
	struct egs_server *srv = r->srv;
	char name[EGS_NAME_MAX], user[EGS_NAME_MAX * 2], email[EGS_NAME_MAX * 2], project[EGS_NAME_MAX], desc[256];
	struct egs_strlist clusters = { 0 }, namespaces = { 0 };
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "workspaceName", true, name, sizeof(name)) ||
	    !egs_check_name(r, "workspaceName", name, true) ||
	    !egs_get_names(r, r->body, "clusters", MAX_LIST, &clusters) ||
	    !egs_get_names(r, r->body, "namespaces", MAX_LIST, &namespaces) ||
	    !egs_get_str(r, r->body, "username", false, user, sizeof(user)) ||
	    !egs_get_str(r, r->body, "email", false, email, sizeof(email)) ||
	    !egs_get_str(r, r->body, "projectName", false, project, sizeof(project)) ||
	    !egs_get_str(r, r->body, "description", false, desc, sizeof(desc)) || !check_user(r, user, email) ||
	    !egs_check_text(r, "description", desc))
		goto out;
	if (!project[0])
		egs_strlcpy(project, r->who.project[0] ? r->who.project : "default", sizeof(project));
	if (!egs_state_project(&srv->st, project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "PROJECT_NOT_FOUND", "projectName", "project %s does not exist", project);
		goto out;
	}
	if (!egs_in_project(r, project)) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "projectName", "this admin key is limited to project %s", r->who.project);
		goto out;
	}
	if (clusters.n == 0) {
		egs_reply_invalid(r, "clusters", "clusters must name at least one registered cluster");
		goto out;
	}
	if (!check_clusters(r, "clusters", &clusters, project))
		goto out;
	if (egs_state_workspace(&srv->st, name)) {
		egs_reply_err(r, EGS_ERR_EXISTS, "WORKSPACE_ALREADY_EXISTS", "workspaceName", "Already Exists: workspace %s", name);
		goto out;
	}
	if (namespaces.n == 0 && !check_namespace(r, "workspaceName", NULL, name, &clusters))
		goto out;
	for (size_t i = 0; i < namespaces.n; i++)
		if (!check_namespace(r, "namespaces", NULL, namespaces.v[i], &clusters))
			goto out;
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlcpy(w->project, project, sizeof(w->project));
	w->description = desc[0] ? egs_strdup(desc) : NULL;
	egs_strlist_copy(&w->clusters, &clusters);
	if (namespaces.n == 0)
		egs_strlist_add(&namespaces, name);
	for (size_t i = 0; i < namespaces.n; i++)
		add_namespace(w, namespaces.v[i]);
	if (user[0] || email[0])
		add_user(w, user, email);
	w->created_at = egs_now(srv);
	EGS_ASSERT(egs_state_add_workspace(&srv->st, w) == EGS_OK);
	egs_state_touch(&srv->st, EGS_KIND_WORKSPACE, w);
	egs_state_event(&srv->st, w->created_at, "Normal", "WorkspaceCreated", "Workspace", name, name,
			"workspace %s created on %zu cluster(s)", name, clusters.n);
	egs_reply_ok(r, json_pack("{s:s}", "workspaceName", name));
out:
	egs_strlist_cleanup(&clusters);
	egs_strlist_cleanup(&namespaces);
}

static void ws_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", "force", NULL };
	struct egs_server *srv = r->srv;
	char name[EGS_NAME_MAX];
	struct egs_workspace *w;
	bool force;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "workspaceName", true, name, sizeof(name)) ||
	    !egs_get_bool(r, r->body, "force", &force, NULL) || !egs_find_ws(r, name, &w))
		return;
	for (size_t i = 0; i < srv->st.active.len; i++) {
		const struct egs_gpr *g = srv->st.active.items[i];
		if (strcmp(g->workspace, name) == 0) {
			egs_reply_err(r, EGS_ERR_BUSY, "WORKSPACE_HAS_ACTIVE_GPR", "workspaceName",
				      "workspace %s holds GPR %s (%s); release it first", name, g->id,
				      egs_gpr_state_name(g->state));
			return;
		}
	}
	/* The agents then remove the slice's namespaces (kubeslice.c): refused while one runs pods. */
	if (!egs_kubeslice_may_remove(r, w, NULL, NULL, true, force, "workspaceName"))
		return;
	int64_t now = egs_now(srv);
	void *v;
	struct egs_vec waiting = { 0 };
	for (size_t i = 0; egs_map_next(&srv->st.gprs, &i, NULL, &v);) {
		struct egs_gpr *g = v;
		if (strcmp(g->workspace, name) == 0 && (g->state == EGS_GPR_QUEUED || g->state == EGS_GPR_PENDING))
			egs_vec_push(&waiting, g);
	}
	for (size_t i = 0; i < waiting.len; i++)
		egs_gpr_cancel(&srv->st, waiting.items[i], now);
	egs_vec_cleanup(&waiting);
	egs_state_event(&srv->st, now, "Normal", "WorkspaceDeleted", "Workspace", name, name, "workspace %s deleted",
			name);
	egs_template_forget_workspace(srv, name); /* its template binding goes with it */
	egs_kubecred_forget_workspace(srv, name);  /* and its sealed slice tokens */
	egs_infer_forget_workspace(srv, name);     /* and its inference endpoints */
	egs_state_del(&srv->st, EGS_KIND_WORKSPACE, w);
	egs_reply_ok(r, json_pack("{s:s}", "workspaceName", name));
}

static void ws_list(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	json_t *items = json_array();
	void *v;
	for (size_t i = 0; egs_map_next(&r->srv->st.workspaces, &i, NULL, &v);) {
		const struct egs_workspace *w = v;
		if (!egs_in_project(r, w->project))
			continue;
		if (r->who.role != EGS_ROLE_ADMIN && r->who.workspace[0] && strcmp(r->who.workspace, w->name) != 0)
			continue;
		json_array_append_new(items, egs_json_workspace(w));
	}
	egs_reply_ok(r, json_pack("{s:o}", "workspaces", items));
}

static void ws_get(struct egs_req *r)
{
	const char *name = egs_query(r, "workspaceName");
	struct egs_workspace *w;
	if (!name) {
		egs_reply_invalid(r, "workspaceName", "workspaceName is required");
		return;
	}
	if (!egs_find_ws(r, name, &w) || !egs_can_read_ws(r, w))
		return;
	json_t *o = egs_json_workspace(w);
	json_t *users = json_array();
	for (size_t i = 0; i < w->n_users; i++)
		json_array_append_new(users, json_pack("{s:s, s:s}", "username", w->users[i].username, "email",
						       w->users[i].email));
	json_object_set_new(o, "users", users);
	json_object_set_new(o, "projectName", json_string(w->project));
	json_object_set_new(o, "sliceNamespaces", egs_kubeslice_of_workspace(r->srv, w->name));
	egs_reply_ok(r, o);
}

/* The (namespace, cluster) pairs an update adds: new namespaces on every cluster the workspace keeps or
 * gains, and the namespaces it keeps on each cluster it gains.  Replies and returns false on the first
 * pair check_namespace refuses; nothing is changed. */
static bool check_new_namespaces(struct egs_req *r, const struct egs_workspace *w, const struct egs_strlist *add_ns,
				 const struct egs_strlist *rm_ns, const struct egs_strlist *add_cl,
				 const struct egs_strlist *rm_cl)
{
	struct egs_strlist after = { 0 };
	bool ok = true;
	for (size_t i = 0; i < w->clusters.n; i++)
		if (!egs_strlist_has(rm_cl, w->clusters.v[i]))
			egs_strlist_add(&after, w->clusters.v[i]);
	for (size_t i = 0; i < add_cl->n; i++)
		if (!egs_strlist_has(&after, add_cl->v[i]))
			egs_strlist_add(&after, add_cl->v[i]);
	for (size_t i = 0; ok && i < add_ns->n; i++)
		ok = check_namespace(r, "addNamespaces", w->name, add_ns->v[i], &after);
	for (size_t i = 0; ok && i < w->n_namespaces; i++)
		if (!egs_strlist_has(rm_ns, w->namespaces[i].name))
			ok = check_namespace(r, "addClusters", w->name, w->namespaces[i].name, add_cl);
	egs_strlist_cleanup(&after);
	return ok;
}

static void ws_update(struct egs_req *r)
{
	static const char *const allowed[] = { "workspaceName", "addNamespaces", "removeNamespaces", "addClusters",
					       "removeClusters", "addUsers", "removeUsers", "description", "webhookUrl", "force",
					       NULL };
	struct egs_server *srv = r->srv;
	char name[EGS_NAME_MAX], desc[256], hook[EGS_WEBHOOK_URL_MAX];
	struct egs_workspace *w;
	struct egs_strlist add_ns = { 0 }, rm_ns = { 0 }, add_cl = { 0 }, rm_cl = { 0 }, rm_users = { 0 };
	json_t *add_users = NULL;
	bool desc_given = json_object_get(r->body ? r->body : json_null(), "description") != NULL;
	bool hook_given = json_object_get(r->body ? r->body : json_null(), "webhookUrl") != NULL;
	bool force;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "workspaceName", true, name, sizeof(name)) || !egs_find_ws(r, name, &w) ||
	    !egs_get_names(r, r->body, "addNamespaces", MAX_LIST, &add_ns) ||
	    !egs_get_names(r, r->body, "removeNamespaces", MAX_LIST, &rm_ns) ||
	    !egs_get_names(r, r->body, "addClusters", MAX_LIST, &add_cl) ||
	    !egs_get_names(r, r->body, "removeClusters", MAX_LIST, &rm_cl) ||
	    !egs_get_str(r, r->body, "description", false, desc, sizeof(desc)) || !egs_check_text(r, "description", desc) ||
	    !egs_get_webhook_url(r, "webhookUrl", hook, sizeof(hook)) || !egs_get_bool(r, r->body, "force", &force, NULL) ||
	    !check_clusters(r, "addClusters", &add_cl, w->project))
		goto out;
	add_users = json_object_get(r->body, "addUsers");
	if (add_users && !json_is_null(add_users)) {
		if (!json_is_array(add_users) || json_array_size(add_users) > MAX_LIST) {
			egs_reply_invalid(r, "addUsers", "addUsers must be a list of {username, email}");
			goto out;
		}
		size_t i;
		json_t *u;
		json_array_foreach(add_users, i, u) {
			char un[EGS_NAME_MAX * 2], em[EGS_NAME_MAX * 2];
			if (!json_is_object(u)) {
				egs_reply_invalid(r, "addUsers", "addUsers[%zu] must be an object", i);
				goto out;
			}
			if (!egs_get_str(r, u, "username", true, un, sizeof(un)) ||
			    !egs_get_str(r, u, "email", false, em, sizeof(em)) || !check_user(r, un, em))
				goto out;
		}
	}
	json_t *rmu = json_object_get(r->body, "removeUsers");
	if (rmu && !json_is_null(rmu)) {
		size_t i;
		json_t *u;
		if (!json_is_array(rmu)) {
			egs_reply_invalid(r, "removeUsers", "removeUsers must be a list of usernames");
			goto out;
		}
		if (json_array_size(rmu) > MAX_LIST) {
			egs_reply_invalid(r, "removeUsers", "removeUsers may list at most %d users", MAX_LIST);
			goto out;
		}
		json_array_foreach(rmu, i, u) {
			if (!json_is_string(u) || json_string_length(u) >= EGS_NAME_MAX * 2 ||
			    strlen(json_string_value(u)) != json_string_length(u)) {
				egs_reply_invalid(r, "removeUsers", "removeUsers[%zu] must be a user name of at most %d characters",
						  i, EGS_NAME_MAX * 2 - 1);
				goto out;
			}
			egs_strlist_add(&rm_users, json_string_value(u));
		}
	}
	/* Removing the last cluster, or a cluster that a GPR of the workspace holds, is refused. */
	size_t remaining = 0;
	for (size_t i = 0; i < w->clusters.n; i++)
		if (!egs_strlist_has(&rm_cl, w->clusters.v[i]))
			remaining++;
	if (remaining + add_cl.n == 0) {
		egs_reply_invalid(r, "removeClusters", "a workspace needs at least one cluster");
		goto out;
	}
	for (size_t i = 0; i < srv->st.active.len; i++) {
		const struct egs_gpr *g = srv->st.active.items[i];
		if (strcmp(g->workspace, name) == 0 && egs_strlist_has(&rm_cl, g->cluster)) {
			egs_reply_err(r, EGS_ERR_BUSY, "WORKSPACE_HAS_ACTIVE_GPR", "removeClusters",
				      "GPR %s holds nodes of cluster %s", g->id, g->cluster);
			goto out;
		}
	}
	if (!check_new_namespaces(r, w, &add_ns, &rm_ns, &add_cl, &rm_cl) ||
	    !egs_kubeslice_may_remove(r, w, &rm_ns, NULL, false, force, "removeNamespaces") ||
	    !egs_kubeslice_may_remove(r, w, NULL, &rm_cl, false, force, "removeClusters"))
		goto out;
	for (size_t i = 0; i < add_cl.n; i++)
		if (!egs_strlist_has(&w->clusters, add_cl.v[i])) {
			egs_strlist_add(&w->clusters, add_cl.v[i]);
			for (size_t j = 0; j < w->n_namespaces; j++)
				egs_strlist_add(&w->namespaces[j].clusters, add_cl.v[i]);
		}
	for (size_t i = 0; i < rm_cl.n; i++) {
		egs_kubecred_forget_cluster(srv, w->name, rm_cl.v[i]);
		egs_infer_forget_cluster(srv, w->name, rm_cl.v[i]); /* its endpoints go with the namespaces */
		egs_strlist_remove(&w->clusters, rm_cl.v[i]);
		for (size_t j = 0; j < w->n_namespaces; j++)
			egs_strlist_remove(&w->namespaces[j].clusters, rm_cl.v[i]);
	}
	for (size_t i = 0; i < add_ns.n; i++)
		add_namespace(w, add_ns.v[i]);
	for (size_t i = 0; i < rm_ns.n; i++) {
		for (size_t j = 0; j < w->n_namespaces; j++) {
			if (strcmp(w->namespaces[j].name, rm_ns.v[i]) != 0)
				continue;
			egs_strlist_cleanup(&w->namespaces[j].clusters);
			memmove(&w->namespaces[j], &w->namespaces[j + 1], (w->n_namespaces - j - 1) * sizeof(*w->namespaces));
			w->n_namespaces--;
			break;
		}
	}
	if (add_users && json_is_array(add_users)) {
		size_t i;
		json_t *u;
		json_array_foreach(add_users, i, u) {
			json_t *em = json_object_get(u, "email");
			add_user(w, json_string_value(json_object_get(u, "username")),
				 json_is_string(em) ? json_string_value(em) : "");
		}
	}
	for (size_t i = 0; i < rm_users.n; i++) {
		for (size_t j = 0; j < w->n_users; j++) {
			if (strcmp(w->users[j].username, rm_users.v[i]) == 0) {
				memmove(&w->users[j], &w->users[j + 1], (w->n_users - j - 1) * sizeof(*w->users));
				w->n_users--;
				break;
			}
		}
	}
	if (desc_given) {
		free(w->description);
		w->description = desc[0] ? egs_strdup(desc) : NULL;
	}
	if (hook_given) {
		free(w->webhook_url);
		w->webhook_url = hook[0] ? egs_strdup(hook) : NULL;
	}
	egs_state_touch(&srv->st, EGS_KIND_WORKSPACE, w);
	egs_state_event(&srv->st, egs_now(srv), "Normal", "WorkspaceUpdated", "Workspace", name, name,
			"workspace %s updated", name);
	egs_reply_ok(r, egs_json_workspace(w));
out:
	egs_strlist_cleanup(&add_ns);
	egs_strlist_cleanup(&rm_ns);
	egs_strlist_cleanup(&add_cl);
	egs_strlist_cleanup(&rm_cl);
	egs_strlist_cleanup(&rm_users);
}

const struct egs_route egs_routes_workspace[] = {
	{ EVHTTP_REQ_POST, "/api/v1/slice-workspace", ws_create, false },
	{ EVHTTP_REQ_PUT, "/api/v1/slice-workspace", ws_update, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/slice-workspace", ws_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/slice-workspace", ws_get, false },
	{ EVHTTP_REQ_GET, "/api/v1/slice-workspace/list", ws_list, false },
	{ 0, NULL, NULL, false },
};
