/*
 * sched_pool.c: the state of one walk of the plan (sched_int.h): the schedulable nodes as slots,
 * grouped into pools of identical nodes, the workspaces' free times, and the snapshots a kept plan
 * takes every SNAP_EVERY GPRs so that a later walk or query can start from one.
 */
#include "core/sched_int.h"

#include "core/gpr.h"
#include "core/held.h"
#include "core/share_gpr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (Re)builds q's segment tree from its members' free_at. */
static void seg_build(struct egs_plan *p, struct pool *q)
{
	size_t sz = 1;
	while (sz < q->n)
		sz *= 2;
	if (!q->seg || q->segsz != sz) { /* a restore in place keeps its tree's array */
		free(q->seg);
		q->seg = egs_malloc(2 * sz * sizeof(int64_t));
	}
	q->segsz = sz;
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
	/* Sort the pools by cluster (egs__place() walks a cluster's pools together), keeping track of
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
		egs__heap_push(q, &p->slots[i]);
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

/* Replaces st->plan_pools with p's pools (made afresh). */
static void pools_keep(struct egs_plan *p)
{
	struct egs_state *st = p->st;
	struct plan_pools *old = st->plan_pools;
	size_t ns = p->nslots, np = p->npools, nw = st->workspaces.len;
	size_t size = sizeof(struct plan_pools) + np * sizeof(struct kept_pool) + ns * sizeof(struct egs_node *) +
		      nw * sizeof(uint64_t) + 4 * (ns + 1) * sizeof(uint32_t);
	struct plan_pools *k = egs_malloc(size);
	*k = (struct plan_pools){ old ? old->serial + 1 : 1, st->inventory_gen, p->layout, ns, np, nw, false,
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
		seg_build(p, q);
	}
	p->layout = k->layout;
	p->pools_serial = k->serial;
	return true;
}

/* The scratch arrays of egs__place(), once p->nslots and p->npools are known. */
static void scratch_alloc(struct egs_plan *p)
{
	size_t nholes = POOL_HOLES * p->npools;
	p->chosen = egs_calloc(p->nslots + 1, sizeof(*p->chosen));
	p->tmp = egs_calloc(p->nslots + 1, sizeof(*p->tmp));
	p->frontier = egs_calloc(p->nslots + p->npools + 1, sizeof(*p->frontier));
	p->match = egs_calloc(p->nslots + 1, sizeof(*p->match));
	p->cand = egs_calloc(p->nslots + nholes + WS_HOLES + 4, sizeof(*p->cand));
	p->hsel = egs_calloc(nholes + 1, sizeof(*p->hsel));
	p->hok = egs_calloc(nholes + 1, sizeof(*p->hok));
	p->dirty = egs_calloc(p->nslots + 1, sizeof(*p->dirty));
	p->backfill = p->st->cfg.backfill > 0;
}

struct wsinfo *egs__ws_add(struct egs_plan *p, const char *name, const struct egs_workspace *ws, const uint64_t *pool_ok)
{
	if (p->nws == p->capws) { /* the index holds pointers into wsv: made again when next asked */
		p->capws *= 2;
		p->wsv = egs_realloc(p->wsv, p->capws * sizeof(*p->wsv));
		egs_map_cleanup(&p->ws);
		egs_map_init(&p->ws);
		p->ws_indexed = 0;
	}
	struct wsinfo *w = &p->wsv[p->nws++];
	egs_strlcpy(w->name, name, sizeof(w->name));
	w->ws = ws;
	w->until = p->now;
	w->active = false;
	w->nholes = 0;
	if (pool_ok) {
		w->pool_ok = *pool_ok;
		return w;
	}
	w->pool_ok = 0;
	for (size_t a = 0; a < p->npools && a < 64; a = p->pools[a].group_end) /* a cluster at a time */
		if (!w->ws || egs_strlist_has(&w->ws->clusters, p->pools[a].proto->cluster))
			for (size_t j = a; j < p->pools[a].group_end && j < 64; j++)
				w->pool_ok |= 1ull << j;
	return w;
}

/* Puts the entries of wsv not in p->ws yet into it: a plan that finds every workspace through the
 * GPRs' cached indexes (ws_of) never hashes a name. */
static void ws_index(struct egs_plan *p)
{
	for (; p->ws_indexed < p->nws; p->ws_indexed++)
		egs_map_put(&p->ws, p->wsv[p->ws_indexed].name, &p->wsv[p->ws_indexed]);
}

struct wsinfo *egs__ws_get(struct egs_plan *p, const char *name)
{
	ws_index(p);
	struct wsinfo *w = egs_map_get(&p->ws, name);
	if (w)
		return w;
	w = egs__ws_add(p, name, egs_state_workspace(p->st, name), NULL);
	ws_index(p);
	return w;
}

/* ws_of's slow path (sched_place.c): g's entry by name, its index then cached in g. */
struct wsinfo *egs__ws_lookup(struct egs_plan *p, struct egs_gpr *g)
{
	struct wsinfo *w = egs__ws_get(p, g->workspace);
	if ((size_t)(w - p->wsv) < p->nws_fixed) { /* not a deleted workspace's */
		g->plan_serial = p->serial;
		g->plan_ws = (uint32_t)(w - p->wsv);
	}
	return w;
}

/* The slots: every schedulable node with its free time (p zeroed first). */
static void init_slots(struct egs_plan *p, struct egs_state *st, int64_t now)
{
	memset(p, 0, sizeof(*p));
	p->st = st;
	p->now = now;
	p->hole_end_min = INT64_MAX;
	p->slots = egs_malloc((st->nodes.len + 1) * sizeof(*p->slots)); /* each set below, as it is used */
	p->capws = 2 * (st->workspaces.len + st->active.len) + 16;
	p->wsv = egs_malloc(p->capws * sizeof(*p->wsv)); /* ws_get sets what it uses */
	egs_map_init(&p->ws);

	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		if (!egs_node_schedulable(st, n, now))
			continue;
		struct slot *s = &p->slots[p->nslots++];
		*s = (struct slot){ .n = n };
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
		egs__share_slot_init(p, s);
		s->idle_now = s->free_now;
	}
}

