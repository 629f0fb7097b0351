/*
 * sched_place.c: placing one GPR in a walk of the plan (sched_int.h): the k earliest matching
 * nodes of one cluster, conservative backfill into holes, GPU shares, and what a placement reserves
 * or starts.  The hot path of every walk: its functions stay in this one file so that they inline.
 */
#include "core/sched_int.h"

#include "core/gpr.h"
#include "core/held.h"
#include "core/share_gpr.h"

#include <stdlib.h>
#include <string.h>

/* g's entry in p, through the index it caches across plans of one workspace layout (a map lookup
 * hashes the name: a tenth of a walk). */
static inline struct wsinfo *ws_of(struct egs_plan *p, struct egs_gpr *g)
{
	if (g->plan_serial == p->serial && g->plan_ws < p->nws_fixed)
		return &p->wsv[g->plan_ws];
	return egs__ws_lookup(p, g);
}

struct wsinfo *egs__ws_of(struct egs_plan *p, struct egs_gpr *g)
{
	return ws_of(p, g);
}

/* Order in which the plan takes nodes: earliest free first, free-now first, then best fit (fewest
 * GPUs, least memory: big nodes stay for the requests that need them), then by name. */
static bool slot_before(const struct slot *x, const struct slot *y)
{
	if (x->free_at != y->free_at)
		return x->free_at < y->free_at;
	if (x->free_now != y->free_now)
		return x->free_now;
	if (x->n->gpu_count != y->n->gpu_count)
		return x->n->gpu_count < y->n->gpu_count;
	if (x->n->memory_mib != y->n->memory_mib)
		return x->n->memory_mib < y->n->memory_mib;
	return x->name_rank < y->name_rank;
}

static void heap_set(struct pool *q, size_t i, struct slot *s)
{
	q->heap[i] = s;
	s->hidx = i;
}

/* slot_before for two members of one pool: they share GPU count and memory (same_pool), so the
 * node's fields need not be read (a cache miss each on 10,000 nodes). */
static bool member_before(const struct slot *x, const struct slot *y)
{
	if (x->free_at != y->free_at)
		return x->free_at < y->free_at;
	if (x->free_now != y->free_now)
		return x->free_now;
	return x->name_rank < y->name_rank;
}

static void heap_up(struct pool *q, size_t i)
{
	struct slot *s = q->heap[i];
	while (i > 0 && member_before(s, q->heap[(i - 1) / 2])) {
		heap_set(q, i, q->heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(q, i, s);
}

static void heap_down(struct pool *q, size_t i)
{
	struct slot *s = q->heap[i];
	for (;;) {
		size_t l = 2 * i + 1, best = i;
		struct slot *b = s;
		if (l < q->n && member_before(q->heap[l], b))
			best = l, b = q->heap[l];
		if (l + 1 < q->n && member_before(q->heap[l + 1], b))
			best = l + 1, b = q->heap[l + 1];
		if (best == i)
			break;
		heap_set(q, i, b);
		i = best;
	}
	heap_set(q, i, s);
}

void egs__heap_push(struct pool *q, struct slot *s)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? 2 * q->cap : 8;
		q->heap = egs_realloc(q->heap, q->cap * sizeof(*q->heap));
	}
	q->heap[q->n] = s;
	s->hidx = q->n++;
	heap_up(q, s->hidx);
}

void egs__heap_build(struct pool *q)
{
	for (size_t i = 0; i < q->n; i++)
		q->heap[i]->hidx = i;
	for (size_t i = q->n / 2; i-- > 0;)
		heap_down(q, i);
}

/* Sets the leaf of slot s in its pool's segment tree and the minima above it. */
static void seg_set(struct slot *s)
{
	struct pool *q = s->pool;
	size_t x = q->segsz + s->name_pos;
	q->seg[x] = s->free_at;
	for (x /= 2; x >= 1; x /= 2) {
		int64_t v = min64(q->seg[2 * x], q->seg[2 * x + 1]);
		if (q->seg[x] == v)
			break; /* the minima above are unchanged too */
		q->seg[x] = v;
	}
}

