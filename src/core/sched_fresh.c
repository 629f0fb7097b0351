/*
 * sched_fresh.c: the pools of a walk's first state (part 1 of egs__plan_init_part), made in
 * bounded pieces (egs__plan_pools_piece) so that a run in slices never holds the loop for all of
 * it.  Kept pools (st->plan_pools) are taken in one piece while the inventory stays; made afresh
 * (a node registered, a workspace came, a node's health changed) the pieces are: the nodes' name
 * order, a merge sort over every node that goes on from where the last piece stopped (sorting
 * 10,000 names in one go was 3 ms of a 6 ms piece); the slots' pools, hashed on their attributes;
 * then the pools' order, heaps, name orders and segment trees, kept for the next first state.
 */
#include "core/msort.h"
#include "core/sched_int.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element moves of the name sort a piece makes: about 0.5 ms of strcmp at 10,000 nodes. */
#define SORT_PIECE 16384
/* Slots a piece hashes into pools (cfg.plan_slots_piece in tests). */
#define HASH_PIECE 4096

/* A fresh build in progress between pieces (owned by its plan, egs__pools_build_free). */
struct pools_build {
	int stage;     /* 1: sorting the names, 2: ranking and hashing the slots, 3: the rest */
	uint64_t gen;  /* st->inventory_gen when the build began: what its pools are kept under */
	/* The name sort (core/msort.h) of by[] (n nodes, room for capby). */
	struct egs_node **by;
	size_t n, capby;
	struct egs_msort sort;
	/* The pools hashed, in order of first appearance, and each slot's (stage 2): the table, and
	 * the slots hashed so far. */
	struct pool *pools;
	size_t npools, cap;
	size_t *slot_pool;
	size_t *table, tsz, hashed;
};

void egs__pools_build_free(struct pools_build *b)
{
	if (!b)
		return;
	free(b->by);
	egs_msort_cleanup(&b->sort);
	free(b->pools);
	free(b->slot_pool);
	free(b->table);
	free(b);
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

/* FNV-1a of s and a separator after it, so that ("ab", "c") and ("a", "bc") differ. */
static uint64_t fnv_str(uint64_t h, const char *s)
{
	return (egs_fnv1a_str(h, s) ^ 0x1f) * EGS_FNV_PRIME;
}

static uint64_t pool_hash(const struct egs_node *n)
{
	uint64_t h = fnv_str(fnv_str(fnv_str(EGS_FNV_OFFSET, n->cluster), n->gpu_shape), n->instance_type);
	h = (h ^ (uint64_t)n->gpu_count) * EGS_FNV_PRIME;
	return (h ^ (uint64_t)n->memory_mib) * EGS_FNV_PRIME;
}

/* Node a's name goes before b's. */
static bool name_before(const void *a, const void *b)
{
	return strcmp((*(struct egs_node *const *)a)->name, (*(struct egs_node *const *)b)->name) < 0;
}

/* Starts the sort of every node by name (stage 1). */
static void sort_begin(struct pools_build *b, struct egs_state *st)
{
	b->capby = st->nodes.len + 1;
	b->by = egs_calloc(b->capby, sizeof(*b->by));
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);)
		b->by[b->n++] = v;
	egs_msort_start(&b->sort, b->n, sizeof(*b->by));
}

/* Merges the sort's runs for at most about SORT_PIECE element moves (a merge stops anywhere and
 * goes on at the next piece); true when by[] is in name order.  Stable: nodes of equal names keep
 * the map's order. */
static bool sort_piece(struct pools_build *b, size_t piece)
{
	size_t budget = piece ? piece : SORT_PIECE;
	return egs_msort_piece(&b->sort, &b->by, &b->capby, sizeof(*b->by), name_before, &budget);
}

/* The sort's end: every node's name_rank, valid while the inventory is as when the sort began. */
static void sort_end(struct pools_build *b, struct egs_state *st)
{
	for (size_t i = 0; i < b->n; i++)
		b->by[i]->name_rank = (uint32_t)i;
	free(b->by);
	b->by = NULL;
	egs_msort_cleanup(&b->sort);
	st->name_rank_gen = b->gen;
}

/* The slots' name_rank: their place in name order among the slots (ties of equal names keep
 * the order of the sort of all nodes). */
