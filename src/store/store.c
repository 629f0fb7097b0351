/*
 * store.c: store.h's public calls, dispatched to the implementation that opened the handle
 * (store_sqlite.c or store_pg.c) through its ops table.  Nothing here touches a database.
 */
#include "store/store_impl.h"

#include "core/held.h"

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

enum egs_err egs_store_renew(struct egs_store *s)
{
	return s->ops->renew ? s->ops->renew(s) : EGS_OK;
}

bool egs_store_deposed(struct egs_store *s)
{
	return s->ops->deposed && s->ops->deposed(s);
}

enum egs_err egs_store_load(struct egs_store *s, struct egs_state *st)
{
	enum egs_err err = s->ops->load(s, st);
	if (!err)
		egs_held_restore(st); /* the planner's holds, stored with their GPRs (core/held.h) */
	return err;
}

enum egs_err egs_store_commit_changes(struct egs_store *s, struct egs_state *st)
{
	if (!egs_state_has_changes(st))
		return EGS_OK;
	return s->ops->commit_changes(s, st);
}

enum egs_err egs_store_meta_get(struct egs_store *s, const char *key, char **value)
{
	return s->ops->meta_get(s, key, value);
}

enum egs_err egs_store_meta_set(struct egs_store *s, const char *key, const char *value)
{
	return s->ops->meta_set(s, key, value);
}

enum egs_err egs_store_prune_events(struct egs_store *s, int64_t before, int64_t *deleted)
{
	return s->ops->prune_events_below(s, before, 0, deleted);
}

enum egs_err egs_store_prune_events_below(struct egs_store *s, int64_t before, int64_t below_id, int64_t *deleted)
{
	return s->ops->prune_events_below(s, before, below_id, deleted);
}

enum egs_err egs_store_audit_list(struct egs_store *s, const struct egs_audit_filter *f, struct egs_vec *out)
{
	return s->ops->audit_list(s, f, out);
}

enum egs_err egs_store_audit_prune(struct egs_store *s, int64_t before, int64_t *deleted)
{
	int64_t n = 0;
	enum egs_err err = s->ops->audit_prune(s, before, &n);
	if (deleted)
		*deleted = n;
	return err;
}

enum egs_err egs_store_audit_last_id(struct egs_store *s, int64_t *out)
{
	*out = 0;
	return s->ops->audit_last_id(s, out);
}
