/*
 * preempt.h: preemption.  A queued GPR in the high priority band (>= EGS_PRIORITY_HIGH) that the
 * plan cannot start now may evict provisioned GPRs that
 *   - have a lower priority,
 *   - opted in (enableEviction),
 *   - have run at least cfg.preempt_min_runtime_s (no churn: a GPR is never evicted moments after
 *     it started),
 * choosing, within one cluster, a set that frees enough nodes matching the request with the least
 * GPU-time lost (GPUs x time each victim has run: the work a restart repeats).  The set is found
 * greedily (least lost time per freed matching node first), then pruned of members it does not
 * need; the cheapest cluster wins.  Nodes that are free or already being given back count first,
 * so a request whose nodes are on their way evicts no one.  The request's workspace must be free
 * (one provisioned GPR per workspace): evicting would not start it.
 *
 * GPU sharing: shared GPRs neither preempt nor are chosen as victims (a victim must hold whole nodes), and
 * a node holding shares does not count as free or on its way.
 *
 * At most the first 32 waiting high-band GPRs that a victim could make room for are examined per
 * run (each costs a pass over the nodes): the others wait for the next run.
 *
 * Victims are evicted like an admin's eviction (requeued when they asked for requeueOnFailure,
 * else released), with evictedBy naming the preempting GPR and a Warning event on both.  At most one
 * request preempts per call; the plan that runs next gives it the freed nodes, which no lower
 * priority can take.
 */
#ifndef EGS_PREEMPT_H
#define EGS_PREEMPT_H

#include "core/state.h"

#define EGS_PRIORITY_HIGH 201 /* the high band: 201-300 */

/* Looks for one waiting high-band GPR that preemption would let start; evicts its victims.
 * Returns how many GPRs it evicted (0 when none). */
size_t egs_preempt(struct egs_state *st, int64_t now);

#endif
