/*
 * views.c: the wire JSON of each object, with the exact field names of the public EGS API
 * (../shared/reference/egs-api.md).  Pure formatting: nothing here changes state.
 */
#include "server/server.h"

#include "server/gpr_render.h"

#include "core/gpr.h"
#include "core/sched.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <string.h>

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static json_t *time_or_null(int64_t t)
{
	if (!t)
		return json_null();
	char b[32];
	egs_time_format(t, b, sizeof(b));
	return json_string(b);
}

static json_t *duration(int64_t s)
{
	char b[48];
	egs_duration_format(s, b, sizeof(b));
	return json_string(b);
}

static json_t *strlist(const struct egs_strlist *l)
{
	json_t *a = json_array();
	for (size_t i = 0; i < l->n; i++)
		json_array_append_new(a, json_string(l->v[i]));
	return a;
}

static const char *internal_state(enum egs_gpr_state s)
{
	switch (s) {
	case EGS_GPR_PROVISIONING:
	case EGS_GPR_PROVISIONED: return "Provisioned";
	case EGS_GPR_RELEASING:
	case EGS_GPR_COMPLETE: return "Released";
	case EGS_GPR_PENDING:
	case EGS_GPR_QUEUED: return "Queued";
	default: return "Released";
	}
}

/* The latest check run of each node and phase, oldest first: [{node, phase, time, ok, checks}]. */
static json_t *check_runs(const struct egs_gpr *g)
{
	json_t *a = json_array();
	for (size_t i = 0; i < g->n_check_runs; i++) {
		const struct egs_check_run *run = &g->check_runs[i];
		const char *slash = strchr(run->node, '/');
		json_t *checks = json_loads(run->checks, 0, NULL);
		EGS_ASSERT(json_is_array(checks)); /* written by api_agent.c from a validated array */
		json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:b, s:o}", "node", slash ? slash + 1 : run->node,
						   "phase", run->post ? "post" : "pre", "time", time_or_null(run->time),
						   "ok", run->ok, "checks", checks));
	}
	return a;
}

/* A number of GPUs given in hundredths: an integer when whole (2), else a number (0.2). */
static json_t *gpus_json(int centi)
{
	return centi % EGS_SHARE_WHOLE ? json_real(centi / (double)EGS_SHARE_WHOLE) : json_integer(centi / EGS_SHARE_WHOLE);
}

void egs_gpr_facts(const struct egs_gpr *g, int64_t now, struct egs_gpr_facts *f)
{
	bool waiting = g->state == EGS_GPR_QUEUED || g->state == EGS_GPR_PENDING;
	f->est = waiting ? g->est_start : g->start_ts ? g->start_ts : g->state == EGS_GPR_PROVISIONING ? g->phase_since : 0;
	f->has_wait = (waiting && g->est_start) || f->est;
	f->wait = waiting && g->est_start && g->est_start > now ? g->est_start - now : 0;
	f->allocated = egs_gpr_is_active(g) && g->state != EGS_GPR_RELEASING ? g->gpus_per_node * (int)g->nodes.n : 0;
	f->remaining = g->state == EGS_GPR_PROVISIONED && g->exit_at > now ? g->exit_at - now : 0;
	f->internal_state = internal_state(g->state);
	f->timed = f->wait > 0 || f->remaining > 0;
}

json_t *egs_json_gpr(struct egs_server *srv, const struct egs_gpr *g)
{
	int64_t now = egs_now(srv);
	return egs_json_gpr_at(g, now, egs_gpr_cost(srv, g, now));
}

