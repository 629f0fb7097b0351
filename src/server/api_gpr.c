/*
 * api_gpr.c: GPU provision requests: create, wait time, update (priority, name, other fields while
 * waiting, early release), cancel, get and list.  Every input is validated before anything changes;
 * a request that no node of the inventory could ever satisfy is refused at creation with the reason.
 */
#include "server/server.h"
#include "server/aged.h"
#include "server/template.h"

#include "core/gpr.h"
#include "core/policy.h"
#include "core/sched.h"
#include "core/share.h"
#include "core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS_PER_NODE 64
#define MAX_NODES 1024
#define MAX_PRIORITY 1000

/* The fields of a create or update, in the order of enum field (a bit each in a body's mask). */
static const char *const request_fields[] = {
	"gprName", "requestName", "sliceName", "clusterName", "numberOfGPUs", "numberOfGPUNodes", "instanceType",
	"gpuShape", "memoryPerGPU", "memoryPerGpu", "exitDuration", "priority", "idleTimeOutDuration",
	"enforceIdleTimeOut", "enableEviction", "requeueOnFailure", "preferredClusters", "enableAutoClusterSelection",
	"enableAutoGpuSelection", "multiNode", "dedicatedNodes", "enableRDMA", "enableSecondaryNetwork",
	"gpuSharingMode", "gprId", "earlyRelease", "extendBy", "templateName", NULL,
};

enum field {
	F_GPR_NAME, F_REQUEST_NAME, F_SLICE, F_CLUSTER, F_GPUS, F_NODES, F_INSTANCE, F_SHAPE, F_MEM_GPU, F_MEM_GPU2,
	F_EXIT, F_PRIORITY, F_IDLE, F_ENFORCE_IDLE, F_EVICTION, F_REQUEUE, F_PREFERRED, F_AUTO_CLUSTER, F_AUTO_GPU,
	F_MULTI_NODE, F_DEDICATED, F_RDMA, F_SECONDARY_NET, F_SHARING, F_GPR_ID, F_EARLY_RELEASE, F_EXTEND_BY,
	F_TEMPLATE, F_COUNT
};
_Static_assert(F_COUNT == EGS_ARRAY_LEN(request_fields) - 1, "enum field follows request_fields");
_Static_assert(F_COUNT <= 32, "a body's fields fit a uint32_t mask");

#define HAS(mask, f) (((mask) >> (f)) & 1u)

/*
 * The mask of the request fields present in body, and in *unknown whether it has a key that is not
 * one (NULL: not asked).  Reading only the fields a body has spares a create ~20 failed lookups in
 * jansson's hash table (~190 instructions each): a body gives 7 of the 28 fields, usually.
 */
static uint32_t body_mask(json_t *body, bool *unknown)
{
	uint32_t mask = 0;
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v) {
		int f = 0;
		while (f < F_COUNT && (request_fields[f][0] != k[0] || strcmp(request_fields[f], k) != 0))
			f++;
		if (f < F_COUNT)
			mask |= 1u << f;
		else if (unknown)
			*unknown = true;
	}
	return mask;
}

static bool get_duration(struct egs_req *r, const char *field, bool required, int64_t *out, bool *present)
{
	char buf[40];
	*present = false;
	if (!egs_get_str(r, r->body, field, required, buf, sizeof(buf)))
		return false;
	if (!buf[0])
		return true;
	const char *why;
	if (!egs_duration_parse(buf, out, &why)) {
		egs_reply_invalid(r, field, "%s %s", field, why);
		return false;
	}
	*present = true;
	return true;
}

static bool get_flag(struct egs_req *r, uint32_t has, enum field f, uint32_t bit, struct egs_gpr *g)
{
	bool v, present;
	if (!HAS(has, f))
		return true;
	if (!egs_get_bool(r, r->body, request_fields[f], &v, &present))
		return false;
	if (present)
		g->flags = v ? g->flags | bit : g->flags & ~bit;
	return true;
}

/*
 * gpuSharingMode and numberOfGPUs (core/share_gpr.h).  A Dedicated GPR asks for whole GPUs per node
 * (an integer); a Shared one for GPUs of one node with at most two decimals (0.2, 1.2, 2), kept in
 * hundredths in g->share_centi with g->gpus_per_node its whole GPUs rounded up, so that node matching
 * and the capacity check count the devices it needs.  On update, a mode or a number left out keeps
 * the GPR's own.  Replies 422 naming the field and returns false when either is bad.
 */
