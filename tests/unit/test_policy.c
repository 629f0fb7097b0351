/*
 * test_policy.c: core/policy.h: soft limits must lie within hard ones; what a GPR asks for is
 * measured against the state (unfinished GPRs, GPUs held, the shapes and memory it may land on);
 * hard limits refuse with the first limit broken (the workspace's before the global one), soft ones
 * list every limit exceeded; only the limits in the mask are read; a held GPR goes back to Pending
 * and keeps its place in the queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gpr.h"
#include "core/policy.h"
#include "core/state.h"

#define H100 "NVIDIA-H100-80GB-HBM3"
#define A100 "NVIDIA-A100-SXM4-40GB"

/* ---- a small world: cluster c1 with two H100 nodes and one A100 node, workspaces w and v ---- */

static void add_node(struct egs_state *st, const char *name, const char *shape, int64_t mem_mib)
{
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->cluster, "c1", sizeof(n->cluster));
	egs_strlcpy(n->gpu_shape, shape, sizeof(n->gpu_shape));
	egs_strlcpy(n->instance_type, "it", sizeof(n->instance_type));
	n->gpu_count = 8;
	n->memory_mib = mem_mib;
	assert_int_equal(egs_state_add_node(st, n), EGS_OK);
}

static void add_ws(struct egs_state *st, const char *name)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlcpy(w->project, "default", sizeof(w->project));
	egs_strlist_add(&w->clusters, "c1");
	assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
}

static void world(struct egs_state *st)
{
	struct egs_cluster *c = egs_calloc(1, sizeof(*c));
	egs_state_init(st, NULL);
	egs_strlcpy(c->name, "c1", sizeof(c->name));
	egs_strlcpy(c->project, "default", sizeof(c->project));
	assert_int_equal(egs_state_add_cluster(st, c), EGS_OK);
	add_node(st, "h1", H100, 81920);
	add_node(st, "h2", H100, 81920);
	add_node(st, "a1", A100, 40960);
	add_ws(st, "w");
	add_ws(st, "v");
}

/* A GPR of workspace ws in state s (added to st), or a free-standing request when s is -1. */
static struct egs_gpr *gpr(struct egs_state *st, const char *id, const char *ws, int nodes, int gpus, int s)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->name, id, sizeof(g->name));
	egs_strlcpy(g->workspace, ws, sizeof(g->workspace));
	g->node_count = nodes;
	g->gpus_per_node = gpus;
	g->exit_duration_s = 3600;
	g->priority = 101;
	if (s < 0)
		return g;
	g->state = (enum egs_gpr_state)s;
	g->seq = st->next_seq++;
	assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	return g;
}

static void set_max(struct egs_limits *lv, enum egs_limit l, int64_t v)
{
	lv->set |= 1u << l;
	lv->max[l] = v;
}

static void set_range(struct egs_limits *lv, int lo, int hi)
{
	lv->set |= 1u << EGS_LIMIT_PRIORITY;
	lv->prio_min = lo;
	lv->prio_max = hi;
}

static void set_shape(struct egs_limits *lv, const char *shape)
{
	lv->set |= 1u << EGS_LIMIT_GPU_SHAPES;
	egs_strlist_add(&lv->shapes, shape);
}

/* Measures g in its workspace for every limit and checks it against the two policies. */
static enum egs_policy_verdict check(struct egs_state *st, const struct egs_gpr *g, const struct egs_policy *ws,
				     const struct egs_policy *global, uint32_t mask, struct egs_policy_result *res)
{
	struct egs_policy_ask a;
	egs_policy_measure(st, g, egs_state_workspace(st, g->workspace), NULL, EGS_LIMIT_ALL, &a);
	enum egs_policy_verdict v = egs_policy_check(ws, global, &a, mask, res);
	egs_policy_ask_cleanup(&a);
	return v;
}

/* ---- tests ---- */

static void test_names_and_bounds(void **unused)
{
	(void)unused;
	assert_string_equal(egs_limit_name(EGS_LIMIT_MAX_GPRS), "maxGPRs");
	assert_string_equal(egs_limit_name(EGS_LIMIT_EXIT_DURATION), "maxExitDurationPerGPR");
	assert_string_equal(egs_limit_name(EGS_LIMIT_QUOTA), "concurrentGpuQuota");
	assert_string_equal(egs_limit_field(EGS_LIMIT_NODES), "numberOfGPUNodes");
	assert_string_equal(egs_limit_field(EGS_LIMIT_PRIORITY), "priority");
	assert_int_equal(egs_limit_min(EGS_LIMIT_MAX_GPRS), 0);
	assert_int_equal(egs_limit_max(EGS_LIMIT_NODES), 1024);
}

