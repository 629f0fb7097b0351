/*
 * store_pg_commit.c: the PostgreSQL store's group commit (docs/internals/store.md, "How rows
 * travel" and "The turn in flight").
 *
 * A loop turn's changes go in one transaction, sent in pipeline mode: BEGIN, per table one prepared
 * delete, one prepared plain insert of the rows known new and one prepared upsert of the others,
 * each carrying all of the turn's rows of its kind as binary array parameters (store_pg_batch.c),
 * the same for the turn's events and its audit entries, a leader's counter-and-lease UPDATE and
 * change-log row, COMMIT, Sync.  So a turn costs one round trip and a handful of statements however
 * many rows it writes.  The session runs with synchronous_commit = on: COMMIT answers only once the
 * WAL is flushed on the server (and on synchronous standbys, if the server has them).
 *
 * The turn is built first, every statement kept with a copy of its parameters, then sent.  The
 * kept statements are what a retry sends again, with every plain INSERT replaced by the upsert of
 * the same rows: each statement is then idempotent (whole-row upserts, deletes by key), so when the
 * connection breaks, even during COMMIT where the outcome is unknown, the turn is simply sent again
 * on a new connection (store_pg.c's reconnect tries for about RETRY_FOR_S seconds), MAX_TRIES times
 * at most.  A plain INSERT that meets a stored key (egs__pg_fresh guessed wrong) sends the turn
 * again as upserts on the same session.
 *
 * The turn in flight: egs_store_commit_send (server.c's commit turn) sends the turn and returns, and
 * the loop goes on reading requests while PostgreSQL runs it.  Its answers are read without blocking
 * when the session's socket is readable (egs_store_sync_fd: an epoll set that holds the socket
 * while a turn is in flight, so the descriptor the loop watches never changes with a reconnect),
 * or at once, waiting, by any other use of the session (egs__pg_ready settles it first; an eventfd
 * in the same set then tells the loop).  One turn
 * is in flight at a time.  Its write number counts durable (acked) once its COMMIT answered; a
 * failure is kept and told once, by the next sync_poll or sync_wait, and no later write counts
 * durable before it was told (server: durable.c fails the replies waiting for it).  A leader's lease
 * is checked when the answer is read: when the lease ran out meanwhile the turn counts as failed,
 * whatever PostgreSQL answered (docs/ha.md), so a deposed leader never acknowledges it.
 */
#include "store/store_pg.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define PIPE_MAX 256 /* statements in flight before their results are read */
#define MAX_TRIES 5  /* sends of one turn before it fails */

/* TURN_CONFLICT: a plain INSERT met a stored key: send it again as upserts.  TURN_PENDING: the
 * answers are not all there yet (a read that does not wait). */
enum turn { TURN_OK, TURN_FAILED, TURN_BROKEN, TURN_CONFLICT, TURN_PENDING };

/* What a statement of the turn writes, for its error line (every string static). */
struct what {
	const char *verb, *table;
	int rows;
};

void egs__pg_drop(struct pg_store *s)
{
	PQfinish(s->conn);
	s->conn = NULL;
}

static void stmts_clear(struct egs_pg_turn *tn)
{
	tn->n = 0;
	tn->used = 0;
}

void egs__pg_turn_cleanup(struct egs_pg_turn *tn)
{
	stmts_clear(tn);
	free(tn->stmts);
	free(tn->arena);
	memset(tn, 0, sizeof(*tn));
}

/* The layout of a kept statement's parameters in the arena. */
struct kept {
	size_t *voff;
	int *len, *fmt;
};

static struct kept kept_at(const struct egs_pg_turn *tn, const struct egs_pg_stmt *k)
{
	struct kept p;
	p.voff = (size_t *)(void *)(tn->arena + k->off);
	p.len = (int *)(void *)(p.voff + k->n);
	p.fmt = p.len + k->n;
	return p;
}

/* Keeps statement name (or the SQL sql, when name is NULL) with n parameters v (NULL: SQL NULL),
 * copied; lengths len and formats fmt as PQsendQueryPrepared takes them (NULL: all text). */
