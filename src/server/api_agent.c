/*
 * api_agent.c: the agent protocol (docs/internals/agent-protocol.md): heartbeat, long-polled actions
 * and results (registration: api_agent_register.c).  Actions are derived from the state on every poll
 * (desired holder of each node against what the agent reported), never queued, so restarts converge.
 */
#include "server/api_agent.h"
#include "server/server.h"
#include "server/kubecred.h"
#include "server/kubeslice.h"

#include "core/gpr.h"
#include "core/sched.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct egs_poll {
	struct egs_server *srv;
	struct egs_hreq *hq; /* the held request (conn.h) */
	char cluster[EGS_NAME_MAX];
	struct event *timer;
	int64_t t0_us;
};

bool egs_agent_cluster(struct egs_req *r, struct egs_cluster **out)
{
	if (!egs_require_role(r, EGS_R(AGENT)))
		return false;
	char name[EGS_NAME_MAX];
	if (r->body && json_object_get(r->body, "clusterName")) {
		if (!egs_get_str(r, r->body, "clusterName", true, name, sizeof(name)))
			return false;
		if (strcmp(name, r->who.cluster) != 0) {
			egs_reply_err(r, EGS_ERR_FORBIDDEN, NULL, "clusterName", "this agent token belongs to cluster %s",
				      r->who.cluster);
			return false;
		}
	}
	*out = egs_state_cluster(&r->srv->st, r->who.cluster);
	if (!*out) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "CLUSTER_NOT_FOUND", "clusterName", "cluster %s is not registered",
			      r->who.cluster);
		return false;
	}
	(*out)->last_seen = egs_now(r->srv);
	return true;
}

/* Every node of g with its agent's check address ("" when its agent registered none), so that an agent
 * can probe peers served by other agents. */
static json_t *gpr_nodes(const struct egs_state *st, const struct egs_gpr *g)
{
	json_t *a = json_array();
	for (size_t i = 0; g && i < g->nodes.n; i++) {
		const struct egs_node *m = egs_map_get(&st->nodes, g->nodes.v[i]);
		if (m)
			json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "node", m->name, "cluster", m->cluster,
							   "address", m->address));
	}
	return a;
}

/* One action for node n: type ("attach" or "detach") of GPR gid.  A shared GPR's attach carries its
 * shares of n's devices: {"<uuid>": "0.60", ...}. */
static json_t *action_json(const struct egs_state *st, const struct egs_node *n, const char *type, const char *gid,
			   int64_t now)
{
	const struct egs_gpr *g = egs_state_gpr(st, gid);
	const struct egs_workspace *ws = g ? egs_state_workspace(st, g->workspace) : NULL;
	json_t *nss = json_array();
	for (size_t j = 0; ws && j < ws->n_namespaces; j++)
		if (egs_strlist_has(&ws->namespaces[j].clusters, n->cluster))
			json_array_append_new(nss, json_string(ws->namespaces[j].name));
	char id[200], start[32], exit_s[32];
	snprintf(id, sizeof(id), "%s:%s:%s", type, gid, n->name);
	int64_t st_t = g && g->start_ts ? g->start_ts : now;
	egs_time_format(st_t, start, sizeof(start));
	egs_time_format(g && g->exit_at ? g->exit_at : st_t + (g ? g->exit_duration_s : 0), exit_s, sizeof(exit_s));
	json_t *act = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "actionId", id, "type", type, "gprId", gid,
				"node", n->name, "workspace", g ? g->workspace : "", "namespaces", nss, "startTime", start,
				"exitTime", exit_s);
	EGS_ASSERT(act);
	if (!strcmp(type, "attach"))
		json_object_set_new(act, "gprNodes", gpr_nodes(st, g));
	if (!strcmp(type, "attach") && g && g->share_centi) {
		json_t *shares = json_object();
		for (int k = 0; k < g->n_shares; k++) {
			char text[EGS_SHARE_TEXT_MAX];
			egs_share_format(g->shares[k].centi, text, sizeof(text));
			json_object_set_new(shares, g->shares[k].uuid, json_string(text));
		}
		json_object_set_new(act, "shares", shares);
	}
	return act;
}