/* The workspaces' free times: their active GPRs and held releases. */
static void init_workspaces(struct egs_plan *p, struct egs_state *st, int64_t now)
{
	void *v;
	/* Workspaces come and go only with inventory_gen: the serial of this wsv's layout, set here
	 * (a run in slices may have taken its slots before a workspace came). */
	p->serial = st->inventory_gen + 1;
	/* The state's workspaces in its map's order (names are unique there: no lookups), their pool
	 * masks kept with the pools this plan took (pools_keep) while the inventory stays. */
	struct plan_pools *k = st->plan_pools;
	bool kept = k && k->serial == p->pools_serial && k->gen == st->inventory_gen && k->nws == st->workspaces.len;
	size_t n = 0;
	for (size_t i = 0; egs_map_next(&st->workspaces, &i, NULL, &v); n++) {
		const struct egs_workspace *ws = v;
		struct wsinfo *w = egs__ws_add(p, ws->name, ws, kept && k->ws_ok ? &k->pool_ok[n] : NULL);
		if (kept && !k->ws_ok)
			k->pool_ok[n] = w->pool_ok;
	}
	if (kept)
		k->ws_ok = true;
	p->nws_fixed = p->nws;
	for (size_t i = 0; i < st->active.len; i++) {
		struct egs_gpr *g = st->active.items[i];
		struct wsinfo *w = egs__ws_of(p, g);
		int64_t until = egs_gpr_planned_end(g, now);
		if (until > w->until)
			w->until = until;
		w->active = true;
	}
	for (size_t i = 0; i < st->held.len; i++) {
		struct egs_gpr *g = st->held.items[i];
		if (g->held_lifted || g->ghost || g->held_until <= now)
			continue; /* a ghost's workspace is reserved by the walk that places it */
		struct wsinfo *w = egs__ws_of(p, g);
		if (g->held_until > w->until)
			w->until = g->held_until;
	}
}

