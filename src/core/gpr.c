/*
 * gpr.c: GPR lifecycle transitions; see gpr.h.  Pure: no I/O, time comes in as `now`.
 */
#include "core/gpr.h"
#include "core/fair.h"
#include "core/held.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool egs_gpr_is_active(const struct egs_gpr *g)
{
	return g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED ||
	       g->state == EGS_GPR_RELEASING;
}

static struct egs_node *gpr_node(struct egs_state *st, const struct egs_gpr *g, size_t i)
{
	return egs_map_get(&st->nodes, g->nodes.v[i]);
}

/* Frees g's nodes that are not attached to it; attached ones wait for the agent's detach. */
static void let_go_of_nodes(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	for (size_t i = 0; i < g->nodes.n; i++) {
		struct egs_node *n = gpr_node(st, g, i);
		if (!n || strcmp(n->gpr_id, g->id) != 0)
			continue;
		if (strcmp(n->attached_gpr, g->id) != 0) {
			n->gpr_id[0] = '\0';
			n->allocated_at = 0;
			if (!n->attached_gpr[0])
				n->free_since = now;
			egs_state_touch(st, EGS_KIND_NODE, n);
		}
	}
}

static bool any_attached(struct egs_state *st, const struct egs_gpr *g)
{
	if (g->share_centi)
		return egs_share_attached(st, g);
	for (size_t i = 0; i < g->nodes.n; i++) {
		struct egs_node *n = gpr_node(st, g, i);
		if (n && strcmp(n->attached_gpr, g->id) == 0)
			return true;
	}
	return false;
}

double egs_gpr_gpus(const struct egs_gpr *g)
{
	if (g->share_centi)
		return (double)g->share_centi / EGS_SHARE_WHOLE * g->node_count;
	return (double)g->gpus_per_node * g->node_count;
}

void egs_gpr_set_state(struct egs_state *st, struct egs_gpr *g, enum egs_gpr_state s, int64_t now,
		       const char *reason, const char *fmt, ...)
{
	enum egs_gpr_state old = g->state;
	bool was_active = egs_gpr_is_active(g);
	if (old == EGS_GPR_QUEUED && s != EGS_GPR_QUEUED)
		egs_queue_remove(&st->queue, g);
	egs_state_count_gpr(st, g, -1);
	g->state = s;
	egs_state_count_gpr(st, g, +1);
	g->phase_since = now;
	if (s == EGS_GPR_QUEUED && !egs_queue_contains(&st->queue, g)) {
		g->seq = g->seq ? g->seq : st->next_seq++;
		g->fair = egs_fair_key(st, g->workspace);
		egs_queue_push(&st->queue, g);
	}
	bool is_active = egs_gpr_is_active(g);
	if (was_active && !is_active && g->start_ts)
		egs_fair_charge(st, g, now); /* its GPU time counts against its workspace's next turn */
	if (is_active && !was_active)
		egs_vec_push(&st->active, g);
	else if (!is_active && was_active)
		egs_vec_remove(&st->active, g);
	if (s != EGS_GPR_QUEUED && s != EGS_GPR_PENDING)
		g->est_start = 0;
	egs_share_sync(st, g, now);
	egs_state_touch(st, EGS_KIND_GPR, g);

	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bool warn = s == EGS_GPR_ERROR || s == EGS_GPR_REJECTED || strcmp(reason, "ProvisioningFailed") == 0;
	egs_state_event(st, now, warn ? "Warning" : "Normal", reason, "GPR", g->id, g->workspace, "%s", msg);
}

/* Notes g, just queued, as an arrival for the planner (state.h: arrivals): gen0 is the generation
 * before its submission.  Shared GPRs are not noted: the planner walks for them afresh. */
static void note_arrival(struct egs_state *st, const struct egs_gpr *g, uint64_t gen0)
{
	if (g->state != EGS_GPR_QUEUED || g->share_centi)
		return;
	st->arrivals.bumps += st->generation - gen0;
	if (st->arrivals.any &&
	    (g->priority < st->arrivals.priority ||
	     (g->priority == st->arrivals.priority && g->fair >= st->arrivals.fair)))
		return; /* goes after the first one (its seq is the newest) */
	st->arrivals.any = true;
	st->arrivals.priority = g->priority;
	st->arrivals.fair = g->fair;
	st->arrivals.seq = g->seq;
}

/* "GPR <name> created and queued at priority <n>", written without printf: vsnprintf cost ~1,000
 * instructions of every create (issue 16).  The name is under EGS_NAME_MAX bytes. */
