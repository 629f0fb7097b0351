/*
 * manifest_diff.c: what `apply` must change to make the server's object match a manifest (see
 * manifest.h).  Pure functions of (manifest object, current JSON): no I/O, so they are unit-tested.
 *
 * Values are compared by meaning, not by spelling: the server answers durations as "6h0m0s" and
 * memory in MiB whatever the request said, and lists are sets.  A field the manifest leaves out is
 * never compared, so a manifest that says less than the server knows is not a change.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/manifest.h"

#include <stdio.h>
#include <string.h>

/* GPR fields whose current value the server's view does not show as requested (derived), so they
 * are sent at creation only. */
static const char *const create_only[] = {"multiNode", "dedicatedNodes", "gpuSharingMode", "gprName",
					  "sliceName", "earlyRelease", "templateName"};

static bool in(const char *s, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, set[i]))
			return true;
	return false;
}

static int64_t duration_of(json_t *v)
{
	int64_t secs = 0;
	const char *why;
	const char *s = json_string_value(v);

	if (!s || !*s || !egs_duration_parse(s, &secs, &why))
		return 0;
	return secs;
}

/* Names in a but not in b, as a new array. */
static json_t *minus(json_t *a, json_t *b)
{
	json_t *out = json_array(), *x, *y;
	size_t i, j;

	json_array_foreach(a, i, x) {
		bool found = false;
		json_array_foreach(b, j, y)
			found = found || json_equal(x, y);
		if (!found)
			json_array_append(out, x);
	}
	return out;
}

/* Equal as sets of names (anything that is not an array counts as empty). */
static bool string_set_equal(json_t *a, json_t *b)
{
	json_t *x = minus(a, b), *y = minus(b, a);
	bool same = json_array_size(x) == 0 && json_array_size(y) == 0;

	json_decref(x);
	json_decref(y);
	return same;
}

/* Does the manifest value want equal the server's have for GPR field key? */
static bool gpr_same(const char *key, json_t *want, json_t *have)
{
	if (!strcmp(key, "exitDuration") || !strcmp(key, "idleTimeOutDuration"))
		return duration_of(want) == duration_of(have);
	if (!strcmp(key, "memoryPerGpu"))
		return egs_memory_to_mib(json_integer_value(want)) == json_integer_value(have);
	if (!strcmp(key, "preferredClusters"))
		return string_set_equal(want, have);
	if (json_is_boolean(want))
		return json_is_true(want) == json_is_true(have);
	if (json_is_string(want) && (!have || json_is_null(have)))
		return json_string_length(want) == 0;
	return json_equal(want, have);
}

json_t *egs_manifest_gpr_changes(const struct egs_manifest_obj *o, json_t *current)
{
	json_t *changes = json_object(), *want;
	const char *key;

	json_object_foreach(o->body, key, want) {
		if (in(key, create_only, EGS_ARRAY_LEN(create_only)))
			continue;
		if (!gpr_same(key, want, json_object_get(current, key)))
			json_object_set(changes, key, want);
	}
	return changes;
}

/* Adds key: list to body when the list is not empty (and notes the change); steals list. */
static void put_list(json_t *body, const char *key, json_t *list, bool *changed)
{
	if (json_array_size(list) > 0) {
		json_object_set_new(body, key, list);
		*changed = true;
	} else {
		json_decref(list);
	}
}

/* The namespaces of a GET answer ([{namespace, clusters}]) as a list of names. */
static json_t *namespace_names(json_t *current)
{
	json_t *out = json_array(), *ns;
	size_t i;

	json_array_foreach(json_object_get(current, "namespaces"), i, ns) {
		json_t *name = json_object_get(ns, "namespace");
		if (json_is_string(name))
			json_array_append(out, name);
	}
	return out;
}

/* addUsers when the manifest's username is not among the workspace's users.  An existing user's
 * email is left as it is: the update route cannot change it in one call. */
static void ws_user(const struct egs_manifest_obj *o, json_t *current, json_t *body, bool *changed)
{
	json_t *user = json_object_get(o->body, "username"), *u;
	json_t *email = json_object_get(o->body, "email");
	size_t i;

	if (!json_is_string(user))
		return;
	json_array_foreach(json_object_get(current, "users"), i, u)
		if (json_equal(json_object_get(u, "username"), user))
			return;
	json_object_set_new(body, "addUsers",
			    json_pack("[{s:O, s:s}]", "username", user, "email", email ? json_string_value(email) : ""));
	*changed = true;
}