static size_t preferred_rank(const struct egs_gpr *g, const char *cluster)
{
	for (size_t i = 0; i < g->preferred_clusters.n; i++)
		if (strcmp(g->preferred_clusters.v[i], cluster) == 0)
			return i;
	return SIZE_MAX;
}

/* Plan order (slot_before) for nodes of any pools. */
static bool plan_before(const struct slot *x, const struct slot *y)
{
	return x->pool == y->pool ? member_before(x, y) : slot_before(x, y);
}

/* Takes the k first nodes, in plan order, of the pools listed in m[0..nm) (one cluster's matching
 * pools) into out, leaving the heaps as they are.  Returns false when they hold fewer than k.  The
 * next node in plan order is the first of a frontier that starts with the heaps' tops and takes in
 * the children of each node taken (no child comes before its parent): k (nm + k) compares, no heap
 * writes (popping k and pushing them back was a tenth of a walk). */
static bool k_first(struct egs_plan *p, struct pool *const *m, size_t nm, size_t k, struct slot **out)
{
	size_t have = 0;
	for (size_t j = 0; j < nm; j++)
		have += m[j]->n;
	if (have < k)
		return false;
	if (k == 1) { /* most GPRs: the least of the heaps' tops */
		struct slot *b = NULL;
		for (size_t j = 0; j < nm; j++)
			if (m[j]->n && (!b || plan_before(m[j]->heap[0], b)))
				b = m[j]->heap[0];
		out[0] = b;
		return true;
	}
	struct slot **fr = p->frontier;
	size_t nf = 0;
	for (size_t j = 0; j < nm; j++)
		if (m[j]->n)
			fr[nf++] = m[j]->heap[0];
	for (size_t got = 0; got < k; got++) {
		size_t b = 0;
		for (size_t i = 1; i < nf; i++)
			if (plan_before(fr[i], fr[b]))
				b = i;
		struct slot *s = fr[b];
		const struct pool *q = s->pool;
		size_t c = 2 * s->hidx + 1;
		out[got] = s;
		if (c < q->n)
			fr[b] = q->heap[c];
		else
			fr[b] = fr[--nf];
		if (c + 1 < q->n)
			fr[nf++] = q->heap[c + 1];
	}
	return true;
}

/*
 * GPU sharing (core/share_gpr.h).  A shared GPR takes shares of one node's devices.  Its floor on a
 * node is when the node is free of dedicated holds and reservations (and, inside the timeline, not
 * before the latest shared reservation there), so the shares on the node only ever go down after
 * it; the node offers the first of the floor and the ends after it at which the request fits.  The
 * earliest start wins, then preferred clusters, then nodes already holding shares (packing), then
 * names.  For dedicated GPRs a node holding shares is free from the end of its last share.
 */
void egs__share_slot_init(struct egs_plan *p, struct slot *s)
{
	const struct egs_node *n = s->n;
	s->ded_free_at = s->free_at;
	if (!egs_share_node_busy(n))
		return;
	p->shared = true;
	s->sh = egs_calloc(1, sizeof(*s->sh));
	egs_share_timeline_init(s->sh, n->gpu_count < EGS_SHARE_DEV_MAX ? n->gpu_count : EGS_SHARE_DEV_MAX);
	int take[EGS_SHARE_DEV_MAX];
	for (size_t i = 0; i < n->shared.len; i++) {
		const struct egs_gpr *g = n->shared.items[i];
		int64_t end = egs_gpr_planned_end(g, p->now); /* Releasing: leaving now */
		egs_share_takes(n, g, take);
		egs_share_timeline_add(s->sh, p->now, end > p->now ? end : p->now, take);
	}
	int64_t end = egs_share_timeline_end(s->sh);
	s->free_now = false; /* shares, or an attachment whose size is unknown: not free for anyone now */
	s->free_at = end > p->now ? end : p->now;
	if (s->ded_free_at > s->free_at)
		s->free_at = s->ded_free_at;
}

