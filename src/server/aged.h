/*
 * aged.h: what egsd reads back from the store for finished GPRs that left memory by age (egsd
 * --finished-retention, core/aging.h), and the sweep that lets them leave.
 *
 * Every reader that answers about finished GPRs takes the ones in memory and adds these; a GPR is
 * never in both (a row the store returns whose id is in memory is skipped).  Each function here is
 * one query of egs_store_gprs_find at a time, by key or by a partial index (store.h), on the loop
 * thread.  With aging off (retention 0) every GPR is in memory and none of these reads the store.
 */
#ifndef EGS_AGED_H
#define EGS_AGED_H

#include "server/server.h"

/* The GPR id read from the store when it is not in memory, borrowed until the next call (the server
 * keeps it in srv->aged_read); NULL when it is in memory, aging is off, or no finished GPR has that
 * id.  A handler uses it like a GPR of the state that it does not change (a finished GPR refuses
 * every change). */
struct egs_gpr *egs_aged_get(struct egs_server *srv, const char *id);

/* Calls fn(ctx, g) for each finished GPR not in memory that matches f (in gprId order; f->limit is
 * not used), g borrowed for the call; stops after `want` of them that fn accepted (returned true;
 * fn NULL accepts all; want 0: no bound).  Accepted GPRs are pushed to keep (the caller frees each
 * with egs_gpr_free) when keep is not NULL, else freed.  A failed read is logged and ends the walk
 * early.  Returns how many were accepted. */
size_t egs_aged_each(struct egs_server *srv, const struct egs_gpr_find *f, size_t want,
		     bool (*fn)(void *ctx, const struct egs_gpr *g), void *ctx, struct egs_vec *keep);

/* From the tick: drops from memory the finished GPRs older than the retention (a bounded number per
 * tick), keeping those a custom resource link or an inference endpoint still names.  No-op while a planner walk is under way
 * (it may point at them) and when aging is off. */
void egs_aged_sweep(struct egs_server *srv, int64_t now);

#endif