static void keep(struct pg_store *s, const char *name, const char *sql, int n, const char *const *v, const int *len,
		 const int *fmt, struct what w)
{
	struct egs_pg_turn *tn = &s->turn;
	EGS_ASSERT(n <= EGS_PG_MAX_COLS);
	if (tn->n == tn->cap) {
		tn->cap = tn->cap ? 2 * tn->cap : 16;
		tn->stmts = egs_realloc(tn->stmts, (size_t)tn->cap * sizeof(*tn->stmts));
	}
	struct egs_pg_stmt *k = &tn->stmts[tn->n++];
	memset(k, 0, sizeof(*k));
	k->sql = sql;
	if (name)
		egs_strlcpy(k->name, name, sizeof(k->name));
	k->verb = w.verb;
	k->table = w.table;
	k->rows = w.rows;
	k->n = n;
	size_t head = (size_t)n * (sizeof(size_t) + 2 * sizeof(int)), bytes = 0;
	for (int i = 0; i < n; i++)
		if (v[i])
			bytes += fmt && fmt[i] ? (size_t)len[i] : strlen(v[i]) + 1;
	k->off = (tn->used + 7) & ~(size_t)7;
	if (k->off + head + bytes > tn->size) {
		tn->size = 2 * (k->off + head + bytes);
		tn->arena = egs_realloc(tn->arena, tn->size);
	}
	struct kept p = kept_at(tn, k);
	size_t at = k->off + head;
	for (int i = 0; i < n; i++) {
		bool bin = fmt && fmt[i];
		size_t sz = !v[i] ? 0 : bin ? (size_t)len[i] : strlen(v[i]) + 1;
		p.fmt[i] = bin;
		p.len[i] = (int)(bin ? sz : sz ? sz - 1 : 0);
		p.voff[i] = v[i] ? at : SIZE_MAX;
		if (sz)
			memcpy(tn->arena + at, v[i], sz);
		at += sz;
	}
	tn->used = at;
}

/* Sends kept statement k (as the try's statement name). */
static bool send_kept(struct pg_store *s, const struct egs_pg_stmt *k, const char *name)
{
	const struct egs_pg_turn *tn = &s->turn;
	if (!k->name[0])
		return PQsendQueryParams(s->conn, k->sql, 0, NULL, NULL, NULL, NULL, 0) == 1;
	const char *v[EGS_PG_MAX_COLS];
	struct kept p = kept_at(tn, k);
	for (int i = 0; i < k->n; i++)
		v[i] = p.voff[i] == SIZE_MAX ? NULL : tn->arena + p.voff[i];
	return PQsendQueryPrepared(s->conn, name, k->n, v, p.len, p.fmt, 0) == 1;
}

/* ---- building the turn ---- */

/* Keeps the rows gathered in the store's batch as statement stmt (nothing when there are none), and
 * empties the batch for more rows of the same shape. */
static void keep_batch(struct pg_store *s, const char *stmt, const char *verb, const char *table)
{
	struct egs_pg_batch *b = s->batch;
	if (b->nrows > 0)
		keep(s, stmt, NULL, b->ncols, egs__pg_batch_finish(b), b->lengths, b->formats,
		     (struct what){ verb, table, b->nrows });
	egs__pg_batch_start(b, b->ncols, b->types);
}

/* Which statement writes change c: 0 delete, 1 plain insert (a new row), 2 upsert. */
static int mode_of(const struct pg_store *s, const struct egs_change *c)
{
	return c->deleted ? 0 : egs__pg_fresh(s, c) ? 1 : 2;
}

/* One statement (or one per EGS_PG_BATCH_ROWS rows) deleting, one inserting the new rows and one
 * upserting the others, of kind k among the turn's last changes refs[0..n).  False when a row
 * could not be encoded (reported). */
static bool keep_kind(struct pg_store *s, int k, const struct egs_pg_ref *refs, size_t n)
{
	static const char *const prefix[] = { "del", "ins", "put" }, *const verb[] = { "delete", "insert", "put" };
	const struct egs_pg_kind *kind = &egs__pg_kinds[k];
	struct egs_pg_batch *b = s->batch;
	struct egs_row_binder rb = egs__pg_batch_binder(b);
	char stmt[16];
	for (int m = 0; m < 3; m++) {
		snprintf(stmt, sizeof(stmt), "%s%d", prefix[m], k);
		egs__pg_batch_start(b, m == 0 ? 1 : egs__pg_ncols(kind->cols), s->types[k]);
		for (size_t i = 0; i < n; i++) {
			if (mode_of(s, refs[i].c) != m)
				continue;
			if (m == 0) {
				egs__pg_batch_key(b, refs[i].key);
			} else {
				egs__pg_batch_row_begin(b);
				kind->bind(&rb, refs[i].c->obj);
				if (!egs__pg_batch_row_end(b)) {
					fprintf(stderr, "store: put %s '%s': %s\n", kind->table, refs[i].key, b->why);
					return false;
				}
			}
			if (b->nrows == EGS_PG_BATCH_ROWS)
				keep_batch(s, stmt, verb[m], kind->table);
		}
		keep_batch(s, stmt, verb[m], kind->table);
	}
	return true;
}

