/*
 * ctl_get.c: `egsctl get RESOURCE [NAME...]`: one listing per resource, as a table (wide adds
 * columns), JSON or YAML ({"items": [...]}, or the object itself for one named object) or names.
 *
 * `get queue` shows GET /api/v1/queue: the waiting GPRs in queue order with their global position,
 * then the Pending ones (waiting for an admin's approval).  Against a server without that route it
 * falls back to GET /api/v1/gpr/list: the Queued GPRs the caller may see, ordered by estimated start.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/ctl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char get_help[] =
	"usage: egsctl get RESOURCE [NAME...] [options]\n"
	"\n"
	"Lists objects.  RESOURCE is one of:\n"
	"  gprs (gpr)              GPU provision requests; NAME is a gprId (or gpr/ID)\n"
	"  workspaces (ws)         slice workspaces\n"
	"  nodes (node)            GPU nodes of the inventory\n"
	"  gpus (gpu)              GPUs with their latest samples (admins)\n"
	"  clusters (cluster)      registered clusters and their agents\n"
	"  events (ev)             events, newest first\n"
	"  queue (q)               waiting GPRs in the order they will start\n"
	"  policies (policy)       workspace policies (NAME is a workspace) and the global one\n"
	"  gprtemplates (template) GPR templates: request shapes (docs/templates.md)\n"
	"  gprtemplatebindings     which templates each workspace may use (NAME is a workspace)\n"
	"  audit                   the audit log of writes, oldest first (admins without a project)\n"
	"  inference-endpoints (ie) a workspace's inference endpoints (-w; docs/kubernetes.md)\n"
	"\n"
	"options:\n"
	"  -w, --workspace NAME    only this workspace (gprs, events, queue; inference-endpoints need it)\n"
	"  --status STATE          only GPRs in this state (Queued, Provisioned, ...)\n"
	"  --cluster NAME          only this cluster (nodes, gpus)\n"
	"  --gpr ID                only events of this GPR\n"
	"  --type Normal|Warning   only events of this type\n"
	"  --since DURATION        only events (audit entries) newer than this (1h, 30m)\n"
	"  --until TIME            only audit entries older than this (RFC 3339 or a duration)\n"
	"  --actor KEY             only audit entries of this API key (id or name)\n"
	"  --limit N               at most N events or audit entries (default 100)\n"
	"  -o FORMAT               table, wide, json, yaml or name\n"
	"\n"
	"examples:\n"
	"  egsctl get gprs -w team-a\n"
	"  egsctl get queue -o wide\n"
	"  egsctl get gpr gpr-00000001-ab12 -o yaml\n"
	"  egsctl get events --type Warning --since 1h\n"
	"  egsctl get audit --since 24h --actor alice\n"
	"  egsctl get policy team-a -o yaml\n";

struct get_opts {
	const char *workspace, *status, *cluster, *gpr, *type, *since, *limit, *until, *actor;
	const char *names[16];
	int nnames;
};

static void keep_only(json_t *items, const char *key, const char *value);

/* ---- shared cells ---- */

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

/* "2x8": nodes x GPUs per node. */
static void gpus_cell(json_t *g, char *buf, size_t n)
{
	char gpus[32];
	ctl_num_text(g, "numberOfGPUs", gpus, sizeof(gpus));
	snprintf(buf, n, "%lldx%.12s", ctl_int_of(g, "numberOfGPUNodes"), gpus);
}

/* A GPR's provisioningStatus: under status in GPR objects, at the top in queue entries. */
static const char *state_of(json_t *g)
{
	const char *s = ctl_str(g, "provisioningStatus");
	return *s ? s : ctl_str(json_object_get(g, "status"), "provisioningStatus");
}

/* The wait of a waiting GPR from the server's estimatedWaitTime ("1h2m0s" -> "1h2m"). */
static void wait_cell(json_t *g, char *buf, size_t n)
{
	const char *state = state_of(g), *why;
	const char *w = ctl_str(g, "estimatedWaitTime");
	int64_t secs;

	if (strcmp(state, "Queued") != 0 && strcmp(state, "Pending") != 0)
		egs_strlcpy(buf, "-", n);
	else if (!*w || !egs_duration_parse(w, &secs, &why))
		egs_strlcpy(buf, strcmp(state, "Pending") ? "unknown" : "approval", n);
	else
		ctl_duration_text(secs, buf, n);
}