json_t *egs_json_gpr_at(const struct egs_gpr *g, int64_t now, double cost_value)
{
	struct egs_gpr_facts f;
	egs_gpr_facts(g, now, &f);
	json_t *nodes = json_array();
	for (size_t i = 0; i < g->nodes.n; i++) {
		const char *slash = strchr(g->nodes.v[i], '/');
		json_array_append_new(nodes, json_string(slash ? slash + 1 : g->nodes.v[i]));
	}
	char cost[400]; /* "%.2f" of DBL_MAX is 312 bytes */
	snprintf(cost, sizeof(cost), "%.2f", cost_value);
	json_t *status = json_pack(
		"{s:s, s:o, s:o, s:o, s:o, s:s, s:o, s:s, s:i, s:i, s:o, s:o, s:o, s:o}",
		"provisioningStatus", egs_gpr_state_name(g->state),
		"failureReason", json_string(g->failure_reason ? g->failure_reason : ""),
		"numGpusAllocated", g->share_centi ? gpus_json(f.allocated ? g->share_centi : 0) : json_integer(f.allocated),
		"startTimestamp", time_or_null(g->start_ts),
		"completionTimestamp", time_or_null(g->completion_ts),
		"cost", cost,
		"nodes", nodes,
		"internalState", f.internal_state,
		"retryCount", g->retry_count,
		"delayedCount", g->delayed_count,
		"pendingReason", str_or_null(g->pending_reason),
		"exitTimestamp", time_or_null(g->exit_at),
		"remainingDuration", duration(f.remaining),
		"createdTimestamp", time_or_null(g->created_at));
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:o, s:i, s:s, s:I, s:I, s:i, s:s, s:o, s:o, s:o, s:b, s:s, s:b, s:b, s:b, s:b,"
		" s:s, s:b, s:b, s:b, s:o, s:b, s:b, s:o}",
		"gprId", g->id,
		"gprName", g->name,
		"sliceName", g->workspace,
		"clusterName", g->cluster,
		"numberOfGPUs", g->share_centi ? gpus_json(g->share_centi) : json_integer(g->gpus_per_node),
		"numberOfGPUNodes", g->node_count,
		"instanceType", g->instance_type,
		"memoryPerGPU", (json_int_t)g->memory_mib,
		"memoryPerGpu", (json_int_t)g->memory_mib,
		"priority", g->priority,
		"gpuSharingMode", g->share_centi ? "Shared" : "Dedicated",
		"estimatedStartTime", time_or_null(f.est),
		"estimatedWaitTime", f.has_wait ? duration(f.wait) : json_null(),
		"exitDuration", duration(g->exit_duration_s),
		"earlyRelease", (g->flags & EGS_GPRF_EARLY_RELEASE) != 0,
		"gpuShape", g->gpu_shape,
		"multiNode", g->node_count > 1,
		"dedicatedNodes", !g->share_centi, /* a shared GPR's node also serves other workspaces */
		"enableRDMA", (g->flags & EGS_GPRF_RDMA) != 0,
		"enableSecondaryNetwork", (g->flags & EGS_GPRF_SECONDARY_NET) != 0,
		"idleTimeOutDuration", "",
		"enforceIdleTimeOut", (g->flags & EGS_GPRF_ENFORCE_IDLE) != 0,
		"enableEviction", (g->flags & EGS_GPRF_EVICTION) != 0,
		"requeueOnFailure", (g->flags & EGS_GPRF_REQUEUE) != 0,
		"preferredClusters", strlist(&g->preferred_clusters),
		"enableAutoClusterSelection", (g->flags & EGS_GPRF_AUTO_CLUSTER) != 0,
		"enableAutoGpuSelection", (g->flags & EGS_GPRF_AUTO_GPU) != 0,
		"status", status);
	EGS_ASSERT(o);
	if (g->n_check_runs)
		json_object_set_new(status, "checks", check_runs(g));
	json_object_set_new(status, "evictedBy", g->evicted_by[0] ? json_string(g->evicted_by) : json_null());
	if (g->idle_timeout_s)
		json_object_set_new(o, "idleTimeOutDuration", duration(g->idle_timeout_s));
	return o;
}

json_t *egs_json_gpr_queued(const struct egs_gpr *g, int64_t now)
{
	struct egs_gpr_facts f;
	egs_gpr_facts(g, now, &f);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:i, s:o, s:o, s:s}", "gprId", g->id, "gprName",
			      g->name, "sliceName", g->workspace, "clusterName", g->cluster, "gpuShape", g->gpu_shape,
			      "instanceType", g->instance_type, "numberOfGPUNodes", g->node_count, "numberOfGPUs",
			      g->share_centi ? gpus_json(g->share_centi) : json_integer(g->gpus_per_node), "priority",
			      g->priority, "estimatedStartTime", time_or_null(f.est), "estimatedWaitTime",
			      f.has_wait ? duration(f.wait) : json_null(), "provisioningStatus",
			      egs_gpr_state_name(g->state));
	EGS_ASSERT(o);
	return o;
}

/* Appends the shares n holds to alloc (one entry per shared GPR) and returns the number of n's GPUs
 * nobody holds a share of (all of them when n holds none). */
static int shared_allocations(const struct egs_node *n, json_t *alloc)
{
	if (!n->shared.len)
		return n->gpu_count;
	for (size_t i = 0; i < n->shared.len; i++) {
		const struct egs_gpr *g = n->shared.items[i];
		char ts[32];
		egs_time_format(g->start_ts ? g->start_ts : g->phase_since, ts, sizeof(ts));
		json_array_append_new(alloc, json_pack("{s:s, s:s, s:s, s:o, s:s}", "gprId", g->id, "gprName", g->name,
						       "sliceName", g->workspace, "totalGPUsAllocated",
						       gpus_json(g->share_centi), "allocationTimeStamp", ts));
	}
	int per_device[EGS_SHARE_DEV_MAX], free_gpus = 0;
	egs_share_node_alloc(n, per_device);
	for (int d = 0; d < n->gpu_count && d < EGS_SHARE_DEV_MAX; d++)
		free_gpus += per_device[d] == 0;
	return free_gpus;
}