static bool parse_sharing(struct egs_req *r, uint32_t has, struct egs_gpr *g, bool create)
{
	char mode[EGS_NAME_MAX] = "";
	if (HAS(has, F_SHARING) && !egs_get_str(r, r->body, "gpuSharingMode", false, mode, sizeof(mode)))
		return false;
	bool shared = g->share_centi > 0;
	if (mode[0]) {
		if (strcasecmp(mode, "Dedicated") != 0 && strcasecmp(mode, "Shared") != 0) {
			egs_reply_invalid(r, "gpuSharingMode", "gpuSharingMode must be Dedicated or Shared");
			return false;
		}
		shared = strcasecmp(mode, "Shared") == 0;
	}
	json_t *v = HAS(has, F_GPUS) ? json_object_get(r->body, "numberOfGPUs") : NULL;
	int centi = g->share_centi ? g->share_centi : (create ? 1 : g->gpus_per_node) * EGS_SHARE_WHOLE;
	if (!shared) {
		int64_t n;
		bool present = false;
		if (v && !egs_get_int(r, r->body, "numberOfGPUs", false, 1, MAX_GPUS_PER_NODE, &n, &present))
			return false;
		if (!present && centi % EGS_SHARE_WHOLE) {
			egs_reply_invalid(r, "numberOfGPUs", "numberOfGPUs must be a whole number for a Dedicated GPR");
			return false;
		}
		g->gpus_per_node = present ? (int)n : centi / EGS_SHARE_WHOLE;
		g->share_centi = 0;
		return true;
	}
	if (v && !json_is_null(v) &&
	    (!json_is_number(v) || !egs_share_from_number(json_number_value(v), MAX_GPUS_PER_NODE * EGS_SHARE_WHOLE, &centi))) {
		egs_reply_invalid(r, "numberOfGPUs",
				  "numberOfGPUs of a Shared GPR must be a number from 0.01 to %d with at most two decimals",
				  MAX_GPUS_PER_NODE);
		return false;
	}
	g->share_centi = centi;
	g->gpus_per_node = (centi + EGS_SHARE_WHOLE - 1) / EGS_SHARE_WHOLE;
	return true;
}

/* A name field f, when present: checked (a DNS label where dns) and copied into out (outsz bytes). */
static bool get_name(struct egs_req *r, uint32_t has, enum field f, bool dns, char *out, size_t outsz)
{
	char s[EGS_NAME_MAX];
	if (!HAS(has, f))
		return true;
	if (!egs_get_str(r, r->body, request_fields[f], false, s, sizeof(s)))
		return false;
	if (s[0] && !egs_check_name(r, request_fields[f], s, dns))
		return false;
	egs_strlcpy(out, s, outsz);
	return true;
}

static bool parse_names(struct egs_req *r, uint32_t has, struct egs_gpr *g, bool create)
{
	char s[EGS_NAME_MAX] = "";
	char alias[EGS_NAME_MAX] = ""; /* requestName, the public SDK's name: checked even when gprName is given */
	if ((HAS(has, F_GPR_NAME) && !egs_get_str(r, r->body, "gprName", false, s, sizeof(s))) ||
	    (HAS(has, F_REQUEST_NAME) && !egs_get_str(r, r->body, "requestName", false, alias, sizeof(alias))))
		return false;
	if (s[0] && alias[0] && strcmp(s, alias) != 0) {
		egs_reply_invalid(r, "requestName", "requestName and gprName differ; give one of them");
		return false;
	}
	if (!s[0])
		memcpy(s, alias, sizeof(s));
	if (s[0]) {
		if (!egs_check_name(r, "gprName", s, false))
			return false;
		egs_strlcpy(g->name, s, sizeof(g->name));
	} else if (create) {
		egs_reply_invalid(r, "gprName", "gprName is not allowed to be empty");
		return false;
	}
	if (create) {
		if (!egs_get_str(r, r->body, "sliceName", true, s, sizeof(s)) || !egs_check_name(r, "sliceName", s, true))
			return false;
		egs_strlcpy(g->workspace, s, sizeof(g->workspace));
	}
	return get_name(r, has, F_CLUSTER, true, g->cluster, sizeof(g->cluster)) &&
	       get_name(r, has, F_INSTANCE, false, g->instance_type, sizeof(g->instance_type)) &&
	       get_name(r, has, F_SHAPE, false, g->gpu_shape, sizeof(g->gpu_shape));
}

static bool parse_memory(struct egs_req *r, uint32_t has, struct egs_gpr *g)
{
	int64_t m1 = 0, m2 = 0;
	bool p1 = false, p2 = false;
	if ((HAS(has, F_MEM_GPU) && !egs_get_int(r, r->body, "memoryPerGPU", false, 0, (int64_t)1 << 30, &m1, &p1)) ||
	    (HAS(has, F_MEM_GPU2) && !egs_get_int(r, r->body, "memoryPerGpu", false, 0, (int64_t)1 << 30, &m2, &p2)))
		return false;
	if (p1 && p2 && m1 != m2) {
		egs_reply_invalid(r, "memoryPerGpu", "memoryPerGPU and memoryPerGpu disagree (%lld, %lld)", (long long)m1,
				  (long long)m2);
		return false;
	}
	if (p1 || p2)
		g->memory_mib = egs_memory_to_mib(p2 ? m2 : m1);
	return true;
}