static int cmp_id(const void *a, const void *b)
{
	return strcmp(ctl_str(*(json_t *const *)a, "gprId"), ctl_str(*(json_t *const *)b, "gprId"));
}

/* Sorts an array of GPRs by gprId (ids lead with the creation sequence). */
static void sort_by_id(json_t *items)
{
	ctl_sort_json(items, cmp_id);
}

/* Prints items (or the one named object) in json, yaml or name format; false for tables. */
static bool print_structured(struct ctl *c, json_t *items, bool single, const char *kind, const char *key)
{
	json_t *wrap;
	size_t i;
	json_t *o;

	if (c->format == CTL_OUT_NAME) {
		json_array_foreach(items, i, o)
			printf("%s/%s\n", kind, ctl_str(o, key));
		return true;
	}
	if (single && json_array_size(items) == 1)
		return ctl_print_data(c, json_array_get(items, 0));
	wrap = json_pack("{s:O}", "items", items);
	bool done = ctl_print_data(c, wrap);
	json_decref(wrap);
	return done;
}

/* ---- gprs ---- */

static void gpr_row(struct ctl_table *t, json_t *g, bool wide)
{
	json_t *st = json_object_get(g, "status");
	char gpus[32], wait[32], prio[16], dur[32], nodes[512] = "";
	int64_t secs;
	const char *why;
	size_t i, used = 0;
	json_t *n;

	gpus_cell(g, gpus, sizeof(gpus));
	wait_cell(g, wait, sizeof(wait));
	snprintf(prio, sizeof(prio), "%lld", ctl_int_of(g, "priority"));
	if (!wide) {
		ctl_table_add(t, ctl_str(g, "gprId"), ctl_str(g, "gprName"), ctl_str(g, "sliceName"),
			      ctl_str(st, "provisioningStatus"), prio, gpus, wait);
		return;
	}
	secs = 0;
	egs_duration_parse(ctl_str(g, "exitDuration"), &secs, &why);
	ctl_duration_text(secs, dur, sizeof(dur));
	json_array_foreach(json_object_get(st, "nodes"), i, n)
		used += (size_t)snprintf(nodes + used, used < sizeof(nodes) ? sizeof(nodes) - used : 0, "%s%s", i ? "," : "",
					 json_string_value(n) ? json_string_value(n) : "");
	ctl_table_add(t, ctl_str(g, "gprId"), ctl_str(g, "gprName"), ctl_str(g, "sliceName"),
		      ctl_str(st, "provisioningStatus"), prio, gpus, wait, or_dash(ctl_str(g, "clusterName")),
		      or_dash(ctl_str(g, "gpuShape")), dur, or_dash(ctl_str(st, "startTimestamp")),
		      or_dash(ctl_str(st, "exitTimestamp")), or_dash(nodes));
}

