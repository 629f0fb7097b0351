/*
 * sched.c: due transitions and the reservation plan; see sched.h.  The plan is rebuilt from the
 * state on every call: nodes' and workspaces' free times are derived, never stored, so nothing can
 * drift between runs.
 */
#include "core/sched.h"

#include "core/fair.h"
#include "core/gpr.h"
#include "core/held.h"
#include "core/preempt.h"
#include "core/share_gpr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pool;
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
	struct hole *holes; /* POOL_HOLES entries, in no order */
	size_t nholes;
	uint32_t *byname; /* the members (indexes into p->slots) in name order, n entries */
	size_t index;     /* its place in p->pools */
	/* A min-segment tree of the members' free_at over byname (leaves at segsz + name_pos), so
	 * that the first members in name order free by t are found in O(log n) each (pool_tails). */
	size_t segsz;
	int64_t *seg;
};

struct wsinfo {
	char name[EGS_NAME_MAX];
	const struct egs_workspace *ws; /* NULL when deleted */
	int64_t until; /* free for a new GPR from then */
	bool active;   /* holds an active GPR now */
	struct hole holes[WS_HOLES]; /* free stretches before until (backfill) */
	size_t nholes;
	uint64_t pool_ok; /* bit j: p->pools[j] is in one of its clusters (plans of <= 64 pools) */
};

/* The state of one walk over the queue; kept between runs so that a GPR that goes to the end of
 * the queue can be placed without walking everything again (egs_sched_append). */
struct egs_plan {
	struct egs_state *st;
	int64_t now;
	struct slot *slots;
	size_t nslots;
	struct pool *pools;    /* sorted by cluster */
	size_t npools;
	struct egs_map ws;     /* workspace name -> struct wsinfo* (into wsv) */
	struct wsinfo *wsv;
	size_t nws, capws;
	struct slot **chosen;  /* the nodes of the GPR placed last */
	struct slot **tmp;     /* scratch of place() */
	struct pool **match;   /* scratch of place(): one cluster's matching pools */
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
	/* The plan this walk replaced, freed by its next step (plan_retire), and whether the walk's
	 * first state is still to be made (walk_defer): pieces of their own at 100,000 x 10,000. */
	struct egs_plan *old;
	bool deferred;
	/* The first nws_fixed entries of wsv are the state's workspaces in its map's order, the same
	 * in every plan of one serial (st->inventory_gen + 1): GPRs cache their index under it. */
	uint64_t serial;
	size_t nws_fixed;
	uint64_t layout; /* the pools' layout (st->pool_layout): GPRs cache their pool masks under it */
	int share_take[EGS_SHARE_DEV_MAX]; /* place() of a shared GPR: its shares of p->chosen[0] */
	bool shared; /* some slot has a share timeline (snapshots do not keep them) */
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
	uint32_t *heaps; /* every pool's heap in turn, p->pools[j].n entries each */
	size_t *heap_n;
	struct wsinfo *wsv;
	size_t nws;
	struct hole *holes; /* every pool's holes in turn, POOL_HOLES entries each */
	size_t *nholes;
};

bool egs_node_schedulable(const struct egs_state *st, const struct egs_node *n, int64_t now)
{
	return n->health == EGS_HEALTH_HEALTHY && n->last_heartbeat > 0 &&
	       now - n->last_heartbeat <= st->cfg.heartbeat_timeout_s;
}

/* The node-level half of egs_node_matches: GPU shape, instance type, GPUs per node, memory. */
static bool shape_matches(const struct egs_gpr *g, const struct egs_node *n)
{
	if (n->gpu_count < g->gpus_per_node || n->memory_mib < g->memory_mib)
		return false;
	if (g->gpu_shape[0] && strcmp(g->gpu_shape, n->gpu_shape) != 0)
		return false;
	return !g->instance_type[0] || strcmp(g->instance_type, n->instance_type) == 0;
}

bool egs_node_matches(const struct egs_gpr *g, const struct egs_workspace *ws, const struct egs_node *n)
{
	if (g->cluster[0] && strcmp(g->cluster, n->cluster) != 0)
		return false;
	if (ws && !egs_strlist_has(&ws->clusters, n->cluster))
		return false;
	return shape_matches(g, n);
}

/* egs_sched_capacity without the cache: a walk over every node. */
static size_t capacity_count(const struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
			     char *why, size_t whylen)
{
	/* Count per cluster: a multi-node GPR must fit inside one cluster. */
	size_t best = 0, in_ws = 0, shape = 0, itype = 0, gpus = 0;
	struct egs_map per_cluster;
	egs_map_init(&per_cluster);
	size_t *counts = egs_calloc(st->clusters.len + 1, sizeof(size_t));
	size_t ncl = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (g->cluster[0] && strcmp(g->cluster, n->cluster) != 0)
			continue;
		if (ws && !egs_strlist_has(&ws->clusters, n->cluster))
			continue;
		in_ws++;
		if (g->gpu_shape[0] && strcmp(g->gpu_shape, n->gpu_shape) != 0)
			continue;
		shape++;
		if (g->instance_type[0] && strcmp(g->instance_type, n->instance_type) != 0)
			continue;
		itype++;
		if (n->gpu_count < g->gpus_per_node)
			continue;
		gpus++;
		if (n->memory_mib < g->memory_mib)
			continue;
		size_t *c = egs_map_get(&per_cluster, n->cluster);
		if (!c) {
			EGS_ASSERT(ncl <= st->clusters.len);
			c = &counts[ncl++];
			egs_map_put(&per_cluster, n->cluster, c);
		}
		if (++*c > best)
			best = *c;
	}
	egs_map_cleanup(&per_cluster);
	free(counts);
	if (best >= (size_t)g->node_count || !why)
		return best;
	if (!in_ws)
		snprintf(why, whylen, "clusterName: no node in cluster %s of workspace %s",
			 g->cluster[0] ? g->cluster : "(any)", g->workspace);
	else if (!shape)
		snprintf(why, whylen, "gpuShape: no node with GPU shape %s", g->gpu_shape);
	else if (!itype)
		snprintf(why, whylen, "instanceType: no %s node of instance type %s",
			 g->gpu_shape[0] ? g->gpu_shape : "GPU", g->instance_type);
	else if (!gpus)
		snprintf(why, whylen, "numberOfGPUs: no matching node has %d GPUs", g->gpus_per_node);
	else if (best == 0)
		snprintf(why, whylen, "memoryPerGpu: no matching node has %lld MiB per GPU", (long long)g->memory_mib);
	else
		snprintf(why, whylen, "numberOfGPUNodes: %d nodes requested but at most %zu matching nodes exist in one cluster",
			 g->node_count, best);
	return best;
}

/* One answer of egs_sched_capacity, under the request's shape and workspace (key). */
struct cap_entry {
	size_t best;
	char key[];
};

/* Answers are kept while the inventory stays (st->inventory_gen): a create asks once per request
 * and walking 10,000 nodes with string compares each time capped creates near 5,000/s. */
#define CAP_ENTRIES_MAX 4096

size_t egs_sched_capacity(struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws, char *why,
			  size_t whylen)
{
	char key[4 * EGS_NAME_MAX + 64];
	snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%d\x1f%lld\x1f%s", g->cluster, g->gpu_shape, g->instance_type,
		 g->gpus_per_node, (long long)g->memory_mib, ws ? ws->name : "");
	if (st->capacity_gen != st->inventory_gen || st->capacity.len >= CAP_ENTRIES_MAX) {
		void *v;
		for (size_t i = 0; egs_map_next(&st->capacity, &i, NULL, &v);)
			free(v);
		egs_map_cleanup(&st->capacity);
		egs_map_init(&st->capacity);
		st->capacity_gen = st->inventory_gen;
	}
	struct cap_entry *e = egs_map_get(&st->capacity, key);
	if (e && (e->best >= (size_t)g->node_count || !why))
		return e->best;
	size_t best = capacity_count(st, g, ws, why, whylen);
	if (!e) {
		size_t len = strlen(key) + 1;
		e = egs_malloc(sizeof(*e) + len);
		memcpy(e->key, key, len);
		egs_map_put(&st->capacity, e->key, e);
	}
	e->best = best;
	return best;
}

static struct wsinfo *ws_get(struct egs_plan *p, const char *name)
{
	struct wsinfo *w = egs_map_get(&p->ws, name);
	if (w)
		return w;
	if (p->nws == p->capws) {
		/* Grow by rebuilding the index: wsinfo pointers are only held inside this plan. */
		p->capws *= 2;
		p->wsv = egs_realloc(p->wsv, p->capws * sizeof(*p->wsv));
		egs_map_cleanup(&p->ws);
		egs_map_init(&p->ws);
		for (size_t i = 0; i < p->nws; i++)
			egs_map_put(&p->ws, p->wsv[i].name, &p->wsv[i]);
	}
	w = &p->wsv[p->nws++];
	egs_strlcpy(w->name, name, sizeof(w->name));
	w->ws = egs_state_workspace(p->st, name);
	w->until = p->now;
	w->active = false;
	w->nholes = 0;
	w->pool_ok = 0;
	for (size_t a = 0; a < p->npools && a < 64; a = p->pools[a].group_end) /* a cluster at a time */
		if (!w->ws || egs_strlist_has(&w->ws->clusters, p->pools[a].proto->cluster))
			for (size_t j = a; j < p->pools[a].group_end && j < 64; j++)
				w->pool_ok |= 1ull << j;
	egs_map_put(&p->ws, w->name, w);
	return w;
}

