/*
 * api_agent_register.c: POST /api/v1/agent/register (docs/internals/agent-protocol.md): an agent's
 * nodes (with their GPUs, features, check address and what they hold), the unmanaged nodes it sees,
 * validated whole before anything changes; the answer tells the agent its heartbeat period and the
 * features egsd takes.
 */
#include "server/api_agent.h"
#include "server/server.h"
#include "server/kubecred.h"

#include "core/gpr.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "host:port": a host name or IPv4 address (letters, digits, '.', '-', '_') or a bracketed IPv6
 * address, then a port 1-65535. */
static bool address_valid(const char *s)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || strlen(s) > 127)
		return false;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end || port < 1 || port > 65535)
		return false;
	size_t len = (size_t)(colon - s);
	bool v6 = s[0] == '[';
	if (v6 && (len < 3 || s[len - 1] != ']'))
		return false;
	for (size_t k = v6 ? 1 : 0; k < (v6 ? len - 1 : len); k++) {
		unsigned char c = (unsigned char)s[k];
		bool ok = v6 ? (c == ':' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
				(c >= 'A' && c <= 'F'))
			     : (c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
				(c >= 'A' && c <= 'Z'));
		if (!ok)
			return false;
	}
	return true;
}

/* features of a registration's node: a list of at most 16 names; "sharing" sets n->sharing (unknown
 * names are ignored: a newer agent may offer more than this egsd takes). */
static bool parse_features(struct egs_req *r, json_t *o, size_t i, struct egs_node *n)
{
	json_t *f = json_object_get(o, "features"), *e;
	size_t j;
	if (!f || json_is_null(f))
		return true;
	char field[48];
	snprintf(field, sizeof(field), "nodes[%zu].features", i);
	if (!json_is_array(f) || json_array_size(f) > 16) {
		egs_reply_invalid(r, field, "%s must be a list of at most 16 feature names", field);
		return false;
	}
	json_array_foreach(f, j, e) {
		if (!json_is_string(e)) {
			egs_reply_invalid(r, field, "%s must hold strings", field);
			return false;
		}
		if (!strcmp(json_string_value(e), "sharing"))
			n->sharing = true;
	}
	return true;
}

/* Validates one node object of a registration; replies 422 naming the field on failure.  A malformed
 * attachedGpr or attachedShared does not refuse the registration (an agent with a damaged state file must still be
 * able to register): it counts as "" and *bad_attached is set, for a warning. */
