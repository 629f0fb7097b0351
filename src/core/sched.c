/*
 * sched.c: due transitions and the runs of the reservation plan; see sched.h.  The plan is rebuilt
 * from the state on every call: nodes' and workspaces' free times are derived, never stored, so
 * nothing can drift between runs.  The plan's parts live beside it: sched_pool.c (its state: pools,
 * slots, snapshots), sched_place.c (placing one GPR), sched_held.c (held releases' trials),
 * sched_kept.c (the kept plan: resumed walks, appends, wait-time queries).
 */
#include "core/sched_int.h"

#include "core/fair.h"
#include "core/gpr.h"
#include "core/held.h"
#include "core/preempt.h"
#include "core/share_gpr.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool egs_node_schedulable(const struct egs_state *st, const struct egs_node *n, int64_t now)
{
	return n->health == EGS_HEALTH_HEALTHY && n->last_heartbeat > 0 &&
	       now - n->last_heartbeat <= st->cfg.heartbeat_timeout_s;
}

/* The node-level half of egs_node_matches: GPU shape, instance type, GPUs per node, memory. */
bool egs__shape_matches(const struct egs_gpr *g, const struct egs_node *n)
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
	return egs__shape_matches(g, n);
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

/* Appends s (under EGS_NAME_MAX bytes: a name of the model) and the unit separator at p; returns
 * the end. */
static char *key_name(char *p, const char *s)
{
	size_t n = strnlen(s, EGS_NAME_MAX - 1);
	memcpy(p, s, n);
	p[n] = '\x1f';
	return p + n + 1;
}

/* Appends v in decimal and the unit separator at p; returns the end. */
static char *key_num(char *p, int64_t v)
{
	p = egs_i64_digits(p, v);
	*p = '\x1f';
	return p + 1;
}

/* The cache key of a capacity question: cluster, shape, instance type, GPUs per node, MiB per GPU
 * and workspace, each ended by \x1f (the workspace by the NUL).  Written by hand: snprintf cost
 * ~2,000 instructions of every create (issue 16).  key holds 4 * EGS_NAME_MAX + 64 bytes. */
static void cap_key(char *key, const struct egs_gpr *g, const struct egs_workspace *ws)
{
	char *p = key_name(key, g->cluster);
	p = key_name(p, g->gpu_shape);
	p = key_name(p, g->instance_type);
	p = key_num(p, g->gpus_per_node);
	p = key_num(p, g->memory_mib);
	p = key_name(p, ws ? ws->name : "");
	p[-1] = '\0';
}

