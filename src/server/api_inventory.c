/*
 * api_inventory.c: the inventory (nodes and their GPUs) as users and admins see it, and cluster
 * registration (which issues the cluster's agent token).
 */
#include "server/server.h"

#include "core/sched.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

/* Can the caller see nodes of this cluster?  Admins: clusters of their project.  Others: clusters
 * of the workspaces in their scope. */
static bool cluster_visible(struct egs_req *r, const struct egs_cluster *c)
{
	if (!egs_in_project(r, c->project))
		return false;
	if (r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0])
		return true;
	const struct egs_workspace *w = egs_state_workspace(&r->srv->st, r->who.workspace);
	return w && egs_strlist_has(&w->clusters, c->name);
}

static int cmp_node(const void *a, const void *b)
{
	const struct egs_node *x = *(struct egs_node *const *)a, *y = *(struct egs_node *const *)b;
	int c = strcmp(x->cluster, y->cluster);
	return c ? c : strcmp(x->name, y->name);
}

/* Visible nodes sorted by cluster, then name (caller frees the array). */
static struct egs_node **visible_nodes(struct egs_req *r, size_t *n)
{
	struct egs_state *st = &r->srv->st;
	struct egs_node **v = egs_malloc((st->nodes.len + 1) * sizeof(*v));
	*n = 0;
	void *x;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &x);) {
		struct egs_node *node = x;
		const struct egs_cluster *c = egs_state_cluster(st, node->cluster);
		if (c && cluster_visible(r, c))
			v[(*n)++] = node;
	}
	qsort(v, *n, sizeof(*v), cmp_node);
	return v;
}

/* A copy of node view o for managedNodes: the public SDK reads allocationTimeStamp there as a
 * protobuf Timestamp ({"seconds", "nanos"}), while items keeps the RFC 3339 text of the API
 * document (seed 000 readers).  Returns a new reference. */
static json_t *sdk_node(json_t *o)
{
	json_t *c = json_deep_copy(o);
	json_t *alloc = json_object_get(c, "allocation"), *a;
	size_t i;
	json_array_foreach(alloc, i, a)
	{
		int64_t t = 0;
		const char *ts = json_string_value(json_object_get(a, "allocationTimeStamp"));
		if (ts && !egs_time_parse(ts, &t))
			t = 0;
		json_object_set_new(a, "allocationTimeStamp", json_pack("{s:I, s:i}", "seconds", (json_int_t)t, "nanos", 0));
	}
	return c;
}

/* The unmanaged GPU nodes of the clusters the caller may see, as their agents last registered them: node
 * objects with the managed ones' main keys, nodeHealth "Unmanaged" and gpuNodeStatus "NODE_UNMANAGED". */
static json_t *unmanaged_nodes(struct egs_req *r)
{
	json_t *out = json_array(), *list, *n;
	const char *cluster;
	size_t i;

	json_object_foreach(r->srv->unmanaged, cluster, list) {
		const struct egs_cluster *c = egs_state_cluster(&r->srv->st, cluster);
		if (!c || !cluster_visible(r, c))
			continue;
		json_array_foreach(list, i, n) {
			const char *model = json_string_value(json_object_get(n, "gpuModel"));
			json_array_append_new(out, json_pack("{s:O, s:s, s:s, s:O, s:s, s:O, s:O, s:i, s:O, s:O, s:s, s:s, s:s}",
				"gpuNodeName", json_object_get(n, "name"), "gpuShape", model, "gpuModelName", model,
				"instanceType", json_object_get(n, "instanceType"), "clusterName", cluster,
				"memory", json_object_get(n, "memoryMiB"), "gpuCount", json_object_get(n, "gpuCount"),
				"availableGPUs", 0, "cloudProvider", json_object_get(n, "cloudProvider"),
				"region", json_object_get(n, "region"), "nodeHealth", "Unmanaged",
				"gpuNodeStatus", "NODE_UNMANAGED", "gpuNodeState", "NODE_UNMANAGED"));
		}
	}
	return out;
}

static void inventory_list(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	size_t n;
	struct egs_node **nodes = visible_nodes(r, &n);
	json_t *items = json_array(), *managed = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = egs_json_node(r->srv, nodes[i]);
		json_array_append_new(managed, sdk_node(o));
		json_array_append_new(items, o);
	}
	free(nodes);
	egs_reply_ok(r, json_pack("{s:o, s:o, s:o}", "items", items, "managedNodes", managed, "unmanagedNodes",
				  unmanaged_nodes(r)));
}