bool egs__plan_init_part(struct egs_plan *p, struct egs_state *st, int64_t now, int part)
{
	if (part == 0) {
		init_slots(p, st, now);
	} else if (part == 1) {
		if (!pools_reuse(p)) {
			rank_names(p);
			build_pools(p);
			pools_keep(p);
		}
		scratch_alloc(p);
	} else {
		init_workspaces(p, st, now);
	}
	return part == 2;
}

void egs__plan_init(struct egs_plan *p, struct egs_state *st, int64_t now)
{
	for (int part = 0; !egs__plan_init_part(p, st, now, part); part++)
		;
}

void egs__snap_free(struct snap *s)
{
	free(s->free_at);
	free(s->free_now);
	free(s->ws);
	free(s->ws_holes);
	free(s->holes);
	free(s->nholes);
}

void egs__plan_cleanup(struct egs_plan *p)
{
	if (p->trial)
		egs__trial_free(p->trial);
	if (p->old)
		egs_plan_free(p->old);
	egs__adopt_free(p);
	free(p->ghosts); /* an order in pieces dropped on the way (sched_order.c) */
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
	free(p->frontier);
	free(p->match);
	free(p->cand);
	free(p->hsel);
	free(p->hok);
	free(p->dirty);
	free(p->wsv);
	egs_map_cleanup(&p->ws);
	for (size_t i = 0; i < p->nsnaps; i++)
		egs__snap_free(&p->snaps[i]);
	free(p->snaps);
	for (size_t i = 0; i < p->nspare; i++)
		egs__snap_free(&p->spare[i]);
	free(p->spare);
	free(p->order);
	free(p->started);
	memset(p, 0, sizeof(*p));
}

/* Makes s's arrays hold a snapshot of nslots slots, npools pools and nws workspaces with nwh
 * holes, keeping those that are big enough (a spare snapshot's: no fresh pages, no frees). */
static void snap_reserve(struct snap *s, size_t nslots, size_t npools, size_t nws, size_t nwh)
{
	if (s->cap_slots < nslots) {
		free(s->free_at);
		free(s->free_now);
		s->cap_slots = nslots;
		s->free_at = egs_malloc((nslots + 1) * sizeof(*s->free_at));
		s->free_now = egs_malloc(nslots + 1);
	}
	if (s->cap_pools < npools) {
		free(s->holes);
		free(s->nholes);
		s->cap_pools = npools;
		s->holes = egs_malloc((POOL_HOLES * npools + 1) * sizeof(*s->holes));
		s->nholes = egs_malloc((npools + 1) * sizeof(*s->nholes));
	}
	if (!s->ws || s->cap_ws < nws) {
		free(s->ws);
		s->cap_ws = nws + nws / 8 + 8; /* workspaces come with the GPRs walked */
		s->ws = egs_malloc(s->cap_ws * sizeof(*s->ws));
	}
	if (!s->ws_holes || s->cap_ws_holes < nwh) {
		free(s->ws_holes);
		s->cap_ws_holes = nwh + nwh / 4 + 16;
		s->ws_holes = egs_malloc(s->cap_ws_holes * sizeof(*s->ws_holes));
	}
}

/* The slots' part of snapshot s of p: a copy of the last snapshot with the slots changed since
 * (snap_inc), else every slot. */
static void snap_slots(struct egs_plan *p, struct snap *s)
{
	if (p->snap_inc && p->nsnaps >= 2) {
		const struct snap *last = s - 1;
		memcpy(s->free_at, last->free_at, p->nslots * sizeof(*s->free_at));
		memcpy(s->free_now, last->free_now, p->nslots * sizeof(*s->free_now));
		for (size_t d = 0; d < p->ndirty; d++) {
			struct slot *x = &p->slots[p->dirty[d]];
			s->free_at[p->dirty[d]] = x->free_at;
			s->free_now[p->dirty[d]] = x->free_now;
			x->snap_dirty = false;
		}
	} else {
		for (size_t i = 0; i < p->nslots; i++) {
			s->free_at[i] = p->slots[i].free_at;
			s->free_now[i] = p->slots[i].free_now;
			p->slots[i].snap_dirty = false;
		}
	}
	p->ndirty = 0;
	p->snap_inc = true;
}

