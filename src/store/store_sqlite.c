/*
 * store_sqlite.c: the SQLite implementation of store.h (see docs/internals/store.md): the
 * connection, its prepared statements, the load and the group commit.  The schema is
 * store_schema.c's (one list for both stores), the rows store_sqlite_rows.c's (store_sqlite.h).
 *
 * One connection, used by one thread at a time (egsd's loop).  The database runs in WAL mode with
 * synchronous=NORMAL: COMMIT writes the WAL and returns without an fsync, and the durability thread
 * (store_sqlite_sync.c) fdatasyncs the WAL apart from it, so that egsd reads its next turn meanwhile
 * and answers 2xx once the fdatasync covering the turn returned (store.h).  The migrations run with
 * synchronous=FULL.  Each loop turn's changes go in one transaction (group commit), which also
 * means a reader never sees half a turn, even after a kill -9.
 *
 * Every statement of the hot path (upserts, deletes, event inserts, BEGIN/COMMIT) is prepared once
 * at open and reused: per row there is only reset, bind and step, and a row binds only the
 * parameters whose values differ from the statement's previous row (store_sqlite.h, kept).  The column lists of
 * egs_rows_kinds are the single source of the bind order for writes and the column order for
 * loads.
 */
#include "store/store_sqlite.h"
#include "store/store_audit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the store ---- */

struct sqlite_store {
	struct egs_store base; /* first: the handle store.c dispatches through */
	sqlite3 *db;
	struct egs_sqlite_put *put[EGS_ROWS_NKINDS]; /* owned (store_sqlite_put.c) */
	sqlite3_stmt *del[EGS_ROWS_NKINDS];
	struct egs_sqlite_put *put_event, *put_audit;
	sqlite3_stmt *begin, *commit, *rollback;
	sqlite3_stmt *meta_get, *meta_set, *prune_mark, *prune;
	int last_rc;     /* the result code of the last failed step: SQLITE_FULL tells a full disk */
	char *fail_path; /* EGS_STORE_FAIL_IF_EXISTS: a commit fails as on a full disk while this file exists */
	struct egs_sqlite_sync *sync; /* the WAL's durability thread (store_sqlite_sync.c), owned */
};

static const struct egs_store_ops sqlite_ops;
static void sqlite_free(struct sqlite_store *s);

/* The largest event id ever pruned, kept in meta so that ids are never reused even when pruning
 * empties the events table. */
#define META_EVENT_FLOOR "store.event_id_floor"

/* Steps a statement that returns no rows and resets it.  On failure prints
 * "store: <what> [<table> '<key>']: <sqlite error>" and returns false. */
static bool step_done(struct sqlite_store *s, sqlite3_stmt *stmt, const char *what, const char *table,
		      const char *key)
{
	int rc = sqlite3_step(stmt);
	if (rc != SQLITE_DONE)
		s->last_rc = rc;
	if (rc != SQLITE_DONE && table)
		fprintf(stderr, "store: %s %s '%s': %s\n", what, table, key, sqlite3_errmsg(s->db));
	else if (rc != SQLITE_DONE)
		fprintf(stderr, "store: %s: %s\n", what, sqlite3_errmsg(s->db));
	sqlite3_reset(stmt);
	return rc == SQLITE_DONE;
}

static bool exec(struct sqlite_store *s, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return true;
	fprintf(stderr, "store: %.60s: %s\n", sql, msg ? msg : sqlite3_errmsg(s->db));
	sqlite3_free(msg);
	return false;
}

/* Runs a one-row, one-column query (a PRAGMA) and copies the text of the value into buf. */
static bool query_text(struct sqlite_store *s, const char *sql, char *buf, size_t n)
{
	sqlite3_stmt *stmt = NULL;
	bool ok = false;
	if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_step(stmt) != SQLITE_ROW)
		goto out;
	const char *v = (const char *)sqlite3_column_text(stmt, 0);
	egs_strlcpy(buf, v ? v : "", n);
	ok = true;