static bool parse_node(struct egs_req *r, json_t *o, size_t i, struct egs_node *n, bool *bad_attached)
{
	char f[64];
	int64_t v;
	if (!json_is_object(o)) {
		snprintf(f, sizeof(f), "nodes[%zu]", i);
		egs_reply_invalid(r, f, "%s must be an object", f);
		return false;
	}
	static const char *const fields[] = { "name", "instanceType", "gpuModel", "cloudProvider", "region", "zone" };
	char *dst[] = { n->name, n->instance_type, n->gpu_shape, n->cloud_provider, n->region, n->zone };
	for (size_t k = 0; k < EGS_ARRAY_LEN(fields); k++) {
		snprintf(f, sizeof(f), "nodes[%zu].%s", i, fields[k]);
		char buf[EGS_NAME_MAX];
		json_t *x = json_object_get(o, fields[k]);
		bool required = k < 3;
		if (x && !json_is_string(x)) {
			egs_reply_invalid(r, f, "%s must be a string", f);
			return false;
		}
		const char *s = x ? json_string_value(x) : "";
		if ((required || *s) && !egs_label_valid(s, &(const char *){ NULL })) {
			egs_reply_invalid(r, f, "%s must be 1-63 letters, digits, '.', '_' or '-'", f);
			return false;
		}
		egs_strlcpy(buf, s, sizeof(buf));
		egs_strlcpy(dst[k], buf, EGS_NAME_MAX);
	}
	snprintf(f, sizeof(f), "nodes[%zu].gpuCount", i);
	if (!egs_get_int(r, o, "gpuCount", true, 1, MAX_GPUS, &v, NULL))
		return false;
	n->gpu_count = (int)v;
	if (!egs_get_int(r, o, "memoryMiB", true, 1, (int64_t)1 << 22, &v, NULL))
		return false;
	n->memory_mib = v;
	json_t *gpus = json_object_get(o, "gpus");
	if (gpus && !json_is_null(gpus)) {
		if (!json_is_array(gpus) || json_array_size(gpus) > MAX_GPUS) {
			snprintf(f, sizeof(f), "nodes[%zu].gpus", i);
			egs_reply_invalid(r, f, "%s must be a list of at most %d GPUs", f, MAX_GPUS);
			return false;
		}
		n->gpus = egs_calloc(json_array_size(gpus) + 1, sizeof(*n->gpus));
		size_t j;
		json_t *u;
		json_array_foreach(gpus, j, u) {
			json_t *uu = json_is_object(u) ? json_object_get(u, "uuid") : NULL;
			if (!uu || !json_is_string(uu) || !egs_label_valid(json_string_value(uu), &(const char *){ NULL })) {
				snprintf(f, sizeof(f), "nodes[%zu].gpus[%zu].uuid", i, j);
				egs_reply_invalid(r, f, "%s must be a GPU UUID", f);
				return false;
			}
			egs_strlcpy(n->gpus[j].uuid, json_string_value(uu), sizeof(n->gpus[j].uuid));
			n->gpus[j].index = (int)j;
		}
		n->n_gpus = (int)json_array_size(gpus);
	}
	json_t *addr = json_object_get(o, "address");
	if (addr && !json_is_null(addr)) {
		if (!json_is_string(addr) || strlen(json_string_value(addr)) != json_string_length(addr) ||
		    (json_string_length(addr) && !address_valid(json_string_value(addr)))) {
			snprintf(f, sizeof(f), "nodes[%zu].address", i);
			egs_reply_invalid(r, f, "%s must be \"host:port\" (at most 127 characters)", f);
			return false;
		}
		egs_strlcpy(n->address, json_string_value(addr), sizeof(n->address));
	}
	if (!parse_features(r, o, i, n))
		return false;
	json_t *a = json_object_get(o, "attachedGpr");
	const char *as = json_is_string(a) ? json_string_value(a) : "";
	*bad_attached = (a && !json_is_null(a) && !json_is_string(a)) ||
			(*as && (json_string_length(a) >= EGS_ID_MAX || strlen(as) != json_string_length(a) ||
				 !egs_label_valid(as, &(const char *){ NULL })));
	egs_strlcpy(n->attached_gpr, *bad_attached ? "" : as, sizeof(n->attached_gpr));
	json_t *sh = json_object_get(o, "attachedShared");
	if (sh && !json_is_null(sh) && !egs_agent_gpr_ids(sh, &n->attached_shared))
		*bad_attached = true; /* like attachedGpr: taken as nothing attached */
	return true;
}

/* One string field k of unmanaged node i: a label (required for name, instanceType, gpuModel). */
static bool unmanaged_str(struct egs_req *r, json_t *o, size_t i, const char *k, bool required, json_t *out)
{
	json_t *x = json_object_get(o, k);
	const char *s = json_is_string(x) ? json_string_value(x) : "";
	char f[64];

	snprintf(f, sizeof(f), "unmanagedNodes[%zu].%s", i, k);
	if ((x && !json_is_null(x) && !json_is_string(x)) || ((required || *s) && !egs_label_valid(s, &(const char *){NULL}))) {
		egs_reply_invalid(r, f, "%s must be 1-63 letters, digits, '.', '_' or '-'", f);
		return false;
	}
	json_object_set_new(out, k, json_string(s));
	return true;
}

static bool unmanaged_int(struct egs_req *r, json_t *o, size_t i, const char *k, int64_t max, json_t *out)
{
	json_t *x = json_object_get(o, k);
	char f[64];

	snprintf(f, sizeof(f), "unmanagedNodes[%zu].%s", i, k);
	if (x && !json_is_null(x) && (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > max)) {
		egs_reply_invalid(r, f, "%s must be an integer from 0 to %lld", f, (long long)max);
		return false;
	}
	json_object_set_new(out, k, json_integer(x ? json_integer_value(x) : 0));
	return true;
}