static void test_lifecycle_copy_empty(void **unused)
{
	(void)unused;
	struct egs_policy *p = egs_policy_new(), q;
	assert_true(egs_policy_empty(p));
	set_shape(&p->hard, H100);
	set_max(&p->soft, EGS_LIMIT_GPUS, 8);
	p->requeue = 1;
	assert_false(egs_policy_empty(p));
	assert_int_equal(egs_policy_limits_set(p), 1u << EGS_LIMIT_GPU_SHAPES | 1u << EGS_LIMIT_GPUS);
	egs_policy_init(&q);
	egs_policy_copy(&q, p);
	egs_policy_free(p); /* the copy owns its own lists */
	assert_int_equal(q.hard.shapes.n, 1);
	assert_string_equal(q.hard.shapes.v[0], H100);
	assert_int_equal(q.soft.max[EGS_LIMIT_GPUS], 8);
	assert_int_equal(q.requeue, 1);
	assert_int_equal(q.auto_eviction, -1);
	egs_policy_cleanup(&q);
	assert_true(egs_policy_empty(&q));
	egs_policy_free(NULL);
}

static void test_validate_soft_within_hard(void **unused)
{
	(void)unused;
	struct egs_policy p;
	const char *field = NULL;
	char why[300];
	egs_policy_init(&p);
	set_max(&p.soft, EGS_LIMIT_MAX_GPRS, 10); /* a soft limit alone is fine */
	assert_true(egs_policy_validate(&p, &field, why, sizeof(why)));
	set_max(&p.hard, EGS_LIMIT_MAX_GPRS, 10); /* equal is fine too */
	assert_true(egs_policy_validate(&p, &field, why, sizeof(why)));
	set_max(&p.hard, EGS_LIMIT_MAX_GPRS, 9);
	assert_false(egs_policy_validate(&p, &field, why, sizeof(why)));
	assert_string_equal(field, "softLimits.maxGPRs");
	assert_non_null(strstr(why, "10 is beyond the hard maxGPRs 9"));
	set_max(&p.hard, EGS_LIMIT_MAX_GPRS, 10);
	set_range(&p.hard, 1, 200);
	set_range(&p.soft, 1, 201);
	assert_false(egs_policy_validate(&p, &field, why, sizeof(why)));
	assert_string_equal(field, "softLimits.priorityRange");
	assert_non_null(strstr(why, "1-201 is beyond the hard priorityRange 1-200"));
	set_range(&p.soft, 5, 100);
	set_shape(&p.hard, H100);
	set_shape(&p.soft, A100);
	assert_false(egs_policy_validate(&p, &field, why, sizeof(why)));
	assert_string_equal(field, "softLimits.gpuShapes");
	assert_non_null(strstr(why, A100));
	egs_strlist_add(&p.hard.shapes, A100);
	set_max(&p.hard, EGS_LIMIT_EXIT_DURATION, 6 * 3600);
	set_max(&p.soft, EGS_LIMIT_EXIT_DURATION, 7 * 3600);
	assert_false(egs_policy_validate(&p, &field, why, sizeof(why)));
	assert_non_null(strstr(why, "7h0m0s is beyond the hard maxExitDurationPerGPR 6h0m0s"));
	set_max(&p.soft, EGS_LIMIT_EXIT_DURATION, 3600);
	assert_true(egs_policy_validate(&p, &field, why, sizeof(why)));
	egs_policy_cleanup(&p);
}

static void test_measure(void **unused)
{
	(void)unused;
	struct egs_state st;
	struct egs_policy_ask a;
	world(&st);
	gpr(&st, "p1", "w", 1, 8, EGS_GPR_PROVISIONED);
	gpr(&st, "q1", "w", 1, 2, EGS_GPR_QUEUED);
	struct egs_gpr *pend = gpr(&st, "n1", "w", 1, 2, EGS_GPR_PENDING);
	gpr(&st, "x1", "w", 1, 2, EGS_GPR_COMPLETE);
	gpr(&st, "x2", "w", 1, 2, EGS_GPR_CANCELLED);
	gpr(&st, "x3", "w", 1, 2, EGS_GPR_RELEASING); /* on its way out: neither unfinished nor held */
	gpr(&st, "o1", "v", 1, 8, EGS_GPR_PROVISIONED);
	struct egs_gpr *g = gpr(&st, "new", "w", 2, 4, -1);

	egs_policy_measure(&st, g, egs_state_workspace(&st, "w"), NULL, EGS_LIMIT_ALL, &a);
	assert_string_equal(a.workspace, "w");
	assert_int_equal(a.unfinished, 4); /* p1, q1, n1 and the new one */
	assert_int_equal(a.held_gpus, 8 + 8);
	assert_int_equal(a.gpus, 8);
	assert_int_equal(a.nodes, 2);
	assert_true(a.any_shape);
	assert_int_equal(a.shapes.n, 2); /* it names no shape: both shapes of the pool */
	assert_int_equal(a.gpu_mem_mib, 81920);
	assert_int_equal(a.memory_mib, 8 * 81920);
	egs_policy_ask_cleanup(&a);

	/* Naming the shape narrows what it may land on; standing for a GPR of the state counts it once. */
	egs_strlcpy(g->gpu_shape, A100, sizeof(g->gpu_shape));
	g->node_count = 1;
	egs_policy_measure(&st, g, egs_state_workspace(&st, "w"), pend, EGS_LIMIT_ALL, &a);
	assert_false(a.any_shape);
	assert_int_equal(a.shapes.n, 1);
	assert_string_equal(a.shapes.v[0], A100);
	assert_int_equal(a.memory_mib, 4 * 40960);
	assert_int_equal(a.unfinished, 3);
	egs_policy_ask_cleanup(&a);

	/* What is not needed is not measured. */
	egs_policy_measure(&st, g, egs_state_workspace(&st, "w"), NULL, 1u << EGS_LIMIT_PRIORITY, &a);
	assert_int_equal(a.unfinished, 0);
	assert_int_equal(a.held_gpus, 0);
	assert_int_equal(a.shapes.n, 0);
	assert_int_equal(a.priority, 101);
	egs_policy_ask_cleanup(&a);
	egs_gpr_free(g);
	egs_state_cleanup(&st);
}