static void inventory_by_ws(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const char *name = egs_query(r, "sliceName");
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	if (!name || !*name) {
		egs_reply_invalid(r, "sliceName", "sliceName is required");
		return;
	}
	const struct egs_workspace *ws = egs_state_workspace(st, name);
	if (!ws || !egs_in_project(r, ws->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found");
		return;
	}
	if (!egs_can_read_ws(r, ws))
		return;
	json_t *items = json_array();
	for (size_t i = 0; i < st->active.len; i++) {
		const struct egs_gpr *g = st->active.items[i];
		if (strcmp(g->workspace, name) != 0 || g->state == EGS_GPR_RELEASING)
			continue;
		json_t *names = json_array();
		int64_t mem = 0;
		int gpus = 0;
		const char *itype = "", *shape = "";
		for (size_t j = 0; j < g->nodes.n; j++) {
			const struct egs_node *nd = egs_map_get(&st->nodes, g->nodes.v[j]);
			if (!nd)
				continue;
			json_array_append_new(names, json_string(nd->name));
			mem = nd->memory_mib;
			gpus += nd->gpu_count;
			itype = nd->instance_type;
			shape = nd->gpu_shape;
		}
		/* nodeName..gpuShape: the API document; memoryPerGpu, gpuPerNode, totalGpuNodes: what the public
		 * SDK's InventoryUsage requires */
		size_t held = json_array_size(names);
		json_array_append_new(items, json_pack("{s:o, s:s, s:I, s:i, s:s, s:s, s:s, s:I, s:i, s:i}", "nodeName",
						       names, "instanceType", itype, "memory", (json_int_t)mem,
						       "totalGpus", gpus, "gpuShape", shape, "gprId", g->id,
						       "clusterName", g->cluster, "memoryPerGpu", (json_int_t)mem,
						       "gpuPerNode", held ? gpus / (int)held : 0, "totalGpuNodes",
						       (int)held));
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static bool url_ok(const char *s)
{
	if (strncmp(s, "https://", 8) != 0 && strncmp(s, "http://", 7) != 0)
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == '"' || *c == '\\' || (unsigned char)*c >= 0x7f)
			return false;
	return true;
}

static bool base64_ok(const char *s)
{
	for (const char *c = s; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '+' ||
		      *c == '/' || *c == '='))
			return false;
	return true;
}

static bool get_cluster_fields(struct egs_req *r, char *api, size_t apisz, char **ca)
{
	if (!egs_get_str(r, r->body, "apiServer", false, api, apisz))
		return false;
	if (api[0] && !url_ok(api)) {
		egs_reply_invalid(r, "apiServer", "apiServer must be an http(s) URL without spaces or quotes");
		return false;
	}
	*ca = NULL;
	json_t *v = json_object_get(r->body, "caData");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) || json_string_length(v) > 6000 || !base64_ok(json_string_value(v))) {
			egs_reply_invalid(r, "caData", "caData must be base64 (at most 6000 characters)");
			return false;
		}
		if (json_string_length(v))
			*ca = egs_strdup(json_string_value(v));
	}
	return true;
}

