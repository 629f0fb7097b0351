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

void egs__seg_build(struct egs_plan *p, struct pool *q)
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

/* The scratch arrays of egs__place(), once p->nslots and p->npools are known. */
void egs__scratch_alloc(struct egs_plan *p)
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

/* Frees the share timelines of p's slots and forgets them (their array stays). */
static void slots_drop(struct egs_plan *p)
{
	for (size_t i = 0; i < p->nslots; i++)
		if (p->slots[i].sh) {
			egs_share_timeline_cleanup(p->slots[i].sh);
			free(p->slots[i].sh);
		}
	p->nslots = 0;
}

/* Room in p->slots for every node of the state: the array p holds (a spare, the last plan's)
 * when it is big enough, so that a first state touches no fresh pages (10,000 slots are 200). */
static void slots_room(struct egs_plan *p)
{
	size_t need = p->st->nodes.len + 1;
	if (p->slots && p->capslots >= need)
		return;
	free(p->slots);
	p->capslots = need + need / 8;
	p->slots = egs_malloc(p->capslots * sizeof(*p->slots)); /* each set as it is used */
}

void egs__plan_slots_begin(struct egs_plan *p, struct egs_state *st, int64_t now)
{
	struct slot *spare = p->spare_slots;
	size_t cap = p->capspare;
	memset(p, 0, sizeof(*p));
	p->st = st;
	p->now = now;
	p->hole_end_min = INT64_MAX;
	p->slots = spare;
	p->capslots = cap;
	p->slots_gen = st->inventory_gen;
	p->slots_begun = true;
	slots_room(p);
	p->capws = 2 * (st->workspaces.len + st->active.len) + 16;
	p->wsv = egs_malloc(p->capws * sizeof(*p->wsv)); /* ws_get sets what it uses */
	egs_map_init(&p->ws);
}

/* One slot: node n with its free time. */
static void slot_add(struct egs_plan *p, struct egs_node *n)
{
	struct egs_state *st = p->st;
	int64_t now = p->now;
	struct slot *s = &p->slots[p->nslots++];
	*s = (struct slot){ .n = n };
	s->free_now = !n->gpr_id[0] && !n->attached_gpr[0];
	/* A free node counts as free since it became so: a fixed time, so the order of nodes does
	 * not change merely because time passes. */
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

bool egs__plan_slots_piece(struct egs_plan *p, size_t max)
{
	struct egs_state *st = p->st;
	if (st->inventory_gen != p->slots_gen) { /* the node map may have grown: again from the start */
		slots_drop(p);
		p->shared = false;
		p->slots_at = 0;
		p->slots_gen = st->inventory_gen;
		slots_room(p);
	}
	void *v;
	for (size_t k = 0; k < max && egs_map_next(&st->nodes, &p->slots_at, NULL, &v); k++) {
		struct egs_node *n = v;
		if (egs_node_schedulable(st, n, p->now))
			slot_add(p, n);
	}
	return p->slots_at >= egs_map_span(&st->nodes);
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
		p->spare_slots = NULL; /* p is uninitialised */
		egs__plan_slots_begin(p, st, now);
		egs__plan_slots_piece(p, SIZE_MAX);
	} else if (part == 1) {
		while (!egs__plan_pools_piece(p))
			;
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
	egs__pools_build_free(p->build); /* a fresh build dropped on the way */
	free(p->ghosts); /* an order in pieces dropped on the way (sched_order.c) */
	slots_drop(p);
	free(p->spare_slots);
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
	if (p->deferred && !p->slots_begun && !p->spare_slots) { /* its slots' array for p's first state */
		slots_drop(old);
		p->spare_slots = old->slots;
		p->capspare = old->capslots;
		old->slots = NULL;
	}
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
		egs__seg_build(q, d);
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
	q->capslots = p->nslots + 1;
	q->slots = egs_malloc(q->capslots * sizeof(*q->slots));
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
	egs__scratch_alloc(q);
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
	q->capslots = p->capslots;
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