/*
 * The registration's optional unmanagedNodes: GPU nodes of the cluster that opted out of EGS (the
 * kubernetes backend's kubeslice.io/managed-by-egs=false).  They are listed, never scheduled.  Stores
 * a clean copy in *out (caller decrefs); replies 422 naming the field and returns false when malformed.
 */
static bool parse_unmanaged(struct egs_req *r, json_t *list, json_t **out)
{
	json_t *o;
	size_t i;

	*out = json_array();
	if (!list || json_is_null(list))
		return true;
	if (!json_is_array(list) || json_array_size(list) > MAX_NODES_PER_AGENT) {
		egs_reply_invalid(r, "unmanagedNodes", "unmanagedNodes must be a list of at most %d nodes",
				  MAX_NODES_PER_AGENT);
		goto fail;
	}
	json_array_foreach(list, i, o) {
		json_t *n = json_object();
		json_array_append_new(*out, n);
		if (!json_is_object(o)) {
			char f[40];
			snprintf(f, sizeof(f), "unmanagedNodes[%zu]", i);
			egs_reply_invalid(r, f, "%s must be an object", f);
			goto fail;
		}
		if (!unmanaged_str(r, o, i, "name", true, n) || !unmanaged_str(r, o, i, "instanceType", false, n) ||
		    !unmanaged_str(r, o, i, "gpuModel", false, n) || !unmanaged_str(r, o, i, "cloudProvider", false, n) ||
		    !unmanaged_str(r, o, i, "region", false, n) || !unmanaged_int(r, o, i, "gpuCount", MAX_GPUS, n) ||
		    !unmanaged_int(r, o, i, "memoryMiB", (int64_t)1 << 22, n))
			goto fail;
	}
	return true;
fail:
	json_decref(*out);
	*out = NULL;
	return false;
}