static void cluster_register(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "projectName", "apiServer", "caData", NULL };
	struct egs_server *srv = r->srv;
	char name[EGS_NAME_MAX], project[EGS_NAME_MAX], api[512];
	char *ca = NULL;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "clusterName", true, name, sizeof(name)) ||
	    !egs_check_name(r, "clusterName", name, true) ||
	    !egs_get_str(r, r->body, "projectName", false, project, sizeof(project)) ||
	    !get_cluster_fields(r, api, sizeof(api), &ca))
		return;
	if (!project[0])
		egs_strlcpy(project, r->who.project[0] ? r->who.project : "default", sizeof(project));
	if (!egs_state_project(&srv->st, project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "PROJECT_NOT_FOUND", "projectName", "project %s does not exist", project);
		goto fail;
	}
	if (!egs_in_project(r, project)) {
		egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "projectName", "this admin key is limited to project %s", r->who.project);
		goto fail;
	}
	if (egs_state_cluster(&srv->st, name)) {
		egs_reply_err(r, EGS_ERR_EXISTS, "CLUSTER_ALREADY_EXISTS", "clusterName", "cluster %s is already registered", name);
		goto fail;
	}
	int64_t now = egs_now(srv);
	struct egs_apikey *k = egs_calloc(1, sizeof(*k));
	char token[37];
	egs_auth_new_key(token, k->hash);
	do
		egs_new_id("key", k->id);
	while (egs_state_apikey(&srv->st, k->id));
	egs_strlcpy(k->name, "agent-", sizeof(k->name));
	egs_strlcpy(k->name + 6, name, sizeof(k->name) - 6);
	k->role = EGS_ROLE_AGENT;
	egs_strlcpy(k->project, project, sizeof(k->project));
	egs_strlcpy(k->cluster, name, sizeof(k->cluster));
	k->created_at = now;
	EGS_ASSERT(egs_state_add_apikey(&srv->st, k) == EGS_OK);
	egs_state_touch(&srv->st, EGS_KIND_APIKEY, k);

	struct egs_cluster *c = egs_calloc(1, sizeof(*c));
	egs_strlcpy(c->name, name, sizeof(c->name));
	egs_strlcpy(c->project, project, sizeof(c->project));
	c->api_server = api[0] ? egs_strdup(api) : NULL;
	c->ca_data = ca;
	egs_strlcpy(c->agent_key_id, k->id, sizeof(c->agent_key_id));
	c->created_at = now;
	EGS_ASSERT(egs_state_add_cluster(&srv->st, c) == EGS_OK);
	egs_state_touch(&srv->st, EGS_KIND_CLUSTER, c);
	egs_state_event(&srv->st, now, "Normal", "ClusterRegistered", "Cluster", name, NULL, "cluster %s registered in project %s",
			name, project);
	egs_reply_ok(r, json_pack("{s:s, s:s, s:s}", "clusterName", name, "projectName", project, "agentToken", token));
	sodium_memzero(token, sizeof(token));
	return;
fail:
	free(ca);
}

static void cluster_update(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "apiServer", "caData", NULL };
	char name[EGS_NAME_MAX], api[512];
	char *ca = NULL;
	if (!egs_require_role(r, EGS_R(ADMIN)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "clusterName", true, name, sizeof(name)) || !get_cluster_fields(r, api, sizeof(api), &ca))
		return;
	struct egs_cluster *c = egs_state_cluster(&r->srv->st, name);
	if (!c || !egs_in_project(r, c->project)) {
		free(ca);
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s is not registered", name);
		return;
	}
	if (api[0]) {
		free(c->api_server);
		c->api_server = egs_strdup(api);
	}
	if (json_object_get(r->body, "caData")) {
		free(c->ca_data);
		c->ca_data = ca;
	}
	egs_state_touch(&r->srv->st, EGS_KIND_CLUSTER, c);
	egs_reply_ok(r, json_pack("{s:s}", "clusterName", name));
}

static void cluster_list(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	int64_t now = egs_now(r->srv);
	json_t *items = json_array();
	void *v;
	for (size_t i = 0; egs_map_next(&st->clusters, &i, NULL, &v);) {
		const struct egs_cluster *c = v;
		if (!cluster_visible(r, c))
			continue;
		int nodes = 0, gpus = 0;
		void *x;
		for (size_t j = 0; egs_map_next(&st->nodes, &j, NULL, &x);) {
			const struct egs_node *n = x;
			if (!strcmp(n->cluster, c->name)) {
				nodes++;
				gpus += n->gpu_count;
			}
		}
		char seen[32] = "";
		if (c->last_seen)
			egs_time_format(c->last_seen, seen, sizeof(seen));
		bool connected = c->last_seen && now - c->last_seen <= st->cfg.heartbeat_timeout_s;
		json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:b, s:o, s:i, s:i}", "clusterName", c->name,
						       "projectName", c->project, "apiServer", c->api_server ? c->api_server : "",
						       "agentConnected", connected, "lastSeen", seen[0] ? json_string(seen) : json_null(),
						       "nodes", nodes, "gpus", gpus));
	}
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static void node_list(struct egs_req *r)
{
	const char *cluster = egs_query(r, "clusterName");
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	size_t n;
	struct egs_node **nodes = visible_nodes(r, &n);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++)
		if (!cluster || !strcmp(cluster, nodes[i]->cluster))
			json_array_append_new(items, egs_json_node(r->srv, nodes[i]));
	free(nodes);
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