json_t *egs_manifest_ws_changes(const struct egs_manifest_obj *o, json_t *current, bool *changed, char *why,
				size_t whysz)
{
	json_t *want_proj = json_object_get(o->body, "projectName"), *have_proj = json_object_get(current, "projectName");
	json_t *want_cl = json_object_get(o->body, "clusters"), *have_cl = json_object_get(current, "clusters");
	json_t *want_ns = json_object_get(o->body, "namespaces"), *desc = json_object_get(o->body, "description");
	json_t *body, *have_ns;

	*changed = false;
	why[0] = '\0';
	if (json_is_string(want_proj) && json_is_string(have_proj) && !json_equal(want_proj, have_proj)) {
		snprintf(why, whysz, "workspace %s belongs to project %s; it cannot move to project %s", o->name,
			 json_string_value(have_proj), json_string_value(want_proj));
		return NULL;
	}
	body = json_pack("{s:s}", "workspaceName", o->name);
	put_list(body, "addClusters", minus(want_cl, have_cl), changed);
	put_list(body, "removeClusters", minus(have_cl, want_cl), changed);
	if (json_is_array(want_ns)) {
		have_ns = namespace_names(current);
		put_list(body, "addNamespaces", minus(want_ns, have_ns), changed);
		put_list(body, "removeNamespaces", minus(have_ns, want_ns), changed);
		json_decref(have_ns);
	}
	if (json_is_string(desc) && !json_equal(desc, json_object_get(current, "sliceDescription"))) {
		json_object_set(body, "description", desc);
		*changed = true;
	}
	ws_user(o, current, body, changed);
	return body;
}

json_t *egs_manifest_cluster_changes(const struct egs_manifest_obj *o, json_t *current, char *why, size_t whysz)
{
	json_t *want_proj = json_object_get(o->body, "projectName"), *have_proj = json_object_get(current, "projectName");
	json_t *api = json_object_get(o->body, "apiServer"), *ca = json_object_get(o->body, "caData");
	json_t *have_ca = json_object_get(current, "caData");
	bool api_differs = json_is_string(api) && !json_equal(api, json_object_get(current, "apiServer"));
	/* The cluster listing does not show caData today; when it does, it is compared too. */
	bool ca_differs = json_is_string(ca) && have_ca && !json_equal(ca, have_ca);
	json_t *body;

	why[0] = '\0';
	if (json_is_string(want_proj) && json_is_string(have_proj) && !json_equal(want_proj, have_proj)) {
		snprintf(why, whysz, "cluster %s belongs to project %s; it cannot move to project %s", o->name,
			 json_string_value(have_proj), json_string_value(want_proj));
		return NULL;
	}
	if (!api_differs && !ca_differs)
		return NULL;
	body = json_pack("{s:s}", "clusterName", o->name);
	if (json_is_string(api))
		json_object_set(body, "apiServer", api);
	if (json_is_string(ca))
		json_object_set(body, "caData", ca);
	return body;
}

/* ---- workspace policies ---- */

/*
 * A copy of the limits of policy object p (a manifest body or a server answer) in a form where equal
 * meaning is equal JSON: workspaceName and nulls dropped, durations as seconds, gpuShapes sorted and
 * without duplicates (dropped when empty), softLimits normalised the same way (dropped when empty).
 * Values of an unexpected type are kept as they are, so they compare as different.
 */
