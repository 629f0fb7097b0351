/*
 * held.h: early releases whose capacity the planner holds back.
 *
 * A GPR released early frees its nodes and its workspace before the exit time
 * the plan counted on. Handing that time to the queue at once can move an
 * estimate later: the greedy walk may give a freed node to a GPR ahead that
 * could also run elsewhere (another cluster or node shape), or let a GPR ahead
 * start in time a backfilled GPR was promised, and a GPR behind loses.  So the
 * planner first sees a released GPR as still running until its original exit
 * (its nodes and workspace are "held"), and applies the release only when a
 * walk with it moves no queued GPR later than a walk without it (core/sched.c,
 * held_resolve).  The world with a held release is exactly the world in which
 * the GPR had not released early, so the release can only make estimates
 * earlier.
 *
 * Bookkeeping only: the nodes' held_until and the GPR's held_until (runtime,
 * not persisted: after a restart egsd plans with every release applied), and
 * the state's list of held GPRs.
 */
#ifndef EGS_HELD_H
#define EGS_HELD_H

#include "core/state.h"

/* Holds g's nodes and workspace until `until` (g was just released early; no-op
 * when until <= now or g holds shares, whose releases are applied at once). */
void egs_held_add(struct egs_state *st, struct egs_gpr *g, int64_t until,
                  int64_t now);

/* Lifts (on = false) or puts back (on = true) the hold of st->held.items[i] on
 * its nodes, without dropping it: the planner's trial walks. */
void egs_held_set(struct egs_state *st, size_t i, bool on);

/* Applies st->held.items[i] for good: its nodes and workspace count as free
 * from the release. */
void egs_held_drop(struct egs_state *st, size_t i);

/* Moves the first held GPR to the end of st->held (the planner tries them in
 * turn). */
void egs_held_rotate(struct egs_state *st);

/* Drops every hold whose time has come (until <= now). */
void egs_held_expire(struct egs_state *st, int64_t now);

/* The time node n is held until (0 when it is not held at now). */
int64_t egs_node_held(const struct egs_node *n, int64_t now);

#endif
