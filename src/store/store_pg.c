/*
 * store_pg.c: the PostgreSQL implementation of store.h over libpq (docs/internals/store.md).
 *
 * One connection, used by egsd's loop thread only.  The tables, columns and migrations are
 * SQLite's with PostgreSQL types (BIGINT, DOUBLE PRECISION, BYTEA); the schema version is the
 * row schema_version of the meta table, and each migration runs in its own transaction under a
 * transaction-scoped advisory lock, so two egsd starting on a new database do not both run one.
 *
 * Group commit: a loop turn's changes go in one transaction, sent in pipeline mode: BEGIN, per
 * table one prepared delete, one prepared plain insert of the rows known new and one prepared upsert
 * of the others, each carrying all of the turn's rows of its kind as binary array parameters
 * (store_pg_batch.c), the same for the turn's events and its audit entries, COMMIT, Sync.  So a turn costs one round trip and a handful of statements however many
 * rows it writes (the server's cost per statement was most of its cost per create).  The session
 * runs with synchronous_commit = on: COMMIT returns only once the WAL is flushed on the server (and on
 * synchronous standbys, if the server is configured with them), which is what lets egsd answer
 * 2xx after egs_store_commit_changes().
 *
 * A retried turn sends every row as an upsert, which makes each statement idempotent (whole-row
 * upserts, deletes by key), so when the connection breaks, even during COMMIT where the outcome is
 * unknown, the turn is simply sent again on a new connection: reconnect_and_retry() tries for about RETRY_FOR_S seconds before
 * the commit fails.
 */
#include "store/store_impl.h"
#include "store/store_audit.h"
#include "store/store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NMIGRATIONS egs__pg_nmigrations
#define META_EVENT_FLOOR "store.event_id_floor"
#define META_SCHEMA "schema_version"
#define MIGRATION_LOCK "4716501726" /* an arbitrary advisory lock key: egsd's migrations */
#define PIPE_MAX 256                /* statements in flight before their results are read */
#define RETRY_FOR_S 30              /* how long a commit keeps reconnecting (a fast shutdown's checkpoint on a busy disk took over 15 s in tests) */
#define LOAD_BATCH 10000            /* rows a load fetches at a time */
#define CONNECT_TIMEOUT "5"         /* seconds, unless the URL's connect_timeout says otherwise */


static const struct egs_store_ops pg_ops;

const char *egs__pg_errmsg(struct pg_store *s)
{
	const char *m = PQerrorMessage(s->conn);
	return m && *m ? m : "unknown error\n";
}

PGresult *egs__pg_result(struct pg_store *s, bool sent, const char *what, ExecStatusType want)
{
	PGresult *res = NULL, *next;
	int64_t deadline = egs__pg_deadline(s);
	while (sent && (next = egs__pg_wait(s, deadline))) { /* the last result is the one that counts */
		PQclear(res);
		res = next;
	}
	if (sent && !s->timed_out && PQresultStatus(res) == want)
		return res;
	fprintf(stderr, "store: %.60s: %s", what, res && !s->timed_out ? PQresultErrorMessage(res) : egs__pg_errmsg(s));
	PQclear(res);
	return NULL;
}

PGresult *egs__pg_run(struct pg_store *s, const char *sql, bool want_rows)
{
	bool sent = s->conn && PQsendQuery(s->conn, sql) == 1;
	return egs__pg_result(s, sent, sql, want_rows ? PGRES_TUPLES_OK : PGRES_COMMAND_OK);
}

bool egs__pg_exec(struct pg_store *s, const char *sql)
{
	PGresult *res = egs__pg_run(s, sql, false);
	PQclear(res);
	return res != NULL;
}

/* Reads the schema version inside the migration transaction (0: an empty database). */
static bool schema_version(struct pg_store *s, int *out)
{
	PGresult *res = egs__pg_run(s, "SELECT to_regclass('meta') IS NOT NULL", true);
	bool ok = false;
	*out = 0;
	if (!res)
		return false;
	bool have_meta = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!have_meta)
		return true;
	res = egs__pg_run(s, "SELECT value FROM meta WHERE key = '" META_SCHEMA "'", true);
	if (res && PQntuples(res) == 1) {
		*out = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
		ok = true;
	} else if (res) {
		fprintf(stderr, "store: the database has a meta table but no schema_version; not egsd's?\n");
	}
	PQclear(res);
	return ok;
}

/* Applies the missing migrations, one transaction each, under an advisory lock held to the end of
 * each transaction.  A database newer than this build is refused before anything is written. */