static bool parse_flags(struct egs_req *r, uint32_t has, struct egs_gpr *g)
{
	return get_flag(r, has, F_ENFORCE_IDLE, EGS_GPRF_ENFORCE_IDLE, g) && get_flag(r, has, F_EVICTION, EGS_GPRF_EVICTION, g) &&
	       get_flag(r, has, F_REQUEUE, EGS_GPRF_REQUEUE, g) && get_flag(r, has, F_AUTO_CLUSTER, EGS_GPRF_AUTO_CLUSTER, g) &&
	       get_flag(r, has, F_AUTO_GPU, EGS_GPRF_AUTO_GPU, g) && get_flag(r, has, F_MULTI_NODE, EGS_GPRF_MULTI_NODE, g) &&
	       get_flag(r, has, F_DEDICATED, EGS_GPRF_DEDICATED, g) && get_flag(r, has, F_RDMA, EGS_GPRF_RDMA, g) &&
	       get_flag(r, has, F_SECONDARY_NET, EGS_GPRF_SECONDARY_NET, g);
}

/*
 * Reads the request fields present in r->body (has: body_mask's) into g.  On create every required
 * field must be there; on update only the given fields change.  Replies 422 and returns false on
 * the first bad field.  Cross-field checks (workspace, cluster, capacity) are done by check_request().
 */
static bool parse_request(struct egs_req *r, uint32_t has, struct egs_gpr *g, bool create)
{
	bool present = false;
	int64_t v;

	if (!parse_names(r, has, g, create) || !parse_sharing(r, has, g, create))
		return false;
	if ((HAS(has, F_NODES) || create) && !egs_get_int(r, r->body, "numberOfGPUNodes", create, 1, MAX_NODES, &v, &present))
		return false;
	if (present)
		g->node_count = (int)v;
	if (g->share_centi && g->node_count != 1) {
		egs_reply_invalid(r, "numberOfGPUNodes", "numberOfGPUNodes must be 1 for a Shared GPR (its GPUs are shares of one node)");
		return false;
	}
	if (!parse_memory(r, has, g))
		return false;
	present = false;
	if ((HAS(has, F_EXIT) || create) && !get_duration(r, "exitDuration", create, &v, &present))
		return false;
	if (present)
		g->exit_duration_s = v;
	present = false;
	if (HAS(has, F_PRIORITY) && !egs_get_int(r, r->body, "priority", false, 1, MAX_PRIORITY, &v, &present))
		return false;
	if (present)
		g->priority = (int)v;
	else if (create)
		g->priority = 101;
	present = false;
	if (HAS(has, F_IDLE) && !get_duration(r, "idleTimeOutDuration", false, &v, &present))
		return false;
	if (present)
		g->idle_timeout_s = v;
	if (!parse_flags(r, has, g))
		return false;
	if (HAS(has, F_PREFERRED)) {
		struct egs_strlist pc = { 0 };
		if (!egs_get_names(r, r->body, "preferredClusters", 64, &pc))
			return false;
		egs_strlist_cleanup(&g->preferred_clusters);
		g->preferred_clusters = pc;
	}
	if ((g->flags & EGS_GPRF_ENFORCE_IDLE) && !g->idle_timeout_s) {
		egs_reply_invalid(r, "idleTimeOutDuration", "idleTimeOutDuration is required when enforceIdleTimeOut is true");
		return false;
	}
	return true;
}

/* 16 random bits for a GPR id's tail, from a pool refilled 512 bytes at a time: libsodium's
 * randombytes_buf is a getrandom() system call per use, one per create (issue 16).  The bits only
 * keep ids of one sequence number apart; ids are not secrets (every read checks scope). */
static unsigned id_random16(void)
{
	static unsigned char pool[512];
	static size_t left;
	if (left < 2) {
		randombytes_buf(pool, sizeof(pool));
		left = sizeof(pool);
	}
	left -= 2;
	return (unsigned)pool[left] << 8 | pool[left + 1];
}

/* Cross-field checks against the inventory and the caller's scope. */
static bool check_request(struct egs_req *r, struct egs_gpr *g, struct egs_workspace **wsp, bool write)
{
	struct egs_state *st = &r->srv->st;
	struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
	if (!ws || !egs_in_project(r, ws->project)) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found: %s",
			      g->workspace);
		return false;
	}
	if (!(write ? egs_can_write_ws(r, ws) : egs_can_read_ws(r, ws)))
		return false;
	if (g->cluster[0] && !egs_strlist_has(&ws->clusters, g->cluster)) {
		egs_reply_invalid(r, "clusterName", "clusterName: cluster %s is not part of workspace %s", g->cluster,
				  g->workspace);
		return false;
	}
	for (size_t i = 0; i < g->preferred_clusters.n; i++)
		if (!egs_strlist_has(&ws->clusters, g->preferred_clusters.v[i])) {
			egs_reply_invalid(r, "preferredClusters", "preferredClusters: cluster %s is not part of workspace %s",
					  g->preferred_clusters.v[i], g->workspace);
			return false;
		}
	char why[300];
	if (egs_sched_capacity(st, g, ws, why, sizeof(why)) < (size_t)g->node_count) {
		const char *colon = strchr(why, ':');
		char field[40];
		egs_strlcpy(field, why, colon && (size_t)(colon - why) < sizeof(field) ? (size_t)(colon - why) + 1 : 1);
		egs_reply_err(r, EGS_ERR_UNSATISFIABLE, NULL, field[0] ? field : NULL,
			      "no node in the inventory could ever satisfy this request: %s", why);
		return false;
	}
	if (wsp)
		*wsp = ws;
	return true;
}

