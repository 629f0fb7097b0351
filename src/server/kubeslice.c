/*
 * kubeslice.c: the slice namespaces the clusters' agents report (kubeslice.h): the agent route that
 * takes the report, the `sliceRelease` actions derived from it, the "still runs pods" refusal of
 * workspace updates and deletes, and the workspace detail's view.
 *
 * srv->slice_ns maps a cluster name to the last report's list, each entry
 * {"name", "workspace", "createdByAgent", "runningPods"}.  It is runtime only: after an egsd restart the
 * agents report again (they do after every registration), and until then nothing is released and no
 * removal is refused for pods.  The pod counts are as old as the last report (the agent reports every
 * few seconds), so a pod started in between is not seen by the refusal.
 */
#include "server/kubeslice.h"

#include "core/util.h"

#include <stdio.h>
#include <string.h>

#define REPORT_MAX 1024
#define PODS_MAX 1000000

/* Does workspace w want namespace ns on cluster? */
static bool wanted(const struct egs_workspace *w, const char *ns, const char *cluster)
{
	if (!w || !egs_strlist_has(&w->clusters, cluster))
		return false;
	for (size_t i = 0; i < w->n_namespaces; i++)
		if (strcmp(w->namespaces[i].name, ns) == 0)
			return egs_strlist_has(&w->namespaces[i].clusters, cluster);
	return false;
}

void egs_kubeslice_append_actions(struct egs_server *srv, const struct egs_cluster *c, json_t *out)
{
	json_t *list = json_object_get(srv->slice_ns, c->name), *e;
	size_t i;

	if (!c->slice_access)
		return;
	json_array_foreach(list, i, e) {
		const char *ns = json_string_value(json_object_get(e, "name"));
		const char *ws = json_string_value(json_object_get(e, "workspace"));
		if (wanted(egs_state_workspace(&srv->st, ws), ns, c->name))
			continue;
		char aid[300], sa[EGS_NAME_MAX + 16];
		snprintf(aid, sizeof(aid), "sliceRelease:%s:%s", ws, ns);
		snprintf(sa, sizeof(sa), "egs-slice-%s", ws);
		json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s, s:s}", "actionId", aid, "type", "sliceRelease",
						     "workspace", ws, "namespace", ns, "serviceAccount", sa));
	}
}

bool egs_kubeslice_may_remove(struct egs_req *r, const struct egs_workspace *w, const struct egs_strlist *rm_ns,
			      const struct egs_strlist *rm_cl, bool all, bool force, const char *field)
{
	const char *cluster;
	json_t *list, *e;
	size_t i;

	if (force)
		return true;
	json_object_foreach(r->srv->slice_ns, cluster, list) {
		json_array_foreach(list, i, e) {
			const char *ns = json_string_value(json_object_get(e, "name"));
			json_int_t pods = json_integer_value(json_object_get(e, "runningPods"));
			if (pods <= 0 || strcmp(json_string_value(json_object_get(e, "workspace")), w->name) != 0 ||
			    !wanted(w, ns, cluster))
				continue;
			if (!all && !(rm_ns && egs_strlist_has(rm_ns, ns)) && !(rm_cl && egs_strlist_has(rm_cl, cluster)))
				continue;
			bool created = json_is_true(json_object_get(e, "createdByAgent"));
			egs_reply_err(r, EGS_ERR_CONFLICT, "NAMESPACE_HAS_PODS", field,
				      "namespace %s on cluster %s still runs %lld pods; stop them first, or repeat with "
				      "\"force\": true to %s",
				      ns, cluster, (long long)pods,
				      created ? "delete the namespace with its pods"
					      : "take the namespace out of the slice (its pods keep running, without the "
						"slice's access)");
			return false;
		}
	}
	return true;
}

json_t *egs_kubeslice_of_workspace(struct egs_server *srv, const char *ws)
{
	json_t *out = json_array(), *list, *e;
	const char *cluster;
	size_t i;

	json_object_foreach(srv->slice_ns, cluster, list) {
		json_array_foreach(list, i, e) {
			if (strcmp(json_string_value(json_object_get(e, "workspace")), ws) != 0)
				continue;
			json_array_append_new(out, json_pack("{s:s, s:O, s:O, s:O}", "clusterName", cluster, "namespace",
							     json_object_get(e, "name"), "createdByAgent",
							     json_object_get(e, "createdByAgent"), "runningPods",
							     json_object_get(e, "runningPods")));
		}
	}
	return out;
}