/* The shared GPRs' actions for n: attach each GPR that holds shares of n and is not attached yet
 * (only where the agent speaks sharing), detach each reported attachment that is no longer wanted. */
static void append_shared_actions(const struct egs_state *st, const struct egs_node *n, int64_t now, json_t *out)
{
	for (size_t i = 0; i < n->attached_shared.n; i++) {
		const char *gid = n->attached_shared.v[i];
		const struct egs_gpr *g = egs_state_gpr(st, gid);
		bool wanted = g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED) &&
			      g->share_node == n;
		if (!wanted)
			json_array_append_new(out, action_json(st, n, "detach", gid, now));
	}
	for (size_t i = 0; n->sharing && i < n->shared.len; i++) {
		const struct egs_gpr *g = n->shared.items[i];
		if ((g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED) &&
		    !egs_strlist_has(&n->attached_shared, g->id))
			json_array_append_new(out, action_json(st, n, "attach", g->id, now));
	}
}

static void append_actions(struct egs_server *srv, const char *cluster, json_t *out)
{
	struct egs_state *st = &srv->st;
	int64_t now = egs_now(srv);
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		if (strcmp(n->cluster, cluster) != 0)
			continue;
		const char *type = NULL, *gid = NULL;
		if (n->attached_gpr[0]) {
			const struct egs_gpr *g = egs_state_gpr(st, n->attached_gpr);
			bool wanted = g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED) &&
				      !strcmp(n->gpr_id, g->id) && egs_strlist_has(&g->nodes, n->key);
			if (!wanted)
				type = "detach", gid = n->attached_gpr;
		} else if (n->gpr_id[0]) {
			const struct egs_gpr *g = egs_state_gpr(st, n->gpr_id);
			if (g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED) &&
			    egs_strlist_has(&g->nodes, n->key))
				type = "attach", gid = n->gpr_id;
		}
		if (type)
			json_array_append_new(out, action_json(st, n, type, gid, now));
		if (egs_share_node_busy(n))
			append_shared_actions(st, n, now, out);
	}
	const struct egs_cluster *c = egs_state_cluster(st, cluster);
	if (c) {
		egs_kubecred_append_actions(srv, c, out);
		egs_kubeslice_append_actions(srv, c, out);
	}
}

/* attachedShared (a list of at most MAX_SHARED_PER_NODE GPR ids) into *out; false (out left empty)
 * when v is anything else. */
bool egs_agent_gpr_ids(json_t *v, struct egs_strlist *out)
{
	size_t i;
	json_t *e;
	if (!json_is_array(v) || json_array_size(v) > MAX_SHARED_PER_NODE)
		return false;
	json_array_foreach(v, i, e) {
		const char *id = json_string_value(e);
		if (!id || !*id || json_string_length(e) >= EGS_ID_MAX || strlen(id) != json_string_length(e) ||
		    !egs_label_valid(id, &(const char *){ NULL })) {
			egs_strlist_cleanup(out);
			return false;
		}
		egs_strlist_add(out, id);
	}
	return true;
}

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

static bool bad_hb(struct egs_req *r, size_t i, const char *what, const char *why)
{
	char f[96];
	snprintf(f, sizeof(f), "nodes[%zu]%s%s", i, *what ? "." : "", what);
	egs_reply_invalid(r, f, "%s %s", f, why);
	return false;
}