static json_t *policy_norm(json_t *p, bool top)
{
	json_t *out = json_object(), *v;
	const char *k;

	json_object_foreach(p, k, v) {
		if (json_is_null(v) || !strcmp(k, "workspaceName"))
			continue;
		if (!strcmp(k, "maxExitDurationPerGPR") && json_is_string(v) && duration_of(v)) {
			json_object_set_new(out, k, json_integer(duration_of(v)));
		} else if (!strcmp(k, "gpuShapes") && json_is_array(v)) {
			json_t *sorted = json_array(), *x;
			size_t i, j;
			json_array_foreach(v, i, x) { /* insertion sort: a handful of names */
				bool dup = false;
				for (j = 0; j < json_array_size(sorted) && !dup; j++)
					dup = json_equal(json_array_get(sorted, j), x);
				for (j = 0; !dup && j < json_array_size(sorted); j++)
					if (json_is_string(x) && strcmp(json_string_value(json_array_get(sorted, j)),
									json_string_value(x)) > 0)
						break;
				if (!dup)
					json_array_insert(sorted, j, x);
			}
			if (json_array_size(sorted))
				json_object_set_new(out, k, sorted);
			else
				json_decref(sorted);
		} else if (top && !strcmp(k, "softLimits") && json_is_object(v)) {
			json_t *soft = policy_norm(v, false);
			if (json_object_size(soft))
				json_object_set_new(out, k, soft);
			else
				json_decref(soft);
		} else {
			json_object_set(out, k, v);
		}
	}
	return out;
}

bool egs_manifest_policy_differs(const struct egs_manifest_obj *o, json_t *current)
{
	json_t *want = policy_norm(o->body, true), *have = policy_norm(current, true);
	bool differs = !json_equal(want, have);

	json_decref(want);
	json_decref(have);
	return differs;
}

/* ---- GPR templates and bindings ---- */

/* A template's field v as the server would store it: durations in seconds, memory in MiB, and an
 * absent field as the server's default.  Returns a new reference. */
static json_t *template_value(const char *key, json_t *v)
{
	if (!strcmp(key, "exitDuration") || !strcmp(key, "idleTimeOutDuration"))
		return json_integer(duration_of(v));
	if (!strcmp(key, "memoryPerGpu"))
		return json_integer(json_is_integer(v) ? egs_memory_to_mib(json_integer_value(v)) : 0);
	if (!strcmp(key, "priority"))
		return json_integer(json_is_integer(v) ? json_integer_value(v) : 101);
	if (!strcmp(key, "enforceIdleTimeOut") || !strcmp(key, "enableEviction") || !strcmp(key, "requeueOnFailure"))
		return json_boolean(json_is_true(v));
	if (!v || json_is_null(v))
		return json_string("");
	return json_incref(v);
}

bool egs_manifest_template_differs(const struct egs_manifest_obj *o, json_t *current)
{
	static const char *const keys[] = {"clusterName", "numberOfGPUs", "numberOfGPUNodes", "memoryPerGpu",
					   "gpuShape", "instanceType", "exitDuration", "priority",
					   "enforceIdleTimeOut", "idleTimeOutDuration", "enableEviction",
					   "requeueOnFailure"};
	bool differs = false;

	for (size_t i = 0; i < EGS_ARRAY_LEN(keys) && !differs; i++) {
		json_t *want = template_value(keys[i], json_object_get(o->body, keys[i]));
		json_t *have = template_value(keys[i], json_object_get(current, keys[i]));
		differs = !json_equal(want, have);
		json_decref(want);
		json_decref(have);
	}
	return differs;
}

/* A binding's clusters as [{clusterName, defaultTemplateName, templates}], absent members filled. */
static json_t *binding_clusters(json_t *clusters)
{
	json_t *out = json_array(), *c, *t;
	size_t i;

	json_array_foreach(clusters, i, c) {
		const char *def = json_string_value(json_object_get(c, "defaultTemplateName"));
		t = json_object_get(c, "templates");
		json_array_append_new(out, json_pack("{s:O, s:s, s:o}", "clusterName",
						     json_object_get(c, "clusterName") ? json_object_get(c, "clusterName")
										       : json_null(),
						     "defaultTemplateName", def ? def : "", "templates",
						     json_is_array(t) ? json_incref(t) : json_array()));
	}
	return out;
}

bool egs_manifest_binding_differs(const struct egs_manifest_obj *o, json_t *current)
{
	json_t *want = binding_clusters(json_object_get(o->body, "clusters"));
	json_t *have = binding_clusters(json_object_get(current, "clusters"));
	bool differs = !json_equal(want, have) || json_is_true(json_object_get(o->body, "enableAutoGPR")) !=
							  json_is_true(json_object_get(current, "enableAutoGPR"));

	json_decref(want);
	json_decref(have);
	return differs;
}