static void gpu_list(struct egs_req *r)
{
	if (!egs_require_role(r, EGS_R(ADMIN)))
		return;
	size_t n;
	struct egs_node **nodes = visible_nodes(r, &n);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct egs_node *nd = nodes[i];
		for (int j = 0; j < nd->n_gpus; j++) {
			const struct egs_gpu *u = &nd->gpus[j];
			json_array_append_new(items, json_pack("{s:s, s:i, s:s, s:s, s:s, s:I, s:s, s:f, s:f, s:f, s:I}", "uuid",
							       u->uuid, "index", u->index, "gpuNodeName", nd->name,
							       "clusterName", nd->cluster, "gpuShape", nd->gpu_shape,
							       "memory", (json_int_t)nd->memory_mib, "gprId", nd->gpr_id,
							       "powerW", u->power_w, "tempC", u->temp_c, "utilPct",
							       u->util_pct, "memUsedMiB", (json_int_t)u->mem_used_mib));
		}
	}
	free(nodes);
	egs_reply_ok(r, json_pack("{s:o}", "items", items));
}

#define ALLOC_MAP_PREFIX "/api/v1/nodes/"

/*
 * GET /api/v1/nodes/{node}/gpu-alloc-map[?clusterName=C]: the share of each GPU of the node that is
 * allocated (core/share_gpr.h), {"<uuid>": "0.60", ...} with exactly two decimals: "0.00" when free,
 * "1.00" on every GPU while a dedicated GPR holds the node.  The node is named as in the inventory;
 * clusterName is needed only when two visible clusters have a node of that name.  A node the caller
 * may not see (inventory_list's rule) answers 404 like an unknown one, so its existence does not leak.
 */
static void node_alloc_map(struct egs_req *r)
{
	const char *cluster = egs_query(r, "clusterName");
	const char *seg = r->path + strlen(ALLOC_MAP_PREFIX);
	char name[EGS_NAME_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	size_t len = strcspn(seg, "/");
	bool named = len < sizeof(name);
	if (named) {
		memcpy(name, seg, len);
		name[len] = '\0';
		named = egs_label_valid(name, &(const char *){ NULL });
	}
	if (!named) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "NODE_NOT_FOUND", "node", "no such node");
		return;
	}
	size_t n, matches = 0;
	struct egs_node **nodes = visible_nodes(r, &n), *found = NULL;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(nodes[i]->name, name) && (!cluster || !strcmp(nodes[i]->cluster, cluster)))
			found = matches++ ? found : nodes[i];
	free(nodes);
	if (!found) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "NODE_NOT_FOUND", "node", "node %s not found%s", name,
			      cluster ? " in that cluster" : "");
		return;
	}
	if (matches > 1) {
		egs_reply_invalid(r, "clusterName", "node %s is in %zu clusters: give clusterName", name, matches);
		return;
	}
	int alloc[EGS_SHARE_DEV_MAX];
	egs_share_node_alloc(found, alloc);
	json_t *map = json_object();
	for (int d = 0; d < found->n_gpus && d < EGS_SHARE_DEV_MAX; d++) {
		char text[EGS_SHARE_TEXT_MAX];
		egs_share_format(alloc[d], text, sizeof(text));
		json_object_set_new(map, found->gpus[d].uuid, json_string(text));
	}
	egs_reply_ok(r, map);
}

const struct egs_route egs_routes_inventory[] = {
	{ EVHTTP_REQ_GET, "/api/v1/inventory/list", inventory_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/inventory", inventory_by_ws, false },
	{ EVHTTP_REQ_POST, "/api/v1/clusters", cluster_register, false },
	{ EVHTTP_REQ_PUT, "/api/v1/clusters", cluster_update, false },
	{ EVHTTP_REQ_GET, "/api/v1/clusters", cluster_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/nodes", node_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpus", gpu_list, false },
	{ EVHTTP_REQ_GET, "/api/v1/nodes/{node}/gpu-alloc-map", node_alloc_map, false },
	{ 0, NULL, NULL, false },
};