static void print_gprs(struct ctl *c, json_t *items, bool single)
{
	static const char *const headers[] = {"ID", "NAME", "WORKSPACE", "STATUS", "PRIORITY", "GPUS", "WAIT",
					      "CLUSTER", "SHAPE", "DURATION", "STARTED", "EXIT", "NODES"};
	bool wide = c->format == CTL_OUT_WIDE;
	struct ctl_table *t;
	size_t i;
	json_t *g;

	if (print_structured(c, items, single, "gpr", "gprId"))
		return;
	if (json_array_size(items) == 0) {
		fprintf(stderr, "No GPRs found.\n");
		return;
	}
	t = ctl_table_new(headers, wide ? 13 : 7);
	json_array_foreach(items, i, g)
		gpr_row(t, g, wide);
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

/* The GPRs named by id, each fetched; the first failure ends the listing. */
static int fetch_named(struct ctl *c, struct egs_client *cl, const struct get_opts *o, json_t **items)
{
	char what[128];

	*items = json_array();
	for (int i = 0; i < o->nnames; i++) {
		json_t *g = NULL;
		enum egs_err err = egs_client_gpr_status(cl, o->names[i], &g);
		if (err) {
			snprintf(what, sizeof(what), "gpr %s", o->names[i]);
			return ctl_fail(c, err, what);
		}
		json_array_append_new(*items, g);
	}
	return CTL_OK;
}

static int get_gprs(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	json_t *items = NULL;
	const char *state = o->status ? ctl_state_name(o->status) : NULL;
	enum egs_err err;
	int rc = CTL_OK;

	if (o->status && !state)
		return ctl_usage(c, "--status %s is not a GPR state (Pending, Queued, Provisioning, Provisioned, "
				    "Releasing, Complete, Cancelled, Rejected, Error)", o->status);
	if (o->nnames > 0) {
		rc = fetch_named(c, cl, o, &items);
	} else {
		err = egs_client_gpr_list(cl, o->workspace, state, &items);
		if (err)
			rc = ctl_fail(c, err, "list gprs");
		else
			sort_by_id(items);
	}
	if (rc == CTL_OK)
		print_gprs(c, items, o->nnames == 1);
	json_decref(items);
	return rc;
}

/* ---- queue ---- */

static void print_queue(struct ctl *c, json_t *items)
{
	static const char *const headers[] = {"POS", "ID", "NAME", "WORKSPACE", "STATUS", "PRIORITY", "GPUS",
					      "WAIT", "ESTIMATED START", "SHAPE", "CLUSTER"};
	struct ctl_table *t;
	size_t i;
	json_t *g;

	if (print_structured(c, items, false, "gpr", "gprId"))
		return;
	if (json_array_size(items) == 0) {
		fprintf(stderr, "The queue is empty.\n");
		return;
	}
	t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 11 : 9);
	json_array_foreach(items, i, g) {
		char pos[24], gpus[48], wait[32], prio[24];
		json_t *p = json_object_get(g, "position");
		bool queued = !strcmp(state_of(g), "Queued");
		snprintf(pos, sizeof(pos), "%lld", p ? (long long)json_integer_value(p) : (long long)i + 1);
		snprintf(prio, sizeof(prio), "%lld", ctl_int_of(g, "priority"));
		gpus_cell(g, gpus, sizeof(gpus));
		wait_cell(g, wait, sizeof(wait));
		ctl_table_add(t, queued && (!p || json_is_integer(p)) ? pos : "-", ctl_str(g, "gprId"), ctl_str(g, "gprName"),
			      ctl_str(g, "sliceName"), state_of(g), prio, gpus, wait,
			      or_dash(ctl_str(g, "estimatedStartTime")), or_dash(ctl_str(g, "gpuShape")),
			      or_dash(ctl_str(g, "clusterName")));
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

/* The queue of a server without GET /api/v1/queue, from the GPR listings. */
static int queue_from_list(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	json_t *queued = NULL, *pending = NULL;
	enum egs_err err = egs_client_gpr_list(cl, o->workspace, "Queued", &queued);
	int rc = CTL_OK;

	if (!err)
		err = egs_client_gpr_list(cl, o->workspace, "Pending", &pending);
	if (err) {
		rc = ctl_fail(c, err, "list the queue");
		goto out;
	}
	ctl_sort_queue(queued);
	sort_by_id(pending);
	json_array_extend(queued, pending);
	print_queue(c, queued);
out:
	json_decref(queued);
	json_decref(pending);
	return rc;
}

static int get_queue(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	json_t *ans = NULL, *items;
	enum egs_err err = egs_client_queue(cl, &ans);

	if (err == EGS_ERR_NOT_FOUND && !strcmp(egs_client_errkey(cl), "ROUTE_NOT_FOUND"))
		return queue_from_list(c, cl, o);
	if (err)
		return ctl_fail(c, err, "get the queue");
	items = json_object_get(ans, "items");
	if (!json_is_array(items)) {
		items = json_array();
		json_object_set_new(ans, "items", items);
	}
	keep_only(items, "sliceName", o->workspace);
	if (c->format == CTL_OUT_JSON || c->format == CTL_OUT_YAML)
		ctl_print_data(c, ans); /* with the server's groups and queueLength */
	else
		print_queue(c, items);
	json_decref(ans);
	return CTL_OK;
}

/* ---- workspaces, nodes, gpus, clusters ---- */

/* "a,b,c" of an array of strings, or of member key of an array of objects. */
static void join(json_t *arr, const char *key, char *buf, size_t n)
{
	size_t i, used = 0;
	json_t *x;

	buf[0] = '\0';
	json_array_foreach(arr, i, x) {
		const char *s = key ? ctl_str(x, key) : json_string_value(x);
		if (used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", s ? s : "");
	}
}

static int get_workspaces(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"NAME", "CLUSTERS", "NAMESPACES", "DESCRIPTION"};
	json_t *items = NULL, *w;
	enum egs_err err = egs_client_workspace_list(cl, &items);
	struct ctl_table *t;
	size_t i;

	if (err)
		return ctl_fail(c, err, "list workspaces");
	for (i = json_array_size(items); o->nnames > 0 && i-- > 0;) { /* keep the named ones */
		bool keep = false;
		for (int j = 0; j < o->nnames; j++)
			keep = keep || !strcmp(ctl_str(json_array_get(items, i), "name"), o->names[j]);
		if (!keep)
			json_array_remove(items, i);
	}
	if (o->nnames > 0 && json_array_size(items) < (size_t)o->nnames) {
		json_decref(items);
		return ctl_errorf(c, CTL_NOT_FOUND, "workspace not found (see `egsctl get workspaces`)");
	}
	if (!print_structured(c, items, o->nnames == 1, "workspace", "name")) {
		t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 4 : 3);
		json_array_foreach(items, i, w) {
			char cl_s[512], ns[512];
			join(json_object_get(w, "clusters"), NULL, cl_s, sizeof(cl_s));
			join(json_object_get(w, "namespaces"), "namespace", ns, sizeof(ns));
			ctl_table_add(t, ctl_str(w, "name"), cl_s, ns, or_dash(ctl_str(w, "sliceDescription")));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(items);
	return CTL_OK;
}

/* Drops the items whose member key is not value (value NULL keeps everything). */
static void keep_only(json_t *items, const char *key, const char *value)
{
	for (size_t i = json_array_size(items); value && i-- > 0;)
		if (strcmp(ctl_str(json_array_get(items, i), key), value) != 0)
			json_array_remove(items, i);
}

static int get_nodes(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"NAME", "CLUSTER", "SHAPE", "GPUS", "HEALTH", "STATUS", "INSTANCE",
					      "MEMORY/GPU", "GPR", "LAST HEARTBEAT"};
	json_t *items = NULL, *n;
	enum egs_err err = egs_client_inventory(cl, &items);
	struct ctl_table *t;
	size_t i;

	if (err)
		return ctl_fail(c, err, "list nodes");
	keep_only(items, "clusterName", o->cluster);
	if (!print_structured(c, items, false, "node", "gpuNodeName")) {
		t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 10 : 6);
		json_array_foreach(items, i, n) {
			char gpus[32], mem[32];
			json_t *alloc = json_array_get(json_object_get(n, "allocation"), 0);
			snprintf(gpus, sizeof(gpus), "%lld/%lld", ctl_int_of(n, "availableGPUs"), ctl_int_of(n, "gpuCount"));
			snprintf(mem, sizeof(mem), "%lldMi", ctl_int_of(n, "memory"));
			ctl_table_add(t, ctl_str(n, "gpuNodeName"), ctl_str(n, "clusterName"), ctl_str(n, "gpuShape"), gpus,
				      ctl_str(n, "nodeHealth"), ctl_str(n, "gpuNodeStatus"), ctl_str(n, "instanceType"), mem,
				      or_dash(ctl_str(alloc, "gprId")), or_dash(ctl_str(n, "lastHeartbeat")));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(items);
	return CTL_OK;
}

static int get_gpus(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"NODE", "INDEX", "SHAPE", "GPR", "POWER", "TEMP", "UTIL",
					      "CLUSTER", "MEM USED", "UUID"};
	json_t *items = NULL, *g;
	enum egs_err err = egs_client_gpus(cl, &items);
	struct ctl_table *t;
	size_t i;

	if (err)
		return ctl_fail(c, err, "list gpus");
	keep_only(items, "clusterName", o->cluster);
	if (!print_structured(c, items, false, "gpu", "uuid")) {
		t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 10 : 7);
		json_array_foreach(items, i, g) {
			char idx[16], pw[32], tc[32], ut[32], mem[32];
			snprintf(idx, sizeof(idx), "%lld", ctl_int_of(g, "index"));
			snprintf(pw, sizeof(pw), "%.0fW", json_number_value(json_object_get(g, "powerW")));
			snprintf(tc, sizeof(tc), "%.0fC", json_number_value(json_object_get(g, "tempC")));
			snprintf(ut, sizeof(ut), "%.0f%%", json_number_value(json_object_get(g, "utilPct")));
			snprintf(mem, sizeof(mem), "%lldMi", ctl_int_of(g, "memUsedMiB"));
			ctl_table_add(t, ctl_str(g, "gpuNodeName"), idx, ctl_str(g, "gpuShape"), or_dash(ctl_str(g, "gprId")),
				      pw, tc, ut, ctl_str(g, "clusterName"), mem, ctl_str(g, "uuid"));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(items);
	return CTL_OK;
}

static int get_clusters(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"NAME", "PROJECT", "AGENT", "NODES", "GPUS", "API SERVER", "LAST SEEN"};
	json_t *items = NULL, *x;
	struct ctl_table *t;
	enum egs_err err;
	size_t i;

	if (o->nnames > 1)
		return ctl_usage(c, "get clusters takes at most one name");
	err = egs_client_clusters(cl, &items);
	if (err)
		return ctl_fail(c, err, "list clusters");
	keep_only(items, "clusterName", o->nnames ? o->names[0] : NULL);
	if (o->nnames > 0 && json_array_size(items) == 0) {
		json_decref(items);
		return ctl_errorf(c, CTL_NOT_FOUND, "cluster %s not found", o->names[0]);
	}
	if (!print_structured(c, items, o->nnames == 1, "cluster", "clusterName")) {
		t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 7 : 5);
		json_array_foreach(items, i, x) {
			char nodes[16], gpus[16];
			snprintf(nodes, sizeof(nodes), "%lld", ctl_int_of(x, "nodes"));
			snprintf(gpus, sizeof(gpus), "%lld", ctl_int_of(x, "gpus"));
			ctl_table_add(t, ctl_str(x, "clusterName"), ctl_str(x, "projectName"),
				      json_is_true(json_object_get(x, "agentConnected")) ? "Connected" : "Disconnected", nodes,
				      gpus, or_dash(ctl_str(x, "apiServer")), or_dash(ctl_str(x, "lastSeen")));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(items);
	return CTL_OK;
}

/* ---- policies ---- */

/* One limit's value as a cell: "1-200", "640GB", "A,B", "6h0m0s", "4"; NULL when v is absent. */
static const char *limit_cell(const char *key, json_t *v, char *buf, size_t n)
{
	if (!v || json_is_null(v))
		return NULL;
	if (!strcmp(key, "priorityRange"))
		snprintf(buf, n, "%lld-%lld", ctl_int_of(v, "min"), ctl_int_of(v, "max"));
	else if (!strcmp(key, "gpuShapes"))
		join(v, NULL, buf, n);
	else if (!strcmp(key, "maxMemoryPerGpr"))
		snprintf(buf, n, "%lldGB", (long long)json_integer_value(v));
	else if (json_is_string(v))
		snprintf(buf, n, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, n, "default %s", json_is_true(v) ? "true" : "false");
	else
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	return buf;
}

/* Rows WORKSPACE LIMIT HARD SOFT of one policy object (workspace "*" is the global policy). */
static void policy_rows(struct ctl_table *t, const char *ws, json_t *p)
{
	static const char *const keys[] = {"maxGPRs", "maxExitDurationPerGPR", "priorityRange", "gpuShapes",
					   "maxGPUPerGpr", "maxMemoryPerGpr", "concurrentGpuQuota", "maxNodesPerGpr",
					   "enableAutoEviction", "requeueOnFailure"};
	json_t *soft = json_object_get(p, "softLimits");
	char hard_s[512], soft_s[512];
	bool any = false;

	for (size_t i = 0; i < EGS_ARRAY_LEN(keys); i++) {
		const char *h = limit_cell(keys[i], json_object_get(p, keys[i]), hard_s, sizeof(hard_s));
		const char *sv = limit_cell(keys[i], json_object_get(soft, keys[i]), soft_s, sizeof(soft_s));
		if (h || sv)
			ctl_table_add(t, ws, keys[i], or_dash(h), or_dash(sv));
		any = any || h || sv;
	}
	if (!any)
		ctl_table_add(t, ws, "(no policy)", "-", "-");
}

static int get_policies(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"WORKSPACE", "LIMIT", "HARD", "SOFT"};
	json_t *items = json_array(), *ws = NULL, *p, *global = NULL, *w;
	enum egs_err err = EGS_OK;
	struct ctl_table *t;
	size_t i;

	if (o->nnames == 0 && (err = egs_client_workspace_list(cl, &ws)) != EGS_OK)
		goto fail;
	for (int j = 0; j < o->nnames && !err; j++)
		if ((err = egs_client_policy_get(cl, o->names[j], &p)) == EGS_OK)
			json_array_append_new(items, p);
	json_array_foreach(ws, i, w) /* every workspace the key sees, those with a policy */
		if (!err && (err = egs_client_policy_get(cl, ctl_str(w, "name"), &p)) == EGS_OK) {
			if (json_object_size(p) > 1)
				json_array_append(items, p);
			json_decref(p);
		}
	if (err || (o->nnames == 0 && (err = egs_client_policy_global(cl, &global)) != EGS_OK))
		goto fail;
	json_decref(ws);
	if (!print_structured(c, items, o->nnames == 1, "workspacepolicy", "workspaceName")) {
		t = ctl_table_new(headers, 4);
		if (global)
			policy_rows(t, "* (global)", global);
		json_array_foreach(items, i, p)
			policy_rows(t, ctl_str(p, "workspaceName"), p);
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(global);
	json_decref(items);
	return CTL_OK;
fail:
	json_decref(ws);
	json_decref(items);
	return ctl_fail(c, err, "get policy");
}

/* ---- events ---- */

static int get_events(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "COUNT", "WORKSPACE"};
	struct egs_client_event_filter f = {o->workspace, o->gpr, o->type, o->since, 0};
	int64_t now = (int64_t)time(NULL);
	json_t *items = NULL, *e;
	struct ctl_table *t;
	enum egs_err err;
	long limit = 0;
	size_t i;

	if (o->limit && !ctl_int(c, "--limit", o->limit, 1, 1000, &limit))
		return CTL_USAGE;
	f.limit = (int)limit;
	err = egs_client_events(cl, &f, &items);
	if (err)
		return ctl_fail(c, err, "list events");
	if (!print_structured(c, items, false, "event", "reason")) {
		t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 7 : 5);
		json_array_foreach(items, i, e) {
			json_t *obj = json_object_get(e, "involvedObject");
			char age[32], what[200], count[16];
			ctl_age(ctl_str(e, "lastTimestamp"), now, age, sizeof(age));
			snprintf(what, sizeof(what), "%s/%s", ctl_str(obj, "kind"), ctl_str(obj, "name"));
			snprintf(count, sizeof(count), "%lld", ctl_int_of(e, "count"));
			ctl_table_add(t, age, ctl_str(e, "type"), ctl_str(e, "reason"), what, ctl_str(e, "message"), count,
				      or_dash(ctl_str(e, "workspace")));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(items);
	return CTL_OK;
}

/* ---- the audit log ---- */

static int get_audit(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"TIME", "ACTOR", "ROLE", "METHOD", "ROUTE", "TARGET", "STATUS", "PEER",
					      "ERROR", "KEY ID"};
	struct egs_client_audit_filter f = {o->since, o->until, o->actor, NULL, 0};
	json_t *answer = NULL, *items, *e;
	long limit = 0;
	size_t i;

	if (o->limit && !ctl_int(c, "--limit", o->limit, 1, 1000, &limit))
		return CTL_USAGE;
	f.limit = (int)limit;
	enum egs_err err = egs_client_audit(cl, &f, &answer);
	if (err)
		return ctl_fail(c, err, "read the audit log");
	items = json_object_get(answer, "items");
	if (!print_structured(c, items, false, "audit", "id")) {
		struct ctl_table *t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 10 : 8);
		json_array_foreach(items, i, e) {
			json_t *who = json_object_get(e, "actor");
			char status[16];
			snprintf(status, sizeof(status), "%lld", ctl_int_of(e, "status"));
			ctl_table_add(t, ctl_str(e, "time"), ctl_str(who, "keyName"), ctl_str(who, "role"), ctl_str(e, "method"),
				      ctl_str(e, "route"), or_dash(ctl_str(e, "target")), status, ctl_str(e, "peer"),
				      or_dash(ctl_str(e, "errorKey")), ctl_str(who, "keyId"));
		}
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(answer);
	return CTL_OK;
}

/* ---- inference endpoints ---- */

static int get_endpoints(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	static const char *const headers[] = {"NAME", "STATUS", "MODEL", "CLUSTER", "NAMESPACE", "ENDPOINT"};
	json_t *answer = NULL, *items, *e;
	const char *why = NULL;
	char path[160];
	size_t i;

	if (!o->workspace)
		return ctl_usage(c, "get inference-endpoints needs -w WORKSPACE");
	if (!egs_dns_label_valid(o->workspace, &why))
		return ctl_usage(c, "-w %s: a workspace name %s", o->workspace, why);
	snprintf(path, sizeof(path), "/api/v1/inference-endpoint/list?workspace=%s", o->workspace);
	enum egs_err err = egs_client_call(cl, "GET", path, NULL, c->request_timeout_s, NULL, &answer);
	if (err)
		return ctl_fail(c, err, "list inference endpoints");
	items = json_object_get(answer, "endpoints");
	for (i = json_array_size(items); o->nnames > 0 && i-- > 0;) { /* keep the named ones */
		bool keep = false;
		for (int j = 0; j < o->nnames; j++)
			keep = keep || !strcmp(ctl_str(json_array_get(items, i), "endpointName"), o->names[j]);
		if (!keep)
			json_array_remove(items, i);
	}
	if (!print_structured(c, items, false, "inferenceendpoint", "endpointName")) {
		struct ctl_table *t = ctl_table_new(headers, c->format == CTL_OUT_WIDE ? 6 : 5);
		json_array_foreach(items, i, e)
			ctl_table_add(t, ctl_str(e, "endpointName"), ctl_str(e, "status"), ctl_str(e, "modelName"),
				      ctl_str(e, "clusterName"), ctl_str(e, "namespace"), or_dash(ctl_str(e, "endpoint")));
		ctl_table_print(t, stdout);
		ctl_table_free(t);
	}
	json_decref(answer);
	return CTL_OK;
}

/* ---- GPR templates and bindings (ctl_template.c) ---- */

static int get_templates(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	return ctl_get_templates(c, cl, false, o->names, o->nnames);
}

static int get_bindings(struct ctl *c, struct egs_client *cl, const struct get_opts *o)
{
	return ctl_get_templates(c, cl, true, o->names, o->nnames);
}

/* ---- dispatch ---- */

struct resource {
	const char *names[4];
	int (*fn)(struct ctl *c, struct egs_client *cl, const struct get_opts *o);
	bool named; /* takes names after the resource */
};

static const struct resource resources[] = {
	{{"gprs", "gpr", "gpuprovisioningrequests", "gpuprovisioningrequest"}, get_gprs, true},
	{{"workspaces", "workspace", "ws", "sliceworkspaces"}, get_workspaces, true},
	{{"nodes", "node", "no", NULL}, get_nodes, false},
	{{"gpus", "gpu", NULL, NULL}, get_gpus, false},
	{{"clusters", "cluster", NULL, NULL}, get_clusters, true},
	{{"events", "event", "ev", NULL}, get_events, false},
	{{"queue", "q", NULL, NULL}, get_queue, false},
	{{"policies", "policy", "workspacepolicies", "workspacepolicy"}, get_policies, true},
	{{"gprtemplates", "gprtemplate", "templates", "template"}, get_templates, true},
	{{"gprtemplatebindings", "gprtemplatebinding", "templatebindings", "templatebinding"}, get_bindings, true},
	{{"audit", "auditlog", NULL, NULL}, get_audit, false},
	{{"inference-endpoints", "inference-endpoint", "inferenceendpoints", "ie"}, get_endpoints, true},
};

static const struct resource *find_resource(const char *name)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(resources); i++)
		for (size_t j = 0; j < 4 && resources[i].names[j]; j++)
			if (!strcasecmp(resources[i].names[j], name))
				return &resources[i];
	return NULL;
}