static int64_t place_shared(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w)
{
	int64_t best = EGS_NEVER;
	size_t best_rank = SIZE_MAX;
	struct slot *chosen = NULL;
	int take[EGS_SHARE_DEV_MAX];
	for (size_t i = 0; i < p->nslots; i++) {
		struct slot *s = &p->slots[i];
		if (!egs_node_can_share(s->n) || !egs_node_matches(g, w->ws, s->n))
			continue;
		int64_t floor = s->ded_free_at > w->until ? s->ded_free_at : w->until;
		int64_t t = egs_share_timeline_earliest(s->sh, s->n->gpu_count, floor > p->now ? floor : p->now,
							g->share_centi, take);
		if (t == INT64_MAX)
			continue;
		size_t rank = preferred_rank(g, s->n->cluster);
		bool packed = s->sh && s->sh->n, best_packed = chosen && chosen->sh && chosen->sh->n;
		if (t < best ||
		    (t == best && (rank < best_rank || (rank == best_rank && (packed > best_packed ||
									  (packed == best_packed && s->name_rank < chosen->name_rank)))))) {
			best = t;
			best_rank = rank;
			chosen = s;
			memcpy(p->share_take, take, sizeof(take));
		}
	}
	p->chosen[0] = chosen;
	return best;
}

static void reserve_shared(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, int64_t t)
{
	struct slot *s = p->chosen[0];
	int64_t end = t + g->exit_duration_s;
	if (!s->sh) {
		s->sh = egs_calloc(1, sizeof(*s->sh));
		egs_share_timeline_init(s->sh, s->n->gpu_count);
	}
	p->shared = true;
	egs_share_timeline_add(s->sh, t, end, p->share_take);
	egs__slot_dirty(p, s);
	s->free_now = false;
	if (end > s->free_at) {
		s->free_at = end;
		heap_down(s->pool, s->hidx); /* it only moved later */
		seg_set(s);
	}
	w->until = end;
}

static void start_shared(struct egs_plan *p, struct egs_gpr *g, struct wsinfo *w)
{
	struct egs_node *n = p->chosen[0]->n;
	egs_share_start(p->st, g, n, p->share_take);
	p->chosen[0]->idle_now = false;
	g->est_start = p->now;
	egs_gpr_set_state(p->st, g, EGS_GPR_PROVISIONING, p->now, "Provisioning",
			  "GPR %s starts provisioning with %d.%02d shared GPU(s) of node %s of cluster %s", g->name,
			  g->share_centi / EGS_SHARE_WHOLE, g->share_centi % EGS_SHARE_WHOLE, n->name, n->cluster);
	w->active = true;
}

/*
 * Conservative backfill.  A reservation that starts after a node's (or workspace's) previous free
 * time leaves a hole [free time, start) in front of it; a GPR later in the walk may start in a hole
 * if it ends by the hole's end, so it delays no GPR placed before it.  Holes live in their pool
 * (POOL_HOLES) and in their workspace (WS_HOLES); one that finds no room is not recorded.  A list
 * is kept latest end first: a scan for a GPR that must end by e stops at the first hole ending
 * before (most holes of a long walk lie far behind the times it places at); which holes a GPR
 * takes never depends on their order in the list.
 * hole_insert puts [s, e) of slot into v (n entries, room for one more) at its place in that order.
 */
static __attribute__((noinline)) void hole_insert(struct hole *v, size_t *n, int64_t s, int64_t e, uint32_t slot,
						     struct egs_plan *p)
{
	size_t i = (*n)++;
	for (; i > 0 && v[i - 1].e < e; i--)
		v[i] = v[i - 1];
	v[i] = (struct hole){ s, e, slot };
	if (e < p->hole_end_min)
		p->hole_end_min = e;
}

/* (Its tests inline: every reservation of a long walk calls it twice, and most lists are full.) */
static inline void hole_add(struct hole *v, size_t *n, size_t cap, int64_t s, int64_t e, uint32_t slot,
			    struct egs_plan *p)
{
	if (e <= s || e <= p->now || *n == cap) /* empty, past, or no room: the time is not offered */
		return;
	hole_insert(v, n, s, e, slot, p);
}

