/*
 * bench_queue.c: micro-benchmarks of the GPR queue (core/queue.h) and of what a queued GPR costs in
 * memory, through the real core.  Usage: bench_queue [entries] [timed ops] [GPRs for memory]
 * Defaults: 1,000,000 entries, 200,000 timed operations of each kind, 100,000 GPRs.
 *
 * Timing: the queue is filled with `entries` GPRs of random priority (1-300).  Each operation is
 * then timed on its own with two clock_gettime(CLOCK_MONOTONIC) reads around it, giving a median and
 * a p99; the cost of one clock read (measured the same way around nothing) is printed and is
 * included in those figures.  A second pass times a batch of operations with two clock reads in all,
 * which gives a mean free of timer overhead.  Operations keep the queue at `entries` (+-1): a delete
 * of a random member is followed by the insert of a GPR with a new seq and a random priority.
 *
 * Memory: the bytes malloc has handed out, mallinfo2().uordblks + hblkhd (blocks above the mmap
 * threshold, such as a big map's slot array, are counted in hblkhd, not in uordblks), before and after
 * 100,000 GPRs are submitted into an egs_state (GPR objects, the GPR map, the queue's heap, the change
 * log of that turn once it is committed), divided by the number of GPRs.
 */
#include "core/gpr.h"
#include "core/queue.h"
#include "core/state.h"

#include "../../tests/unit/rng.h" /* the deterministic generator of the tests */

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static int64_t ns_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

struct dist {
	int64_t median, p99;
};

static struct dist dist_of(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	return (struct dist){ v[n / 2], v[(size_t)((double)n * 0.99)] };
}

enum op { OP_INSERT, OP_DELETE, OP_REPRIO, NOPS };
static const char *const op_names[NOPS] = { "insert", "delete (random member)", "reprioritize (random member)" };

struct bench {
	struct egs_queue q;
	struct egs_gpr *g; /* entries + 1 GPRs: all but one queued at any time */
	size_t n;
	uint64_t seq;
};

static int random_priority(void)
{
	return 1 + (int)(rng_next() % 300);
}

/* One operation of kind op on a random member; returns the ns it took (clock reads included).
 * *spare is the one GPR not queued. */
static int64_t one_op(struct bench *b, enum op op, struct egs_gpr **spare)
{
	struct egs_gpr *g = egs_queue_at(&b->q, rng_next() % b->q.len);
	int64_t t0, t1;
	switch (op) {
	case OP_INSERT: /* make room untimed, then insert the spare */
		egs_queue_remove(&b->q, g);
		(*spare)->priority = random_priority();
		(*spare)->seq = ++b->seq;
		t0 = ns_now();
		egs_queue_push(&b->q, *spare);
		t1 = ns_now();
		*spare = g;
		return t1 - t0;
	case OP_DELETE:
		t0 = ns_now();
		egs_queue_remove(&b->q, g);
		t1 = ns_now();
		(*spare)->priority = random_priority();
		(*spare)->seq = ++b->seq;
		egs_queue_push(&b->q, *spare);
		*spare = g;
		return t1 - t0;
	default: {
		int p = random_priority();
		t0 = ns_now();
		egs_queue_set_priority(&b->q, g, p);
		t1 = ns_now();
		return t1 - t0;
	}
	}
}

/* Mean ns of `ops` operations of kind op timed as one batch. */
static double batch_mean(struct bench *b, enum op op, size_t ops)
{
	struct egs_gpr **pick = egs_malloc(ops * sizeof(*pick));
	int *prio = egs_malloc(ops * sizeof(*prio));
	EGS_ASSERT(b->q.len % 7919 != 0);
	for (size_t i = 0; i < ops; i++) { /* distinct queued members: a prime stride through the heap */
		pick[i] = egs_queue_at(&b->q, (i * 7919 + 13) % b->q.len);
		prio[i] = random_priority();
	}
	for (size_t i = 0; i < ops && op == OP_INSERT; i++) {
		egs_queue_remove(&b->q, pick[i]);
		pick[i]->priority = prio[i];
		pick[i]->seq = ++b->seq;
	}
	int64_t t0 = ns_now();
	for (size_t i = 0; i < ops; i++) {
		if (op == OP_INSERT)
			egs_queue_push(&b->q, pick[i]);
		else if (op == OP_DELETE)
			egs_queue_remove(&b->q, pick[i]);
		else
			egs_queue_set_priority(&b->q, pick[i], prio[i]);
	}
	int64_t t = ns_now() - t0;
	for (size_t i = 0; i < ops && op == OP_DELETE; i++) {
		pick[i]->seq = ++b->seq;
		egs_queue_push(&b->q, pick[i]);
	}
	free(prio);
	free(pick);
	return (double)t / (double)ops;
}