/* The turn's changes: per kind, its deletions and its upserts, the last change of each object. */
static bool keep_changes(struct pg_store *s, const struct egs_state *st)
{
	struct egs_pg_ref *refs = egs_calloc(st->changes.len + 1, sizeof(*refs));
	size_t n = egs__pg_turn_rows(st, refs), from = 0;
	bool ok = true;
	while (from < n && ok) {
		size_t to = from;
		while (to < n && refs[to].kind == refs[from].kind)
			to++;
		ok = keep_kind(s, refs[from].kind, refs + from, to - from);
		from = to;
	}
	free(refs);
	return ok;
}

/* The turn's events (new ones with one plain insert, repeats of stored ones with one upsert; or one
 * statement per EGS_PG_BATCH_ROWS rows) and audit entries (each one new: plain inserts). */
static void keep_log(struct pg_store *s, const struct egs_state *st)
{
	struct egs_pg_batch *b = s->batch;
	struct egs_row_binder rb = egs__pg_batch_binder(b);
	for (int fresh = 1; fresh >= 0; fresh--) {
		egs__pg_batch_start(b, egs__pg_ncols(EGS_PG_EVENT_COLS), s->types[EGS_PG_EVENTS]);
		for (size_t i = 0; i < st->new_events.len; i++) {
			const struct egs_event *ev = st->new_events.items[i];
			if (!ev->listed != (fresh == 1))
				continue;
			egs__pg_batch_row_begin(b);
			egs_rows_bind_event(&rb, ev);
			egs__pg_batch_row_end(b); /* text and numbers only: nothing fails */
			if (b->nrows == EGS_PG_BATCH_ROWS)
				keep_batch(s, fresh ? "evi" : "ev", fresh ? "insert" : "put", "events");
		}
		keep_batch(s, fresh ? "evi" : "ev", fresh ? "insert" : "put", "events");
	}
	egs__pg_batch_start(b, egs__pg_ncols(EGS_AUDIT_COLS), s->types[EGS_PG_AUDIT]);
	for (size_t i = 0; i < st->new_audit.len; i++) {
		egs__pg_batch_row_begin(b);
		egs_rows_bind_audit(&rb, st->new_audit.items[i]);
		egs__pg_batch_row_end(b);
		if (b->nrows == EGS_PG_BATCH_ROWS || i + 1 == st->new_audit.len)
			keep_batch(s, "aui", "insert", "audit");
	}
}

/* Builds the whole turn as kept statements; with inject (the tests' failure) the rows are written
 * and the transaction rolled back instead.  False when a row could not be encoded (reported). */
static bool build(struct pg_store *s, const struct egs_state *st, bool inject)
{
	struct egs_pg_turn *tn = &s->turn;
	stmts_clear(tn);
	tn->inject = inject;
	tn->next_seq = st->next_seq;
	keep(s, NULL, "BEGIN", 0, NULL, NULL, NULL, (struct what){ "BEGIN", NULL, 0 });
	if (!keep_changes(s, st))
		return false;
	keep_log(s, st);
	if (s->leader && !inject) { /* followers see the turn (docs/internals/store.md) */
		static const char *const none[1] = { NULL };
		keep(s, "turn", NULL, 0, none, NULL, NULL, (struct what){ "update", "meta", 0 });
		struct egs_pg_changes chg = { 0 }; /* and what it wrote (store_pg_follow.c) */
		egs__pg_changes_build(&chg, st);
		keep(s, "chg", NULL, 2, chg.params, NULL, NULL, (struct what){ "put", "changes", 1 });
		egs__pg_changes_free(&chg);
	}
	const char *end = inject ? "ROLLBACK" : "COMMIT";
	keep(s, NULL, end, 0, NULL, NULL, NULL, (struct what){ end, NULL, 0 });
	return true;
}

/* ---- sending it and reading the answers ---- */

/* A failure that means the connection, not the statement: worth a new connection and a retry. */
static bool connection_error(struct pg_store *s, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	return egs__pg_broken(s) || (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0));
}

