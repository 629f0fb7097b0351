/*
 * store_pg_lead.c: which egsd leads a PostgreSQL database, and for how long it may say so
 * (docs/ha.md is the operator's side, docs/internals/store.md the design).
 *
 * The leader lock is a session-level advisory lock (471650172, hashtext(current_schema())):
 * advisory locks are per database, so egsd installations in separate schemas of one database
 * elect separately (two schemas whose names hash alike would share one leader lock: the cost is
 * waiting, never two writers).  Taking it moves meta's leader.epoch on: the fencing number.  A
 * leader's new session (after a broken one) takes the lock again and must find its own epoch, or
 * it is deposed for good.
 *
 * The lock alone cannot make a stalled leader step down: PostgreSQL keeps a silent session, and
 * its lock, until it notices (TCP keepalives, minutes by default).  So the leader also holds a
 * lease, meta's leader.lease: an expiry in milliseconds by the DATABASE clock, EGS_PG_LEASE_MS after the
 * statement that wrote it ran.  The leader writes it at election and about once a second, and
 * acknowledges nothing once EGS_PG_LEASE_MS - EGS_PG_MARGIN_MS have passed on its own monotonic clock since it
 * SENT the last write that succeeded (the database ran that write later, so its expiry is at
 * least EGS_PG_LEASE_MS after the send).  Every committed turn rewrites the lease too (in the same
 * UPDATE as the commit counter, store_pg.c), so a busy leader renews with its commits.  Every wait of
 * a leader for the database ends at that moment (a lease write may wait GRACE_US longer): then it
 * steps down (deposed) instead of waiting on.  A candidate that finds the lock held ends
 * the holder's session (pg_terminate_backend) only once the lease has expired by the database
 * clock, when the holder has stopped acknowledging for EGS_PG_MARGIN_MS already; then it takes the lock.
 * A lock that is free (the holder's session ended: kill -9, host lost) is taken at once: the old
 * leader cannot commit without that session, and fencing stops it from using a new one.
 */
#include "store/store_pg.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEADER_LOCK "471650172, hashtext(current_schema())"
#define RENEW_EVERY_US 1000000
#define GRACE_US 1000000 /* a lease write may wait this long even when the lease ran out meanwhile */
#define OP_TIMEOUT_S 10 /* a query that takes longer is given up (the session is dropped) */
#define LOAD_TIMEOUT_S 120 /* the same for a query of a load that does not lead (a large store's scans) */

int64_t egs__pg_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t egs__pg_deadline(struct pg_store *s)
{
	if (!s->leader)
		return egs__pg_mono_us() + (int64_t)(s->loading ? LOAD_TIMEOUT_S : OP_TIMEOUT_S) * 1000000;
	return s->lease_until_us > s->grace_until_us ? s->lease_until_us : s->grace_until_us;
}

static void step_down(struct pg_store *s, const char *why)
{
	if (s->deposed)
		return;
	s->deposed = true;
	fprintf(stderr, "store: stepping down: %s; this egsd acknowledges no write more\n", why);
	fflush(stderr);
}

PGresult *egs__pg_wait(struct pg_store *s, int64_t deadline_us)
{
	if (s->timed_out || !s->conn)
		return NULL;
	while (PQisBusy(s->conn)) {
		int64_t left = deadline_us - egs__pg_mono_us();
		if (left <= 0) {
			s->timed_out = true;
			if (s->leader)
				step_down(s, "PostgreSQL did not answer before the end of the leader's lease");
			else
				fprintf(stderr, "store: PostgreSQL did not answer within %d s; dropping the session\n",
					OP_TIMEOUT_S);
			return NULL;
		}
		struct pollfd p = { .fd = PQsocket(s->conn), .events = POLLIN };
		int n = poll(&p, 1, (int)(left / 1000) + 1);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && PQconsumeInput(s->conn) != 1)
			break; /* the connection broke: PQgetResult says so */
	}
	return PQgetResult(s->conn);
}

bool egs__pg_within_lease(struct pg_store *s)
{
	if (!s->leader)
		return true;
	if (!s->deposed && egs__pg_mono_us() >= s->lease_until_us)
		step_down(s, "the lease could not be renewed in time");
	return !s->deposed;
}

static void drop_session(struct pg_store *s)
{
	PQfinish(s->conn);
	s->conn = NULL;
}

/* Tries the leader lock on the current session: 1 taken, 0 held by another session, -1 error. */
static int try_lock(struct pg_store *s)
{
	PGresult *res = egs__pg_run(s, "SELECT pg_try_advisory_lock(" LEADER_LOCK ")", true);
	int got = res ? PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0 : -1;
	PQclear(res);
	return got;
}