static struct egs_gpr *find_gpr(struct egs_req *r, const char *id, bool write)
{
	struct egs_gpr *g = id && *id ? egs_state_gpr(&r->srv->st, id) : NULL;
	if (!g) /* finished and left memory by age: the store has it (refuses changes as before) */
		g = egs_aged_get(r->srv, id);
	const struct egs_workspace *ws = g ? egs_state_workspace(&r->srv->st, g->workspace) : NULL;
	if (!g || r->who.role == EGS_ROLE_AGENT || (ws && !egs_in_project(r, ws->project))) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_NOT_FOUND", "gprId", "GPR %s not found", id ? id : "");
		return NULL;
	}
	if (!ws) { /* workspace deleted: only admins still see its GPRs */
		if (r->who.role == EGS_ROLE_ADMIN && !r->who.project[0] && !write)
			return g;
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "GPR_NOT_FOUND", "gprId", "GPR %s not found", id);
		return NULL;
	}
	if (!(write ? egs_can_write_ws(r, ws) : egs_can_read_ws(r, ws)))
		return NULL;
	return g;
}

/*
 * The body of a create or a wait-time question: an object of request fields only (else 422 naming
 * the first other key), without gprId or earlyRelease on a create, and after its template
 * (templateName or the workspace's default: the body becomes the template's request).  *has gets
 * the body's fields (body_mask).  Replies and returns false when the body is refused.
 */
static bool request_body(struct egs_req *r, bool create, uint32_t *has)
{
	bool unknown = false;
	if (!egs_body_required(r))
		return false;
	*has = body_mask(r->body, &unknown);
	if (unknown)
		return egs_body_only(r, request_fields); /* false: it replies naming the key */
	if (create && (HAS(*has, F_GPR_ID) || HAS(*has, F_EARLY_RELEASE))) {
		const char *f = HAS(*has, F_GPR_ID) ? "gprId" : "earlyRelease";
		egs_reply_invalid(r, f, "%s cannot be set when creating a GPR", f);
		return false;
	}
	json_t *before = r->body;
	if (!egs_template_apply(r))
		return false;
	if (r->body != before)
		*has = body_mask(r->body, NULL);
	return true;
}

/* Writes "gpr-<seq, 8 hex digits>-<rnd, 4 hex digits>" into id (snprintf took ~1,600 instructions). */
static void format_id(char id[EGS_ID_MAX], uint32_t seq, unsigned rnd)
{
	static const char hex[] = "0123456789abcdef";
	_Static_assert(EGS_ID_MAX >= sizeof("gpr-xxxxxxxx-xxxx"), "a GPR id fits");
	memcpy(id, "gpr-", 4);
	for (int i = 0; i < 8; i++)
		id[4 + i] = hex[(seq >> (28 - 4 * i)) & 0xfu];
	id[12] = '-';
	for (int i = 0; i < 4; i++)
		id[13 + i] = hex[(rnd >> (12 - 4 * i)) & 0xfu];
	id[17] = '\0';
}

struct egs_gpr *egs_gpr_api_submit(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	uint32_t has;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !request_body(r, true, &has))
		return NULL;
	struct egs_gpr *g = egs_gpr_new();
	if (!parse_request(r, has, g, true) || !check_request(r, g, NULL, true) || !egs_policy_admit(r, g, NULL))
		goto fail;
	/* Ids lead with the enqueue sequence, so that rows are appended to the store's B-tree instead of
	 * touching a random page each (that cut the WAL written per create by ~10x), and end with 16
	 * random bits; the format stays gpr-xxxxxxxx-xxxx. */
	egs_strlcpy(g->created_by, r->who.key_id, sizeof(g->created_by));
	int64_t now = egs_now(srv);
	bool plan_current = srv->planned_gen == srv->st.generation;
	enum egs_err err;
	do /* egs_gpr_submit refuses a taken id before it changes anything: one lookup, not two */
		format_id(g->id, (uint32_t)(srv->st.next_seq & 0xffffffffu), id_random16() & 0xffffu);
	while ((err = egs_gpr_submit(&srv->st, g, now)) == EGS_ERR_EXISTS);
	EGS_ASSERT(err == EGS_OK);
	/* The common case, a GPR that goes to the end of the queue, is placed on the kept plan: the
	 * same answer as a full walk, without walking a deep queue on every create. */
	if (plan_current && g->state == EGS_GPR_QUEUED) {
		int64_t t = egs_sched_append(&srv->st, g, now, srv->plan);
		if (t != EGS_NEVER - 1)
			srv->planned_gen = srv->st.generation;
		if (t == now) /* started: due again at its provisioning time-out */
			egs_server_wake_at(srv, now + srv->st.cfg.provision_timeout_s);
		else if (t != EGS_NEVER && t != EGS_NEVER - 1)
			egs_server_wake_at(srv, t);
	}
	return g;