void egs_kubeslice_cleanup(struct egs_server *srv)
{
	json_decref(srv->slice_ns);
	srv->slice_ns = NULL;
}

/* ---- the agent's report: POST /api/v1/agent/slice-namespaces ---- */

/* One entry of the report, validated into a new object; NULL after replying 422 naming the field. */
static json_t *parse_entry(struct egs_req *r, json_t *o, size_t i)
{
	static const char *const keys[] = { "name", "workspace", "createdByAgent", "runningPods", NULL };
	char f[96];
	const char *k;
	json_t *v;

	snprintf(f, sizeof(f), "namespaces[%zu]", i);
	if (!json_is_object(o)) {
		egs_reply_invalid(r, f, "%s must be an object", f);
		return NULL;
	}
	json_object_foreach(o, k, v) {
		bool known = false;
		for (size_t j = 0; keys[j]; j++)
			known = known || strcmp(k, keys[j]) == 0;
		if (!known) {
			snprintf(f, sizeof(f), "namespaces[%zu].%.32s", i, k);
			egs_reply_invalid(r, f, "%s is not a field of a slice namespace", f);
			return NULL;
		}
	}
	for (int j = 0; j < 2; j++) {
		v = json_object_get(o, keys[j]);
		snprintf(f, sizeof(f), "namespaces[%zu].%s", i, keys[j]);
		if (!json_is_string(v) || json_string_length(v) >= EGS_NAME_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			egs_reply_invalid(r, f, "%s must be a name of at most %d characters", f, EGS_NAME_MAX - 1);
			return NULL;
		}
		if (!egs_check_name(r, f, json_string_value(v), true))
			return NULL;
	}
	v = json_object_get(o, "runningPods");
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > PODS_MAX) {
		snprintf(f, sizeof(f), "namespaces[%zu].runningPods", i);
		egs_reply_invalid(r, f, "%s must be an integer from 0 to %d", f, PODS_MAX);
		return NULL;
	}
	v = json_object_get(o, "createdByAgent"); /* optional: null is "not given" */
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		snprintf(f, sizeof(f), "namespaces[%zu].createdByAgent", i);
		egs_reply_invalid(r, f, "%s must be true or false", f);
		return NULL;
	}
	return json_pack("{s:O, s:O, s:b, s:O}", "name", json_object_get(o, "name"), "workspace",
			 json_object_get(o, "workspace"), "createdByAgent", json_is_true(v), "runningPods",
			 json_object_get(o, "runningPods"));
}

static void agent_slice_namespaces(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "namespaces", NULL };
	char cname[EGS_NAME_MAX];
	json_t *list, *out = NULL, *e;
	size_t i;

	if (!egs_require_role(r, EGS_R(AGENT)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "clusterName", false, cname, sizeof(cname)))
		return;
	if (cname[0] && strcmp(cname, r->who.cluster) != 0) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "clusterName", "this agent token belongs to cluster %s",
			      r->who.cluster);
		return;
	}
	list = json_object_get(r->body, "namespaces");
	if (!json_is_array(list) || json_array_size(list) > REPORT_MAX) {
		egs_reply_invalid(r, "namespaces", "namespaces must be a list of at most %d slice namespaces", REPORT_MAX);
		return;
	}
	out = json_array();
	json_array_foreach(list, i, e) {
		json_t *one = parse_entry(r, e, i);
		if (!one)
			goto out;
		json_array_append_new(out, one);
	}
	if (!r->srv->slice_ns)
		r->srv->slice_ns = json_object();
	if (!json_equal(out, json_object_get(r->srv->slice_ns, r->who.cluster))) {
		json_object_set(r->srv->slice_ns, r->who.cluster, out);
		egs_server_changed(r->srv); /* wakes the cluster's long poll: a release may be due */
	}
	egs_reply_ok(r, json_pack("{s:s, s:I}", "clusterName", r->who.cluster, "namespaces",
				  (json_int_t)json_array_size(out)));
out:
	json_decref(out);
}

const struct egs_route egs_routes_kubeslice[] = {
	{ EVHTTP_REQ_POST, "/api/v1/agent/slice-namespaces", agent_slice_namespaces, false },
	{ 0, NULL, NULL, false },
};
