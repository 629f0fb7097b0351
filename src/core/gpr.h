/*
 * gpr.h: the GPR lifecycle of DESIGN.md, as pure functions over egs_state.
 *
 *   create -> Pending (approval) -> Queued -> Provisioning -> Provisioned -> Releasing -> Complete
 *   Queued/Pending -> Cancelled      Pending -> Rejected
 *   Provisioning -> Queued again on a failed attach (retryCount+1), Error after the retry limit
 *
 * Every transition goes through egs_gpr_set_state(), which keeps the queue and the active list in
 * step, marks the GPR dirty and writes an event.  Nodes: node->gpr_id is the desired holder,
 * node->attached_gpr what the agent reported; a node is free when both are empty.
 */
#ifndef EGS_GPR_H
#define EGS_GPR_H

#include "core/state.h"

/* True while the GPR holds (or is taking, or returning) nodes. */
bool egs_gpr_is_active(const struct egs_gpr *g);

/* The GPUs g asks for in all: nodes x GPUs per node, or its share (0.2, 1.2) when Shared.  What usage,
 * cost and fair share count. */
double egs_gpr_gpus(const struct egs_gpr *g);

/* Moves g to state s at now, with an event of the given reason and message (printf-style). */
void egs_gpr_set_state(struct egs_state *st, struct egs_gpr *g, enum egs_gpr_state s, int64_t now,
		       const char *reason, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Adds a new, validated GPR (takes ownership): Pending when g->pending_reason is set, else Queued.
 * Assigns its enqueue seq.  Returns EGS_ERR_EXISTS when the id is taken (g is then not taken). */
enum egs_err egs_gpr_submit(struct egs_state *st, struct egs_gpr *g, int64_t now);

/* Cancel (DELETE): Pending/Queued -> Cancelled.  EGS_ERR_GPR_PROVISIONED while provisioning or
 * provisioned, EGS_ERR_GPR_RELEASED once releasing or complete, EGS_ERR_GPR_FINISHED otherwise. */
enum egs_err egs_gpr_cancel(struct egs_state *st, struct egs_gpr *g, int64_t now);

/* Early release: Provisioning/Provisioned -> Releasing.  EGS_ERR_GPR_NOT_PROVISIONED while Pending
 * or Queued, EGS_ERR_GPR_RELEASED once releasing or complete, EGS_ERR_GPR_FINISHED otherwise. */
enum egs_err egs_gpr_release(struct egs_state *st, struct egs_gpr *g, int64_t now);

/* Checks that fields of g may still be edited (Pending/Queued); same errors as cancel. */
enum egs_err egs_gpr_editable(const struct egs_gpr *g);
/* Replaces the request fields of editable GPR g (name, cluster, shape, instance type, GPUs, nodes,
 * memory, durations, flags, preferred clusters, share) with c's (borrowed; priority is
 * egs_gpr_set_priority's), drops the planner's caches that read them, and records an Updated event.
 * Returns false, changing nothing, when c asks for what g already has. */
bool egs_gpr_update_request(struct egs_state *st, struct egs_gpr *g, const struct egs_gpr *c, int64_t now);
/* True when a and b (borrowed) differ in a request field: the fields egs_gpr_update_request
 * replaces, listed once in gpr.c. */
bool egs_gpr_request_differs(const struct egs_gpr *a, const struct egs_gpr *b);
/* Copies src's request fields into dst (the preferred clusters are copied, dst's old ones freed)
 * and drops the planner's cached pool match that reads them.  No event, no change log. */
void egs_gpr_copy_request(struct egs_gpr *dst, const struct egs_gpr *src);
/* The time the plan counts an active GPR's window to end: its exit once provisioned, its duration
 * from when provisioning began while provisioning (attach takes seconds), now otherwise. */
int64_t egs_gpr_planned_end(const struct egs_gpr *g, int64_t now);
/* Sets the priority of an editable GPR (reorders the queue). */
void egs_gpr_set_priority(struct egs_state *st, struct egs_gpr *g, int priority, int64_t now);

/* Admin approval of a Pending GPR (-> Queued) or rejection (-> Rejected, with reason). */
enum egs_err egs_gpr_approve(struct egs_state *st, struct egs_gpr *g, int64_t now);
enum egs_err egs_gpr_reject(struct egs_state *st, struct egs_gpr *g, const char *reason, int64_t now);

/* Agent reports.  `ok` false on attach marks the node Unhealthy and retries or fails the GPR. */
void egs_gpr_attach_result(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool ok,
			   const char *message, int64_t now);
void egs_gpr_detach_result(struct egs_state *st, struct egs_node *n, const char *gpr_id, bool ok,
			   const char *message, int64_t now);
/* A detach that failed its post-exit checks: the agent detached before checking, so the node is
 * detached from gpr_id at once, then marked Unhealthy for 300 s (quarantine_until) with a Warning
 * event PostExitCheckFailed carrying message (borrowed, may be NULL). */
void egs_gpr_post_check_failed(struct egs_state *st, struct egs_node *n, const char *gpr_id, const char *message,
			       int64_t now);
/* Reconciles what the agent says is attached to n (heartbeat/registration). */
void egs_node_set_attached(struct egs_state *st, struct egs_node *n, const char *gpr_id, int64_t now);

/* Exit time reached: Provisioned -> Releasing (-> Complete at once when nothing is attached). */
void egs_gpr_expire(struct egs_state *st, struct egs_gpr *g, int64_t now);

/* Records a node's fresh GPU samples: keeps the idle clock of the provisioned GPR holding it. */
void egs_node_observed(struct egs_state *st, struct egs_node *n, int64_t now);

/* Evicts a provisioning or provisioned g (an admin's decision, with a reason): back to the queue
 * when it asked for requeueOnFailure, else released.  EGS_ERR_GPR_NOT_PROVISIONED / _RELEASED /
 * _FINISHED in other states. */
enum egs_err egs_gpr_evict(struct egs_state *st, struct egs_gpr *g, const char *why, int64_t now);

/* Sends g back to the queue (or to Error after the retry limit) after a failed attempt. */
void egs_gpr_fail_attempt(struct egs_state *st, struct egs_gpr *g, const char *why, int64_t now);

#endif