fail:
	egs_gpr_free(g);
	return NULL;
}

struct egs_gpr *egs_gpr_api_create(struct egs_req *r)
{
	struct egs_gpr *g = egs_gpr_api_submit(r);
	if (g)
		egs_reply_ok_str(r, "gprId", g->id);
	return g;
}

static void gpr_create(struct egs_req *r)
{
	egs_gpr_api_create(r);
}

struct option {
	char cluster[EGS_NAME_MAX], shape[EGS_NAME_MAX], itype[EGS_NAME_MAX];
	int64_t start;
	int free_nodes, total_nodes;
};

static int cmp_option(const void *a, const void *b)
{
	const struct option *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	int c = strcmp(x->cluster, y->cluster);
	return c ? c : strcmp(x->shape, y->shape);
}

static void gpr_waittime(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_state *st = &srv->st;
	uint32_t has;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)) || !request_body(r, false, &has))
		return;
	struct egs_gpr *g = egs_gpr_new();
	struct egs_workspace *ws;
	struct option *opts = NULL;
	size_t nopts = 0;
	if (!parse_request(r, has, g, true) || !check_request(r, g, &ws, false)) /* a question: Viewers may ask */
		goto out;
	int64_t now = egs_now(srv);
	/* One option per (cluster, GPU shape, instance type) that can hold the request. */
	opts = egs_calloc(st->nodes.len + 1, sizeof(*opts));
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		if (!egs_node_matches(g, ws, n))
			continue;
		struct option *o = NULL;
		for (size_t j = 0; j < nopts && !o; j++)
			if (!strcmp(opts[j].cluster, n->cluster) && !strcmp(opts[j].shape, n->gpu_shape) &&
			    !strcmp(opts[j].itype, n->instance_type))
				o = &opts[j];
		if (!o) {
			o = &opts[nopts++];
			egs_strlcpy(o->cluster, n->cluster, sizeof(o->cluster));
			egs_strlcpy(o->shape, n->gpu_shape, sizeof(o->shape));
			egs_strlcpy(o->itype, n->instance_type, sizeof(o->itype));
		}
		o->total_nodes++;
		if (egs_node_schedulable(st, n, now) && !n->gpr_id[0] && !n->attached_gpr[0] && !n->shared.len &&
		    !n->attached_shared.n)
			o->free_nodes++;
	}
	/* One probe per option that has enough nodes, all asked of the plan at once: they take the same
	 * place in the queue.  The plan kept by the last run serves them when nothing changed since. */
	struct egs_gpr *probes = egs_calloc(nopts + 1, sizeof(*probes));
	const struct egs_gpr **ask = egs_calloc(nopts + 1, sizeof(*ask));
	int64_t *starts = egs_calloc(nopts + 1, sizeof(*starts));
	size_t nask = 0;
	for (size_t j = 0; j < nopts; j++) {
		opts[j].start = EGS_NEVER;
		if (opts[j].total_nodes < g->node_count)
			continue;
		struct egs_gpr *probe = &probes[j];
		*probe = *g; /* shares g's lists: read only */
		egs_strlcpy(probe->cluster, opts[j].cluster, sizeof(probe->cluster));
		egs_strlcpy(probe->gpu_shape, opts[j].shape, sizeof(probe->gpu_shape));
		egs_strlcpy(probe->instance_type, opts[j].itype, sizeof(probe->instance_type));
		ask[nask++] = probe;
	}
	egs_sched_estimates(st, ask, nask, now, srv->planned_gen == st->generation ? srv->plan : NULL, starts, NULL);
	for (size_t j = 0, k = 0; j < nopts; j++)
		if (opts[j].total_nodes >= g->node_count)
			opts[j].start = starts[k++];
	free(starts);
	free(ask);
	free(probes);
	qsort(opts, nopts, sizeof(*opts), cmp_option);
	json_t *items = json_array();
	for (size_t j = 0; j < nopts; j++) {
		char ts[32], wait[48];
		json_t *start = json_null(), *w = json_null();
		if (opts[j].start != EGS_NEVER) {
			egs_time_format(opts[j].start, ts, sizeof(ts));
			egs_duration_format(opts[j].start - now, wait, sizeof(wait));
			start = json_string(ts);
			w = json_string(wait);
		}
		json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:o, s:o, s:i, s:i, s:b}", "clusterName",
						       opts[j].cluster, "gpuShape", opts[j].shape, "instanceType",
						       opts[j].itype, "estimatedStartTime", start, "estimatedWaitTime", w,
						       "freeNodes", opts[j].free_nodes, "totalNodes", opts[j].total_nodes,
						       "available", opts[j].start != EGS_NEVER));
	}
	json_t *best = json_array_size(items) ? json_array_get(items, 0) : NULL;
	json_t *data = json_pack("{s:O, s:O, s:o}", "estimatedStartTime", best ? json_object_get(best, "estimatedStartTime") : json_null(),
				 "estimatedWaitTime", best ? json_object_get(best, "estimatedWaitTime") : json_null(),
				 "items", items);
	egs_reply_ok(r, data);