out:
	if (!ok)
		fprintf(stderr, "store: %s: %s\n", sql, sqlite3_errmsg(s->db));
	sqlite3_finalize(stmt);
	return ok;
}

static bool user_version(struct sqlite_store *s, int *out)
{
	char buf[32];
	if (!query_text(s, "PRAGMA user_version", buf, sizeof(buf)))
		return false;
	*out = (int)strtol(buf, NULL, 10);
	return true;
}

static bool version_known(int v)
{
	if (v >= 0 && v <= egs_store_schema_version())
		return true;
	fprintf(stderr,
		"store: the database has schema version %d but this build knows only up to %d; "
		"refusing to open it (run a newer egsd)\n",
		v, egs_store_schema_version());
	return false;
}

/* Applies the missing migrations one transaction each.  The version is re-read under the write
 * lock, so two processes opening a new file at once do not both run migration 1. */
static enum egs_err migrate(struct sqlite_store *s)
{
	for (;;) {
		int v;
		char sql[64];
		if (!exec(s, "BEGIN IMMEDIATE"))
			return EGS_ERR_STORE;
		if (!user_version(s, &v) || !version_known(v))
			goto fail;
		if (v == egs_store_schema_version())
			return exec(s, "COMMIT") ? EGS_OK : EGS_ERR_STORE;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (!exec(s, egs__sqlite_migrations[v]) || !exec(s, sql) || !exec(s, "COMMIT")) {
			fprintf(stderr, "store: migration to schema version %d failed\n", v + 1);
			goto fail;
		}
	}
fail:
	if (!sqlite3_get_autocommit(s->db))
		exec(s, "ROLLBACK");
	return EGS_ERR_STORE;
}

/* The rows of events and audit entries for egs__sqlite_put_new: bound by store_rows.c, named by id. */
static void bind_event(const struct egs_row_binder *b, const void *obj) { egs_rows_bind_event(b, obj); }
static void bind_audit(const struct egs_row_binder *b, const void *obj) { egs_rows_bind_audit(b, obj); }
static int64_t event_id(const void *obj) { return ((const struct egs_event *)obj)->id; }
static int64_t audit_id(const void *obj) { return ((const struct egs_audit *)obj)->id; }

static bool prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **out)
{
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL) == SQLITE_OK)
		return true;
	fprintf(stderr, "store: preparing %.80s: %s\n", sql, sqlite3_errmsg(s->db));
	return false;
}

static bool prepare_all(struct sqlite_store *s)
{
	struct egs_sqlbuf q;
	for (int i = 0; i < EGS_ROWS_NKINDS; i++) {
		const struct egs_row_kind *k = &egs_rows_kinds[i];
		if (!(s->put[i] = egs__sqlite_put_new(s->db, k->table, k->cols, true, k->bind, k->key, NULL)))
			return false;
		q.n = 0;
		egs_sql_str(&q, "DELETE FROM ");
		egs_sql_str(&q, k->table);
		egs_sql_str(&q, " WHERE ");
		egs_sql_add(&q, k->cols, strcspn(k->cols, ","));
		egs_sql_str(&q, " = ?1");
		if (!prepare(s, q.b, &s->del[i]))
			return false;
	}
	/* An event is new or a repeat of a stored one (its count, time and message move): an upsert.
	 * INSERT OR REPLACE cost ~3,000 more instructions a new row (its conflict handling). */
	if (!(s->put_event = egs__sqlite_put_new(s->db, "events", EGS_ROWS_EVENT_COLS, true, bind_event, NULL, event_id)) ||
	    !(s->put_audit = egs__sqlite_put_new(s->db, "audit", EGS_AUDIT_COLS, false, bind_audit, NULL, audit_id)))
		return false;
	return prepare(s, "BEGIN IMMEDIATE", &s->begin) && prepare(s, "COMMIT", &s->commit) &&
	       prepare(s, "ROLLBACK", &s->rollback) &&
	       prepare(s, "SELECT value FROM meta WHERE key = ?1", &s->meta_get) &&
	       prepare(s,
		       "INSERT INTO meta(key, value) VALUES(?1, ?2) "
		       "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
		       &s->meta_set) &&
	       prepare(s,
		       "INSERT INTO meta(key, value) SELECT '" META_EVENT_FLOOR "', m FROM "
		       "(SELECT MAX(id) AS m FROM events WHERE time < ?1 OR id < ?2) WHERE m IS NOT NULL "
		       "ON CONFLICT(key) DO UPDATE SET "
		       "value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
		       &s->prune_mark) &&
	       prepare(s, "DELETE FROM events WHERE time < ?1 OR id < ?2", &s->prune);
}