static void report(struct pg_store *s, const struct egs_pg_stmt *k, const PGresult *res)
{
	const char *msg = res ? PQresultErrorMessage(res) : egs__pg_errmsg(s);
	const char *verb = k->name[0] ? k->verb : k->sql;
	if (!*msg)
		msg = "statement skipped\n";
	if (k->rows)
		fprintf(stderr, "store: %s %s (%d rows): %s", verb, k->table, k->rows, msg);
	else
		fprintf(stderr, "store: %s%s%s: %s", verb, k->table ? " " : "", k->table ? k->table : "", msg);
}

/* The statement a try sends for k: after the first, the upsert of a plain insert's rows. */
static const char *stmt_name(const struct egs_pg_turn *tn, const struct egs_pg_stmt *k, char *buf, size_t n)
{
	if (!tn->again)
		return k->name;
	if (strncmp(k->name, "ins", 3) == 0)
		snprintf(buf, n, "put%s", k->name + 3);
	else if (strcmp(k->name, "evi") == 0 || strcmp(k->name, "aui") == 0)
		snprintf(buf, n, "%.2s", k->name);
	else
		return k->name;
	return buf;
}

/* 1 with *res the next result (NULL included: the end of a statement's results, or a session that
 * failed), 0 when it is not there yet and block is false. */
static int next_result(struct pg_store *s, bool block, int64_t deadline, PGresult **res)
{
	if (block || !s->conn || s->timed_out) {
		*res = egs__pg_wait(s, deadline);
		return 1;
	}
	if (PQisBusy(s->conn))
		return 0;
	*res = PQgetResult(s->conn);
	return 1;
}

/* Takes statement k's result into the turn's outcome; only the first failure is reported. */
static void judge(struct pg_store *s, const struct egs_pg_stmt *k, const PGresult *res)
{
	struct egs_pg_turn *tn = &s->turn;
	ExecStatusType st = PQresultStatus(res);
	if (!res || (st != PGRES_COMMAND_OK && tn->outcome == TURN_OK)) {
		const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		s->full = state && strcmp(state, "53100") == 0; /* disk_full */
		tn->outcome = connection_error(s, res) ? TURN_BROKEN : TURN_FAILED;
		if (tn->outcome == TURN_FAILED && state && strcmp(state, "23505") == 0 && !tn->again &&
		    strcmp(k->verb, "insert") == 0)
			tn->outcome = TURN_CONFLICT; /* unique_violation: not worth a line, the turn goes again */
		else
			report(s, k, res);
	} else if (st == PGRES_COMMAND_OK && !k->name[0] && strcmp(k->sql, "COMMIT") == 0 &&
		   strcmp(PQcmdStatus((PGresult *)res), "COMMIT") != 0) {
		fprintf(stderr, "store: COMMIT answered %s\n", PQcmdStatus((PGresult *)res));
		tn->outcome = TURN_FAILED;
	}
}

/* Reads the answers of the statements sent so far from where the last call stopped, and then,
 * when synced, the Sync's (the session leaves pipeline mode).  block: waits for them (a leader
 * until the end of its lease: egs__pg_deadline); else TURN_PENDING as soon as the next one is not
 * there yet. */
static enum turn collect(struct pg_store *s, bool block, bool synced)
{
	struct egs_pg_turn *tn = &s->turn;
	int64_t deadline = block ? egs__pg_deadline(s) : 0;
	PGresult *res;
	if (!block && s->conn && PQconsumeInput(s->conn) != 1) {
		fprintf(stderr, "store: reading the turn's answers: %s", egs__pg_errmsg(s));
		return TURN_BROKEN;
	}
	while (tn->next < tn->n) {
		if (!tn->in_result) {
			if (!next_result(s, block, deadline, &res))
				return TURN_PENDING;
			judge(s, &tn->stmts[tn->next], res);
			PQclear(res);
			if (!res || tn->outcome == TURN_BROKEN)
				return TURN_BROKEN;
			tn->in_result = true;
		}
		if (!next_result(s, block, deadline, &res))
			return TURN_PENDING;
		PQclear(res); /* the NULL that ends each statement's results */
		tn->in_result = false;
		tn->next++;
	}
	if (!synced || (tn->outcome != TURN_OK && tn->outcome != TURN_CONFLICT))
		return (enum turn)tn->outcome;
	if (!next_result(s, block, deadline, &res))
		return TURN_PENDING;
	if (PQresultStatus(res) != PGRES_PIPELINE_SYNC)
		tn->outcome = connection_error(s, res) ? TURN_BROKEN : TURN_FAILED;
	else if (PQexitPipelineMode(s->conn) != 1)
		tn->outcome = TURN_BROKEN; /* after a conflict: the session is idle again, the transaction rolled back */
	PQclear(res);
	return (enum turn)tn->outcome;
}