out:
	free(opts);
	egs_gpr_free(g);
}

static bool only_fields(json_t *body, const char *const *fields)
{
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v) {
		bool found = false;
		for (const char *const *f = fields; *f; f++)
			if (!strcmp(*f, k))
				found = true;
		if (!found)
			return false;
	}
	return true;
}

static void reply_state_err(struct egs_req *r, enum egs_err err, const struct egs_gpr *g, const char *what)
{
	const char *state = egs_gpr_state_name(g->state);
	switch (err) {
	case EGS_ERR_GPR_NOT_PROVISIONED:
		egs_reply_err(r, err, NULL, "gprId", "Cannot %s GPR in %s state: it is not provisioned yet; cancel it with DELETE /api/v1/gpr instead", what, state);
		break;
	default:
		egs_reply_err(r, err, NULL, "gprId", "Cannot %s GPR in %s state", what, state);
	}
}

/*
 * extendBy: a provisioned GPR gets a grace period when the plan shows it delays no one: every
 * queued GPR's start, planned with the longer window, is no later than without it.  Otherwise a
 * 409 names the first GPR whose start it would move.
 */
static void extend(struct egs_req *r, struct egs_gpr *g, int64_t now)
{
	static const char *const extend_only[] = { "gprId", "extendBy", NULL };
	struct egs_state *st = &r->srv->st;
	char buf[40];
	int64_t secs;
	const char *why;
	if (!only_fields(r->body, extend_only)) {
		egs_reply_invalid(r, "extendBy", "extendBy cannot be combined with other changes");
		return;
	}
	if (!egs_get_str(r, r->body, "extendBy", true, buf, sizeof(buf)))
		return;
	if (!egs_duration_parse(buf, &secs, &why)) {
		egs_reply_invalid(r, "extendBy", "extendBy %s", why);
		return;
	}
	if (g->state != EGS_GPR_PROVISIONED) {
		reply_state_err(r, g->state == EGS_GPR_PROVISIONING ? EGS_ERR_CONFLICT
				   : g->state == EGS_GPR_RELEASING || g->state == EGS_GPR_COMPLETE ? EGS_ERR_GPR_RELEASED
				   : g->state == EGS_GPR_PENDING || g->state == EGS_GPR_QUEUED ? EGS_ERR_GPR_NOT_PROVISIONED
											: EGS_ERR_GPR_FINISHED,
				g, "extend");
		return;
	}
	size_t nq = egs_queue_len(&st->queue);
	int64_t *before = egs_malloc((nq + 1) * sizeof(*before)), *after = egs_malloc((nq + 1) * sizeof(*after));
	struct egs_gpr **order = egs_malloc((nq + 1) * sizeof(*order));
	egs_sched_dry_starts(st, now, before, order);
	g->exit_at += secs;
	g->exit_duration_s += secs;
	egs_sched_dry_starts(st, now, after, order);
	size_t delayed = nq;
	for (size_t i = 0; i < nq && delayed == nq; i++)
		if (after[i] > before[i])
			delayed = i;
	if (delayed < nq) {
		g->exit_at -= secs;
		g->exit_duration_s -= secs;
		char t0[32] = "never", t1[32] = "never";
		if (before[delayed] != EGS_NEVER)
			egs_time_format(before[delayed], t0, sizeof(t0));
		if (after[delayed] != EGS_NEVER)
			egs_time_format(after[delayed], t1, sizeof(t1));
		egs_reply_err(r, EGS_ERR_CONFLICT, "GPR_EXTENSION_DELAYS_OTHERS", "extendBy",
			      "extending GPR %s by %s would move the start of GPR %s from %s to %s", g->id, buf,
			      order[delayed]->id, t0, t1);
	} else {
		egs_state_touch(st, EGS_KIND_GPR, g);
		char t[32];
		egs_time_format(g->exit_at, t, sizeof(t));
		egs_state_event(st, now, "Normal", "Extended", "GPR", g->id, g->workspace,
				"GPR %s extended by %s; it now exits at %s", g->name, buf, t);
		egs_reply_ok(r, json_pack("{s:s, s:s}", "gprId", g->id, "exitTimestamp", t));
	}
	free(before);
	free(after);
	free(order);
}