static void queued_event(struct egs_state *st, const struct egs_gpr *g, int64_t now)
{
	static const char mid[] = " created and queued at priority ";
	char msg[sizeof("GPR ") + EGS_NAME_MAX + sizeof(mid) + 24];
	size_t n = strnlen(g->name, EGS_NAME_MAX - 1), at = 0;
	memcpy(msg, "GPR ", 4);
	at = 4;
	memcpy(msg + at, g->name, n);
	at += n;
	memcpy(msg + at, mid, sizeof(mid) - 1);
	at += sizeof(mid) - 1;
	at = (size_t)(egs_i64_digits(msg + at, g->priority) - msg);
	msg[at] = '\0';
	egs_state_event_msg(st, now, "Normal", "Queued", "GPR", g->id, g->workspace, msg);
}

enum egs_err egs_gpr_submit(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (egs_state_gpr(st, g->id))
		return EGS_ERR_EXISTS;
	uint64_t gen0 = st->generation;
	g->created_at = now;
	g->seq = st->next_seq++;
	g->fair = egs_fair_key(st, g->workspace);
	g->state = g->pending_reason ? EGS_GPR_PENDING : EGS_GPR_QUEUED;
	EGS_ASSERT(egs_state_add_gpr(st, g) == EGS_OK);
	g->phase_since = now;
	egs_state_touch(st, EGS_KIND_GPR, g);
	if (g->state == EGS_GPR_PENDING)
		egs_state_event(st, now, "Normal", "PendingApproval", "GPR", g->id, g->workspace,
				"GPR %s created Pending: %s", g->name, g->pending_reason);
	else
		queued_event(st, g, now);
	note_arrival(st, g, gen0);
	return EGS_OK;
}

static enum egs_err not_waiting(const struct egs_gpr *g)
{
	switch (g->state) {
	case EGS_GPR_PENDING:
	case EGS_GPR_QUEUED: return EGS_OK;
	case EGS_GPR_PROVISIONING:
	case EGS_GPR_PROVISIONED: return EGS_ERR_GPR_PROVISIONED;
	case EGS_GPR_RELEASING:
	case EGS_GPR_COMPLETE: return EGS_ERR_GPR_RELEASED;
	default: return EGS_ERR_GPR_FINISHED;
	}
}

enum egs_err egs_gpr_editable(const struct egs_gpr *g)
{
	return not_waiting(g);
}

/* Notes the generation bumps a release or cancel made since gen0 when it left a hold: the plan
 * before it stands (state.h: arrivals). */
static void note_hold(struct egs_state *st, const struct egs_gpr *g, uint64_t gen0)
{
	if (g->held_until)
		st->arrivals.hold_bumps += st->generation - gen0;
}

enum egs_err egs_gpr_cancel(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	enum egs_err err = not_waiting(g);
	if (err)
		return err;
	uint64_t gen0 = st->generation;
	bool queued = g->state == EGS_GPR_QUEUED;
	egs_gpr_set_state(st, g, EGS_GPR_CANCELLED, now, "Cancelled", "GPR %s cancelled before provisioning",
			  g->name);
	g->completion_ts = now;
	if (queued) /* the planner keeps its place until freeing it moves no one later (core/held.h) */
		egs_held_ghost(st, g);
	note_hold(st, g, gen0);
	return EGS_OK;
}

enum egs_err egs_gpr_release(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	switch (g->state) {
	case EGS_GPR_PENDING:
	case EGS_GPR_QUEUED: return EGS_ERR_GPR_NOT_PROVISIONED;
	case EGS_GPR_RELEASING:
	case EGS_GPR_COMPLETE: return EGS_ERR_GPR_RELEASED;
	case EGS_GPR_PROVISIONING:
	case EGS_GPR_PROVISIONED: break;
	default: return EGS_ERR_GPR_FINISHED;
	}
	uint64_t gen0 = st->generation;
	g->flags |= EGS_GPRF_EARLY_RELEASE;
	/* The exit the plan counted on: the planner holds the nodes until then, until using them
	 * earlier moves no one later (core/held.h). */
	egs_held_add(st, g, egs_gpr_planned_end(g, now), now);
	egs_gpr_set_state(st, g, EGS_GPR_RELEASING, now, "EarlyRelease", "GPR %s released early; draining %zu node(s)",
			  g->name, g->nodes.n);
	let_go_of_nodes(st, g, now);
	if (!any_attached(st, g)) {
		g->completion_ts = now;
		egs_gpr_set_state(st, g, EGS_GPR_COMPLETE, now, "Complete", "GPR %s complete", g->name);
	}
	note_hold(st, g, gen0);
	return EGS_OK;
}