/* ws_get for a GPR of the state, through the index it caches across plans of one workspace
 * layout (a map lookup hashes the name: a tenth of a walk). */
static struct wsinfo *ws_of(struct egs_plan *p, struct egs_gpr *g)
{
	if (g->plan_serial == p->serial && g->plan_ws < p->nws_fixed)
		return &p->wsv[g->plan_ws];
	struct wsinfo *w = ws_get(p, g->workspace);
	if ((size_t)(w - p->wsv) < p->nws_fixed) { /* not a deleted workspace's */
		g->plan_serial = p->serial;
		g->plan_ws = (uint32_t)(w - p->wsv);
	}
	return w;
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

static void heap_up(struct pool *q, size_t i)
{
	struct slot *s = q->heap[i];
	while (i > 0 && slot_before(s, q->heap[(i - 1) / 2])) {
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
		if (l < q->n && slot_before(q->heap[l], b))
			best = l, b = q->heap[l];
		if (l + 1 < q->n && slot_before(q->heap[l + 1], b))
			best = l + 1, b = q->heap[l + 1];
		if (best == i)
			break;
		heap_set(q, i, b);
		i = best;
	}
	heap_set(q, i, s);
}

static void heap_push(struct pool *q, struct slot *s)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? 2 * q->cap : 8;
		q->heap = egs_realloc(q->heap, q->cap * sizeof(*q->heap));
	}
	q->heap[q->n] = s;
	s->hidx = q->n++;
	heap_up(q, s->hidx);
}

static struct slot *heap_pop(struct pool *q)
{
	struct slot *top = q->heap[0];
	struct slot *last = q->heap[--q->n];
	if (q->n) {
		heap_set(q, 0, last);
		heap_down(q, 0);
	}
	return top;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Sets the leaf of slot s in its pool's segment tree and the minima above it. */
static void seg_set(struct slot *s)
{
	struct pool *q = s->pool;
	size_t x = q->segsz + s->name_pos;
	q->seg[x] = s->free_at;
	for (x /= 2; x >= 1; x /= 2)
		q->seg[x] = min64(q->seg[2 * x], q->seg[2 * x + 1]);
}

/* (Re)builds q's segment tree from its members' free_at. */
static void seg_build(struct egs_plan *p, struct pool *q)
{
	size_t sz = 1;
	while (sz < q->n)
		sz *= 2;
	q->segsz = sz;
	free(q->seg);
	q->seg = egs_malloc(2 * sz * sizeof(int64_t));
	for (size_t x = 0; x < 2 * sz; x++)
		q->seg[x] = INT64_MAX;
	for (size_t r = 0; r < q->n; r++)
		q->seg[sz + r] = p->slots[q->byname[r]].free_at;
	for (size_t x = sz - 1; x >= 1; x--)
		q->seg[x] = min64(q->seg[2 * x], q->seg[2 * x + 1]);
}

struct pool_ref {
	const char *cluster;
	size_t id;
};

static int cmp_pool_ref(const void *a, const void *b)
{
	const struct pool_ref *x = a, *y = b;
	int c = strcmp(x->cluster, y->cluster);
	return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* Sets p->layout to the state's serial for the pools' attributes in their final order, starting a
 * new serial when they differ from the last plan's: a GPR's cached pool mask (match_mask) holds
 * while the layout does. */
static void layout_note(struct egs_plan *p)
{
	enum { KEYSZ = 2 * EGS_NAME_MAX + EGS_KEY_MAX + 48 };
	struct egs_state *st = p->st;
	char *joined = egs_malloc(p->npools * KEYSZ + 1);
	size_t len = 0;
	for (size_t j = 0; j < p->npools; j++) {
		const struct egs_node *n = p->pools[j].proto;
		int w = snprintf(joined + len, KEYSZ, "%s\x1f%s\x1f%s\x1f%d\x1f%lld\x1e", n->cluster, n->gpu_shape,
				 n->instance_type, n->gpu_count, (long long)n->memory_mib);
		len += w > 0 && w < KEYSZ ? (size_t)w : 0;
	}
	joined[len] = '\0';
	if (!st->pool_layout_keys || strcmp(st->pool_layout_keys, joined) != 0) {
		free(st->pool_layout_keys);
		st->pool_layout_keys = joined;
		st->pool_layout++;
	} else {
		free(joined);
	}
	p->layout = st->pool_layout;
}

/* The attributes that make nodes one pool: cluster, GPU shape, instance type, GPU count, memory. */
static bool same_pool(const struct egs_node *a, const struct egs_node *b)
{
	return a->gpu_count == b->gpu_count && a->memory_mib == b->memory_mib && !strcmp(a->gpu_shape, b->gpu_shape) &&
	       !strcmp(a->cluster, b->cluster) && !strcmp(a->instance_type, b->instance_type);
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0x1f) * 0x100000001b3ull;
}

static uint64_t pool_hash(const struct egs_node *n)
{
	uint64_t h = fnv_str(fnv_str(fnv_str(0xcbf29ce484222325ull, n->cluster), n->gpu_shape), n->instance_type);
	h = (h ^ (uint64_t)n->gpu_count) * 0x100000001b3ull;
	return (h ^ (uint64_t)n->memory_mib) * 0x100000001b3ull;
}

static void build_pools(struct egs_plan *p)
{
	/* Pools are numbered in order of first appearance.  An open-addressing table of pool
	 * numbers, hashed on the attributes (a formatted key per node and a map cost a tenth of a
	 * run's set-up). */
	size_t tsz = 16;
	while (tsz < 2 * p->nslots)
		tsz *= 2;
	size_t *table = egs_malloc(tsz * sizeof(*table));
	for (size_t h = 0; h < tsz; h++)
		table[h] = SIZE_MAX;
	size_t *slot_pool = egs_calloc(p->nslots + 1, sizeof(*slot_pool));
	size_t npools = 0, cap = 16;
	struct pool *pools = egs_malloc(cap * sizeof(*pools));
	for (size_t i = 0; i < p->nslots; i++) {
		const struct egs_node *n = p->slots[i].n;
		size_t h = (size_t)pool_hash(n) & (tsz - 1);
		while (table[h] != SIZE_MAX && !same_pool(pools[table[h]].proto, n))
			h = (h + 1) & (tsz - 1);
		if (table[h] == SIZE_MAX) {
			if (npools == cap) {
				cap *= 2;
				pools = egs_realloc(pools, cap * sizeof(*pools));
			}
			memset(&pools[npools], 0, sizeof(*pools));
			table[h] = npools;
			pools[npools++].proto = n;
		}
		slot_pool[i] = table[h];
	}
	free(table);
	/* Sort the pools by cluster (place() walks a cluster's pools together), keeping track of
	 * where each one went. */
	struct pool_ref *order = egs_calloc(npools + 1, sizeof(*order));
	for (size_t j = 0; j < npools; j++)
		order[j] = (struct pool_ref){ pools[j].proto->cluster, j };
	qsort(order, npools, sizeof(*order), cmp_pool_ref);
	size_t *where = egs_calloc(npools + 1, sizeof(*where));
	p->pools = egs_calloc(npools + 1, sizeof(*p->pools));
	for (size_t j = 0; j < npools; j++) {
		p->pools[j] = pools[order[j].id];
		where[order[j].id] = j;
	}
	p->npools = npools;
	for (size_t a = 0; a < npools;) {
		size_t b = a;
		while (b < npools && !strcmp(p->pools[b].proto->cluster, p->pools[a].proto->cluster))
			b++;
		for (size_t j = a; j < b; j++)
			p->pools[j].group_end = b;
		a = b;
	}
	for (size_t j = 0; j < npools; j++) {
		p->pools[j].holes = egs_calloc(POOL_HOLES, sizeof(struct hole));
		p->pools[j].index = j;
	}
	layout_note(p);
	for (size_t i = 0; i < p->nslots; i++) {
		struct pool *q = &p->pools[where[slot_pool[i]]];
		p->slots[i].pool = q;
		heap_push(q, &p->slots[i]);
	}
	uint32_t *byrank = egs_calloc(p->nslots + 1, sizeof(*byrank));
	for (size_t i = 0; i < p->nslots; i++)
		byrank[p->slots[i].name_rank] = (uint32_t)i;
	for (size_t j = 0; j < npools; j++) {
		p->pools[j].byname = egs_calloc(p->pools[j].n + 1, sizeof(uint32_t));
		p->pools[j].nholes = 0;
	}
	size_t *fill = egs_calloc(npools + 1, sizeof(*fill));
	for (size_t r = 0; r < p->nslots; r++) {
		struct pool *q = p->slots[byrank[r]].pool;
		p->slots[byrank[r]].name_pos = (uint32_t)fill[q->index];
		q->byname[fill[q->index]++] = byrank[r];
	}
	free(fill);
	for (size_t j = 0; j < npools; j++)
		seg_build(p, &p->pools[j]);
	free(byrank);
	free(where);
	free(order);
	free(pools);
	free(slot_pool);
}

static int cmp_node_name(const void *a, const void *b)
{
	const struct egs_node *x = *(struct egs_node *const *)a, *y = *(struct egs_node *const *)b;
	return strcmp(x->name, y->name);
}

/* Sets every node's name_rank (its place in name order among all nodes) unless the inventory is
 * as when they were set: sorting 10,000 names was a third of a run's set-up. */
static void rank_nodes(struct egs_state *st)
{
	if (st->name_rank_gen == st->inventory_gen && st->inventory_gen)
		return;
	struct egs_node **by = egs_calloc(st->nodes.len + 1, sizeof(*by));
	size_t n = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);)
		by[n++] = v;
	qsort(by, n, sizeof(*by), cmp_node_name);
	for (size_t i = 0; i < n; i++)
		by[i]->name_rank = (uint32_t)i;
	free(by);
	st->name_rank_gen = st->inventory_gen;
}