size_t egs_sched_capacity(struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws, char *why,
			  size_t whylen)
{
	char key[4 * EGS_NAME_MAX + 64];
	cap_key(key, g, ws);
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

struct egs_plan *egs_plan_new(void)
{
	return egs_calloc(1, sizeof(struct egs_plan));
}

void egs_plan_free(struct egs_plan *p)
{
	if (!p)
		return;
	egs__plan_cleanup(p);
	free(p);
}

/* The order of a walk (caller frees): the queue's, with the ghosts that are not lifted
 * (core/held.h) merged in at the places they had; *n receives its length and *cap (unless NULL)
 * the entries it has room for: an eighth more, for the appends and resumed walks that follow (a
 * resumed walk grew the kept order by one create each time, a copy of it). */
struct egs_gpr **egs__plan_order(struct egs_state *st, size_t *n, size_t *cap)
{
	size_t nq = egs_queue_len(&st->queue), ng = 0, room = nq + st->held.len;
	room += room / 8 + 64;
	struct egs_gpr **out = egs_malloc(room * sizeof(*out));
	if (cap)
		*cap = room;
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
	int64_t t = egs__place_dry(p, g);
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

/*
 * The first state of a deferred walk (walk_defer): the plan at now over the state, made in the
 * pieces of egs__plan_init_part, one a step when the run is sliced (max < SIZE_MAX), so that no
 * step holds the loop for all of it; the pools, when made afresh, in several (sched_fresh.c).
 * What changed since the run began still makes it stale (the generations walk_defer noted are
 * kept).  Returns true when the state is complete.
 */
/* Nodes one piece of a first state's slots sees (a sliced run's): 10,000 nodes' slots in one
 * piece were 5 ms of egsd's loop (bench/api/deep.sh). */
#define SLOTS_PIECE 2048

static size_t slots_piece(const struct egs_plan *p)
{
	return p->st->cfg.plan_slots_piece ? p->st->cfg.plan_slots_piece : SLOTS_PIECE;
}

static bool walk_first_state(struct egs_plan *p, size_t max)
{
	do {
		int part = p->init_part;
		if (part == 0 && !p->slots_begun) { /* the begin zeroes p: keep what walk_defer set */
			struct egs_plan keep = *p;
			egs__plan_slots_begin(p, keep.st, keep.now);
			p->keep = keep.keep;
			p->base_next = keep.base_next;
			p->walking = p->deferred = true;
			p->gen_seen = keep.gen_seen;
			p->arr_seen = keep.arr_seen;
			p->hold_seen = keep.hold_seen;
			p->trial_void = keep.trial_void;
			p->spare = keep.spare; /* the last plan's snapshots' buffers */
			p->nspare = keep.nspare;
		}
		if (part == 0 && !egs__plan_slots_piece(p, max == SIZE_MAX ? SIZE_MAX : slots_piece(p)))
			continue; /* more nodes to see */
		if (part == 1 && !egs__plan_pools_piece(p))
			continue; /* the pools made afresh: more pieces (sched_fresh.c) */
		bool done = part > 1 && egs__plan_init_part(p, p->st, p->now, part);
		p->init_part = part + 1;
		if (done) {
			p->run_next = egs__stale_next(p, p->base_next);
			p->deferred = false; /* the order comes with the next step (plan_order is O(queue)) */
			return true;
		}
	} while (max == SIZE_MAX);
	return false;
}

/* Empties p for a new walk; its content goes to p->old, which the walk's next step frees. */
void egs__plan_retire(struct egs_plan *p)
{
	if (!p->nslots && !p->norder && !p->trial && !p->old) { /* nothing to free */
		egs__plan_cleanup(p);
		return;
	}
	struct egs_plan *old = egs_malloc(sizeof(*old));
	*old = *p;
	memset(p, 0, sizeof(*p));
	p->old = old;
}

/* Sets p (retired: egs__plan_retire) up for a walk over the queue at now (see egs_sched_run), made
 * by its next steps (after p->old is freed): the first state (walk_first_state), then the order.
 * base_next is the due transitions' next time.  Kept (keep) walks take snapshots and stay in p as
 * the kept plan when they end.  Notes the generations the walk must see as changes since. */
void egs__walk_defer(struct egs_plan *p, struct egs_state *st, int64_t now, int64_t base_next, bool keep)
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

/* Places at most max more GPRs of p's walk; returns true when the walk is complete. */
static bool walk_step(struct egs_plan *p, size_t max)
{
	struct egs_state *st = p->st;
	if (p->trial) { /* held releases' trials first (their last step begins the walk, or is it) */
		egs__trial_step(p, max);
		return !p->walking;
	}
	if (p->resume_snap) { /* a resumed walk: the kept plan at its snapshot (a piece of its own) */
		if (!egs__walk_restore(p)) {
			p->deferred = true; /* a full walk instead: its first state, in the next steps */
			p->init_part = 0;
		}
		if (max < SIZE_MAX)
			return false;
	}
	if (p->old) { /* the plan replaced: freeing it is a piece of its own */
		egs__plan_free_old(p);
		if (max < SIZE_MAX)
			return false;
	}
	if (p->deferred && (!walk_first_state(p, max) || max < SIZE_MAX))
		return false; /* the walk's first state: pieces of their own */
	if (st->generation != p->gen_seen) {
		p->stale = true; /* requests changed the state between two slices */
		if (st->generation - p->gen_seen != st->arrivals.bumps - p->arr_seen)
			p->foreign = true; /* not only creates: the next run walks afresh */
	}
	if (!p->order || p->splice || p->ordering) { /* the queue as it stands now, in pieces */
		bool done = egs__order_step(p, max);
		if (max < SIZE_MAX) {
			p->gen_seen = st->generation;
			p->arr_seen = st->arrivals.bumps;
			p->hold_seen = st->arrivals.hold_bumps;
			return false;
		}
		EGS_ASSERT(done);
	}
	size_t end = p->norder - p->cursor > max ? p->cursor + max : p->norder;
	bool adopted = p->adopting != NULL; /* the trial of held releases made the walk */
	if (adopted) /* its results go in */
		egs__adopt_step(p, end);
	size_t every = st->cfg.plan_snap_every ? st->cfg.plan_snap_every : SNAP_EVERY;
	size_t snap_at = p->keep ? (p->cursor + every - 1) / every * every : SIZE_MAX; /* no division a GPR */
	for (size_t i = p->cursor; i < end && !adopted; i++) {
		struct egs_gpr *g = p->order[i];
		egs__gpr_prefetch(p->order, i, end);
		if (i == snap_at) {
			egs__snap_take(p, i);
			snap_at += every;
		}
		int64_t t = g->ghost ? ghost_one(p, g, true) : egs__plan_one(p, g);
		/* A GPR started just now is due again at its provisioning time-out. */
		if (g->state == EGS_GPR_PROVISIONING && t == p->now) {
			t = p->now + st->cfg.provision_timeout_s;
			if (p->keep)
				egs__started_push(p, i, g);
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

/* egs_sched_begin for a plan kept (keep) or not: a walk resumed from the kept plan p when only
 * creates came since it was made (walk_resume), else a full one. */
static void run_begin(struct egs_state *st, int64_t now, struct egs_plan *p, bool keep)
{
	int64_t next = due_transitions(st, now);
	if (egs__held_pending(st, now)) { /* the trials come first, in the run's steps */
		bool kept_base = keep && egs__held_kept_base(p, st, now);
		egs__plan_retire(p);
		p->st = st;
		p->now = now;
		p->keep = keep;
		p->base_next = next;
		p->walking = true;
		p->trial = egs_calloc(1, sizeof(*p->trial));
		egs__trial_begin(p, true);
		p->trial->kept_base = kept_base;
	} else if (!keep || !egs__walk_resume(p, st, now, next)) {
		egs__plan_retire(p);
		egs__walk_defer(p, st, now, next, keep);
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
		egs__plan_retire(p); /* freed, and the new walk's first state made, in its steps */
		egs__walk_defer(p, st, now, base, keep);
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
		egs__plan_cleanup(&local);
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

const char *egs_sched_piece(const struct egs_plan *p)
{
	static const char *const trial[] = { "trial: base state (slots)", "trial: base state (pools)",
					     "trial: base state (workspaces)", "trial: lift state (slots)",
					     "trial: lift state (pools)", "trial: lift state (workspaces)",
					     "trial: queue order", "trial: walk" };
	static const char *const first[] = { "first state (slots)", "first state (pools)", "first state (workspaces)" };
	if (!p || !p->walking)
		return "none";
	if (p->trial)
		return p->old ? "free last plan" : trial[p->trial->phase < 7 ? p->trial->phase : 7];
	if (p->resume_snap)
		return "resumed walk: the kept plan at its snapshot";
	if (p->old)
		return "free last plan";
	if (p->deferred)
		return p->init_part == 1 ? egs__pools_piece_name(p) : first[p->init_part < 3 ? p->init_part : 2];
	if (!p->order || p->splice || p->ordering)
		return p->splice ? "queue order (resumed walk)" : "queue order";
	return "walk"; /* placing GPRs, or applying what an adopted trial's walk placed (egsd sizes both) */
}

size_t egs_sched_from(const struct egs_plan *p)
{
	return p->from;
}

bool egs_sched_adopted(const struct egs_plan *p)
{
	return p->adopted;
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
		egs__plan_cleanup(p);
}
