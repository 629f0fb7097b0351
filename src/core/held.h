/*
 * held.h: early releases and cancels whose capacity the planner holds back.
 *
 * A GPR released early frees its nodes and its workspace before the exit time the plan counted on;
 * a queued GPR cancelled frees the time it had reserved.  Handing that time to the queue at once can
 * move an estimate later: the greedy walk may give a freed node to a GPR ahead that could also run
 * elsewhere (another cluster or node shape), or let a GPR ahead start in time a backfilled GPR was
 * promised, and a GPR behind loses.  So the planner first sees the world as before:
 *   - a released GPR as still running until its original exit: its nodes and its workspace are
 *     held (held_until);
 *   - a cancelled queued GPR as a ghost: still placed by the walk at its place in the queue,
 *     reserving what it would hold, but never started, never shown.  When a ghost's planned start
 *     comes, it turns into a held release of the nodes it was planned on, until its planned end.
 * The planner applies a hold only when a walk without it moves no queued GPR later than a walk with
 * it (core/sched_held.c, the trials), so early releases and cancels can only make estimates earlier.
 *
 * Bookkeeping only: the nodes' and the GPR's held_until, the GPR's ghost flag and held_nodes, and
 * the state's list of holds, oldest first.  A hold is stored with its GPR (every function here that
 * changes one touches the GPR, so it goes into the turn's commit) and survives a restart:
 * egs_held_restore rebuilds the list and the nodes' held_until after a load.
 */
#ifndef EGS_HELD_H
#define EGS_HELD_H

#include "core/state.h"

/* Holds g's nodes and workspace until `until` (g was just released early; no-op when until <= now
 * or g holds shares, whose releases are applied at once). */
void egs_held_add(struct egs_state *st, struct egs_gpr *g, int64_t until, int64_t now);

/* Keeps g (a queued GPR just cancelled; not a shared one) in the plan as a ghost. */
void egs_held_ghost(struct egs_state *st, struct egs_gpr *g);

/* Ghost g's planned start has come: it becomes a hold of the n nodes (keys, borrowed) it was planned
 * on and of its workspace until `until`. */
void egs_held_ghost_start(struct egs_state *st, struct egs_gpr *g, const char *const *nodes, size_t n,
			  int64_t until);

/* Lifts (on = false) or puts back (on = true) hold st->held.items[i] without dropping it: the
 * planner's trial walks. */
void egs_held_set(struct egs_state *st, size_t i, bool on);

/* Applies st->held.items[i] for good: its nodes and workspace count as free from the release, a
 * ghost leaves the plan. */
void egs_held_drop(struct egs_state *st, size_t i);

/* Moves the first hold to the end of st->held (the planner tries them in turn). */
void egs_held_rotate(struct egs_state *st);

/* Drops every hold of nodes whose time has come (until <= now); ghosts wait for their start. */
void egs_held_expire(struct egs_state *st, int64_t now);

/* After a restart no node is heard from until its agent reports, so every walk would find that a
 * hold moves no one and apply it: the server sets st->held_settle to a heartbeat period after the
 * load, and until then, or until every node has reported since the start, the planner only expires
 * holds whose time has come. */

/* After a load (store.c): rebuilds st->held from the GPRs whose stored hold is set (in queue
 * order, seq; the planner's rotation is not stored) and the held_until of the nodes they hold.  Holds
 * whose time has passed are dropped by the next egs_held_expire, as without a restart. */
void egs_held_restore(struct egs_state *st);

/* The time node n is held until (0 when it is not held at now). */
int64_t egs_node_held(const struct egs_node *n, int64_t now);

#endif