/* The slots' name_rank: their place in name order among the slots (ties of equal names keep
 * the order of the sort of all nodes). */
static void rank_names(struct egs_plan *p)
{
	rank_nodes(p->st);
	size_t total = p->st->nodes.len;
	uint32_t *at = egs_malloc((total + 1) * sizeof(*at)); /* node rank -> slot index + 1, 0 = none */
	memset(at, 0, (total + 1) * sizeof(*at));
	for (size_t i = 0; i < p->nslots; i++)
		at[p->slots[i].n->name_rank] = (uint32_t)i + 1;
	uint32_t r = 0;
	for (size_t k = 0; k < total; k++)
		if (at[k])
			p->slots[at[k] - 1].name_rank = r++;
	free(at);
}

static void share_slot_init(struct egs_plan *p, struct slot *s);

/* The scratch arrays of place(), once p->nslots and p->npools are known. */
static void scratch_alloc(struct egs_plan *p)
{
	size_t nholes = POOL_HOLES * p->npools;
	p->chosen = egs_calloc(p->nslots + 1, sizeof(*p->chosen));
	p->tmp = egs_calloc(p->nslots + 1, sizeof(*p->tmp));
	p->match = egs_calloc(p->nslots + 1, sizeof(*p->match));
	p->cand = egs_calloc(p->nslots + nholes + WS_HOLES + 4, sizeof(*p->cand));
	p->hsel = egs_calloc(nholes + 1, sizeof(*p->hsel));
	p->hok = egs_calloc(nholes + 1, sizeof(*p->hok));
	p->backfill = p->st->cfg.backfill > 0;
}

static void plan_init(struct egs_plan *p, struct egs_state *st, int64_t now)
{
	memset(p, 0, sizeof(*p));
	p->st = st;
	p->now = now;
	p->hole_end_min = INT64_MAX;
	p->serial = st->inventory_gen + 1; /* workspaces come and go only with inventory_gen */
	p->slots = egs_calloc(st->nodes.len + 1, sizeof(*p->slots));
	p->capws = 2 * (st->workspaces.len + st->active.len) + 16;
	p->wsv = egs_malloc(p->capws * sizeof(*p->wsv)); /* ws_get sets what it uses */
	egs_map_init(&p->ws);

	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (!egs_node_schedulable(st, n, now))
			continue;
		struct slot *s = &p->slots[p->nslots++];
		s->n = n;
		s->free_now = !n->gpr_id[0] && !n->attached_gpr[0];
		/* A free node counts as free since it became so: a fixed time, so the order of nodes
		 * does not change merely because time passes. */
		s->free_at = s->free_now && n->free_since < now ? n->free_since : now;
		struct egs_gpr *g = n->gpr_id[0] ? egs_state_gpr(st, n->gpr_id) : NULL;
		if (g && g->state == EGS_GPR_PROVISIONED)
			s->free_at = g->exit_at > now ? g->exit_at : now;
		else if (g && g->state == EGS_GPR_PROVISIONING) /* its window starts when attached: ~now */
			s->free_at = g->phase_since + g->exit_duration_s;
		int64_t held = egs_node_held(n, now); /* an early release not applied yet (core/held.h) */
		if (held) {
			s->free_at = held > s->free_at ? held : s->free_at;
			s->free_now = false;
		}
		share_slot_init(p, s);
		s->idle_now = s->free_now;
	}
	rank_names(p);
	build_pools(p);
	scratch_alloc(p);
	for (size_t i = 0; egs_map_next(&st->workspaces, &i, NULL, &v);)
		ws_get(p, ((const struct egs_workspace *)v)->name);
	p->nws_fixed = p->nws;
	for (size_t i = 0; i < st->active.len; i++) {
		struct egs_gpr *g = st->active.items[i];
		struct wsinfo *w = ws_get(p, g->workspace);
		int64_t until = egs_gpr_planned_end(g, now);
		if (until > w->until)
			w->until = until;
		w->active = true;
	}
	for (size_t i = 0; i < st->held.len; i++) {
		const struct egs_gpr *g = st->held.items[i];
		if (g->held_lifted || g->ghost || g->held_until <= now)
			continue; /* a ghost's workspace is reserved by the walk that places it */
		struct wsinfo *w = ws_get(p, g->workspace);
		if (g->held_until > w->until)
			w->until = g->held_until;
	}
}

static void snap_free(struct snap *s)
{
	free(s->free_at);
	free(s->free_now);
	free(s->heaps);
	free(s->heap_n);
	free(s->wsv);
	free(s->holes);
	free(s->nholes);
}

static void trial_free(struct trial *t);

static void plan_cleanup(struct egs_plan *p)
{
	if (p->trial)
		trial_free(p->trial);
	if (p->old)
		egs_plan_free(p->old);
	for (size_t i = 0; i < p->nslots; i++)
		if (p->slots[i].sh) {
			egs_share_timeline_cleanup(p->slots[i].sh);
			free(p->slots[i].sh);
		}
	for (size_t i = 0; i < p->npools; i++) {
		free(p->pools[i].heap);
		free(p->pools[i].holes);
		free(p->pools[i].byname);
		free(p->pools[i].seg);
	}
	free(p->pools);
	free(p->slots);
	free(p->chosen);
	free(p->tmp);
	free(p->match);
	free(p->cand);
	free(p->hsel);
	free(p->hok);
	free(p->wsv);
	egs_map_cleanup(&p->ws);
	for (size_t i = 0; i < p->nsnaps; i++)
		snap_free(&p->snaps[i]);
	free(p->snaps);
	free(p->order);
	free(p->started);
	memset(p, 0, sizeof(*p));
}

static void snap_take(struct egs_plan *p, size_t pos)
{
	if (p->nsnaps % 16 == 0)
		p->snaps = egs_realloc(p->snaps, (p->nsnaps + 16) * sizeof(*p->snaps));
	struct snap *s = &p->snaps[p->nsnaps++];
	s->pos = pos;
	s->run_next = p->run_next;
	s->stuck = p->stuck;
	s->hole_end_min = p->hole_end_min;
	s->free_at = egs_malloc((p->nslots + 1) * sizeof(*s->free_at));
	s->free_now = egs_malloc(p->nslots + 1);
	s->heaps = egs_malloc((p->nslots + 1) * sizeof(*s->heaps));
	s->heap_n = egs_malloc((p->npools + 1) * sizeof(*s->heap_n));
	for (size_t i = 0; i < p->nslots; i++) {
		s->free_at[i] = p->slots[i].free_at;
		s->free_now[i] = p->slots[i].free_now;
	}
	size_t k = 0;
	for (size_t j = 0; j < p->npools; j++) {
		s->heap_n[j] = p->pools[j].n;
		for (size_t h = 0; h < p->pools[j].n; h++)
			s->heaps[k++] = (uint32_t)(p->pools[j].heap[h] - p->slots);
	}
	s->holes = egs_malloc((POOL_HOLES * p->npools + 1) * sizeof(*s->holes));
	s->nholes = egs_malloc((p->npools + 1) * sizeof(*s->nholes));
	for (size_t j = 0; j < p->npools; j++) {
		s->nholes[j] = p->pools[j].nholes;
		memcpy(s->holes + j * POOL_HOLES, p->pools[j].holes, p->pools[j].nholes * sizeof(*s->holes));
	}
	s->nws = p->nws;
	s->wsv = egs_malloc((p->nws + 1) * sizeof(*s->wsv));
	memcpy(s->wsv, p->wsv, p->nws * sizeof(*s->wsv));
}