/* Takes [t, end) out of the hole of v (of `slot`) that holds t, keeping what is left on each side. */
static void hole_take(struct hole *v, size_t *n, size_t cap, uint32_t slot, int64_t t, int64_t end, struct egs_plan *p)
{
	for (size_t i = 0; i < *n; i++) {
		if (v[i].slot != slot || v[i].s > t || t >= v[i].e)
			continue;
		struct hole h = v[i];
		memmove(v + i, v + i + 1, (--*n - i) * sizeof(*v));
		hole_add(v, n, cap, h.s, t, slot, p);
		hole_add(v, n, cap, end, h.e, slot, p);
		return;
	}
}

/* True when workspace w is free for a GPR over [t, t + d): after its last one, or in a hole. */
static bool ws_free(const struct wsinfo *w, int64_t t, int64_t d)
{
	if (t >= w->until)
		return true;
	for (size_t i = 0; i < w->nholes; i++)
		if (w->holes[i].s <= t && t + d <= w->holes[i].e)
			return true;
	return false;
}

/* Hole order for a GPR that fits several: the tightest (earliest end) first, then by node name. */
static bool hole_before(const struct hole *x, const struct hole *y, const struct slot *slots)
{
	if (x->e != y->e)
		return x->e < y->e;
	return slots[x->slot].name_rank < slots[y->slot].name_rank;
}

/*
 * Which free nodes a reservation takes must not depend on when each became free, only on which
 * are free by its start: a GPR that starts in a hole holds its node until the hole's end, and the
 * next walk must still hand the GPRs ahead of it the same nodes, or the nodes left free after them
 * differ and an estimate behind moves.  So nodes free by t go in a fixed order: best fit (the
 * caller orders the pools), then name.  Not idle ones first at now: a node still detaching from a
 * GPR counts as free now but not idle, and when the agent's detach arrives between two runs an
 * idle-first order would hand the GPRs ahead other nodes and move an estimate behind (a GPR
 * planned on a detaching node waits the seconds the detach takes).
 * Collects up to want nodes of pool q free by t into out; returns how many.  The pool's segment
 * tree finds them left to right in name order: down from the root to the leftmost leaf free by t,
 * then up to the next right sibling whose minimum is by t and down again, O(log n) each (t is a
 * time: the padding leaves, INT64_MAX, never qualify).
 */
static size_t pool_tails(struct egs_plan *p, struct pool *q, int64_t t, size_t want, struct slot **out)
{
	const int64_t *seg = q->seg;
	size_t got = 0, x = 1, sz = q->segsz;
	if (!q->n || !want || seg[1] > t)
		return 0;
	for (;;) {
		while (x < sz) /* seg[x] <= t: some leaf under x is free by t */
			x = seg[2 * x] <= t ? 2 * x : 2 * x + 1;
		out[got++] = &p->slots[q->byname[x - sz]];
		if (got == want)
			return got;
		while (x & 1 || seg[x + 1] > t) { /* a right child, or a left one whose sibling is not free */
			if (x == 1)
				return got;
			x /= 2;
		}
		x++;
	}
}

/* Up to want nodes of the pools m[0 .. nm) free by t, in the order above, into out. */
static size_t pick_tails(struct egs_plan *p, struct pool *const *m, size_t nm, int64_t t, size_t want,
			 struct slot **out)
{
	size_t got = 0;
	for (size_t j = 0; j < nm && got < want; j++)
		got += pool_tails(p, m[j], t, want - got, out + got);
	return got;
}

/* Pools in best-fit order (fewest GPUs, least memory, then their place), for pick_tails. */
static void sort_pools(struct pool **m, size_t nm)
{
	for (size_t i = 1; i < nm; i++) {
		struct pool *x = m[i];
		size_t j = i;
		for (; j > 0; j--) {
			const struct pool *y = m[j - 1];
			bool before = x->proto->gpu_count != y->proto->gpu_count ? x->proto->gpu_count < y->proto->gpu_count
				      : x->proto->memory_mib != y->proto->memory_mib ? x->proto->memory_mib < y->proto->memory_mib
										 : x->index < y->index;
			if (!before)
				break;
			m[j] = m[j - 1];
		}
		m[j] = x;
	}
}

/* Collects into p->cand the times at which g could start before T: now, the nodes' free times,
 * the workspace's, and the starts of holes long enough for it (each clamped to now).  Sorted.
 * The pools' holes long enough that start by T go to p->hok: no other can hold it.  A workspace
 * without holes is free only from its until, so no earlier time is a candidate nor a hole that
 * ends too soon after it (with 1,000 workspaces and 10,000 nodes the workspace decides most starts,
 * and this left one candidate, T, where a few dozen were sorted and tried). */
