/*
 * store.c: store.h's public calls, dispatched to the implementation that opened the handle
 * (store_sqlite.c or store_pg.c) through its ops table.  Nothing here touches a database.
 */
#include "store/store_impl.h"

#include "core/aging.h"
#include "core/held.h"

#include <jansson.h>
#include <stdlib.h>

#include <string.h>

static bool is_pg_url(const char *url)
{
	return strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0;
}

enum egs_err egs_store_open(const char *url, struct egs_store **out)
{
	if (is_pg_url(url))
		return egs_store_open_pg(url, out);
	return egs_store_open_sqlite(url, out);
}

const char *egs_store_kind(const struct egs_store *s)
{
	return s->ops->name;
}

void egs_store_free(struct egs_store *s)
{
	if (s)
		s->ops->free(s);
}

enum egs_err egs_store_lead(struct egs_store *s)
{
	return s->ops->lead ? s->ops->lead(s) : EGS_OK;
}

enum egs_err egs_store_try_lead(struct egs_store *s, const char *addr, bool *led)
{
	*led = true;
	return s->ops->try_lead ? s->ops->try_lead(s, addr, led) : EGS_OK;
}

enum egs_err egs_store_leader(struct egs_store *s, struct egs_store_leader *out)
{
	memset(out, 0, sizeof(*out));
	return s->ops->leader ? s->ops->leader(s, out) : EGS_OK;
}

enum egs_err egs_store_follow(struct egs_store *s, egs_store_row_fn row, egs_store_event_fn event, void *ctx)
{
	return s->ops->follow ? s->ops->follow(s, row, event, ctx) : EGS_ERR_NOT_FOUND;
}

void egs_store_adopt_load(struct egs_store *s, const struct egs_store *from)
{
	if (s->ops->adopt_load)
		s->ops->adopt_load(s, from);
}

enum egs_err egs_store_renew(struct egs_store *s)
{
	return s->ops->renew ? s->ops->renew(s) : EGS_OK;
}

bool egs_store_deposed(struct egs_store *s)
{
	return s->ops->deposed && s->ops->deposed(s);
}

static void restore_one(void *ctx, struct egs_gpr *g)
{
	if (egs_aging_restore(ctx, g) != EGS_OK)
		egs_gpr_free(g);
}

static void want(struct egs_strlist *ids, const struct egs_state *st, const char *id)
{
	if (id && *id && !egs_state_gpr(st, id) && !egs_strlist_has(ids, id))
		egs_strlist_add(ids, id);
}

/* Brings back the finished GPRs the load left out by age (core/aging.h) that the loaded state still
 * names: a node's holder, attached or shared GPR, the GPR of a custom resource link or of an
 * inference endpoint (both docs whose spec has "gprId").  One read by key
 * each: there are few (a finished GPR is named by a node only until its agent reports it gone). */
static enum egs_err restore_named(struct egs_store *s, struct egs_state *st)
{
	struct egs_strlist ids = { 0 };
	enum egs_err err = EGS_OK;
	void *v;
	for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
		const struct egs_node *n = v;
		want(&ids, st, n->gpr_id);
		want(&ids, st, n->attached_gpr);
		for (size_t j = 0; j < n->attached_shared.n; j++)
			want(&ids, st, n->attached_shared.v[j]);
	}
	const struct egs_map *docs[] = { &st->gprlinks, &st->endpoints };
	for (size_t m = 0; m < EGS_ARRAY_LEN(docs); m++)
		for (size_t i = 0; egs_map_next(docs[m], &i, NULL, &v);) {
			json_t *spec = json_loads(((const struct egs_doc *)v)->spec, 0, NULL);
			want(&ids, st, json_string_value(json_object_get(spec, "gprId")));
			json_decref(spec);
		}
	for (size_t i = 0; i < ids.n && !err; i++)
		err = egs_store_gprs_find(s, &(struct egs_gpr_find){ .id = ids.v[i] }, restore_one, st);
	egs_strlist_cleanup(&ids);
	return err;
}

enum egs_err egs_store_load(struct egs_store *s, struct egs_state *st)
{
	enum egs_err err = s->ops->load(s, st);
	if (!err && st->aged_before)
		err = restore_named(s, st);
	if (!err)
		egs_held_restore(st); /* the planner's holds, stored with their GPRs (core/held.h) */
	return err;
}

enum egs_err egs_store_gprs_find(struct egs_store *s, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx)
{
	return s->ops->gprs_find(s, f, each, ctx);
}

