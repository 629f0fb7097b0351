/*
 * fair.h: fairness among equal priorities.  Queued GPRs of the same priority are ordered by their
 * workspace's recent GPU usage, exponentially decayed with a configurable half-life, so that the
 * workspace that used less goes first; seq (first come, first served) breaks the remaining ties.
 *
 * Usage is charged when a GPR stops holding GPUs (complete, error, or evicted back to the queue):
 * GPUs x (end - start) in GPU-hours, dated at the end.  The decayed usage at time t is
 * U(t) = sum_i a_i * 2^((t_i - t) / h).  Every workspace decays by the same factor as time passes, so
 * the order between workspaces changes only when one is charged: the key kept per workspace is
 * log2(sum_i a_i * 2^(t_i / h)), which never needs updating with time and cannot overflow.  A
 * workspace that never used a GPU has key -infinity and goes first among its priority.
 *
 * A GPR takes its workspace's key when it is queued (submitted, approved, or sent back after a
 * failed attempt or an eviction), keeps it while it waits, and the store keeps it too: a later
 * charge orders the GPRs queued after it, never those already waiting.  That keeps the planner's
 * promise that without new arrivals every GPR starts at its estimate: a fair key only places a new
 * arrival, like its priority does.  A half-life <= 0 turns fairness off (pure FIFO).
 */
#ifndef EGS_FAIR_H
#define EGS_FAIR_H

#include "core/state.h"

/* The ordering key of workspace ws now (-INFINITY when it has no usage or fairness is off). */
double egs_fair_key(const struct egs_state *st, const char *ws);

/* The GPU-hours a key stands for, decayed to time now (0 for -INFINITY or with fairness off). */
double egs_fair_decayed(const struct egs_state *st, double key, int64_t now);

/* Charges g's GPU use from g->start_ts to end to its workspace.  No-op when g never started. */
void egs_fair_charge(struct egs_state *st, const struct egs_gpr *g, int64_t end);

/* Loading: adds a finished g's use (ended at its completion) to its workspace. */
void egs_fair_note_loaded(struct egs_state *st, const struct egs_gpr *g);
/* Adds usage already in the key's log domain, x = log2(sum of gpu_hours * 2^(end / half-life)), to
 * workspace ws: what many egs_fair_charge calls add at once (a store's load sums them in SQL for
 * the finished GPRs it leaves out of memory, core/aging.h).  No-op when fairness is off. */
void egs_fair_add_key(struct egs_state *st, const char *ws, double x);

#endif