static size_t candidates(struct egs_plan *p, const struct wsinfo *w, struct pool *const *m, size_t nm, size_t k,
			 int64_t d, int64_t T)
{
	int64_t now = p->now, *c = p->cand;
	int64_t lo = !w->nholes && w->until > now ? w->until : now;
	size_t nc = 0;
#define CAND(x)                                         \
	do {                                            \
		int64_t x_ = (x) < now ? now : (x);     \
		if (x_ >= lo && x_ < T)                 \
			c[nc++] = x_;                   \
	} while (0)
	if (lo < T) { /* else no time qualifies (most GPRs deep in a queue: the workspace decides) */
		CAND(now);
		CAND(w->until);
		for (size_t i = 0; i < k; i++)
			CAND(p->tmp[i]->free_at);
		for (size_t i = 0; i < w->nholes; i++)
			if (w->holes[i].e - (w->holes[i].s < now ? now : w->holes[i].s) >= d)
				CAND(w->holes[i].s);
	}
	size_t nhok = 0;
	for (size_t j = 0; j < nm; j++) { /* locals: the stores below may alias what the loop reads */
		struct hole *h = m[j]->holes, *end = h + m[j]->nholes;
		for (; h < end && h->e >= lo + d; h++) { /* latest end first: the rest end too soon */
			int64_t s = h->s, from = s < lo ? lo : s;
			if (s <= T && h->e - from >= d) {
				p->hok[nhok++] = h;
				CAND(s);
			}
		}
	}
	p->nhok = nhok;
#undef CAND
	for (size_t i = 1; i < nc; i++) { /* a few at most: insertion sort */
		int64_t x = c[i];
		size_t j = i;
		for (; j > 0 && c[j - 1] > x; j--)
			c[j] = c[j - 1];
		c[j] = x;
	}
	return nc;
}

/*
 * The earliest t <= T at which k nodes of the pools m[0 .. nm) (one cluster's matching pools) and
 * w are all free over [t, t + d): a node after its last reservation or inside a hole.  On entry
 * p->tmp holds the cluster's k first nodes in plan order and T is the start they give (the
 * no-backfill answer: all of them and w are free by then); on return p->tmp holds the nodes chosen:
 * holes first, tightest first (filling a hole beats opening one), then nodes free by t in
 * pick_tails() order.  Bounds: at most k + POOL_HOLES * nm + WS_HOLES + 3 candidate times, each
 * checked against the workspace's holes and the pools' holes.
 */
static int64_t fit(struct egs_plan *p, const struct wsinfo *w, struct pool *const *m, size_t nm, size_t k, int64_t d,
		   int64_t T)
{
	size_t nc = candidates(p, w, m, nm, k, d, T);
	p->cand[nc++] = T;
	for (size_t c = 0; c < nc; c++) {
		int64_t t = p->cand[c];
		if ((c && t == p->cand[c - 1]) || !ws_free(w, t, d))
			continue;
		size_t tails = 0, nh = 0;
		while (tails < k && p->tmp[tails]->free_at <= t)
			tails++;
		for (size_t i = 0; i < p->nhok; i++)
			if (p->hok[i]->s <= t && t + d <= p->hok[i]->e)
				p->hsel[nh++] = p->hok[i];
		if (nh + tails < k)
			continue;
		size_t take = nh < k ? nh : k;
		for (size_t i = 0; i < take; i++) { /* the take best holes to the front: take <= k, small */
			size_t b = i;
			for (size_t x = i + 1; x < nh; x++)
				if (hole_before(p->hsel[x], p->hsel[b], p->slots))
					b = x;
			struct hole *h = p->hsel[b];
			p->hsel[b] = p->hsel[i];
			p->hsel[i] = h;
		}
		for (size_t i = 0; i < take; i++)
			p->tmp[i] = &p->slots[p->hsel[i]->slot];
		size_t got = pick_tails(p, m, nm, t, k - take, p->tmp + take);
		EGS_ASSERT(got == k - take);
		return t;
	}
	EGS_ASSERT(false); /* T always fits */
	return T;
}