/* Sends the kept turn (again: as upserts), PIPE_MAX statements at most before their answers are
 * read, and the Sync.  TURN_OK once all is sent. */
static enum turn send_all(struct pg_store *s)
{
	struct egs_pg_turn *tn = &s->turn;
	char buf[16];
	tn->next = 0;
	tn->in_result = false;
	tn->outcome = TURN_OK;
	if (PQenterPipelineMode(s->conn) != 1)
		return TURN_BROKEN;
	for (int i = 0; i < tn->n; i++) {
		const struct egs_pg_stmt *k = &tn->stmts[i];
		if (!send_kept(s, k, stmt_name(tn, k, buf, sizeof(buf)))) {
			report(s, k, NULL);
			return egs__pg_broken(s) ? TURN_BROKEN : TURN_FAILED;
		}
		if (i + 1 - tn->next == PIPE_MAX) {
			enum turn t = PQsendFlushRequest(s->conn) == 1 && PQflush(s->conn) == 0 ? collect(s, true, false)
												 : TURN_BROKEN;
			if (t != TURN_OK)
				return t;
		}
	}
	return PQpipelineSync(s->conn) == 1 ? TURN_OK : TURN_BROKEN;
}

/* One try of the kept turn: renews a leader's lease first when it was written a second ago or more
 * (an idle or held-up loop: so the turn may wait 3-4 s for its answers before its leader must step
 * down), sends it and, when block, reads its answers; else TURN_PENDING once it is sent. */
static enum turn try_turn(struct pg_store *s, bool block)
{
	s->full = false;
	if (egs__pg_lease_due(s) && !egs__pg_renew_now(s) && s->deposed)
		return TURN_FAILED;
	s->turn.t0 = egs__pg_mono_us();
	enum turn t = send_all(s);
	if (t != TURN_OK)
		return t;
	return block ? collect(s, true, true) : TURN_PENDING;
}

/* Ends the kept turn whose try came to t (not TURN_PENDING): sends it again while it broke or
 * conflicted, and says how it ended.  A leader whose lease ran out counts it failed. */
static enum egs_err resolve(struct pg_store *s, enum turn t)
{
	struct egs_pg_turn *tn = &s->turn;
	for (int tries = 1;; tries++) {
		if (t == TURN_OK && !egs__pg_within_lease(s))
			t = TURN_FAILED; /* committed, perhaps, but too late to say so: stepped down */
		if (t == TURN_OK) {
			if (s->leader && !tn->inject)
				egs__pg_lease_sent(s, tn->t0); /* the turn rewrote the lease */
			return tn->inject ? EGS_ERR_STORAGE_FULL : EGS_OK;
		}
		if (t == TURN_CONFLICT) /* read to its Sync: the failed transaction block is still open */
			s->resent++;
		if (t != TURN_CONFLICT || PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF || !egs__pg_exec(s, "ROLLBACK"))
			egs__pg_drop(s);
		if (t == TURN_FAILED)
			return s->full ? EGS_ERR_STORAGE_FULL : EGS_ERR_STORE;
		if (t == TURN_BROKEN)
			s->retried++;
		if (tries >= MAX_TRIES || !egs__pg_ready(s))
			return EGS_ERR_STORE;
		tn->again = true;
		t = try_turn(s, true);
	}
}

/* After the turn: the GPRs submitted from now on are new rows (egs__pg_fresh) when it committed;
 * after a failure nothing is known. */
static enum egs_err done(struct pg_store *s, enum egs_err err)
{
	s->seq_floor = err ? 0 : s->turn.next_seq;
	stmts_clear(&s->turn);
	return err;
}

/* Builds the turn and sends it; TURN_PENDING when it is on its way. */
static enum turn start(struct pg_store *s, struct egs_state *st)
{
	bool inject = s->fail_path && access(s->fail_path, F_OK) == 0;
	s->turn.again = false;
	if (!build(s, st, inject))
		return TURN_FAILED;
	return try_turn(s, false);
}

