/*
 * test_sched.c: the GPR lifecycle and the planner, driven only through the public functions of
 * core/state.h, core/gpr.h and core/sched.h with a fake clock.  The tests play the cluster agents
 * themselves (ack_all answers every attach and detach the control plane wants, as egsd's action
 * list would hand them out) and check states, nodes, estimates, events and the dirty log.
 *
 * What is covered: the happy path with its events and dirty log; the 25/50/75% marks; one
 * provisioned GPR per workspace; priority order and FIFO; reservations that stop a later GPR from
 * starving the head; estimates that hold exactly on random workloads with no arrivals ahead and no
 * early release; early release only ever moving estimates earlier; attach failures, retries, Error
 * and requeueOnFailure; the provisioning time-out and the wake-up for it; the error codes of
 * cancel, release and edit in every state; node matching and preferred clusters; capacity reasons
 * naming the field; stale nodes; the hypothetical estimate and the appended placement agreeing with
 * the full plan.
 *
 * Random workloads use a fixed-seed xorshift generator, so a failure reproduces exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fair.h"
#include "core/gpr.h"
#include "core/sched.h"
#include "core/state.h"
#include "core/util.h"
#include "rng.h"

#define T0 1800000000LL /* 2027-01-15: any fixed "now" will do */
#define LONG_HEARTBEAT (1000LL * 24 * 3600)

/* When not 0, sched_run walks in slices of that many GPRs (egs_sched_begin/step/end, egsd's way
 * on a deep queue) instead of egs_sched_run: test_sliced_runs reruns the exactness tests so. */
static size_t slice_max;

/* The full scheduler run, without keeping the plan for egs_sched_append. */
static int64_t sched_run(struct egs_state *st, int64_t now)
{
	if (!slice_max)
		return egs_sched_run(st, now, NULL);
	struct egs_plan *p = egs_plan_new();
	int64_t next;
	egs_sched_begin(st, now, p);
	do {
		size_t steps = 0;
		while (!egs_sched_step(p, slice_max))
			assert_true(egs_sched_walking(p) && ++steps < 1000000);
		assert_false(egs_sched_walking(p));
	} while (!egs_sched_end(p, &next));
	assert_false(egs_sched_stale(p)); /* nothing else ran between the slices */
	egs_plan_free(p);
	return next;
}

/* ---- building a world ---- */

/*
 * Everything a test allocates is registered here and freed by the per-test teardown, which cmocka
 * runs even when an assertion fails, so a failing test reports its failure and not a leak.
 * done() frees one object early (the usual end of a test or of one seed's iteration).
 */
struct deferred {
	void (*fn)(void *);
	void *p;
};
static struct deferred deferred[1024];
static size_t ndeferred;

static void *defer(void (*fn)(void *), void *p)
{
	assert_true(ndeferred < EGS_ARRAY_LEN(deferred));
	deferred[ndeferred++] = (struct deferred){ fn, p };
	return p;
}

static void done(void *p)
{
	for (size_t i = ndeferred; i-- > 0;) {
		if (deferred[i].p == p) {
			struct deferred d = deferred[i];
			memmove(&deferred[i], &deferred[i + 1], (ndeferred - i - 1) * sizeof(deferred[0]));
			ndeferred--;
			d.fn(d.p);
			return;
		}
	}
	fail_msg("done(%p): not registered", p);
}

static int backfill_cfg; /* egs_state_config.backfill of the states state_new makes */

static int teardown(void **state)
{
	(void)state;
	backfill_cfg = 0;
	while (ndeferred > 0) {
		struct deferred d = deferred[--ndeferred];
		d.fn(d.p);
	}
	return 0;
}

static void free_state(void *p)
{
	egs_state_cleanup(p);
	free(p);
}

static void free_gpr(void *p)
{
	egs_gpr_free(p);
}

static void free_plan(void *p)
{
	egs_plan_free(p);
}

/* The fair-share half-life of the states state_new makes (0 = the default; < 0 = off). */
static int64_t fair_half_life;

/* A state with the given settings (0 = the default), freed by done() or the teardown. */
static struct egs_state *state_new(int retry_limit, int64_t provision_timeout_s, int64_t heartbeat_timeout_s)
{
	struct egs_state_config cfg = { .retry_limit = retry_limit,
					.provision_timeout_s = provision_timeout_s,
					.heartbeat_timeout_s = heartbeat_timeout_s,
					.event_retention = 0,
					.fair_half_life_s = fair_half_life,
					.backfill = backfill_cfg };
	struct egs_state *st = egs_calloc(1, sizeof(*st));
	egs_state_init(st, &cfg);
	return defer(free_state, st);
}

static struct egs_cluster *add_cluster(struct egs_state *st, const char *name)
{
	struct egs_cluster *c = egs_state_cluster(st, name);
	if (c)
		return c;
	c = egs_calloc(1, sizeof(*c));
	egs_strlcpy(c->name, name, sizeof(c->name));
	egs_strlcpy(c->project, "avesha", sizeof(c->project));
	assert_int_equal(egs_state_add_cluster(st, c), EGS_OK);
	return c;
}

static struct egs_node *add_node(struct egs_state *st, const char *cluster, const char *name, const char *shape,
				 const char *itype, int gpus, int64_t mem_mib, int64_t now)
{
	add_cluster(st, cluster);
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->cluster, cluster, sizeof(n->cluster));
	egs_strlcpy(n->gpu_shape, shape, sizeof(n->gpu_shape));
	egs_strlcpy(n->instance_type, itype, sizeof(n->instance_type));
	n->gpu_count = gpus;
	n->memory_mib = mem_mib;
	n->health = EGS_HEALTH_HEALTHY;
	n->last_heartbeat = now;
	assert_int_equal(egs_state_add_node(st, n), EGS_OK);
	return n;
}

/* A node of the common kind: 8 H100s of 80 GB on a p5.48xlarge. */
static struct egs_node *add_h100(struct egs_state *st, const char *cluster, const char *name, int64_t now)
{
	return add_node(st, cluster, name, "NVIDIA-H100-80GB-HBM3", "p5.48xlarge", 8, 81920, now);
}

/* Adds count H100 nodes to cluster, named n<first> .. n<first + count - 1> in that order; out (may
 * be NULL) receives them. */
static void add_h100s(struct egs_state *st, const char *cluster, int first, int count, struct egs_node **out,
		      int64_t now)
{
	for (int i = 0; i < count; i++) {
		char name[16];
		snprintf(name, sizeof(name), "n%d", first + i);
		struct egs_node *n = add_h100(st, cluster, name, now);
		if (out)
			out[i] = n;
	}
}

/* Adds a workspace over the given clusters (a NULL-terminated list). */
static struct egs_workspace *add_ws(struct egs_state *st, const char *name, ...)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlcpy(w->project, "avesha", sizeof(w->project));
	va_list ap;
	va_start(ap, name);
	for (const char *c; (c = va_arg(ap, const char *));)
		egs_strlist_add(&w->clusters, c);
	va_end(ap);
	assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
	return w;
}

/* A validated-looking GPR, not yet submitted (the caller owns it until egs_gpr_submit). */
static struct egs_gpr *mk_gpr(const char *id, const char *ws, int nodes, int gpus, int64_t dur, int prio)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->name, id, sizeof(g->name));
	egs_strlcpy(g->workspace, ws, sizeof(g->workspace));
	g->node_count = nodes;
	g->gpus_per_node = gpus;
	g->memory_mib = 0;
	g->exit_duration_s = dur;
	g->priority = prio;
	return g;
}

static struct egs_gpr *submit(struct egs_state *st, struct egs_gpr *g, int64_t now)
{
	assert_int_equal(egs_gpr_submit(st, g, now), EGS_OK);
	return g;
}

static bool node_free(const struct egs_node *n)
{
	return !n->gpr_id[0] && !n->attached_gpr[0];
}

/* ---- events ---- */

/* Counts events of this turn (not yet committed) with the given reason about object (NULL = any). */
static size_t count_new_events(const struct egs_state *st, const char *reason, const char *object)
{
	size_t c = 0;
	for (size_t i = 0; i < st->new_events.len; i++) {
		const struct egs_event *ev = st->new_events.items[i];
		if (strcmp(ev->reason, reason) == 0 && (!object || strcmp(ev->object_name, object) == 0))
			c++;
	}
	return c;
}

/* Counts all events so far, committed (in the ring) or not. */
static size_t count_events(const struct egs_state *st, const char *reason, const char *object)
{
	size_t c = count_new_events(st, reason, object);
	for (size_t i = 0; i < st->events_len; i++) {
		const struct egs_event *ev = st->events[(st->events_head + i) % st->cfg.event_retention];
		if (strcmp(ev->reason, reason) == 0 && (!object || strcmp(ev->object_name, object) == 0))
			c++;
	}
	return c;
}

static const struct egs_event *last_new_event(const struct egs_state *st, const char *reason, const char *object)
{
	for (size_t i = st->new_events.len; i-- > 0;) {
		const struct egs_event *ev = st->new_events.items[i];
		if (strcmp(ev->reason, reason) == 0 && (!object || strcmp(ev->object_name, object) == 0))
			return ev;
	}
	return NULL;
}

static bool in_changes(const struct egs_state *st, const void *obj)
{
	for (size_t i = 0; i < st->changes.len; i++)
		if (((const struct egs_change *)st->changes.items[i])->obj == obj)
			return true;
	return false;
}

/* ---- playing the agents ---- */

static bool wants_nodes(const struct egs_gpr *g)
{
	return g && (g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED);
}

/* Acknowledges, successfully and at now, every attach and detach the control plane wants (the
 * rule of egsd's action list: attach a node assigned to a GPR that wants it, detach one attached to
 * a GPR that no longer does).  Returns how many acks it sent. */
static size_t ack_all(struct egs_state *st, int64_t now)
{
	size_t acks = 0;
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		char id[EGS_ID_MAX];
		if (n->attached_gpr[0]) {
			struct egs_gpr *g = egs_state_gpr(st, n->attached_gpr);
			if (wants_nodes(g) && strcmp(n->gpr_id, g->id) == 0)
				continue;
			egs_strlcpy(id, n->attached_gpr, sizeof(id));
			egs_gpr_detach_result(st, n, id, true, NULL, now);
			acks++;
		} else if (n->gpr_id[0] && wants_nodes(egs_state_gpr(st, n->gpr_id))) {
			egs_strlcpy(id, n->gpr_id, sizeof(id));
			egs_gpr_attach_result(st, n, id, true, NULL, now);
			acks++;
		}
	}
	return acks;
}

/* Runs the scheduler and the agents at now until nothing more happens; returns the next due time. */
static int64_t settle(struct egs_state *st, int64_t now)
{
	for (int round = 0;; round++) {
		assert_true(round < 50);
		int64_t next = sched_run(st, now);
		if (!ack_all(st, now))
			return next;
	}
}

/* Settles turn after turn from t while g is still queued; returns the time of the next turn. */
static int64_t settle_while_queued(struct egs_state *st, const struct egs_gpr *g, int64_t t)
{
	while (g->state == EGS_GPR_QUEUED)
		t = settle(st, t);
	return t;
}

/* Structural invariants of the state that every test may rely on. */
static void check_consistency(const struct egs_state *st)
{
	void *v;
	/* Each node is held by at most the GPR that lists it, and only by an active one. */
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		if (!n->gpr_id[0])
			continue;
		const struct egs_gpr *g = egs_state_gpr(st, n->gpr_id);
		assert_non_null(g);
		if (egs_gpr_is_active(g))
			assert_true(egs_strlist_has(&g->nodes, n->key));
	}
	/* Queue and active list hold exactly the GPRs in those states; one active GPR per workspace. */
	size_t queued = 0, active = 0;
	struct egs_map ws_active;
	egs_map_init(&ws_active);
	for (size_t i = 0; egs_map_next(&st->gprs, &i, NULL, &v);) {
		const struct egs_gpr *g = v;
		assert_int_equal(egs_queue_contains(&st->queue, g), g->state == EGS_GPR_QUEUED);
		queued += g->state == EGS_GPR_QUEUED;
		if (!egs_gpr_is_active(g))
			continue;
		active++;
		assert_null(egs_map_get(&ws_active, g->workspace));
		egs_map_put(&ws_active, g->workspace, (void *)g);
		if (g->state == EGS_GPR_RELEASING)
			continue;
		/* Provisioning and Provisioned GPRs hold node_count matching nodes of one cluster. */
		assert_int_equal(g->nodes.n, (size_t)g->node_count);
		const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
		for (size_t j = 0; j < g->nodes.n; j++) {
			const struct egs_node *n = egs_map_get(&st->nodes, g->nodes.v[j]);
			assert_non_null(n);
			assert_string_equal(n->gpr_id, g->id);
			assert_string_equal(n->cluster, g->cluster);
			assert_true(egs_node_matches(g, ws, n));
		}
	}
	egs_map_cleanup(&ws_active);
	assert_int_equal(queued, egs_queue_len(&st->queue));
	assert_int_equal(active, st->active.len);
	/* Each workspace's unfinished count (policies' maxGPRs) agrees with a recount. */
	for (size_t i = 0; egs_map_next(&st->workspaces, &i, NULL, &v);) {
		const struct egs_workspace *w = v;
		int64_t n = 0;
		void *u;
		for (size_t j = 0; egs_map_next(&st->gprs, &j, NULL, &u);)
			n += egs_gpr_state_unfinished(((const struct egs_gpr *)u)->state) &&
			     !strcmp(((const struct egs_gpr *)u)->workspace, w->name);
		assert_int_equal(w->unfinished, n);
	}
}

/* ---- the happy path ---- */