static void test_hard_limits(void **unused)
{
	(void)unused;
	struct egs_state st;
	struct egs_policy ws, global;
	struct egs_policy_result res;
	world(&st);
	egs_policy_init(&ws);
	egs_policy_init(&global);
	struct egs_gpr *g = gpr(&st, "new", "w", 1, 8, -1);
	g->exit_duration_s = 8 * 3600;
	g->priority = 250;

	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_OK);
	assert_int_equal(check(&st, g, NULL, NULL, EGS_LIMIT_ALL, &res), EGS_POLICY_OK);

	set_max(&global.hard, EGS_LIMIT_EXIT_DURATION, 4 * 3600);
	set_max(&ws.hard, EGS_LIMIT_EXIT_DURATION, 6 * 3600);
	set_range(&ws.hard, 1, 200);
	/* The workspace's limits come first, in enum order. */
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_int_equal(res.limit, EGS_LIMIT_EXIT_DURATION);
	assert_string_equal(res.field, "exitDuration");
	assert_string_equal(res.message,
			    "exitDuration 8h0m0s exceeds the limit maxExitDurationPerGPR 6h0m0s of workspace w's policy");
	/* The mask limits what is read: only priority now. */
	assert_int_equal(check(&st, g, &ws, &global, 1u << EGS_LIMIT_PRIORITY, &res), EGS_POLICY_HARD);
	assert_string_equal(res.field, "priority");
	assert_string_equal(res.message, "priority 250 is outside the limit priorityRange 1-200 of workspace w's policy");
	/* The global policy binds when the workspace's does not. */
	g->exit_duration_s = 5 * 3600;
	g->priority = 100;
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_non_null(strstr(res.message, "maxExitDurationPerGPR 4h0m0s of the global policy"));
	g->exit_duration_s = 3600;
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_OK);

	set_shape(&ws.hard, A100);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_string_equal(res.field, "gpuShape");
	assert_non_null(strstr(res.message, "gpuShape " H100 " (none was given"));
	egs_strlcpy(g->gpu_shape, A100, sizeof(g->gpu_shape));
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_OK);

	set_max(&ws.hard, EGS_LIMIT_MEMORY, 300); /* 8 x 40 GB = 320 GB */
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_string_equal(res.field, "memoryPerGpu");
	assert_string_equal(res.message, "320GB of GPU memory (8 GPUs of up to 40GB) exceeds the limit maxMemoryPerGpr "
					 "300GB of workspace w's policy");
	set_max(&ws.hard, EGS_LIMIT_MEMORY, 320);
	set_max(&ws.hard, EGS_LIMIT_GPUS, 4);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_int_equal(res.limit, EGS_LIMIT_GPUS);
	set_max(&ws.hard, EGS_LIMIT_GPUS, 8);
	gpr(&st, "p1", "w", 1, 8, EGS_GPR_PROVISIONED);
	set_max(&ws.hard, EGS_LIMIT_QUOTA, 12);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_string_equal(res.message, "workspace w would hold 16 GPUs at once (8 held, 8 asked) exceeds the limit "
					 "concurrentGpuQuota 12 of workspace w's policy");
	set_max(&ws.hard, EGS_LIMIT_QUOTA, 16);
	set_max(&ws.hard, EGS_LIMIT_MAX_GPRS, 1);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_string_equal(res.field, "sliceName");
	assert_non_null(strstr(res.message, "2 unfinished GPRs exceeds the limit maxGPRs 1"));
	set_max(&ws.hard, EGS_LIMIT_MAX_GPRS, 2);
	set_max(&global.hard, EGS_LIMIT_NODES, 1);
	g->node_count = 2;
	g->gpus_per_node = 4;
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_string_equal(res.field, "numberOfGPUNodes");
	assert_non_null(strstr(res.message, "numberOfGPUNodes 2 exceeds the limit maxNodesPerGpr 1 of the global policy"));

	egs_gpr_free(g);
	egs_policy_cleanup(&ws);
	egs_policy_cleanup(&global);
	egs_state_cleanup(&st);
}

