/*
 * bench_plan.c: times the scheduler's full walk and a wait-time query on a big synthetic inventory,
 * through the real core.  Usage: bench_plan [nodes] [queued GPRs] [pools] [backfill: 0 or 1] [workspaces]
 * [step runs] [creates a run].  Defaults: 10,000 nodes in 20 pools over 4 clusters, 100,000 queued
 * GPRs in 1,000 workspaces (bench/api/deep.sh's egsd has 16).  With step runs N > 0 it makes the
 * first walk, then only N runs after C creates each (64), in steps of at most 256 GPRs (egsd's largest), one
 * egs_sched_step a call of one_step(), printing each step's piece: bench/planner/steps.sh has
 * callgrind count every step's instructions apart.
 */
#include "core/gpr.h"
#include "core/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double secs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of this thread: on a loaded machine wall time also counts the time others ran. */
static double cpu_secs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A run in slices as egsd walks it: egs_sched_begin, steps of `slice` GPRs, egs_sched_end, each
 * piece timed alone (CPU and wall).  Returns the run's CPU time; pc gets the longest piece and its
 * kind (egs_sched_piece), and the longest of those that place no GPR (set-up, freeing the last
 * plan, the pieces of the first state, the queue's order, the end): the pieces a smaller slice
 * cannot shorten.  kinds (every sliced run's) keeps the longest of each kind. */
struct piece {
	double longest;
	const char *what;
	double fixed, fixed_wall;
	const char *fixed_what;
};

enum { KINDS_MAX = 24 };
static struct kind {
	const char *what;
	double cpu, wall;
	size_t n;
} kinds[KINDS_MAX];

static void note_piece(struct piece *pc, double d, double wall, const char *what, bool placed)
{
	if (d > pc->longest) {
		pc->longest = d;
		pc->what = what;
	}
	if (!placed && d > pc->fixed) {
		pc->fixed = d;
		pc->fixed_wall = wall;
		pc->fixed_what = what;
	}
	size_t k = 0;
	while (k < KINDS_MAX && kinds[k].what && strcmp(kinds[k].what, what) != 0)
		k++;
	if (k == KINDS_MAX)
		return;
	kinds[k].what = what;
	kinds[k].n++;
	if (d > kinds[k].cpu)
		kinds[k].cpu = d;
	if (wall > kinds[k].wall)
		kinds[k].wall = wall;
}

static double sliced_run(struct egs_state *st, struct egs_plan *plan, int64_t now, size_t slice, struct piece *pc)
{
	double w0 = secs(), t0 = cpu_secs(), total = 0;
	egs_sched_begin(st, now, plan);
	double d = cpu_secs() - t0;
	total += d;
	note_piece(pc, d, secs() - w0, "set-up (egs_sched_begin: due transitions, held releases, resume)", false);
	int64_t next;
	do {
		for (bool walked = false; !walked;) {
			size_t at = egs_sched_progress(plan);
			const char *what = egs_sched_piece(plan);
			w0 = secs();
			t0 = cpu_secs();
			walked = egs_sched_step(plan, slice);
			d = cpu_secs() - t0;
			total += d;
			bool placed = egs_sched_progress(plan) != at && strstr(what, "walk") && !strstr(what, "resumed");
			note_piece(pc, d, secs() - w0, placed ? "walk: a step of GPRs" : what, placed);
		}
		w0 = secs();
		t0 = cpu_secs();
		bool ended = egs_sched_end(plan, &next);
		d = cpu_secs() - t0;
		total += d;
		note_piece(pc, d, secs() - w0, "end (egs_sched_end: preemption)", false);
		if (ended)
			break;
	} while (1);
	egs_state_clear_changes(st);
	return total;
}

/* The scenarios under their own names, so that callgrind counts each one's instructions apart
 * (callgrind_annotate --inclusive=yes: full_replan, release_run, run_after_1, run_after_64). */
static __attribute__((noipa)) int64_t full_replan(struct egs_state *st, int64_t now, struct egs_plan *plan)
{
	return egs_sched_run(st, now, plan);
}

static __attribute__((noipa)) int64_t release_run(struct egs_state *st, int64_t now, struct egs_plan *plan)
{
	return egs_sched_run(st, now, plan);
}

static __attribute__((noipa)) double run_after_1(struct egs_state *st, struct egs_plan *plan, int64_t now,
						    struct piece *pc)
{
	return sliced_run(st, plan, now, 2000, pc);
}

static __attribute__((noipa)) double run_after_64(struct egs_state *st, struct egs_plan *plan, int64_t now,
						     struct piece *pc)
{
	return sliced_run(st, plan, now, 2000, pc);
}

/* One step of a run in slices under its own name: steps.sh has callgrind dump each call apart
 * (--toggle-collect=one_step --dump-after=one_step). */
static __attribute__((noipa)) bool one_step(struct egs_plan *plan, size_t max)
{
	return egs_sched_step(plan, max);
}

static struct egs_gpr *random_gpr(long i, long pools, long workspaces);

/* The step-runs mode (above): runs after `creates` creates at random priorities, in steps of 256
 * GPRs, as egsd walks them under deep.sh's creates; prints "step <n> <piece>" for each step, in
 * order. */
static void step_runs(struct egs_state *st, struct egs_plan *plan, int64_t now, long runs, long creates, long gprs,
		      long pools, long workspaces)
{
	long next_id = gprs, n = 0;
	for (long r = 0; r < runs; r++) {
		for (long k = 0; k < creates; k++)
			egs_gpr_submit(st, random_gpr(next_id++, pools, workspaces), now + 1);
		egs_sched_begin(st, now + 1, plan);
		int64_t next;
		do {
			for (bool walked = false; !walked;) {
				size_t at = egs_sched_progress(plan);
				const char *what = egs_sched_piece(plan);
				walked = one_step(plan, 256);
				bool placed = egs_sched_progress(plan) != at && strstr(what, "walk") && !strstr(what, "resumed");
				printf("step %ld %s\n", ++n, placed ? "walk: a step of GPRs" : what);
			}
		} while (!egs_sched_end(plan, &next));
		egs_state_clear_changes(st);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* A GPR like the queue's, at a random priority 1-300. */
static struct egs_gpr *random_gpr(long i, long pools, long workspaces)
{
	struct egs_gpr *g = egs_gpr_new();
	long pool = rand() % pools;
	snprintf(g->id, sizeof(g->id), "gpr-%08lx-0000", (unsigned long)i & 0xffffffffUL);
	snprintf(g->name, sizeof(g->name), "job-%ld", i);
	snprintf(g->workspace, sizeof(g->workspace), "ws-%ld", rand() % workspaces);
	snprintf(g->gpu_shape, sizeof(g->gpu_shape), "shape-%ld", pool);
	g->gpus_per_node = 1 + rand() % 8;
	g->node_count = 1 + (rand() % 10 == 0 ? rand() % 8 : 0);
	g->exit_duration_s = 600 * (1 + rand() % 48);
	g->priority = 1 + rand() % 300;
	g->memory_mib = 1024;
	return g;
}

/* What the walk decided, to compare builds: every GPR's estimate, state, delays and nodes. */
static uint64_t checksum(struct egs_state *st, long gprs)
{
	uint64_t sum = 1469598103934665603ull;
	for (long i = 0; i < gprs; i++) {
		char id[EGS_ID_MAX];
		snprintf(id, sizeof(id), "gpr-%08lx-0000", (unsigned long)i & 0xffffffffUL);
		const struct egs_gpr *g = egs_state_gpr(st, id);
		sum = (sum ^ (uint64_t)g->est_start ^ ((uint64_t)g->state << 40)) * 1099511628211ull;
		for (size_t k = 0; k < g->nodes.n; k++)
			for (const char *c = g->nodes.v[k]; *c; c++)
				sum = (sum ^ (unsigned char)*c) * 1099511628211ull;
	}
	return sum;
}

int main(int argc, char **argv)
{
	long nodes = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
	long gprs = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
	long pools = argc > 3 ? strtol(argv[3], NULL, 10) : 20;
	int backfill = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 0;
	const long clusters = 4, workspaces = argc > 5 ? strtol(argv[5], NULL, 10) : 1000;
	long step_mode = argc > 6 ? strtol(argv[6], NULL, 10) : 0, creates = argc > 7 ? strtol(argv[7], NULL, 10) : 64;
	const int64_t now = 1800000000;
	struct egs_state_config cfg = { .heartbeat_timeout_s = 1000000000, .event_retention = 16, .backfill = backfill };
	struct egs_state st;
	egs_state_init(&st, &cfg);
	srand(42);
	for (long i = 0; i < nodes; i++) {
		struct egs_node *n = egs_calloc(1, sizeof(*n));
		long pool = i % pools;
		snprintf(n->name, sizeof(n->name), "node-%ld", i);
		snprintf(n->cluster, sizeof(n->cluster), "c%ld", pool % clusters);
		snprintf(n->gpu_shape, sizeof(n->gpu_shape), "shape-%ld", pool);
		snprintf(n->instance_type, sizeof(n->instance_type), "it-%ld", pool);
		n->gpu_count = 8;
		n->memory_mib = 81920;
		n->last_heartbeat = now;
		egs_state_add_node(&st, n);
	}
	for (long w = 0; w < workspaces; w++) {
		struct egs_workspace *ws = egs_calloc(1, sizeof(*ws));
		snprintf(ws->name, sizeof(ws->name), "ws-%ld", w);
		for (long c = 0; c < clusters; c++) {
			char cn[16];
			snprintf(cn, sizeof(cn), "c%ld", c);
			egs_strlist_add(&ws->clusters, cn);
		}
		egs_state_add_workspace(&st, ws);
	}
	for (long i = 0; i < gprs; i++)
		egs_gpr_submit(&st, random_gpr(i, pools, workspaces), now);
	egs_state_clear_changes(&st);
	struct egs_plan *plan = egs_plan_new();
	double t0 = secs();
	egs_sched_run(&st, now, plan); /* first walk: starts what fits */
	double first = secs() - t0;
	uint64_t sum = checksum(&st, gprs);
	egs_state_clear_changes(&st);
	if (step_mode > 0) {
		step_runs(&st, plan, now, step_mode, creates, gprs, pools, workspaces);
		egs_plan_free(plan);
		egs_state_cleanup(&st);
		return 0;
	}
	double best = 1e9;
	double best_cpu = 1e9;
	for (int rep = 0; rep < 5; rep++) {
		t0 = secs();
		double c0 = cpu_secs();
		full_replan(&st, now, plan);
		double d = secs() - t0, c = cpu_secs() - c0;
		if (d < best)
			best = d;
		if (c < best_cpu)
			best_cpu = c;
		egs_state_clear_changes(&st);
	}
	/* The same run in slices, as egsd walks it: the set-up (due transitions, pools, the order) is
	 * one piece that cannot be cut; then slices of 2,000 GPRs. */
	double setup = 1e9, slice = 0;
	for (int rep = 0; rep < 3; rep++) {
		t0 = secs();
		egs_sched_begin(&st, now, plan);
		double d = secs() - t0;
		if (d < setup)
			setup = d;
		int64_t next;
		do {
			for (bool walked = false; !walked;) {
				t0 = secs();
				walked = egs_sched_step(plan, 2000);
				d = secs() - t0;
				if (rep == 2 && d > slice)
					slice = d;
			}
		} while (!egs_sched_end(plan, &next));
		egs_state_clear_changes(&st);
	}
	struct egs_gpr *probe = egs_gpr_new();
	snprintf(probe->workspace, sizeof(probe->workspace), "ws-1");
	snprintf(probe->gpu_shape, sizeof(probe->gpu_shape), "shape-3");
	probe->gpus_per_node = 8;
	probe->node_count = 2;
	probe->exit_duration_s = 3600;
	probe->priority = 150;
	double qbest = 1e9;
	for (int rep = 0; rep < 5; rep++) {
		t0 = secs();
		egs_sched_estimate(&st, probe, now, NULL);
		double d = secs() - t0;
		if (d < qbest)
			qbest = d;
	}
	/* The same questions served by the plan the last run kept (what egsd does when nothing changed
	 * since): one shape at three priorities, and one request asked of every pool at once (what
	 * POST /api/v1/gpr/waittime does for a request without a shape). */
	egs_sched_run(&st, now, plan);
	egs_state_clear_changes(&st);
	static const int prios[] = { 300, 150, 1 };
	double kbest[3];
	for (int k = 0; k < 3; k++) {
		probe->priority = prios[k];
		kbest[k] = 1e9;
		for (int rep = 0; rep < 5; rep++) {
			int64_t out;
			t0 = secs();
			egs_sched_estimates(&st, (const struct egs_gpr *const *)&probe, 1, now, plan, &out, NULL);
			double d = secs() - t0;
			if (d < kbest[k])
				kbest[k] = d;
		}
	}
	struct egs_gpr *every = egs_calloc((size_t)pools, sizeof(*every));
	const struct egs_gpr **ask = egs_calloc((size_t)pools, sizeof(*ask));
	int64_t *outs = egs_calloc((size_t)pools, sizeof(*outs));
	probe->priority = 150;
	for (long j = 0; j < pools; j++) {
		every[j] = *probe;
		snprintf(every[j].gpu_shape, sizeof(every[j].gpu_shape), "shape-%ld", j);
		ask[j] = &every[j];
	}
	double abest = 1e9;
	for (int rep = 0; rep < 5; rep++) {
		t0 = secs();
		egs_sched_estimates(&st, ask, (size_t)pools, now, plan, outs, NULL);
		double d = secs() - t0;
		if (d < abest)
			abest = d;
	}
	free(outs);
	free(ask);
	free(every);
	/* An early release: the run that follows walks the queue with the release held and lifted
	 * (core/held.h) before the real walk, so it costs two to four full walks. */
	double rel = 0, rel_cpu = 0;
	uint64_t rel_sum = 0;
	size_t held = 0;
	if (st.active.len) {
		struct egs_gpr *a = st.active.items[0];
		egs_gpr_release(&st, a, now + 1);
		t0 = secs();
		double c0 = cpu_secs();
		release_run(&st, now + 1, plan);
		rel = secs() - t0;
		rel_cpu = cpu_secs() - c0;
		held = st.held.len;
		rel_sum = checksum(&st, gprs);
		for (long i = 0; i < gprs; i++) { /* and the delays the run counted */
			char id[EGS_ID_MAX];
			snprintf(id, sizeof(id), "gpr-%08lx-0000", (unsigned long)i & 0xffffffffUL);
			rel_sum = (rel_sum ^ (uint64_t)egs_state_gpr(&st, id)->delayed_count) * 1099511628211ull;
		}
		egs_state_clear_changes(&st);
	}
	/* What egsd meets under creates at mixed priorities: a run after each burst of creates (1 or
	 * 64 at random priorities), in slices of 2,000 GPRs; the walk resumes from the kept plan's
	 * snapshot before the first of them (core/sched_kept.c walk_resume). */
	static const int bursts[] = { 1, 64 };
	double burst_med[2], burst_walked[2];
	struct piece longest = { 0, "", 0, 0, "" };
	long next_id = gprs;
	for (int b = 0; b < 2; b++) {
		enum { ROUNDS = 15 };
		double runs[ROUNDS], walked = 0;
		for (int r = 0; r < ROUNDS; r++) {
			for (int k = 0; k < bursts[b]; k++)
				egs_gpr_submit(&st, random_gpr(next_id++, pools, workspaces), now + 1);
			runs[r] = b ? run_after_64(&st, plan, now + 1, &longest) : run_after_1(&st, plan, now + 1, &longest);
			walked += (double)(egs_sched_progress(plan) - egs_sched_from(plan));
		}
		qsort(runs, ROUNDS, sizeof(runs[0]), cmp_double);
		burst_med[b] = runs[ROUNDS / 2];
		burst_walked[b] = walked / ROUNDS;
	}
	/* The longest piece of a plain run and of a run after an early release, sliced the same way. */
	struct piece plain = { 0, "", 0, 0, "" }, after_rel = { 0, "", 0, 0, "" };
	sliced_run(&st, plan, now + 1, 2000, &plain);
	if (st.active.len) {
		egs_gpr_release(&st, st.active.items[st.active.len - 1], now + 2);
		sliced_run(&st, plan, now + 2, 2000, &after_rel);
	}
	/* After the inventory changed (a node registered, a workspace came): the first state's pools
	 * are made afresh (names ranked, attributes hashed, heaps and trees built). */
	struct piece fresh = { 0, "", 0, 0, "" };
	st.inventory_gen++;
	st.generation++;
	sliced_run(&st, plan, now + 2, 2000, &fresh);
	printf("nodes=%ld pools=%ld backfill=%d queued=%zu active=%zu\n", nodes, pools, backfill, egs_queue_len(&st.queue), st.active.len);
	printf("first walk (starts GPRs): %.1f ms; checksum of estimates, states and nodes %016llx\n", first * 1e3,
	       (unsigned long long)sum);
	printf("full re-plan (best of 5): %.1f ms (CPU %.1f ms)\n", best * 1e3, best_cpu * 1e3);
	printf("run in slices: set-up %.1f ms (best of 3), longest slice of 2,000 GPRs %.2f ms\n", setup * 1e3,
	       slice * 1e3);
	printf("wait-time query, one shape, fresh walk (best of 5): %.1f ms\n", qbest * 1e3);
	printf("wait-time query from the kept plan, priority 300 / 150 / 1 (best of 5): %.2f / %.2f / %.3f ms\n",
	       kbest[0] * 1e3, kbest[1] * 1e3, kbest[2] * 1e3);
	printf("wait-time query from the kept plan, all %ld pools at once, priority 150: %.2f ms\n", pools, abest * 1e3);
	printf("run after one early release (trial walks; release %s): %.1f ms (CPU %.1f ms); checksum then %016llx\n",
	       held ? "held" : "applied", rel * 1e3, rel_cpu * 1e3, (unsigned long long)rel_sum);
	for (int b = 0; b < 2; b++)
		printf("run after %d create(s) at random priorities, in slices of 2,000 (median of 15, CPU): %.1f ms, "
		       "%.0f GPRs walked on average\n", bursts[b], burst_med[b] * 1e3, burst_walked[b]);
	const struct piece *pcs[] = { &longest, &plain, &after_rel, &fresh };
	static const char *const names[] = { "after creates", "plain run", "after an early release",
					     "after the inventory changed" };
	for (int k = 0; k < 4; k++)
		printf("longest piece of a sliced run %s (CPU): %.2f ms (%s); placing no GPR: %.2f ms CPU, %.2f ms wall (%s)\n",
		       names[k], pcs[k]->longest * 1e3, pcs[k]->what, pcs[k]->fixed * 1e3, pcs[k]->fixed_wall * 1e3,
		       pcs[k]->fixed_what);
	printf("longest piece of each kind over every sliced run above (CPU / wall, how many):\n");
	for (size_t k = 0; k < KINDS_MAX && kinds[k].what; k++)
		printf("  %-66s %6.2f / %6.2f ms (%zu)\n", kinds[k].what, kinds[k].cpu * 1e3, kinds[k].wall * 1e3, kinds[k].n);
	egs_gpr_free(probe);
	egs_plan_free(plan);
	egs_state_cleanup(&st);
	return 0;
}