static void bench_ops(size_t n, size_t ops)
{
	struct bench b = { .n = n };
	b.g = egs_calloc(n + 1, sizeof(*b.g));
	egs_queue_init(&b.q);
	for (size_t i = 0; i <= n; i++) {
		b.g[i].heap_idx = SIZE_MAX;
		b.g[i].priority = random_priority();
		b.g[i].seq = ++b.seq;
	}
	int64_t t0 = ns_now();
	for (size_t i = 0; i < n; i++)
		egs_queue_push(&b.q, &b.g[i]);
	double fill = (double)(ns_now() - t0) / (double)n;
	struct egs_gpr *spare = &b.g[n];

	int64_t *v = egs_malloc(ops * sizeof(*v));
	for (size_t i = 0; i < ops; i++) {
		int64_t a = ns_now();
		v[i] = ns_now() - a;
	}
	struct dist clk = dist_of(v, ops);
	printf("egs_queue at %zu entries (priorities 1-300 at random), %zu operations of each kind\n", n, ops);
	printf("each operation timed on its own with clock_gettime(CLOCK_MONOTONIC); one clock read costs "
	       "%lld ns (median), included below\n", (long long)clk.median);
	printf("filling the queue: %.0f ns per insert on average\n\n", fill);
	printf("%-30s %10s %10s %16s\n", "operation", "median ns", "p99 ns", "batch mean ns");
	bool ok = true;
	for (int op = 0; op < NOPS; op++) {
		for (size_t i = 0; i < ops; i++)
			v[i] = one_op(&b, (enum op)op, &spare);
		struct dist d = dist_of(v, ops);
		double mean = batch_mean(&b, (enum op)op, ops / 2);
		EGS_ASSERT(egs_queue_len(&b.q) == n);
		printf("%-30s %10lld %10lld %16.0f\n", op_names[op], (long long)d.median, (long long)d.p99, mean);
		ok = ok && d.median < 1000;
	}
	printf("target: median under 1 us per operation: %s\n\n", ok ? "met" : "MISSED");
	free(v);
	egs_queue_cleanup(&b.q);
	free(b.g);
}

static void bench_memory(size_t n)
{
	struct egs_state_config cfg = { .event_retention = 128 };
	struct egs_state st;
	egs_state_init(&st, &cfg);
	for (int w = 0; w < 1000; w++) {
		struct egs_workspace *ws = egs_calloc(1, sizeof(*ws));
		snprintf(ws->name, sizeof(ws->name), "ws-%d", w);
		egs_strlist_add(&ws->clusters, "c0");
		egs_state_add_workspace(&st, ws);
	}
	egs_state_clear_changes(&st);
	struct mallinfo2 m0 = mallinfo2();
	for (size_t i = 0; i < n; i++) {
		struct egs_gpr *g = egs_gpr_new();
		snprintf(g->id, sizeof(g->id), "gpr-%08x-%04x", (unsigned)(i & 0xffffffffu), (unsigned)(i % 0xffff));
		snprintf(g->name, sizeof(g->name), "training-run-%zu", i);
		snprintf(g->workspace, sizeof(g->workspace), "ws-%zu", i % 1000);
		snprintf(g->gpu_shape, sizeof(g->gpu_shape), "NVIDIA-H100-80GB-HBM3");
		g->gpus_per_node = 8;
		g->node_count = 1;
		g->exit_duration_s = 3600;
		g->priority = random_priority();
		g->memory_mib = 81920;
		EGS_ASSERT(egs_gpr_submit(&st, g, 1800000000) == EGS_OK);
	}
	egs_state_clear_changes(&st); /* the turn's commit: events go to the bounded ring */
	struct mallinfo2 m1 = mallinfo2();
	struct egs_gpr *one = egs_state_gpr(&st, "gpr-00000000-0000");
	EGS_ASSERT(one && egs_queue_len(&st.queue) == n);
	size_t used = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
	if (!used) {
		printf("memory: mallinfo2() saw no change: another allocator (a sanitizer's?) serves malloc\n");
		egs_state_cleanup(&st);
		return;
	}
	double per = (double)used / (double)n;
	printf("memory: %zu queued GPRs in an egs_state hold %.1f MiB (mallinfo2: uordblks %+.1f MiB, hblkhd %+.1f "
	       "MiB): %.0f bytes per GPR\n",
	       n, (double)used / 1048576.0, ((double)m1.uordblks - (double)m0.uordblks) / 1048576.0,
	       ((double)m1.hblkhd - (double)m0.hblkhd) / 1048576.0, per);
	printf("        (sizeof(struct egs_gpr) = %zu, its malloc block %zu; the rest: map slots, heap slots, the turn's "
	       "change vector)\n", sizeof(struct egs_gpr), malloc_usable_size(one));
	printf("target: under 1 KiB per queued GPR: %s\n", per < 1024 ? "met" : "MISSED");
	egs_state_cleanup(&st);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	size_t ops = argc > 2 ? strtoull(argv[2], NULL, 10) : 200000;
	size_t gprs = argc > 3 ? strtoull(argv[3], NULL, 10) : 100000;
	if (n < 2 || ops < 2 || ops > n || gprs < 1) {
		fprintf(stderr, "usage: bench_queue [entries >= 2] [ops, 2..entries] [GPRs >= 1]\n");
		return 2;
	}
	bench_ops(n, ops);
	bench_memory(gprs);
	return 0;
}