/* The pools (of a plan of at most 64) that g's own fields match: its cluster, GPU shape, instance
 * type, GPUs per node and memory (the workspace's clusters are wsinfo.pool_ok's part). */
static uint64_t pools_matching(const struct egs_plan *p, const struct egs_gpr *g)
{
	uint64_t mask = 0;
	for (size_t j = 0; j < p->npools; j++)
		if ((!g->cluster[0] || !strcmp(g->cluster, p->pools[j].proto->cluster)) &&
		    egs__shape_matches(g, p->pools[j].proto))
			mask |= 1ull << j;
	return mask;
}

/* pools_matching for a GPR of the state, cached in it while the pools' layout stays (the string
 * compares were a third of a walk); edits of its shape reset the cache (egs_gpr.match_layout). */
static uint64_t match_mask(const struct egs_plan *p, struct egs_gpr *g)
{
	if (g->match_layout != p->layout) {
		g->match_mask = pools_matching(p, g);
		g->match_layout = p->layout;
	}
	return g->match_mask;
}

/* One cluster's turn in egs__place: its pools that match g are m[0 .. nm), the first of them
 * p->pools[a].  Keeps the earliest start in *best (a preferred cluster breaks a tie, *best_rank)
 * and its nodes in p->chosen. */
static void place_cluster(struct egs_plan *p, const struct egs_gpr *g, const struct wsinfo *w, struct pool **m,
			  size_t nm, size_t a, int64_t *best, size_t *best_rank)
{
	size_t k = (size_t)g->node_count;
	if (p->backfill)
		sort_pools(m, nm);
	if (!nm || !k_first(p, m, nm, k, p->tmp))
		return;
	int64_t t = p->tmp[k - 1]->free_at;
	if (t < w->until)
		t = w->until;
	if (t < p->now) /* a kept plan was built a moment ago */
		t = p->now;
	if (p->backfill)
		t = fit(p, w, m, nm, k, g->exit_duration_s, t);
	size_t rank = g->preferred_clusters.n ? preferred_rank(g, p->pools[a].proto->cluster) : SIZE_MAX;
	if (t < *best || (t == *best && rank < *best_rank)) {
		*best = t;
		*best_rank = rank;
		struct slot **v = p->chosen; /* tmp's nodes become the chosen ones (no copy) */
		p->chosen = p->tmp;
		p->tmp = v;
	}
}

/* Finds g's earliest start over the clusters it may use; on success returns the time and leaves
 * the chosen nodes in p->chosen[0 .. node_count).  w is g's workspace entry; cached (may be NULL)
 * is g's match_mask when the plan has at most 64 pools. */
int64_t egs__place(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, const uint64_t *cached)
{
	if (g->share_centi)
		return place_shared(p, g, w);
	const struct egs_workspace *ws = w->ws;
	int64_t best = EGS_NEVER;
	size_t best_rank = SIZE_MAX;
	struct pool **m = p->match;
	if (p->npools <= 64) { /* the matching pools' bits, a cluster (a run of pools) at a time */
		uint64_t rest = (cached ? *cached : pools_matching(p, g)) & w->pool_ok;
		while (rest) {
			size_t a = (size_t)__builtin_ctzll(rest), b = p->pools[a].group_end, nm = 0;
			uint64_t grp = b >= 64 ? rest : rest & ((1ull << b) - 1);
			rest &= ~grp;
			for (; grp; grp &= grp - 1)
				m[nm++] = &p->pools[__builtin_ctzll(grp)];
			place_cluster(p, g, w, m, nm, a, &best, &best_rank);
		}
		return best;
	}
	for (size_t a = 0; a < p->npools;) {
		size_t b = p->pools[a].group_end, nm = 0;
		if ((!g->cluster[0] || !strcmp(g->cluster, p->pools[a].proto->cluster)) &&
		    (!ws || egs_strlist_has(&ws->clusters, p->pools[a].proto->cluster))) {
			for (size_t j = a; j < b; j++)
				if (egs__shape_matches(g, p->pools[j].proto))
					m[nm++] = &p->pools[j];
		}
		place_cluster(p, g, w, m, nm, a, &best, &best_rank);
		a = b;
	}
	return best;
}