/* Validates every node of a heartbeat before any of it is applied. */
static bool check_heartbeat(struct egs_req *r, json_t *nodes)
{
	static const char *const metrics[] = { "powerW", "tempC", "utilPct", "memUsedMiB" };
	size_t i, j;
	json_t *o, *u;
	enum egs_health h;
	json_array_foreach(nodes, i, o) {
		if (!json_is_object(o))
			return bad_hb(r, i, "", "must be an object");
		json_t *name = json_object_get(o, "name"), *health = json_object_get(o, "health");
		json_t *att = json_object_get(o, "attachedGpr"), *gpus = json_object_get(o, "gpus");
		if (!json_is_string(name) || !egs_label_valid(json_string_value(name), &(const char *){ NULL }))
			return bad_hb(r, i, "name", "must be a node name");
		if (health && !(json_is_string(health) && egs_health_parse(json_string_value(health), &h)))
			return bad_hb(r, i, "health", "must be Healthy, Unhealthy or Unschedulable");
		if (att && !json_is_null(att) &&
		    !(json_is_string(att) && (!json_string_length(att) || egs_label_valid(json_string_value(att), &(const char *){ NULL })) &&
		      json_string_length(att) < EGS_ID_MAX))
			return bad_hb(r, i, "attachedGpr", "must be a GPR id or \"\"");
		if (gpus && !json_is_null(gpus) && (!json_is_array(gpus) || json_array_size(gpus) > MAX_GPUS))
			return bad_hb(r, i, "gpus", "must be a list of at most 64 GPUs");
		json_t *shared = json_object_get(o, "attachedShared");
		struct egs_strlist ids = { 0 };
		if (shared && !json_is_null(shared) && !egs_agent_gpr_ids(shared, &ids))
			return bad_hb(r, i, "attachedShared", "must be a list of at most 256 GPR ids");
		egs_strlist_cleanup(&ids);
		json_array_foreach(gpus, j, u) {
			if (!json_is_object(u))
				return bad_hb(r, i, "gpus", "must hold objects");
			for (size_t k = 0; k < EGS_ARRAY_LEN(metrics); k++) {
				json_t *m = json_object_get(u, metrics[k]);
				if (m && !json_is_null(m) && (!json_is_number(m) || json_number_value(m) < 0 || json_number_value(m) > 1e9))
				{
					char what[48];
					snprintf(what, sizeof(what), "gpus[%zu].%s", j, metrics[k]);
					return bad_hb(r, i, what, "must be a number from 0 to 1e9");
				}
			}
		}
	}
	return true;
}