static void rank_names(struct egs_plan *p)
{
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

/* Stage 2: each slot's pool, numbered in order of first appearance, through an open-addressing
 * table hashed on the attributes (a formatted key per node and a map cost a tenth of a run's
 * set-up), at most max slots a piece (the attributes' strings are a cache miss or more per node:
 * 10,000 in one piece were 1.5 ms); true when every slot has its pool. */
static bool pools_hash(struct egs_plan *p, struct pools_build *b, size_t max)
{
	if (!b->table) {
		b->tsz = 16;
		while (b->tsz < 2 * p->nslots)
			b->tsz *= 2;
		b->table = egs_malloc(b->tsz * sizeof(*b->table));
		for (size_t h = 0; h < b->tsz; h++)
			b->table[h] = SIZE_MAX;
		b->slot_pool = egs_calloc(p->nslots + 1, sizeof(*b->slot_pool));
		b->cap = 16;
		b->pools = egs_malloc(b->cap * sizeof(*b->pools));
	}
	size_t mask = b->tsz - 1, *table = b->table;
	for (size_t k = 0; k < max && b->hashed < p->nslots; k++, b->hashed++) {
		const struct egs_node *n = p->slots[b->hashed].n;
		size_t h = (size_t)pool_hash(n) & mask;
		while (table[h] != SIZE_MAX && !same_pool(b->pools[table[h]].proto, n))
			h = (h + 1) & mask;
		if (table[h] == SIZE_MAX) {
			if (b->npools == b->cap) {
				b->cap *= 2;
				b->pools = egs_realloc(b->pools, b->cap * sizeof(*b->pools));
			}
			memset(&b->pools[b->npools], 0, sizeof(*b->pools));
			table[h] = b->npools;
			b->pools[b->npools++].proto = n;
		}
		b->slot_pool[b->hashed] = table[h];
	}
	if (b->hashed < p->nslots)
		return false;
	free(b->table);
	b->table = NULL;
	return true;
}

/* Stage 3: the pools sorted by cluster (egs__place() walks a cluster's pools together), their
 * members, heaps, name orders and segment trees. */
static void pools_make(struct egs_plan *p, struct pools_build *b)
{
	size_t npools = b->npools;
	struct pool_ref *order = egs_calloc(npools + 1, sizeof(*order));
	for (size_t j = 0; j < npools; j++)
		order[j] = (struct pool_ref){ b->pools[j].proto->cluster, j };
	qsort(order, npools, sizeof(*order), cmp_pool_ref);
	size_t *where = egs_calloc(npools + 1, sizeof(*where));
	p->pools = egs_calloc(npools + 1, sizeof(*p->pools));
	for (size_t j = 0; j < npools; j++) {
		p->pools[j] = b->pools[order[j].id];
		where[order[j].id] = j;
	}
	p->npools = npools;
	for (size_t a = 0; a < npools;) {
		size_t e = a;
		while (e < npools && !strcmp(p->pools[e].proto->cluster, p->pools[a].proto->cluster))
			e++;
		for (size_t j = a; j < e; j++)
			p->pools[j].group_end = e;
		a = e;
	}
	for (size_t j = 0; j < npools; j++) {
		p->pools[j].holes = egs_calloc(POOL_HOLES, sizeof(struct hole));
		p->pools[j].index = j;
	}
	layout_note(p);
	for (size_t i = 0; i < p->nslots; i++) {
		struct pool *q = &p->pools[where[b->slot_pool[i]]];
		p->slots[i].pool = q;
		q->n++;
	}
	uint32_t *byrank = egs_calloc(p->nslots + 1, sizeof(*byrank));
	for (size_t i = 0; i < p->nslots; i++)
		byrank[p->slots[i].name_rank] = (uint32_t)i;
	for (size_t j = 0; j < npools; j++) {
		struct pool *q = &p->pools[j];
		q->cap = q->n;
		q->heap = egs_malloc((q->n + 1) * sizeof(*q->heap));
		q->byname = egs_calloc(q->n + 1, sizeof(uint32_t));
		q->n = 0; /* counted again as the members go in, in name order */
	}
	for (size_t r = 0; r < p->nslots; r++) {
		struct slot *s = &p->slots[byrank[r]];
		struct pool *q = s->pool;
		s->name_pos = (uint32_t)q->n;
		q->byname[q->n] = byrank[r];
		q->heap[q->n++] = s;
	}
	for (size_t j = 0; j < npools; j++) {
		egs__heap_build(&p->pools[j]);
		egs__seg_build(p, &p->pools[j]);
	}
	free(byrank);
	free(where);
	free(order);
}

/* Replaces st->plan_pools with p's pools (made afresh from the inventory of gen). */
static void pools_keep(struct egs_plan *p, uint64_t gen)
{
	struct egs_state *st = p->st;
	struct plan_pools *old = st->plan_pools;
	size_t ns = p->nslots, np = p->npools, nw = st->workspaces.len;
	size_t size = sizeof(struct plan_pools) + np * sizeof(struct kept_pool) + ns * sizeof(struct egs_node *) +
		      nw * sizeof(uint64_t) + 4 * (ns + 1) * sizeof(uint32_t);
	struct plan_pools *k = egs_malloc(size);
	*k = (struct plan_pools){ old ? old->serial + 1 : 1, gen, p->layout, ns, np, nw, false,
				  NULL, NULL, NULL, NULL, NULL, NULL, NULL };
	k->pools = (struct kept_pool *)(k + 1);
	k->nodes = (struct egs_node **)(k->pools + np);
	k->pool_ok = (uint64_t *)(k->nodes + ns);
	k->slot_pool = (uint32_t *)(k->pool_ok + nw);
	k->rank = k->slot_pool + ns + 1;
	k->pos = k->rank + ns + 1;
	k->byname = k->pos + ns + 1;
	for (size_t j = 0, off = 0; j < np; j++) {
		const struct pool *q = &p->pools[j];
		k->pools[j] = (struct kept_pool){ q->proto, q->group_end, q->n, off };
		memcpy(k->byname + off, q->byname, q->n * sizeof(*q->byname));
		off += q->n;
	}
	for (size_t i = 0; i < ns; i++) {
		k->nodes[i] = p->slots[i].n;
		k->slot_pool[i] = (uint32_t)p->slots[i].pool->index;
		k->rank[i] = p->slots[i].name_rank;
		k->pos[i] = p->slots[i].name_pos;
	}
	free(old);
	st->plan_pools = k;
	p->pools_serial = k->serial;
}

/* Makes p's pools (after init_slots) from st->plan_pools; false when they do not apply. */
static bool pools_reuse(struct egs_plan *p)
{
	const struct plan_pools *k = p->st->plan_pools;
	if (!k || k->gen != p->st->inventory_gen || k->nslots != p->nslots)
		return false;
	for (size_t i = 0; i < p->nslots; i++)
		if (p->slots[i].n != k->nodes[i])
			return false;
	p->npools = k->npools;
	p->pools = egs_calloc(k->npools + 1, sizeof(*p->pools));
	for (size_t j = 0; j < k->npools; j++) {
		struct pool *q = &p->pools[j];
		const struct kept_pool *c = &k->pools[j];
		q->proto = c->proto;
		q->group_end = c->group_end;
		q->index = j;
		q->n = q->cap = c->n;
		q->heap = egs_malloc((c->n + 1) * sizeof(*q->heap));
		q->byname = egs_malloc((c->n + 1) * sizeof(*q->byname));
		memcpy(q->byname, k->byname + c->off, c->n * sizeof(*q->byname));
		q->holes = egs_calloc(POOL_HOLES, sizeof(struct hole));
	}
	for (size_t i = 0; i < p->nslots; i++) {
		p->slots[i].pool = &p->pools[k->slot_pool[i]];
		p->slots[i].name_rank = k->rank[i];
		p->slots[i].name_pos = k->pos[i];
	}
	for (size_t j = 0; j < k->npools; j++) {
		struct pool *q = &p->pools[j];
		for (size_t h = 0; h < q->n; h++)
			q->heap[h] = &p->slots[q->byname[h]];
		egs__heap_build(q);
		egs__seg_build(p, q);
	}
	p->layout = k->layout;
	p->pools_serial = k->serial;
	return true;
}


bool egs__plan_pools_piece(struct egs_plan *p)
{
	struct egs_state *st = p->st;
	struct pools_build *b = p->build;
	if (!b) {
		if (pools_reuse(p)) {
			egs__scratch_alloc(p);
			return true;
		}
		b = p->build = egs_calloc(1, sizeof(*b));
		b->gen = st->inventory_gen;
		b->stage = 2;
		if (st->name_rank_gen != st->inventory_gen || !st->inventory_gen) {
			b->stage = 1;
			sort_begin(b, st);
		}
		return false;
	}
	if (b->stage == 1) {
		if (sort_piece(b, st->cfg.plan_sort_piece)) {
			sort_end(b, st);
			b->stage = 2;
		}
		return false;
	}
	if (b->stage == 2) { /* the slots' ranks among themselves, then their pools */
		if (!b->table && !b->hashed)
			rank_names(p);
		if (pools_hash(p, b, st->cfg.plan_slots_piece ? st->cfg.plan_slots_piece : HASH_PIECE))
			b->stage = 3;
		return false;
	}
	pools_make(p, b);
	pools_keep(p, b->gen);
	egs__scratch_alloc(p);
	egs__pools_build_free(b);
	p->build = NULL;
	return true;
}

const char *egs__pools_piece_name(const struct egs_plan *p)
{
	if (p->build && p->build->stage == 1)
		return "first state (pools: name order)";
	if (p->build && p->build->stage == 2)
		return "first state (pools: hashing)";
	return "first state (pools)";
}