/* The turn in flight has ended with err: its socket leaves the epoll set, and its outcome is kept
 * for sync_poll (a failure) or counts durable (acked). */
static void ended(struct pg_store *s, enum egs_err err)
{
	if (s->ep_sock >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->ep_sock, NULL); /* gone already with a closed socket */
	s->ep_sock = -1;
	done(s, err);
	if (err && !s->failed)
		s->failed = err;
}

void egs__pg_settle(struct pg_store *s)
{
	if (!s->turn.inflight)
		return;
	s->turn.inflight = false; /* a retry below reconnects through egs__pg_ready */
	ended(s, resolve(s, collect(s, true, true)));
	uint64_t one = 1;
	if (!s->news && write(s->news_fd, &one, sizeof(one)) == sizeof(one))
		s->news = true; /* the loop takes the news (sync_poll) at its next turn */
}

/* Reads what has come of the turn in flight, without waiting; ends it when all has. */
static void poll_turn(struct pg_store *s)
{
	if (!s->turn.inflight)
		return;
	enum turn t = collect(s, false, true);
	if (t == TURN_PENDING)
		return;
	s->turn.inflight = false;
	ended(s, resolve(s, t));
}

enum egs_err egs__pg_commit(struct egs_store *b, struct egs_state *st)
{
	struct pg_store *s = (struct pg_store *)b;
	if (!egs__pg_ready(s)) /* settles a turn in flight first */
		return EGS_ERR_STORE;
	if (s->failed) { /* told here instead of by sync_poll: the caller fails what waits for it */
		enum egs_err err = s->failed;
		s->failed = EGS_OK;
		return err;
	}
	enum turn t = start(s, st);
	if (t == TURN_PENDING)
		t = collect(s, true, true);
	return done(s, resolve(s, t));
}

enum egs_err egs__pg_commit_send(struct egs_store *b, struct egs_state *st)
{
	struct pg_store *s = (struct pg_store *)b;
	if (!egs__pg_ready(s))
		return EGS_ERR_STORE;
	if (s->failed) {
		enum egs_err err = s->failed;
		s->failed = EGS_OK;
		return err;
	}
	enum turn t = start(s, st);
	if (t != TURN_PENDING)
		return done(s, resolve(s, t)); /* it could not be sent: ended here, waiting */
	struct egs_pg_turn *tn = &s->turn;
	tn->inflight = true;
	tn->wno = s->base.written + 1; /* store.c counts it when this returns EGS_OK */
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.fd = PQsocket(s->conn);
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, ev.data.fd, &ev) == 0 || errno == EEXIST)
		s->ep_sock = ev.data.fd;
	/* Answers libpq read already while it sent (it reads when the socket is full) leave the socket
	 * quiet: take them now. */
	poll_turn(s);
	return EGS_OK;
}

uint64_t egs__pg_acked(struct egs_store *b)
{
	struct pg_store *s = (struct pg_store *)b;
	if (s->failed)
		return s->base.durable; /* nothing moves before the failure is told */
	return s->turn.inflight ? s->turn.wno - 1 : s->base.written;
}

void egs__pg_sync_request(struct egs_store *b, uint64_t upto)
{
	(void)b; /* the turn in flight is on its way: its answer comes without asking */
	(void)upto;
}

int egs__pg_sync_fd(struct egs_store *b)
{
	return ((struct pg_store *)b)->epfd;
}

/* What sync_poll and sync_wait say: a failure once, with every write so far then counted as ended. */
static enum egs_err tell(struct pg_store *s, uint64_t *durable)
{
	uint64_t n;
	if (s->news && read(s->news_fd, &n, sizeof(n)) >= 0)
		s->news = false;
	enum egs_err err = s->failed;
	s->failed = EGS_OK;
	*durable = err ? s->base.written : egs__pg_acked(&s->base);
	return err;
}

enum egs_err egs__pg_sync_poll(struct egs_store *b, uint64_t *durable)
{
	struct pg_store *s = (struct pg_store *)b;
	poll_turn(s);
	return tell(s, durable);
}

enum egs_err egs__pg_sync_wait(struct egs_store *b, uint64_t upto, uint64_t *durable)
{
	(void)upto; /* one turn in flight at most: waiting for it covers every write */
	struct pg_store *s = (struct pg_store *)b;
	egs__pg_settle(s);
	return tell(s, durable);
}