/* Makes q a copy of p as it stood at snapshot s (q is uninitialised; release with plan_cleanup). */
static void snap_restore(struct egs_plan *q, const struct egs_plan *p, const struct snap *s, int64_t now)
{
	memset(q, 0, sizeof(*q));
	q->st = p->st;
	q->now = now;
	q->hole_end_min = INT64_MAX;
	q->serial = p->serial; /* the snapshot's wsv starts with the same fixed entries */
	q->nws_fixed = p->nws_fixed;
	q->nslots = p->nslots;
	q->slots = egs_malloc((p->nslots + 1) * sizeof(*q->slots));
	memcpy(q->slots, p->slots, p->nslots * sizeof(*q->slots));
	q->npools = p->npools;
	q->pools = egs_calloc(p->npools + 1, sizeof(*q->pools));
	size_t k = 0;
	for (size_t j = 0; j < p->npools; j++) {
		struct pool *d = &q->pools[j];
		*d = p->pools[j];
		d->n = d->cap = s->heap_n[j];
		d->heap = egs_malloc((d->cap + 1) * sizeof(*d->heap));
		d->holes = egs_calloc(POOL_HOLES, sizeof(*d->holes));
		d->byname = egs_malloc((d->n + 1) * sizeof(*d->byname));
		memcpy(d->byname, p->pools[j].byname, d->n * sizeof(*d->byname));
		d->seg = NULL; /* rebuilt below from the restored slots */
		d->nholes = s->nholes[j];
		memcpy(d->holes, s->holes + j * POOL_HOLES, d->nholes * sizeof(*d->holes));
		for (size_t h = 0; h < d->n; h++) {
			struct slot *x = &q->slots[s->heaps[k++]];
			d->heap[h] = x;
			x->hidx = h;
		}
	}
	for (size_t i = 0; i < q->nslots; i++) {
		q->slots[i].free_at = s->free_at[i];
		q->slots[i].free_now = s->free_now[i];
		q->slots[i].pool = q->pools + (p->slots[i].pool - p->pools);
	}
	for (size_t j = 0; j < q->npools; j++)
		seg_build(q, &q->pools[j]);
	scratch_alloc(q);
	q->capws = 2 * s->nws + 16;
	q->nws = s->nws;
	q->wsv = egs_malloc(q->capws * sizeof(*q->wsv));
	memcpy(q->wsv, s->wsv, s->nws * sizeof(*q->wsv));
	egs_map_init(&q->ws);
	for (size_t i = 0; i < q->nws; i++)
		egs_map_put(&q->ws, q->wsv[i].name, &q->wsv[i]);
}

static void order_push(struct egs_plan *p, struct egs_gpr *g)
{
	if (p->norder == p->caporder) {
		p->caporder = p->caporder ? 2 * p->caporder : 64;
		p->order = egs_realloc(p->order, p->caporder * sizeof(*p->order));
	}
	p->order[p->norder++] = g;
}

static void started_push(struct egs_plan *p, size_t pos, struct egs_gpr *g)
{
	if (p->nstarted == p->capstarted) {
		p->capstarted = p->capstarted ? 2 * p->capstarted : 64;
		p->started = egs_realloc(p->started, p->capstarted * sizeof(*p->started));
	}
	p->started[p->nstarted++] = (struct started){ pos, g };
}

static size_t preferred_rank(const struct egs_gpr *g, const char *cluster)
{
	for (size_t i = 0; i < g->preferred_clusters.n; i++)
		if (strcmp(g->preferred_clusters.v[i], cluster) == 0)
			return i;
	return SIZE_MAX;
}

/* Takes the k first nodes, in plan order, of the pools listed in m[0..nm) (one cluster's matching
 * pools) into out; the heaps are left as they were.  Returns false when they hold fewer than k. */
