/*
 * test_share_gpr.c: shared GPRs through the lifecycle and the planner (core/share_gpr.h with
 * core/gpr.h and core/sched.h), with a fake clock; the tests play the agents themselves.
 *
 * What is covered: seed 003 on a two-GPU node (0.2 then 1.2 in two workspaces leave 0.80 and 0.60
 * allocated); a third share that does not fit waits for, and starts exactly at, the earliest exit
 * that makes room, and only once the leaving GPR is detached; a dedicated GPR waits until the last
 * share left the node and shares wait for a dedicated GPR; nodes without the sharing feature never
 * take shares; release, eviction back to the queue and a failed attach free the shares; agents'
 * reports reconcile (a Releasing GPR whose agent no longer lists it completes); a reload links the
 * shares again and counts them as attached; remediation moves shares off a failed node; the
 * hypothetical estimate agrees with the plan.
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
#include "core/sched.h"
#include "core/share_gpr.h"
#include "core/state.h"
#include "core/util.h"

#define T0 1800000000LL
#define HOUR 3600LL

struct world {
	struct egs_state st;
};

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	struct egs_state_config cfg = { .heartbeat_timeout_s = 1000LL * 24 * 3600 };
	egs_state_init(&w->st, &cfg);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	egs_state_cleanup(&w->st);
	free(w);
	return 0;
}

static struct egs_node *add_node(struct egs_state *st, const char *name, int gpus, bool sharing)
{
	if (!egs_state_cluster(st, "c1")) {
		struct egs_cluster *c = egs_calloc(1, sizeof(*c));
		egs_strlcpy(c->name, "c1", sizeof(c->name));
		assert_int_equal(egs_state_add_cluster(st, c), EGS_OK);
	}
	struct egs_node *n = egs_calloc(1, sizeof(*n));
	egs_strlcpy(n->name, name, sizeof(n->name));
	egs_strlcpy(n->cluster, "c1", sizeof(n->cluster));
	egs_strlcpy(n->gpu_shape, "NVIDIA-A100", sizeof(n->gpu_shape));
	egs_strlcpy(n->instance_type, "p4d", sizeof(n->instance_type));
	n->gpu_count = gpus;
	n->memory_mib = 40960;
	n->health = EGS_HEALTH_HEALTHY;
	n->last_heartbeat = T0;
	n->sharing = sharing;
	n->gpus = egs_calloc((size_t)gpus, sizeof(*n->gpus));
	n->n_gpus = gpus;
	for (int i = 0; i < gpus; i++) {
		snprintf(n->gpus[i].uuid, sizeof(n->gpus[i].uuid), "GPU-%s-%d", name, i);
		n->gpus[i].index = i;
	}
	assert_int_equal(egs_state_add_node(st, n), EGS_OK);
	return n;
}

static void add_ws(struct egs_state *st, const char *name)
{
	struct egs_workspace *w = egs_calloc(1, sizeof(*w));
	egs_strlcpy(w->name, name, sizeof(w->name));
	egs_strlist_add(&w->clusters, "c1");
	assert_int_equal(egs_state_add_workspace(st, w), EGS_OK);
}

/* Submits a GPR: shared when centi > 0 (hundredths), else dedicated with `gpus` whole GPUs. */
static struct egs_gpr *submit(struct egs_state *st, const char *id, const char *ws, int centi, int gpus,
			      int64_t dur, int64_t now)
{
	struct egs_gpr *g = egs_gpr_new();
	egs_strlcpy(g->id, id, sizeof(g->id));
	egs_strlcpy(g->name, id, sizeof(g->name));
	egs_strlcpy(g->workspace, ws, sizeof(g->workspace));
	if (!egs_state_workspace(st, ws))
		add_ws(st, ws);
	g->node_count = 1;
	g->share_centi = centi;
	g->gpus_per_node = centi ? (centi + 99) / 100 : gpus;
	g->exit_duration_s = dur;
	g->priority = 101;
	assert_int_equal(egs_gpr_submit(st, g, now), EGS_OK);
	return g;
}