/*
 * SQLite's process-wide settings, made once before its first connection (sqlite3_config refuses
 * them once the library is initialised, and then they simply stay SQLite's defaults).  Allocation
 * statistics off: with them on, every sqlite3_malloc and sqlite3_free takes a global mutex to count
 * bytes nothing here reads (sqlite3_memory_used and the soft heap limit, both unused), ~31 of each
 * per durable create and ~3,200 instructions of SQLite's ~47,000 (issue 16).  Debian builds SQLite
 * without lookaside (OMIT_LOOKASIDE), so every cursor and record buffer is a malloc.
 */
static void sqlite_configure(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

enum egs_err egs_store_open_sqlite(const char *path, struct egs_store **out)
{
	static pthread_once_t configured = PTHREAD_ONCE_INIT;
	pthread_once(&configured, sqlite_configure);
	struct sqlite_store *s = egs_calloc(1, sizeof(*s));
	enum egs_err err = EGS_ERR_STORE;
	char mode[16];
	int v;
	*out = NULL;
	s->base.ops = &sqlite_ops;
	/* The VFS writes a commit's WAL frames in one system call, not two per frame (store_sqlite_vfs.c). */
	int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
				 egs__sqlite_vfs());
	if (rc != SQLITE_OK) {
		fprintf(stderr, "store: cannot open %s: %s\n", path,
			s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto out;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* Refuse a future schema before touching the file at all. */
	if (!user_version(s, &v) || !version_known(v))
		goto out;
	if (!query_text(s, "PRAGMA journal_mode = WAL", mode, sizeof(mode)))
		goto out;
	if (strcmp(mode, "wal") != 0) {
		fprintf(stderr, "store: %s: cannot switch to WAL mode (got %s)\n", path, mode);
		goto out;
	}
	if (!exec(s, "PRAGMA synchronous = FULL"))
		goto out;
	err = migrate(s);
	if (err)
		goto out;
	/* From here a COMMIT does not fsync: the durability thread does, apart from it. */
	err = EGS_ERR_STORE;
	if (!(s->sync = egs__sqlite_sync_new(path, s->db)) || !exec(s, "PRAGMA synchronous = NORMAL"))
		goto out;
	err = prepare_all(s) ? EGS_OK : EGS_ERR_STORE;
	const char *fail = getenv("EGS_STORE_FAIL_IF_EXISTS");
	s->fail_path = fail && *fail ? egs_strdup(fail) : NULL;
out:
	if (err) {
		fprintf(stderr, "store: cannot use database %s\n", path);
		sqlite_free(s);
		return err;
	}
	*out = &s->base;
	return EGS_OK;
}

static void sqlite_free(struct sqlite_store *s)
{
	if (!s)
		return;
	if (s->db && !sqlite3_get_autocommit(s->db))
		exec(s, "ROLLBACK");
	egs__sqlite_sync_free(s->sync); /* its last fdatasync before the close checkpoints the WAL */
	for (int i = 0; i < EGS_ROWS_NKINDS; i++) {
		egs__sqlite_put_free(s->put[i]);
		sqlite3_finalize(s->del[i]);
	}
	egs__sqlite_put_free(s->put_event);
	egs__sqlite_put_free(s->put_audit);
	sqlite3_finalize(s->begin);
	sqlite3_finalize(s->commit);
	sqlite3_finalize(s->rollback);
	sqlite3_finalize(s->meta_get);
	sqlite3_finalize(s->meta_set);
	sqlite3_finalize(s->prune_mark);
	sqlite3_finalize(s->prune);
	if (sqlite3_close(s->db) != SQLITE_OK)
		fprintf(stderr, "store: close: %s\n", sqlite3_errmsg(s->db));
	free(s->fail_path);
	free(s);
}

/* ---- load ---- */

static enum egs_err load_kind(struct sqlite_store *s, struct egs_state *st, const struct egs_row_kind *k)
{
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	char sql[1024], where[320] = "";
	int rc;
	if (k == &egs_rows_kinds[EGS_KIND_GPR]) /* finished GPRs older than the retention: load_aged */
		egs_rows_load_where(st, where, sizeof(where));
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s%s ORDER BY %s", k->cols, k->table, where, k->order);
	if (!prepare(s, sql, &stmt))
		goto out;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct egs_row_reader r = { .src = &egs__sqlite_row_source, .res = stmt };
		if (!egs_rows_load_obj(k, &r, st))
			goto out;
	}
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "store: reading %s: %s\n", k->table, sqlite3_errmsg(s->db));
		goto out;
	}
	err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

