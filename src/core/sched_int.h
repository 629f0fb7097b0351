/*
 * sched_int.h: the scheduler's private parts, shared by sched.c and its sched_*.c files (never
 * included outside src/core/sched*.c).  struct egs_plan is one walk's state: slots (the schedulable
 * nodes), pools of identical nodes with a min-heap and a min-segment tree each, workspaces' free
 * times and backfill holes, the walk's order, and its snapshots (sched.h explains the plan).
 */
#ifndef EGS_SCHED_INT_H
#define EGS_SCHED_INT_H

#include "core/sched.h"
#include "core/share_gpr.h"

#include <stddef.h>

struct pool;
struct pools_build;
struct snap;
struct trial;

/* A GPR the plan started, at order[pos]; or, carried over by a resumed walk (walk_resume), one
 * an earlier walk started at or after pos, the place the walk resumed from (it is not in the
 * order any more: provisioning, it left the queue). */
struct started {
	size_t pos;
	struct egs_gpr *g;
};

/* Bounds of the backfill search (sched.h): holes kept per pool and per workspace.  A hole that
 * finds no room is not recorded: the time is lost to backfill, never double-booked. */
#define POOL_HOLES 32
#define WS_HOLES 16

/* A stretch [s, e) that is free before a reservation made in this walk, on the slot of index
 * `slot` in p->slots (pools) or in a workspace (slot unused). */
struct hole {
	int64_t s, e;
	uint32_t slot;
};

struct slot {
	struct egs_node *n;
	int64_t free_at;
	bool free_now;
	bool idle_now; /* free now and not started on in this walk (free_now also goes false when reserved) */
	bool snap_dirty; /* free_at or free_now changed since the plan's last snapshot (in p->dirty) */
	uint32_t name_rank; /* the node's place in name order: ties break without strcmp */
	uint32_t name_pos;  /* its place in its pool's byname (and segment tree leaves) */
	struct pool *pool;
	size_t hidx; /* position in its pool's heap */
	int64_t ded_free_at;           /* free of dedicated holds and reservations: shared GPRs' floor */
	struct egs_share_timeline *sh; /* shares running and reserved on it (owned), NULL when none */
};

/* Identical nodes (cluster, GPU shape, instance type, GPU count, memory) form a pool; a min-heap
 * keeps them in the order the plan takes them, so a GPR finds its k earliest nodes in
 * O(k log n) instead of sorting the whole inventory. */
struct pool {
	const struct egs_node *proto; /* any member: the attributes all members share */
	size_t group_end;             /* index past the last pool of this pool's cluster */
	struct slot **heap;
	size_t n, cap;
	struct hole *holes; /* POOL_HOLES entries, latest end first (hole_add) */
	size_t nholes;
	uint32_t *byname; /* the members (indexes into p->slots) in name order, n entries */
	size_t index;     /* its place in p->pools */
	/* A min-segment tree of the members' free_at over byname (leaves at segsz + name_pos), so
	 * that the first members in name order free by t are found in O(log n) each (pool_tails). */
	size_t segsz;
	int64_t *seg;
};

struct wsinfo { /* what a placement reads first, in one cache line */
	int64_t until; /* free for a new GPR from then */
	uint64_t pool_ok; /* bit j: p->pools[j] is in one of its clusters (plans of <= 64 pools) */
	size_t nholes;
	bool active;   /* holds an active GPR now */
	const struct egs_workspace *ws; /* NULL when deleted */
	struct hole holes[WS_HOLES]; /* free stretches before until (backfill), latest end first */
	char name[EGS_NAME_MAX];
};

/* The state of one walk over the queue; kept between runs so that a GPR that goes to the end of
 * the queue can be placed without walking everything again (egs_sched_append). */