/* Answers every attach and detach the control plane wants, as egsd's action list hands them out. */
static void ack_all(struct egs_state *st, int64_t now)
{
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		struct egs_node *n = v;
		for (size_t k = n->attached_shared.n; k-- > 0;) {
			const char *id = n->attached_shared.v[k];
			const struct egs_gpr *g = egs_state_gpr(st, id);
			if (!g || g->share_node != n || (g->state != EGS_GPR_PROVISIONING && g->state != EGS_GPR_PROVISIONED)) {
				char copy[EGS_ID_MAX];
				egs_strlcpy(copy, id, sizeof(copy));
				egs_gpr_detach_result(st, n, copy, true, "detached", now);
			}
		}
		for (size_t k = 0; k < n->shared.len; k++) {
			struct egs_gpr *g = n->shared.items[k];
			if ((g->state == EGS_GPR_PROVISIONING || g->state == EGS_GPR_PROVISIONED) &&
			    !egs_strlist_has(&n->attached_shared, g->id)) {
				egs_gpr_attach_result(st, n, g->id, true, "attached", now);
				k = (size_t)-1; /* the list may have changed: start over */
			}
		}
		if (n->attached_gpr[0] && strcmp(n->attached_gpr, n->gpr_id) != 0)
			egs_gpr_detach_result(st, n, n->attached_gpr, true, "detached", now);
		else if (n->gpr_id[0] && !n->attached_gpr[0])
			egs_gpr_attach_result(st, n, n->gpr_id, true, "attached", now);
	}
}

static int alloc_of(const struct egs_node *n, int dev)
{
	int alloc[EGS_SHARE_DEV_MAX];
	egs_share_node_alloc(n, alloc);
	return alloc[dev];
}