/* A name as given, or after its "KIND/" prefix when KIND names resource r ("gpr/ID" for gprs, as
 * create and describe print it); NULL when the prefix names another resource. */
static const char *strip_kind(const struct resource *r, const char *name)
{
	const char *slash = strchr(name, '/');
	char kind[40];

	if (!slash || (size_t)(slash - name) >= sizeof(kind))
		return name;
	memcpy(kind, name, (size_t)(slash - name));
	kind[slash - name] = '\0';
	return find_resource(kind) == r ? slash + 1 : NULL;
}

int ctl_cmd_get(struct ctl *c, int argc, char **argv)
{
	struct get_opts o = {0};
	const struct ctl_opt opts[] = {
		{"workspace", 'w', &o.workspace, NULL, NULL}, {"status", 0, &o.status, NULL, NULL},
		{"cluster", 0, &o.cluster, NULL, NULL},       {"gpr", 0, &o.gpr, NULL, NULL},
		{"type", 0, &o.type, NULL, NULL},             {"since", 0, &o.since, NULL, NULL},
		{"limit", 0, &o.limit, NULL, NULL},           {"until", 0, &o.until, NULL, NULL},
		{"actor", 0, &o.actor, NULL, NULL},           {NULL, 0, NULL, NULL, NULL},
	};
	const char *pos[17];
	char kind[40];
	const struct resource *r;
	struct egs_client *cl;
	int npos, rc;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 17, &npos, &help);
	if (rc || help)
		return ctl_help(rc, help, get_help);
	if (npos == 0)
		return ctl_usage(c, "name a resource: gprs, workspaces, nodes, gpus, clusters, events, queue, policies, gprtemplates, gprtemplatebindings, audit or inference-endpoints (see --help)");
	if (npos == 1 && strchr(pos[0], '/')) { /* get gpr/ID: the resource and one name */
		size_t n = (size_t)(strchr(pos[0], '/') - pos[0]);
		r = NULL;
		if (n < sizeof(kind)) {
			memcpy(kind, pos[0], n);
			kind[n] = '\0';
			r = find_resource(kind);
		}
		if (!r || !r->named)
			return ctl_usage(c, "'%s' is not RESOURCE/NAME of a resource that takes names", pos[0]);
		pos[1] = pos[0];
		npos = 2;
		goto named;
	}
	r = find_resource(pos[0]);
	if (!r)
		return ctl_usage(c, "unknown resource '%s': use gprs, workspaces, nodes, gpus, clusters, events, queue, policies, gprtemplates, gprtemplatebindings, audit or inference-endpoints",
				 pos[0]);
	if (npos > 1 && !r->named)
		return ctl_usage(c, "get %s takes no names (filter with the options of --help)", r->names[0]);
named:
	for (int i = 1; i < npos; i++) {
		const char *name = strip_kind(r, pos[i]);
		if (!name || !*name)
			return ctl_usage(c, "'%s' does not name a %s", pos[i], r->names[1]);
		o.names[o.nnames++] = name;
	}
	cl = ctl_client(c, &rc);
	return cl ? r->fn(c, cl, &o) : rc;
}
