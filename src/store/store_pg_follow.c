/*
 * store_pg_follow.c: the followers' change log (docs/internals/store.md, Following; docs/ha.md).
 *
 * Leader: every committed turn writes one row of table changes in the turn's own transaction,
 * (turn, kinds[], keys[]): the kind (enum egs_kind, or EGS_PG_CHANGE_EVENT) and the key of every row
 * the turn wrote or deleted, and of every event it wrote (its id).  turn is meta's leader.turn after
 * the turn's "turn" statement moved it on, so the log's turns are the counter's, one row each.  The
 * same statement deletes the row KEEP_TURNS turns older: the log holds the last KEEP_TURNS turns.
 *
 * Follower: egs__pg_follow reads, in one read-only snapshot, leader.turn, checks that the log holds
 * every turn after the handle's loaded_turn up to it (else: a gap, the caller loads in full), then per
 * kind the current rows of the keys those turns name (by the primary key; a key without a row was
 * deleted) and the events they name, and hands each to the caller.  loaded_turn then moves on.
 */
#include "store/store_pg.h"

#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEEP_TURNS 10000 /* turns the log keeps: a follower further behind loads in full */
#define STR_(x) #x
#define STR(x) STR_(x)

bool egs__pg_prepare_follow(struct pg_store *s)
{
	return egs__pg_prepare(
		s, "chg",
		"WITH t AS (SELECT value::bigint AS turn FROM meta WHERE key = 'leader.turn'), "
		"p AS (DELETE FROM changes WHERE turn = (SELECT turn FROM t) - " STR(KEEP_TURNS) ") "
		"INSERT INTO changes(turn, kinds, keys) SELECT turn, $1::smallint[], $2::text[] FROM t "
		"ON CONFLICT (turn) DO UPDATE SET kinds = excluded.kinds, keys = excluded.keys");
}

/* Appends s to the text array literal t as one quoted element ("a\"b"). */
static void put_elem(struct egs_buf *t, const char *s)
{
	if (t->len > 1)
		egs_buf_putc(t, ',');
	egs_buf_putc(t, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			egs_buf_putc(t, '\\');
		egs_buf_putc(t, *s);
	}
	egs_buf_putc(t, '"');
}

static void add_change(struct egs_pg_changes *c, int kind, const char *key)
{
	char num[16];
	snprintf(num, sizeof(num), "%d", kind);
	put_elem(&c->kinds, num);
	put_elem(&c->keys, key);
}

void egs__pg_changes_build(struct egs_pg_changes *c, const struct egs_state *st)
{
	char id[24];
	c->kinds.len = c->keys.len = 0;
	egs_buf_putc(&c->kinds, '{');
	egs_buf_putc(&c->keys, '{');
	for (size_t i = 0; i < st->changes.len; i++) {
		const struct egs_change *ch = st->changes.items[i];
		add_change(c, (int)ch->kind, egs__pg_kinds[ch->kind].key(ch->obj));
	}
	for (size_t i = 0; i < st->new_events.len; i++) {
		snprintf(id, sizeof(id), "%lld", (long long)((const struct egs_event *)st->new_events.items[i])->id);
		add_change(c, EGS_PG_CHANGE_EVENT, id);
	}
	egs_buf_putc(&c->kinds, '}');
	egs_buf_putc(&c->keys, '}');
	c->params[0] = egs_buf_cstr(&c->kinds);
	c->params[1] = egs_buf_cstr(&c->keys);
}

void egs__pg_changes_free(struct egs_pg_changes *c)
{
	egs_buf_cleanup(&c->kinds);
	egs_buf_cleanup(&c->keys);
	memset(c, 0, sizeof(*c));
}

/* Runs sql with the text parameters v[0..n) on the session; its rows, or NULL (reported). */
static PGresult *query(struct pg_store *s, const char *sql, int n, const char *const *v)
{
	bool sent = s->conn && PQsendQueryParams(s->conn, sql, n, NULL, v, NULL, NULL, 0) == 1;
	return egs__pg_result(s, sent, sql, PGRES_TUPLES_OK);
}

/* Whether the log holds every turn in (from, to]. */
static bool complete(struct pg_store *s, const char *from, const char *to)
{
	const char *v[2] = { from, to };
	PGresult *res = query(s, "SELECT count(*) FROM changes WHERE turn > $1::bigint AND turn <= $2::bigint", 2, v);
	bool ok = res && PQntuples(res) == 1 && strtoll(PQgetvalue(res, 0, 0), NULL, 10) ==
						      strtoll(to, NULL, 10) - strtoll(from, NULL, 10);
	PQclear(res);
	return ok;
}

/* Hands the current rows of kind k whose keys are in the batch's one column (an array literal),
 * and each key without a row as gone (NULL). */