struct egs_plan {
	struct egs_state *st;
	int64_t now;
	struct slot *slots;
	size_t nslots, capslots;
	/* The first state's slots in pieces (egs__plan_slots_piece): the node map's next index, and
	 * the inventory they were begun on (a change starts them again: the map may have grown). */
	size_t slots_at;
	uint64_t slots_gen;
	bool slots_begun;
	struct slot *spare_slots; /* the slots' array of the plan this walk replaced (capspare) */
	size_t capspare;
	struct pool *pools;    /* sorted by cluster */
	size_t npools;
	struct egs_map ws;     /* workspace name -> struct wsinfo* (into wsv), made when first asked */
	struct wsinfo *wsv;
	size_t nws, capws;
	size_t ws_indexed;     /* wsv[0 .. ws_indexed) are in ws */
	struct slot **chosen;  /* the nodes of the GPR placed last */
	struct slot **tmp;     /* scratch of egs__place() */
	struct slot **frontier; /* scratch of k_first(): nslots + npools entries */
	struct pool **match;   /* scratch of egs__place(): one cluster's matching pools */
	int64_t *cand;         /* scratch of fit(): candidate start times */
	struct hole **hsel;    /* scratch of fit(): holes that can hold the GPR */
	struct hole **hok;     /* scratch of fit(): holes long enough for it, starting by T */
	size_t nhok;
	bool backfill;         /* st->cfg.backfill */
	const struct egs_gpr *last; /* the last GPR placed, in queue order */
	struct egs_gpr **order;    /* every GPR placed, in queue order (the walk's, then appended) */
	size_t norder, caporder;
	struct started *started;   /* the GPRs this plan started, by position, ascending */
	size_t nstarted, capstarted;
	struct snap *snaps;        /* the walk's state every SNAP_EVERY GPRs (wait-time queries) */
	size_t nsnaps;
	struct snap *spare;        /* snapshots of the plan this walk replaced: their buffers are reused */
	size_t nspare;
	/* The slots whose free_at or free_now changed since the last snapshot (egs__slot_dirty), so
	 * that the next one copies the last one and only those (snap_inc: the last snapshot is this
	 * walk's, snaps[nsnaps - 1]); copying every slot was a tenth of a walk. */
	uint32_t *dirty;
	size_t ndirty;
	bool snap_inc;
	bool valid;
	/* A walk in progress (egs_sched_begin .. egs_sched_end): order[cursor ..] is still to place. */
	bool walking;
	bool keep;         /* the walk is kept: snapshots, order, valid at its end */
	bool stale;        /* something else changed the state during the walk (egs_sched_stale) */
	size_t cursor;
	int64_t base_next; /* the due transitions' next time (a walk after preemption starts from it) */
	int64_t run_next;  /* base_next and the walk's own due times so far */
	uint64_t gen_seen; /* st->generation when the walk last ran */
	/* Incremental planning (walk_resume): the walk began at order[from] (0: a full walk); when
	 * splice, its first step takes only the queue's order after order[from - 1]. */
	size_t from;
	bool splice;
	/* The walk's order being taken in pieces (sched_order.c): the queue's ticket for it, the
	 * ghosts merged in (sorted; caller of order_begin frees), the next of them, and for a resumed
	 * walk the key of order[from - 1], after which the queue's entries are taken. */
	bool ordering;
	uint64_t order_ticket;
	struct egs_gpr **ghosts;
	size_t nghosts, kghost;
	struct egs_queue_slot order_after;
	size_t resume_snap; /* not 0: the next step restores old's snapshot resume_snap - 1 (walk_resume) */
	uint64_t arr_seen;  /* st->arrivals.bumps when gen_seen was taken */
	uint64_t hold_seen; /* and st->arrivals.hold_bumps */
	bool foreign;      /* a change other than queued creates came while the walk went on */
	bool stuck;        /* a GPR was placed at now without starting: the plan holds for its now only */
	int64_t hole_end_min; /* the earliest end of a backfill hole the walk recorded */
	/* Held releases tried before the walk (held_trial_*): while trial is set, p only holds st,
	 * now, keep and base_next, and the steps walk the trial; trial_void: a change came during
	 * it, so the holds are tried again at the next run. */
	struct trial *trial;
	bool trial_void;
	bool adopted; /* the trial's lift walk became this plan (trial_adopt) */
	struct adoption *adopting; /* while its steps apply what that walk noted (egs__adopt_step) */
	/* The plan this walk replaced, freed by its next step (plan_retire), and whether the walk's
	 * first state is still to be made (walk_defer): pieces of their own at 100,000 x 10,000. */
	struct egs_plan *old;
	bool deferred;
	int init_part; /* the next piece of the first state (egs__plan_init_part) */
	struct pools_build *build; /* its pools made afresh, between pieces (sched_fresh.c) */
	/* The first nws_fixed entries of wsv are the state's workspaces in its map's order, the same
	 * in every plan of one serial (st->inventory_gen + 1): GPRs cache their index under it. */
	uint64_t serial;
	size_t nws_fixed;
	uint64_t layout; /* the pools' layout (st->pool_layout): GPRs cache their pool masks under it */
	uint64_t pools_serial; /* the st->plan_pools its pools were made as (sched_pool.c) */
	int share_take[EGS_SHARE_DEV_MAX]; /* egs__place() of a shared GPR: its shares of p->chosen[0] */
	bool shared; /* some slot has a share timeline (snapshots do not keep them) */
};