/* Reads one meta value as a number (0 when absent); false on error. */
static bool read_number(struct pg_store *s, const char *sql, int64_t *out)
{
	PGresult *res = egs__pg_run(s, sql, true);
	if (!res)
		return false;
	*out = PQntuples(res) == 1 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : 0;
	PQclear(res);
	return true;
}

bool egs__pg_read_turn(struct pg_store *s, int64_t *out)
{
	return read_number(s, "SELECT value FROM meta WHERE key = 'leader.turn'", out);
}

/* Writes the lease; on success the leader may acknowledge until EGS_PG_LEASE_MS - EGS_PG_MARGIN_MS after now.
 * Waiting for it is safe even past the end of the old lease (nothing is acknowledged meanwhile),
 * so a leader whose loop was held up (a starved CPU) renews instead of stepping down; only a
 * database that does not answer within GRACE_US then makes it step down. */
static bool write_lease(struct pg_store *s)
{
	int64_t t0 = egs__pg_mono_us();
	s->grace_until_us = t0 + GRACE_US;
	PGresult *res = egs__pg_run(s,
				    "UPDATE meta SET value = (" EGS_PG_DB_NOW_MS " + " EGS_PG_STR(EGS_PG_LEASE_MS) ")::text "
				    "WHERE key = 'leader.lease'",
				    false);
	s->grace_until_us = 0;
	PQclear(res);
	if (res)
		egs__pg_lease_sent(s, t0);
	return res != NULL;
}

void egs__pg_lease_sent(struct pg_store *s, int64_t t0)
{
	s->lease_until_us = t0 + (int64_t)(EGS_PG_LEASE_MS - EGS_PG_MARGIN_MS) * 1000;
	s->renewed_us = t0;
}

bool egs__pg_lease_due(struct pg_store *s)
{
	return s->leader && !s->deposed && egs__pg_mono_us() - s->renewed_us >= RENEW_EVERY_US;
}

bool egs__pg_renew_now(struct pg_store *s)
{
	return write_lease(s);
}

void egs__pg_reconnecting(struct pg_store *s)
{
	/* Nothing is acknowledged until egs__pg_relead succeeds (it writes the lease again), so the
	 * queries of a reconnect may take OP_TIMEOUT_S even when the old lease ended meanwhile (a
	 * database restart longer than the lease). */
	if (s->leader && !s->deposed)
		s->lease_until_us = egs__pg_mono_us() + (int64_t)OP_TIMEOUT_S * 1000000;
}

bool egs__pg_relead(struct pg_store *s)
{
	int64_t epoch = -1;
	egs__pg_reconnecting(s);
	if (try_lock(s) == 1 && read_number(s, "SELECT value FROM meta WHERE key = 'leader.epoch'", &epoch) &&
	    epoch == s->epoch && write_lease(s))
		return true;
	fprintf(stderr, "store: deposed: another egsd leads this database now (epoch %lld, ours %lld); this one commits "
			"nothing more\n", (long long)epoch, (long long)s->epoch);
	s->deposed = true;
	return false;
}

/* The lock is held by another session: ends that session when its lease expired by the database
 * clock (a stalled leader; it stopped acknowledging EGS_PG_MARGIN_MS before). */
static enum egs_err end_expired(struct pg_store *s)
{
	PGresult *res = egs__pg_run(
		s,
		"SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted "
		"AND l.classid = 471650172 AND l.objsubid = 2 "
		"AND l.objid::text::bigint = (hashtext(current_schema())::bigint & 4294967295) "
		"AND l.pid <> pg_backend_pid() "
		"AND (SELECT COALESCE(MAX(value::bigint), 0) FROM meta WHERE key = 'leader.lease') < " EGS_PG_DB_NOW_MS,
		true);
	if (!res)
		return EGS_ERR_STORE;
	if (PQntuples(res) > 0) {
		fprintf(stderr, "store: the leader's lease expired (a stalled leader?); ended its session\n");
		fflush(stderr);
	}
	PQclear(res);
	return EGS_OK;
}

/* With the lock just taken: whether the last load saw every committed turn (nobody commits without
 * the lock, so it stays current).  When not, or on an error, the lock is given back before anything
 * is written: this egsd leads only from a current model, which a load outside the lease makes, however
 * large the store (docs/ha.md), and never loads under its lease on taking over. */