static void test_lifecycle_one_node(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, 0); /* defaults: heartbeat 15 s, provision time-out 300 s */
	assert_int_equal(st->cfg.retry_limit, 3);
	assert_int_equal(st->cfg.heartbeat_timeout_s, 15);
	int64_t now = T0;
	struct egs_node *n = add_h100(st, "worker-1", "h100-node-1", now);
	add_ws(st, "ws1", "worker-1", NULL);
	egs_state_clear_changes(st);

	struct egs_gpr *g = submit(st, mk_gpr("gpr-1", "ws1", 1, 8, 3600, 150), now);
	assert_int_equal(g->state, EGS_GPR_QUEUED);
	assert_int_equal(g->created_at, now);
	assert_true(g->seq > 0);
	assert_true(egs_queue_contains(&st->queue, g));
	assert_int_equal(count_new_events(st, "Queued", "gpr-1"), 1);
	assert_true(g->dirty);
	egs_state_clear_changes(st);
	assert_false(g->dirty);

	/* The plan starts it at once on the only node. */
	int64_t next = sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	assert_string_equal(n->gpr_id, "gpr-1");
	assert_string_equal(n->attached_gpr, "");
	assert_int_equal(n->allocated_at, now);
	assert_int_equal(g->nodes.n, 1);
	assert_string_equal(g->nodes.v[0], "worker-1/h100-node-1");
	assert_string_equal(g->cluster, "worker-1");
	assert_false(egs_queue_contains(&st->queue, g));
	assert_int_equal(st->active.len, 1);
	assert_int_equal(count_new_events(st, "Provisioning", "gpr-1"), 1);
	/* Both changed objects are in this turn's log, once each. */
	assert_true(g->dirty);
	assert_true(n->dirty);
	assert_true(in_changes(st, g));
	assert_true(in_changes(st, n));
	assert_int_equal(st->changes.len, 2);
	/* Next due: the node's heartbeat going stale (16 s) comes before the 300 s time-out. */
	assert_int_equal(next, now + 16);
	check_consistency(st);
	egs_state_clear_changes(st);

	/* The agent attaches 5 s later: the window runs from then for exactly the duration. */
	now += 5;
	n->last_heartbeat = now;
	egs_gpr_attach_result(st, n, "gpr-1", true, NULL, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONED);
	assert_int_equal(g->start_ts, now);
	assert_int_equal(g->exit_at, now + 3600);
	assert_string_equal(n->attached_gpr, "gpr-1");
	assert_int_equal(count_new_events(st, "Provisioned", "gpr-1"), 1);
	const struct egs_event *ev = last_new_event(st, "Provisioned", "gpr-1");
	assert_string_equal(ev->type, "Normal");
	assert_string_equal(ev->workspace, "ws1");
	char exit_s[32];
	egs_time_format(g->exit_at, exit_s, sizeof(exit_s));
	assert_non_null(strstr(ev->message, exit_s));
	assert_true(g->dirty);
	check_consistency(st);
	egs_state_clear_changes(st);

	/* One second before exit nothing happens; at exit it releases. */
	int64_t exit_at = g->exit_at;
	n->last_heartbeat = exit_at - 1;
	sched_run(st, exit_at - 1);
	assert_int_equal(g->state, EGS_GPR_PROVISIONED);
	n->last_heartbeat = exit_at;
	sched_run(st, exit_at);
	assert_int_equal(g->state, EGS_GPR_RELEASING);
	assert_int_equal(count_new_events(st, "Exit", "gpr-1"), 1);
	/* The node stays held until the agent confirms the detach. */
	assert_string_equal(n->gpr_id, "gpr-1");
	assert_string_equal(n->attached_gpr, "gpr-1");
	egs_state_clear_changes(st);

	egs_gpr_detach_result(st, n, "gpr-1", true, NULL, exit_at + 2);
	assert_int_equal(g->state, EGS_GPR_COMPLETE);
	assert_int_equal(g->completion_ts, exit_at + 2);
	assert_true(node_free(n));
	assert_int_equal(st->active.len, 0);
	assert_int_equal(count_new_events(st, "Complete", "gpr-1"), 1);
	assert_true(n->dirty);
	assert_true(g->dirty);
	assert_true(egs_gpr_state_terminal(g->state));
	check_consistency(st);
	done(st);
}

static void test_idle_run_changes_nothing(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n = add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	submit(st, mk_gpr("a", "ws1", 1, 8, 3600, 100), now);
	struct egs_gpr *b = submit(st, mk_gpr("b", "ws2", 1, 8, 3600, 100), now);
	settle(st, now);
	egs_state_clear_changes(st);
	assert_int_equal(b->est_start, now + 3600);

	/* Re-planning an unchanged world writes nothing: no dirty objects, no events, same estimate. */
	uint64_t gen = st->generation;
	for (int i = 0; i < 3; i++) {
		sched_run(st, now + 10 * i);
		assert_false(egs_state_has_changes(st));
		assert_int_equal(st->generation, gen);
		assert_int_equal(b->est_start, now + 3600);
		assert_false(n->dirty);
	}
	done(st);
}

static void test_progress_marks(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *g = submit(st, mk_gpr("gpr-p", "ws1", 1, 1, 4000, 100), now);
	int64_t next = settle(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONED);
	int64_t s = g->start_ts;
	assert_int_equal(s, now);
	/* The scheduler asks to be woken at each mark, in turn. */
	assert_int_equal(next, s + 1000);
	egs_state_clear_changes(st);

	next = sched_run(st, s + 999);
	assert_int_equal(count_events(st, "Progress25", "gpr-p"), 0);
	assert_int_equal(next, s + 1000);
	assert_int_equal(g->marks_sent, 0);

	next = sched_run(st, s + 1000);
	assert_int_equal(count_new_events(st, "Progress25", "gpr-p"), 1);
	assert_int_equal(count_events(st, "Progress50", "gpr-p"), 0);
	assert_int_equal(next, s + 2000);
	assert_true(g->dirty); /* marks_sent is persisted, so a restart does not repeat them */
	const struct egs_event *ev = last_new_event(st, "Progress25", "gpr-p");
	assert_non_null(strstr(ev->message, "25%"));
	egs_state_clear_changes(st);

	/* Again at the same time and a little later: no repeat, nothing written. */
	sched_run(st, s + 1000);
	sched_run(st, s + 1500);
	assert_int_equal(count_events(st, "Progress25", "gpr-p"), 1);
	assert_false(egs_state_has_changes(st));

	next = sched_run(st, s + 2000);
	assert_int_equal(count_new_events(st, "Progress50", "gpr-p"), 1);
	assert_int_equal(next, s + 3000);
	egs_state_clear_changes(st);
	next = sched_run(st, s + 3000);
	assert_int_equal(count_new_events(st, "Progress75", "gpr-p"), 1);
	assert_int_equal(next, s + 4000);
	egs_state_clear_changes(st);
	sched_run(st, s + 3999);
	settle(st, s + 4000);
	assert_int_equal(g->state, EGS_GPR_COMPLETE);
	assert_int_equal(count_events(st, "Progress25", "gpr-p"), 1);
	assert_int_equal(count_events(st, "Progress50", "gpr-p"), 1);
	assert_int_equal(count_events(st, "Progress75", "gpr-p"), 1);
	assert_int_equal(g->marks_sent, (1u << 1) | (1u << 2) | (1u << 3));

	/* A scheduler that wakes late sends the marks it missed, once each, in one run. */
	struct egs_gpr *h = submit(st, mk_gpr("gpr-q", "ws1", 1, 1, 400, 100), s + 5000);
	settle(st, s + 5000);
	assert_int_equal(h->state, EGS_GPR_PROVISIONED);
	egs_state_clear_changes(st);
	sched_run(st, h->start_ts + 350);
	assert_int_equal(count_new_events(st, "Progress25", "gpr-q"), 1);
	assert_int_equal(count_new_events(st, "Progress50", "gpr-q"), 1);
	assert_int_equal(count_new_events(st, "Progress75", "gpr-q"), 1);
	sched_run(st, h->start_ts + 399);
	assert_int_equal(count_events(st, "Progress75", "gpr-q"), 1);
	done(st);
}

/* ---- workspace rule, priorities, reservations ---- */

static void test_one_gpr_per_workspace(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n1 = add_h100(st, "c1", "n1", now);
	struct egs_node *n2 = add_h100(st, "c1", "n2", now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *a = submit(st, mk_gpr("a", "ws1", 1, 8, 3600, 100), now);
	struct egs_gpr *b = submit(st, mk_gpr("b", "ws1", 1, 8, 1800, 100), now);

	sched_run(st, now);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(b->state, EGS_GPR_QUEUED);
	/* b waits for a's window, though a node is free. */
	assert_true(node_free(n1) != node_free(n2));
	assert_int_equal(b->est_start, now + 3600);

	/* The attach lands 7 s later: b's estimate follows a's real exit time. */
	now += 7;
	assert_int_equal(ack_all(st, now), 1);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	sched_run(st, now);
	assert_int_equal(b->state, EGS_GPR_QUEUED);
	assert_int_equal(b->est_start, a->exit_at);
	assert_int_equal(b->delayed_count, 0); /* 7 s is not a delay worth reporting */
	check_consistency(st);

	/* At a's exit b still waits until a's nodes are back (a is Releasing), then starts. */
	int64_t exit_at = a->exit_at;
	sched_run(st, exit_at);
	assert_int_equal(a->state, EGS_GPR_RELEASING);
	assert_int_equal(b->state, EGS_GPR_QUEUED);
	check_consistency(st);
	settle(st, exit_at);
	assert_int_equal(a->state, EGS_GPR_COMPLETE);
	assert_int_equal(b->state, EGS_GPR_PROVISIONED);
	assert_int_equal(b->start_ts, exit_at);
	check_consistency(st);
	done(st);
}

static void test_priority_order(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100(st, "c1", "n1", now);
	for (int i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof(name), "ws%d", i);
		add_ws(st, name, "c1", NULL);
	}
	struct egs_gpr *hold = submit(st, mk_gpr("hold", "ws0", 1, 8, 100, 100), now);
	settle(st, now);
	assert_int_equal(hold->state, EGS_GPR_PROVISIONED);

	struct egs_gpr *low = submit(st, mk_gpr("low", "ws1", 1, 8, 100, 100), now + 1);
	settle(st, now + 1);
	assert_int_equal(low->est_start, now + 100);
	assert_int_equal(low->delayed_count, 0);

	/* A higher priority submitted later goes first and pushes low back (and that is reported in
	 * delayedCount; not written to the store for that alone: with the GPR's next change). */
	struct egs_gpr *high = submit(st, mk_gpr("high", "ws2", 1, 8, 100, 250), now + 2);
	egs_state_clear_changes(st);
	settle(st, now + 2);
	assert_int_equal(high->est_start, now + 100);
	assert_int_equal(low->est_start, now + 200);
	assert_int_equal(low->delayed_count, 1);
	assert_false(low->dirty);
	/* Equal priority: first come, first served. */
	struct egs_gpr *eq1 = submit(st, mk_gpr("eq1", "ws3", 1, 8, 100, 100), now + 3);
	struct egs_gpr *eq2 = submit(st, mk_gpr("eq2", "ws4", 1, 8, 100, 100), now + 3);
	settle(st, now + 3);
	assert_int_equal(eq1->est_start, now + 300);
	assert_int_equal(eq2->est_start, now + 400);

	/* Raising eq2 above low (still below high) moves it right behind high. */
	assert_int_equal(egs_gpr_editable(eq2), EGS_OK);
	egs_gpr_set_priority(st, eq2, 200, now + 4);
	assert_int_equal(eq2->priority, 200);
	assert_int_equal(count_new_events(st, "PriorityChanged", "eq2"), 1);
	settle(st, now + 4);
	assert_int_equal(high->est_start, now + 100);
	assert_int_equal(eq2->est_start, now + 200);
	assert_int_equal(low->est_start, now + 300);
	assert_int_equal(eq1->est_start, now + 400);
	check_consistency(st);

	/* Run it out: they start in that order, each exactly at its estimate. */
	struct egs_gpr *want[] = { high, eq2, low, eq1 };
	int64_t next = settle(st, now + 4);
	for (size_t i = 0; i < EGS_ARRAY_LEN(want); i++) {
		while (want[i]->state == EGS_GPR_QUEUED) {
			assert_true(next < now + 1000);
			next = settle(st, next);
		}
		assert_int_equal(want[i]->state, EGS_GPR_PROVISIONED);
		assert_int_equal(want[i]->start_ts, now + 100 * (int64_t)(i + 1));
		for (size_t j = i + 1; j < EGS_ARRAY_LEN(want); j++)
			assert_int_equal(want[j]->state, EGS_GPR_QUEUED);
	}
	done(st);
}

static void test_reservation_no_starvation(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n1 = add_h100(st, "c1", "n1", now);
	struct egs_node *n2 = add_h100(st, "c1", "n2", now);
	add_ws(st, "wsx", "c1", NULL);
	add_ws(st, "wsh", "c1", NULL);
	add_ws(st, "wsl", "c1", NULL);
	struct egs_gpr *x = submit(st, mk_gpr("x", "wsx", 1, 8, 1000, 100), now);
	settle(st, now);
	assert_int_equal(x->state, EGS_GPR_PROVISIONED);
	struct egs_node *busy = strcmp(n1->gpr_id, "x") == 0 ? n1 : n2;
	struct egs_node *idle = busy == n1 ? n2 : n1;
	assert_true(node_free(idle));

	/* The head needs both nodes: it waits for x, with the idle node reserved for it. */
	struct egs_gpr *head = submit(st, mk_gpr("head", "wsh", 2, 8, 500, 200), now + 10);
	settle(st, now + 10);
	assert_int_equal(head->state, EGS_GPR_QUEUED);
	int64_t head_est = head->est_start;
	assert_int_equal(head_est, x->exit_at);

	/* A later single-node request whose window would overlap the head's start must not take the
	 * idle node: the head's estimate must not move. */
	struct egs_gpr *late = submit(st, mk_gpr("late", "wsl", 1, 8, 2000, 100), now + 20);
	settle(st, now + 20);
	assert_int_equal(late->state, EGS_GPR_QUEUED);
	assert_true(node_free(idle));
	assert_int_equal(head->est_start, head_est);
	assert_int_equal(late->est_start, head_est + 500);

	/* And the plan holds: the head starts at its estimate, late right after. */
	int64_t t = now + 20;
	t = settle_while_queued(st, head, t);
	assert_int_equal(head->start_ts, head_est);
	assert_int_equal(late->state, EGS_GPR_QUEUED);
	t = settle_while_queued(st, late, t);
	assert_int_equal(late->start_ts, head_est + 500);
	check_consistency(st);
	done(st);
}

/* ---- estimates hold ---- */

struct workload {
	struct egs_gpr **g;
	int64_t *est;     /* estimate recorded right after the GPR's first plan */
	int64_t *arrive;  /* submission time */
	size_t n;
	struct egs_state *st; /* owns the GPRs submitted so far */
};

/* Frees the arrays and the GPRs not (yet) handed to the state; registered after the state, so
 * the teardown runs it first. */
static void free_workload(void *p)
{
	struct workload *wl = p;
	for (size_t i = 0; wl->g && i < wl->n; i++)
		if (wl->g[i] && egs_state_gpr(wl->st, wl->g[i]->id) != wl->g[i])
			egs_gpr_free(wl->g[i]);
	free(wl->g);
	free(wl->est);
	free(wl->arrive);
	free(wl);
}

/* Builds a random world: 2 clusters with nnodes nodes each (two shapes), nws workspaces over both. */
static void random_world(struct egs_state *st, uint64_t seed, int nnodes, int nws, bool homogeneous)
{
	rng_seed(seed);
	for (int c = 0; c < (homogeneous ? 1 : 2); c++) {
		char cl[16];
		snprintf(cl, sizeof(cl), "c%d", c);
		for (int i = 0; i < nnodes; i++) {
			char name[16];
			snprintf(name, sizeof(name), "n%d", i);
			if (homogeneous || i % 2 == 0)
				add_node(st, cl, name, "H100", "p5", 8, 81920, T0);
			else
				add_node(st, cl, name, "A100", "p4d", 4, 40960, T0);
		}
	}
	for (int w = 0; w < nws; w++) {
		char name[16];
		snprintf(name, sizeof(name), "ws%d", w);
		if (homogeneous)
			add_ws(st, name, "c0", NULL);
		else
			add_ws(st, name, "c0", "c1", NULL);
	}
}