/* Counts the finished GPRs a load leaves in the store (core/aging.h), from the few columns that
 * need, without parsing their rows. */
static enum egs_err load_aged(struct sqlite_store *s, struct egs_state *st)
{
	sqlite3_stmt *stmt = NULL;
	char sql[512];
	const char *v[EGS_ROWS_AGED_COLS];
	int rc = SQLITE_DONE;
	egs_rows_aged_sql(st, sql, sizeof(sql));
	if (!prepare(s, sql, &stmt))
		return EGS_ERR_STORE;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		for (int i = 0; i < EGS_ROWS_AGED_COLS; i++)
			v[i] = (const char *)sqlite3_column_text(stmt, i);
		if (!egs_rows_count_aged(st, v)) {
			fprintf(stderr, "store: gprs: a finished row (seq %s) is not what egsd writes\n", v[2] ? v[2] : "");
			rc = SQLITE_ERROR;
			break;
		}
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ERROR)
		fprintf(stderr, "store: reading gprs: %s\n", sqlite3_errmsg(s->db));
	sqlite3_finalize(stmt);
	return rc == SQLITE_DONE ? EGS_OK : EGS_ERR_STORE;
}

/* Loads the newest cfg.event_retention events, oldest first, so the ring ends up in time order. */
static enum egs_err load_events(struct sqlite_store *s, struct egs_state *st)
{
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	int rc;
	if (!prepare(s, "SELECT * FROM (SELECT " EGS_ROWS_EVENT_COLS " FROM events ORDER BY id DESC LIMIT ?1) ORDER BY id",
		     &stmt))
		goto out;
	sqlite3_bind_int64(stmt, 1, (int64_t)st->cfg.event_retention);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct egs_row_reader r = { .src = &egs__sqlite_row_source, .res = stmt };
		if (!egs_rows_load_event(&r, st))
			goto out;
	}
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "store: reading events: %s\n", sqlite3_errmsg(s->db));
		goto out;
	}
	sqlite3_finalize(stmt);
	stmt = NULL;
	/* Past every id ever stored, not just the loaded ones (and not just the unpruned ones), so ids
	 * are never reused. */
	if (!prepare(s,
		     "SELECT MAX((SELECT COALESCE(MAX(id), 0) FROM events),"
		     " (SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM meta WHERE key = '" META_EVENT_FLOOR "'))",
		     &stmt) ||
	    sqlite3_step(stmt) != SQLITE_ROW) {
		fprintf(stderr, "store: reading the largest event id: %s\n", sqlite3_errmsg(s->db));
		goto out;
	}
	if (sqlite3_column_int64(stmt, 0) >= st->next_event_id)
		st->next_event_id = sqlite3_column_int64(stmt, 0) + 1;
	err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