static void agent_heartbeat(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "nodes", "pendingPods", NULL };
	struct egs_server *srv = r->srv;
	struct egs_state *st = &srv->st;
	struct egs_cluster *c;
	if (!egs_body_only(r, allowed) || !egs_agent_cluster(r, &c) ||
	    !egs_observe_pending_check(r, json_object_get(r->body, "pendingPods")))
		return;
	json_t *nodes = json_object_get(r->body, "nodes");
	if (!json_is_array(nodes) || json_array_size(nodes) > MAX_NODES_PER_AGENT) {
		egs_reply_invalid(r, "nodes", "nodes must be a list of at most %d nodes", MAX_NODES_PER_AGENT);
		return;
	}
	if (!check_heartbeat(r, nodes))
		return;
	int64_t now = egs_now(srv);
	uint64_t gen = st->generation;
	size_t i, unknown = 0;
	const char *unknown_name = NULL;
	json_t *o;
	json_array_foreach(nodes, i, o) {
		json_t *name = json_is_object(o) ? json_object_get(o, "name") : NULL;
		if (!json_is_string(name)) {
			char f[40];
			snprintf(f, sizeof(f), "nodes[%zu].name", i);
			egs_reply_invalid(r, f, "%s must be a string", f);
			return;
		}
		struct egs_node *n = egs_state_node(st, c->name, json_string_value(name));
		if (!n) { /* not registered: answered 404 below, and the agent registers again */
			unknown++;
			unknown_name = json_string_value(name);
			continue;
		}
		bool was = egs_node_schedulable(st, n, now);
		n->last_heartbeat = now;
		json_t *h = json_object_get(o, "health");
		enum egs_health health;
		if (json_is_string(h) && egs_health_parse(json_string_value(h), &health) && health != n->health &&
		    !(health == EGS_HEALTH_HEALTHY && now < n->quarantine_until)) {
			n->health = health;
			egs_state_touch(st, EGS_KIND_NODE, n);
		}
		json_t *a = json_object_get(o, "attachedGpr");
		if (json_is_string(a) && json_string_length(a) < EGS_ID_MAX)
			egs_node_set_attached(st, n, json_string_value(a), now);
		/* attachedShared is absent from an agent that knows nothing of sharing; an agent that sends it
		 * speaks sharing, which restores n->sharing (runtime only) after egsd restarts. */
		struct egs_strlist shared = { 0 };
		if (egs_agent_gpr_ids(json_object_get(o, "attachedShared"), &shared)) {
			if (!n->sharing)
				st->generation++;
			n->sharing = true;
			egs_share_set_attached(st, n, &shared, now);
		}
		egs_strlist_cleanup(&shared);
		json_t *gpus = json_object_get(o, "gpus");
		size_t j;
		json_t *u;
		json_array_foreach(gpus, j, u) {
			json_t *uu = json_object_get(u, "uuid");
			for (int k = 0; json_is_string(uu) && k < n->n_gpus; k++) {
				struct egs_gpu *gpu = &n->gpus[k];
				if (strcmp(gpu->uuid, json_string_value(uu)) != 0)
					continue;
				gpu->power_w = num(u, "powerW");
				gpu->temp_c = num(u, "tempC");
				gpu->util_pct = num(u, "utilPct");
				gpu->mem_used_mib = (int64_t)num(u, "memUsedMiB");
				gpu->sampled_at = now;
			}
		}
		egs_node_observed(st, n, now);
		egs_observe_node(srv, n, o, now); /* observability: series, workloads, alerts */
		if (was != egs_node_schedulable(st, n, now)) {
			st->generation++;
			egs_server_changed(srv);
		}
	}
	egs_observe_pending(srv, c->name, json_object_get(r->body, "pendingPods"), now);
	if (st->generation != gen) /* e.g. shared attachments that came or went: plan again */
		egs_server_changed(srv);
	if (unknown) {
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "NODE_NOT_FOUND", "nodes", "%zu node(s), e.g. %.63s, are not registered; register again",
			      unknown, unknown_name);
		return;
	}
	json_t *acts = json_array();
	append_actions(srv, c->name, acts);
	egs_reply_ok(r, json_pack("{s:I}", "pendingActions", (json_int_t)json_array_size(acts)));
	json_decref(acts);
}

static void poll_reply(struct egs_poll *p, json_t *actions)
{
	struct egs_req r;
	memset(&r, 0, sizeof(r));
	r.srv = p->srv;
	r.hq = p->hq;
	r.method = EVHTTP_REQ_GET;
	egs_strlcpy(r.path, "/api/v1/agent/actions", sizeof(r.path));
	r.t0_us = p->t0_us;
	egs_reply_ok(&r, json_pack("{s:o}", "actions", actions));
	egs_vec_remove(&p->srv->polls, p);
	event_free(p->timer);
	free(p);
}

static void poll_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	poll_reply(arg, json_array());
}

static void agent_actions(struct egs_req *r)
{
	struct egs_server *srv = r->srv;
	struct egs_cluster *c;
	if (!egs_agent_cluster(r, &c))
		return;
	const char *w = egs_query(r, "wait");
	long wait = 25;
	if (w) {
		char *end;
		wait = strtol(w, &end, 10);
		if (*w == '\0' || *end || wait < 0 || wait > 60) {
			egs_reply_invalid(r, "wait", "wait must be 0 to 60 seconds");
			return;
		}
	}
	json_t *acts = json_array();
	append_actions(srv, c->name, acts);
	if (json_array_size(acts) || wait == 0 || srv->stopping) {
		egs_reply_ok(r, json_pack("{s:o}", "actions", acts));
		return;
	}
	json_decref(acts);
	struct egs_poll *p = egs_calloc(1, sizeof(*p));
	p->srv = srv;
	p->hq = r->hq;
	p->t0_us = r->t0_us;
	egs_strlcpy(p->cluster, c->name, sizeof(p->cluster));
	p->timer = evtimer_new(srv->base, poll_timeout, p);
	struct timeval tv = { wait, 0 };
	evtimer_add(p->timer, &tv);
	egs_vec_push(&srv->polls, p);
	r->hq = NULL; /* held: answered by egs_agent_wake_polls or the timer */
}