/* The request fields, one list: the ones an edit replaces (egs_gpr_update_request) and that a
 * follower takes from the leader's row with the rest (server/follow.c).  A new request field added
 * here is compared and copied everywhere at once. */
#define REQUEST_STRINGS(X) X(name) X(cluster) X(instance_type) X(gpu_shape)
#define REQUEST_NUMBERS(X)                                                                                             \
	X(gpus_per_node) X(node_count) X(memory_mib) X(exit_duration_s) X(idle_timeout_s) X(flags) X(share_centi)

bool egs_gpr_request_differs(const struct egs_gpr *a, const struct egs_gpr *b)
{
#define DIFFERS_STR(f) || strcmp(a->f, b->f) != 0
#define DIFFERS_NUM(f) || a->f != b->f
	return !egs_strlist_equal(&a->preferred_clusters, &b->preferred_clusters)
		REQUEST_STRINGS(DIFFERS_STR) REQUEST_NUMBERS(DIFFERS_NUM);
#undef DIFFERS_STR
#undef DIFFERS_NUM
}

void egs_gpr_copy_request(struct egs_gpr *dst, const struct egs_gpr *src)
{
#define COPY_STR(f) egs_strlcpy(dst->f, src->f, sizeof(dst->f));
#define COPY_NUM(f) dst->f = src->f;
	REQUEST_STRINGS(COPY_STR)
	REQUEST_NUMBERS(COPY_NUM)
#undef COPY_STR
#undef COPY_NUM
	egs_strlist_copy(&dst->preferred_clusters, &src->preferred_clusters);
	dst->match_layout = 0; /* the planner's cached pool match reads the shape (core/sched_place.c) */
}

bool egs_gpr_update_request(struct egs_state *st, struct egs_gpr *g, const struct egs_gpr *c, int64_t now)
{
	if (!egs_gpr_request_differs(g, c))
		return false;
	egs_gpr_copy_request(g, c);
	egs_state_touch(st, EGS_KIND_GPR, g);
	egs_state_event(st, now, "Normal", "Updated", "GPR", g->id, g->workspace, "GPR %s updated", g->name);
	return true;
}

int64_t egs_gpr_planned_end(const struct egs_gpr *g, int64_t now)
{
	if (g->state == EGS_GPR_PROVISIONED)
		return g->exit_at;
	if (g->state == EGS_GPR_PROVISIONING)
		return g->phase_since + g->exit_duration_s;
	return now;
}

void egs_gpr_set_priority(struct egs_state *st, struct egs_gpr *g, int priority, int64_t now)
{
	int old = g->priority;
	if (old == priority)
		return;
	egs_queue_set_priority(&st->queue, g, priority);
	egs_state_touch(st, EGS_KIND_GPR, g);
	egs_state_event(st, now, "Normal", "PriorityChanged", "GPR", g->id, g->workspace,
			"priority of GPR %s changed from %d to %d", g->name, old, priority);
}

enum egs_err egs_gpr_approve(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (g->state != EGS_GPR_PENDING)
		return g->state == EGS_GPR_QUEUED ? EGS_ERR_CONFLICT : not_waiting(g);
	free(g->pending_reason);
	g->pending_reason = NULL;
	egs_gpr_set_state(st, g, EGS_GPR_QUEUED, now, "Approved", "GPR %s approved and queued", g->name);
	return EGS_OK;
}

enum egs_err egs_gpr_reject(struct egs_state *st, struct egs_gpr *g, const char *reason, int64_t now)
{
	if (g->state != EGS_GPR_PENDING)
		return g->state == EGS_GPR_QUEUED ? EGS_ERR_CONFLICT : not_waiting(g);
	free(g->failure_reason);
	g->failure_reason = egs_strdup(reason);
	egs_utf8_sanitize(g->failure_reason);
	g->completion_ts = now;
	egs_gpr_set_state(st, g, EGS_GPR_REJECTED, now, "Rejected", "GPR %s rejected: %s", g->name, reason);
	return EGS_OK;
}