static enum egs_err sqlite_load(struct sqlite_store *s, struct egs_state *st)
{
	enum egs_err err = EGS_ERR_STORE;
	/* One read transaction: every table from the same committed snapshot. */
	if (!exec(s, "BEGIN"))
		return EGS_ERR_STORE;
	for (int i = 0; i < EGS_ROWS_NKINDS; i++) {
		err = load_kind(s, st, &egs_rows_kinds[i]);
		if (!err && i == EGS_KIND_GPR && st->aged_before)
			err = load_aged(s, st);
		if (err)
			goto out;
	}
	err = load_events(s, st);
out:
	if (!exec(s, err ? "ROLLBACK" : "COMMIT"))
		err = EGS_ERR_STORE;
	return err;
}

/* ---- commit ---- */

static bool write_delete(struct sqlite_store *s, const struct egs_change *c)
{
	const struct egs_row_kind *k = &egs_rows_kinds[c->kind];
	const char *key = k->key(c->obj);
	sqlite3_stmt *del = s->del[c->kind];
	if (sqlite3_bind_text(del, 1, key, -1, SQLITE_STATIC) != SQLITE_OK) {
		fprintf(stderr, "store: delete %s '%s': %s\n", k->table, key, sqlite3_errmsg(s->db));
		return false;
	}
	return step_done(s, del, "delete", k->table, key);
}

/*
 * The turn's changes of one kind, in the order they were made: runs of upserts go out up to
 * EGS_SQLITE_PUT_MAX rows a statement (store_sqlite_put.c), and a deletion first sends the rows
 * gathered before it, so that a row stored and then deleted under the same key keep their order.
 * Kinds are independent tables, so writing them kind by kind changes nothing but the statements.
 */
static bool write_kind(struct sqlite_store *s, const struct egs_state *st, int kind)
{
	void *rows[EGS_SQLITE_PUT_MAX];
	size_t n = 0;
	for (size_t i = 0; i < st->changes.len; i++) {
		const struct egs_change *c = st->changes.items[i];
		if ((int)c->kind != kind)
			continue;
		if (n && (c->deleted || n == EGS_SQLITE_PUT_MAX)) {
			if (!egs__sqlite_put_rows(s->put[kind], rows, n, &s->last_rc))
				return false;
			n = 0;
		}
		if (c->deleted && !write_delete(s, c))
			return false;
		if (!c->deleted)
			rows[n++] = c->obj;
	}
	return egs__sqlite_put_rows(s->put[kind], rows, n, &s->last_rc);
}

/* The failure injection of the tests (docs/internals/store.md): true while the file named by
 * EGS_STORE_FAIL_IF_EXISTS exists. */
static bool injected_failure(struct sqlite_store *s)
{
	if (!s->fail_path || access(s->fail_path, F_OK) != 0)
		return false;
	s->last_rc = SQLITE_FULL;
	return true;
}

static enum egs_err sqlite_commit_changes(struct sqlite_store *s, struct egs_state *st)
{
	if (!egs_state_has_changes(st))
		return EGS_OK;
	s->last_rc = SQLITE_OK;
	if (!step_done(s, s->begin, "BEGIN", NULL, NULL))
		goto fail;
	for (size_t i = 0; i < st->changes.len; i++) {
		const struct egs_change *c = st->changes.items[i];
		EGS_ASSERT((int)c->kind >= 0 && (int)c->kind < EGS_ROWS_NKINDS);
	}
	for (int k = 0; k < EGS_ROWS_NKINDS; k++)
		if (!write_kind(s, st, k))
			goto fail;
	/* The turn's new events and audit entries, in order. */
	if (!egs__sqlite_put_rows(s->put_event, st->new_events.items, st->new_events.len, &s->last_rc) ||
	    !egs__sqlite_put_rows(s->put_audit, st->new_audit.items, st->new_audit.len, &s->last_rc))
		goto fail;
	if (injected_failure(s) || !step_done(s, s->commit, "COMMIT", NULL, NULL))
		goto fail;
	return EGS_OK;
fail:;
	int why = s->last_rc & 0xff;
	/* SQLite may have rolled back already (e.g. after an I/O error); otherwise do it here. */
	if (!sqlite3_get_autocommit(s->db))
		step_done(s, s->rollback, "ROLLBACK", NULL, NULL);
	return why == SQLITE_FULL ? EGS_ERR_STORAGE_FULL : EGS_ERR_STORE;
}