/* Counts a write transaction that committed (err is EGS_OK): it gets the next write number.  A
 * store without the sync ops made it durable already. */
static enum egs_err wrote(struct egs_store *s, enum egs_err err)
{
	if (!err) {
		s->written++;
		if (!s->ops->sync_request)
			s->requested = s->durable = s->written;
	}
	if (s->ops->acked) { /* PostgreSQL: what it knows durable now (a failure told moves it too) */
		uint64_t a = s->ops->acked(s);
		if (a > s->durable)
			s->durable = a;
	}
	return err;
}

uint64_t egs_store_written(const struct egs_store *s)
{
	return s->written;
}

uint64_t egs_store_durable(const struct egs_store *s)
{
	return s->durable;
}

void egs_store_sync(struct egs_store *s)
{
	if (s->requested >= s->written)
		return;
	s->requested = s->written;
	s->ops->sync_request(s, s->written);
}

int egs_store_sync_fd(struct egs_store *s)
{
	return s->ops->sync_fd ? s->ops->sync_fd(s) : -1;
}

enum egs_err egs_store_sync_done(struct egs_store *s)
{
	uint64_t d = s->durable;
	enum egs_err err = s->ops->sync_poll ? s->ops->sync_poll(s, &d) : EGS_OK;
	if (d > s->durable)
		s->durable = d;
	return err;
}

enum egs_err egs_store_sync_wait(struct egs_store *s)
{
	if (s->durable >= s->written)
		return EGS_OK;
	uint64_t d = s->durable;
	s->requested = s->written;
	enum egs_err err = s->ops->sync_wait(s, s->written, &d);
	if (d > s->durable)
		s->durable = d;
	return err;
}

bool egs_store_commit_held(struct egs_store *s)
{
	return s->ops->commit_held && s->ops->commit_held(s);
}

const int64_t egs_store_time_le_us[EGS_STORE_TIME_BUCKETS] = { 1000, 2000, 5000, 10000, 20000, 50000, 100000 };

void egs_store_timing_add(struct egs_store_timing *t, int64_t us)
{
	size_t b = 0;
	while (b < EGS_STORE_TIME_BUCKETS && us > egs_store_time_le_us[b])
		b++;
	t->buckets[b]++;
	t->count++;
	t->sum_us += us;
	if (us > t->max_us)
		t->max_us = us;
}

bool egs_store_stats(struct egs_store *s, struct egs_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!s->ops->stats)
		return false;
	s->ops->stats(s, out);
	return true;
}

enum egs_err egs_store_commit_changes(struct egs_store *s, struct egs_state *st)
{
	if (!egs_state_has_changes(st))
		return EGS_OK;
	return wrote(s, s->ops->commit_changes(s, st));
}

enum egs_err egs_store_commit_send(struct egs_store *s, struct egs_state *st)
{
	if (!egs_state_has_changes(st))
		return EGS_OK;
	return wrote(s, (s->ops->commit_send ? s->ops->commit_send : s->ops->commit_changes)(s, st));
}

enum egs_err egs_store_meta_get(struct egs_store *s, const char *key, char **value)
{
	return s->ops->meta_get(s, key, value);
}

enum egs_err egs_store_meta_set(struct egs_store *s, const char *key, const char *value)
{
	return wrote(s, s->ops->meta_set(s, key, value));
}

enum egs_err egs_store_prune_events(struct egs_store *s, int64_t before, int64_t *deleted)
{
	return wrote(s, s->ops->prune_events_below(s, before, 0, deleted));
}

enum egs_err egs_store_prune_events_below(struct egs_store *s, int64_t before, int64_t below_id, int64_t *deleted)
{
	return wrote(s, s->ops->prune_events_below(s, before, below_id, deleted));
}

enum egs_err egs_store_audit_list(struct egs_store *s, const struct egs_audit_filter *f, struct egs_vec *out)
{
	return s->ops->audit_list(s, f, out);
}

enum egs_err egs_store_audit_prune(struct egs_store *s, int64_t before, int64_t *deleted)
{
	int64_t n = 0;
	enum egs_err err = wrote(s, s->ops->audit_prune(s, before, &n));
	if (deleted)
		*deleted = n;
	return err;
}

enum egs_err egs_store_audit_last_id(struct egs_store *s, int64_t *out)
{
	*out = 0;
	return s->ops->audit_last_id(s, out);
}
