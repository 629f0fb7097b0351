/*
 * queue.h: the GPR priority queue (the seeds' QueueMgr): an indexed binary max-heap of borrowed
 * GPRs ordered by (priority desc, fair asc, seq asc): among equal priorities the workspace with the
 * least recent GPU use goes first (core/fair.h), then first come, first served.
 *
 * Each GPR records its heap position in gpr->heap_idx (SIZE_MAX when not queued), which makes
 * delete and reprioritise O(log n) without a search.  Peek is O(1).
 */
#ifndef EGS_QUEUE_H
#define EGS_QUEUE_H

#include "core/model.h"
#include "core/msort.h"

/* A heap slot carries its GPR's order key, so that sifting compares contiguous memory instead of
 * reading a GPR per step (a GPR's key does not change while it is queued but through
 * egs_queue_set_priority). */
struct egs_queue_slot {
	int priority;
	double fair;
	uint64_t seq;
	struct egs_gpr *g;
};

/* One entry of the order egs_queue_sorted keeps between calls: a GPR's key (as in the heap) and
 * its push stamp, so that merging never reads a GPR (100,000 of them are 70 MB of memory). */
struct egs_queue_entry {
	struct egs_queue_slot key;
	uint64_t stamp;
};

/* A taking of the queue's order in pieces (egs_queue_order_begin/step): the changes noted before
 * it began (sorted), and how far the merge of the kept order with them has got. */
struct egs_queue_merge {
	struct egs_queue_entry *added, *gone;
	size_t nadded, capadded, ngone, capgone;
	size_t i, a, j; /* next entry of the kept order, of added, of gone */
	size_t n, len;  /* entries of the new order made so far, of all of it */
	size_t served;  /* entries handed out (egs_queue_order_step) */
	bool fresh;     /* the order was sorted afresh at its beginning: it is all in q->order */
	uint64_t ticket; /* 0: none in progress */
	/* The sort of added, then of gone, in pieces (egs_queue_order_sort); its second buffer is
	 * kept between orders.  sorting: 0 done, 1 added, 2 gone. */
	struct egs_msort sort;
	int sorting;
};

struct egs_queue {
	struct egs_queue_slot *heap;
	size_t len;
	size_t cap;
	/* The order of the last egs_queue_sorted, what was pushed (or reprioritised) since, and the
	 * entries that stopped holding since (removed, or reprioritised: the old key): the next call
	 * merges the three instead of sorting again.  An entry holds while its GPR is still queued
	 * under the same push stamp (egs_gpr.queue_stamp). */
	struct egs_queue_entry *order, *added, *gone;
	size_t norder, caporder, nadded, capadded, ngone, capgone;
	struct egs_queue_entry *spare; /* the order before the last: the next merge's buffer */
	size_t capspare;
	bool order_ok;
	uint64_t stamps;
	struct egs_queue_merge merge; /* the order being taken in pieces, if any */
	uint64_t tickets;
};

void egs_queue_init(struct egs_queue *q);
void egs_queue_cleanup(struct egs_queue *q); /* the GPRs are borrowed and not freed */

/* Inserts g (borrowed; must not be queued already). O(log n). */
void egs_queue_push(struct egs_queue *q, struct egs_gpr *g);
/* Removes g if it is queued; returns false when it was not. O(log n). */
bool egs_queue_remove(struct egs_queue *q, struct egs_gpr *g);
/* Sets g's priority and restores heap order if g is queued. O(log n). */
void egs_queue_set_priority(struct egs_queue *q, struct egs_gpr *g, int priority);
/* Returns the first GPR in order without removing it, or NULL when empty. O(1). */
struct egs_gpr *egs_queue_peek(const struct egs_queue *q);
/* Removes and returns the first GPR, or NULL when empty. O(log n). */
struct egs_gpr *egs_queue_pop(struct egs_queue *q);
static inline size_t egs_queue_len(const struct egs_queue *q) { return q->len; }
static inline bool egs_queue_contains(const struct egs_queue *q, const struct egs_gpr *g)
{
	return g->heap_idx < q->len && q->heap[g->heap_idx].g == g;
}
/* The GPR at heap position i < egs_queue_len (in no useful order: tests and benchmarks). */
static inline struct egs_gpr *egs_queue_at(const struct egs_queue *q, size_t i) { return q->heap[i].g; }

/* True when a goes before b: higher priority, then lower fair key, then earlier seq. */
bool egs_queue_before(const struct egs_gpr *a, const struct egs_gpr *b);
/* The same order as a qsort comparator over an array of struct egs_gpr *. */
int egs_queue_cmp(const void *a, const void *b);

/* Fills out (caller-provided, egs_queue_len entries) with the queued GPRs in queue order.  The
 * heap is not changed; the order is kept for the next call, which merges the GPRs pushed since
 * into it and drops those removed since: O(n + c log c) for c changes, reading no GPR (a copy of
 * contiguous entries; a merge beats a fresh sort even after many changes), O(n log n) the first
 * time, or when more than 2n + 4,096 changes came since the last call (the lists stop growing
 * where nobody sorts, e.g. on a follower). */
void egs_queue_sorted(struct egs_queue *q, struct egs_gpr **out);

/*
 * The same order taken in pieces, so that no piece holds a caller (egsd's loop) for long at a deep
 * queue: egs_queue_order_begin takes the queue as it stands (the changes noted since the last
 * order, O(1); a fresh O(n log n) sort the first time) and returns a ticket (never 0);
 * egs_queue_order_sort sorts those changes (O(c log c) in all) in pieces of at most max element
 * moves, true once they are sorted (or when the ticket is not the current one); each
 * egs_queue_order_step under it (the first finishes the sort in one go if it is not done)
 * merges at most max more entries and sets *span to them
 * (borrowed: valid until the next call on q that changes it) and returns how many, 0 once the
 * order is complete (it is then the kept order for the next call).  The entries are in queue
 * order and carry their GPR (key.g) as it was queued at the beginning: pushes, removals and
 * priority changes after it go to the next order, and their GPRs are not read.  At most one order
 * is in progress: a new begin or an egs_queue_sorted drops the one before (its changes go back
 * to the lists, nothing is lost), whose next step then returns SIZE_MAX (begin again).
 */
uint64_t egs_queue_order_begin(struct egs_queue *q);
bool egs_queue_order_sort(struct egs_queue *q, uint64_t ticket, size_t max);
size_t egs_queue_order_step(struct egs_queue *q, uint64_t ticket, size_t max, const struct egs_queue_entry **span);
/* The number of entries the order begun under q's current ticket has in all. */
static inline size_t egs_queue_order_len(const struct egs_queue *q) { return q->merge.len; }
/* True when key a goes before key b in queue order (as egs_queue_before; the GPRs are not read). */
bool egs_queue_key_before(const struct egs_queue_slot *a, const struct egs_queue_slot *b);

#endif
