/*
 * replay.c: the event loop of egs-sim; see sim.h.
 *
 * One egs_state holds one cluster of identical 8-GPU nodes and the workspaces.  The clock jumps
 * from event to event: the next arrival, the next time egs_sched_run says something is due (a
 * planned start, an exit, a 25/50/75% mark), the next early release, the next node failure or
 * recovery.  At each instant the simulator plays, in this order: the agents' heartbeats and health
 * (failures and recoveries), the users' early releases, the users' new GPRs, then the scheduler and
 * an agent that attaches and detaches at once, again and again until the agent has nothing left to
 * do.  The estimate a GPR got at submission is read right after the first scheduler run of the
 * instant it was submitted in, which is what egsd answers a create with.
 *
 * Heartbeats are fresh at every step, and the heartbeat timeout is set far beyond any gap between
 * steps: with the default 15 s the scheduler would (rightly) ask to be woken 16 s later at every
 * step, which turns an event-driven replay into a 16-second tick.
 */
#include "sim.h"

#include "core/gpr.h"
#include "core/sched.h"
#include "core/state.h"

#include <string.h>
#include <time.h>

#define SIM_HEARTBEAT_TIMEOUT (10LL * 366 * 86400)

struct release {
	int64_t t;
	struct sim_job *j;
};

/* A binary min-heap of pending early releases by time. */
struct release_heap {
	struct release *v;
	size_t n, cap;
};

struct sim {
	struct egs_state *st;   /* handed over to the result at the end */
	const struct sim_opts *o;
	struct sim_trace *t;
	struct sim_result *r;
	struct egs_node **nodes; /* borrowed from st, in creation order */
	long nnodes;
	int64_t *recover_at;     /* per node: when a failed node is Healthy again, 0 = not failed */
	struct egs_map by_id;    /* GPR id -> struct sim_job* (keys borrowed from the GPRs) */
	struct release_heap rel;
	size_t next_job;         /* the next arrival */
	int64_t next_fail;       /* the next injected failure, EGS_NEVER = none */
	uint64_t fail_k;
	size_t capfail;
	int64_t next_sched;      /* what the last egs_sched_run said is due next */
};

static void rel_push(struct release_heap *h, int64_t t, struct sim_job *j)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 256;
		h->v = egs_realloc(h->v, h->cap * sizeof(*h->v));
	}
	size_t i = h->n++;
	while (i > 0 && h->v[(i - 1) / 2].t > t) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = (struct release){ t, j };
}

static struct release rel_pop(struct release_heap *h)
{
	struct release top = h->v[0], last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1].t < h->v[c].t)
			c++;
		if (h->v[c].t >= last.t)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

static void add_inventory(struct sim *s)
{
	struct egs_cluster *c = egs_calloc(1, sizeof(*c));
	egs_strlcpy(c->name, "sim", sizeof(c->name));
	egs_strlcpy(c->project, "sim", sizeof(c->project));
	EGS_ASSERT(egs_state_add_cluster(s->st, c) == EGS_OK);
	s->nodes = egs_calloc((size_t)s->nnodes, sizeof(*s->nodes));
	s->recover_at = egs_calloc((size_t)s->nnodes, sizeof(*s->recover_at));
	for (long i = 0; i < s->nnodes; i++) {
		struct egs_node *n = egs_calloc(1, sizeof(*n));
		snprintf(n->name, sizeof(n->name), "node-%05ld", i);
		egs_strlcpy(n->cluster, "sim", sizeof(n->cluster));
		egs_strlcpy(n->gpu_shape, "NVIDIA-H100-80GB-HBM3", sizeof(n->gpu_shape));
		egs_strlcpy(n->instance_type, "p5.48xlarge", sizeof(n->instance_type));
		n->gpu_count = SIM_GPUS_PER_NODE;
		n->memory_mib = 81920;
		EGS_ASSERT(egs_state_add_node(s->st, n) == EGS_OK);
		s->nodes[i] = n;
	}
	for (long w = 0; w < s->o->workspaces; w++) {
		struct egs_workspace *ws = egs_calloc(1, sizeof(*ws));
		snprintf(ws->name, sizeof(ws->name), "ws-%ld", w);
		egs_strlcpy(ws->project, "sim", sizeof(ws->project));
		egs_strlist_add(&ws->clusters, "sim");
		EGS_ASSERT(egs_state_add_workspace(s->st, ws) == EGS_OK);
	}
}

/* Agents: every node reports in now; failed nodes come back when their time is up. */
static void heartbeats(struct sim *s, int64_t now)
{
	for (long i = 0; i < s->nnodes; i++) {
		struct egs_node *n = s->nodes[i];
		n->last_heartbeat = now;
		if (s->recover_at[i] && s->recover_at[i] <= now) {
			s->recover_at[i] = 0;
			n->health = EGS_HEALTH_HEALTHY;
			egs_state_touch(s->st, EGS_KIND_NODE, n);
		}
	}
}