static bool k_first(struct pool *const *m, size_t nm, size_t k, struct slot **out)
{
	size_t have = 0;
	for (size_t j = 0; j < nm; j++)
		have += m[j]->n;
	if (have < k)
		return false;
	if (k == 1) { /* the common case: the best heap top, nothing popped */
		struct pool *best = NULL;
		for (size_t j = 0; j < nm; j++)
			if (m[j]->n && (!best || slot_before(m[j]->heap[0], best->heap[0])))
				best = m[j];
		out[0] = best->heap[0];
		return true;
	}
	for (size_t got = 0; got < k; got++) {
		struct pool *best = NULL;
		for (size_t j = 0; j < nm; j++)
			if (m[j]->n && (!best || slot_before(m[j]->heap[0], best->heap[0])))
				best = m[j];
		out[got] = heap_pop(best);
	}
	for (size_t got = 0; got < k; got++)
		heap_push(out[got]->pool, out[got]);
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
static void share_slot_init(struct egs_plan *p, struct slot *s)
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
 * (POOL_HOLES) and in their workspace (WS_HOLES); one that finds no room is not recorded.
 */
static void hole_add(struct hole *v, size_t *n, size_t cap, int64_t s, int64_t e, uint32_t slot, struct egs_plan *p)
{
	if (e <= s || e <= p->now || *n == cap) /* empty, past, or no room: the time is not offered */
		return;
	v[(*n)++] = (struct hole){ s, e, slot };
	if (e < p->hole_end_min)
		p->hole_end_min = e;
}

/* Takes [t, end) out of the hole of v (of `slot`) that holds t, keeping what is left on each side. */
static void hole_take(struct hole *v, size_t *n, size_t cap, uint32_t slot, int64_t t, int64_t end, struct egs_plan *p)
{
	for (size_t i = 0; i < *n; i++) {
		if (v[i].slot != slot || v[i].s > t || t >= v[i].e)
			continue;
		struct hole h = v[i];
		v[i] = v[--*n];
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
 * tree finds them left to right in name order: O(log n) each.
 */
static size_t pool_tails(struct egs_plan *p, struct pool *q, int64_t t, size_t want, struct slot **out)
{
	size_t stack[2 * 64 + 2], ns = 0, got = 0;
	if (q->n && want)
		stack[ns++] = 1;
	while (ns && got < want) {
		size_t x = stack[--ns];
		if (q->seg[x] > t)
			continue; /* nobody under x is free by t */
		if (x >= q->segsz) {
			out[got++] = &p->slots[q->byname[x - q->segsz]];
			continue;
		}
		stack[ns++] = 2 * x + 1; /* the left child comes off first: name order */
		stack[ns++] = 2 * x;
	}
	return got;
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
 * The pools' holes long enough that start by T go to p->hok: no other can hold it. */
static size_t candidates(struct egs_plan *p, const struct wsinfo *w, struct pool *const *m, size_t nm, size_t k,
			 int64_t d, int64_t T)
{
	int64_t now = p->now, *c = p->cand;
	size_t nc = 0;
#define CAND(x)                                         \
	do {                                            \
		int64_t x_ = (x) < now ? now : (x);     \
		if (x_ < T)                             \
			c[nc++] = x_;                   \
	} while (0)
	CAND(now);
	CAND(w->until);
	for (size_t i = 0; i < k; i++)
		CAND(p->tmp[i]->free_at);
	for (size_t i = 0; i < w->nholes; i++)
		if (w->holes[i].e - (w->holes[i].s < now ? now : w->holes[i].s) >= d)
			CAND(w->holes[i].s);
	p->nhok = 0;
	for (size_t j = 0; j < nm; j++)
		for (size_t i = 0; i < m[j]->nholes; i++) {
			struct hole *h = &m[j]->holes[i];
			if (h->s <= T && h->e - (h->s < now ? now : h->s) >= d) {
				p->hok[p->nhok++] = h;
				CAND(h->s);
			}
		}
#undef CAND
	for (size_t i = 1; i < nc; i++) { /* a few dozen at most: insertion sort */
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
		    shape_matches(g, p->pools[j].proto))
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

/* Finds g's earliest start over the clusters it may use; on success returns the time and leaves
 * the chosen nodes in p->chosen[0 .. node_count).  w is g's workspace entry; cached (may be NULL)
 * is g's match_mask when the plan has at most 64 pools. */
static int64_t place(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, const uint64_t *cached)
{
	if (g->share_centi)
		return place_shared(p, g, w);
	const struct egs_workspace *ws = w->ws;
	int64_t best = EGS_NEVER;
	size_t best_rank = SIZE_MAX;
	size_t k = (size_t)g->node_count;
	struct pool **m = p->match;
	bool masked = p->npools <= 64;
	uint64_t mask = !masked ? 0 : (cached ? *cached : pools_matching(p, g)) & w->pool_ok;
	for (size_t a = 0; a < p->npools;) {
		size_t b = p->pools[a].group_end, nm = 0;
		if (masked) {
			for (size_t j = a; j < b; j++)
				if (mask >> j & 1)
					m[nm++] = &p->pools[j];
		} else if ((!g->cluster[0] || !strcmp(g->cluster, p->pools[a].proto->cluster)) &&
			   (!ws || egs_strlist_has(&ws->clusters, p->pools[a].proto->cluster))) {
			for (size_t j = a; j < b; j++)
				if (shape_matches(g, p->pools[j].proto))
					m[nm++] = &p->pools[j];
		}
		if (p->backfill)
			sort_pools(m, nm);
		if (nm && k_first(m, nm, k, p->tmp)) {
			int64_t t = p->tmp[k - 1]->free_at;
			if (t < w->until)
				t = w->until;
			if (t < p->now) /* a kept plan was built a moment ago */
				t = p->now;
			if (p->backfill)
				t = fit(p, w, m, nm, k, g->exit_duration_s, t);
			size_t rank = preferred_rank(g, p->pools[a].proto->cluster);
			if (t < best || (t == best && rank < best_rank)) {
				best = t;
				best_rank = rank;
				memcpy(p->chosen, p->tmp, k * sizeof(*p->chosen));
			}
		}
		a = b;
	}
	return best;
}

static void reserve(struct egs_plan *p, const struct egs_gpr *g, struct wsinfo *w, int64_t t)
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
		if (p->backfill)
			hole_add(s->pool->holes, &s->pool->nholes, POOL_HOLES, s->free_at, t, idx, p);
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
	if (!g->cluster[0])
		egs_strlcpy(g->cluster, p->chosen[0]->n->cluster, sizeof(g->cluster));
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
static void set_estimate(struct egs_gpr *g, int64_t t)
{
	int64_t est = t == EGS_NEVER ? 0 : t;
	if (g->est_start && est > g->est_start + 60)
		g->delayed_count++;
	g->est_start = est;
}

/* A free, schedulable node that can stand in for `failed` under g: same cluster, matches g, and
 * the same shape and instance type as the failed node when one such exists. */
static struct egs_node *replacement(struct egs_state *st, const struct egs_gpr *g, const struct egs_node *failed,
				    int64_t now)
{
	const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
	struct egs_node *best = NULL;
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (n->gpr_id[0] || n->attached_gpr[0] || egs_share_node_busy(n) || strcmp(n->cluster, failed->cluster) != 0 ||
		    !egs_node_schedulable(st, n, now) || !egs_node_matches(g, ws, n))
			continue;
		bool same = !strcmp(n->gpu_shape, failed->gpu_shape) && !strcmp(n->instance_type, failed->instance_type);
		if (!best || (same && (strcmp(best->gpu_shape, failed->gpu_shape) ||
				       strcmp(best->instance_type, failed->instance_type))) ||
		    (same == !strcmp(best->gpu_shape, failed->gpu_shape) && strcmp(n->name, best->name) < 0))
			best = n;
	}
	return best;
}

/*
 * Remediation: a node of a provisioned GPR that is no longer schedulable (Unhealthy after GPU
 * errors, or silent past the heartbeat timeout) is swapped for a healthy free matching node
 * (Warning NodeReplaced: the agent attaches the new node and detaches the old one when it can).
 * With no such node the GPR keeps the failed one and the rest, with one Warning NodeFailed, and
 * the swap is tried again whenever the plan runs.
 */
static void remediate(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (g->share_centi) {
		egs_share_remediate(st, g, now);
		return;
	}
	for (size_t i = 0; i < g->nodes.n; i++) {
		struct egs_node *n = egs_map_get(&st->nodes, g->nodes.v[i]);
		if (!n || egs_node_schedulable(st, n, now)) {
			if (n)
				n->failure_noted = 0;
			continue;
		}
		const char *why = n->health != EGS_HEALTH_HEALTHY ? egs_health_name(n->health) : "not heard from";
		struct egs_node *r = replacement(st, g, n, now);
		if (!r) {
			if (!n->failure_noted) {
				n->failure_noted = now;
				egs_state_event(st, now, "Warning", "NodeFailed", "GPR", g->id, g->workspace,
						"node %s of GPR %s is %s and no healthy free matching node can replace it; "
						"the GPR keeps its other %zu node(s)", n->name, g->name, why, g->nodes.n - 1);
			}
			continue;
		}
		if (!strcmp(n->gpr_id, g->id)) {
			n->gpr_id[0] = '\0';
			n->allocated_at = 0;
			egs_state_touch(st, EGS_KIND_NODE, n);
		}
		n->failure_noted = 0;
		egs_strlcpy(r->gpr_id, g->id, sizeof(r->gpr_id));
		r->allocated_at = now;
		egs_state_touch(st, EGS_KIND_NODE, r);
		free(g->nodes.v[i]);
		g->nodes.v[i] = egs_strdup(r->key);
		egs_state_touch(st, EGS_KIND_GPR, g);
		egs_state_event(st, now, "Warning", "NodeReplaced", "GPR", g->id, g->workspace,
				"node %s of GPR %s is %s; replaced by node %s", n->name, g->name, why, r->name);
	}
}

/* Idle timeout: a warning when the GPUs of g have been idle for half its idle timeout (at most
 * 10 minutes before the end), then the release.  Returns the next time it needs a look. */
static int64_t idle_check(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	if (!(g->flags & EGS_GPRF_ENFORCE_IDLE) || !g->idle_timeout_s || !g->idle_since)
		return EGS_NEVER;
	int64_t release_at = g->idle_since + g->idle_timeout_s;
	int64_t lead = g->idle_timeout_s / 2 < 600 ? g->idle_timeout_s / 2 : 600;
	int64_t warn_at = release_at - lead;
	if (now >= release_at) {
		egs_state_event(st, now, "Warning", "IdleTimeout", "GPR", g->id, g->workspace,
				"GPUs of GPR %s stayed under 1%% utilisation for %llds: releasing", g->name,
				(long long)(now - g->idle_since));
		egs_gpr_release(st, g, now);
		return EGS_NEVER;
	}
	if (now >= warn_at && !(g->marks_sent & EGS_MARK_IDLE_WARNED)) {
		g->marks_sent |= EGS_MARK_IDLE_WARNED;
		egs_state_touch(st, EGS_KIND_GPR, g);
		egs_state_event(st, now, "Warning", "IdleWarning", "GPR", g->id, g->workspace,
				"GPUs of GPR %s are idle; it will be released in %llds unless they get busy", g->name,
				(long long)(release_at - now));
	}
	return now >= warn_at ? release_at : warn_at;
}

static int64_t due_transitions(struct egs_state *st, int64_t now)
{
	int64_t next = EGS_NEVER;
	/* Copy: transitions edit st->active. */
	size_t n = st->active.len;
	struct egs_gpr **act = egs_malloc((n + 1) * sizeof(*act));
	if (n)
		memcpy(act, st->active.items, n * sizeof(*act));
	for (size_t i = 0; i < n; i++) {
		struct egs_gpr *g = act[i];
		if (g->state == EGS_GPR_PROVISIONED) {
			remediate(st, g, now);
			int64_t idle = idle_check(st, g, now);
			if (g->state != EGS_GPR_PROVISIONED)
				continue;
			if (idle < next)
				next = idle;
			for (unsigned q = 1; q <= 3; q++) {
				int64_t mark = g->start_ts + g->exit_duration_s * q / 4;
				if (g->marks_sent & (1u << q))
					continue;
				if (now >= mark && now < g->exit_at) {
					g->marks_sent |= 1u << q;
					egs_state_touch(st, EGS_KIND_GPR, g);
					egs_state_event(st, now, "Normal", q == 1 ? "Progress25" : q == 2 ? "Progress50" : "Progress75",
							"GPR", g->id, g->workspace, "GPR %s has used %u%% of its window", g->name,
							q * 25);
				} else if (mark > now && mark < next) {
					next = mark;
				}
			}
			if (now >= g->exit_at)
				egs_gpr_expire(st, g, now);
			else if (g->exit_at < next)
				next = g->exit_at;
		} else if (g->state == EGS_GPR_PROVISIONING) {
			int64_t deadline = g->phase_since + st->cfg.provision_timeout_s;
			if (now >= deadline)
				egs_gpr_fail_attempt(st, g, "timed out waiting for the cluster agent to attach the nodes", now);
			else if (deadline < next)
				next = deadline;
		}
	}
	free(act);
	return next;
}

/* Places g in plan p (in queue order after every GPR placed so far): provisions it when it can start
 * now, else records its estimate and reserves its nodes.  Returns its start (EGS_NEVER if none). */
static int64_t place_dry(struct egs_plan *p, struct egs_gpr *g);

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

static int64_t plan_one(struct egs_plan *p, struct egs_gpr *g)
{
	p->last = g;
	if (g->state != EGS_GPR_QUEUED) /* left the queue during a walk in slices: keeps its place in it */
		return place_dry(p, g);
	struct wsinfo *w = ws_of(p, g);
	uint64_t mask = p->npools <= 64 ? match_mask(p, g) : 0;
	int64_t t = place(p, g, w, &mask);
	if (t == EGS_NEVER) {
		set_estimate(g, t);
		return t;
	}
	if (can_start_now(p, g, w, t) && still_free(p, g, w)) {
		start(p, g, w);
		reserve(p, g, w, p->now);
		return p->now;
	}
	set_estimate(g, t);
	reserve(p, g, w, t);
	return t;
}

struct egs_plan *egs_plan_new(void)
{
	return egs_calloc(1, sizeof(struct egs_plan));
}

void egs_plan_free(struct egs_plan *p)
{
	if (!p)
		return;
	plan_cleanup(p);
	free(p);
}

/* The order of a walk (caller frees): the queue's, with the ghosts that are not lifted
 * (core/held.h) merged in at the places they had; *n receives its length. */
static struct egs_gpr **plan_order(struct egs_state *st, size_t *n)
{
	size_t nq = egs_queue_len(&st->queue), ng = 0;
	struct egs_gpr **out = egs_malloc((nq + st->held.len + 1) * sizeof(*out));
	struct egs_gpr **ghosts = egs_malloc((st->held.len + 1) * sizeof(*ghosts));
	for (size_t i = 0; i < st->held.len; i++) {
		struct egs_gpr *g = st->held.items[i];
		if (g->ghost && !g->held_lifted)
			ghosts[ng++] = g;
	}
	qsort(ghosts, ng, sizeof(*ghosts), egs_queue_cmp);
	egs_queue_sorted(&st->queue, out);
	for (size_t w = nq + ng, q = nq, k = ng; k > 0;) /* merge from the back, in place */
		out[--w] = q > 0 && egs_queue_before(ghosts[k - 1], out[q - 1]) ? out[--q] : ghosts[--k];
	free(ghosts);
	*n = nq + ng;
	return out;
}

/* A ghost's turn in a walk: it reserves what it would get and starts nothing.  In the real walk
 * (real), a ghost whose start has come becomes a hold of the nodes it was planned on until its
 * planned end.  Returns its start (EGS_NEVER when none). */
static int64_t ghost_one(struct egs_plan *p, struct egs_gpr *g, bool real)
{
	int64_t t = place_dry(p, g);
	p->last = g; /* egs_sched_append: a GPR that ranks before a ghost needs a full walk */
	if (!real || t == EGS_NEVER || t > p->now || !g->ghost || g->held_lifted)
		return t;
	size_t k = (size_t)g->node_count;
	const char **keys = egs_malloc(k * sizeof(*keys));
	for (size_t i = 0; i < k; i++)
		keys[i] = p->chosen[i]->n->key;
	egs_held_ghost_start(p->st, g, keys, k, t + g->exit_duration_s);
	free(keys);
	return t;
}

/* Sets up in p (zeroed) a walk over the queue at now (see egs_sched_run): the plan's first state
 * and the walk's order; base_next is the due transitions' next time.  Kept (keep) walks take
 * snapshots and stay in p as the kept plan when they end. */
/* The earliest of base and the times at which a node of p goes stale (unheard from). */
static int64_t stale_next(const struct egs_plan *p, int64_t base)
{
	for (size_t i = 0; i < p->nslots; i++) {
		int64_t stale = p->slots[i].n->last_heartbeat + p->st->cfg.heartbeat_timeout_s + 1;
		if (stale < base)
			base = stale;
	}
	return base;
}

static void walk_begin(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next, bool keep)
{
	plan_init(p, st, now);
	p->keep = keep;
	p->base_next = base_next;
	p->run_next = stale_next(p, base_next);
	p->walking = true; /* the order comes with the first step (plan_order is O(queue)) */
	p->gen_seen = st->generation;
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
}

/* Empties p for a new walk; its content goes to p->old, which the walk's next step frees. */
static void plan_retire(struct egs_plan *p)
{
	if (!p->nslots && !p->norder && !p->trial && !p->old) { /* nothing to free */
		plan_cleanup(p);
		return;
	}
	struct egs_plan *old = egs_malloc(sizeof(*old));
	*old = *p;
	memset(p, 0, sizeof(*p));
	p->old = old;
}

/* walk_begin, made by the walk's next step (after p->old is freed): p (retired) holds only what
 * the walk needs to begin, and the generations it must see as changes since. */
static void walk_defer(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next, bool keep)
{
	p->st = st;
	p->now = now;
	p->base_next = base_next;
	p->keep = keep;
	p->walking = p->deferred = true;
	p->gen_seen = st->generation;
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
}

/* The first step of a walk resumed at order[from] (walk_resume): the queue's order after the
 * GPRs kept, order[0 .. from). */
static void splice_order(struct egs_plan *p)
{
	size_t n, lo = 0, hi;
	struct egs_gpr **all = plan_order(p->st, &n);
	const struct egs_gpr *last = p->order[p->from - 1];
	for (hi = n; lo < hi;) { /* the first that goes after last */
		size_t mid = lo + (hi - lo) / 2;
		if (egs_queue_before(last, all[mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	p->norder = p->from + (n - lo);
	if (p->norder + 1 > p->caporder) {
		p->caporder = p->norder + 1;
		p->order = egs_realloc(p->order, p->caporder * sizeof(*p->order));
	}
	memcpy(p->order + p->from, all + lo, (n - lo) * sizeof(*all));
	free(all);
	p->splice = false;
}

static void trial_step(struct egs_plan *p, size_t max);

/* Places at most max more GPRs of p's walk; returns true when the walk is complete. */
static bool walk_step(struct egs_plan *p, size_t max)
{
	struct egs_state *st = p->st;
	if (p->trial) { /* held releases' trials first (their last step begins the walk) */
		trial_step(p, max);
		return false;
	}
	if (p->old) { /* the plan replaced: freeing its snapshots and order is a piece of its own */
		egs_plan_free(p->old);
		p->old = NULL;
		if (max < SIZE_MAX)
			return false;
	}
	if (p->deferred) { /* the walk's first state, a piece of its own */
		uint64_t gen = p->gen_seen, arr = p->arr_seen, hold = p->hold_seen;
		bool void_ = p->trial_void;
		walk_begin(p, st, p->now, p->base_next, p->keep);
		p->gen_seen = gen; /* what changed since the run began makes it stale */
		p->arr_seen = arr;
		p->hold_seen = hold;
		p->trial_void = void_;
		if (max < SIZE_MAX)
			return false;
	}
	if (st->generation != p->gen_seen) {
		p->stale = true; /* requests changed the state between two slices */
		if (st->generation - p->gen_seen != st->arrivals.bumps - p->arr_seen)
			p->foreign = true; /* not only creates: the next run walks afresh */
	}
	if (!p->order || p->splice) { /* the first step: the queue as it stands now */
		if (p->splice) {
			splice_order(p);
		} else {
			p->order = plan_order(st, &p->norder);
			p->caporder = p->norder + 1;
		}
		if (max < SIZE_MAX) {
			p->gen_seen = st->generation;
			p->arr_seen = st->arrivals.bumps;
			p->hold_seen = st->arrivals.hold_bumps;
			return false;
		}
	}
	size_t end = p->norder - p->cursor > max ? p->cursor + max : p->norder;
	for (size_t i = p->cursor; i < end; i++) {
		struct egs_gpr *g = p->order[i];
		if (p->keep && i % (st->cfg.plan_snap_every ? st->cfg.plan_snap_every : SNAP_EVERY) == 0)
			snap_take(p, i);
		int64_t t = g->ghost ? ghost_one(p, g, true) : plan_one(p, g);
		/* A GPR started just now is due again at its provisioning time-out. */
		if (g->state == EGS_GPR_PROVISIONING && t == p->now) {
			t = p->now + st->cfg.provision_timeout_s;
			if (p->keep)
				started_push(p, i, g);
		} else if (t == p->now) {
			p->stuck = true;
		}
		if (t != EGS_NEVER && t > p->now && t < p->run_next)
			p->run_next = t;
	}
	p->cursor = end;
	p->gen_seen = st->generation;
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
	if (end < p->norder)
		return false;
	p->walking = false;
	p->valid = p->keep;
	return true;
}

static bool dry_walk(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order, const int64_t *base);

/* Held releases tried one by one per run, after all of them at once failed: each try is a walk. */
#define HELD_TRIES 2

/* After a restart: true (and the wait is over for good) once every node has reported since the start
 * or the settle time has come. */
static bool held_settled(struct egs_state *st, int64_t now)
{
	void *v;
	if (now < st->held_settle)
		for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);)
			if (!((const struct egs_node *)v)->last_heartbeat)
				return false;
	st->held_settle = 0;
	return true;
}

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
	int phase; /* what the next step does: 0 base's plan, 1 lift's, 2 the order, 3 walk */
	struct egs_gpr **tried; /* the holds lifted: every one, or the first alone */
	size_t ntried;
	bool all;
	bool kept_base; /* the base is the kept plan's estimates (held_kept_base): no base walk */
	size_t tries, nheld; /* one-at-a-time tries made, and the holds there were before them */
	uint64_t gen;        /* st->generation when the trial began */
};

static void trial_free(struct trial *t)
{
	plan_cleanup(&t->base);
	plan_cleanup(&t->lift);
	free(t->order);
	free(t->tried);
	free(t);
}

/* The place of hold g in st->held, SIZE_MAX when it is not there. */
static size_t held_index(const struct egs_state *st, const struct egs_gpr *g)
{
	for (size_t i = 0; i < st->held.len; i++)
		if (st->held.items[i] == g)
			return i;
	return SIZE_MAX;
}

/* The checks before any trial: expires holds whose time has come, drops them all when nobody
 * waits; true when there are holds to try (something changed since the last tries). */
static bool held_pending(struct egs_state *st, int64_t now)
{
	egs_held_expire(st, now);
	if (st->held_settle && !held_settled(st, now))
		return false; /* just restarted: the walks would compare nodes not heard from yet (core/held.h) */
	if (st->held.len && st->generation == st->held_gen)
		return false; /* nothing changed since the last try: the same walks would give the same answer */
	if (!st->held.len || !egs_queue_len(&st->queue)) {
		while (st->held.len) /* nobody waits: nobody can be delayed */
			egs_held_drop(st, 0);
		return false;
	}
	return true;
}

/*
 * True when the kept plan p is the walk with the holds at now: the only changes since it was made
 * are early releases and cancels that left a hold (state.h: arrivals.hold_bumps), which the walk
 * sees as before them, and time has not moved past anything it depends on (as for walk_resume).
 * Then the first trial compares the walk with the holds lifted against the estimates p gave every
 * queued GPR, and walks once instead of twice.
 */
static bool held_kept_base(const struct egs_plan *p, const struct egs_state *st, int64_t now)
{
	return p->valid && !p->walking && !p->stale && !p->foreign && !p->shared && p->st == st &&
	       !st->arrivals.any && st->arrivals.bumps == p->arr_seen &&
	       st->generation - p->gen_seen == st->arrivals.hold_bumps - p->hold_seen && now >= p->now &&
	       now < p->run_next && (now == p->now || (!p->stuck && p->hole_end_min > now));
}

/* Sets up the next trial in p->trial: all holds lifted, or the first one alone. */
static void trial_begin(struct egs_plan *p, bool all)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	plan_cleanup(&t->base);
	plan_cleanup(&t->lift);
	free(t->order);
	t->order = NULL;
	t->n = t->cursor = 0;
	t->phase = 0;
	t->all = all;
	t->kept_base = false;
	t->tried = egs_realloc(t->tried, (st->held.len + 1) * sizeof(*t->tried));
	t->ntried = all ? st->held.len : 1;
	memcpy(t->tried, st->held.items, t->ntried * sizeof(*t->tried));
	t->gen = st->generation;
}

/* The real walk, after the trials (void: a change came during one). */
static void trial_end(struct egs_plan *p, bool void_)
{
	struct egs_state *st = p->st;
	int64_t now = p->now, next = p->base_next;
	bool keep = p->keep;
	plan_retire(p); /* the trials' plans: freed by the next step */
	walk_defer(p, st, now, next, keep);
	p->trial_void = void_;
}

/* A trial has walked to its end or to the first GPR it starts later (later): applies it and
 * begins the next trial, or the real walk. */
static void trial_done(struct egs_plan *p, bool later)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	if (!later) {
		for (size_t i = 0; i < t->ntried; i++) {
			size_t k = held_index(st, t->tried[i]);
			if (k != SIZE_MAX)
				egs_held_drop(st, k);
		}
	} else if (!t->all) {
		egs_held_rotate(st); /* the next run tries the others first */
	}
	if (t->all) { /* one at a time; with a single hold its own try would repeat this one */
		t->tries = 0;
		t->nheld = st->held.len;
	} else {
		t->tries++;
	}
	if (t->nheld > 1 && t->tries < HELD_TRIES && t->tries < t->nheld && st->held.len)
		trial_begin(p, false);
	else
		trial_end(p, false);
}

/* Lifts (on: false) or restores the holds the trial tries. */
static void trial_set(struct trial *t, struct egs_state *st, bool on)
{
	for (size_t i = 0; i < t->ntried; i++)
		egs_held_set(st, held_index(st, t->tried[i]), on);
}

/* One step of the trial in progress: a plan, the order, or at most max GPRs walked side by side. */
static void trial_step(struct egs_plan *p, size_t max)
{
	struct trial *t = p->trial;
	struct egs_state *st = p->st;
	if (st->generation != t->gen) {
		trial_end(p, true);
		return;
	}
	if (p->old) {
		egs_plan_free(p->old);
		p->old = NULL;
		if (max < SIZE_MAX)
			return;
	}
	for (; t->phase < 3; t->phase++) { /* the set-up, a piece a step when sliced */
		if (t->phase == 0) {
			if (!t->kept_base)
				plan_init(&t->base, st, p->now);
		} else if (t->phase == 1) {
			trial_set(t, st, false);
			plan_init(&t->lift, st, p->now);
			trial_set(t, st, true);
		} else {
			t->order = plan_order(st, &t->n);
		}
		if (max < SIZE_MAX) {
			t->phase++;
			return;
		}
	}
	size_t end = t->n - t->cursor > max ? t->cursor + max : t->n;
	bool later = false;
	for (; t->cursor < end && !later; t->cursor++) {
		struct egs_gpr *g = t->order[t->cursor];
		int64_t tb = t->kept_base ? (g->est_start ? g->est_start : EGS_NEVER) : EGS_NEVER;
		if (!t->kept_base)
			tb = place_dry(&t->base, g);
		if (g->ghost) { /* reserves, is not compared; out of lift's order when it is lifted */
			if (!t->all && g != t->tried[0])
				place_dry(&t->lift, g);
			continue;
		}
		later = place_dry(&t->lift, g) > tb;
	}
	if (later || t->cursor == t->n)
		trial_done(p, later);
}

static bool started_nodes(struct egs_plan *p, const struct egs_gpr *g);

/* The first position of p's order that does not go before the first of st's arrivals. */
static size_t arrival_pos(const struct egs_plan *p, const struct egs_state *st)
{
	size_t lo = 0, hi = p->norder;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct egs_gpr *g = p->order[mid];
		bool before = g->priority != st->arrivals.priority ? g->priority > st->arrivals.priority
			      : g->fair != st->arrivals.fair      ? g->fair < st->arrivals.fair
								  : g->seq < st->arrivals.seq;
		if (before)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Incremental planning.  When the only changes since the kept plan p was made are creates (queued,
 * not shared), nothing before the first of them in queue order can change: that part of the walk
 * would place the same GPRs on the same state.  So p is rebuilt from its last snapshot before
 * that place (as a wait-time query does: the GPRs the walk started after the snapshot hold their
 * nodes from their start) and the walk goes on from there over the queue as it is now.  Also
 * required: p still holds at now (no due time has come; if a GPR was placed at p's now without
 * starting, now is p's now), no held releases (their trial walks compare whole walks), no share
 * timelines.  Returns false (p untouched) when p cannot serve; tests/unit/test_sched_incr.c
 * checks that the result equals a full walk's.
 */
static bool walk_resume(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next)
{
	if (!p->valid || p->walking || p->st != st || p->shared || p->foreign || !st->arrivals.any ||
	    st->held.len || now < p->now || p->serial != st->inventory_gen + 1 ||
	    st->generation - p->gen_seen != st->arrivals.bumps - p->arr_seen)
		return false;
	size_t lo = arrival_pos(p, st), si = p->nsnaps, nst = 0;
	while (si > 0 && p->snaps[si - 1].pos > lo)
		si--;
	if (si == 0 || p->snaps[si - 1].pos == 0)
		return false; /* the first change comes before the first snapshot worth having */
	const struct snap *s = &p->snaps[si - 1];
	/* Something before it is due now, or was placed at p's now; or a hole it recorded is past
	 * now: a walk at now would not have recorded it, and holes are bounded (it took room). */
	if (now >= s->run_next || (now != p->now && (s->stuck || s->hole_end_min <= now)))
		return false;
	for (; nst < p->nstarted && p->started[nst].pos < s->pos; nst++)
		;
	for (size_t j = nst; j < p->nstarted; j++)
		if (p->started[j].g->state != EGS_GPR_PROVISIONING)
			return false;
	struct egs_plan q;
	snap_restore(&q, p, s, now);
	for (size_t j = nst; j < p->nstarted; j++) { /* as a full walk sees them: provisioning */
		const struct egs_gpr *g = p->started[j].g;
		struct wsinfo *w = ws_get(&q, g->workspace);
		if (g->share_centi || !started_nodes(&q, g)) {
			plan_cleanup(&q);
			return false;
		}
		reserve(&q, g, w, g->phase_since);
		w->active = true;
		p->started[j].pos = s->pos; /* carried: for a snapshot up to s, it started after it */
	}
	q.layout = p->layout;
	q.keep = true;
	q.walking = q.splice = true;
	q.from = q.cursor = q.norder = s->pos;
	q.order = p->order; /* the GPRs before s->pos keep their places and estimates */
	q.caporder = p->caporder;
	q.last = q.order[s->pos - 1];
	q.started = p->started;
	q.nstarted = p->nstarted;
	q.capstarted = p->capstarted;
	for (size_t i = si; i < p->nsnaps; i++)
		snap_free(&p->snaps[i]);
	q.snaps = p->snaps;
	q.nsnaps = si;
	q.stuck = s->stuck;
	q.hole_end_min = s->hole_end_min;
	q.base_next = base_next;
	q.run_next = stale_next(&q, base_next < s->run_next ? base_next : s->run_next);
	q.gen_seen = st->generation;
	q.arr_seen = st->arrivals.bumps;
	q.hold_seen = st->arrivals.hold_bumps;
	p->order = NULL;
	p->started = NULL;
	p->snaps = NULL;
	p->nsnaps = 0;
	struct egs_plan *old = egs_malloc(sizeof(*old));
	*old = *p; /* what q did not take: freed by the walk's next step */
	*p = q;
	p->old = old;
	return true;
}

/* egs_sched_begin for a plan kept (keep) or not: a walk resumed from the kept plan p when only
 * creates came since it was made (walk_resume), else a full one. */
static void run_begin(struct egs_state *st, int64_t now, struct egs_plan *p, bool keep)
{
	int64_t next = due_transitions(st, now);
	if (held_pending(st, now)) { /* the trials come first, in the run's steps */
		bool kept_base = keep && held_kept_base(p, st, now);
		plan_retire(p);
		p->st = st;
		p->now = now;
		p->keep = keep;
		p->base_next = next;
		p->walking = true;
		p->trial = egs_calloc(1, sizeof(*p->trial));
		trial_begin(p, true);
		p->trial->kept_base = kept_base;
	} else if (!keep || !walk_resume(p, st, now, next)) {
		plan_retire(p);
		walk_defer(p, st, now, next, keep);
	}
	st->arrivals.any = false; /* the walk takes them (and those that come before its first step) */
}

/* egs_sched_end for a plan kept or not. */
static bool run_end(struct egs_plan *p, int64_t *next)
{
	EGS_ASSERT(!p->walking);
	struct egs_state *st = p->st;
	/* A high-priority request that could not start may evict its way in; the freed nodes go to it
	 * in a fresh walk (it comes first in queue order). */
	if (!p->stale && egs_preempt(st, p->now)) {
		int64_t now = p->now, base = p->base_next;
		bool keep = p->keep;
		plan_cleanup(p);
		walk_begin(p, st, now, base, keep);
		return false;
	}
	if (!p->stale && !p->trial_void && st->generation == p->gen_seen)
		st->held_gen = st->generation;
	*next = p->run_next;
	return true;
}

int64_t egs_sched_run(struct egs_state *st, int64_t now, struct egs_plan *keep)
{
	struct egs_plan local = { 0 }, *p = keep ? keep : &local;
	run_begin(st, now, p, keep != NULL);
	int64_t next;
	do
		while (!walk_step(p, SIZE_MAX)) /* the trials of held releases, then the walk */
			;
	while (!run_end(p, &next));
	if (!keep)
		plan_cleanup(&local);
	return next;
}

void egs_sched_begin(struct egs_state *st, int64_t now, struct egs_plan *keep)
{
	run_begin(st, now, keep, true);
}

bool egs_sched_step(struct egs_plan *p, size_t max)
{
	return !p->walking || walk_step(p, max ? max : 1);
}

bool egs_sched_end(struct egs_plan *p, int64_t *next)
{
	return run_end(p, next);
}

size_t egs_sched_progress(const struct egs_plan *p)
{
	return p->trial ? p->trial->cursor : p->cursor;
}

size_t egs_sched_from(const struct egs_plan *p)
{
	return p->from;
}

bool egs_sched_walking(const struct egs_plan *p)
{
	return p && p->walking;
}

bool egs_sched_stale(const struct egs_plan *p)
{
	return p->stale || p->st->generation != p->gen_seen;
}

void egs_sched_abort(struct egs_plan *p)
{
	if (p && p->walking)
		plan_cleanup(p);
}

int64_t egs_sched_append(struct egs_state *st, struct egs_gpr *g, int64_t now, struct egs_plan *p)
{
	if (!p || !p->valid || p->walking || p->st != st || now < p->now || g->share_centi ||
	    (p->last && !egs_queue_before(p->last, g)) || g->state != EGS_GPR_QUEUED ||
	    g->priority >= EGS_PRIORITY_HIGH) /* it may preempt: egs_sched_run decides */
		return EGS_NEVER - 1;
	/* Only creates since the plan was made (g among them): a later run may resume from it. */
	bool arrivals_only = st->generation - p->gen_seen == st->arrivals.bumps - p->arr_seen;
	p->now = now;
	order_push(p, g);
	int64_t t = plan_one(p, g);
	if (g->state == EGS_GPR_PROVISIONING)
		started_push(p, p->norder - 1, g);
	else if (t == now)
		p->stuck = true;
	else if (t != EGS_NEVER && t < p->run_next)
		p->run_next = t;
	p->foreign |= !arrivals_only;
	p->gen_seen = st->generation; /* g's own start, if it started, is the plan's doing */
	p->arr_seen = st->arrivals.bumps;
	p->hold_seen = st->arrivals.hold_bumps;
	st->arrivals.any = false; /* the plan holds g */
	return t;
}

void egs_plan_invalidate(struct egs_plan *p)
{
	if (p)
		p->valid = false;
}

/* Places g in p and reserves what it gets, starting nothing (the side-effect-free walks);
 * returns its start (EGS_NEVER when none). */
static int64_t place_dry(struct egs_plan *p, struct egs_gpr *g)
{
	struct wsinfo *w = ws_of(p, g);
	uint64_t mask = p->npools <= 64 ? match_mask(p, g) : 0;
	int64_t t = place(p, g, w, &mask);
	if (t != EGS_NEVER)
		reserve(p, g, w, t);
	return t;
}

/* True when queued GPR q goes before a hypothetical GPR of priority prio and fair key fair: it
 * would be the newest of its priority and key. */
static bool before_probe(const struct egs_gpr *q, int prio, double fair)
{
	return q->priority > prio || (q->priority == prio && q->fair <= fair);
}

/* Places each probe on plan b (which stands right before where they go) without reserving. */
static void place_probes(struct egs_plan *b, const struct egs_gpr *const *probes, size_t n, int64_t now,
			 int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	for (size_t j = 0; j < n; j++) {
		int64_t t = place(b, probes[j], ws_get(b, probes[j]->workspace), NULL);
		if (t != EGS_NEVER && t < now)
			t = now;
		out[j] = t;
		if (clusters)
			egs_strlcpy(clusters[j], t != EGS_NEVER ? b->chosen[0]->n->cluster : "", EGS_NAME_MAX);
	}
}

/* Puts the slots of the nodes g holds into p->chosen; false when one is not in the plan. */
static bool started_nodes(struct egs_plan *p, const struct egs_gpr *g)
{
	if ((size_t)g->node_count != g->nodes.n)
		return false;
	for (size_t i = 0; i < g->nodes.n; i++) {
		const struct egs_node *n = egs_map_get(&p->st->nodes, g->nodes.v[i]);
		p->chosen[i] = NULL;
		for (size_t j = 0; n && j < p->nslots && !p->chosen[i]; j++)
			if (p->slots[j].n == n)
				p->chosen[i] = &p->slots[j];
		if (!p->chosen[i])
			return false;
	}
	return true;
}

/* The fast path: positions a plan from the kept one (its last snapshot before the probes' place,
 * then at most SNAP_EVERY GPRs replayed); false when the kept plan cannot serve. */
static bool estimate_kept(struct egs_plan *kept, const struct egs_gpr *const *probes, size_t n, int64_t now,
			  double fair, int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	if (!kept || !kept->valid || now < kept->now || kept->shared)
		return false; /* snapshots keep no share timelines: a fresh walk answers */
	for (size_t j = 0; j < n; j++)
		if (probes[j]->share_centi)
			return false;
	int prio = probes[0]->priority;
	size_t lo = 0, hi = kept->norder; /* the first entry that does not go before the probes */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (before_probe(kept->order[mid], prio, fair))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == kept->norder) { /* they go last: the kept plan stands right there */
		place_probes(kept, probes, n, now, out, clusters);
		return true;
	}
	const struct snap *s = NULL;
	for (size_t i = 0; i < kept->nsnaps && kept->snaps[i].pos <= lo; i++)
		s = &kept->snaps[i];
	if (!s)
		return false;
	struct egs_plan q;
	snap_restore(&q, kept, s, now);
	/* The GPRs the walk started after the snapshot, wherever they stand in the queue, hold their
	 * own nodes from when they started: a full plan now sees them provisioning since then, before
	 * it places anyone. */
	for (size_t j = 0; j < kept->nstarted; j++) {
		if (kept->started[j].pos < s->pos)
			continue;
		const struct egs_gpr *g = kept->started[j].g;
		if (g->state != EGS_GPR_PROVISIONING)
			continue;
		if (!started_nodes(&q, g)) {
			plan_cleanup(&q);
			return false;
		}
		reserve(&q, g, ws_get(&q, g->workspace), g->phase_since);
	}
	for (size_t i = s->pos; i < lo; i++) {
		struct egs_gpr *g = kept->order[i];
		if (g->state != EGS_GPR_PROVISIONING)
			place_dry(&q, g);
	}
	place_probes(&q, probes, n, now, out, clusters);
	plan_cleanup(&q);
	return true;
}

void egs_sched_estimates(struct egs_state *st, const struct egs_gpr *const *probes, size_t n, int64_t now,
			 struct egs_plan *kept, int64_t *out, char (*clusters)[EGS_NAME_MAX])
{
	if (!n)
		return;
	double fair = egs_fair_key(st, probes[0]->workspace);
	if (kept && kept->st == st && estimate_kept(kept, probes, n, now, fair, out, clusters))
		return;
	struct egs_plan p;
	plan_init(&p, st, now);
	size_t nq;
	struct egs_gpr **order = plan_order(st, &nq);
	for (size_t i = 0; i < nq && before_probe(order[i], probes[0]->priority, fair); i++)
		place_dry(&p, order[i]);
	free(order);
	place_probes(&p, probes, n, now, out, clusters);
	plan_cleanup(&p);
}

int64_t egs_sched_estimate(struct egs_state *st, const struct egs_gpr *g, int64_t now, char *cluster_out)
{
	int64_t t;
	char cl[1][EGS_NAME_MAX];
	egs_sched_estimates(st, &g, 1, now, NULL, &t, cl);
	if (cluster_out && t != EGS_NEVER)
		egs_strlcpy(cluster_out, cl[0], EGS_NAME_MAX);
	return t;
}

/* egs_sched_dry_starts, stopping at the first GPR that starts later than in base (when base is not
 * NULL); returns true when one does (out is then filled only up to it). */
static bool dry_walk(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order, const int64_t *base)
{
	struct egs_plan p;
	plan_init(&p, st, now);
	size_t n;
	struct egs_gpr **o = plan_order(st, &n);
	bool later = false;
	for (size_t i = 0, k = 0; i < n && !later; i++) {
		int64_t t = place_dry(&p, o[i]); /* ghosts too: they reserve, and are not reported */
		if (o[i]->ghost)
			continue;
		if (order)
			order[k] = o[i];
		out[k] = t;
		later = base && out[k] > base[k];
		k++;
	}
	free(o);
	plan_cleanup(&p);
	return later;
}

void egs_sched_dry_starts(struct egs_state *st, int64_t now, int64_t *out, struct egs_gpr **order)
{
	dry_walk(st, now, out, order, NULL);
}
