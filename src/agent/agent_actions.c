/*
 * agent_actions.c: carrying out one action (attach, detach, precheck) with its checks, and reporting
 * the result (see agent.h; the protocol is docs/internals/agent-protocol.md).
 *
 * attach: the node must be one of ours; if it already holds this GPR the attach is a repeat (a lost
 *   result) and succeeds without checks, since the GPR's workload now runs on it.  Otherwise the
 *   pre-checks run; a failure fails the action (egsd then marks the node, and the GPR retries on
 *   other nodes) and marks the node Unhealthy here for the quarantine time.
 * detach: the backend detaches (its hook drains); if the node was attached, the post-exit checks run
 *   and a failure fails the action with "detached, but ..." and marks the node.  A repeat of a detach
 *   finds the node free and succeeds without checks.
 * A shared attach (GPU sharing: the action carries "shares") may join other shared GPRs on the node:
 *   it is a repeat when this GPR's shares are attached already, and the checks that assume an empty
 *   node (gpu-processes) are left out while other GPRs share it, before an attach and after a detach.
 * The GPR's other nodes (for the connectivity and NCCL checks) come from the action's "gprNodes" when
 * egsd sends it, else from what this agent knows: attach actions for the same GPR in the same poll
 * and its own attachments to that GPR.
 */
#include "agent/agent_internal.h"

#include "agent/log.h"
#include "core/share.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEERS_MAX 256

/* The checks when the operator configured none: the node must be healthy before an attach. */
static const struct egs_checks_config default_checks = {.pre = 1u << 0};

#define LATER_PAUSE_MS 2000 /* between repeats of an action the backend cannot carry out now */

static const char *str_field(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Writes a, sep and b into out (n bytes); what does not fit is cut (the message is cut later anyway). */
static void join(char *out, size_t n, const char *a, const char *sep, const char *b)
{
	size_t k;

	egs_strlcpy(out, a, n);
	k = strlen(out);
	egs_strlcpy(out + k, sep, n - k);
	k += strlen(out + k);
	egs_strlcpy(out + k, b, n - k);
}

static size_t node_index(struct egs_agent *a, const struct egs_dev_node *n)
{
	return (size_t)(n - a->dev->nodes);
}

/* ---- peers ---- */

/* Adds node (with address, may be "") to peers unless it is self or already there. */
static void add_peer(struct egs_check_peer *peers, size_t *n, const char *self, const char *node, const char *address)
{
	if (*n >= PEERS_MAX || strcmp(node, self) == 0 || strlen(node) >= EGS_NAME_MAX)
		return;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(peers[i].node, node) == 0)
			return;
	egs_strlcpy(peers[*n].node, node, sizeof(peers[*n].node));
	egs_strlcpy(peers[*n].address, address, sizeof(peers[*n].address));
	(*n)++;
}

/* The address of a node this agent serves: only one written in the devices file (a mock node standing
 * for a remote host); probing this agent's own listener would prove nothing. */
static const char *local_address(struct egs_agent *a, const char *node)
{
	const struct egs_dev_node *n = egs_devices_find(a->dev, node);
	return n ? n->address : "";
}

/* Collects the GPR's other nodes into peers (PEERS_MAX entries); returns their number. */
static size_t collect_peers(struct egs_agent *a, json_t *act, json_t *batch, const char *gpr, const char *self,
			    struct egs_check_peer *peers)
{
	json_t *gn = json_object_get(act, "gprNodes"), *v;
	struct egs_attachment *atts;
	size_t n = 0, n_atts, i;

	if (json_is_array(gn)) { /* egsd knows every node of the GPR and its agent's address */
		json_array_foreach(gn, i, v) {
			const char *node = str_field(v, "node"), *addr = str_field(v, "address");
			if (node)
				add_peer(peers, &n, self, node, addr && strlen(addr) < EGS_DEV_ADDRESS_MAX ? addr : "");
		}
		return n;
	}
	json_array_foreach(batch, i, v) {
		const char *type = str_field(v, "type"), *g = str_field(v, "gprId"), *node = str_field(v, "node");
		if (type && g && node && strcmp(type, "attach") == 0 && strcmp(g, gpr) == 0)
			add_peer(peers, &n, self, node, local_address(a, node));
	}
	egs_backend_list(a->be, &atts, &n_atts);
	for (i = 0; i < n_atts; i++)
		if (strcmp(atts[i].gpr_id, gpr) == 0)
			add_peer(peers, &n, self, atts[i].node, local_address(a, atts[i].node));
	egs_attachments_free(atts, n_atts);
	return n;
}

/* ---- checks ---- */