void egs_gpr_api_update(struct egs_req *r)
{
	static const char *const release_only[] = { "gprId", "earlyRelease", NULL };
	struct egs_server *srv = r->srv;
	char id[EGS_ID_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !egs_body_only(r, request_fields) ||
	    !egs_get_str(r, r->body, "gprId", true, id, sizeof(id)))
		return;
	if (json_object_get(r->body, "sliceName")) {
		egs_reply_invalid(r, "sliceName", "sliceName of a GPR cannot change");
		return;
	}
	bool early, early_given;
	if (!egs_get_bool(r, r->body, "earlyRelease", &early, &early_given))
		return;
	struct egs_gpr *g = find_gpr(r, id, true);
	if (!g)
		return;
	int64_t now = egs_now(srv);
	if (early) {
		if (!only_fields(r->body, release_only)) {
			egs_reply_invalid(r, "earlyRelease", "earlyRelease cannot be combined with other changes");
			return;
		}
		enum egs_err err = egs_gpr_release(&srv->st, g, now);
		if (err) {
			reply_state_err(r, err, g, "update early release of");
			return;
		}
		egs_reply_ok_str(r, "gprId", g->id);
		return;
	}
	if (json_object_get(r->body, "extendBy")) {
		extend(r, g, now);
		return;
	}
	if (only_fields(r->body, release_only)) { /* nothing to change */
		egs_reply_ok_str(r, "gprId", g->id);
		return;
	}
	enum egs_err err = egs_gpr_editable(g);
	if (err) {
		reply_state_err(r, err, g, "update");
		return;
	}
	/* Edit a copy, validate it whole, then apply: nothing changes on a bad field. */
	struct egs_gpr *c = egs_gpr_new();
	*c = *g;
	c->heap_idx = SIZE_MAX;
	c->preferred_clusters = (struct egs_strlist){ 0 };
	c->nodes = (struct egs_strlist){ 0 };
	c->held_nodes = (struct egs_strlist){ 0 };
	c->failure_reason = c->pending_reason = NULL;
	c->shares = NULL; /* waiting GPRs hold no shares; the copy must not free g's */
	c->n_shares = 0;
	egs_strlist_copy(&c->preferred_clusters, &g->preferred_clusters);
	if (!parse_request(r, body_mask(r->body, NULL), c, false) || !check_request(r, c, NULL, true) || !egs_policy_admit(r, c, g)) {
		egs_gpr_free(c);
		return;
	}
	int new_priority = c->priority;
	c->priority = g->priority;
	egs_gpr_update_request(&srv->st, g, c, now);
	char *hold = c->pending_reason; /* a change over a soft limit of the policy waits for approval */
	c->pending_reason = NULL;
	egs_gpr_free(c);
	egs_gpr_set_priority(&srv->st, g, new_priority, now);
	if (hold)
		egs_policy_hold(&srv->st, g, hold, now);
	free(hold);
	egs_reply_ok_str(r, "gprId", g->id);
}

static void gpr_delete(struct egs_req *r)
{
	static const char *const allowed[] = { "gprId", NULL };
	char id[EGS_ID_MAX];
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER)) || !egs_body_only(r, allowed) ||
	    !egs_get_str(r, r->body, "gprId", true, id, sizeof(id)))
		return;
	struct egs_gpr *g = find_gpr(r, id, true);
	if (!g)
		return;
	enum egs_err err = egs_gpr_cancel(&r->srv->st, g, egs_now(r->srv));
	if (err) {
		reply_state_err(r, err, g, "delete");
		return;
	}
	egs_reply_ok_str(r, "gprId", g->id);
}

static void gpr_get(struct egs_req *r)
{
	const char *id = egs_query(r, "gprId");
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	if (!id || !*id) {
		egs_reply_invalid(r, "gprId", "gprId is required");
		return;
	}
	struct egs_gpr *g = find_gpr(r, id, false);
	if (g)
		egs_gpr_view_reply(r, g); /* kept bytes while nothing changed (gpr_view.c) */
}

/* Paging of GET /gpr/list: `limit` (1..1000) and/or `continue` (the previous page's last gprId)
 * turn it on; without either the whole list is answered, as before paging existed. */
struct list_page {
	bool on;
	long limit;
	const char *after; /* list only ids after this one; NULL = from the start */
};

/* Parses limit and continue into pg; false after replying 422 naming the field. */
static bool parse_page(struct egs_req *r, struct list_page *pg)
{
	const char *lim = egs_query(r, "limit"), *cont = egs_query(r, "continue");
	char *end;
	*pg = (struct list_page){ .on = lim || cont, .limit = 100, .after = NULL };
	if (lim) {
		errno = 0;
		pg->limit = strtol(lim, &end, 10);
		if (!*lim || strspn(lim, "0123456789") != strlen(lim) || *end || errno || pg->limit < 1 ||
		    pg->limit > 1000) {
			egs_reply_invalid(r, "limit", "limit must be 1 to 1000");
			return false;
		}
	}
	if (cont) {
		/* A gprId (gpr-<hex seq>-<hex>); it need not exist any more (deleted between pages). */
		size_t n = strlen(cont);
		bool ok = n > 4 && n < EGS_ID_MAX && !strncmp(cont, "gpr-", 4) && strspn(cont + 4, "0123456789abcdef-") == n - 4;
		if (!ok) {
			egs_reply_invalid(r, "continue", "continue must be the token of a previous page");
			return false;
		}
		pg->after = cont;
	}
	return true;
}

static int by_id(const void *a, const void *b)
{
	const struct egs_gpr *const *x = a, *const *y = b;
	return strcmp((*x)->id, (*y)->id);
}