void egs__reserve(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, int64_t t)
{
	if (g->share_centi) {
		reserve_shared(p, g, w, t);
		return;
	}
	int64_t end = t + g->exit_duration_s;
	for (size_t i = 0; i < (size_t)g->node_count; i++) {
		struct slot *s = p->chosen[i];
		uint32_t idx = (uint32_t)(s - p->slots);
		if (s->free_at > t) { /* backfilled into a hole: the node's later reservations stay */
			hole_take(s->pool->holes, &s->pool->nholes, POOL_HOLES, idx, t, end, p);
			continue;
		}
		if (p->backfill) {
			hole_add(s->pool->holes, &s->pool->nholes, POOL_HOLES, s->free_at, t, idx, p);
		}
		egs__slot_dirty(p, s);
		s->free_at = s->ded_free_at = end;
		s->free_now = false;
		heap_down(s->pool, s->hidx); /* it only moved later */
		seg_set(s);
	}
	if (t < w->until && end <= w->until) { /* backfilled into a hole of the workspace */
		hole_take(w->holes, &w->nholes, WS_HOLES, 0, t, end, p);
		return;
	}
	/* (t < until here only for one started a moment ago, replayed on a plan of now, whose
	 * workspace counts as free from now) */
	if (p->backfill)
		hole_add(w->holes, &w->nholes, WS_HOLES, w->until, t, 0, p);
	w->until = end;
}

static bool can_start_now(struct egs_plan *p, const struct egs_gpr *g, const struct wsinfo *w, int64_t t)
{
	if (t > p->now || w->active)
		return false;
	if (g->share_centi)
		return egs_share_fits_now(p->chosen[0]->n, p->share_take);
	for (size_t i = 0; i < (size_t)g->node_count; i++)
		if (!p->chosen[i]->idle_now)
			return false;
	return true;
}

static void start(struct egs_plan *p, struct egs_gpr *g, struct wsinfo *w)
{
	struct egs_state *st = p->st;
	if (g->share_centi) {
		start_shared(p, g, w);
		return;
	}
	egs_strlist_cleanup(&g->nodes);
	for (size_t i = 0; i < (size_t)g->node_count; i++) {
		struct egs_node *n = p->chosen[i]->n;
		egs_strlcpy(n->gpr_id, g->id, sizeof(n->gpr_id));
		p->chosen[i]->idle_now = false;
		n->allocated_at = p->now;
		egs_state_touch(st, EGS_KIND_NODE, n);
		egs_strlist_add(&g->nodes, n->key);
	}
	if (!g->cluster[0]) {
		egs_strlcpy(g->cluster, p->chosen[0]->n->cluster, sizeof(g->cluster));
		g->match_layout = 0; /* its pool mask read the cluster: a requeue must not match others */
	}
	g->est_start = p->now;
	egs_gpr_set_state(st, g, EGS_GPR_PROVISIONING, p->now, "Provisioning",
			  "GPR %s starts provisioning on %d node(s) of cluster %s", g->name, g->node_count,
			  g->cluster);
	w->active = true;
}

/* Records g's estimate; one later by more than a minute counts as a delay.  The count is not
 * written to the store here but with the GPR's next change (its start at the latest): under
 * creates at mixed priorities every walk delays thousands of GPRs, and writing each of their rows
 * made the commits, not the planner, the bottleneck (issue 16).  A restart may forget the delays
 * counted since a GPR's row was last written. */
static void set_estimate(struct egs_plan *p, struct egs_gpr *g, int64_t t)
{
	int64_t est = t == EGS_NEVER ? 0 : t;
	if (est == g->est_start)
		return;
	if (g->est_start && est > g->est_start + 60)
		g->delayed_count++;
	g->est_start = est;
	egs_state_restamp(p->st, g); /* its status view shows both (server/gpr_view.c) */
}

/* Places g in p and reserves what it gets, starting nothing (the side-effect-free walks);
 * returns its start (EGS_NEVER when none). */
