/*
 * store_pg.c: the PostgreSQL implementation of store.h over libpq (docs/internals/store.md).
 *
 * One connection, used by egsd's loop thread only.  The tables, columns and migrations are
 * SQLite's with PostgreSQL types (BIGINT, DOUBLE PRECISION, BYTEA); the schema version is the
 * row schema_version of the meta table, and each migration runs in its own transaction under a
 * transaction-scoped advisory lock, so two egsd starting on a new database do not both run one.
 *
 * Group commit (store_pg_commit.c): a loop turn's changes go in one transaction, sent in pipeline
 * mode with one statement per table, and the loop goes on while PostgreSQL runs it; the turn's
 * replies wait for its COMMIT's answer (egs_store_commit_send, the sync ops of store.h).  The
 * session runs with synchronous_commit = on: COMMIT answers only once the WAL is flushed on the
 * server.  A broken session is reconnected (reconnect(): for about RETRY_FOR_S seconds) and the turn
 * sent again.  Everything else waits on the session for its answer; a turn in flight is read to its
 * end first (egs__pg_ready).
 */
#include "store/store_impl.h"
#include "store/store_audit.h"
#include "store/store_pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define NMIGRATIONS egs__pg_nmigrations
#define META_EVENT_FLOOR "store.event_id_floor"
#define META_SCHEMA "schema_version"
#define MIGRATION_LOCK "4716501726" /* an arbitrary advisory lock key: egsd's migrations */
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
	/* A turn still in flight is rolled back by the server when the session ends. */
	if (!s->turn.inflight && !egs__pg_broken(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		egs__pg_exec(s, "ROLLBACK");
	PQfinish(s->conn);
	egs__pg_turn_cleanup(&s->turn);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->news_fd >= 0)
		close(s->news_fd);
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
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->ep_sock = -1;
	s->news_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->url = egs_strdup(url);
	s->batch = egs_calloc(1, sizeof(*s->batch));
	s->types = egs_calloc((size_t)egs__pg_nkinds + 2, sizeof(*s->types));
	for (int i = 0; i < egs__pg_nkinds; i++)
		EGS_ASSERT(egs__pg_kinds[i].table); /* every object kind has its PostgreSQL row codec */
	struct epoll_event ev = { .events = EPOLLIN };
	if (s->epfd < 0 || s->news_fd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->news_fd, &ev) != 0) {
		perror("store: the descriptor of the turn in flight");
		goto out;
	}
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

/* ---- the session in use ---- */

bool egs__pg_ready(struct pg_store *s)
{
	egs__pg_settle(s); /* a turn in flight is read to its end before anything else is sent */
	return !s->deposed && ((s->conn && !egs__pg_broken(s)) || reconnect(s));
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
	.commit_changes = egs__pg_commit,
	.commit_send = egs__pg_commit_send,
	.acked = egs__pg_acked,
	.sync_request = egs__pg_sync_request,
	.sync_fd = egs__pg_sync_fd,
	.sync_poll = egs__pg_sync_poll,
	.sync_wait = egs__pg_sync_wait,
	.meta_get = op_meta_get,
	.meta_set = op_meta_set,
	.prune_events_below = op_prune,
	.audit_list = op_audit_list,
	.audit_prune = op_audit_prune,
	.audit_last_id = op_audit_last,
	.gprs_find = egs__pg_gprs_find,
};