/*
 * The pools of the last first state made afresh, kept in the state (st->plan_pools, one block):
 * while the inventory (st->inventory_gen) and the schedulable nodes, in the nodes' map order, are
 * as they were, a first state takes its pools, the slots' ranks and the workspaces' pool masks
 * from there instead of hashing and comparing every node's attributes, ranking the names and
 * pushing every node into a heap (a third of a first state's cost each; an early release or a
 * finished GPR changes none of them).  serial tells one block from the next.
 */
struct kept_pool {
	const struct egs_node *proto;
	size_t group_end, n, off; /* members: byname[off .. off + n) */
};

struct plan_pools {
	uint64_t serial, gen, layout;
	size_t nslots, npools, nws; /* nws: the state's workspaces when made (pool_ok's entries) */
	bool ws_ok;                 /* pool_ok holds their pool masks, in the map's order */
	struct kept_pool *pools;
	struct egs_node **nodes;    /* slot i's node */
	uint64_t *pool_ok;
	uint32_t *slot_pool, *rank, *pos, *byname;
};


/* A plan adopted from a held releases' trial (sched_held.c trial_adopt): the walk's steps apply
 * what its walk noted instead of placing. */
struct adoption {
	int64_t *t;          /* every GPR's start, by place in the plan's order */
	struct slot **nodes; /* the nodes of the GPRs it starts, in turn */
	size_t off, next;    /* the next start's nodes in nodes, and its entry in the plan's started */
};

/* The state of a walk before the GPR at order[pos]: enough to rebuild the plan there without
 * walking order[0 .. pos) again.  Slots and heap entries are stored as indexes into p->slots. */
#define SNAP_EVERY 2048
struct snap {
	size_t pos;
	int64_t run_next; /* the walk's run_next there */
	bool stuck;       /* the plan's stuck there */
	int64_t hole_end_min; /* and its hole_end_min */
	int64_t *free_at;
	bool *free_now;
	/* (no heaps: the plan order is total, so a restore rebuilds them from free_at and free_now
	 * and k_first finds the same nodes in any heap that holds the order) */
	/* The workspaces' changing part (a wsinfo's name, workspace and pools stay as they were made:
	 * a restore takes them from the plan's own wsv, whose first nws entries are the same ones;
	 * copying whole entries, mostly empty holes, was a tenth of a walk). */
	struct snap_ws *ws; /* nws entries */
	size_t nws;
	struct hole *ws_holes; /* their holes in turn, ws[i].nholes each */
	size_t nws_holes;
	struct hole *holes; /* every pool's holes in turn, POOL_HOLES entries each */
	size_t *nholes;
	size_t cap_slots, cap_pools, cap_ws, cap_ws_holes; /* what the arrays have room for (snap_reserve) */
};

struct snap_ws {
	int64_t until;
	uint32_t nholes;
	bool active;
};

/*
 * Held early releases (core/held.h) are applied when lifting them moves no queued GPR later: all
 * of them when a walk with all of them lifted moves no one later than a walk with none, else the
 * oldest ones that pass one at a time (at most HELD_TRIES per run, a failed one goes to the back
 * of the list).  Each try is a trial: the walk with the holds as they are (base) and the walk with
 * the tried ones lifted (lift) go side by side over the queue's order, in the run's slices, until
 * a GPR starts later in lift (fail) or the order ends (pass).  A change to the state during a
 * trial voids it (its walks compared another state): the run goes on to its walk and the holds
 * are tried again at the next run.
 */