static enum egs_err follow_kind(struct pg_store *s, int k, const char *keys, egs_store_row_fn row, void *ctx)
{
	const struct egs_pg_kind *kind = &egs__pg_kinds[k];
	char sql[1536], pk[32];
	enum egs_err err = EGS_ERR_STORE;
	snprintf(pk, sizeof(pk), "%.*s", (int)strcspn(kind->cols, ","), kind->cols);
	/* A function's rows are estimated at a few: a nested loop over the primary key, never a scan. */
	snprintf(sql, sizeof(sql), "SELECT n.nk, %s FROM unnest($1::text[]) AS n(nk) LEFT JOIN %s t ON t.%s = n.nk",
		 kind->cols, kind->table, pk);
	PGresult *res = query(s, sql, 1, &keys);
	if (!res)
		return EGS_ERR_STORE;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *key = PQgetvalue(res, i, 0);
		if (PQgetisnull(res, i, 1)) {
			row(ctx, (enum egs_kind)k, key, NULL);
			continue;
		}
		struct egs_row_reader r = { .src = &egs__pg_row_source, .res = res, .row = i, .i = 1 };
		void *obj = kind->alloc();
		kind->read(&r, obj);
		if (r.bad) {
			fprintf(stderr, "store: %s row '%s': column %s: %s\n", kind->table, key, r.bad, r.why);
			kind->free(obj);
			goto out;
		}
		row(ctx, (enum egs_kind)k, key, obj);
	}
	err = EGS_OK;
out:
	PQclear(res);
	return err;
}

static enum egs_err follow_events(struct pg_store *s, const char *ids, egs_store_event_fn event, void *ctx)
{
	PGresult *res = query(s, "SELECT " EGS_PG_EVENT_COLS " FROM events WHERE id = ANY($1::bigint[]) ORDER BY id", 1,
			      &ids);
	enum egs_err err = res ? EGS_OK : EGS_ERR_STORE;
	for (int i = 0; res && i < PQntuples(res); i++) {
		struct egs_row_reader r = { .src = &egs__pg_row_source, .res = res, .row = i };
		struct egs_event *ev = egs_calloc(1, sizeof(*ev));
		egs_rows_read_event(&r, ev);
		if (r.bad) {
			fprintf(stderr, "store: events row %lld: column %s: %s\n", (long long)ev->id, r.bad, r.why);
			egs_event_free(ev);
			err = EGS_ERR_STORE;
			break;
		}
		event(ctx, ev);
	}
	PQclear(res);
	return err;
}

/* Hands what the turns name: per kind, one query of its keys (res: the distinct kind, key pairs the
 * turns name, ordered by kind), the events among them. */
static enum egs_err follow_named(struct pg_store *s, const PGresult *res, egs_store_row_fn row,
				 egs_store_event_fn event, void *ctx)
{
	struct egs_buf keys = { 0 };
	enum egs_err err = EGS_OK;
	int n = PQntuples(res), from = 0;
	while (from < n && !err) {
		int k = (int)strtol(PQgetvalue(res, from, 0), NULL, 10), to = from;
		keys.len = 0;
		egs_buf_putc(&keys, '{');
		while (to < n && strtol(PQgetvalue(res, to, 0), NULL, 10) == k)
			put_elem(&keys, PQgetvalue(res, to++, 1));
		egs_buf_putc(&keys, '}');
		if (k == EGS_PG_CHANGE_EVENT)
			err = follow_events(s, egs_buf_cstr(&keys), event, ctx);
		else if (k >= 0 && k < egs__pg_nkinds)
			err = follow_kind(s, k, egs_buf_cstr(&keys), row, ctx);
		from = to;
	}
	egs_buf_cleanup(&keys);
	return err;
}

enum egs_err egs__pg_follow(struct egs_store *b, egs_store_row_fn row, egs_store_event_fn event, void *ctx)
{
	struct pg_store *s = (struct pg_store *)b;
	char from[24], to[24];
	const char *v2[2] = { from, to };
	int64_t turn = 0;
	PGresult *res = NULL;
	enum egs_err err = EGS_ERR_STORE;
	if (!s->loaded || !egs__pg_ready(s))
		return s->loaded ? EGS_ERR_STORE : EGS_ERR_NOT_FOUND;
	if (!egs__pg_exec(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"))
		return EGS_ERR_STORE;
	if (!egs__pg_read_turn(s, &turn))
		goto out;
	snprintf(from, sizeof(from), "%lld", (long long)s->loaded_turn);
	snprintf(to, sizeof(to), "%lld", (long long)turn);
	if (turn < s->loaded_turn || !complete(s, from, to)) {
		err = EGS_ERR_NOT_FOUND; /* a gap: the log was pruned, or turns before it existed */
		goto out;
	}
	res = query(s, "SELECT DISTINCT k.kind, k.key FROM changes c, unnest(c.kinds, c.keys) AS k(kind, key) "
		       "WHERE c.turn > $1::bigint AND c.turn <= $2::bigint ORDER BY 1", 2, v2);
	if (res)
		err = follow_named(s, res, row, event, ctx);
out:
	PQclear(res);
	if (!egs__pg_exec(s, err == EGS_ERR_STORE ? "ROLLBACK" : "COMMIT") && !err)
		err = EGS_ERR_STORE;
	if (!err)
		s->loaded_turn = turn;
	return err;
}

void egs__pg_adopt_load(struct egs_store *b, const struct egs_store *from)
{
	struct pg_store *s = (struct pg_store *)b;
	const struct pg_store *f = (const struct pg_store *)from;
	if (from->ops != b->ops || !f->loaded)
		return;
	s->loaded_turn = f->loaded_turn;
	s->loaded = true;
	s->seq_floor = 0; /* which GPRs are stored: known again after the next commit, as after a load */
}