void egs_gpr_fail_attempt(struct egs_state *st, struct egs_gpr *g, const char *why, int64_t now)
{
	g->retry_count++;
	free(g->failure_reason);
	g->failure_reason = egs_strdup(why);
	egs_utf8_sanitize(g->failure_reason);
	let_go_of_nodes(st, g, now);
	if (g->retry_count >= st->cfg.retry_limit && !(g->flags & EGS_GPRF_REQUEUE)) {
		g->completion_ts = now;
		egs_gpr_set_state(st, g, EGS_GPR_ERROR, now, "ProvisioningFailed",
				  "GPR %s failed after %d attempts: %s", g->name, g->retry_count, why);
		return;
	}
	egs_strlist_cleanup(&g->nodes);
	egs_gpr_set_state(st, g, EGS_GPR_QUEUED, now, "ProvisioningFailed",
			  "GPR %s attempt %d failed (%s); back in the queue", g->name, g->retry_count, why);
}

static bool all_attached(struct egs_state *st, const struct egs_gpr *g)
{
	for (size_t i = 0; i < g->nodes.n; i++) {
		struct egs_node *n = gpr_node(st, g, i);
		if (!n || strcmp(n->attached_gpr, g->id) != 0)
			return false;
	}
	return g->nodes.n > 0;
}

static void maybe_complete(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (g->state != EGS_GPR_RELEASING || any_attached(st, g))
		return;
	g->completion_ts = now;
	egs_gpr_set_state(st, g, EGS_GPR_COMPLETE, now, "Complete", "GPR %s complete; nodes returned to the pool",
			  g->name);
}

void egs_node_set_attached(struct egs_state *st, struct egs_node *n, const char *gpr_id, int64_t now)
{
	if (strcmp(n->attached_gpr, gpr_id) == 0)
		return;
	char old[EGS_ID_MAX];
	egs_strlcpy(old, n->attached_gpr, sizeof(old));
	egs_strlcpy(n->attached_gpr, gpr_id, sizeof(n->attached_gpr));
	if (!*gpr_id && *old && strcmp(n->gpr_id, old) == 0) {
		/* detached from the GPR that held it: the node is free unless that GPR still wants it */
		struct egs_gpr *g = egs_state_gpr(st, old);
		if (!g || g->state != EGS_GPR_PROVISIONING || !egs_strlist_has(&g->nodes, n->key)) {
			n->gpr_id[0] = '\0';
			n->allocated_at = 0;
		}
	}
	if (!n->gpr_id[0] && !n->attached_gpr[0])
		n->free_since = now;
	egs_state_touch(st, EGS_KIND_NODE, n);
	struct egs_gpr *g = *gpr_id ? egs_state_gpr(st, gpr_id) : NULL;
	if (g && g->state == EGS_GPR_PROVISIONING && all_attached(st, g)) {
		g->start_ts = now;
		g->exit_at = now + g->exit_duration_s;
		char exit_s[32];
		egs_time_format(g->exit_at, exit_s, sizeof(exit_s));
		egs_gpr_set_state(st, g, EGS_GPR_PROVISIONED, now, "Provisioned",
				  "GPR %s provisioned on %zu node(s) into workspace %s until %s", g->name,
				  g->nodes.n, g->workspace, exit_s);
	}
	struct egs_gpr *og = *old ? egs_state_gpr(st, old) : NULL;
	if (og)
		maybe_complete(st, og, now);
}

void egs_gpr_attach_result(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool ok,
			   const char *message, int64_t now)
{
	struct egs_gpr *g = egs_state_gpr(st, gpr_id);
	if (ok && g && g->share_centi) {
		egs_share_note_attached(st, n, gpr_id, true, now);
		return;
	}
	if (ok) {
		egs_node_set_attached(st, n, gpr_id, now);
		return;
	}
	n->health = EGS_HEALTH_UNHEALTHY;
	n->quarantine_until = now + 300;
	egs_state_touch(st, EGS_KIND_NODE, n);
	egs_state_event(st, now, "Warning", "PrecheckFailed", "Node", n->key, g ? g->workspace : "",
			"attach of node %s for GPR %s failed: %s", n->name, gpr_id, message ? message : "");
	if (g && g->state == EGS_GPR_PROVISIONING &&
	    (strcmp(n->gpr_id, gpr_id) == 0 || (g->share_centi && egs_strlist_has(&g->nodes, n->key)))) {
		char why[300];
		snprintf(why, sizeof(why), "node %s failed its pre-check: %s", n->name, message ? message : "");
		egs_gpr_fail_attempt(st, g, why, now);
	}
}

void egs_gpr_detach_result(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool ok,
			   const char *message, int64_t now)
{
	if (!ok) {
		n->health = EGS_HEALTH_UNHEALTHY;
		egs_state_touch(st, EGS_KIND_NODE, n);
		egs_state_event(st, now, "Warning", "DetachFailed", "Node", n->key, "",
				"detach of node %s from GPR %s failed: %s", n->name, gpr_id, message ? message : "");
		return;
	}
	if (strcmp(n->attached_gpr, gpr_id) == 0)
		egs_node_set_attached(st, n, "", now);
	else if (egs_strlist_has(&n->attached_shared, gpr_id))
		egs_share_note_attached(st, n, gpr_id, false, now);
}