/* May the caller see g when listing every workspace? */
static bool listed_visible(struct egs_req *r, const struct egs_gpr *g)
{
	const struct egs_workspace *gw = egs_state_workspace(&r->srv->st, g->workspace);
	if (!gw)
		return r->who.role == EGS_ROLE_ADMIN && !r->who.project[0];
	return egs_in_project(r, gw->project) &&
	       (r->who.role == EGS_ROLE_ADMIN || !r->who.workspace[0] || !strcmp(r->who.workspace, gw->name));
}

/* Replies the GPRs chosen, ordered by gprId (its hex sequence makes that creation order, so a GPR
 * created between two pages comes after them), one page of them when pg->on. */
static void reply_list(struct egs_req *r, const struct egs_gpr **sel, size_t n, const struct list_page *pg)
{
	qsort(sel, n, sizeof(*sel), by_id);
	size_t from = 0;
	while (from < n && pg->after && strcmp(sel[from]->id, pg->after) <= 0)
		from++;
	size_t count = n - from;
	if (pg->on && count > (size_t)pg->limit)
		count = (size_t)pg->limit; /* >= 1: the page's last id is the next page's start */
	const char *next = pg->on && from + count < n ? sel[from + count - 1]->id : NULL;
	egs_gpr_list_reply(r, sel + from, count, pg->on, next);
}

static bool aged_visible(void *r, const struct egs_gpr *g)
{
	return listed_visible(r, g);
}

/* The finished GPRs that left memory by age and belong in the list (server/aged.h), into out: all
 * of them, or with paging the first limit + 1 after the page's start (the merged page needs no
 * more of them, and one more tells whether another page follows). */
static void aged_list(struct egs_req *r, const struct egs_workspace *ws, enum egs_gpr_state want,
		      const struct list_page *pg, struct egs_vec *out)
{
	if (want != EGS_GPR_NSTATES && !egs_gpr_state_terminal(want))
		return;
	struct egs_gpr_find f = { .workspace = ws ? ws->name : NULL, .after_id = pg->after,
				  .state = want != EGS_GPR_NSTATES ? egs_gpr_state_name(want) : NULL };
	egs_aged_each(r->srv, &f, pg->on ? (size_t)pg->limit + 1 : 0, ws ? NULL : aged_visible, r, out);
}

static void gpr_list(struct egs_req *r)
{
	struct egs_state *st = &r->srv->st;
	const char *ws_name = egs_query(r, "sliceName");
	const char *status = egs_query(r, "status");
	enum egs_gpr_state want = EGS_GPR_NSTATES;
	struct list_page pg;
	if (!egs_require_role(r, EGS_R(ADMIN) | EGS_R(OWNER) | EGS_R(VIEWER)))
		return;
	if (status && !egs_gpr_state_parse(status, &want)) {
		egs_reply_invalid(r, "status", "status must be a provisioningStatus such as Queued or Provisioned");
		return;
	}
	if (!parse_page(r, &pg))
		return;
	const struct egs_workspace *ws = NULL;
	if (ws_name && *ws_name) {
		ws = egs_state_workspace(st, ws_name);
		if (!ws || !egs_in_project(r, ws->project)) {
			egs_reply_err(r, EGS_ERR_NOT_FOUND, "WORKSPACE_NOT_FOUND", "sliceName", "Slice Workspace Not Found");
			return;
		}
		if (!egs_can_read_ws(r, ws))
			return;
	}
	const struct egs_gpr **sel = malloc((st->gprs.len + 1) * sizeof(*sel));
	EGS_ASSERT(sel);
	size_t n = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&st->gprs, &i, NULL, &v);) {
		const struct egs_gpr *g = v;
		if (ws ? strcmp(g->workspace, ws->name) != 0 : !listed_visible(r, g))
			continue;
		if (want == EGS_GPR_NSTATES || g->state == want)
			sel[n++] = g;
	}
	struct egs_vec aged = { 0 };
	aged_list(r, ws, want, &pg, &aged);
	if (aged.len) {
		sel = realloc(sel, (n + aged.len + 1) * sizeof(*sel));
		EGS_ASSERT(sel);
		memcpy(sel + n, aged.items, aged.len * sizeof(*sel));
	}
	reply_list(r, sel, n + aged.len, &pg);
	free(sel);
	for (size_t i = 0; i < aged.len; i++)
		egs_gpr_free(aged.items[i]);
	egs_vec_cleanup(&aged);
}

const struct egs_route egs_routes_gpr[] = {
	{ EVHTTP_REQ_POST, "/api/v1/gpr", gpr_create, false },
	{ EVHTTP_REQ_PUT, "/api/v1/gpr", egs_gpr_api_update, false },
	{ EVHTTP_REQ_DELETE, "/api/v1/gpr", gpr_delete, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr", gpr_get, false },
	{ EVHTTP_REQ_GET, "/api/v1/gpr/list", gpr_list, false },
	{ EVHTTP_REQ_POST, "/api/v1/gpr/waittime", gpr_waittime, false },
	{ 0, NULL, NULL, false },
};