static bool stopping(void *arg)
{
	return egs_agent_stopping(arg);
}

/* Does node hold an attachment of another GPR than gpr (dedicated or shared)? */
static bool others_attached(struct egs_agent *a, const char *node, const char *gpr)
{
	struct egs_strlist shared = {0};
	char held[128];
	bool others = egs_backend_attached_gpr(a->be, node, held, sizeof(held)) && strcmp(held, gpr) != 0;
	egs_backend_shared_gprs(a->be, node, &shared);
	for (size_t i = 0; i < shared.n && !others; i++)
		others = strcmp(shared.v[i], gpr) != 0;
	egs_strlist_cleanup(&shared);
	return others;
}

/* cfg without the checks that assume nothing else runs on the node (gpu-processes), for a node whose
 * GPUs other shared GPRs use. */
static void shared_node_checks(const struct egs_checks_config *cfg, struct egs_checks_config *out)
{
	unsigned pre = 0, post = 0;
	char err[128];
	*out = *cfg;
	if (egs_checks_parse_list("gpu-processes", EGS_CHECK_PRE, &pre, err, sizeof(err)) == EGS_OK)
		out->pre &= ~pre;
	if (egs_checks_parse_list("gpu-processes", EGS_CHECK_POST, &post, err, sizeof(err)) == EGS_OK)
		out->post &= ~post;
}

/*
 * Runs the checks of phase on node for gpr into *rep, keeps the report in the GPR's log, and marks
 * the node on failure.  shared_node: other GPRs use the node's GPUs (see shared_node_checks).
 * Returns whether every check passed.
 */
static bool run_checks(struct egs_agent *a, const struct egs_dev_node *node, const char *gpr,
		       enum egs_check_phase phase, const struct egs_check_peer *peers, size_t n_peers,
		       bool shared_node, struct egs_check_report *rep)
{
	struct egs_checks_config shared_cfg;
	if (shared_node)
		shared_node_checks(a->checks ? a->checks : &default_checks, &shared_cfg);
	struct egs_check_ctx ctx = {
		.cfg = shared_node ? &shared_cfg : a->checks ? a->checks : &default_checks,
		.dev = a->dev,
		.node = node_index(a, node),
		.cluster = a->cluster,
		.gpr_id = gpr,
		.phase = phase,
		.peers = peers,
		.n_peers = n_peers,
		.now = (int64_t)time(NULL),
		.stop = stopping,
		.stop_arg = a,
	};
	char err[512], sum[EGS_REPORT_MSG_MAX];

	egs_checks_run(&ctx, rep);
	if (a->checks_dir && egs_checks_log_append(a->checks_dir, a->cluster, gpr, node->name, ctx.now, rep, err,
						   sizeof(err)) != EGS_OK)
		EGS_LOG_WARN("cannot keep the check log of %s: %s", gpr, err);
	if (egs_checks_ok(rep))
		return true;
	if (egs_agent_stopping(a))
		return false; /* cut short by the shutdown: no verdict on the node */
	egs_checks_summary(rep, sum, sizeof(sum));
	egs__agent_mark(a, ctx.node, sum);
	return false;
}