static enum egs_err migrate(struct pg_store *s)
{
	for (;;) {
		int v;
		char sql[160];
		PGresult *lock = NULL;
		if (!egs__pg_exec(s, "BEGIN") || !(lock = egs__pg_run(s, "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ")", true)))
			goto fail;
		PQclear(lock);
		if (!schema_version(s, &v))
			goto fail;
		if (v < 0 || v > NMIGRATIONS) {
			fprintf(stderr,
				"store: the database has schema version %d but this build knows only up to %d; "
				"refusing to open it (run a newer egsd)\n",
				v, NMIGRATIONS);
			goto fail;
		}
		if (v == NMIGRATIONS)
			return egs__pg_exec(s, "COMMIT") ? EGS_OK : EGS_ERR_STORE;
		snprintf(sql, sizeof(sql),
			 "INSERT INTO meta(key, value) VALUES('" META_SCHEMA "', '%d') "
			 "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
			 v + 1);
		if (!egs__pg_exec(s, egs__pg_migrations[v]) || !egs__pg_exec(s, sql) || !egs__pg_exec(s, "COMMIT")) {
			fprintf(stderr, "store: migration to schema version %d failed\n", v + 1);
			goto fail;
		}
	}
fail:
	if (PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		egs__pg_exec(s, "ROLLBACK");
	return EGS_ERR_STORE;
}

bool egs__pg_prepare(struct pg_store *s, const char *name, const char *sql)
{
	bool sent = s->conn && PQsendPrepare(s->conn, name, sql, 0, NULL) == 1;
	PGresult *res = egs__pg_result(s, sent, sql, PGRES_COMMAND_OK);
	PQclear(res);
	return res != NULL;
}

/* Prepared statement names: put<kind>, del<kind>, ev, au (store_pg_batch.c), chg
 * (store_pg_follow.c), mget, mset, pmark, prune, turn. */
static bool prepare_all(struct pg_store *s)
{
	return egs__pg_prepare_batches(s) && egs__pg_prepare_follow(s) &&
	       egs__pg_prepare(s, "mget", "SELECT value FROM meta WHERE key = $1") &&
	       egs__pg_prepare(s, "mset",
			       "INSERT INTO meta(key, value) VALUES($1, $2) "
			       "ON CONFLICT(key) DO UPDATE SET value = excluded.value") &&
	       egs__pg_prepare(s, "pmark",
			       "INSERT INTO meta(key, value) SELECT '" META_EVENT_FLOOR "', m::text FROM "
			       "(SELECT MAX(id) AS m FROM events WHERE time < $1 OR id < $2) x WHERE m IS NOT NULL "
			       "ON CONFLICT(key) DO UPDATE SET "
			       "value = GREATEST(meta.value::bigint, excluded.value::bigint)::text") &&
	       egs__pg_prepare(s, "prune", "DELETE FROM events WHERE time < $1 OR id < $2") &&
	       egs__pg_prepare(s, "turn",
			       "UPDATE meta SET value = CASE key WHEN 'leader.turn' THEN (value::bigint + 1)::text "
			       "ELSE (" EGS_PG_DB_NOW_MS " + " EGS_PG_STR(EGS_PG_LEASE_MS) ")::text END "
			       "WHERE key IN ('leader.turn', 'leader.lease')");
}

static void quiet_notices(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* NOTICEs (e.g. "relation already exists, skipping") are not errors */
}

/* Connects (or reconnects) and readies the session: durable commits, prepared statements.  A
 * server that does not answer fails the connection after CONNECT_TIMEOUT seconds unless the URL
 * says otherwise (its connect_timeout comes later, so it wins). */
static bool connect_session(struct pg_store *s)
{
	const char *const keys[] = { "connect_timeout", "dbname", NULL };
	const char *const vals[] = { CONNECT_TIMEOUT, s->url, NULL };
	PQfinish(s->conn);
	s->timed_out = false;
	s->conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(s->conn) != CONNECTION_OK)
		return false; /* the caller reports egs__pg_errmsg(s) */
	PQsetNoticeProcessor(s->conn, quiet_notices, NULL);
	return egs__pg_exec(s, "SET synchronous_commit = on") && egs__pg_exec(s, "SET client_min_messages = warning");
}

static void pg_free(struct pg_store *s)
{
	if (!s)
		return;
	if (!egs__pg_broken(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		egs__pg_exec(s, "ROLLBACK");
	PQfinish(s->conn);
	free(s->url);
	free(s->fail_path);
	if (s->batch)
		egs__pg_batch_cleanup(s->batch);
	free(s->batch);
	free(s->types);
	free(s);
}

/* egs_store_open_pg; with why, a failure to connect is not logged but written to why (one line),
 * for a caller that retries and logs its tries itself (egs_store_open_pg_quiet). */
static enum egs_err open_pg(const char *url, struct egs_store **out, char *why, size_t whylen)
{
	struct pg_store *s = egs_calloc(1, sizeof(*s));
	enum egs_err err = EGS_ERR_STORE;
	*out = NULL;
	s->base.ops = &pg_ops;
	s->url = egs_strdup(url);
	s->batch = egs_calloc(1, sizeof(*s->batch));
	s->types = egs_calloc((size_t)egs__pg_nkinds + 2, sizeof(*s->types));
	for (int i = 0; i < egs__pg_nkinds; i++)
		EGS_ASSERT(egs__pg_kinds[i].table); /* every object kind has its PostgreSQL row codec */
	if (!connect_session(s)) {
		if (why) {
			egs_strlcpy(why, egs__pg_errmsg(s), whylen);
			pg_free(s);
			return EGS_ERR_STORE;
		}
		fprintf(stderr, "store: cannot connect to PostgreSQL: %s", egs__pg_errmsg(s));
		goto out;
	}
	if ((err = migrate(s)) != EGS_OK)
		goto out;
	err = prepare_all(s) ? EGS_OK : EGS_ERR_STORE;
	const char *fail = getenv("EGS_STORE_FAIL_IF_EXISTS");
	s->fail_path = fail && *fail ? egs_strdup(fail) : NULL;
out:
	if (err) {
		fprintf(stderr, "store: cannot use the PostgreSQL database\n"); /* the URL may hold a password */
		if (why)
			egs_strlcpy(why, "the database's schema could not be migrated or prepared", whylen);
		pg_free(s);
		return err ? err : EGS_ERR_STORE;
	}
	*out = &s->base;
	return EGS_OK;
}

enum egs_err egs_store_open_pg(const char *url, struct egs_store **out)
{
	return open_pg(url, out, NULL, 0);
}

enum egs_err egs_store_open_pg_quiet(const char *url, struct egs_store **out, char *why, size_t whylen)
{
	return open_pg(url, out, why, whylen);
}

/* After a broken connection: reconnects and prepares again, retrying for up to RETRY_FOR_S
 * seconds.  Returns whether the session is usable. */
static bool reconnect(struct pg_store *s)
{
	struct timespec pause = { 0, 200 * 1000 * 1000 };
	time_t until = time(NULL) + RETRY_FOR_S;
	int tries = 0;
	if (s->deposed)
		return false; /* stepped down (the lease ran out) or deposed: never again */
	fprintf(stderr, "store: the PostgreSQL connection is broken; reconnecting for up to %d s\n", RETRY_FOR_S);
	do {
		tries++;
		egs__pg_reconnecting(s);
		if (connect_session(s) && prepare_all(s)) {
			fprintf(stderr, "store: reconnected to PostgreSQL (try %d)\n", tries);
			return !s->leader || egs__pg_relead(s);
		}
		if (s->deposed)
			return false;
		nanosleep(&pause, NULL);
	} while (time(NULL) < until);
	fprintf(stderr, "store: PostgreSQL unreachable after %d tries: %s", tries, egs__pg_errmsg(s));
	return false;
}

bool egs__pg_broken(struct pg_store *s)
{
	return !s->conn || s->timed_out || PQstatus(s->conn) != CONNECTION_OK;
}

/* ---- load ---- */

/* Reads kind k's rows through a cursor, LOAD_BATCH rows a fetch: a result of a million rows held
 * whole while the model is built was most of a large load's peak memory. */
static enum egs_err load_kind(struct pg_store *s, struct egs_state *st, const struct egs_pg_kind *k)
{
	char sql[2048], query[1800];
	if (k == &egs__pg_kinds[EGS_KIND_GPR]) /* finished GPRs older than the retention: load_aged */
		egs_rows_load_kept_sql(st, k->cols, k->order, query, sizeof(query));
	else
		snprintf(query, sizeof(query), "SELECT %s FROM %s ORDER BY %s", k->cols, k->table, k->order);
	snprintf(sql, sizeof(sql), "DECLARE load_rows NO SCROLL CURSOR FOR %s", query);
	if (!egs__pg_exec(s, sql))
		return EGS_ERR_STORE;
	for (;;) {
		PGresult *res = egs__pg_run(s, "FETCH " EGS_PG_STR(LOAD_BATCH) " FROM load_rows", true);
		int n = res ? PQntuples(res) : 0;
		for (int row = 0; res && row < n; row++) {
			struct egs_row_reader r = { .src = &egs__pg_row_source, .res = res, .row = row };
			if (!egs_rows_load_obj(k, &r, st)) {
				PQclear(res);
				res = NULL;
			}
		}
		PQclear(res);
		if (!res)
			return EGS_ERR_STORE; /* the caller rolls the transaction back, the cursor with it */
		if (n < LOAD_BATCH)
			break;
	}
	return egs__pg_exec(s, "CLOSE load_rows") ? EGS_OK : EGS_ERR_STORE;
}

/* Counts the finished GPRs a load leaves in the store (core/aging.h): summed by the server, one
 * row per workspace and state, so that a million of them cost one scan and a few rows on the wire
 * (a load must end within the leader's lease). */
static enum egs_err load_aged(struct pg_store *s, struct egs_state *st)
{
	char sql[1024];
	const char *v[EGS_ROWS_AGED_SUM_COLS];
	enum egs_err err = EGS_OK;
	egs_rows_aged_sum_sql(st, sql, sizeof(sql));
	PGresult *res = egs__pg_run(s, sql, true);
	if (!res)
		return EGS_ERR_STORE;
	for (int row = 0; row < PQntuples(res) && !err; row++) {
		for (int i = 0; i < EGS_ROWS_AGED_SUM_COLS; i++)
			v[i] = PQgetisnull(res, row, i) ? NULL : PQgetvalue(res, row, i);
		if (!egs_rows_count_aged_sum(st, v)) {
			fprintf(stderr, "store: gprs: the finished rows of workspace %s are not what egsd writes\n",
				v[0] ? v[0] : "");
			err = EGS_ERR_STORE;
		}
	}
	PQclear(res);
	return err;
}

/* Loads the newest cfg.event_retention events, oldest first, and moves next_event_id past every
 * id ever stored (pruned ones included). */
static enum egs_err load_events(struct pg_store *s, struct egs_state *st)
{
	char sql[512];
	enum egs_err err = EGS_ERR_STORE;
	snprintf(sql, sizeof(sql),
		 "SELECT * FROM (SELECT " EGS_PG_EVENT_COLS " FROM events ORDER BY id DESC LIMIT %zu) e ORDER BY id",
		 (size_t)st->cfg.event_retention);
	PGresult *res = egs__pg_run(s, sql, true);
	if (!res)
		return EGS_ERR_STORE;
	for (int row = 0; row < PQntuples(res); row++) {
		struct egs_row_reader r = { .src = &egs__pg_row_source, .res = res, .row = row };
		if (!egs_rows_load_event(&r, st))
			goto out;
	}
	PQclear(res);
	res = egs__pg_run(s,
		  "SELECT GREATEST((SELECT COALESCE(MAX(id), 0) FROM events),"
		  " (SELECT COALESCE(MAX(value::bigint), 0) FROM meta WHERE key = '" META_EVENT_FLOOR "'))",
		  true);
	if (!res || PQntuples(res) != 1)
		goto out;
	int64_t max = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (max >= st->next_event_id)
		st->next_event_id = max + 1;
	err = EGS_OK;
out:
	PQclear(res);
	return err;
}

static enum egs_err pg_load(struct pg_store *s, struct egs_state *st)
{
	enum egs_err err = EGS_ERR_STORE;
	int64_t turn = 0;
	s->seq_floor = 0; /* which GPRs are stored: known again after the next commit */
	/* One snapshot for every table. */
	s->loading = true;
	/* The cursors of load_kind are read to the end: plan them for the whole result, not its start.  No
	 * JIT: compiling the plans of a large table's queries cost 0.06-0.2 s a load (EXPLAIN ANALYZE, 1M GPRs),
	 * more than it saved. */
	if (!egs__pg_exec(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL cursor_tuple_fraction = 1;"
			     " SET LOCAL jit = off")) {
		s->loading = false;
		return EGS_ERR_STORE;
	}
	for (int i = 0; i < egs__pg_nkinds; i++) {
		err = load_kind(s, st, &egs__pg_kinds[i]);
		if (!err && i == EGS_KIND_GPR && st->aged_before)
			err = load_aged(s, st);
		if (err)
			goto out;
	}
	err = load_events(s, st);
	if (!err)
		err = egs__pg_read_turn(s, &turn) ? EGS_OK : EGS_ERR_STORE;
out:
	if (!egs__pg_exec(s, err ? "ROLLBACK" : "COMMIT"))
		err = EGS_ERR_STORE;
	s->loading = false;
	if (!err) { /* the model the caller swaps in is this snapshot (a failed load leaves the old one) */
		s->loaded_turn = turn;
		s->loaded = true;
	}
	return err;
}

/* ---- commit ---- */

/* TURN_CONFLICT: a plain INSERT met a stored key (egs__pg_fresh guessed wrong): send it again as upserts. */
enum turn { TURN_OK, TURN_FAILED, TURN_BROKEN, TURN_CONFLICT };

/* The statements of a turn in flight: what each one writes, for the error line. */
struct pipe {
	struct pg_store *s;
	int pending;
	const char *verb[PIPE_MAX];  /* "put", "delete", "BEGIN", "COMMIT", ..: string literals */
	const char *table[PIPE_MAX]; /* the table it writes (static), or NULL */
	int rows[PIPE_MAX];          /* rows it writes (0: a statement without rows) */
	bool failed;
};

/* A failure that means the connection, not the statement: worth a new connection and a retry. */
static bool connection_error(struct pg_store *s, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	return egs__pg_broken(s) || (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0));
}

static void report(struct pipe *p, int i, const PGresult *res)
{
	const char *msg = res ? PQresultErrorMessage(res) : egs__pg_errmsg(p->s);
	if (!*msg)
		msg = "statement skipped\n";
	if (p->rows[i])
		fprintf(stderr, "store: %s %s (%d rows): %s", p->verb[i], p->table[i], p->rows[i], msg);
	else
		fprintf(stderr, "store: %s%s%s: %s", p->verb[i], p->table[i] ? " " : "", p->table[i] ? p->table[i] : "",
			msg);
}

/* Reads the results of the statements in flight; the first failure is reported. */
static enum turn collect(struct pipe *p, bool synced)
{
	PGconn *c = p->s->conn;
	int64_t deadline = egs__pg_deadline(p->s); /* a leader's: the end of its lease */
	enum turn t = TURN_OK;
	if (!synced && (PQsendFlushRequest(c) != 1 || PQflush(c) != 0))
		return TURN_BROKEN;
	for (int i = 0; i < p->pending; i++) {
		PGresult *res = egs__pg_wait(p->s, deadline);
		ExecStatusType st = PQresultStatus(res);
		if (!res || (st != PGRES_COMMAND_OK && t == TURN_OK)) {
			const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
			p->s->full = state && strcmp(state, "53100") == 0; /* disk_full */
			t = connection_error(p->s, res) ? TURN_BROKEN : TURN_FAILED;
			if (t == TURN_FAILED && state && strcmp(state, "23505") == 0 && strcmp(p->verb[i], "insert") == 0)
				t = TURN_CONFLICT; /* unique_violation: not worth a line, the turn goes again */
			else
				report(p, i, res);
		} else if (st == PGRES_COMMAND_OK && strcmp(p->verb[i], "COMMIT") == 0 &&
			   strcmp(PQcmdStatus(res), "COMMIT") != 0) {
			fprintf(stderr, "store: COMMIT answered %s\n", PQcmdStatus(res));
			t = TURN_FAILED;
		}
		PQclear(res);
		if (!res || t == TURN_BROKEN)
			return TURN_BROKEN;
		PQclear(egs__pg_wait(p->s, deadline)); /* the NULL that ends each statement's results */
	}
	p->pending = 0;
	if (synced && (t == TURN_OK || t == TURN_CONFLICT)) {
		PGresult *res = egs__pg_wait(p->s, deadline);
		if (PQresultStatus(res) != PGRES_PIPELINE_SYNC)
			t = connection_error(p->s, res) ? TURN_BROKEN : TURN_FAILED;
		else if (t == TURN_CONFLICT && PQexitPipelineMode(p->s->conn) != 1)
			t = TURN_BROKEN; /* else the session is idle again, the transaction rolled back */
		PQclear(res);
	}
	return t;
}

/* What a statement of the turn writes, for its error line (every string static). */
struct what {
	const char *verb, *table;
	int rows;
};

/* Queues one statement: prepared stmt with n parameters v (borrowed: libpq copies them; text, or
 * as lengths len and formats fmt say when they are not NULL), or (v NULL) the SQL stmt alone,
 * without parameters. */
static enum turn send_one(struct pipe *p, const char *stmt, int n, const char *const *v, const int *len,
			  const int *fmt, struct what w)
{
	int ok = v ? PQsendQueryPrepared(p->s->conn, stmt, n, v, len, fmt, 0)
		   : PQsendQueryParams(p->s->conn, stmt, 0, NULL, NULL, NULL, NULL, 0);
	p->verb[p->pending] = w.verb;
	p->table[p->pending] = w.table;
	p->rows[p->pending] = w.rows;
	p->pending++;
	if (!ok) {
		report(p, p->pending - 1, NULL);
		return egs__pg_broken(p->s) ? TURN_BROKEN : TURN_FAILED;
	}
	return p->pending == PIPE_MAX ? collect(p, false) : TURN_OK;
}

/* Sends the rows gathered in the store's batch as statement stmt (nothing when there are none),
 * and empties the batch for more rows of the same shape. */
static enum turn send_batch(struct pipe *p, const char *stmt, const char *verb, const char *table)
{
	struct egs_pg_batch *b = p->s->batch;
	enum turn t = TURN_OK;
	if (b->nrows > 0)
		t = send_one(p, stmt, b->ncols, egs__pg_batch_finish(b), b->lengths, b->formats,
			     (struct what){ verb, table, b->nrows });
	egs__pg_batch_start(b, b->ncols, b->types);
	return t;
}

/* Which statement writes change c: 0 delete, 1 plain insert (a new row), 2 upsert. */
static int mode_of(const struct pg_store *s, const struct egs_change *c)
{
	return c->deleted ? 0 : egs__pg_fresh(s, c) ? 1 : 2;
}

/* One statement (or one per EGS_PG_BATCH_ROWS rows) deleting, one inserting the new rows and one
 * upserting the others, of kind k among the turn's last changes refs[0..n). */
static enum turn send_kind(struct pipe *p, int k, const struct egs_pg_ref *refs, size_t n)
{
	static const char *const prefix[] = { "del", "ins", "put" }, *const verb[] = { "delete", "insert", "put" };
	const struct egs_pg_kind *kind = &egs__pg_kinds[k];
	struct egs_pg_batch *b = p->s->batch;
	struct egs_row_binder rb = egs__pg_batch_binder(b);
	char stmt[16];
	enum turn t = TURN_OK;
	for (int m = 0; m < 3 && t == TURN_OK; m++) {
		snprintf(stmt, sizeof(stmt), "%s%d", prefix[m], k);
		egs__pg_batch_start(b, m == 0 ? 1 : egs__pg_ncols(kind->cols), p->s->types[k]);
		for (size_t i = 0; i < n && t == TURN_OK; i++) {
			if (mode_of(p->s, refs[i].c) != m)
				continue;
			if (m == 0) {
				egs__pg_batch_key(b, refs[i].key);
			} else {
				egs__pg_batch_row_begin(b);
				kind->bind(&rb, refs[i].c->obj);
				if (!egs__pg_batch_row_end(b)) {
					fprintf(stderr, "store: put %s '%s': %s\n", kind->table, refs[i].key, b->why);
					return TURN_FAILED;
				}
			}
			if (b->nrows == EGS_PG_BATCH_ROWS)
				t = send_batch(p, stmt, verb[m], kind->table);
		}
		if (t == TURN_OK)
			t = send_batch(p, stmt, verb[m], kind->table);
	}
	return t;
}

/* The turn's changes: per kind, its deletions and its upserts, the last change of each object. */
static enum turn send_changes(struct pipe *p, const struct egs_state *st)
{
	struct egs_pg_ref *refs = egs_calloc(st->changes.len + 1, sizeof(*refs));
	size_t n = egs__pg_turn_rows(st, refs), from = 0;
	enum turn t = TURN_OK;
	while (from < n && t == TURN_OK) {
		size_t to = from;
		while (to < n && refs[to].kind == refs[from].kind)
			to++;
		t = send_kind(p, refs[from].kind, refs + from, to - from);
		from = to;
	}
	free(refs);
	return t;
}

/* The turn's events: new ones with one plain insert, repeats of stored ones (and all of them when
 * s->upsert_only) with one upsert (or one statement per EGS_PG_BATCH_ROWS rows). */
static enum turn send_events(struct pipe *p, const struct egs_state *st)
{
	struct egs_pg_batch *b = p->s->batch;
	struct egs_row_binder rb = egs__pg_batch_binder(b);
	enum turn t = TURN_OK;
	for (int fresh = 1; fresh >= 0 && t == TURN_OK; fresh--) {
		egs__pg_batch_start(b, egs__pg_ncols(EGS_PG_EVENT_COLS), p->s->types[EGS_PG_EVENTS]);
		for (size_t i = 0; t == TURN_OK && i < st->new_events.len; i++) {
			const struct egs_event *ev = st->new_events.items[i];
			if ((!ev->listed && !p->s->upsert_only) != (fresh == 1))
				continue;
			egs__pg_batch_row_begin(b);
			egs_rows_bind_event(&rb, ev);
			egs__pg_batch_row_end(b); /* text and numbers only: nothing fails */
			if (b->nrows == EGS_PG_BATCH_ROWS)
				t = send_batch(p, fresh ? "evi" : "ev", fresh ? "insert" : "put", "events");
		}
		if (t == TURN_OK)
			t = send_batch(p, fresh ? "evi" : "ev", fresh ? "insert" : "put", "events");
	}
	return t;
}

/* The turn's events and audit entries (each audit entry is new: plain inserts, unless
 * s->upsert_only). */
static enum turn send_log(struct pipe *p, const struct egs_state *st)
{
	struct egs_pg_batch *b = p->s->batch;
	struct egs_row_binder rb = egs__pg_batch_binder(b);
	bool fresh = !p->s->upsert_only;
	enum turn t = send_events(p, st);
	egs__pg_batch_start(b, egs__pg_ncols(EGS_AUDIT_COLS), p->s->types[EGS_PG_AUDIT]);
	for (size_t i = 0; t == TURN_OK && i < st->new_audit.len; i++) {
		egs__pg_batch_row_begin(b);
		egs_rows_bind_audit(&rb, st->new_audit.items[i]);
		egs__pg_batch_row_end(b);
		if (b->nrows == EGS_PG_BATCH_ROWS || i + 1 == st->new_audit.len)
			t = send_batch(p, fresh ? "aui" : "au", fresh ? "insert" : "put", "audit");
	}
	return t;
}

/* Sends the whole turn as one pipelined transaction and reads every result; with rollback (the
 * tests' injected failure) the rows are written and the transaction rolled back instead. */
static enum turn send_turn(struct pg_store *s, struct egs_state *st, bool rollback)
{
	struct pipe *p = egs_calloc(1, sizeof(*p));
	enum turn t = TURN_BROKEN;
	p->s = s;
	if (PQenterPipelineMode(s->conn) != 1)
		goto out;
	t = send_one(p, "BEGIN", 0, NULL, NULL, NULL, (struct what){ "BEGIN", NULL, 0 });
	if (t == TURN_OK)
		t = send_changes(p, st);
	if (t == TURN_OK)
		t = send_log(p, st);
	if (t == TURN_OK && s->leader && !rollback) { /* followers see the turn (docs/internals/store.md) */
		static const char *const none[1] = { NULL };
		t = send_one(p, "turn", 0, none, NULL, NULL, (struct what){ "update", "meta", 0 });
		if (t == TURN_OK) { /* and what it wrote (store_pg_follow.c); libpq copies the parameters */
			struct egs_pg_changes chg = { 0 };
			egs__pg_changes_build(&chg, st);
			t = send_one(p, "chg", 2, chg.params, NULL, NULL, (struct what){ "put", "changes", 1 });
			egs__pg_changes_free(&chg);
		}
	}
	if (t == TURN_OK) {
		const char *end = rollback ? "ROLLBACK" : "COMMIT";
		t = send_one(p, end, 0, NULL, NULL, NULL, (struct what){ end, NULL, 0 });
	}
	if (t == TURN_OK)
		t = PQpipelineSync(s->conn) == 1 ? collect(p, true) : TURN_BROKEN;
	if (t == TURN_OK && PQexitPipelineMode(s->conn) != 1)
		t = TURN_BROKEN;
out:
	free(p);
	return t;
}

/* Drops the session: the server rolls back whatever it had open, and the next call reconnects. */
static void drop(struct pg_store *s)
{
	PQfinish(s->conn);
	s->conn = NULL;
}

bool egs__pg_ready(struct pg_store *s)
{
	return !s->deposed && ((s->conn && !egs__pg_broken(s)) || reconnect(s));
}

/* Ends a commit: after a success the GPRs submitted from now on are new rows (egs__pg_fresh); after
 * a failure nothing is known. */
static enum egs_err commit_done(struct pg_store *s, const struct egs_state *st, enum egs_err err)
{
	s->upsert_only = false;
	s->seq_floor = err ? 0 : st->next_seq;
	return err;
}

static enum egs_err pg_commit_changes(struct pg_store *s, struct egs_state *st)
{
	/* A broken connection may break again while the server restarts; each try is the whole turn,
	 * and a retry sends every row as an upsert, so trying again after an unknown COMMIT outcome
	 * is safe. */
	bool inject = s->fail_path && access(s->fail_path, F_OK) == 0;
	for (int attempt = 0; attempt < 5; attempt++) {
		s->upsert_only = attempt > 0;
		if (!egs__pg_ready(s))
			return commit_done(s, st, EGS_ERR_STORE);
		s->full = false;
		/* A lease written a second ago or more (an idle or held-up loop) is renewed first, so that
		 * the turn may wait 3-4 s for its results before its leader must step down. */
		if (egs__pg_lease_due(s) && !egs__pg_renew_now(s) && s->deposed)
			return commit_done(s, st, EGS_ERR_STORE);
		int64_t t0 = egs__pg_mono_us();
		enum turn t = send_turn(s, st, inject);
		if (t == TURN_OK && !egs__pg_within_lease(s))
			t = TURN_FAILED; /* committed, perhaps, but too late to say so: stepped down */
		if (t == TURN_OK && s->leader && !inject)
			egs__pg_lease_sent(s, t0); /* the turn rewrote the lease */
		if (t == TURN_OK)
			return commit_done(s, st, inject ? EGS_ERR_STORAGE_FULL : EGS_OK);
		if (t == TURN_CONFLICT) /* read to its Sync: the failed transaction block is still open */
			s->resent++;
		if (t != TURN_CONFLICT || PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF || !egs__pg_exec(s, "ROLLBACK"))
			drop(s);
		if (t == TURN_FAILED)
			return commit_done(s, st, s->full ? EGS_ERR_STORAGE_FULL : EGS_ERR_STORE);
	}
	return commit_done(s, st, EGS_ERR_STORE);
}

/* ---- meta and events ---- */

/* Runs a prepared statement once, reconnecting first when the session is broken. */
static PGresult *run_prepared(struct pg_store *s, const char *stmt, int n, const char *const *v, ExecStatusType want)
{
	if (!egs__pg_ready(s))
		return NULL;
	bool sent = PQsendQueryPrepared(s->conn, stmt, n, v, NULL, NULL, 0) == 1;
	return egs__pg_result(s, sent, stmt, want);
}

static enum egs_err pg_meta_get(struct pg_store *s, const char *key, char **value)
{
	const char *v[1] = { key };
	*value = NULL;
	PGresult *res = run_prepared(s, "mget", 1, v, PGRES_TUPLES_OK);
	if (!res)
		return EGS_ERR_STORE;
	if (PQntuples(res) == 1)
		*value = egs_strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return EGS_OK;
}

static enum egs_err pg_meta_set(struct pg_store *s, const char *key, const char *value)
{
	const char *v[2] = { key, value };
	PGresult *res = run_prepared(s, "mset", 2, v, PGRES_COMMAND_OK); /* its own transaction */
	PQclear(res);
	return res ? EGS_OK : EGS_ERR_STORE;
}

static enum egs_err pg_prune_events_below(struct pg_store *s, int64_t before, int64_t below_id, int64_t *deleted)
{
	char b[24], id[24];
	const char *v[2] = { b, id };
	PGresult *res = NULL;
	snprintf(b, sizeof(b), "%lld", (long long)before);
	snprintf(id, sizeof(id), "%lld", (long long)below_id);
	if (!egs__pg_ready(s) || !egs__pg_exec(s, "BEGIN"))
		goto fail;
	if (!(res = run_prepared(s, "pmark", 2, v, PGRES_COMMAND_OK)))
		goto fail;
	PQclear(res);
	if (!(res = run_prepared(s, "prune", 2, v, PGRES_COMMAND_OK)))
		goto fail;
	int64_t n = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	if (!egs__pg_exec(s, "COMMIT"))
		goto fail;
	if (deleted)
		*deleted = n;
	return EGS_OK;
fail:
	if (s->conn && !egs__pg_broken(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		egs__pg_exec(s, "ROLLBACK");
	return EGS_ERR_STORE;
}

/* ---- the ops table (store_impl.h): each handle store.c gets is a struct pg_store ---- */

static struct pg_store *of(struct egs_store *base)
{
	return (struct pg_store *)base;
}

static void op_free(struct egs_store *b) { pg_free(of(b)); }
static enum egs_err op_load(struct egs_store *b, struct egs_state *st)
{
	return egs__pg_ready(of(b)) ? pg_load(of(b), st) : EGS_ERR_STORE;
}
static enum egs_err op_commit(struct egs_store *b, struct egs_state *st) { return pg_commit_changes(of(b), st); }
static enum egs_err op_meta_get(struct egs_store *b, const char *k, char **v) { return pg_meta_get(of(b), k, v); }
static enum egs_err op_meta_set(struct egs_store *b, const char *k, const char *v) { return pg_meta_set(of(b), k, v); }
static enum egs_err op_prune(struct egs_store *b, int64_t before, int64_t below_id, int64_t *deleted)
{
	return pg_prune_events_below(of(b), before, below_id, deleted);
}

static enum egs_err op_audit_list(struct egs_store *b, const struct egs_audit_filter *f, struct egs_vec *out)
{
	return egs__pg_ready(of(b)) ? egs__pg_audit_list(of(b)->conn, f, out) : EGS_ERR_STORE;
}
static enum egs_err op_audit_prune(struct egs_store *b, int64_t before, int64_t *deleted)
{
	return egs__pg_ready(of(b)) ? egs__pg_audit_prune(of(b)->conn, before, deleted) : EGS_ERR_STORE;
}
static enum egs_err op_audit_last(struct egs_store *b, int64_t *out)
{
	return egs__pg_ready(of(b)) ? egs__pg_audit_last_id(of(b)->conn, out) : EGS_ERR_STORE;
}

static const struct egs_store_ops pg_ops = {
	.name = "postgres",
	.free = op_free,
	.lead = egs__pg_lead,
	.try_lead = egs__pg_try_lead,
	.leader = egs__pg_leader,
	.renew = egs__pg_renew,
	.follow = egs__pg_follow,
	.adopt_load = egs__pg_adopt_load,
	.deposed = egs__pg_deposed,
	.load = op_load,
	.commit_changes = op_commit,
	.meta_get = op_meta_get,
	.meta_set = op_meta_set,
	.prune_events_below = op_prune,
	.audit_list = op_audit_list,
	.audit_prune = op_audit_prune,
	.audit_last_id = op_audit_last,
	.gprs_find = egs__pg_gprs_find,
};