static struct egs_gpr *random_gpr(size_t i, int nws, int maxnodes, bool homogeneous, bool same_prio)
{
	char id[EGS_ID_MAX], ws[16];
	snprintf(id, sizeof(id), "gpr-%zu", i);
	snprintf(ws, sizeof(ws), "ws%d", (int)rng_range(0, nws - 1));
	int nodes = (int)rng_range(1, maxnodes);
	int64_t dur = rng_range(1, 240) * 60 + rng_range(0, 59);
	int prio = same_prio ? 100 : (int)rng_range(1, 3) * 100;
	struct egs_gpr *g = mk_gpr(id, ws, nodes, (int)rng_range(1, 4), dur, prio);
	if (!homogeneous) {
		uint64_t r = rng_next() % 6;
		if (r == 0)
			egs_strlcpy(g->gpu_shape, "H100", sizeof(g->gpu_shape));
		else if (r == 1)
			egs_strlcpy(g->gpu_shape, "A100", sizeof(g->gpu_shape));
		else if (r == 2)
			g->gpus_per_node = 8; /* H100 only, by count */
		else if (r == 3)
			egs_strlcpy(g->cluster, "c1", sizeof(g->cluster));
		else if (r == 4)
			egs_strlist_add(&g->preferred_clusters, "c1");
	}
	return g;
}

/* random_gpr, drawn again until the inventory of st can hold it: the API refuses the others at
 * creation. */
static struct egs_gpr *random_feasible(struct egs_state *st, size_t i, int nws, int maxnodes, bool homogeneous,
				       bool same_prio)
{
	for (;;) {
		struct egs_gpr *g = random_gpr(i, nws, maxnodes, homogeneous, same_prio);
		const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
		if (egs_sched_capacity(st, g, ws, NULL, 0) >= (size_t)g->node_count)
			return g;
		egs_gpr_free(g);
	}
}

/* Submits n random GPRs the inventory can hold into g[] at now (the random early-release and cancel
 * tests' workload: 4 workspaces, up to 3 nodes on one pool, 2 on mixed nodes). */
static void submit_random(struct egs_state *st, struct egs_gpr **g, size_t n, bool homogeneous, int64_t now)
{
	for (size_t i = 0; i < n; i++)
		g[i] = submit(st, random_feasible(st, i, 4, homogeneous ? 3 : 2, homogeneous, false), now);
}

static bool all_done(const struct workload *wl)
{
	for (size_t i = 0; i < wl->n; i++)
		if (!egs_gpr_state_terminal(wl->g[i]->state))
			return false;
	return true;
}

/* Records the estimate of every GPR submitted at `now` after its first plan. */
static void record_estimates(struct workload *wl, int64_t now)
{
	for (size_t i = 0; i < wl->n; i++) {
		if (wl->arrive[i] != now)
			continue;
		struct egs_gpr *g = wl->g[i];
		if (g->state == EGS_GPR_QUEUED) {
			assert_true(g->est_start >= now);
			wl->est[i] = g->est_start;
		} else {
			assert_true(g->state == EGS_GPR_PROVISIONED); /* started and attached at once */
			wl->est[i] = now;
		}
	}
}

/* What run_workload saw, summed over its runs: waits (start - arrival) and how many, and the
 * spans (first arrival to last completion) and busy node-seconds, for utilization. */
static double wl_wait_sum, wl_span_sum, wl_busy_sum;
static size_t wl_jobs;

/* GPRs that started later than estimated because fair share put a later arrival ahead of them. */
static size_t fair_overtakes;

/* True when fairness is on and a GPR that arrived after wl->g[i] was ordered before it: only such
 * an arrival (a higher priority, or the same priority from a workspace that used fewer GPU-hours)
 * may move a start. */
static bool overtaken(const struct workload *wl, size_t i)
{
	const struct egs_gpr *g = wl->g[i];
	if (wl->st->cfg.fair_half_life_s <= 0)
		return false;
	for (size_t j = 0; j < wl->n; j++) {
		const struct egs_gpr *h = wl->g[j];
		if (wl->arrive[j] > wl->arrive[i] &&
		    (h->priority > g->priority || (h->priority == g->priority && h->fair < g->fair)))
			return true;
	}
	return false;
}

/*
 * Runs a workload of n GPRs to completion.  all_at_once: every GPR arrives at T0 with random
 * priorities; otherwise they trickle in over a few hours at one priority (each newcomer is last
 * in line, so it changes no one's plan).  With no early release and attaches acknowledged at once,
 * every GPR must start exactly at the estimate it was given after its first plan.
 */
static size_t run_workload(uint64_t seed, size_t n, int nnodes, int nws, int maxnodes, bool homogeneous,
			   bool all_at_once)
{
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	random_world(st, seed, nnodes, nws, homogeneous);
	struct workload *wlp = egs_calloc(1, sizeof(*wlp));
	*wlp = (struct workload){ egs_calloc(n, sizeof(struct egs_gpr *)), egs_calloc(n, sizeof(int64_t)),
				  egs_calloc(n, sizeof(int64_t)), n, st };
	defer(free_workload, wlp);
	struct workload wl = *wlp; /* the arrays are shared: wlp frees them */
	int64_t t = T0;
	for (size_t i = 0; i < n; i++) {
		wl.g[i] = random_feasible(st, i, nws, maxnodes, homogeneous, !all_at_once);
		if (!all_at_once && i > 0)
			t += rng_range(0, 1800);
		wl.arrive[i] = t;
	}
	size_t next_arrival = 0;
	int64_t now = T0;
	for (int steps = 0; !all_done(&wl) || next_arrival < n; steps++) {
		assert_true(steps < 100000);
		assert_true(now < T0 + LONG_HEARTBEAT); /* the nodes never go stale in this test */
		while (next_arrival < n && wl.arrive[next_arrival] == now) {
			submit(st, wl.g[next_arrival], now);
			next_arrival++;
		}
		int64_t next = settle(st, now);
		record_estimates(&wl, now);
		check_consistency(st);
		egs_state_clear_changes(st);
		if (next_arrival < n && wl.arrive[next_arrival] < next)
			next = wl.arrive[next_arrival];
		assert_true(next > now);
		now = next;
	}
	size_t wrong = 0;
	int64_t last = T0;
	for (size_t i = 0; i < n; i++) {
		struct egs_gpr *g = wl.g[i];
		assert_int_equal(g->state, EGS_GPR_COMPLETE);
		wl_wait_sum += (double)(g->start_ts - wl.arrive[i]);
		wl_busy_sum += (double)g->node_count * (double)g->exit_duration_s;
		wl_jobs++;
		if (g->completion_ts > last)
			last = g->completion_ts;
		if (g->start_ts != wl.est[i] && overtaken(&wl, i)) {
			/* With backfill an arrival ahead may also open a hole that moves a start earlier. */
			if (!backfill_cfg)
				assert_true(g->start_ts > wl.est[i]);
			fair_overtakes++;
			continue;
		}
		if (g->start_ts != wl.est[i] && wrong++ < 2) {
			fprintf(stderr, "seed %llu: %s (prio %d, %d node(s), %s) estimated %+lld, started %+lld\n",
				(unsigned long long)seed, g->id, g->priority, g->node_count, g->workspace,
				(long long)(wl.est[i] - T0), (long long)(g->start_ts - T0));
		}
		assert_int_equal(g->completion_ts, g->start_ts + g->exit_duration_s);
	}
	wl_span_sum += (double)(last - T0) * (double)nnodes * (homogeneous ? 1 : 2);
	done(wlp);
	done(st);
	return wrong;
}

/* One cluster of identical nodes (the brief's shape: 30 GPRs, 4 nodes, 2 workspaces; and more). */
static void test_estimates_hold_one_shape(void **state)
{
	(void)state;
	fair_half_life = -1; /* off: each newcomer of one priority is last in line */
	size_t wrong = 0;
	for (uint64_t seed = 1; seed <= 8; seed++) {
		wrong += run_workload(seed, 30, 4, 2, 2, true, true);
		wrong += run_workload(seed, 30, 4, 5, 3, true, true);
		wrong += run_workload(seed, 30, 4, 5, 2, true, false);
	}
	fair_half_life = 0;
	assert_int_equal(wrong, 0);
}

/* Two clusters with two node shapes each, requests pinned by shape, GPU count or cluster. */
static void test_estimates_hold_mixed_nodes(void **state)
{
	(void)state;
	fair_half_life = -1;
	size_t wrong = 0;
	for (uint64_t seed = 1; seed <= 8; seed++) {
		wrong += run_workload(seed, 40, 3, 4, 2, false, true);
		wrong += run_workload(seed, 40, 3, 4, 2, false, false); /* trickling arrivals */
	}
	fair_half_life = 0;
	if (wrong)
		fprintf(stderr, "%zu GPR(s) did not start at their estimate\n", wrong);
	assert_int_equal(wrong, 0);
}

/* Fair share on (the default): newcomers of one priority from workspaces that used less go ahead.
 * A start may then move, but only later, and only when such a newcomer overtook it. */
static void test_estimates_hold_with_fair_share(void **state)
{
	(void)state;
	fair_overtakes = 0;
	size_t wrong = 0;
	for (uint64_t seed = 1; seed <= 8; seed++) {
		wrong += run_workload(seed, 30, 4, 5, 2, true, false);
		wrong += run_workload(seed, 40, 3, 4, 2, false, false);
	}
	assert_int_equal(wrong, 0);
	assert_true(fair_overtakes > 0); /* fairness did reorder some of these workloads */
}

/* The fair-share key: GPU-hours decayed with the half-life (one day by default), dated at the end
 * of use; the order it gives does not change as time passes. */
static void test_fair_share_key(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	const int64_t day = 86400;
	struct egs_gpr *a = mk_gpr("gpr-a", "wa", 1, 2, 4 * 3600, 100); /* 2 GPUs x 4h = 8 GPU-hours */
	struct egs_gpr *b = mk_gpr("gpr-b", "wb", 1, 1, 2 * 3600, 100); /* 1 GPU x 2h = 2 GPU-hours */
	defer(free_gpr, a);
	defer(free_gpr, b);
	assert_true(egs_fair_key(st, "wa") == -INFINITY);
	a->start_ts = T0;
	egs_fair_charge(st, a, T0 + 4 * 3600);
	b->start_ts = T0 + 3 * day + 2 * 3600;
	egs_fair_charge(st, b, T0 + 3 * day + 4 * 3600);
	int64_t now = T0 + 3 * day + 4 * 3600;
	/* wa: 8 GPU-hours three half-lives ago = 1; wb: 2 GPU-hours now = 2: wa goes first. */
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wa"), now) - 1.0) < 1e-9);
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wb"), now) - 2.0) < 1e-9);
	assert_true(egs_fair_key(st, "wa") < egs_fair_key(st, "wb"));
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wb"), now + day) - 1.0) < 1e-9);
	/* More use adds up: another 8 GPU-hours of wa now makes it 9. */
	a->start_ts = now - 4 * 3600;
	egs_fair_charge(st, a, now);
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wa"), now) - 9.0) < 1e-9);
	assert_true(egs_fair_key(st, "wa") > egs_fair_key(st, "wb"));
	/* A GPR that never started charges nothing; a workspace without use has no key. */
	a->start_ts = 0;
	egs_fair_charge(st, a, now);
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wa"), now) - 9.0) < 1e-9);
	assert_true(egs_fair_decayed(st, egs_fair_key(st, "nobody"), now) == 0);
	/* Years of keys stay finite (log domain). */
	b->start_ts = T0 + 3000 * day;
	egs_fair_charge(st, b, T0 + 3000 * day + 3600);
	assert_true(isfinite(egs_fair_key(st, "wb")));
	assert_true(fabs(egs_fair_decayed(st, egs_fair_key(st, "wb"), T0 + 3000 * day + 3600) - 1.0) < 1e-6);
}

/* Equal priorities through the scheduler: the workspace that used less starts first even though it
 * asked later; with fairness off it is first come, first served. */
static void test_fair_share_order(void **state)
{
	(void)state;
	for (int on = 0; on <= 1; on++) {
		fair_half_life = on ? 0 : -1;
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		fair_half_life = 0;
		add_h100(st, "c1", "n1", T0);
		add_ws(st, "heavy", "c1", NULL);
		add_ws(st, "light", "c1", NULL);
		add_ws(st, "other", "c1", NULL);
		int64_t now = T0;
		struct egs_gpr *h1 = submit(st, mk_gpr("gpr-h1", "heavy", 1, 8, 3600, 100), now);
		settle(st, now);
		assert_int_equal(h1->state, EGS_GPR_PROVISIONED);
		now += 3600;
		settle(st, now); /* h1 ends: heavy has used 8 GPU-hours */
		assert_int_equal(h1->state, EGS_GPR_COMPLETE);
		struct egs_gpr *o1 = submit(st, mk_gpr("gpr-o1", "other", 1, 8, 3600, 100), now);
		settle(st, now);
		assert_int_equal(o1->state, EGS_GPR_PROVISIONED);
		now += 60;
		struct egs_gpr *h4 = submit(st, mk_gpr("gpr-h4", "heavy", 1, 8, 3600, 100), now);
		struct egs_gpr *l1 = submit(st, mk_gpr("gpr-l1", "light", 1, 8, 3600, 100), now);
		settle(st, now);
		int64_t first = T0 + 2 * 3600, second = T0 + 3 * 3600;
		assert_int_equal(on ? l1->est_start : h4->est_start, first);
		assert_int_equal(on ? h4->est_start : l1->est_start, second);
		egs_state_clear_changes(st);
		done(st);
	}
}

/* Wait-time queries served from the kept plan (its snapshots, or the plan itself when the request
 * goes last) give the same starts and clusters as a fresh walk, for requests of every priority and
 * fair key, at the plan's second and later (before anything falls due), with GPRs the walk just
 * started (not yet attached) in the replayed stretch. */
static void test_estimates_from_kept_plan(void **state)
{
	(void)state;
	size_t compared = 0, never = 0;
	for (uint64_t seed = 1; seed <= 4; seed++) {
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		bool homogeneous = seed % 2 == 0;
		random_world(st, seed, 6, 12, homogeneous);
		/* Some workspaces have used GPUs: their GPRs queue with larger fair keys. */
		for (int w = 0; w < 6; w++) {
			char ws[16];
			snprintf(ws, sizeof(ws), "ws%d", w);
			struct egs_gpr *u = defer(free_gpr, mk_gpr("gpr-used", ws, 1, 8, 3600, 100));
			u->start_ts = T0 - 7200 + w * 600;
			egs_fair_charge(st, u, T0 - 3600);
		}
		int64_t now = T0;
		for (size_t i = 0; i < 5000; i++) {
			struct egs_gpr *g = random_gpr(i, 12, 2, homogeneous, false);
			g->priority = (int)rng_range(1, 6) * 50;
			const struct egs_workspace *ws = egs_state_workspace(st, g->workspace);
			if (egs_sched_capacity(st, g, ws, NULL, 0) < (size_t)g->node_count) {
				egs_gpr_free(g);
				continue;
			}
			submit(st, g, now);
		}
		struct egs_plan *plan = defer(free_plan, egs_plan_new());
		int64_t next = egs_sched_run(st, now, plan); /* starts some; the agents do not answer yet */
		assert_true(next > now);
		for (int prio = 0; prio <= 300; prio += 50) {
			for (int w = 0; w < 3; w++) {
				const char *wsname = w == 0 ? "ws0" : w == 1 ? "ws5" : "ws9"; /* ws9: no use */
				struct egs_gpr *probes[3];
				for (int j = 0; j < 3; j++) {
					probes[j] = defer(free_gpr, random_gpr(9000 + (size_t)j, 12, 2, homogeneous, false));
					probes[j]->priority = prio ? prio : 1;
					egs_strlcpy(probes[j]->workspace, wsname, sizeof(probes[j]->workspace));
				}
				int64_t at = now + (w == 2 ? (next - now) / 2 : 0);
				int64_t fast[3], slow[3];
				char fc[3][EGS_NAME_MAX], sc[3][EGS_NAME_MAX];
				egs_sched_estimates(st, (const struct egs_gpr *const *)probes, 3, at, plan, fast, fc);
				egs_sched_estimates(st, (const struct egs_gpr *const *)probes, 3, at, NULL, slow, sc);
				for (int j = 0; j < 3; j++) {
					assert_int_equal(fast[j], slow[j]);
					if (slow[j] != EGS_NEVER)
						assert_string_equal(fc[j], sc[j]);
					never += slow[j] == EGS_NEVER;
					compared++;
				}
			}
		}
		egs_state_clear_changes(st);
	}
	assert_true(compared == 4 * 7 * 3 * 3 && never < compared);
}