static void test_seed_scenario_and_waiting(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *n = add_node(st, "n1", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 20, 0, HOUR, T0);
	struct egs_gpr *b = submit(st, "gpr-b", "wb", 120, 0, 2 * HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(b->state, EGS_GPR_PROVISIONING);
	assert_int_equal(alloc_of(n, 0), 80);
	assert_int_equal(alloc_of(n, 1), 60);
	assert_int_equal(a->n_shares, 1);
	assert_string_equal(a->shares[0].uuid, "GPU-n1-0");
	assert_int_equal(b->n_shares, 2);
	assert_int_equal(b->shares[0].centi + b->shares[1].centi, 120);
	assert_string_equal(n->gpr_id, ""); /* a shared node has no dedicated holder */
	ack_all(st, T0);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	assert_int_equal(b->state, EGS_GPR_PROVISIONED);
	assert_int_equal(n->attached_shared.n, 2);

	/* 0.5 does not fit (0.20 and 0.40 free): it waits for the 0.2 to leave at T0 + 1h. */
	struct egs_gpr *c = submit(st, "gpr-c", "wc", 50, 0, HOUR, T0 + 60);
	/* A dedicated GPR waits for the node to be free of every share: B leaves at T0 + 2h, C's
	 * reservation ends at T0 + 2h too. */
	struct egs_gpr *d = submit(st, "gpr-d", "wd", 0, 1, HOUR, T0 + 60);
	egs_sched_run(st, T0 + 60, NULL);
	assert_int_equal(c->state, EGS_GPR_QUEUED);
	assert_int_equal(c->est_start, T0 + HOUR);
	assert_int_equal(d->state, EGS_GPR_QUEUED);
	assert_int_equal(d->est_start, T0 + 2 * HOUR);
	char cl[EGS_NAME_MAX];
	struct egs_gpr *probe = egs_gpr_new();
	*probe = *c;
	probe->heap_idx = SIZE_MAX;
	probe->nodes = (struct egs_strlist){ 0 };
	probe->preferred_clusters = (struct egs_strlist){ 0 };
	probe->shares = NULL;
	probe->share_node = NULL;
	probe->priority = 1; /* after everyone: behind C and D on the node */
	assert_int_equal(egs_sched_estimate(st, probe, T0 + 60, cl), T0 + 2 * HOUR + HOUR);
	assert_string_equal(cl, "c1");
	egs_gpr_free(probe);

	/* At A's exit A is released; C starts once A's agent detached it, not before. */
	egs_sched_run(st, T0 + HOUR, NULL);
	assert_int_equal(a->state, EGS_GPR_RELEASING);
	assert_int_equal(c->state, EGS_GPR_QUEUED);
	assert_int_equal(c->est_start, T0 + HOUR);
	ack_all(st, T0 + HOUR);
	assert_int_equal(a->state, EGS_GPR_COMPLETE);
	assert_int_equal(alloc_of(n, 0), 60);
	egs_sched_run(st, T0 + HOUR, NULL);
	assert_int_equal(c->state, EGS_GPR_PROVISIONING);
	assert_int_equal(alloc_of(n, 0), 85);
	assert_int_equal(alloc_of(n, 1), 85);
	ack_all(st, T0 + HOUR);
	assert_int_equal(c->start_ts, T0 + HOUR);

	/* Early release of B frees exactly its shares; D still waits for C. */
	assert_int_equal(egs_gpr_release(st, b, T0 + HOUR + 10), EGS_OK);
	ack_all(st, T0 + HOUR + 10);
	assert_int_equal(b->state, EGS_GPR_COMPLETE);
	assert_int_equal(alloc_of(n, 0), 25);
	assert_int_equal(alloc_of(n, 1), 25);
	egs_sched_run(st, T0 + HOUR + 10, NULL);
	assert_int_equal(d->state, EGS_GPR_QUEUED);
	assert_int_equal(d->est_start, T0 + 2 * HOUR);
	egs_sched_run(st, T0 + 2 * HOUR, NULL);
	ack_all(st, T0 + 2 * HOUR);
	assert_int_equal(c->state, EGS_GPR_COMPLETE);
	assert_int_equal(n->shared.len, 0);
	egs_sched_run(st, T0 + 2 * HOUR, NULL);
	assert_int_equal(d->state, EGS_GPR_PROVISIONING);
	assert_string_equal(n->gpr_id, "gpr-d");
	assert_int_equal(alloc_of(n, 0), 100);

	/* Shares wait for the dedicated GPR. */
	struct egs_gpr *e = submit(st, "gpr-e", "we", 10, 0, HOUR, T0 + 2 * HOUR);
	egs_sched_run(st, T0 + 2 * HOUR, NULL);
	assert_int_equal(e->state, EGS_GPR_QUEUED);
	assert_int_equal(e->est_start, T0 + 3 * HOUR);
}

static void test_sharing_feature_and_packing(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *old = add_node(st, "a-old", 2, false);
	struct egs_node *n2 = add_node(st, "b-new", 2, true);
	struct egs_node *n3 = add_node(st, "c-new", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 30, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_ptr_equal(a->share_node, n2); /* the old agent's node is skipped; then by name */
	/* The next share packs onto the node that already holds one, not the idle c-new. */
	struct egs_gpr *b = submit(st, "gpr-b", "wb", 30, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_ptr_equal(b->share_node, n2);
	assert_int_equal(alloc_of(n2, 0), 60);
	/* A dedicated GPR takes a free node, never one holding shares. */
	struct egs_gpr *d = submit(st, "gpr-d", "wd", 0, 2, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_int_equal(d->state, EGS_GPR_PROVISIONING);
	assert_string_equal(old->gpr_id, "gpr-d");
	assert_int_equal(n2->gpr_id[0], '\0');
	/* 2.00 shared: b-new has no room, a-old is busy and could not share anyway: c-new. */
	struct egs_gpr *e = submit(st, "gpr-e", "we", 200, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_ptr_equal(e->share_node, n3);
	/* With every sharing node full, a share waits even though the old node frees first. */
	old->gpr_id[0] = '\0';
	d->state = EGS_GPR_COMPLETE; /* as if it had ended at once */
	egs_vec_remove(&st->active, d);
	struct egs_gpr *f = submit(st, "gpr-f", "wf", 150, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	assert_int_equal(f->state, EGS_GPR_QUEUED);
	assert_int_equal(f->est_start, T0 + HOUR); /* when b-new (or c-new) is empty again */
}

static void test_requeue_and_failures_free_shares(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *n = add_node(st, "n1", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 150, 0, HOUR, T0);
	a->flags |= EGS_GPRF_REQUEUE;
	egs_sched_run(st, T0, NULL);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	/* A failed attach marks the node and sends the GPR back without its shares. */
	egs_gpr_attach_result(st, n, a->id, false, "pre-check failed", T0);
	assert_int_equal(a->state, EGS_GPR_QUEUED);
	assert_null(a->shares);
	assert_int_equal(a->n_shares, 0);
	assert_int_equal(n->shared.len, 0);
	assert_int_equal(alloc_of(n, 0), 0);
	n->health = EGS_HEALTH_HEALTHY;
	egs_sched_run(st, T0 + 10, NULL);
	ack_all(st, T0 + 10);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	/* Eviction with requeueOnFailure: back to the queue; the agent's attachment is stale until it
	 * detaches, and nothing starts on the node meanwhile. */
	assert_int_equal(egs_gpr_evict(st, a, "maintenance", T0 + 20), EGS_OK);
	assert_int_equal(a->state, EGS_GPR_QUEUED);
	assert_int_equal(n->shared.len, 0);
	assert_true(egs_share_node_stale(n));
	egs_sched_run(st, T0 + 20, NULL);
	assert_int_equal(a->state, EGS_GPR_QUEUED);
	assert_int_equal(a->est_start, T0 + 20);
	ack_all(st, T0 + 20);
	assert_false(egs_share_node_busy(n));
	assert_int_equal(n->free_since, T0 + 20);
	egs_sched_run(st, T0 + 20, NULL);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
}

static void test_agent_reports_reconcile(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *n = add_node(st, "n1", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 50, 0, HOUR, T0);
	struct egs_gpr *b = submit(st, "gpr-b", "wb", 50, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	struct egs_strlist ids = { 0 };
	egs_strlist_add(&ids, "gpr-a");
	egs_strlist_add(&ids, "gpr-a"); /* duplicates count once */
	egs_share_set_attached(st, n, &ids, T0 + 1);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	assert_int_equal(a->start_ts, T0 + 1);
	assert_int_equal(b->state, EGS_GPR_PROVISIONING);
	assert_int_equal(n->attached_shared.n, 1);
	/* Released while its agent still lists it: Releasing, then Complete once the list drops it. */
	assert_int_equal(egs_gpr_release(st, a, T0 + 5), EGS_OK);
	assert_int_equal(a->state, EGS_GPR_RELEASING);
	assert_int_equal(n->shared.len, 2); /* still attached: its shares are still in use */
	egs_strlist_cleanup(&ids);
	egs_strlist_add(&ids, "gpr-b");
	egs_strlist_add(&ids, "gpr-zombie"); /* unknown: stale, to be detached */
	egs_share_set_attached(st, n, &ids, T0 + 6);
	assert_int_equal(a->state, EGS_GPR_COMPLETE);
	assert_int_equal(a->completion_ts, T0 + 6);
	assert_int_equal(b->state, EGS_GPR_PROVISIONED);
	assert_true(egs_share_node_stale(n));
	int take[EGS_SHARE_DEV_MAX] = { 10 };
	assert_false(egs_share_fits_now(n, take)); /* a stale attachment of unknown size */
	egs_strlist_cleanup(&ids);
}

static void test_reload_links_shares(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *n = add_node(st, "n1", 2, true);
	/* As the store loads them: a Provisioned and a Releasing shared GPR with their shares. */
	const enum egs_gpr_state states[] = { EGS_GPR_PROVISIONED, EGS_GPR_RELEASING, EGS_GPR_COMPLETE };
	for (int i = 0; i < 3; i++) {
		struct egs_gpr *g = egs_gpr_new();
		snprintf(g->id, sizeof(g->id), "gpr-%d", i);
		egs_strlcpy(g->workspace, "w", sizeof(g->workspace));
		g->state = states[i];
		g->share_centi = 30;
		g->gpus_per_node = 1;
		g->node_count = 1;
		g->exit_at = T0 + HOUR;
		egs_strlist_add(&g->nodes, n->key);
		g->shares = egs_calloc(1, sizeof(*g->shares));
		g->n_shares = 1;
		egs_strlcpy(g->shares[0].uuid, "GPU-n1-1", sizeof(g->shares[0].uuid));
		g->shares[0].centi = 30;
		assert_int_equal(egs_state_add_gpr(st, g), EGS_OK);
	}
	assert_int_equal(n->shared.len, 2);
	assert_int_equal(n->attached_shared.n, 2);
	assert_int_equal(alloc_of(n, 1), 60);
	assert_int_equal(alloc_of(n, 0), 0);
}

static void test_remediation_moves_shares(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	struct egs_node *n1 = add_node(st, "n1", 2, true);
	struct egs_node *n2 = add_node(st, "n2", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 120, 0, HOUR, T0);
	egs_sched_run(st, T0, NULL);
	ack_all(st, T0);
	assert_ptr_equal(a->share_node, n1);
	n1->health = EGS_HEALTH_UNHEALTHY;
	egs_sched_run(st, T0 + 10, NULL);
	assert_int_equal(a->state, EGS_GPR_PROVISIONED);
	assert_ptr_equal(a->share_node, n2);
	assert_string_equal(a->nodes.v[0], "c1/n2");
	assert_int_equal(alloc_of(n2, 0) + alloc_of(n2, 1), 120);
	assert_int_equal(n1->shared.len, 0);
	assert_true(egs_share_node_stale(n1)); /* its agent is asked to detach when it can */
	ack_all(st, T0 + 10);
	assert_true(egs_strlist_has(&n2->attached_shared, "gpr-a"));
	assert_false(egs_share_node_busy(n1));
}

/* A probe like g, not in the state (for estimates). */
static struct egs_gpr probe_of(const struct egs_gpr *g, int priority)
{
	struct egs_gpr p = *g;
	p.heap_idx = SIZE_MAX;
	p.nodes = (struct egs_strlist){ 0 };
	p.shares = NULL;
	p.share_node = NULL;
	p.priority = priority;
	return p;
}

static void test_kept_plan_estimates_agree(void **state)
{
	struct egs_state *st = &((struct world *)*state)->st;
	add_node(st, "n1", 2, true);
	add_node(st, "n2", 2, true);
	struct egs_gpr *a = submit(st, "gpr-a", "wa", 150, 0, HOUR, T0);
	struct egs_gpr *b = submit(st, "gpr-b", "wb", 150, 0, 2 * HOUR, T0);
	struct egs_gpr *c = submit(st, "gpr-c", "wc", 100, 0, HOUR, T0);
	struct egs_gpr *d = submit(st, "gpr-d", "wd", 0, 2, HOUR, T0);
	struct egs_plan *kept = egs_plan_new();
	egs_sched_run(st, T0, kept);
	assert_int_equal(a->state, EGS_GPR_PROVISIONING);
	assert_int_equal(b->state, EGS_GPR_PROVISIONING);
	assert_int_equal(c->est_start, T0 + HOUR); /* when A leaves */
	assert_int_equal(d->est_start, T0 + 2 * HOUR); /* when n1 is free of A and C */
	/* Shared and dedicated probes, at every priority: the kept plan answers as a fresh walk does. */
	struct egs_gpr probes[4] = { probe_of(c, 300), probe_of(c, 1), probe_of(d, 300), probe_of(d, 1) };
	for (int i = 0; i < 4; i++) {
		const struct egs_gpr *one = &probes[i];
		int64_t fresh, from_kept;
		char cl[1][EGS_NAME_MAX];
		egs_sched_estimates(st, &one, 1, T0, NULL, &fresh, cl);
		egs_sched_estimates(st, &one, 1, T0, kept, &from_kept, cl);
		assert_int_equal(fresh, from_kept);
		assert_int_equal(fresh, egs_sched_estimate(st, one, T0, NULL));
	}
	/* And a new shared GPR is refused by the append (a full walk places it). */
	struct egs_gpr *e = submit(st, "gpr-e", "we", 50, 0, HOUR, T0);
	assert_int_equal(egs_sched_append(st, e, T0, kept), EGS_NEVER - 1);
	egs_plan_free(kept);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_seed_scenario_and_waiting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sharing_feature_and_packing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_requeue_and_failures_free_shares, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_reports_reconcile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_links_shares, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remediation_moves_shares, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_plan_estimates_agree, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