void egs__snap_take(struct egs_plan *p, size_t pos)
{
	if (p->nsnaps % 16 == 0)
		p->snaps = egs_realloc(p->snaps, (p->nsnaps + 16) * sizeof(*p->snaps));
	struct snap *s = &p->snaps[p->nsnaps++];
	if (p->nspare) /* the buffers of a snapshot of the plan this walk replaced */
		*s = p->spare[--p->nspare];
	else
		memset(s, 0, sizeof(*s));
	size_t nwh = 0;
	for (size_t i = 0; i < p->nws; i++)
		nwh += p->wsv[i].nholes;
	snap_reserve(s, p->nslots, p->npools, p->nws, nwh);
	s->pos = pos;
	s->run_next = p->run_next;
	s->stuck = p->stuck;
	s->hole_end_min = p->hole_end_min;
	snap_slots(p, s);
	for (size_t j = 0; j < p->npools; j++) {
		s->nholes[j] = p->pools[j].nholes;
		memcpy(s->holes + j * POOL_HOLES, p->pools[j].holes, p->pools[j].nholes * sizeof(*s->holes));
	}
	s->nws = p->nws;
	s->nws_holes = nwh;
	nwh = 0;
	for (size_t i = 0; i < p->nws; i++) {
		const struct wsinfo *w = &p->wsv[i];
		s->ws[i] = (struct snap_ws){ w->until, (uint32_t)w->nholes, w->active };
		if (!w->nholes)
			continue;
		memcpy(s->ws_holes + nwh, w->holes, w->nholes * sizeof(*w->holes));
		nwh += w->nholes;
	}
}

void egs__snap_spare(struct egs_plan *p, struct snap *v, size_t n)
{
	if (!n)
		return;
	p->spare = egs_realloc(p->spare, (p->nspare + n) * sizeof(*p->spare));
	memcpy(p->spare + p->nspare, v, n * sizeof(*v));
	p->nspare += n;
}

void egs__plan_free_old(struct egs_plan *p)
{
	struct egs_plan *old = p->old;
	p->old = NULL;
	egs__snap_spare(p, old->snaps, old->nsnaps);
	egs__snap_spare(p, old->spare, old->nspare); /* a retired trial's, passed on */
	old->nsnaps = old->nspare = 0;
	if (old->trial) /* and those its lift walk took */
		egs__trial_spares(p, old->trial);
	egs_plan_free(old);
}

/* Sets q's slots, pools and workspaces, which hold p's (copied, or taken: then p is q), to their
 * state at snapshot s of p: free times, holes, heaps and segment trees. */
static void restore_parts(struct egs_plan *q, const struct egs_plan *p, const struct snap *s)
{
	for (size_t i = 0; i < q->nslots; i++) {
		q->slots[i].free_at = s->free_at[i];
		q->slots[i].free_now = s->free_now[i];
		q->slots[i].snap_dirty = false;
	}
	for (size_t j = 0; j < q->npools; j++) { /* the heaps, from the members in name order */
		struct pool *d = &q->pools[j];
		d->nholes = s->nholes[j];
		memcpy(d->holes, s->holes + j * POOL_HOLES, d->nholes * sizeof(*d->holes));
		for (size_t h = 0; h < d->n; h++)
			d->heap[h] = &q->slots[d->byname[h]];
		egs__heap_build(d);
		seg_build(q, d);
	}
	EGS_ASSERT(s->nws <= p->nws); /* p's wsv only grew since s was taken */
	q->nws = s->nws;
	size_t nwh = 0;
	for (size_t i = 0; i < q->nws; i++) {
		struct wsinfo *w = &q->wsv[i];
		w->until = s->ws[i].until;
		w->active = s->ws[i].active;
		w->nholes = s->ws[i].nholes;
		memcpy(w->holes, s->ws_holes + nwh, w->nholes * sizeof(*w->holes));
		nwh += w->nholes;
	}
	egs_map_init(&q->ws); /* made when first asked (egs__ws_get) */
}

