/*
 * aging.h: finished GPRs leave memory by age (egsd --finished-retention).
 *
 * A GPR that finished (Complete, Cancelled, Rejected, Error) never changes again, and its row stays
 * in the store.  With st->cfg.finished_retention_s > 0 the state keeps only the finished GPRs younger
 * than that: a load leaves the older ones out (st->aged_before), and egs_aging_sweep drops the ones
 * that grew old since.  What they leave behind in memory is counted: their workspace's fair-share
 * usage (charged at load as before), the enqueue sequence (next_seq stays past theirs, so a new id
 * never repeats an old one) and st->aged, the number per state (metrics).  Readers that need them
 * ask the store (store.h, egs_store_gprs_find; server/aged.h).
 *
 * A finished GPR stays in memory while something in memory refers to it: a pending commit (dirty),
 * the planner's hold of an early release or a ghost (core/held.h), a node that names it (gpr_id,
 * attached_gpr, attached_shared) or whatever the caller's `pinned` says (the server: a CR link or an
 * inference endpoint).
 *
 * st->finished lists the finished GPRs in memory, oldest completion first from st->finished_head;
 * st->finished_kept holds those old enough that were still referred to when last looked at.  Each
 * GPR is in one of them once (egs_gpr.aging_listed).  With retention 0 nothing is listed.
 */
#ifndef EGS_AGING_H
#define EGS_AGING_H

#include "core/state.h"

/* When g finished: its completion time, or its creation time for a stored row without one. */
int64_t egs_aging_finished_at(const struct egs_gpr *g);

/* Lists g in st->finished when it is finished, aging is on and it is not listed yet (the state calls
 * it when a GPR is added or touched). */
void egs_aging_note(struct egs_state *st, struct egs_gpr *g);

/* The store's loader (takes ownership of g either way): when g finished before st->aged_before and
 * holds nothing (no hold, not a ghost), only counts it (fair-share usage, next_seq, st->aged) and
 * frees it; otherwise egs_state_add_gpr(st, g) and its result. */
enum egs_err egs_aging_load_gpr(struct egs_state *st, struct egs_gpr *g);

/* Counts g, a finished GPR left out of memory by a load (borrowed; its workspace, state, seq,
 * start_ts, completion_ts, exit_at and GPUs are read): fair-share usage, next_seq, st->aged. */
void egs_aging_count(struct egs_state *st, const struct egs_gpr *g);

/* Adds back g (takes ownership), a GPR read from the store that the loaded state refers to (a node,
 * a CR link): egs_state_add_gpr, and one fewer counted in st->aged. */
enum egs_err egs_aging_restore(struct egs_state *st, struct egs_gpr *g);

/* True when a node of st names g (its holder, the GPR its agent reports attached, a share). */
bool egs_aging_node_refers(const struct egs_state *st, const struct egs_gpr *g);

/* Something outside the state still refers to g (borrowed): keep it. */
typedef bool (*egs_aging_pinned_fn)(void *ctx, const struct egs_gpr *g);

/* Drops from memory at most max GPRs that finished before `before`, oldest first.  Those still
 * referred to (see above; pinned may be NULL) move to st->finished_kept, which a sweep with `again`
 * looks at first (calling pinned for each: the caller asks for it every so often, not every time).
 * Never frees a dirty GPR, never writes anything to the store.  Returns how many left memory. */
size_t egs_aging_sweep(struct egs_state *st, int64_t before, size_t max, bool again, egs_aging_pinned_fn pinned,
		       void *ctx);

/* Before a load at `now`: sets st->aged_before from cfg.finished_retention_s (0 when aging is off). */
void egs_aging_cutoff(struct egs_state *st, int64_t now);

/* GPRs in the store: in memory plus aged, all states. */
size_t egs_aging_total(const struct egs_state *st);

#endif