static bool current(struct pg_store *s)
{
	int64_t turn = -1;
	if (read_number(s, "SELECT value FROM meta WHERE key = 'leader.turn'", &turn) && turn == s->loaded_turn)
		return true;
	PGresult *res = egs__pg_run(s, "SELECT pg_advisory_unlock(" LEADER_LOCK ")", true);
	if (res)
		fprintf(stderr, "store: the leader lock is free but this egsd's model lacks committed turns (%lld of "
				"%lld); loading them before it leads\n", (long long)s->loaded_turn, (long long)turn);
	else
		drop_session(s); /* with the session goes the lock */
	PQclear(res);
	return false;
}

enum egs_err egs__pg_try_lead(struct egs_store *b, const char *addr, bool *led)
{
	struct pg_store *s = (struct pg_store *)b;
	const char *v[1] = { addr ? addr : "" };
	*led = false;
	if (s->leader) {
		*led = !s->deposed;
		return EGS_OK;
	}
	if (!egs__pg_ready(s))
		return EGS_ERR_STORE;
	int got = try_lock(s);
	if (got != 1)
		return got == 0 ? end_expired(s) : EGS_ERR_STORE;
	if (s->loaded && !current(s))
		return EGS_OK; /* not led: the caller loads again (a follower's next look does) and retries */
	int64_t t0 = egs__pg_mono_us();
	static const char sql[] =
		"WITH e AS (INSERT INTO meta(key, value) VALUES('leader.epoch', '1') ON CONFLICT(key) DO UPDATE "
		"SET value = (meta.value::bigint + 1)::text RETURNING value), "
		"a AS (INSERT INTO meta(key, value) VALUES('leader.addr', $1) ON CONFLICT(key) DO UPDATE "
		"SET value = excluded.value), "
		"l AS (INSERT INTO meta(key, value) VALUES('leader.lease', (" EGS_PG_DB_NOW_MS " + " EGS_PG_STR(EGS_PG_LEASE_MS) ")::text) "
		"ON CONFLICT(key) DO UPDATE SET value = excluded.value), "
		"t AS (INSERT INTO meta(key, value) VALUES('leader.turn', '0') ON CONFLICT(key) DO NOTHING) "
		"SELECT value FROM e";
	bool sent = s->conn && PQsendQueryParams(s->conn, sql, 1, NULL, v, NULL, NULL, 0) == 1;
	PGresult *res = egs__pg_result(s, sent, sql, PGRES_TUPLES_OK);
	if (!res || PQntuples(res) != 1) {
		PQclear(res);
		drop_session(s); /* with the session goes the lock: never hold it without leading */
		return EGS_ERR_STORE;
	}
	s->epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	s->leader = true;
	egs__pg_lease_sent(s, t0);
	*led = true;
	fprintf(stderr, "store: this egsd leads the database (epoch %lld)\n", (long long)s->epoch);
	return EGS_OK;
}

enum egs_err egs__pg_lead(struct egs_store *b)
{
	struct timespec pause = { 0, 200 * 1000 * 1000 };
	bool said = false, led = false;
	enum egs_err err;
	while ((err = egs__pg_try_lead(b, NULL, &led)) == EGS_OK && !led) {
		if (!said) {
			fprintf(stderr, "store: another egsd leads this database; waiting to take over\n");
			fflush(stderr); /* egsd buffers its log; a waiting standby should say why now */
		}
		said = true;
		nanosleep(&pause, NULL);
	}
	return err;
}

enum egs_err egs__pg_leader(struct egs_store *b, struct egs_store_leader *out)
{
	struct pg_store *s = (struct pg_store *)b;
	if (!egs__pg_ready(s))
		return EGS_ERR_STORE;
	PGresult *res = egs__pg_run(
		s, "SELECT key, value FROM meta WHERE key IN ('leader.epoch', 'leader.turn', 'leader.addr')", true);
	if (!res)
		return EGS_ERR_STORE;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *k = PQgetvalue(res, i, 0), *v = PQgetvalue(res, i, 1);
		if (strcmp(k, "leader.addr") == 0)
			egs_strlcpy(out->addr, v, sizeof(out->addr));
		else if (strcmp(k, "leader.epoch") == 0)
			out->epoch = strtoll(v, NULL, 10);
		else
			out->turn = strtoll(v, NULL, 10);
	}
	PQclear(res);
	out->loaded_turn = s->loaded_turn;
	return EGS_OK;
}

enum egs_err egs__pg_renew(struct egs_store *b)
{
	struct pg_store *s = (struct pg_store *)b;
	if (!s->leader)
		return EGS_OK;
	if (egs__pg_lease_due(s) && egs__pg_ready(s))
		write_lease(s); /* a broken session is retried at the next call */
	return egs__pg_within_lease(s) ? EGS_OK : EGS_ERR_UNAVAILABLE;
}

bool egs__pg_deposed(struct egs_store *b)
{
	return ((struct pg_store *)b)->deposed;
}
