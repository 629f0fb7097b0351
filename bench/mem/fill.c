/*
 * fill.c: writes N GPRs into a store, as egsd would have left them, for bench/mem/run.py.
 *
 *   build/bench/egs-fill URL N [QUEUED_PER_MILLE]
 *
 * URL is a SQLite file path or a postgres:// URL (store.h).  The GPRs go through the real store API
 * (egs_store_commit_changes), in turns of 10,000 rows, into 10 workspaces of project "default".
 * QUEUED_PER_MILLE of them (default 20: 2%) are Queued at priorities 1-300; the rest finished
 * (Complete 80%, Cancelled 15%, Error 5%) at times spread evenly over the 30 days before now, each
 * having run 1-8 GPUs for up to 2 hours.  Rows are deterministic (a fixed-seed generator), so two
 * fills of the same N are the same store.
 */
#include "core/util.h"
#include "store/store.h"

#include "../../tests/unit/rng.h" /* the deterministic generator of the tests */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TURN 10000
#define NWS 10


static void workspaces(struct egs_state *st)
{
	for (int i = 0; i < NWS; i++) {
		struct egs_workspace *w = egs_calloc(1, sizeof(*w));
		snprintf(w->name, sizeof(w->name), "ws-%d", i);
		egs_strlcpy(w->project, "default", sizeof(w->project));
		w->created_at = 1;
		EGS_ASSERT(egs_state_add_workspace(st, w) == EGS_OK);
		egs_state_touch(st, EGS_KIND_WORKSPACE, w);
	}
}

static void one(struct egs_state *st, uint64_t seq, uint64_t n, int queued_pm, int64_t now)
{
	struct egs_gpr *g = egs_gpr_new();
	snprintf(g->id, sizeof(g->id), "gpr-%08llx-%04x", (unsigned long long)seq, (unsigned)(rng_next() & 0xffff));
	snprintf(g->name, sizeof(g->name), "job-%llu", (unsigned long long)seq);
	snprintf(g->workspace, sizeof(g->workspace), "ws-%d", (int)(seq % NWS));
	g->gpus_per_node = 1 + (int)(rng_next() % 8);
	g->node_count = 1;
	g->exit_duration_s = 7200;
	g->priority = 1 + (int)(rng_next() % 300);
	g->seq = seq;
	/* Created in order over the 30 days before now. */
	g->created_at = now - 30 * 86400 + (int64_t)((double)seq / (double)n * 30 * 86400);
	if ((int)(rng_next() % 1000) < queued_pm) {
		g->state = EGS_GPR_QUEUED;
	} else {
		int r = (int)(rng_next() % 100);
		g->state = r < 80 ? EGS_GPR_COMPLETE : r < 95 ? EGS_GPR_CANCELLED : EGS_GPR_ERROR;
		if (g->state != EGS_GPR_CANCELLED) {
			g->start_ts = g->created_at + (int64_t)(rng_next() % 600);
			g->exit_at = g->start_ts + g->exit_duration_s;
			char node[40];
			snprintf(node, sizeof(node), "c1/node-%d", (int)(rng_next() % 1000));
			egs_strlist_add(&g->nodes, node);
		}
		g->completion_ts = (g->start_ts ? g->start_ts : g->created_at) + 1 + (int64_t)(rng_next() % 7200);
		if (g->completion_ts > now)
			g->completion_ts = now;
		if (g->state == EGS_GPR_ERROR)
			g->failure_reason = egs_strdup("attach failed on 3 attempts");
	}
	EGS_ASSERT(egs_state_add_gpr(st, g) == EGS_OK);
	egs_state_touch(st, EGS_KIND_GPR, g);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: egs-fill URL N [QUEUED_PER_MILLE]\n");
		return 2;
	}
	uint64_t n = strtoull(argv[2], NULL, 10);
	int queued_pm = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 20;
	struct egs_store *s = NULL;
	if (egs_store_open(argv[1], &s) || egs_store_lead(s))
		return 1;
	int64_t now = (int64_t)time(NULL);
	for (uint64_t seq = 1; seq <= n;) {
		struct egs_state st;
		egs_state_init(&st, NULL);
		if (seq == 1)
			workspaces(&st);
		for (int i = 0; i < TURN && seq <= n; i++, seq++)
			one(&st, seq, n, queued_pm, now);
		if (egs_store_commit_changes(s, &st) != EGS_OK) {
			fprintf(stderr, "egs-fill: commit failed at %llu\n", (unsigned long long)seq);
			return 1;
		}
		egs_state_clear_changes(&st);
		egs_state_cleanup(&st);
	}
	egs_store_free(s);
	return 0;
}