/* Makes q a copy of p as it stood at snapshot s (q is uninitialised; release with plan_cleanup). */
void egs__snap_restore(struct egs_plan *q, const struct egs_plan *p, const struct snap *s, int64_t now)
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
	for (size_t j = 0; j < p->npools; j++) {
		struct pool *d = &q->pools[j];
		*d = p->pools[j];
		d->cap = d->n;
		d->heap = egs_malloc((d->cap + 1) * sizeof(*d->heap));
		d->holes = egs_calloc(POOL_HOLES, sizeof(*d->holes));
		d->byname = egs_malloc((d->n + 1) * sizeof(*d->byname));
		memcpy(d->byname, p->pools[j].byname, d->n * sizeof(*d->byname));
		d->seg = NULL; /* rebuilt from the restored slots */
	}
	for (size_t i = 0; i < q->nslots; i++)
		q->slots[i].pool = q->pools + (p->slots[i].pool - p->pools);
	scratch_alloc(q);
	q->capws = 2 * s->nws + 16;
	q->wsv = egs_malloc(q->capws * sizeof(*q->wsv));
	for (size_t i = 0; i < s->nws; i++) {
		struct wsinfo *w = &q->wsv[i];
		const struct wsinfo *pw = &p->wsv[i];
		memcpy(w->name, pw->name, sizeof(w->name));
		w->ws = pw->ws;
		w->pool_ok = pw->pool_ok;
	}
	restore_parts(q, p, s);
}

void egs__snap_restore_take(struct egs_plan *q, struct egs_plan *p, const struct snap *s, int64_t now)
{
	EGS_ASSERT(!p->shared); /* share timelines are not in snapshots */
	memset(q, 0, sizeof(*q));
	q->st = p->st;
	q->now = now;
	q->hole_end_min = INT64_MAX;
	q->serial = p->serial;
	q->nws_fixed = p->nws_fixed;
	q->slots = p->slots;
	q->nslots = p->nslots;
	q->pools = p->pools;
	q->npools = p->npools;
	q->chosen = p->chosen;
	q->tmp = p->tmp;
	q->frontier = p->frontier;
	q->match = p->match;
	q->cand = p->cand;
	q->hsel = p->hsel;
	q->hok = p->hok;
	q->dirty = p->dirty;
	q->backfill = p->backfill;
	q->wsv = p->wsv;
	q->capws = p->capws;
	restore_parts(q, p, s); /* reads p's nws and snapshot only */
	p->slots = NULL;
	p->nslots = 0;
	p->pools = NULL;
	p->npools = 0;
	p->chosen = p->tmp = p->frontier = NULL;
	p->match = NULL;
	p->cand = NULL;
	p->hsel = p->hok = NULL;
	p->dirty = NULL;
	p->wsv = NULL;
	p->nws = p->capws = 0;
}

void egs__order_push(struct egs_plan *p, struct egs_gpr *g)
{
	if (p->norder == p->caporder) {
		p->caporder = p->caporder ? 2 * p->caporder : 64;
		p->order = egs_realloc(p->order, p->caporder * sizeof(*p->order));
	}
	p->order[p->norder++] = g;
}

void egs__started_push(struct egs_plan *p, size_t pos, struct egs_gpr *g)
{
	if (p->nstarted == p->capstarted) {
		p->capstarted = p->capstarted ? 2 * p->capstarted : 64;
		p->started = egs_realloc(p->started, p->capstarted * sizeof(*p->started));
	}
	p->started[p->nstarted++] = (struct started){ pos, g };
}

/* The earliest of base and the times at which a node of p goes stale (unheard from). */
int64_t egs__stale_next(const struct egs_plan *p, int64_t base)
{
	for (size_t i = 0; i < p->nslots; i++) {
		int64_t stale = p->slots[i].n->last_heartbeat + p->st->cfg.heartbeat_timeout_s + 1;
		if (stale < base)
			base = stale;
	}
	return base;
}