struct trial {
	struct egs_plan base, lift;
	struct egs_gpr **order; /* the queue's order with the ghosts (plan_order), holds on */
	size_t n, cursor;
	int phase; /* the next step: 0-2 base's first state, 3-5 lift's, 6 the order, 7 the walk */
	struct egs_gpr **tried; /* the holds lifted: every one, or the first alone */
	size_t ntried;
	bool all;
	bool kept_base; /* the base is the kept plan's estimates (held_kept_base): no base walk */
	/* adopt: lift is walked as the run's walk would walk it (snapshots, order, starts noted), so
	 * that when every hold passes, lift becomes the run's plan (trial_adopt) instead of a walk. */
	bool adopt;
	int64_t *lift_t;           /* adopt: every GPR's start in lift, by its place in lift's order */
	struct slot **start_nodes; /* adopt: the nodes of the GPRs lift would start, in turn */
	size_t nstart_nodes, cap_start_nodes;
	size_t snap_at;            /* adopt: the place in lift's order of its next snapshot */
	size_t nghosts; /* ghosts met in the order so far (lift's order skips them when all) */
	size_t tries, nheld; /* one-at-a-time tries made, and the holds there were before them */
	uint64_t gen;        /* st->generation when the trial began */
};

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * A walk reads a few fields of every GPR it places (model.h keeps them first in struct egs_gpr,
 * before id), and the GPRs of a deep queue are scattered over tens of megabytes: each one's first
 * read was a cache miss the walk waited on (at 100,000 queued, most of a walk's CPU time).  So a
 * walk over v[0 .. n) asks for v[i + GPR_AHEAD]'s block while it places v[i]: prefetching changes
 * no result, only when the memory arrives.  The block is at most 128 bytes, so its start, the
 * line after and its last byte name every line it spans at any alignment.
 */
#define GPR_AHEAD 8
#define GPR_HOT_BYTES offsetof(struct egs_gpr, id)
_Static_assert(offsetof(struct egs_gpr, id) <= 128, "the walk's part of a GPR spans at most three lines");

/* (always_inline: not inlined early, GCC finds a function of prefetches alone free of effects and
 * drops its calls) */
static inline __attribute__((always_inline)) void egs__gpr_prefetch(struct egs_gpr *const *v, size_t i, size_t n)
{
	if (i + GPR_AHEAD < n) {
		const char *f = (const char *)v[i + GPR_AHEAD];
		__builtin_prefetch(f);
		__builtin_prefetch(f + 64);
		__builtin_prefetch(f + GPR_HOT_BYTES - 1);
	}
}

/* sched.c: the runs (contracts above their definitions). */
bool egs__shape_matches(const struct egs_gpr *g, const struct egs_node *n);
struct egs_gpr **egs__plan_order(struct egs_state *st, size_t *n, size_t *cap);
void egs__plan_retire(struct egs_plan *p);
void egs__walk_defer(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next, bool keep);

/* sched_pool.c: a walk's state (contracts above their definitions). */
/* Sets up p (uninitialised) as the first state of a walk over st at now: the slots, pools and
 * workspaces.  Release with egs__plan_cleanup. */
void egs__plan_init(struct egs_plan *p, struct egs_state *st, int64_t now);
/* egs__plan_init in pieces of about a third each, for runs in slices: part 0 zeroes p and makes
 * the slots, 1 the pools, 2 the workspaces; returns true after the last. */
bool egs__plan_init_part(struct egs_plan *p, struct egs_state *st, int64_t now, int part);
/* (Re)builds q's segment tree from its members' free_at (its array kept when the size is). */
void egs__seg_build(struct egs_plan *p, struct pool *q);
/* The scratch arrays of egs__place(), once p->nslots and p->npools are known. */
void egs__scratch_alloc(struct egs_plan *p);
void egs__snap_free(struct snap *s);
void egs__plan_cleanup(struct egs_plan *p);
void egs__snap_take(struct egs_plan *p, size_t pos);
/* Moves the n snapshots v[] (their buffers; v itself stays the caller's) to p's spares, which
 * egs__snap_take reuses: a walk of 100,000 GPRs takes 49 of 0.6 MB each, and fresh pages for them
 * (and unmapping the last walk's) cost more than copying into them. */
void egs__snap_spare(struct egs_plan *p, struct snap *v, size_t n);
/* Frees p->old, the plan p replaced, keeping its snapshots' buffers as p's spares. */
void egs__plan_free_old(struct egs_plan *p);
void egs__snap_restore(struct egs_plan *q, const struct egs_plan *p, const struct snap *s, int64_t now);
/* egs__snap_restore for a resumed walk: q takes p's slots, pools, scratch arrays and workspaces
 * and restores them in place (p, the kept plan, is only freed after it: copying 10,000 slots and
 * zeroing fresh scratch arrays was most of the restore's 2.3M instructions).  p keeps its order,
 * snapshots and the rest, for the caller; its walk state is gone. */
void egs__snap_restore_take(struct egs_plan *q, struct egs_plan *p, const struct snap *s, int64_t now);
void egs__order_push(struct egs_plan *p, struct egs_gpr *g);
/* One piece of taking the walk's order (sched_order.c): the queue's as it stood at the first
 * piece, with the ghosts not lifted at their places (egs__plan_order's), after order[from - 1]
 * when p->splice; a piece merges at most ORDER_PIECE of the queue's entries unless max is
 * SIZE_MAX (all of it).  Returns true when the order is complete (p->order[0 .. norder)). */
bool egs__order_step(struct egs_plan *p, size_t max);
void egs__started_push(struct egs_plan *p, size_t pos, struct egs_gpr *g);
int64_t egs__stale_next(const struct egs_plan *p, int64_t base);

/* The first state's slots in pieces (part 0 of egs__plan_init_part, sliced): begin zeroes p but
 * its spare_slots, which it takes as its slots' array when big enough; each piece then adds the
 * schedulable ones of at most max more nodes of the map; true when every node was seen.  An
 * inventory change between pieces (st->inventory_gen) starts them again. */
void egs__plan_slots_begin(struct egs_plan *p, struct egs_state *st, int64_t now);
bool egs__plan_slots_piece(struct egs_plan *p, size_t max);

/* sched_fresh.c: the first state's pools (part 1 of egs__plan_init_part). */
/* One bounded piece of p's pools (after its slots): taken from st->plan_pools in one piece while
 * they apply, else made afresh in several (the names' sort, then the hashing, then the rest);
 * returns true when p's pools and scratch arrays are complete.  The state may change between
 * pieces (the walk is then stale), but no node may be deleted (egsd drops the walk). */
bool egs__plan_pools_piece(struct egs_plan *p);
/* What p's next pools piece does, for egs_sched_piece (a static string). */
const char *egs__pools_piece_name(const struct egs_plan *p);
/* Frees a fresh build in progress (NULL: nothing). */
void egs__pools_build_free(struct pools_build *b);

/* sched_pool.c: workspaces' entries. */
/* The entry of workspace name in p, added when it has none (ws: the state's, NULL when deleted). */
struct wsinfo *egs__ws_get(struct egs_plan *p, const char *name);
/* Adds an entry for workspace name (not in p) to p->wsv; its pools from *pool_ok when not NULL. */
struct wsinfo *egs__ws_add(struct egs_plan *p, const char *name, const struct egs_workspace *ws, const uint64_t *pool_ok);
struct wsinfo *egs__ws_lookup(struct egs_plan *p, struct egs_gpr *g);

/* sched_place.c: placing one GPR (contracts above their definitions). */
/* g's entry: through the index g caches under p->serial, else egs__ws_lookup (which caches it). */
struct wsinfo *egs__ws_of(struct egs_plan *p, struct egs_gpr *g);
void egs__heap_push(struct pool *q, struct slot *s);
/* Makes q->heap[0 .. q->n) a heap in plan order (any order on entry; sets hidx). */
void egs__heap_build(struct pool *q);
/* Notes that slot s's free_at or free_now is about to change (the next snapshot copies it). */
static inline void egs__slot_dirty(struct egs_plan *p, struct slot *s)
{
	if (!s->snap_dirty) {
		s->snap_dirty = true;
		p->dirty[p->ndirty++] = (uint32_t)(s - p->slots);
	}
}
void egs__share_slot_init(struct egs_plan *p, struct slot *s);
int64_t egs__place(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, const uint64_t *cached);
void egs__reserve(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, int64_t t);
int64_t egs__place_dry(struct egs_plan *p, struct egs_gpr *g);
int64_t egs__plan_one(struct egs_plan *p, struct egs_gpr *g);
int64_t egs__plan_note(struct egs_plan *p, struct egs_gpr *g, bool *starts);
/* True when the nodes in p->chosen are still free for g in the state (as egs__plan_one checks). */
bool egs__plan_apply(struct egs_plan *p, struct egs_gpr *g, int64_t t, bool starts);
/* True when the nodes in p->chosen are still free for g in the state (egs__plan_one's check). */
bool egs__plan_still_free(struct egs_plan *p, struct egs_gpr *g);

/* sched_held.c: held releases' trials (contracts above their definitions). */
void egs__trial_free(struct trial *t);
void egs__trial_spares(struct egs_plan *p, struct trial *t);
bool egs__held_pending(struct egs_state *st, int64_t now);
bool egs__held_kept_base(const struct egs_plan *p, const struct egs_state *st, int64_t now);
void egs__trial_begin(struct egs_plan *p, bool all);
void egs__trial_step(struct egs_plan *p, size_t max);
/* Applies what an adopted plan's walk noted for order[p->cursor .. end) (as egs__plan_one would
 * at each GPR's turn); frees the adoption at the order's end. */
void egs__adopt_step(struct egs_plan *p, size_t end);
void egs__adopt_free(struct egs_plan *p);

/* sched_kept.c: the kept plan (contracts above their definitions). */
bool egs__walk_resume(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next);
/* The first step of a resumed walk: p becomes the kept plan (p->old) restored at the snapshot
 * walk_resume chose, the rest of it left in p->old; false (p as it was, resume_snap cleared) when
 * a GPR started after the snapshot no longer holds nodes of the plan: the run walks afresh. */
bool egs__walk_restore(struct egs_plan *p);

#endif
