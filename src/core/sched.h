/*
 * sched.h: the scheduler: time-driven transitions (exit at start + duration, the 25/50/75% marks,
 * provisioning time-outs) and the plan that decides which queued GPRs start now and when the others
 * are expected to start.
 *
 * The plan walks the queue in order (priority desc, seq asc).  Each node has a time from which it is
 * free (now, the exit time of the GPR holding it, or the end of a reservation made earlier in this
 * walk); each workspace likewise (one provisioned GPR per workspace).  A GPR gets the earliest time at
 * which enough matching nodes and its workspace are free, and reserves those nodes from then for its
 * whole duration, so a GPR behind it never takes them and never delays it.  Without arrivals and
 * early releases every GPR starts at its estimate.  A GPR whose time is now and whose nodes are
 * free now is provisioned.  Because windows are strict, an estimate is an upper bound unless a
 * higher-priority request arrives; early releases only make it earlier.
 *
 * Early releases and cancels.  Handed to the queue at once, a released node can move an estimate later: across
 * clusters or node shapes the greedy walk may give it to a GPR ahead that could also run elsewhere
 * and push back one that only fits there, and with backfill a GPR ahead may start sooner and take
 * the hole a GPR behind was promised; a cancel likewise.  So a release is first held (core/held.h):
 * the walk sees the GPR's nodes and workspace busy until its old exit, exactly as before the
 * release; a cancelled queued GPR stays in the walk as a ghost (placed, never started) and becomes
 * a held release of its planned nodes when its planned start comes.  Each run
 * (the trials before its walk, in its steps) applies the held releases when a walk with them moves no queued GPR later than a
 * walk without them: all at once, else one at a time, oldest first.  A release that fails now is
 * tried again when something else changes (e.g. the GPR it would delay has started) and lapses at
 * the old exit.  The cost: a held node may stay idle that a smarter plan could use without
 * delaying anyone, and each run with holds pending walks the queue two to six times more.
 *
 * Conservative backfill (egs_state_config.backfill; egsd and egs-sim turn it on).  A reservation that starts
 * after a node's or the workspace's previous free time leaves a hole in front of it; a GPR later in
 * the walk may start in holes (on k nodes of one cluster and in its workspace at once) when it ends
 * by their end, so it never delays a GPR placed before it.  Holes are preferred to opening new
 * ones at the same start (tightest first), and nodes free by a start are taken in a fixed order
 * (best fit, then name) rather than earliest-free first: a GPR that
 * started in a hole holds its node up to the hole's end, and the next walk must hand the GPRs ahead
 * the same nodes or an estimate behind moves.  With that, without arrivals and early releases
 * every GPR still starts exactly at its estimate (tests/unit/test_sched.c, test_backfill_*).
 * Bounds: at most 32 holes per pool of identical nodes and 16 per workspace (a hole that finds no
 * room is not offered: time lost to backfill, never double-booked); a GPR tries at most
 * k + 32 x (matching pools) + 16 + 3 candidate start times, each checked against those holes, and
 * picks the free nodes in name order from a min-segment tree per pool (O(log n) each).
 * Exactness assumes the bounds do not bind; when they do (deep queues), a later walk may find a
 * hole the first one had no room for.  An early release that would let a GPR ahead take the time
 * a backfilled GPR was promised is held (above); an arrival ahead can move a start earlier as well
 * as later (it opens new holes).
 */
#ifndef EGS_SCHED_H
#define EGS_SCHED_H

#include "core/state.h"

#define EGS_NEVER INT64_MAX

/* True when the planner may place GPRs on n at now: Healthy and heard from recently. */
bool egs_node_schedulable(const struct egs_state *st, const struct egs_node *n, int64_t now);

/* True when n has the shape g asks for (cluster, GPU shape, instance type, GPUs per node, memory),
 * and n's cluster belongs to workspace ws. */
bool egs_node_matches(const struct egs_gpr *g, const struct egs_workspace *ws, const struct egs_node *n);

/* How many nodes of the whole inventory match g, healthy or not.  When fewer than g->node_count,
 * writes why no node could ever satisfy g into why (a sentence naming the field).  Answers are
 * kept in st->capacity while st->inventory_gen stays. */
size_t egs_sched_capacity(struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
			  char *why, size_t whylen);

/* The result of the last walk over the queue, kept so that appending a GPR is cheap (opaque). */
struct egs_plan;
struct egs_plan *egs_plan_new(void);
void egs_plan_free(struct egs_plan *p); /* NULL is a no-op */
/* Marks p stale: the next egs_sched_append refuses until egs_sched_run rebuilds it. */
void egs_plan_invalidate(struct egs_plan *p);

/* Runs due transitions and the plan at now (provisioning what can start).  Returns the next time
 * something is due (EGS_NEVER when nothing is).  When keep is not NULL the walk's final state is
 * kept in it for egs_sched_append. */