/* Injects the failures due by now: the k-th failure hits a node chosen by a hash of (seed, k). */
static void failures(struct sim *s, int64_t now)
{
	struct sim_result *r = s->r;
	while (s->next_fail <= now) {
		char k[32];
		snprintf(k, sizeof(k), "%llu", (unsigned long long)s->fail_k++);
		long i = (long)(sim_hash(s->o->seed, "failure", k) % (uint64_t)s->nnodes);
		struct egs_node *n = s->nodes[i];
		n->health = EGS_HEALTH_UNHEALTHY;
		egs_state_touch(s->st, EGS_KIND_NODE, n);
		int64_t back = s->next_fail + s->o->fail_for_s;
		if (back > s->recover_at[i])
			s->recover_at[i] = back;
		if (r->failures == s->capfail) {
			s->capfail = s->capfail ? 2 * s->capfail : 64;
			r->fail_times = egs_realloc(r->fail_times, s->capfail * sizeof(*r->fail_times));
		}
		r->fail_times[r->failures++] = s->next_fail;
		s->next_fail += s->o->fail_every_s;
	}
}

/* Users: early releases due by now (the job's real duration is over). */
static void releases(struct sim *s, int64_t now)
{
	while (s->rel.n && s->rel.v[0].t <= now) {
		struct release e = rel_pop(&s->rel);
		if (e.j->g->state == EGS_GPR_PROVISIONED)
			EGS_ASSERT(egs_gpr_release(s->st, e.j->g, now) == EGS_OK);
	}
}

static bool wants_nodes(const struct egs_gpr *g)
{
	return g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED);
}

/* The agent: answers every attach and detach the control plane wants, successfully and at once.
 * Returns how many it answered. */
static size_t agent(struct sim *s, int64_t now)
{
	struct egs_state *st = s->st;
	size_t acts = 0;
	char id[EGS_ID_MAX];
	for (long i = 0; i < s->nnodes; i++) {
		struct egs_node *n = s->nodes[i];
		if (n->attached_gpr[0]) {
			const struct egs_gpr *g = egs_state_gpr(st, n->attached_gpr);
			if (wants_nodes(g) && strcmp(n->gpr_id, g->id) == 0)
				continue;
			egs_strlcpy(id, n->attached_gpr, sizeof(id));
			egs_gpr_detach_result(st, n, id, true, NULL, now);
			acts++;
		}
		if (!n->attached_gpr[0] && n->gpr_id[0] && wants_nodes(egs_state_gpr(st, n->gpr_id))) {
			egs_strlcpy(id, n->gpr_id, sizeof(id));
			egs_gpr_attach_result(st, n, id, true, NULL, now);
			acts++;
		}
	}
	return acts;
}

/* Users: the GPRs submitted by now.  Returns the index of the first job submitted in this call. */
static size_t arrivals(struct sim *s, int64_t now)
{
	size_t first = s->next_job;
	for (; s->next_job < s->t->n && s->t->jobs[s->next_job].submit <= now; s->next_job++) {
		struct sim_job *j = &s->t->jobs[s->next_job];
		if (j->skipped)
			continue;
		struct egs_gpr *g = egs_gpr_new();
		snprintf(g->id, sizeof(g->id), "gpr-%08zx-0000", s->next_job);
		egs_strlcpy(g->name, j->name, sizeof(g->name));
		snprintf(g->workspace, sizeof(g->workspace), "ws-%ld", j->workspace);
		g->gpus_per_node = j->gpus_per_node;
		g->node_count = j->node_count;
		g->memory_mib = 1024;
		g->exit_duration_s = j->window;
		g->priority = j->priority;
		EGS_ASSERT(egs_gpr_submit(s->st, g, now) == EGS_OK);
		j->g = g;
		egs_map_put(&s->by_id, g->id, j);
	}
	return first;
}

/* What a create would have answered: the estimate right after the submission's plan. */
static void note_estimates(struct sim *s, size_t first, int64_t now)
{
	for (size_t i = first; i < s->next_job; i++) {
		struct sim_job *j = &s->t->jobs[i];
		if (j->skipped)
			continue;
		if (j->g->state == EGS_GPR_QUEUED) {
			j->est_known = j->g->est_start != 0;
			j->est = j->g->est_start;
		} else { /* started at once */
			j->est_known = true;
			j->est = now;
		}
	}
}