void egs_gpr_post_check_failed(struct egs_state *st, struct egs_node *n, const char *gpr_id, const char *message,
			       int64_t now)
{
	const struct egs_gpr *g = egs_state_gpr(st, gpr_id);
	n->health = EGS_HEALTH_UNHEALTHY;
	n->quarantine_until = now + 300;
	egs_state_touch(st, EGS_KIND_NODE, n);
	egs_state_event(st, now, "Warning", "PostExitCheckFailed", "Node", n->key, g ? g->workspace : "",
			"node %s failed its post-exit check after GPR %s: %s", n->name, gpr_id, message ? message : "");
	if (strcmp(n->attached_gpr, gpr_id) == 0)
		egs_node_set_attached(st, n, "", now);
	else if (egs_strlist_has(&n->attached_shared, gpr_id))
		egs_share_note_attached(st, n, gpr_id, false, now);
}

void egs_gpr_expire(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	EGS_ASSERT(g->state == EGS_GPR_PROVISIONED);
	egs_gpr_set_state(st, g, EGS_GPR_RELEASING, now, "Exit",
			  "exit time of GPR %s reached; draining %zu node(s)", g->name, g->nodes.n);
	let_go_of_nodes(st, g, now);
	maybe_complete(st, g, now);
}

/* A GPU counts as idle under 1% utilisation; a node whose samples are missing counts as busy, so a
 * silent agent never gets a GPR released for idleness. */
static bool node_idle(const struct egs_node *n)
{
	if (!n->n_gpus)
		return false;
	for (int i = 0; i < n->n_gpus; i++)
		if (!n->gpus[i].sampled_at || n->gpus[i].util_pct >= 1.0)
			return false;
	return true;
}

void egs_node_observed(struct egs_state *st, struct egs_node *n, int64_t now)
{
	struct egs_gpr *g = n->gpr_id[0] ? egs_state_gpr(st, n->gpr_id) : NULL;
	if (!g || g->state != EGS_GPR_PROVISIONED || !(g->flags & EGS_GPRF_ENFORCE_IDLE) || !g->idle_timeout_s)
		return;
	bool idle = true;
	for (size_t i = 0; i < g->nodes.n && idle; i++) {
		const struct egs_node *m = egs_map_get(&st->nodes, g->nodes.v[i]);
		idle = m && node_idle(m);
	}
	if (!idle) {
		if (g->idle_since)
			st->generation++;
		g->idle_since = 0;
		g->marks_sent &= ~EGS_MARK_IDLE_WARNED;
	} else if (!g->idle_since) {
		g->idle_since = now;
		st->generation++; /* a new deadline for the scheduler */
	}
}

enum egs_err egs_gpr_evict(struct egs_state *st, struct egs_gpr *g, const char *why, int64_t now)
{
	if (g->state != EGS_GPR_PROVISIONING && g->state != EGS_GPR_PROVISIONED)
		return g->state == EGS_GPR_PENDING || g->state == EGS_GPR_QUEUED ? EGS_ERR_GPR_NOT_PROVISIONED
		       : g->state == EGS_GPR_RELEASING || g->state == EGS_GPR_COMPLETE ? EGS_ERR_GPR_RELEASED
										  : EGS_ERR_GPR_FINISHED;
	char reason[300];
	snprintf(reason, sizeof(reason), "evicted: %s", why);
	egs_utf8_sanitize(reason);
	free(g->failure_reason);
	g->failure_reason = egs_strdup(reason);
	if (g->flags & EGS_GPRF_REQUEUE) {
		egs_fair_charge(st, g, now);
		let_go_of_nodes(st, g, now);
		egs_strlist_cleanup(&g->nodes);
		g->start_ts = g->exit_at = 0;
		g->marks_sent = 0;
		egs_gpr_set_state(st, g, EGS_GPR_QUEUED, now, "Evicted", "GPR %s evicted (%s); back in the queue", g->name,
				  why);
		return EGS_OK;
	}
	egs_gpr_set_state(st, g, EGS_GPR_RELEASING, now, "Evicted", "GPR %s evicted (%s); draining %zu node(s)", g->name,
			  why, g->nodes.n);
	let_go_of_nodes(st, g, now);
	maybe_complete(st, g, now);
	return EGS_OK;
}