json_t *egs_json_node(struct egs_server *srv, const struct egs_node *n)
{
	struct egs_state *st = &srv->st;
	int64_t now = egs_now(srv);
	const struct egs_gpr *g = n->gpr_id[0] ? egs_state_gpr(st, n->gpr_id) : NULL;
	json_t *alloc = json_array();
	int used = 0;
	if (g) {
		used = g->gpus_per_node <= n->gpu_count ? n->gpu_count : g->gpus_per_node; /* dedicated */
		char ts[32];
		egs_time_format(n->allocated_at, ts, sizeof(ts));
		json_array_append_new(alloc, json_pack("{s:s, s:s, s:s, s:i, s:s}", "gprId", g->id, "gprName", g->name,
						       "sliceName", g->workspace, "totalGPUsAllocated", g->gpus_per_node,
						       "allocationTimeStamp", ts));
	}
	int whole_free = shared_allocations(n, alloc);
	const char *health = egs_health_name(n->health);
	bool stale = !egs_node_schedulable(st, n, now) && n->health == EGS_HEALTH_HEALTHY;
	if (stale)
		health = "Unschedulable";
	json_t *gpus = json_array();
	for (int i = 0; i < n->n_gpus; i++) {
		const struct egs_gpu *u = &n->gpus[i];
		json_array_append_new(gpus, json_pack("{s:s, s:i, s:f, s:f, s:f, s:I}", "uuid", u->uuid, "index", u->index,
						      "powerW", u->power_w, "tempC", u->temp_c, "utilPct", u->util_pct,
						      "memUsedMiB", (json_int_t)u->mem_used_mib));
	}
	const char *state = g || json_array_size(alloc) ? "NODE_RESERVED" : "NODE_AVAILABLE";
	json_t *o = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:f, s:f, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}",
		"gpuNodeName", n->name, "gpuShape", n->gpu_shape, "gpuModelName", n->gpu_shape,
		"instanceType", n->instance_type, "clusterName", n->cluster, "memory", (json_int_t)n->memory_mib,
		"gpuCount", n->gpu_count, "availableGPUs", g ? n->gpu_count - used : whole_free,
		"gpuTempThreshold", n->temp_threshold, "gpuPowerThreshold", n->power_threshold,
		"cloudProvider", n->cloud_provider, "region", n->region, "nodeHealth", health,
		"gpuNodeStatus", state, "gpuNodeState", state, "allocation", alloc,
		"lastHeartbeat", time_or_null(n->last_heartbeat), "gpus", gpus);
	EGS_ASSERT(o);
	if (n->address[0])
		json_object_set_new(o, "address", json_string(n->address));
	if (n->zone[0])
		json_object_set_new(o, "zone", json_string(n->zone));
	return o;
}

json_t *egs_json_workspace(const struct egs_workspace *w)
{
	json_t *ns = json_array();
	for (size_t i = 0; i < w->n_namespaces; i++)
		json_array_append_new(ns, json_pack("{s:s, s:o}", "namespace", w->namespaces[i].name, "clusters",
						    strlist(&w->namespaces[i].clusters)));
	json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:o, s:o}", "name", w->name, "overlayNetworkDeploymentMode",
			      "no-network", "maxClusters", 16, "sliceDescription", w->description ? w->description : "",
			      "clusters", strlist(&w->clusters), "namespaces", ns);
	EGS_ASSERT(o);
	return o;
}

json_t *egs_json_apikey(const struct egs_apikey *k)
{
	char created[32];
	egs_time_format(k->created_at, created, sizeof(created));
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:o}", "keyId", k->id, "name", k->name,
			      "userName", k->user_name, "description", k->description ? k->description : "", "role",
			      egs_role_name(k->role), "workspaceName", str_or_null(k->workspace), "projectName",
			      str_or_null(k->project), "createdAt", created, "validUntil", time_or_null(k->expires_at));
	EGS_ASSERT(o);
	if (k->cluster[0])
		json_object_set_new(o, "clusterName", json_string(k->cluster));
	return o;
}

json_t *egs_json_event(const struct egs_event *e)
{
	char first[32], last[32];
	egs_time_format(e->first_time, first, sizeof(first));
	egs_time_format(e->time, last, sizeof(last));
	json_t *o = json_pack("{s:I, s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:i, s:s, s:s}", "id", (json_int_t)e->id,
			      "type", e->type, "reason", e->reason, "involvedObject", "kind", e->object_kind, "name",
			      e->object_name, "workspace", str_or_null(e->workspace), "message",
			      e->message ? e->message : "", "count", e->count, "firstTimestamp", first, "lastTimestamp",
			      last);
	EGS_ASSERT(o);
	return o;
}