/* Records the GPRs that became Provisioned and books their early release. */
static void note_starts(struct sim *s)
{
	for (size_t i = 0; i < s->st->active.len; i++) {
		struct egs_gpr *g = s->st->active.items[i];
		if (g->state != EGS_GPR_PROVISIONED)
			continue;
		struct sim_job *j = egs_map_get(&s->by_id, g->id);
		if (j->start)
			continue;
		j->start = g->start_ts;
		if (!s->o->hold_window && j->duration < j->window)
			rel_push(&s->rel, j->start + j->duration, j);
	}
}

static void count_events(struct sim *s)
{
	for (size_t i = 0; i < s->st->new_events.len; i++) {
		const struct egs_event *ev = s->st->new_events.items[i];
		if (strcmp(ev->reason, "NodeReplaced") == 0)
			s->r->replaced++;
		else if (strcmp(ev->reason, "NodeFailed") == 0)
			s->r->node_failed++;
	}
}

static void step(struct sim *s, int64_t now)
{
	heartbeats(s, now);
	failures(s, now);
	releases(s, now);
	agent(s, now);
	size_t first = arrivals(s, now);
	for (bool planned = false;; planned = true) {
		s->next_sched = egs_sched_run(s->st, now, NULL);
		s->r->sched_runs++;
		if (!planned)
			note_estimates(s, first, now);
		if (!agent(s, now))
			break;
	}
	note_starts(s);
	count_events(s);
	egs_state_clear_changes(s->st);
	s->r->steps++;
}

static int64_t next_event(const struct sim *s, int64_t now)
{
	int64_t next = s->next_fail;
	if (s->next_job < s->t->n && s->t->jobs[s->next_job].submit < next)
		next = s->t->jobs[s->next_job].submit;
	if (s->rel.n && s->rel.v[0].t < next)
		next = s->rel.v[0].t;
	for (long i = 0; i < s->nnodes; i++)
		if (s->recover_at[i] && s->recover_at[i] < next)
			next = s->recover_at[i];
	/* Beyond half the heartbeat timeout only the staleness wake-up is left: nothing real is due. */
	if (s->next_sched < now + SIM_HEARTBEAT_TIMEOUT / 2 && s->next_sched < next)
		next = s->next_sched;
	return next;
}

static bool finished(const struct sim *s)
{
	for (size_t i = s->next_job; i < s->t->n; i++)
		if (!s->t->jobs[i].skipped)
			return false;
	return egs_queue_len(&s->st->queue) == 0 && s->st->active.len == 0;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Copies what the state knows into the jobs. */
static void collect(struct sim *s)
{
	struct sim_result *r = s->r;
	r->last_end = r->first_submit;
	for (size_t i = 0; i < s->t->n; i++) {
		struct sim_job *j = &s->t->jobs[i];
		if (j->skipped) {
			r->skipped++;
			continue;
		}
		r->replayed++;
		if (j->g) {
			j->start = j->g->start_ts;
			j->end = j->g->completion_ts;
			if (j->end > r->last_end)
				r->last_end = j->end;
		}
	}
}

bool sim_replay(struct sim_trace *t, const struct sim_opts *o, struct sim_result *r)
{
	struct sim s = { .o = o, .t = t, .r = r, .nnodes = o->nodes, .next_fail = EGS_NEVER };
	struct egs_state_config cfg = { .heartbeat_timeout_s = SIM_HEARTBEAT_TIMEOUT,
					.event_retention = 128,
					.fair_half_life_s = o->fair_half_life_s,
					.backfill = o->backfill ? 1 : 0 };
	memset(r, 0, sizeof(*r));
	s.st = egs_calloc(1, sizeof(*s.st));
	egs_state_init(s.st, &cfg);
	egs_map_init(&s.by_id);
	add_inventory(&s);
	egs_state_clear_changes(s.st);
	size_t first = 0;
	for (size_t i = 0; i < t->n; i++)
		t->jobs[i].skipped = t->jobs[i].node_count > o->nodes;
	while (first < t->n && t->jobs[first].skipped)
		first++;
	double t0 = wall();
	if (first < t->n) {
		int64_t now = t->jobs[first].submit;
		r->first_submit = now;
		if (o->fail_every_s > 0)
			s.next_fail = now + o->fail_every_s;
		for (;;) {
			step(&s, now);
			if (finished(&s))
				break;
			int64_t next = next_event(&s, now);
			if (next == EGS_NEVER) {
				r->stuck = true;
				break;
			}
			EGS_ASSERT(next > now);
			now = next;
		}
	}
	r->wall_s = wall() - t0;
	collect(&s);
	free(s.rel.v);
	free(s.recover_at);
	free(s.nodes);
	egs_map_cleanup(&s.by_id);
	r->st = s.st;
	return !r->stuck;
}

void sim_result_cleanup(struct sim_result *r, struct sim_trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		t->jobs[i].g = NULL;
	if (r->st)
		egs_state_cleanup(r->st);
	free(r->st);
	free(r->fail_times);
	memset(r, 0, sizeof(*r));
}