void egs_agent_wake_polls(struct egs_server *srv, bool all)
{
	for (size_t i = srv->polls.len; i-- > 0;) {
		struct egs_poll *p = srv->polls.items[i];
		json_t *acts = json_array();
		if (!all)
			append_actions(srv, p->cluster, acts);
		if (all || json_array_size(acts))
			poll_reply(p, acts);
		else
			json_decref(acts);
	}
}

void egs_agent_drop_polls(struct egs_server *srv)
{
	egs_agent_wake_polls(srv, true);
	egs_vec_cleanup(&srv->polls);
}

#define MAX_CHECKS 16

static bool bad_check(struct egs_req *r, size_t i, const char *key, const char *why)
{
	char f[48];
	snprintf(f, sizeof(f), "checks[%zu]%s%s", i, *key ? "." : "", key);
	egs_reply_invalid(r, f, "%s %s", f, why);
	return false;
}

static bool in_list(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (!strcmp(s, *words))
			return true;
	return false;
}

static bool one_of(json_t *v, const char *const *words)
{
	return json_is_string(v) && in_list(json_string_value(v), words);
}

/* Validates the optional `checks` of a result whole (422 naming e.g. checks[2].status) and returns
 * them in *out (caller frees; NULL when absent or empty), with *post_failed telling whether a
 * post-exit check failed. */
static bool parse_checks(struct egs_req *r, json_t *checks, json_t **out, bool *post_failed)
{
	static const char *const phases[] = { "pre", "post", NULL };
	static const char *const statuses[] = { "passed", "failed", "skipped", NULL };
	*out = NULL;
	*post_failed = false;
	if (!checks || json_is_null(checks))
		return true;
	if (!json_is_array(checks) || json_array_size(checks) > MAX_CHECKS) {
		egs_reply_invalid(r, "checks", "checks must be a list of at most %d checks", MAX_CHECKS);
		return false;
	}
	size_t i;
	json_t *c;
	json_array_foreach(checks, i, c) {
		if (!json_is_object(c))
			return bad_check(r, i, "", "must be an object");
		static const char *const keys[] = { "name", "phase", "status", "output", "durationMs", NULL };
		const char *key;
		json_t *v;
		json_object_foreach(c, key, v)
			if (!in_list(key, keys))
				return bad_check(r, i, "", "has an unknown field");
		json_t *name = json_object_get(c, "name"), *out_s = json_object_get(c, "output");
		json_t *ms = json_object_get(c, "durationMs");
		if (!json_is_string(name) || !egs_label_valid(json_string_value(name), &(const char *){ NULL }))
			return bad_check(r, i, "name", "must be a check name (1-63 letters, digits, '.', '_' or '-')");
		if (!one_of(json_object_get(c, "phase"), phases))
			return bad_check(r, i, "phase", "must be pre or post");
		if (!one_of(json_object_get(c, "status"), statuses))
			return bad_check(r, i, "status", "must be passed, failed or skipped");
		if (out_s && !json_is_null(out_s)) {
			if (!json_is_string(out_s) || json_string_length(out_s) > 255)
				return bad_check(r, i, "output", "must be a string of at most 255 bytes");
			const char *t = json_string_value(out_s);
			for (size_t k = 0; k < json_string_length(out_s); k++)
				if ((unsigned char)t[k] < 0x20 || t[k] == 0x7f)
					return bad_check(r, i, "output", "must not contain control characters");
		}
		if (ms && !json_is_null(ms) &&
		    (!json_is_integer(ms) || json_integer_value(ms) < 0 || json_integer_value(ms) > 7LL * 86400 * 1000))
			return bad_check(r, i, "durationMs", "must be an integer from 0 to 604800000");
	}
	if (!json_array_size(checks))
		return true;
	*out = json_array();
	json_array_foreach(checks, i, c) {
		json_t *out_s = json_object_get(c, "output"), *ms = json_object_get(c, "durationMs");
		const char *phase = json_string_value(json_object_get(c, "phase"));
		const char *status = json_string_value(json_object_get(c, "status"));
		json_array_append_new(*out, json_pack("{s:s, s:s, s:s, s:s, s:I}", "name",
						      json_string_value(json_object_get(c, "name")), "phase", phase,
						      "status", status, "output",
						      json_is_string(out_s) ? json_string_value(out_s) : "", "durationMs",
						      (json_int_t)(json_is_integer(ms) ? json_integer_value(ms) : 0)));
		if (!strcmp(phase, "post") && !strcmp(status, "failed"))
			*post_failed = true;
	}
	return true;
}