/* ---- meta and events ---- */

static enum egs_err sqlite_meta_get(struct sqlite_store *s, const char *key, char **value)
{
	enum egs_err err = EGS_ERR_STORE;
	*value = NULL;
	if (sqlite3_bind_text(s->meta_get, 1, key, -1, SQLITE_STATIC) != SQLITE_OK)
		goto out;
	int rc = sqlite3_step(s->meta_get);
	if (rc == SQLITE_ROW)
		*value = egs_strdup((const char *)sqlite3_column_text(s->meta_get, 0));
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		err = EGS_OK;
out:
	if (err)
		fprintf(stderr, "store: meta get %s: %s\n", key, sqlite3_errmsg(s->db));
	sqlite3_reset(s->meta_get);
	return err;
}

static enum egs_err sqlite_meta_set(struct sqlite_store *s, const char *key, const char *value)
{
	/* Outside BEGIN..COMMIT a single statement is its own (durable) transaction. */
	if (sqlite3_bind_text(s->meta_set, 1, key, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_text(s->meta_set, 2, value, -1, SQLITE_STATIC) != SQLITE_OK) {
		fprintf(stderr, "store: meta set %s: %s\n", key, sqlite3_errmsg(s->db));
		return EGS_ERR_STORE;
	}
	return step_done(s, s->meta_set, "set", "meta", key) ? EGS_OK : EGS_ERR_STORE;
}

static enum egs_err sqlite_prune_events_below(struct sqlite_store *s, int64_t before, int64_t below_id, int64_t *deleted)
{
	int64_t n;
	if (!step_done(s, s->begin, "BEGIN", NULL, NULL))
		goto fail;
	if (sqlite3_bind_int64(s->prune_mark, 1, before) != SQLITE_OK ||
	    sqlite3_bind_int64(s->prune_mark, 2, below_id) != SQLITE_OK ||
	    !step_done(s, s->prune_mark, "prune events (id floor)", NULL, NULL))
		goto fail;
	if (sqlite3_bind_int64(s->prune, 1, before) != SQLITE_OK || sqlite3_bind_int64(s->prune, 2, below_id) != SQLITE_OK ||
	    !step_done(s, s->prune, "prune events", NULL, NULL))
		goto fail;
	n = sqlite3_changes64(s->db);
	if (!step_done(s, s->commit, "COMMIT", NULL, NULL))
		goto fail;
	if (deleted)
		*deleted = n;
	return EGS_OK;
fail:
	if (!sqlite3_get_autocommit(s->db))
		step_done(s, s->rollback, "ROLLBACK", NULL, NULL);
	return EGS_ERR_STORE;
}

/* Finished GPRs that left memory (store.h).  Prepared per call: these reads are rare next to
 * commits, and the query's shape depends on the filter. */
static enum egs_err sqlite_gprs_find(struct sqlite_store *s, const struct egs_gpr_find *f, egs_store_gpr_fn each,
				     void *ctx)
{
	char sql[1024];
	const char *vals[4];
	sqlite3_stmt *stmt = NULL;
	enum egs_err err = EGS_ERR_STORE;
	int rc, np = egs_rows_find_sql(f, egs_rows_kinds[EGS_KIND_GPR].cols, '?', sql, sizeof(sql), vals);
	if (np < 0 || !prepare(s, sql, &stmt))
		goto out;
	for (int i = 0; i < np; i++)
		sqlite3_bind_text(stmt, i + 1, vals[i], -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		struct egs_row_reader r = { .src = &egs__sqlite_row_source, .res = stmt };
		struct egs_gpr *g = egs_rows_read_obj(&egs_rows_kinds[EGS_KIND_GPR], &r);
		if (!g)
			goto out;
		each(ctx, g);
	}
	if (rc != SQLITE_DONE)
		fprintf(stderr, "store: reading gprs: %s\n", sqlite3_errmsg(s->db));
	else
		err = EGS_OK;
out:
	sqlite3_finalize(stmt);
	return err;
}

/* ---- the ops table (store_impl.h): each handle store.c gets is a struct sqlite_store ---- */

static struct sqlite_store *of(struct egs_store *base)
{
	return (struct sqlite_store *)base;
}

static void op_free(struct egs_store *b) { sqlite_free(of(b)); }
static enum egs_err op_load(struct egs_store *b, struct egs_state *st) { return sqlite_load(of(b), st); }
static enum egs_err op_commit(struct egs_store *b, struct egs_state *st) { return sqlite_commit_changes(of(b), st); }
static enum egs_err op_meta_get(struct egs_store *b, const char *k, char **v) { return sqlite_meta_get(of(b), k, v); }
static enum egs_err op_meta_set(struct egs_store *b, const char *k, const char *v) { return sqlite_meta_set(of(b), k, v); }
static enum egs_err op_prune(struct egs_store *b, int64_t before, int64_t below_id, int64_t *deleted)
{
	return sqlite_prune_events_below(of(b), before, below_id, deleted);
}

static enum egs_err op_audit_list(struct egs_store *b, const struct egs_audit_filter *f, struct egs_vec *out)
{
	return egs__sqlite_audit_list(of(b)->db, f, out);
}
static enum egs_err op_audit_prune(struct egs_store *b, int64_t before, int64_t *deleted)
{
	return egs__sqlite_audit_prune(of(b)->db, before, deleted);
}
static enum egs_err op_audit_last(struct egs_store *b, int64_t *out) { return egs__sqlite_audit_last_id(of(b)->db, out); }

static enum egs_err op_gprs_find(struct egs_store *b, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx)
{
	return sqlite_gprs_find(of(b), f, each, ctx);
}

static void op_sync_request(struct egs_store *b, uint64_t upto) { egs__sqlite_sync_request(of(b)->sync, upto); }
static int op_sync_fd(struct egs_store *b) { return egs__sqlite_sync_fd(of(b)->sync); }
static enum egs_err op_sync_poll(struct egs_store *b, uint64_t *d) { return egs__sqlite_sync_poll(of(b)->sync, d); }
static enum egs_err op_sync_wait(struct egs_store *b, uint64_t upto, uint64_t *d)
{
	return egs__sqlite_sync_wait(of(b)->sync, upto, d);
}

static bool op_commit_held(struct egs_store *b) { return egs__sqlite_sync_held(of(b)->sync); }
static void op_stats(struct egs_store *b, struct egs_store_stats *out) { egs__sqlite_sync_stats(of(b)->sync, out); }

static const struct egs_store_ops sqlite_ops = {
	.name = "sqlite",
	.free = op_free,
	.load = op_load,
	.commit_changes = op_commit,
	.meta_get = op_meta_get,
	.meta_set = op_meta_set,
	.prune_events_below = op_prune,
	.audit_list = op_audit_list,
	.audit_prune = op_audit_prune,
	.audit_last_id = op_audit_last,
	.gprs_find = op_gprs_find,
	.sync_request = op_sync_request,
	.sync_fd = op_sync_fd,
	.sync_poll = op_sync_poll,
	.sync_wait = op_sync_wait,
	.commit_held = op_commit_held,
	.stats = op_stats,
};