/* Validates an optional RFC 3339 time field into *out ("" when absent). */
static bool time_field(json_t *act, const char *key, const char **out, char *msg, size_t msgsz)
{
	json_t *v = json_object_get(act, key);
	int64_t t;

	*out = "";
	if (!v || json_is_null(v))
		return true;
	if (!json_is_string(v) || !egs_time_parse(json_string_value(v), &t)) {
		snprintf(msg, msgsz, "malformed action: %s is not an RFC 3339 time", key);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

/* The "shares" of a shared attach, {"<uuid>": "0.60", ...}, into *out (caller frees; NULL and true
 * when the action has none: a dedicated attach); false (msg says why) when malformed. */
static bool parse_shares(json_t *act, struct egs_gpu_share **out, size_t *n, char *msg, size_t msgsz)
{
	json_t *o = json_object_get(act, "shares"), *v;
	const char *uuid;
	*out = NULL;
	*n = 0;
	if (!o || json_is_null(o))
		return true;
	if (!json_is_object(o) || !json_object_size(o) || json_object_size(o) > EGS_SHARE_DEV_MAX) {
		egs_strlcpy(msg, "malformed action: shares is not an object of GPU shares", msgsz);
		return false;
	}
	*out = egs_calloc(json_object_size(o) + 1, sizeof(**out));
	json_object_foreach(o, uuid, v) {
		struct egs_gpu_share *s = &(*out)[(*n)++];
		if (!json_is_string(v) || !egs_share_parse(json_string_value(v), EGS_SHARE_WHOLE, &s->centi) ||
		    !egs_strlcpy(s->uuid, uuid, sizeof(s->uuid))) {
			snprintf(msg, msgsz, "malformed action: the share of GPU %.64s is not 0.01 to 1.00", uuid);
			return false;
		}
	}
	return true;
}

/* Fills req from the attach action act; false (msg says why) when malformed.  ns gets the names,
 * *shares the shares of a shared attach (caller frees). */
static bool parse_attach(json_t *act, struct egs_attach_req *req, struct egs_strlist *ns, struct egs_gpu_share **shares,
			 char *msg, size_t msgsz)
{
	json_t *list = json_object_get(act, "namespaces"), *v;
	size_t i;

	if (!parse_shares(act, shares, &req->n_shares, msg, msgsz))
		return false;
	req->shares = *shares;

	req->workspace = str_field(act, "workspace");
	req->namespaces = ns;
	if (!req->workspace || !*req->workspace) {
		egs_strlcpy(msg, "malformed action: workspace missing", msgsz);
		return false;
	}
	if (list && !json_is_array(list)) {
		egs_strlcpy(msg, "malformed action: namespaces is not a list", msgsz);
		return false;
	}
	json_array_foreach(list, i, v) {
		if (!json_string_length(v)) {
			egs_strlcpy(msg, "malformed action: namespaces holds a non-string", msgsz);
			return false;
		}
		egs_strlist_add(ns, json_string_value(v));
	}
	return time_field(act, "startTime", &req->start_time, msg, msgsz) &&
	       time_field(act, "exitTime", &req->exit_time, msg, msgsz);
}

/* The pre-checks of an attach or a precheck action into *rep; msg gets the summary. */
static bool precheck(struct egs_agent *a, json_t *act, json_t *batch, const struct egs_dev_node *n, const char *gpr,
		     struct egs_check_report *rep, char *msg, size_t msgsz)
{
	struct egs_check_peer *peers = egs_calloc(PEERS_MAX, sizeof(*peers));
	size_t n_peers = collect_peers(a, act, batch, gpr, n->name, peers);
	bool shared_node = json_is_object(json_object_get(act, "shares")) && others_attached(a, n->name, gpr);
	bool ok = run_checks(a, n, gpr, EGS_CHECK_PRE, peers, n_peers, shared_node, rep);

	egs_checks_summary(rep, msg, msgsz);
	egs_free(peers);
	return ok;
}

static bool do_attach(struct egs_agent *a, json_t *act, json_t *batch, const struct egs_dev_node *n,
		      const char *gpr, struct egs_check_report *rep, bool *checked, bool *later, char *msg, size_t msgsz)
{
	struct egs_strlist namespaces = {0}, shared = {0};
	struct egs_attach_req req = {.node = n->name, .gpr_id = gpr};
	struct egs_gpu_share *shares = NULL;
	char held[128], sum[EGS_REPORT_MSG_MAX], how[EGS__AGENT_MSG_MAX];
	bool ok = false;

	if (!parse_attach(act, &req, &namespaces, &shares, msg, msgsz))
		goto out;
	/* A repeat of a finished attach needs no checks (the GPR's work runs there now), and a node that
	 * holds another GPR is refused by the backend before anything is looked at.  Shares join other
	 * shares: only this GPR's own attachment makes it a repeat. */
	egs_backend_shared_gprs(a->be, n->name, &shared);
	if (req.shares ? !egs_strlist_has(&shared, gpr) && !egs_backend_attached_gpr(a->be, n->name, held, sizeof(held))
		       : !egs_backend_attached_gpr(a->be, n->name, held, sizeof(held)) && !shared.n) {
		*checked = true;
		if (!precheck(a, act, batch, n, gpr, rep, msg, msgsz))
			goto out;
	}
	egs_strlcpy(sum, msg, sizeof(sum));
	enum egs_err rc = egs_backend_attach(a->be, &req, how, sizeof(how));
	ok = rc == EGS_OK;
	*later = rc == EGS_ERR_BUSY;
	if (ok && *checked)
		join(msg, msgsz, how, "; ", sum);
	else
		egs_strlcpy(msg, how, msgsz);
out:
	egs_strlist_cleanup(&namespaces);
	egs_strlist_cleanup(&shared);
	egs_free(shares);
	return ok;
}

static bool do_detach(struct egs_agent *a, const struct egs_dev_node *n, const char *gpr,
		      struct egs_check_report *rep, bool *checked, bool *later, char *msg, size_t msgsz)
{
	char held[128], how[EGS__AGENT_MSG_MAX], sum[EGS_REPORT_MSG_MAX];
	struct egs_strlist shared = {0};
	egs_backend_shared_gprs(a->be, n->name, &shared);
	bool was_shared = *gpr && egs_strlist_has(&shared, gpr);
	bool was_attached = was_shared || (egs_backend_attached_gpr(a->be, n->name, held, sizeof(held)) &&
					   (!*gpr || strcmp(held, gpr) == 0));
	egs_strlist_cleanup(&shared);

	enum egs_err rc = egs_backend_detach(a->be, n->name, gpr, how, sizeof(how));
	if (rc != EGS_OK) {
		*later = rc == EGS_ERR_BUSY;
		egs_strlcpy(msg, how, msgsz);
		return false;
	}
	if (!was_attached) { /* nothing was drained: nothing to check */
		egs_strlcpy(msg, how, msgsz);
		return true;
	}
	*checked = true;
	if (run_checks(a, n, gpr, EGS_CHECK_POST, NULL, 0, was_shared && others_attached(a, n->name, gpr), rep)) {
		egs_checks_summary(rep, sum, sizeof(sum));
		join(msg, msgsz, how, "; ", sum);
		return true;
	}
	egs_checks_summary(rep, sum, sizeof(sum));
	join(msg, msgsz, how, ", but ", sum);
	return false;
}

static void report(struct egs_agent *a, const char *id, const char *type, const char *gpr, const char *node,
		   bool ok, const char *msg, const struct egs_check_report *rep)
{
	json_t *body = egs_report_result(id, type, gpr, node, ok, msg,
					 atomic_load(&a->server_checks) ? rep : NULL);
	long status = 0;

	if (!body) {
		EGS_LOG_WARN("action %s: ids are not valid UTF-8; result not reported", id);
		return;
	}
	if (egs_client_call(a->act_client, "POST", "/api/v1/agent/actions/result", body, 15, &status, NULL) !=
		    EGS_OK &&
	    !egs_agent_stopping(a))
		EGS_LOG_WARN("action %s: cannot report the result (%s%s%s); egsd will ask again", id,
			     status ? "HTTP " : "", status ? "error: " : "", egs_client_errmsg(a->act_client));
	json_decref(body);
}

void egs__agent_run_action(struct egs_agent *a, json_t *act, json_t *batch)
{
	const char *id = str_field(act, "actionId"), *type = str_field(act, "type");
	const char *gpr = str_field(act, "gprId"), *node = str_field(act, "node");
	const struct egs_dev_node *n;
	struct egs_check_report *rep = egs_calloc(1, sizeof(*rep));
	char msg[EGS__AGENT_MSG_MAX] = "";
	bool ok = false, checked = false, later = false;

	if (egs__agent_slice_action(a, act)) /* sliceAccess, sliceRelease: no node, no GPR */
		goto out;
	if (!id || !type || !gpr || !node) {
		EGS_LOG_WARN("ignoring an action without actionId, type, gprId or node");
		goto out;
	}
	EGS_LOG_INFO("action %s: starting", id);
	n = egs_devices_find(a->dev, node);
	if (!n)
		snprintf(msg, sizeof(msg), "node %s is not served by this agent", node);
	else if (strcmp(type, "attach") == 0)
		ok = do_attach(a, act, batch, n, gpr, rep, &checked, &later, msg, sizeof(msg));
	else if (strcmp(type, "detach") == 0)
		ok = do_detach(a, n, gpr, rep, &checked, &later, msg, sizeof(msg));
	else if (strcmp(type, "precheck") == 0) {
		checked = true;
		ok = precheck(a, act, batch, n, gpr, rep, msg, sizeof(msg));
	} else
		snprintf(msg, sizeof(msg), "unknown action type '%s'", type);
	if (egs_agent_stopping(a) && !ok) {
		/* Cut short by the shutdown, not failed: reporting it would mark a good node unhealthy. */
		EGS_LOG_INFO("action %s: interrupted by shutdown (%s); not reported", id, msg);
		goto out;
	}
	if (later) {
		/* The backend cannot act now (backend.h): egsd asks again; pause so that the repeat is not a
		 * busy loop. */
		EGS_LOG_WARN("action %s: cannot act now (%s); not reported, egsd asks again", id, msg);
		egs__agent_pause(a, LATER_PAUSE_MS);
		goto out;
	}
	egs_agent_log(ok ? EGS_ALOG_INFO : EGS_ALOG_WARN, "action %s: %s: %s", id, ok ? "ok" : "failed", msg);
	report(a, id, type, gpr, node, ok, msg, checked ? rep : NULL);
	egs__agent_kick(a);
out:
	egs_free(rep);
}