static void agent_result(struct egs_req *r)
{
	static const char *const allowed[] = { "clusterName", "actionId", "type", "gprId", "node", "ok", "message", "checks",
					       NULL };
	struct egs_server *srv = r->srv;
	struct egs_cluster *c;
	char type[16], gid[EGS_ID_MAX], node[EGS_NAME_MAX], msg[400], aid[200];
	bool ok, present;
	if (!egs_body_only(r, allowed) || !egs_agent_cluster(r, &c) ||
	    !egs_get_str(r, r->body, "actionId", false, aid, sizeof(aid)) ||
	    !egs_get_str(r, r->body, "type", true, type, sizeof(type)) ||
	    !egs_get_str(r, r->body, "gprId", true, gid, sizeof(gid)) ||
	    !egs_get_str(r, r->body, "node", true, node, sizeof(node)) ||
	    !egs_get_bool(r, r->body, "ok", &ok, &present) || !egs_get_str(r, r->body, "message", false, msg, sizeof(msg)))
		return;
	if (!present) {
		egs_reply_invalid(r, "ok", "ok is required");
		return;
	}
	json_t *checks;
	bool post_failed;
	if (!parse_checks(r, json_object_get(r->body, "checks"), &checks, &post_failed))
		return;
	struct egs_node *n = NULL;
	bool attach = !strcmp(type, "attach");
	if (!attach && strcmp(type, "detach") != 0)
		egs_reply_invalid(r, "type", "type must be attach or detach");
	else if (egs_check_name(r, "gprId", gid, false) && egs_check_name(r, "node", node, false) &&
		 egs_check_text(r, "actionId", aid) && !(n = egs_state_node(&srv->st, c->name, node)))
		egs_reply_err(r, EGS_ERR_NOT_FOUND, "NODE_NOT_FOUND", "node", "node %s is not registered in cluster %s", node,
			      c->name);
	if (!n) {
		json_decref(checks);
		return;
	}
	int64_t now = egs_now(srv);
	struct egs_gpr *g = egs_state_gpr(&srv->st, gid);
	if (g && checks) {
		char *text = json_dumps(checks, JSON_COMPACT);
		EGS_ASSERT(text);
		egs_gpr_note_check_run(g, n->key, !attach, ok, text, now);
		egs_state_restamp(&srv->st, g); /* its status view lists the runs (gpr_view.c) */
		free(text);
	}
	json_decref(checks);
	if (attach)
		egs_gpr_attach_result(&srv->st, n, gid, ok, msg, now);
	else if (!ok && post_failed)
		egs_gpr_post_check_failed(&srv->st, n, gid, msg, now);
	else
		egs_gpr_detach_result(&srv->st, n, gid, ok, msg, now);
	srv->st.generation++;
	egs_server_changed(srv);
	egs_reply_ok(r, json_pack("{s:s}", "actionId", aid));
}

const struct egs_route egs_routes_agent[] = {
	{ EVHTTP_REQ_POST, "/api/v1/agent/heartbeat", agent_heartbeat, false },
	{ EVHTTP_REQ_GET, "/api/v1/agent/actions", agent_actions, false },
	{ EVHTTP_REQ_POST, "/api/v1/agent/actions/result", agent_result, false },
	{ 0, NULL, NULL, false },
};