/* Three one-node GPRs of priority 50 on three nodes, started 30, 20 and 15 minutes before now: l1
 * and l2 opted in to eviction, l3 did not. */
static struct egs_state *preempt_world(int64_t *now, struct egs_gpr **l)
{
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	const char *ws[] = { "wa", "wb", "wc", "hi", "hi2" };
	for (size_t i = 0; i < 5; i++)
		add_ws(st, ws[i], "c1", NULL);
	add_h100s(st, "c1", 1, 3, NULL, T0);
	int64_t t = T0;
	int64_t offset[] = { 0, 600, 900 };
	for (size_t i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof(id), "gpr-l%zu", i + 1);
		l[i] = mk_gpr(id, ws[i], 1, 8, 10 * 3600, 50);
		if (i < 2)
			l[i]->flags |= EGS_GPRF_EVICTION;
		submit(st, l[i], T0 + offset[i]);
		settle(st, T0 + offset[i]);
		assert_int_equal(l[i]->state, EGS_GPR_PROVISIONED);
		t = T0 + offset[i];
	}
	*now = t + 900; /* l1 has run 30 minutes, l2 20, l3 15 */
	return st;
}

/* A high-band request takes the node of the opted-in GPR that has run least (least work lost),
 * which shows evictedBy; the request starts on its node. */
static void test_preempt_least_lost(void **state)
{
	(void)state;
	int64_t now;
	struct egs_gpr *l[3];
	struct egs_state *st = preempt_world(&now, l);
	l[1]->flags |= EGS_GPRF_REQUEUE;
	struct egs_gpr *h = submit(st, mk_gpr("gpr-h", "hi", 1, 8, 3600, 250), now);
	settle(st, now);
	assert_int_equal(h->state, EGS_GPR_PROVISIONED);
	assert_string_equal(h->nodes.v[0], "c1/n2");
	assert_string_equal(l[1]->evicted_by, "gpr-h");
	assert_int_equal(l[1]->state, EGS_GPR_QUEUED); /* it asked to be requeued */
	assert_int_equal(l[0]->state, EGS_GPR_PROVISIONED);
	assert_int_equal(l[2]->state, EGS_GPR_PROVISIONED);
	assert_string_equal(l[0]->evicted_by, "");
	check_consistency(st);
}

/* No preemption: a medium-band request, a victim that ran less than the minimum, victims of equal
 * priority, a request whose own workspace is busy, or one for which nodes are already coming back. */
static void test_preempt_guards(void **state)
{
	(void)state;
	int64_t now;
	struct egs_gpr *l[3];
	for (int c = 0; c < 4; c++) {
		struct egs_state *st = preempt_world(&now, l);
		int prio = c == 0 ? 200 : 250;
		int64_t at = c == 1 ? T0 + 900 + 120 : now; /* c 1: l2 has run 7 minutes (< 10), l1 ... */
		if (c == 1)
			l[0]->flags &= ~EGS_GPRF_EVICTION; /* ... and l1 may not be evicted */
		if (c == 2)
			l[0]->priority = l[1]->priority = 250;
		const char *ws = c == 3 ? "wa" : "hi"; /* c 3: its workspace holds l1 */
		struct egs_gpr *h = submit(st, mk_gpr("gpr-h", ws, 1, 8, 3600, prio), at);
		settle(st, at);
		assert_int_equal(h->state, EGS_GPR_QUEUED);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(l[i]->state, EGS_GPR_PROVISIONED);
			assert_string_equal(l[i]->evicted_by, "");
		}
		egs_state_clear_changes(st);
		done(st);
	}
}

/* A two-node request with one node already free evicts one GPR, not two; a second high request
 * right after does not evict again for nodes already on their way. */
static void test_preempt_counts_free_nodes(void **state)
{
	(void)state;
	int64_t now;
	struct egs_gpr *l[3];
	struct egs_state *st = preempt_world(&now, l);
	add_h100(st, "c1", "n4", now);
	struct egs_gpr *h = submit(st, mk_gpr("gpr-h", "hi", 2, 8, 3600, 250), now);
	sched_run(st, now); /* evicts; the agent has not detached yet */
	assert_int_equal(h->state, EGS_GPR_QUEUED);
	assert_int_equal(h->est_start, now);
	assert_string_equal(l[1]->evicted_by, "gpr-h");
	assert_int_equal(l[1]->state, EGS_GPR_RELEASING);
	assert_int_equal(l[0]->state, EGS_GPR_PROVISIONED);
	sched_run(st, now); /* nothing more to evict while n2 is on its way */
	assert_int_equal(l[0]->state, EGS_GPR_PROVISIONED);
	settle(st, now);
	assert_int_equal(h->state, EGS_GPR_PROVISIONED);
	assert_int_equal(l[1]->state, EGS_GPR_COMPLETE);
	/* The next high request finds l1 (30+ minutes) the only opted-in GPR left. */
	struct egs_gpr *h2 = submit(st, mk_gpr("gpr-h2", "hi2", 1, 8, 3600, 300), now);
	settle(st, now);
	assert_int_equal(h2->state, EGS_GPR_PROVISIONED);
	assert_string_equal(l[0]->evicted_by, "gpr-h2");
	assert_int_equal(l[2]->state, EGS_GPR_PROVISIONED); /* never opted in */
	check_consistency(st);
}

/*
 * The smallest case behind test_estimates_hold_mixed_nodes.  Nodes: x (H100, 8 GPUs) free, y
 * (A100, 4 GPUs) held by z until +100, n (H100) held by w of workspace ws1 until +300.  g (ws1,
 * 4 GPUs, any shape) must wait for ws1 until +300; h (A100 only) can only use y.
 * At T0 the plan puts g on x (free earliest) and h on y at +100.  At +100 y frees; x and y are
 * now both "free since now", the tie goes to the best fit (y, 4 GPUs), so g takes y from +300 and
 * h, promised +100, is pushed after g.  Nothing arrived and nobody released early.
 */
static void test_estimate_holds_when_a_node_frees(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *x = add_node(st, "c1", "x", "H100", "p5", 8, 81920, now);
	struct egs_node *y = add_node(st, "c1", "y", "A100", "p4d", 4, 40960, now);
	struct egs_node *n = add_node(st, "c1", "n", "H100", "p5", 8, 81920, now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	add_ws(st, "ws3", "c1", NULL);
	struct egs_gpr *w = mk_gpr("w", "ws1", 1, 8, 300, 300);
	egs_strlcpy(w->gpu_shape, "H100", sizeof(w->gpu_shape));
	struct egs_gpr *z = mk_gpr("z", "ws3", 1, 4, 100, 300);
	egs_strlcpy(z->gpu_shape, "A100", sizeof(z->gpu_shape));
	submit(st, w, now);
	submit(st, z, now);
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 1, 4, 1000, 200), now);
	struct egs_gpr *h = mk_gpr("h", "ws2", 1, 4, 50, 100);
	egs_strlcpy(h->gpu_shape, "A100", sizeof(h->gpu_shape));
	submit(st, h, now);
	int64_t next = settle(st, now);
	assert_string_equal(n->gpr_id, "w");
	assert_string_equal(y->gpr_id, "z");
	assert_true(node_free(x));
	assert_int_equal(g->est_start, now + 300);
	assert_int_equal(h->est_start, now + 100);
	assert_int_equal(next, now + 25); /* z's first progress mark */

	while (next <= now + 100)
		next = settle(st, next);
	assert_int_equal(z->state, EGS_GPR_COMPLETE);
	if (h->state != EGS_GPR_PROVISIONED)
		fprintf(stderr, "h: promised +100, now estimated %+lld (y went to g)\n", (long long)(h->est_start - now));
	assert_int_equal(h->state, EGS_GPR_PROVISIONED);
	assert_int_equal(h->start_ts, now + 100);
	assert_int_equal(g->est_start, now + 300);
	done(st);
}

/* ---- conservative backfill ---- */

/*
 * Three nodes; x holds one for 1000 s, so the head A (all three nodes) waits until +1000 and
 * leaves a hole [now, +1000) on the two others.  S (300 s) and M (700 s) end before it: they start
 * at once.  L (2000 s) would overrun it: it waits for A.  A starts exactly at its estimate.
 * Without backfill S, M and L all wait for A.
 */
static void test_backfill_short_before_reservation(void **state)
{
	(void)state;
	for (int on = 0; on <= 1; on++) {
		backfill_cfg = on;
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		int64_t now = T0;
		add_h100s(st, "c1", 1, 3, NULL, now);
		static const char *const wss[] = { "wx", "wa", "ws", "wm", "wl" };
		for (size_t i = 0; i < 5; i++)
			add_ws(st, wss[i], "c1", NULL);
		struct egs_gpr *x = submit(st, mk_gpr("x", "wx", 1, 8, 1000, 300), now);
		struct egs_gpr *a = submit(st, mk_gpr("a", "wa", 3, 8, 500, 200), now);
		struct egs_gpr *s = submit(st, mk_gpr("s", "ws", 1, 8, 300, 100), now);
		struct egs_gpr *m = submit(st, mk_gpr("m", "wm", 1, 8, 700, 100), now);
		struct egs_gpr *l = submit(st, mk_gpr("l", "wl", 1, 8, 2000, 100), now);
		int64_t t = settle(st, now);
		assert_int_equal(x->state, EGS_GPR_PROVISIONED);
		assert_int_equal(a->est_start, now + 1000);
		if (on) {
			assert_int_equal(s->state, EGS_GPR_PROVISIONED);
			assert_int_equal(m->state, EGS_GPR_PROVISIONED);
			assert_int_equal(s->start_ts, now);
			assert_int_equal(m->start_ts, now);
		} else {
			assert_int_equal(s->est_start, now + 1500);
			assert_int_equal(m->est_start, now + 1500);
		}
		assert_int_equal(l->est_start, now + 1500);
		t = settle_while_queued(st, a, t);
		assert_int_equal(a->start_ts, now + 1000);
		t = settle_while_queued(st, l, t);
		assert_int_equal(l->start_ts, now + 1500);
		check_consistency(st);
		done(st);
	}
}

/*
 * The workspace's one-GPR-at-a-time rule has holes too.  W1 (pinned to c1, whose only node x holds
 * for 1000 s) waits until +1000; W2 of the same workspace on c2 (300 s) ends before W1 starts, so it
 * starts at once; W3 (2000 s) would overrun the hole and waits for W1's end.
 */
static void test_backfill_workspace_hole(void **state)
{
	(void)state;
	for (int on = 0; on <= 1; on++) {
		backfill_cfg = on;
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		int64_t now = T0;
		add_h100(st, "c1", "n1", now);
		add_h100(st, "c2", "n2", now);
		add_ws(st, "wx", "c1", NULL);
		add_ws(st, "w", "c1", "c2", NULL);
		struct egs_gpr *x = submit(st, mk_gpr("x", "wx", 1, 8, 1000, 300), now);
		struct egs_gpr *w1 = mk_gpr("w1", "w", 1, 8, 100, 200);
		struct egs_gpr *w2 = mk_gpr("w2", "w", 1, 8, 300, 100);
		struct egs_gpr *w3 = mk_gpr("w3", "w", 1, 8, 2000, 100);
		egs_strlcpy(w1->cluster, "c1", sizeof(w1->cluster));
		egs_strlcpy(w2->cluster, "c2", sizeof(w2->cluster));
		egs_strlcpy(w3->cluster, "c2", sizeof(w3->cluster));
		submit(st, w1, now);
		submit(st, w2, now);
		submit(st, w3, now);
		int64_t t = settle(st, now);
		assert_int_equal(x->state, EGS_GPR_PROVISIONED);
		assert_int_equal(w1->est_start, now + 1000);
		if (on) {
			assert_int_equal(w2->state, EGS_GPR_PROVISIONED);
			assert_int_equal(w3->est_start, now + 1100);
		} else {
			assert_int_equal(w2->est_start, now + 1100);
			assert_int_equal(w3->est_start, now + 1400);
		}
		t = settle_while_queued(st, w3, t);
		assert_int_equal(w1->start_ts, now + 1000);
		assert_int_equal(w3->start_ts, now + (on ? 1100 : 1400));
		check_consistency(st);
		done(st);
	}
}

/*
 * The estimates-hold workloads with backfill on (fair share off: no arrival goes ahead): every GPR
 * starts exactly at its estimate, and against the same workloads without backfill the mean wait is
 * shorter and utilization (busy node-time over nodes x span) higher.
 */
static void test_backfill_estimates_hold(void **state)
{
	(void)state;
	fair_half_life = -1;
	double wait[2], util[2];
	size_t wrong = 0;
	for (int on = 0; on <= 1; on++) {
		backfill_cfg = on;
		wl_wait_sum = wl_span_sum = wl_busy_sum = 0;
		wl_jobs = 0;
		for (uint64_t seed = 1; seed <= 8; seed++) {
			wrong += run_workload(seed, 30, 4, 2, 2, true, true);
			wrong += run_workload(seed, 30, 4, 5, 3, true, true);
			wrong += run_workload(seed, 30, 4, 5, 2, true, false);
			wrong += run_workload(seed, 40, 3, 4, 2, false, true);
			wrong += run_workload(seed, 40, 3, 4, 2, false, false);
		}
		wait[on] = wl_wait_sum / (double)wl_jobs;
		util[on] = wl_busy_sum / wl_span_sum;
	}
	fair_half_life = 0;
	backfill_cfg = 0;
	fprintf(stderr, "backfill off/on: mean wait %.0f / %.0f s, utilization %.1f%% / %.1f%%\n", wait[0], wait[1],
		100 * util[0], 100 * util[1]);
	assert_int_equal(wrong, 0);
	assert_true(wait[1] < wait[0]);
	assert_true(util[1] > util[0]);
}

/* Fair share on, backfill on: only a GPR that an arrival overtook may start off its estimate (later,
 * or earlier through a hole that arrival opened); every other starts exactly at it. */