int64_t egs__place_dry(struct egs_plan *p, struct egs_gpr *g)
{
	struct wsinfo *w = ws_of(p, g);
	uint64_t mask = p->npools <= 64 ? match_mask(p, g) : 0;
	int64_t t = egs__place(p, g, w, &mask);
	if (t != EGS_NEVER)
		egs__reserve(p, g, w, t);
	return t;
}

/* A walk run in slices (egs_sched_step) serves requests between them: a GPR starts only while its
 * nodes are still idle, healthy and its shape (else the next walk decides).  Always true when the
 * walk runs in one go. */
static bool still_free(struct egs_plan *p, const struct egs_gpr *g, const struct wsinfo *w)
{
	if (g->share_centi) /* egs_share_fits_now (can_start_now) read the node as it is */
		return true;
	for (size_t i = 0; i < (size_t)g->node_count; i++) {
		const struct egs_node *n = p->chosen[i]->n;
		if (n->gpr_id[0] || n->attached_gpr[0] || egs_share_node_busy(n) || egs_node_held(n, p->now) ||
		    !egs_node_schedulable(p->st, n, p->now) || !egs_node_matches(g, w->ws, n))
			return false;
	}
	return true;
}

/* Places g in plan p (in queue order after every GPR placed so far): provisions it when it can start
 * now, else records its estimate and reserves its nodes.  Returns its start (EGS_NEVER if none). */
int64_t egs__plan_one(struct egs_plan *p, struct egs_gpr *g)
{
	p->last = g;
	if (g->state != EGS_GPR_QUEUED) /* left the queue during a walk in slices: keeps its place in it */
		return egs__place_dry(p, g);
	struct wsinfo *w = ws_of(p, g);
	uint64_t mask = p->npools <= 64 ? match_mask(p, g) : 0;
	int64_t t = egs__place(p, g, w, &mask);
	if (t == EGS_NEVER) {
		set_estimate(p, g, t);
		return t;
	}
	if (can_start_now(p, g, w, t) && still_free(p, g, w)) {
		start(p, g, w);
		egs__reserve(p, g, w, p->now);
		return p->now;
	}
	set_estimate(p, g, t);
	egs__reserve(p, g, w, t);
	return t;
}

/*
 * egs__plan_one in two halves, for a trial's walk that may become the run's walk (sched_held.c,
 * trial_adopt).  egs__plan_note places g and reserves what it gets exactly as egs__plan_one does;
 * a GPR egs__plan_one would start is only noted (*starts): the plan's nodes and workspace are
 * marked as start() marks them, so later GPRs see what they would see.  egs__plan_apply then does
 * what egs__plan_one does to the state at g's turn: starts g on the nodes in p->chosen (noted:
 * starts) when they are still free, else records estimate t; false when a noted start could not be
 * made.  Not for shared GPRs (their start reads the node's shares as they are).
 */
int64_t egs__plan_note(struct egs_plan *p, struct egs_gpr *g, bool *starts)
{
	EGS_ASSERT(!g->share_centi);
	p->last = g;
	*starts = false;
	if (g->state != EGS_GPR_QUEUED)
		return egs__place_dry(p, g);
	struct wsinfo *w = ws_of(p, g);
	uint64_t mask = p->npools <= 64 ? match_mask(p, g) : 0;
	int64_t t = egs__place(p, g, w, &mask);
	if (t == EGS_NEVER)
		return t;
	if (can_start_now(p, g, w, t)) {
		*starts = true;
		for (size_t i = 0; i < (size_t)g->node_count; i++)
			p->chosen[i]->idle_now = false;
		w->active = true;
	}
	egs__reserve(p, g, w, t);
	return t;
}

bool egs__plan_still_free(struct egs_plan *p, struct egs_gpr *g)
{
	return still_free(p, g, ws_of(p, g));
}

bool egs__plan_apply(struct egs_plan *p, struct egs_gpr *g, int64_t t, bool starts)
{
	if (g->state != EGS_GPR_QUEUED) /* left the queue during a walk in slices (egs__plan_one) */
		return true;
	struct wsinfo *w = ws_of(p, g);
	if (starts && still_free(p, g, w)) {
		start(p, g, w);
		return true;
	}
	set_estimate(p, g, t);
	return !starts;
}