static void test_soft_limits(void **unused)
{
	(void)unused;
	struct egs_state st;
	struct egs_policy ws, global;
	struct egs_policy_result res;
	world(&st);
	egs_policy_init(&ws);
	egs_policy_init(&global);
	struct egs_gpr *g = gpr(&st, "new", "w", 2, 8, -1);
	g->exit_duration_s = 8 * 3600;
	g->priority = 180;
	set_max(&ws.hard, EGS_LIMIT_EXIT_DURATION, 12 * 3600);
	set_max(&ws.soft, EGS_LIMIT_EXIT_DURATION, 6 * 3600);
	set_range(&ws.soft, 1, 150);
	set_max(&global.soft, EGS_LIMIT_NODES, 1);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_SOFT);
	assert_string_equal(res.message,
			    "exitDuration 8h0m0s exceeds the soft limit maxExitDurationPerGPR 6h0m0s of workspace w's policy; "
			    "priority 180 is outside the soft limit priorityRange 1-150 of workspace w's policy; "
			    "numberOfGPUNodes 2 exceeds the soft limit maxNodesPerGpr 1 of the global policy: "
			    "waits for an admin's approval");
	/* A hard limit broken wins over every soft one. */
	set_max(&global.hard, EGS_LIMIT_GPUS, 8);
	assert_int_equal(check(&st, g, &ws, &global, EGS_LIMIT_ALL, &res), EGS_POLICY_HARD);
	assert_int_equal(res.limit, EGS_LIMIT_GPUS);
	/* Only the masked limits. */
	assert_int_equal(check(&st, g, &ws, &global, 1u << EGS_LIMIT_PRIORITY, &res), EGS_POLICY_SOFT);
	assert_string_equal(res.message, "priority 180 is outside the soft limit priorityRange 1-150 of workspace w's "
					 "policy: waits for an admin's approval");
	egs_gpr_free(g);
	egs_policy_cleanup(&ws);
	egs_policy_cleanup(&global);
	egs_state_cleanup(&st);
}

static void test_hold_keeps_the_place_in_the_queue(void **unused)
{
	(void)unused;
	struct egs_state st;
	world(&st);
	struct egs_gpr *a = gpr(&st, "a", "w", 1, 1, -1), *b = gpr(&st, "b", "v", 1, 1, -1);
	assert_int_equal(egs_gpr_submit(&st, a, 100), EGS_OK);
	assert_int_equal(egs_gpr_submit(&st, b, 100), EGS_OK);
	assert_ptr_equal(egs_queue_peek(&st.queue), a);
	egs_state_clear_changes(&st);

	egs_policy_hold(&st, a, "too long", 200);
	assert_int_equal(a->state, EGS_GPR_PENDING);
	assert_string_equal(a->pending_reason, "too long");
	assert_false(egs_queue_contains(&st.queue, a));
	assert_ptr_equal(egs_queue_peek(&st.queue), b);
	assert_true(a->dirty);
	const struct egs_event *ev = st.new_events.items[st.new_events.len - 1];
	assert_string_equal(ev->reason, "PendingApproval");
	assert_non_null(strstr(ev->message, "too long"));

	/* Held again while Pending: the reason is replaced. */
	egs_policy_hold(&st, a, "still too long", 300);
	assert_string_equal(a->pending_reason, "still too long");
	assert_int_equal(a->state, EGS_GPR_PENDING);

	/* Approved, it is back at the head: it kept its enqueue sequence. */
	assert_int_equal(egs_gpr_approve(&st, a, 400), EGS_OK);
	assert_null(a->pending_reason);
	assert_ptr_equal(egs_queue_peek(&st.queue), a);
	egs_state_clear_changes(&st);
	egs_state_cleanup(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_bounds),
		cmocka_unit_test(test_lifecycle_copy_empty),
		cmocka_unit_test(test_validate_soft_within_hard),
		cmocka_unit_test(test_measure),
		cmocka_unit_test(test_hard_limits),
		cmocka_unit_test(test_soft_limits),
		cmocka_unit_test(test_hold_keeps_the_place_in_the_queue),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