static void test_backfill_estimates_hold_with_fair_share(void **state)
{
	(void)state;
	backfill_cfg = 1;
	fair_overtakes = 0;
	size_t wrong = 0;
	for (uint64_t seed = 1; seed <= 8; seed++) {
		wrong += run_workload(seed, 30, 4, 5, 2, true, false);
		wrong += run_workload(seed, 40, 3, 4, 2, false, false);
	}
	backfill_cfg = 0;
	assert_int_equal(wrong, 0);
	assert_true(fair_overtakes > 0);
}

/*
 * An early release is held (core/held.h) when using it would move a promise later.  With backfill,
 * B (its workspace busy until +200) is promised +200 in the hole that A (both H100 nodes, waiting
 * for x until +1000) leaves on n2.  x releases early at +100: starting A at once would take B's
 * hole and move B to +600, so the release is held: A keeps +1000 and B +200, and both start then.
 * Without backfill B waits for A from the start; the release moves both earlier and is applied.
 */
static void test_backfill_early_release_held(void **state)
{
	(void)state;
	for (int on = 0; on <= 1; on++) {
		backfill_cfg = on;
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		int64_t now = T0;
		add_node(st, "c1", "n1", "H100", "p5", 8, 81920, now);
		add_node(st, "c1", "n2", "H100", "p5", 8, 81920, now);
		add_node(st, "c1", "n3", "A100", "p4d", 8, 40960, now);
		add_ws(st, "wx", "c1", NULL);
		add_ws(st, "wa", "c1", NULL);
		add_ws(st, "wb", "c1", NULL);
		struct egs_gpr *x = mk_gpr("x", "wx", 1, 8, 1000, 300);
		struct egs_gpr *y = mk_gpr("y", "wb", 1, 8, 200, 300);
		struct egs_gpr *a = mk_gpr("a", "wa", 2, 8, 500, 200);
		struct egs_gpr *b = mk_gpr("b", "wb", 1, 8, 600, 100);
		egs_strlcpy(x->gpu_shape, "H100", sizeof(x->gpu_shape));
		egs_strlcpy(y->gpu_shape, "A100", sizeof(y->gpu_shape));
		egs_strlcpy(a->gpu_shape, "H100", sizeof(a->gpu_shape));
		egs_strlcpy(b->gpu_shape, "H100", sizeof(b->gpu_shape));
		submit(st, x, now);
		submit(st, y, now);
		submit(st, a, now);
		submit(st, b, now);
		settle(st, now);
		assert_int_equal(x->state, EGS_GPR_PROVISIONED);
		assert_int_equal(y->state, EGS_GPR_PROVISIONED);
		assert_int_equal(a->est_start, now + 1000);
		assert_int_equal(b->est_start, now + (on ? 200 : 1500));
		assert_int_equal(egs_gpr_release(st, x, now + 100), EGS_OK);
		int64_t t = settle(st, now + 100);
		assert_int_equal(x->state, EGS_GPR_COMPLETE);
		assert_int_equal(b->delayed_count, 0);
		if (!on) {
			assert_int_equal(st->held.len, 0);
			assert_int_equal(a->state, EGS_GPR_PROVISIONED);
			assert_int_equal(a->start_ts, now + 100);
			assert_int_equal(b->est_start, now + 600);
			done(st);
			continue;
		}
		assert_int_equal(st->held.len, 1);
		assert_int_equal(a->state, EGS_GPR_QUEUED);
		assert_int_equal(a->est_start, now + 1000);
		assert_int_equal(b->est_start, now + 200);
		/* B starts at +200 as promised; then the release delays nobody and applies: A starts
		 * when B leaves n2, at +800, earlier than its +1000. */
		t = settle_while_queued(st, a, t);
		assert_int_equal(b->start_ts, now + 200);
		assert_int_equal(a->start_ts, now + 800);
		assert_int_equal(st->held.len, 0);
		done(st);
	}
}

/* The kept plan's wait-time answers, egs_sched_append and egs_sched_estimate equal a fresh walk with
 * backfill on too (the snapshots keep the holes). */
static void test_estimates_from_kept_plan(void **state);
static void test_estimate_matches_plan(void **state);
static void test_append_matches_full_plan(void **state);
static void test_backfill_plan_paths_agree(void **state)
{
	backfill_cfg = 1;
	test_estimates_from_kept_plan(state);
	backfill_cfg = 1;
	test_estimate_matches_plan(state);
	backfill_cfg = 1;
	test_append_matches_full_plan(state);
	backfill_cfg = 0;
}

/* ---- early release ---- */

/* Snapshot of queued GPRs' estimates (0 for the others). */
static void snapshot(struct egs_gpr *const *g, int64_t *est, size_t n)
{
	for (size_t i = 0; i < n; i++)
		est[i] = g[i]->state == EGS_GPR_QUEUED ? g[i]->est_start : 0;
}

/* Compares queued GPRs' estimates with a snapshot: counts those that moved later and earlier.
 * A GPR that started since counts with its start time. */
static void compare(struct egs_gpr *const *g, const int64_t *before, size_t n, int64_t now, size_t *later,
		    size_t *earlier)
{
	*later = *earlier = 0;
	for (size_t i = 0; i < n; i++) {
		if (!before[i])
			continue;
		assert_true(g[i]->state == EGS_GPR_QUEUED || g[i]->state == EGS_GPR_PROVISIONED);
		int64_t after = g[i]->state == EGS_GPR_QUEUED ? g[i]->est_start : g[i]->start_ts;
		if (after > before[i]) {
			fprintf(stderr, "%s: estimate %+lld moved to %+lld at %+lld\n", g[i]->id,
				(long long)(before[i] - T0), (long long)(after - T0), (long long)(now - T0));
			(*later)++;
		} else if (after < before[i]) {
			(*earlier)++;
		}
	}
}

/*
 * 30 random GPRs; at random moments a provisioned one is released early (and, with cancels, a
 * queued one is cancelled), half way to the next due time.  No queued GPR's estimate ever moves
 * later, and between disturbances every estimate holds exactly, except that a hold (core/held.h) may
 * be applied at a later run, when the GPR it would have delayed has started: then estimates may move
 * earlier.  Run on one cluster of identical nodes (where no release is ever held), and on two
 * clusters with two node shapes and requests pinned by shape, GPU count or cluster, with and
 * without backfill (where the greedy walk alone would move estimates later).
 */
struct disturb_stats {
	size_t releases, cancels, held, gains;
};

static void disturb_random(bool homogeneous, bool cancels, struct disturb_stats *out)
{
	*out = (struct disturb_stats){ 0 };
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		random_world(st, seed, homogeneous ? 4 : 3, 4, homogeneous);
		enum { N = 30 };
		struct egs_gpr *g[N];
		int64_t before[N];
		int64_t now = T0;
		submit_random(st, g, N, homogeneous, now);
		int64_t next = settle(st, now);
		struct workload wl = { g, NULL, NULL, N, st };
		for (int steps = 0; !all_done(&wl); steps++) {
			assert_true(steps < 100000);
			assert_true(next > now && next < T0 + LONG_HEARTBEAT);
			snapshot(g, before, N);
			struct egs_gpr *victim = NULL;
			size_t off = (size_t)(rng_next() % N);
			enum egs_gpr_state want = EGS_GPR_PROVISIONED;
			bool go;
			if (cancels) {
				uint64_t pick = rng_next() % 6;
				go = pick < 2;
				want = pick == 0 ? EGS_GPR_QUEUED : EGS_GPR_PROVISIONED;
			} else {
				go = rng_next() % 4 == 0;
			}
			for (size_t i = 0; i < N && !victim && go; i++)
				if (g[(i + off) % N]->state == want)
					victim = g[(i + off) % N];
			int64_t t = now + (next - now) / 2;
			size_t held_before = st->held.len;
			if (victim && t > now) {
				if (want == EGS_GPR_QUEUED) {
					assert_int_equal(egs_gpr_cancel(st, victim, t), EGS_OK);
					before[strtoul(victim->id + 4, NULL, 10)] = 0; /* ids are gpr-<index> */
					out->cancels++;
				} else {
					assert_int_equal(egs_gpr_release(st, victim, t), EGS_OK);
					assert_true(victim->flags & EGS_GPRF_EARLY_RELEASE);
					out->releases++;
				}
				now = t;
			} else {
				victim = NULL;
				now = next;
			}
			next = settle(st, now);
			if (victim && want == EGS_GPR_PROVISIONED)
				assert_int_equal(victim->state, EGS_GPR_COMPLETE);
			size_t later, earlier;
			compare(g, before, N, now, &later, &earlier);
			if (later)
				fprintf(stderr, "seed %llu (%s, backfill %d): victim %s, holds %zu -> %zu\n",
					(unsigned long long)seed, homogeneous ? "one pool" : "mixed", backfill_cfg,
					victim ? victim->id : "none", held_before, st->held.len);
			assert_int_equal(later, 0);
			if (!victim && !held_before)
				assert_int_equal(earlier, 0); /* nothing changed: the plan holds exactly */
			if (homogeneous && !backfill_cfg && !cancels)
				assert_int_equal(st->held.len, 0); /* one pool, no holes: every release applies */
			out->held += victim && st->held.len > held_before;
			out->gains += earlier;
			check_consistency(st);
			egs_state_clear_changes(st);
		}
		for (size_t i = 0; i < N; i++)
			assert_true(g[i]->state == EGS_GPR_COMPLETE || g[i]->state == EGS_GPR_CANCELLED);
		assert_int_equal(st->held.len, 0);
		done(st);
	}
}

static void test_early_release_random(void **state)
{
	(void)state;
	struct disturb_stats d;
	disturb_random(true, false, &d);
	/* The test bites: there were releases, and they did move estimates earlier. */
	assert_true(d.releases > 20);
	assert_true(d.gains > 20);
	assert_int_equal(d.held, 0);
	for (int bf = 0; bf <= 1; bf++) {
		backfill_cfg = bf;
		disturb_random(false, false, &d);
		fprintf(stderr, "mixed nodes, backfill %s: %zu early releases, %zu held, %zu estimates moved earlier\n",
			bf ? "on" : "off", d.releases, d.held, d.gains);
		assert_true(d.releases > 20);
		assert_true(d.gains > 20);
	}
	backfill_cfg = 0;
}

/*
 * Cancels, like early releases, only move estimates earlier (core/held.h): a cancelled queued GPR
 * stays in the walk as a ghost until freeing its place delays no one, and turns into a held
 * release when its planned start comes.  30 random GPRs; at random moments a queued one is
 * cancelled or a provisioned one released early; no queued GPR's estimate ever moves later, and
 * with nothing changed and nothing held every estimate holds exactly.  Without the ghosts, cancels
 * moved someone later after 6% (mixed pools) and 18-20% (backfill) of cancels.
 */
static void test_cancel_random(void **state)
{
	(void)state;
	for (int homo = 0; homo <= 1; homo++) {
		for (int bf = 0; bf <= 1; bf++) {
			backfill_cfg = bf;
			struct disturb_stats d;
			disturb_random(homo, true, &d);
			fprintf(stderr, "%s, backfill %s: %zu cancels, %zu early releases, %zu estimates moved earlier\n",
				homo ? "one pool" : "mixed nodes", bf ? "on" : "off", d.cancels, d.releases, d.gains);
			assert_true(d.cancels > 100);
			assert_true(d.gains > 100);
		}
	}
	backfill_cfg = 0;
}

/*
 * Two clusters of identical nodes.  c1 frees at +50 and +1000, c2 at +60 and +65.  The head A
 * (one node, 100 s) is planned on c1 at +50 and B (two nodes in one cluster) on c2 at +65.  Then
 * the holder of c2's first node releases early at +10.  Handed to the queue at once, the node
 * would let A start on c2 and keep c2 from B until +110; so the release is held (core/held.h) and
 * both start exactly as promised.
 */
static void test_early_release_never_later_two_clusters(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100s(st, "c1", 1, 2, NULL, now);
	add_h100s(st, "c2", 1, 2, NULL, now);
	static const char *const hold_cl[] = { "c1", "c1", "c2", "c2" };
	static const int64_t hold_dur[] = { 50, 1000, 60, 65 };
	struct egs_gpr *hold[4];
	for (int i = 0; i < 4; i++) {
		char id[16], ws[16];
		snprintf(id, sizeof(id), "hold%d", i);
		snprintf(ws, sizeof(ws), "wsh%d", i);
		add_ws(st, ws, "c1", "c2", NULL);
		hold[i] = mk_gpr(id, ws, 1, 8, hold_dur[i], 300);
		egs_strlcpy(hold[i]->cluster, hold_cl[i], sizeof(hold[i]->cluster));
		submit(st, hold[i], now);
	}
	add_ws(st, "wsa", "c1", "c2", NULL);
	add_ws(st, "wsb", "c1", "c2", NULL);
	struct egs_gpr *a = submit(st, mk_gpr("a", "wsa", 1, 8, 100, 200), now);
	struct egs_gpr *b = submit(st, mk_gpr("b", "wsb", 2, 8, 10, 100), now);
	settle(st, now);
	for (int i = 0; i < 4; i++)
		assert_int_equal(hold[i]->state, EGS_GPR_PROVISIONED);
	assert_int_equal(a->est_start, now + 50);
	assert_int_equal(b->est_start, now + 65);

	int64_t t = now + 10;
	assert_int_equal(egs_gpr_release(st, hold[2], t), EGS_OK);
	settle(st, t);
	assert_int_equal(hold[2]->state, EGS_GPR_COMPLETE);
	if (b->est_start > now + 65)
		fprintf(stderr, "b: estimate +65 moved to +%lld after an early release\n", (long long)(b->est_start - now));
	assert_int_equal(st->held.len, 1);
	assert_int_equal(a->est_start, now + 50);
	assert_int_equal(b->est_start, now + 65);
	t = settle_while_queued(st, b, t);
	assert_int_equal(a->start_ts, now + 50);
	assert_int_equal(b->start_ts, now + 65);
	assert_int_equal(b->delayed_count, 0);
	done(st);
}

/*
 * The same promise in one cluster with two node sizes: the 8-GPU node frees early.  Applied at
 * once, the 4-GPU head A would take it (earliest free wins over best fit) and B, which only fits
 * on the 8-GPU node, would move from +60 to +110; the release is held instead.
 */