int64_t egs_sched_run(struct egs_state *st, int64_t now, struct egs_plan *keep);

/*
 * The same run in slices, so that walking a deep queue never holds up egsd's loop for long:
 * egs_sched_begin does what egs_sched_run does before the walk (due transitions) and sets the walk
 * up in keep; egs_sched_step places at most max more GPRs and returns true when the walk is
 * complete (with held releases pending, the first steps walk their trials: a plan, the order, or
 * max GPRs on two side-effect-free walks a step; a change between them voids the trial); egs_sched_end then preempts, returning false when that began another walk
 * (step again), else true with the next due time in *next (egs_sched_run's value).  keep becomes
 * the kept plan at the end.  Between steps the caller may serve requests: the walk goes on over
 * the queue as it was when it began (a GPR cancelled since keeps its place, like a ghost; one
 * created since waits for the next walk), and starts a GPR only while it is still queued and its
 * nodes are still idle, healthy and matching.  egs_sched_stale says that something other than
 * the walk changed the state since it began: its estimates are exact for the state it began on,
 * and the caller runs again.  Nothing may be freed from the state during a walk (objects that
 * egs_state_del unlinked are freed at egs_state_clear_changes): egs_sched_abort drops it first.
 */
void egs_sched_begin(struct egs_state *st, int64_t now, struct egs_plan *keep);
/* The first steps (unless max is SIZE_MAX) only take the queue's order, in pieces of at most 4,096
 * queued GPRs (sched_order.c). */
bool egs_sched_step(struct egs_plan *keep, size_t max);
bool egs_sched_end(struct egs_plan *keep, int64_t *next);
bool egs_sched_walking(const struct egs_plan *p); /* NULL: false */
size_t egs_sched_progress(const struct egs_plan *p); /* GPRs the walk in progress has placed */
/* What the next egs_sched_step of p does, in words (a static string: "walk", "queue order",
 * "first state (pools)", ...; "none" when no walk is in progress): the pieces' names in metrics
 * and benchmarks. */
const char *egs_sched_piece(const struct egs_plan *p);
/* Where the last walk began in queue order: 0 for a full walk, else the place of the kept plan's
 * snapshot it resumed from, when only creates came since the plan was made (the estimates and
 * starts of the GPRs before it cannot change). */
size_t egs_sched_from(const struct egs_plan *p);
/* True when the last run's plan is the walk of its held releases' trial with every hold lifted,
 * adopted when they all passed instead of walked again (core/sched_held.c trial_adopt). */
bool egs_sched_adopted(const struct egs_plan *p);
bool egs_sched_stale(const struct egs_plan *keep);
void egs_sched_abort(struct egs_plan *p); /* a walk in progress; else a no-op */

/* Places g, just queued, with the kept plan p, giving exactly what a full egs_sched_run would give
 * it, provided nothing else changed since p was built (the caller's generation check) and g goes
 * after every queued GPR, and is not in the high band (which may preempt).  A plan does not age: every time in it is fixed (a free node counts from
 * when it became free, a provisioning GPR from when it started) and estimates are clamped to now.  Returns g's start (EGS_NEVER when none),
 * or EGS_NEVER - 1 when p cannot be used: then the caller runs egs_sched_run. */
int64_t egs_sched_append(struct egs_state *st, struct egs_gpr *g, int64_t now, struct egs_plan *p);

/* The plan without side effects for a hypothetical GPR g (not in the state), as if submitted now:
 * returns its estimated start (EGS_NEVER when nothing can hold it now); *cluster_out (optional,
 * EGS_NAME_MAX bytes) receives the cluster it would start on. */
int64_t egs_sched_estimate(struct egs_state *st, const struct egs_gpr *g, int64_t now, char *cluster_out);

/* The same for n hypothetical GPRs that share g's priority and workspace (so they would take the
 * same place in the queue, e.g. one request asked of every cluster and shape): out[j] receives
 * probes[j]'s start (EGS_NEVER when none), clusters[j] (optional) its cluster.  With kept, the plan
 * of the last egs_sched_run (and appends) that the caller knows to be current (nothing changed since:
 * the generation check of egs_sched_append), the walk is not repeated: the plan is rebuilt from the
 * snapshot it keeps every 2,048 GPRs before the probes' place, or used as it stands when they go
 * last.  Same answers as without it. */
void egs_sched_estimates(struct egs_state *st, const struct egs_gpr *const *probes, size_t n, int64_t now,
			 struct egs_plan *kept, int64_t *out, char (*clusters)[EGS_NAME_MAX]);

/* The start every queued GPR would get from a full plan at now, without changing anything: out
 * (caller-provided, egs_queue_len entries) receives them in queue order, EGS_NEVER where none;
 * order (same size, may be NULL) the GPRs.  Used to check that a change delays no one. */
void egs_sched_dry_starts(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order);

#endif