static void agent_register(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "agentVersion", "nodes", "unmanagedNodes", "features", NULL };
	json_t *unmanaged = NULL;
	struct egs_server *srv = r->srv;
	struct egs_state *st = &srv->st;
	struct egs_cluster *c;
	char version[EGS_NAME_MAX];
	if (!egs_body_only(r, allowed) || !egs_agent_cluster(r, &c) ||
	    !egs_get_str(r, r->body, "agentVersion", false, version, sizeof(version)) ||
	    (version[0] && !egs_check_name(r, "agentVersion", version, false)))
		return;
	bool slice_access;
	if (!egs_kubecred_agent_features(r, &slice_access))
		return;
	json_t *nodes = json_object_get(r->body, "nodes");
	if (!json_is_array(nodes) || json_array_size(nodes) > MAX_NODES_PER_AGENT) {
		egs_reply_invalid(r, "nodes", "nodes must be a list of at most %d nodes", MAX_NODES_PER_AGENT);
		return;
	}
	if (!parse_unmanaged(r, json_object_get(r->body, "unmanagedNodes"), &unmanaged))
		return;
	size_t count = json_array_size(nodes);
	struct egs_node *parsed = egs_calloc(count + 1, sizeof(*parsed));
	bool *bad_attached = egs_calloc(count + 1, sizeof(*bad_attached));
	size_t i;
	json_t *o;
	bool ok = true;
	json_array_foreach(nodes, i, o) {
		if (!(ok = parse_node(r, o, i, &parsed[i], &bad_attached[i])))
			break;
		for (size_t j = 0; j < i && ok; j++)
			if (!strcmp(parsed[j].name, parsed[i].name)) {
				char f[40];
				snprintf(f, sizeof(f), "nodes[%zu].name", i);
				egs_reply_invalid(r, f, "node %s is listed twice", parsed[i].name);
				ok = false;
			}
		if (!ok)
			break;
	}
	if (!ok) {
		for (size_t j = 0; j < count; j++) {
			free(parsed[j].gpus);
			egs_strlist_cleanup(&parsed[j].attached_shared);
		}
		free(parsed);
		free(bad_attached);
		json_decref(unmanaged);
		return;
	}
	if (!srv->unmanaged)
		srv->unmanaged = json_object();
	json_object_set_new(srv->unmanaged, c->name, unmanaged);
	int64_t now = egs_now(srv);
	c->slice_access = slice_access;
	for (i = 0; i < count; i++) {
		struct egs_node *p = &parsed[i];
		struct egs_node *n = egs_state_node(st, c->name, p->name);
		if (!n) {
			n = egs_calloc(1, sizeof(*n));
			egs_strlcpy(n->name, p->name, sizeof(n->name));
			egs_strlcpy(n->cluster, c->name, sizeof(n->cluster));
			n->temp_threshold = 85;
			n->power_threshold = 700;
			EGS_ASSERT(egs_state_add_node(st, n) == EGS_OK);
			egs_state_event(st, now, "Normal", "NodeRegistered", "Node", n->key, NULL, "node %s of cluster %s registered with %d x %s",
					n->name, c->name, p->gpu_count, p->gpu_shape);
		}
		st->inventory_gen++; /* its shape may change: what the planner keeps of the inventory */
		memcpy(n->instance_type, p->instance_type, sizeof(n->instance_type));
		memcpy(n->gpu_shape, p->gpu_shape, sizeof(n->gpu_shape));
		memcpy(n->cloud_provider, p->cloud_provider, sizeof(n->cloud_provider));
		memcpy(n->region, p->region, sizeof(n->region));
		memcpy(n->zone, p->zone, sizeof(n->zone));
		n->gpu_count = p->gpu_count;
		n->memory_mib = p->memory_mib;
		memcpy(n->address, p->address, sizeof(n->address));
		n->sharing = p->sharing;
		if (bad_attached[i])
			egs_state_event(st, now, "Warning", "AttachedGprIgnored", "Node", n->key, NULL,
					"node %s of cluster %s registered with a malformed attachedGpr or attachedShared; taken as nothing attached",
					n->name, c->name);
		if (p->n_gpus) {
			free(n->gpus);
			n->gpus = p->gpus;
			n->n_gpus = p->n_gpus;
			p->gpus = NULL;
		}
		if (n->health == EGS_HEALTH_UNSCHEDULABLE)
			n->health = EGS_HEALTH_HEALTHY;
		n->last_heartbeat = now;
		egs_state_touch(st, EGS_KIND_NODE, n);
		egs_node_set_attached(st, n, p->attached_gpr, now);
		egs_share_set_attached(st, n, &p->attached_shared, now);
	}
	/* Nodes the agent no longer reports leave scheduling. */
	void *v;
	for (size_t k = 0; egs_map_next(&st->nodes, &k, NULL, &v);) {
		struct egs_node *n = v;
		if (strcmp(n->cluster, c->name) != 0 || n->health == EGS_HEALTH_UNSCHEDULABLE)
			continue;
		bool listed = false;
		for (size_t j = 0; j < count && !listed; j++)
			listed = !strcmp(parsed[j].name, n->name);
		if (!listed) {
			n->health = EGS_HEALTH_UNSCHEDULABLE;
			egs_state_touch(st, EGS_KIND_NODE, n);
		}
	}
	for (size_t j = 0; j < count; j++) {
		free(parsed[j].gpus);
		egs_strlist_cleanup(&parsed[j].attached_shared);
	}
	free(parsed);
	free(bad_attached);
	st->generation++;
	egs_server_changed(srv);
	egs_reply_ok(r, json_pack("{s:I, s:i, s:[s, s, s]}", "nodes", (json_int_t)count, "heartbeatIntervalSeconds",
				  (int)(st->cfg.heartbeat_timeout_s / 3 > 0 ? st->cfg.heartbeat_timeout_s / 3 : 1),
				  "features", "checks", "sharing", "pods"));
}

const struct egs_route egs_routes_agent_register[] = {
	{ EVHTTP_REQ_POST, "/api/v1/agent/register", agent_register, false },
	{ 0, NULL, NULL, false },
};