static void test_early_release_never_later_two_shapes(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *small = add_node(st, "c1", "small", "H100", "p5", 4, 81920, now);
	struct egs_node *big = add_node(st, "c1", "big", "H100", "p5", 8, 81920, now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	add_ws(st, "ws3", "c1", NULL);
	add_ws(st, "ws4", "c1", NULL);
	struct egs_gpr *x1 = submit(st, mk_gpr("x1", "ws1", 1, 4, 40, 300), now);
	struct egs_gpr *x2 = submit(st, mk_gpr("x2", "ws2", 1, 8, 60, 300), now);
	struct egs_gpr *a = submit(st, mk_gpr("a", "ws3", 1, 4, 100, 200), now);
	struct egs_gpr *b = submit(st, mk_gpr("b", "ws4", 1, 8, 10, 100), now);
	settle(st, now);
	assert_string_equal(small->gpr_id, "x1"); /* best fit while both are free */
	assert_string_equal(big->gpr_id, "x2");
	assert_int_equal(x1->state, EGS_GPR_PROVISIONED);
	assert_int_equal(a->est_start, now + 40);
	assert_int_equal(b->est_start, now + 60);

	int64_t t = now + 10;
	assert_int_equal(egs_gpr_release(st, x2, t), EGS_OK);
	settle(st, t);
	assert_int_equal(x2->state, EGS_GPR_COMPLETE);
	if (b->est_start > now + 60)
		fprintf(stderr, "b: estimate +60 moved to +%lld after an early release\n", (long long)(b->est_start - now));
	assert_int_equal(st->held.len, 1);
	assert_int_equal(a->est_start, now + 40);
	assert_int_equal(b->est_start, now + 60);
	/* A starts at +40 on the small node; then nobody is left for the release to delay, so it
	 * applies and B starts at once, earlier than promised. */
	t = settle_while_queued(st, b, t);
	assert_int_equal(a->start_ts, now + 40);
	assert_int_equal(b->start_ts, now + 40);
	assert_string_equal(big->gpr_id, "b");
	assert_int_equal(st->held.len, 0);
	assert_int_equal(b->delayed_count, 0);
	done(st);
}

static void test_early_release_paths(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n1 = add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	struct egs_gpr *a = submit(st, mk_gpr("a", "ws1", 1, 8, 3600, 100), now);
	struct egs_gpr *b = submit(st, mk_gpr("b", "ws2", 1, 8, 600, 100), now);
	settle(st, now);
	assert_int_equal(b->est_start, now + 3600);

	/* Released while provisioned: Releasing until the detach, then Complete; b moves up. */
	int64_t t = now + 1000;
	egs_state_clear_changes(st);
	assert_int_equal(egs_gpr_release(st, a, t), EGS_OK);
	assert_int_equal(a->state, EGS_GPR_RELEASING);
	assert_int_equal(count_new_events(st, "EarlyRelease", "a"), 1);
	assert_string_equal(n1->attached_gpr, "a");
	assert_int_equal(egs_gpr_release(st, a, t), EGS_ERR_GPR_RELEASED);
	sched_run(st, t);
	assert_int_equal(b->state, EGS_GPR_QUEUED); /* the node is not back yet */
	assert_int_equal(b->est_start, t);
	settle(st, t);
	assert_int_equal(a->state, EGS_GPR_COMPLETE);
	assert_int_equal(a->completion_ts, t);
	assert_int_equal(b->state, EGS_GPR_PROVISIONED);
	assert_int_equal(b->start_ts, t);

	/* The next in line starts as soon as b is released too. */
	struct egs_gpr *c = submit(st, mk_gpr("c", "ws1", 1, 8, 600, 100), t);
	settle(st, t);
	assert_int_equal(c->est_start, t + 600);
	assert_int_equal(egs_gpr_release(st, b, t + 1), EGS_OK);
	settle(st, t + 1);
	assert_int_equal(b->state, EGS_GPR_COMPLETE);
	assert_int_equal(c->state, EGS_GPR_PROVISIONED);
	assert_int_equal(c->start_ts, t + 1);
	done(st);

	/* Released while still provisioning (nothing attached): Complete at once, node free. */

	st = state_new(0, 0, LONG_HEARTBEAT);
	n1 = add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *d = submit(st, mk_gpr("d", "ws1", 1, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(d->state, EGS_GPR_PROVISIONING);
	assert_int_equal(egs_gpr_release(st, d, now + 3), EGS_OK);
	assert_int_equal(d->state, EGS_GPR_COMPLETE);
	assert_int_equal(d->completion_ts, now + 3);
	assert_true(node_free(n1));
	assert_int_equal(st->active.len, 0);
	/* A late attach from the agent for d is undone: the node is detached and free again. */
	egs_gpr_attach_result(st, n1, "d", true, NULL, now + 4);
	assert_int_equal(d->state, EGS_GPR_COMPLETE);
	assert_int_equal(ack_all(st, now + 5), 1);
	assert_true(node_free(n1));
	done(st);
}

/* ---- failures ---- */

static void test_attach_failure(void **state)
{
	(void)state;
	struct egs_state *st = state_new(3, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n[4];
	add_h100s(st, "c1", 0, 4, n, now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 1, 8, 600, 100), now);

	for (int attempt = 1; attempt <= 3; attempt++) {
		sched_run(st, now);
		assert_int_equal(g->state, EGS_GPR_PROVISIONING);
		struct egs_node *on = egs_map_get(&st->nodes, g->nodes.v[0]);
		assert_non_null(on);
		assert_int_equal(on->health, EGS_HEALTH_HEALTHY); /* never a node that failed before */
		egs_state_clear_changes(st);
		egs_gpr_attach_result(st, on, "g", false, "nvidia-smi: no devices", now);
		assert_int_equal(on->health, EGS_HEALTH_UNHEALTHY);
		assert_true(on->quarantine_until > now);
		assert_true(node_free(on));
		assert_true(on->dirty);
		assert_int_equal(g->retry_count, attempt);
		assert_non_null(g->failure_reason);
		assert_non_null(strstr(g->failure_reason, "nvidia-smi: no devices"));
		assert_int_equal(count_new_events(st, "PrecheckFailed", on->key), 1);
		const struct egs_event *ev = last_new_event(st, "ProvisioningFailed", "g");
		assert_non_null(ev);
		assert_string_equal(ev->type, "Warning");
		if (attempt < 3) {
			assert_int_equal(g->state, EGS_GPR_QUEUED);
			assert_int_equal(g->nodes.n, 0);
			assert_true(egs_queue_contains(&st->queue, g));
		} else {
			assert_int_equal(g->state, EGS_GPR_ERROR);
			assert_int_equal(g->completion_ts, now);
			assert_false(egs_queue_contains(&st->queue, g));
			assert_int_equal(st->active.len, 0);
		}
		check_consistency(st);
		now += 10;
	}
	/* Finished: nothing more can be done to it. */
	assert_int_equal(egs_gpr_cancel(st, g, now), EGS_ERR_GPR_FINISHED);
	sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_ERROR);
	assert_true(node_free(n[3]));

	/* requeueOnFailure: past the limit it keeps coming back to the queue. */
	struct egs_gpr *r = mk_gpr("r", "ws1", 1, 8, 600, 100);
	r->flags |= EGS_GPRF_REQUEUE;
	submit(st, r, now);
	for (int attempt = 1; attempt <= 5; attempt++) {
		for (int i = 0; i < 4; i++)
			n[i]->health = EGS_HEALTH_HEALTHY; /* the agent reports them healthy again */
		sched_run(st, now);
		assert_int_equal(r->state, EGS_GPR_PROVISIONING);
		struct egs_node *on = egs_map_get(&st->nodes, r->nodes.v[0]);
		egs_gpr_attach_result(st, on, "r", false, "precheck failed", now);
		assert_int_equal(r->state, EGS_GPR_QUEUED);
		assert_int_equal(r->retry_count, attempt);
		now += 10;
	}
	/* And when an attempt finally works it provisions as usual. */
	for (int i = 0; i < 4; i++)
		n[i]->health = EGS_HEALTH_HEALTHY;
	settle(st, now);
	assert_int_equal(r->state, EGS_GPR_PROVISIONED);
	assert_int_equal(r->start_ts, now);
	check_consistency(st);
	done(st);
}

static void test_attach_failure_multi_node(void **state)
{
	(void)state;
	struct egs_state *st = state_new(3, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n[3];
	add_h100s(st, "c1", 0, 3, n, now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 2, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	struct egs_node *ok = egs_map_get(&st->nodes, g->nodes.v[0]);
	struct egs_node *bad = egs_map_get(&st->nodes, g->nodes.v[1]);
	/* One node attaches, the other fails: the GPR goes back to the queue. */
	egs_gpr_attach_result(st, ok, "g", true, NULL, now + 1);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	egs_gpr_attach_result(st, bad, "g", false, "ib0 down", now + 2);
	assert_int_equal(g->state, EGS_GPR_QUEUED);
	assert_int_equal(g->retry_count, 1);
	assert_true(node_free(bad));
	/* The attached node must be detached before anyone can use it... */
	assert_string_equal(ok->attached_gpr, "g");
	assert_false(node_free(ok));
	sched_run(st, now + 2);
	assert_int_equal(g->state, EGS_GPR_QUEUED);
	/* ...and once it is, the retry provisions on the two healthy nodes. */
	settle(st, now + 3);
	assert_int_equal(g->state, EGS_GPR_PROVISIONED);
	assert_int_equal(g->start_ts, now + 3);
	assert_false(egs_strlist_has(&g->nodes, bad->key));
	assert_true(egs_strlist_has(&g->nodes, ok->key));
	assert_true(egs_strlist_has(&g->nodes, n[0] == bad || n[1] == bad ? n[2]->key : n[1]->key));
	assert_int_equal(bad->health, EGS_HEALTH_UNHEALTHY);
	check_consistency(st);
	done(st);
}

/* A GPR without a cluster takes the cluster of its first start and keeps it when it is requeued;
 * the planner's cached pool mask must follow (it matched every cluster before): else the walk put
 * the requeued GPR on a free node of another cluster, where it can never start, at now, run after
 * run, instead of waiting for its own cluster. */
static void test_requeued_keeps_its_cluster(void **state)
{
	(void)state;
	struct egs_state *st = state_new(3, 300, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *a = add_h100(st, "c1", "a1", now), *b = add_h100(st, "c2", "b1", now);
	add_ws(st, "ws1", "c1", "c2", NULL);
	add_ws(st, "ws2", "c1", NULL);
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 1, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	assert_string_equal(g->cluster, "c1");
	struct egs_gpr *h = submit(st, mk_gpr("h", "ws2", 1, 8, 3600, 200), now);
	sched_run(st, now);
	assert_int_equal(h->state, EGS_GPR_QUEUED);
	/* g's attach times out: requeued in c1, where h (ahead) takes the node it let go. */
	sched_run(st, now + 300);
	assert_int_equal(g->retry_count, 1);
	assert_int_equal(h->state, EGS_GPR_PROVISIONING);
	assert_string_equal(a->gpr_id, "h");
	assert_int_equal(g->state, EGS_GPR_QUEUED);
	assert_string_equal(g->cluster, "c1");
	assert_int_equal(g->est_start, now + 300 + 3600);
	assert_true(node_free(b));
	check_consistency(st);
	done(st);
}

static void test_provision_timeout(void **state)
{
	(void)state;
	struct egs_state *st = state_new(2, 300, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n = add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 1, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	egs_state_clear_changes(st);

	/* No attach: at 299 s it still waits, at 300 s the attempt fails and is retried. */
	sched_run(st, now + 299);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	assert_int_equal(g->retry_count, 0);
	assert_false(egs_state_has_changes(st));
	sched_run(st, now + 300);
	assert_int_equal(g->retry_count, 1);
	assert_non_null(g->failure_reason);
	assert_non_null(strstr(g->failure_reason, "timed out"));
	assert_int_equal(count_new_events(st, "ProvisioningFailed", "g"), 1);
	/* The node was never attached, so it was let go and the same run provisions again. */
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	assert_int_equal(g->phase_since, now + 300);
	assert_string_equal(n->gpr_id, "g");
	assert_int_equal(n->health, EGS_HEALTH_HEALTHY);

	/* The second time-out reaches the retry limit (2): Error, node free. */
	sched_run(st, now + 600);
	assert_int_equal(g->state, EGS_GPR_ERROR);
	assert_int_equal(g->retry_count, 2);
	assert_true(node_free(n));
	assert_int_equal(st->active.len, 0);
	check_consistency(st);
	done(st);
}

/*
 * egs_sched_run returns "the next time something is due", and egsd sleeps until then.  A GPR that
 * the run itself starts is due at its provisioning time-out; if the run does not say so, a lost
 * attach is noticed only when something else wakes the loop (here: an hour later).
 */
static void test_next_wake_includes_provision_timeout(void **state)
{
	(void)state;
	struct egs_state *st = state_new(3, 300, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100s(st, "c1", 1, 2, NULL, now);
	add_ws(st, "ws1", "c1", NULL);
	struct egs_gpr *a = submit(st, mk_gpr("a", "ws1", 1, 8, 3600, 100), now);
	submit(st, mk_gpr("b", "ws1", 1, 8, 3600, 100), now);
	int64_t next = sched_run(st, now);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	if (next != now + 300)
		fprintf(stderr, "next wake %+lld, want +300 (the provisioning time-out of a)\n", (long long)(next - now));
	assert_int_equal(next, now + 300);
	/* A run that finds it due does time it out, and the retry started in that run is due again. */
	next = sched_run(st, now + 300);
	assert_int_equal(a->retry_count, 1);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(next, now + 600);
	done(st);
}

/* ---- error codes in every state ---- */

/* Creates GPR `id` in its own workspace and node and drives it into state s with real transitions. */
static struct egs_gpr *gpr_in_state(struct egs_state *st, const char *id, enum egs_gpr_state s, int64_t now)
{
	char ws[32], node[32];
	snprintf(ws, sizeof(ws), "ws-%s", id);
	snprintf(node, sizeof(node), "n-%s", id);
	add_ws(st, ws, "c1", NULL);
	struct egs_node *n = add_node(st, "c1", node, "H100", "p5", 8, 81920, now);
	struct egs_gpr *g = mk_gpr(id, ws, 1, 8, 600, 100);
	egs_strlcpy(g->gpu_shape, "H100", sizeof(g->gpu_shape));
	g->memory_mib = 81920;
	/* Pin it to its own node by instance type. */
	egs_strlcpy(n->instance_type, node, sizeof(n->instance_type));
	egs_strlcpy(g->instance_type, node, sizeof(g->instance_type));
	if (s == EGS_GPR_PENDING || s == EGS_GPR_REJECTED)
		g->pending_reason = egs_strdup("over the workspace quota");
	submit(st, g, now);
	switch (s) {
	case EGS_GPR_PENDING:
	case EGS_GPR_QUEUED:
		break;
	case EGS_GPR_REJECTED:
		assert_int_equal(egs_gpr_reject(st, g, "not this quarter", now), EGS_OK);
		break;
	case EGS_GPR_CANCELLED:
		assert_int_equal(egs_gpr_cancel(st, g, now), EGS_OK);
		break;
	case EGS_GPR_ERROR:
		for (int i = 0; i < st->cfg.retry_limit; i++) {
			n->health = EGS_HEALTH_HEALTHY;
			sched_run(st, now);
			assert_int_equal(g->state, EGS_GPR_PROVISIONING);
			egs_gpr_attach_result(st, n, id, false, "broken", now);
		}
		break;
	default:
		sched_run(st, now);
		assert_int_equal(g->state, EGS_GPR_PROVISIONING);
		if (s == EGS_GPR_PROVISIONING)
			break;
		egs_gpr_attach_result(st, n, id, true, NULL, now);
		if (s == EGS_GPR_PROVISIONED)
			break;
		assert_int_equal(egs_gpr_release(st, g, now), EGS_OK);
		if (s == EGS_GPR_RELEASING)
			break;
		egs_gpr_detach_result(st, n, id, true, NULL, now);
		break;
	}
	assert_int_equal(g->state, s);
	return g;
}

static void test_error_codes_per_state(void **state)
{
	(void)state;
	static const struct {
		enum egs_gpr_state s;
		enum egs_err cancel, release, editable;
	} cases[] = {
		{ EGS_GPR_PENDING, EGS_OK, EGS_ERR_GPR_NOT_PROVISIONED, EGS_OK },
		{ EGS_GPR_QUEUED, EGS_OK, EGS_ERR_GPR_NOT_PROVISIONED, EGS_OK },
		{ EGS_GPR_PROVISIONING, EGS_ERR_GPR_PROVISIONED, EGS_OK, EGS_ERR_GPR_PROVISIONED },
		{ EGS_GPR_PROVISIONED, EGS_ERR_GPR_PROVISIONED, EGS_OK, EGS_ERR_GPR_PROVISIONED },
		{ EGS_GPR_RELEASING, EGS_ERR_GPR_RELEASED, EGS_ERR_GPR_RELEASED, EGS_ERR_GPR_RELEASED },
		{ EGS_GPR_COMPLETE, EGS_ERR_GPR_RELEASED, EGS_ERR_GPR_RELEASED, EGS_ERR_GPR_RELEASED },
		{ EGS_GPR_CANCELLED, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED },
		{ EGS_GPR_REJECTED, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED },
		{ EGS_GPR_ERROR, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED, EGS_ERR_GPR_FINISHED },
	};
	struct egs_state *st = state_new(2, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	for (size_t i = 0; i < EGS_ARRAY_LEN(cases); i++) {
		enum egs_gpr_state s = cases[i].s;
		char id[EGS_ID_MAX];
		/* One GPR for cancel and one for release, since a success changes the state. */
		snprintf(id, sizeof(id), "c-%zu", i);
		struct egs_gpr *gc = gpr_in_state(st, id, s, now);
		snprintf(id, sizeof(id), "r-%zu", i);
		struct egs_gpr *gr = gpr_in_state(st, id, s, now);
		assert_int_equal(egs_gpr_editable(gc), cases[i].editable);

		egs_state_clear_changes(st);
		enum egs_err err = egs_gpr_cancel(st, gc, now + 1);
		if (err != cases[i].cancel)
			fprintf(stderr, "cancel in %s: %s\n", egs_gpr_state_name(s), egs_err_str(err));
		assert_int_equal(err, cases[i].cancel);
		if (err == EGS_OK) {
			assert_int_equal(gc->state, EGS_GPR_CANCELLED);
			assert_int_equal(gc->completion_ts, now + 1);
			assert_false(egs_queue_contains(&st->queue, gc));
			assert_int_equal(count_new_events(st, "Cancelled", gc->id), 1);
		} else {
			assert_int_equal(gc->state, s); /* a refusal changes nothing */
			assert_int_equal(count_new_events(st, "Cancelled", gc->id), 0);
		}

		err = egs_gpr_release(st, gr, now + 1);
		if (err != cases[i].release)
			fprintf(stderr, "release in %s: %s\n", egs_gpr_state_name(s), egs_err_str(err));
		assert_int_equal(err, cases[i].release);
		if (err == EGS_OK)
			assert_true(gr->state == EGS_GPR_RELEASING || gr->state == EGS_GPR_COMPLETE);
		else
			assert_int_equal(gr->state, s);
		check_consistency(st);
	}
	/* Approve and reject only apply to Pending; a Queued GPR is a conflict. */
	struct egs_gpr *q = gpr_in_state(st, "aq", EGS_GPR_QUEUED, now);
	assert_int_equal(egs_gpr_approve(st, q, now), EGS_ERR_CONFLICT);
	assert_int_equal(egs_gpr_reject(st, q, "no", now), EGS_ERR_CONFLICT);
	struct egs_gpr *p = gpr_in_state(st, "ap", EGS_GPR_PENDING, now);
	assert_false(egs_queue_contains(&st->queue, p));
	assert_int_equal(egs_gpr_approve(st, p, now), EGS_OK);
	assert_int_equal(p->state, EGS_GPR_QUEUED);
	assert_null(p->pending_reason);
	assert_true(egs_queue_contains(&st->queue, p));
	struct egs_gpr *pr = gpr_in_state(st, "prov", EGS_GPR_PROVISIONED, now);
	assert_int_equal(egs_gpr_approve(st, pr, now), EGS_ERR_GPR_PROVISIONED);
	done(st);
}

/* ---- matching ---- */

static void test_node_matches(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *lo = add_node(st, "c1", "a-lo", "H100", "p5", 8, 40960, now);
	struct egs_node *hi = add_node(st, "c1", "b-hi", "H100", "p5", 8, 81920, now);
	struct egs_node *other = add_node(st, "c2", "c-other", "H100", "p5", 8, 81920, now);
	struct egs_workspace *ws = add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	struct egs_gpr *g = defer(free_gpr, mk_gpr("probe", "ws1", 1, 8, 60, 100));

	/* Each field on its own, with the boundaries inclusive. */
	assert_true(egs_node_matches(g, ws, lo));
	assert_false(egs_node_matches(g, ws, other)); /* c2 is not a cluster of ws1 */
	assert_true(egs_node_matches(g, NULL, other)); /* no workspace: any cluster */
	g->memory_mib = 40960;
	assert_true(egs_node_matches(g, ws, lo));
	g->memory_mib = 40961;
	assert_false(egs_node_matches(g, ws, lo));
	assert_true(egs_node_matches(g, ws, hi));
	g->memory_mib = 0;
	g->gpus_per_node = 9;
	assert_false(egs_node_matches(g, ws, hi));
	g->gpus_per_node = 1;
	egs_strlcpy(g->gpu_shape, "A100", sizeof(g->gpu_shape));
	assert_false(egs_node_matches(g, ws, hi));
	egs_strlcpy(g->gpu_shape, "H100", sizeof(g->gpu_shape));
	egs_strlcpy(g->instance_type, "p4d", sizeof(g->instance_type));
	assert_false(egs_node_matches(g, ws, hi));
	egs_strlcpy(g->instance_type, "p5", sizeof(g->instance_type));
	assert_true(egs_node_matches(g, ws, hi));
	egs_strlcpy(g->cluster, "c2", sizeof(g->cluster));
	assert_false(egs_node_matches(g, ws, hi));
	assert_false(egs_node_matches(g, ws, other)); /* pinned to c2, but ws1 does not have it */
	assert_true(egs_node_matches(g, NULL, other));

	/* The plan honours memory: a-lo sorts first but is too small, so b-hi is taken... */
	struct egs_gpr *big = mk_gpr("big", "ws1", 1, 8, 600, 100);
	big->memory_mib = 81920;
	submit(st, big, now);
	sched_run(st, now);
	assert_int_equal(big->state, EGS_GPR_PROVISIONING);
	assert_string_equal(hi->gpr_id, "big");
	assert_true(node_free(lo));
	/* ...and a second such request waits for b-hi although a-lo is free. */
	struct egs_gpr *big2 = mk_gpr("big2", "ws2", 1, 8, 600, 100);
	big2->memory_mib = 81920;
	submit(st, big2, now);
	sched_run(st, now);
	assert_int_equal(big2->state, EGS_GPR_QUEUED);
	assert_int_equal(big2->est_start, now + 600);
	assert_true(node_free(lo));
	done(g);
	done(st);
}

/* preferredClusters break ties between clusters that can start the GPR at the same time, and
 * never make it start later. */
static void test_preferred_clusters(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100(st, "c1", "n1", now);
	add_h100(st, "c2", "n1", now);
	add_h100(st, "c3", "n1", now);
	for (int i = 0; i < 4; i++) {
		char ws[16];
		snprintf(ws, sizeof(ws), "ws%d", i);
		add_ws(st, ws, "c1", "c2", "c3", NULL);
	}
	struct egs_gpr *plain = submit(st, mk_gpr("plain", "ws0", 1, 8, 600, 300), now);
	struct egs_gpr *pref = mk_gpr("pref", "ws1", 1, 8, 600, 200);
	egs_strlist_add(&pref->preferred_clusters, "nope");
	egs_strlist_add(&pref->preferred_clusters, "c3");
	egs_strlist_add(&pref->preferred_clusters, "c2");
	submit(st, pref, now);
	sched_run(st, now);
	assert_string_equal(plain->cluster, "c1"); /* no preference: the first cluster */
	assert_string_equal(pref->cluster, "c3");  /* the first preferred one that can hold it */

	/* Only c2 is free now; c3, preferred first, frees later: the earlier start wins. */
	struct egs_gpr *late = mk_gpr("late", "ws2", 1, 8, 600, 100);
	egs_strlist_add(&late->preferred_clusters, "c3");
	submit(st, late, now);
	sched_run(st, now);
	assert_int_equal(late->state, EGS_GPR_PROVISIONING);
	assert_string_equal(late->cluster, "c2");
	done(st);
}

/* ---- capacity ---- */

static void assert_capacity(struct egs_state *st, struct egs_gpr *g, const struct egs_workspace *ws,
			    size_t want_n, const char *want_prefix)
{
	char why[256] = "";
	size_t got = egs_sched_capacity(st, g, ws, why, sizeof(why));
	if (got != want_n || (want_prefix && strncmp(why, want_prefix, strlen(want_prefix)) != 0))
		fprintf(stderr, "capacity: got %zu \"%s\", want %zu \"%s...\"\n", got, why, want_n,
			want_prefix ? want_prefix : "");
	assert_int_equal(got, want_n);
	if (want_prefix)
		assert_memory_equal(why, want_prefix, strlen(want_prefix));
	else
		assert_string_equal(why, ""); /* satisfiable: nothing written */
}

static void test_capacity(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, 0);
	int64_t now = T0;
	struct egs_node *a1 = add_h100(st, "c1", "a1", now);
	add_h100(st, "c1", "a2", now);
	add_h100(st, "c2", "b1", now);
	add_node(st, "c3", "t4", "Tesla-T4", "g4dn.xlarge", 1, 16384, now);
	add_cluster(st, "c4"); /* no nodes */
	struct egs_workspace *ws = add_ws(st, "ws1", "c1", "c2", NULL);
	struct egs_workspace *empty = add_ws(st, "ws-empty", NULL);
	struct egs_workspace *ws4 = add_ws(st, "ws4", "c4", NULL);

	struct egs_gpr *g = defer(free_gpr, mk_gpr("g", "ws1", 2, 8, 3600, 100)); /* never submitted */
	assert_capacity(st, g, ws, 2, NULL);
	/* Unhealthy or stale nodes still count: capacity is about the inventory, not about now. */
	a1->health = EGS_HEALTH_UNHEALTHY;
	a1->last_heartbeat = 0;
	assert_capacity(st, g, ws, 2, NULL);

	/* Three nodes match in all, but a multi-node request must fit in one cluster. */
	g->node_count = 3;
	assert_capacity(st, g, ws, 2, "numberOfGPUNodes:");
	char why[256];
	egs_sched_capacity(st, g, ws, why, sizeof(why));
	assert_non_null(strstr(why, "3"));
	assert_non_null(strstr(why, "2"));
	g->node_count = 1;
	assert_capacity(st, g, ws, 2, NULL);

	/* The cluster: outside the workspace, unknown, or a workspace with no clusters / no nodes. */
	egs_strlcpy(g->cluster, "c3", sizeof(g->cluster));
	assert_capacity(st, g, ws, 0, "clusterName:");
	egs_strlcpy(g->cluster, "nope", sizeof(g->cluster));
	assert_capacity(st, g, ws, 0, "clusterName:");
	g->cluster[0] = '\0';
	assert_capacity(st, g, empty, 0, "clusterName:");
	assert_capacity(st, g, ws4, 0, "clusterName:");
	egs_strlcpy(g->cluster, "c2", sizeof(g->cluster));
	assert_capacity(st, g, ws, 1, NULL);
	g->cluster[0] = '\0';

	/* Then shape, instance type, GPUs per node and memory, each named. */
	egs_strlcpy(g->gpu_shape, "Tesla-T4", sizeof(g->gpu_shape)); /* exists, but not in ws1 */
	assert_capacity(st, g, ws, 0, "gpuShape:");
	egs_strlcpy(g->gpu_shape, "NVIDIA-H100-80GB-HBM3", sizeof(g->gpu_shape));
	egs_strlcpy(g->instance_type, "g4dn.xlarge", sizeof(g->instance_type));
	assert_capacity(st, g, ws, 0, "instanceType:");
	egs_strlcpy(g->instance_type, "p5.48xlarge", sizeof(g->instance_type));
	g->gpus_per_node = 9;
	assert_capacity(st, g, ws, 0, "numberOfGPUs:");
	g->gpus_per_node = 8;
	g->memory_mib = 81921;
	assert_capacity(st, g, ws, 0, "memoryPerGpu:");
	g->memory_mib = 81920;
	assert_capacity(st, g, ws, 2, NULL);

	/* Without a workspace every cluster counts; a NULL why is allowed. */
	g->gpu_shape[0] = g->instance_type[0] = '\0';
	g->gpus_per_node = 1;
	g->memory_mib = 16384;
	assert_int_equal(egs_sched_capacity(st, g, NULL, NULL, 0), 2);
	g->node_count = 5;
	assert_int_equal(egs_sched_capacity(st, g, NULL, NULL, 0), 2);

	/* Answers are kept, and forgotten when the inventory changes: a node added, a node's shape
	 * changed in place (re-registration bumps inventory_gen), a workspace's clusters changed. */
	g->node_count = 1;
	assert_capacity(st, g, ws, 2, NULL);
	add_h100(st, "c1", "a3", now);
	assert_capacity(st, g, ws, 3, NULL);
	egs_strlcpy(a1->gpu_shape, "Tesla-T4", sizeof(a1->gpu_shape));
	a1->memory_mib = 1024;
	st->inventory_gen++;
	assert_capacity(st, g, ws, 2, NULL);
	egs_strlist_add(&empty->clusters, "c1");
	egs_state_touch(st, EGS_KIND_WORKSPACE, empty);
	assert_capacity(st, g, empty, 2, NULL);

	/* The kept answers' key keeps its numbers apart: 8 GPUs of 11 MiB fit, and 81 GPUs of 1 MiB
	 * (the same digits) are not answered from that entry; a negative memory is its own key too. */
	g->gpus_per_node = 8;
	g->memory_mib = 11;
	assert_capacity(st, g, ws, 3, NULL); /* a1, a2, a3: any shape now */
	g->gpus_per_node = 81;
	g->memory_mib = 1;
	assert_capacity(st, g, ws, 0, "numberOfGPUs:");
	g->gpus_per_node = 8;
	g->memory_mib = -11;
	assert_capacity(st, g, ws, 3, NULL);
	done(g);
	done(st);
}

/* ---- stale nodes ---- */

static void test_stale_node(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, 15);
	int64_t now = T0;
	struct egs_node *stale = add_h100(st, "c1", "a-stale", now - 16);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	assert_false(egs_node_schedulable(st, stale, now));
	struct egs_gpr *g = submit(st, mk_gpr("g", "ws1", 1, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_QUEUED);
	assert_true(node_free(stale));
	assert_int_equal(g->est_start, 0); /* nothing can hold it now: no estimate */

	/* A fresh node takes it; the stale one (first by name) is still never chosen. */
	struct egs_node *fresh = add_h100(st, "c1", "b-fresh", now);
	int64_t next = sched_run(st, now);
	assert_int_equal(g->state, EGS_GPR_PROVISIONING);
	assert_string_equal(fresh->gpr_id, "g");
	assert_true(node_free(stale));
	/* The run asks to be woken when the fresh node would go stale. */
	assert_int_equal(next, now + 16);

	/* The boundary: exactly heartbeat_timeout_s old is still schedulable, one more is not. */
	stale->last_heartbeat = now - 15;
	assert_true(egs_node_schedulable(st, stale, now));
	stale->last_heartbeat = now - 16;
	struct egs_gpr *h = submit(st, mk_gpr("h", "ws2", 1, 8, 600, 100), now);
	sched_run(st, now);
	assert_int_equal(h->state, EGS_GPR_QUEUED);
	assert_true(node_free(stale));
	/* A node never heard from is not schedulable either, nor an unhealthy one. */
	stale->last_heartbeat = 0;
	assert_false(egs_node_schedulable(st, stale, now));
	stale->last_heartbeat = now;
	stale->health = EGS_HEALTH_UNSCHEDULABLE;
	sched_run(st, now);
	assert_int_equal(h->state, EGS_GPR_QUEUED);
	stale->health = EGS_HEALTH_HEALTHY;
	sched_run(st, now);
	assert_int_equal(h->state, EGS_GPR_PROVISIONING);
	assert_string_equal(stale->gpr_id, "h");
	done(st);
}

/* ---- the hypothetical estimate ---- */

static void test_estimate_matches_plan(void **state)
{
	(void)state;
	size_t checked = 0, started = 0, never = 0;
	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		random_world(st, seed, 3, 4, seed % 2 == 0);
		bool homogeneous = seed % 2 == 0;
		int64_t now = T0;
		size_t n = (size_t)rng_range(0, 25);
		for (size_t i = 0; i < n; i++)
			submit(st, random_gpr(i, 4, 3, homogeneous, false), now);
		/* Advance a random number of steps so some windows are running. */
		int64_t next = settle(st, now);
		for (int k = (int)rng_range(0, 10); k > 0 && next != EGS_NEVER; k--) {
			now = next;
			next = settle(st, now);
		}
		for (int probe = 0; probe < 5; probe++) {
			char id[EGS_ID_MAX];
			snprintf(id, sizeof(id), "probe-%d", probe);
			struct egs_gpr *g = random_gpr(1000 + (size_t)probe, 4, 4, homogeneous, false);
			egs_strlcpy(g->id, id, sizeof(g->id));
			if (probe == 4)
				g->node_count = 7; /* more than any cluster has */
			char cl[EGS_NAME_MAX] = "";
			egs_state_clear_changes(st);
			int64_t est = egs_sched_estimate(st, g, now, cl);
			assert_false(egs_state_has_changes(st)); /* no side effects */
			submit(st, g, now);
			sched_run(st, now);
			if (est == EGS_NEVER) {
				assert_int_equal(g->state, EGS_GPR_QUEUED);
				assert_int_equal(g->est_start, 0);
				never++;
			} else if (est == now) {
				assert_int_equal(g->state, EGS_GPR_PROVISIONING);
				assert_string_equal(g->cluster, cl);
				started++;
			} else {
				assert_int_equal(g->state, EGS_GPR_QUEUED);
				assert_int_equal(g->est_start, est);
				assert_true(cl[0] != '\0');
			}
			checked++;
			settle(st, now);
			egs_state_clear_changes(st);
		}
		done(st);
	}
	assert_int_equal(checked, 200);
	assert_true(started > 0);
	assert_true(never >= 40);
	assert_true(checked - started - never > 40);
}

static void test_estimate_no_side_effects(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	struct egs_node *n = add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	struct egs_gpr *a = submit(st, mk_gpr("a", "ws1", 1, 8, 600, 100), now);
	egs_state_clear_changes(st);
	/* a could start now, but a hypothetical request neither starts it nor writes anything. */
	struct egs_gpr *probe = defer(free_gpr, mk_gpr("probe", "ws2", 1, 8, 60, 100)); /* never submitted */
	char cl[EGS_NAME_MAX] = "";
	assert_int_equal(egs_sched_estimate(st, probe, now, cl), now + 600);
	assert_string_equal(cl, "c1");
	assert_int_equal(a->state, EGS_GPR_QUEUED);
	assert_true(node_free(n));
	assert_false(egs_state_has_changes(st));
	assert_null(egs_state_gpr(st, "probe"));
	/* A higher priority probe would go first. */
	probe->priority = 300;
	assert_int_equal(egs_sched_estimate(st, probe, now, NULL), now);
	/* In a's own workspace it waits for a's window. */
	egs_strlcpy(probe->workspace, "ws1", sizeof(probe->workspace));
	probe->priority = 100;
	assert_int_equal(egs_sched_estimate(st, probe, now, NULL), now + 600);
	done(probe);
	done(st);
}

/*
 * egs_sched_append places a GPR that goes to the end of the queue on the plan kept by the last
 * run, "giving exactly what a full egs_sched_run would give it" when nothing else changed and the
 * plan is at most a second old.  Random states, some with unacknowledged attaches (Provisioning
 * GPRs), appended at the plan's own second and one second later: an answer must equal the
 * hypothetical estimate (itself checked against the full plan above), and a start now must
 * provision.  Refusing (EGS_NEVER - 1) is allowed one second later, never in the plan's own second
 * for a GPR that goes last; a GPR that does not go last must be refused.
 */
static void test_append_matches_full_plan(void **state)
{
	(void)state;
	size_t checked = 0, started = 0, late = 0, refused = 0, mismatched = 0, mismatched0 = 0;
	for (uint64_t seed = 1; seed <= 60; seed++) {
		struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
		bool homogeneous = seed % 2 == 0;
		random_world(st, seed, 3, 4, homogeneous);
		int64_t now = T0;
		size_t n = seed % 5 == 0 ? 0 : (size_t)rng_range(0, 20); /* sometimes an idle pool */
		for (size_t i = 0; i < n; i++)
			submit(st, random_gpr(i, 4, 2, homogeneous, false), now);
		int64_t next = settle(st, now);
		for (int k = (int)rng_range(0, 8); k > 0 && next < T0 + LONG_HEARTBEAT; k--) {
			now = next;
			next = settle(st, now);
		}
		/* A few more arrivals that the agents have not acknowledged yet. */
		for (size_t i = 0; i < seed % 3; i++)
			submit(st, random_gpr(100 + i, 4, 2, homogeneous, false), now);
		struct egs_plan *plan = defer(free_plan, egs_plan_new());
		egs_sched_run(st, now, plan);
		int64_t at = now + (int64_t)(seed % 2);
		for (int probe = 0; probe < 4; probe++) {
			struct egs_gpr *g = random_gpr(200 + (size_t)probe, 4, 2, homogeneous, false);
			g->priority = 4 - probe; /* below everything queued, fair share or not: it goes last */
			int64_t est = egs_sched_estimate(st, g, at, NULL);
			submit(st, g, at);
			int64_t got = egs_sched_append(st, g, at, plan);
			checked++;
			if (got == EGS_NEVER - 1) {
				/* Refusing is always safe (the caller then runs the full plan), but a plan
				 * built this very second must serve a GPR that goes last. */
				assert_int_equal(at, now + 1);
				refused++;
				egs_sched_run(st, at, plan);
				continue;
			}
			if (got != est) {
				mismatched0 += at == now;
				if (mismatched++ < 3)
					fprintf(stderr, "seed %llu: %s appended at %+lld gets %+lld, the full plan %+lld\n",
						(unsigned long long)seed, g->id, (long long)(at - now),
						(long long)(got == EGS_NEVER ? -1 : got - now),
						(long long)(est == EGS_NEVER ? -1 : est - now));
				continue;
			}
			if (got == at) {
				assert_int_equal(g->state, EGS_GPR_PROVISIONING);
				started++;
			} else {
				assert_int_equal(g->state, EGS_GPR_QUEUED);
				assert_int_equal(g->est_start, got == EGS_NEVER ? 0 : got);
				late++;
			}
		}
		/* A GPR that would not go last is refused, so the caller runs the full plan. */
		struct egs_gpr *first = random_gpr(300, 4, 2, homogeneous, false);
		first->priority = 1000;
		submit(st, first, at);
		assert_int_equal(egs_sched_append(st, first, at, plan), EGS_NEVER - 1);
		done(plan);
		done(st);
	}
	if (mismatched)
		fprintf(stderr, "append: %zu checked, %zu started, %zu later, %zu refused, %zu mismatched (%zu at +0)\n",
			checked, started, late, refused, mismatched, mismatched0);
	assert_int_equal(checked, 240);
	assert_true(started >= 5);
	assert_true(late > 50);
	assert_int_equal(mismatched, 0);
}

/*
 * "p is at most a second old" and "exactly what a full egs_sched_run would give": a plan built at
 * T0 must not answer differently from a full plan at T0 + 1, and must refuse at T0 + 2 however
 * many appends came in between (an append must not make the plan younger).
 */
static void test_append_refuses_old_plan(void **state)
{
	(void)state;
	struct egs_state *st = state_new(0, 0, LONG_HEARTBEAT);
	int64_t now = T0;
	add_h100(st, "c1", "n1", now);
	add_ws(st, "ws1", "c1", NULL);
	add_ws(st, "ws2", "c1", NULL);
	add_ws(st, "ws3", "c1", NULL);
	submit(st, mk_gpr("a", "ws1", 1, 8, 600, 100), now);
	struct egs_plan *plan = defer(free_plan, egs_plan_new());
	/* Without a run the plan is not valid. */
	struct egs_gpr *b = submit(st, mk_gpr("b", "ws2", 1, 8, 600, 100), now);
	assert_int_equal(egs_sched_append(st, b, now, plan), EGS_NEVER - 1);
	egs_sched_run(st, now, plan);
	assert_int_equal(b->est_start, now + 600);

	/* A plan does not age: a still-provisioning GPR counts from when it started provisioning, so a
	 * full plan a second or two later gives the same times, and the kept plan answers exactly so. */
	struct egs_gpr *c = mk_gpr("c", "ws3", 1, 8, 600, 100);
	int64_t want = egs_sched_estimate(st, c, now + 1, NULL);
	assert_int_equal(want, now + 1200);
	submit(st, c, now + 1);
	assert_int_equal(egs_sched_append(st, c, now + 1, plan), want);
	struct egs_gpr *d = mk_gpr("d", "ws1", 1, 8, 600, 100);
	want = egs_sched_estimate(st, d, now + 2, NULL);
	submit(st, d, now + 2);
	assert_int_equal(egs_sched_append(st, d, now + 2, plan), want);
	assert_int_equal(want, now + 1800);
	/* A plan from the future is refused (the clock never goes back, but a test clock could). */
	struct egs_gpr *f = submit(st, mk_gpr("f", "ws2", 1, 8, 600, 100), now + 1);
	assert_int_equal(egs_sched_append(st, f, now + 1, plan), EGS_NEVER - 1);
	/* An invalidated plan is refused too, until the next run rebuilds it. */
	egs_sched_run(st, now + 2, plan);
	egs_plan_invalidate(plan);
	struct egs_gpr *e = submit(st, mk_gpr("e", "ws2", 1, 8, 600, 100), now + 2);
	assert_int_equal(egs_sched_append(st, e, now + 2, plan), EGS_NEVER - 1);
	done(plan);
	egs_plan_free(NULL); /* a no-op */
	done(st);
}

/* The exactness tests again, every run walked in slices of 1 and 3 GPRs: the same promises hold
 * (estimates kept exactly, releases and cancels never move anyone later), with and without
 * backfill.  tests/unit/test_sched_slices.c has requests coming in between slices. */
static void test_sliced_runs(void **state)
{
	static const size_t sizes[] = { 1, 3 };
	for (size_t k = 0; k < EGS_ARRAY_LEN(sizes); k++) {
		slice_max = sizes[k];
		test_estimates_hold_mixed_nodes(state);
		test_backfill_estimates_hold(state);
		backfill_cfg = 0;
		test_cancel_random(state);
		test_preempt_least_lost(state);
	}
	slice_max = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lifecycle_one_node, teardown),
		cmocka_unit_test_teardown(test_idle_run_changes_nothing, teardown),
		cmocka_unit_test_teardown(test_progress_marks, teardown),
		cmocka_unit_test_teardown(test_one_gpr_per_workspace, teardown),
		cmocka_unit_test_teardown(test_priority_order, teardown),
		cmocka_unit_test_teardown(test_reservation_no_starvation, teardown),
		cmocka_unit_test_teardown(test_estimates_hold_one_shape, teardown),
		cmocka_unit_test_teardown(test_estimates_hold_mixed_nodes, teardown),
		cmocka_unit_test_teardown(test_estimates_hold_with_fair_share, teardown),
		cmocka_unit_test_teardown(test_fair_share_key, teardown),
		cmocka_unit_test_teardown(test_fair_share_order, teardown),
		cmocka_unit_test_teardown(test_estimates_from_kept_plan, teardown),
		cmocka_unit_test_teardown(test_preempt_least_lost, teardown),
		cmocka_unit_test_teardown(test_preempt_guards, teardown),
		cmocka_unit_test_teardown(test_preempt_counts_free_nodes, teardown),
		cmocka_unit_test_teardown(test_estimate_holds_when_a_node_frees, teardown),
		cmocka_unit_test_teardown(test_early_release_random, teardown),
		cmocka_unit_test_teardown(test_cancel_random, teardown),
		cmocka_unit_test_teardown(test_early_release_never_later_two_clusters, teardown),
		cmocka_unit_test_teardown(test_early_release_never_later_two_shapes, teardown),
		cmocka_unit_test_teardown(test_early_release_paths, teardown),
		cmocka_unit_test_teardown(test_attach_failure, teardown),
		cmocka_unit_test_teardown(test_attach_failure_multi_node, teardown),
		cmocka_unit_test_teardown(test_requeued_keeps_its_cluster, teardown),
		cmocka_unit_test_teardown(test_provision_timeout, teardown),
		cmocka_unit_test_teardown(test_next_wake_includes_provision_timeout, teardown),
		cmocka_unit_test_teardown(test_error_codes_per_state, teardown),
		cmocka_unit_test_teardown(test_node_matches, teardown),
		cmocka_unit_test_teardown(test_preferred_clusters, teardown),
		cmocka_unit_test_teardown(test_capacity, teardown),
		cmocka_unit_test_teardown(test_stale_node, teardown),
		cmocka_unit_test_teardown(test_estimate_matches_plan, teardown),
		cmocka_unit_test_teardown(test_estimate_no_side_effects, teardown),
		cmocka_unit_test_teardown(test_append_matches_full_plan, teardown),
		cmocka_unit_test_teardown(test_append_refuses_old_plan, teardown),
		cmocka_unit_test_teardown(test_backfill_short_before_reservation, teardown),
		cmocka_unit_test_teardown(test_backfill_workspace_hole, teardown),
		cmocka_unit_test_teardown(test_backfill_estimates_hold, teardown),
		cmocka_unit_test_teardown(test_backfill_estimates_hold_with_fair_share, teardown),
		cmocka_unit_test_teardown(test_backfill_early_release_held, teardown),
		cmocka_unit_test_teardown(test_backfill_plan_paths_agree, teardown),
		cmocka_unit_test_teardown(test_sliced_runs, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
