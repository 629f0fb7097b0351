/*
 * aged.c: finished GPRs that left memory, read back from the store, and the sweep; see aged.h.
 * Reads walk the store in gprId order in chunks of CHUNK rows (id > the last one seen), so a walk
 * over many rows never holds more than a chunk of them and each query stops at its LIMIT.
 */
#include "server/aged.h"

#include "core/aging.h"
#include "core/sched.h"
#include "core/util.h"
#include "server/template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1024
#define SWEEP_MAX 1024 /* GPRs dropped per tick at most: about a millisecond of the loop */
#define KEPT_EVERY 16  /* ticks between looks at old GPRs that were still referred to */

static bool aging_on(const struct egs_server *srv)
{
	return srv->st.cfg.finished_retention_s > 0;
}

static void keep_first(void *ctx, struct egs_gpr *g)
{
	struct egs_gpr **out = ctx;
	if (*out)
		egs_gpr_free(g);
	else
		*out = g;
}

struct egs_gpr *egs_aged_get(struct egs_server *srv, const char *id)
{
	struct egs_gpr *g = NULL;
	if (!aging_on(srv) || !id || !*id || egs_state_gpr(&srv->st, id))
		return NULL;
	if (egs_store_gprs_find(srv->store, &(struct egs_gpr_find){ .id = id }, keep_first, &g) != EGS_OK)
		fprintf(srv->log, "level=error msg=\"reading a finished GPR from the store failed\"\n");
	egs_gpr_free(srv->aged_read);
	srv->aged_read = g;
	return g;
}

static void collect(void *ctx, struct egs_gpr *g)
{
	egs_vec_push(ctx, g);
}

size_t egs_aged_each(struct egs_server *srv, const struct egs_gpr_find *f, size_t want,
		     bool (*fn)(void *ctx, const struct egs_gpr *g), void *ctx, struct egs_vec *keep)
{
	struct egs_gpr_find q = *f;
	char after[EGS_ID_MAX];
	size_t taken = 0;
	bool more = aging_on(srv);
	q.limit = CHUNK;
	while (more) {
		struct egs_vec rows = { 0 };
		enum egs_err err = egs_store_gprs_find(srv->store, &q, collect, &rows);
		if (err)
			fprintf(srv->log, "level=error msg=\"reading finished GPRs from the store failed\"\n");
		more = !err && rows.len == CHUNK;
		if (rows.len)
			egs_strlcpy(after, ((const struct egs_gpr *)rows.items[rows.len - 1])->id, sizeof(after));
		q.after_id = after;
		for (size_t i = 0; i < rows.len; i++) {
			struct egs_gpr *g = rows.items[i];
			bool ok = (!want || taken < want) && !egs_state_gpr(&srv->st, g->id) && (!fn || fn(ctx, g));
			taken += ok;
			if (ok && keep)
				egs_vec_push(keep, g);
			else
				egs_gpr_free(g);
		}
		egs_vec_cleanup(&rows);
		more = more && (!want || taken < want);
	}
	return taken;
}

/* The sweep's `pinned`: the GPR ids custom resource links and inference endpoints name (the spec's
 * gprId of both), gathered on first use. */
struct linked {
	struct egs_server *srv;
	bool built;
	struct egs_strlist ids;
	struct egs_map set; /* borrows ids' strings */
};

static bool is_linked(void *ctx, const struct egs_gpr *g)
{
	struct linked *l = ctx;
	void *v;
	if (!l->built) {
		l->built = true;
		const struct egs_map *docs[] = { &l->srv->st.gprlinks, &l->srv->st.endpoints };
		for (size_t m = 0; m < EGS_ARRAY_LEN(docs); m++)
			for (size_t i = 0; egs_map_next(docs[m], &i, NULL, &v);) {
				json_t *spec = egs_doc_spec(v);
				const char *id = json_string_value(json_object_get(spec, "gprId"));
				if (id)
					egs_strlist_add(&l->ids, id);
				json_decref(spec);
			}
		for (size_t i = 0; i < l->ids.n; i++)
			egs_map_put(&l->set, l->ids.v[i], l->ids.v[i]);
	}
	return egs_map_get(&l->set, g->id) != NULL;
}

void egs_aged_sweep(struct egs_server *srv, int64_t now)
{
	struct egs_state *st = &srv->st;
	bool again = st->finished_kept.len && srv->aged_sweeps++ % KEPT_EVERY == 0;
	if (!aging_on(srv) || (st->finished_head >= st->finished.len && !again) || egs_sched_walking(srv->plan))
		return;
	struct linked l = { .srv = srv };
	egs_map_init(&l.set);
	egs_aging_sweep(st, now - st->cfg.finished_retention_s, SWEEP_MAX, again, is_linked, &l);
	egs_map_cleanup(&l.set);
	egs_strlist_cleanup(&l.ids);
}
