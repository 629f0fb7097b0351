/*
 * store.h: persistence behind one small interface.  Load everything at start; write each loop
 * turn's changes in one transaction (group commit).  A successful egs_store_commit() means the
 * transaction committed; it is on disk once egs_store_durable() reaches its write number (below):
 * SQLite runs in WAL mode with synchronous=NORMAL and fdatasyncs the WAL on a thread; PostgreSQL
 * commits with synchronous_commit on (its default, which egsd sets for its own session), so its
 * commits are durable when they return.
 *
 * Two implementations sit behind these calls (store.c dispatches through an ops table,
 * store_impl.h): store_sqlite.c, the embedded default, and store_pg.c over libpq.  Both have the
 * same tables and the same append-only migrations, each run at open in its own transaction (the
 * version is PRAGMA user_version for SQLite, meta's schema_version row for PostgreSQL).
 */
#ifndef EGS_STORE_H
#define EGS_STORE_H

#include "core/state.h"

struct egs_store;

/* Opens (creating if needed) the database file at path and migrates it to the current schema.
 * On success *out is the store (caller frees with egs_store_free). */
enum egs_err egs_store_open_sqlite(const char *path, struct egs_store **out);
/* Connects to PostgreSQL (url: a libpq connection string or postgres:// URI; borrowed) and migrates
 * the database to the current schema.  On success *out is the store (caller frees). */
enum egs_err egs_store_open_pg(const char *url, struct egs_store **out);
/* egs_store_open_pg, but a failure to reach the database is not logged: its reason (libpq's
 * message, which may span lines) goes to why, for a caller that retries and logs its tries itself. */
enum egs_err egs_store_open_pg_quiet(const char *url, struct egs_store **out, char *why, size_t whylen);
/* Opens url with the implementation it names: postgres:// or postgresql:// is PostgreSQL,
 * anything else a SQLite file path. */
enum egs_err egs_store_open(const char *url, struct egs_store **out);
void egs_store_free(struct egs_store *s); /* NULL is a no-op; rolls back an open transaction */
/* "sqlite" or "postgres" (a static string). */
const char *egs_store_kind(const struct egs_store *s);

/* Makes this process the store's only writer before it loads.  PostgreSQL: takes the leader lock,
 * a session-level advisory lock, waiting (and saying so once on stderr) as long as another egsd
 * holds it; every later commit runs on the session that holds it, and a session lost and found
 * again must take the lock again before its next commit: if another egsd leads by then, that commit
 * fails, so an egsd that lost leadership never commits again (docs/ha.md).  SQLite: nothing to do
 * (one process per file).  Fails only on a store error. */
enum egs_err egs_store_lead(struct egs_store *s);

/* ---- several egsd over one PostgreSQL database (docs/ha.md) ---- */
/* What the store says of the leadership (meta rows the leader writes). */
struct egs_store_leader {
	int64_t epoch;       /* the leader's fencing number (leader.epoch) */
	int64_t turn;        /* its commit counter (leader.turn): moves on with every committed turn */
	int64_t loaded_turn; /* leader.turn as of this handle's last egs_store_load */
	char addr[256];      /* HOST:PORT where it serves (leader.addr), "" when unknown */
};
/* One attempt to lead, without waiting.  When the leader lock is free this session takes it, moves
 * the epoch on, publishes addr (where this egsd serves; may be "") and a lease, and *led is true.
 * A handle that has loaded leads only from a current load: when turns were committed since its last
 * egs_store_load (a leader that died meanwhile), the lock is given back untouched and *led is false
 * (load again, then try again), so nothing is ever loaded under the lease.  When a session whose
 * lease has expired holds it (a stalled leader), that session is ended (the next attempt can take
 * the lock) and *led is false.  SQLite: *led is always true. */
enum egs_err egs_store_try_lead(struct egs_store *s, const char *addr, bool *led);
/* A follower's look at the leadership (one short query).  SQLite: all zero. */
enum egs_err egs_store_leader(struct egs_store *s, struct egs_store_leader *out);
/* A follower's catch-up from the leader's change log (PostgreSQL; docs/ha.md), instead of a load:
 * calls row(ctx, kind, key, obj) for every object that the turns committed since this handle's last
 * load or catch-up wrote, with its current row as a fresh object (the callee takes ownership) or
 * NULL when the row is gone (deleted), and event(ctx, ev) (owned too) for every event they wrote, in
 * id order; all from one snapshot, whose turn then counts as loaded (egs_store_leader's loaded_turn).
 * EGS_ERR_NOT_FOUND, before calling anything: the log does not hold every turn since (pruned, or the
 * handle never loaded): load in full instead.  EGS_ERR_STORE: the store failed, perhaps after some
 * calls: load in full too.  SQLite: EGS_ERR_NOT_FOUND. */
typedef void (*egs_store_row_fn)(void *ctx, enum egs_kind kind, const char *key, void *obj);
typedef void (*egs_store_event_fn)(void *ctx, struct egs_event *ev);
enum egs_err egs_store_follow(struct egs_store *s, egs_store_row_fn row, egs_store_event_fn event, void *ctx);
/* The model in use is now the last egs_store_load of `from`, another handle of the same store (a
 * follower's full load on a thread of its own, src/server/replica_load.c): s follows the change log
 * and leads from that load's snapshot, as if it had loaded it itself.  Nothing when from never
 * loaded or is another kind of store.  SQLite: nothing. */
void egs_store_adopt_load(struct egs_store *s, const struct egs_store *from);
/* A leader renews its lease (about once a second).  An error means it could not before the lease
 * ran out: the store is then deposed and acknowledges nothing more.  SQLite: nothing to do. */
enum egs_err egs_store_renew(struct egs_store *s);
/* This process led and lost it (deposed, or stepped down at the end of its lease): no commit of it
 * will succeed again. */
bool egs_store_deposed(struct egs_store *s);

/* Current schema version of this build. */
int egs_store_schema_version(void);

/* Loads every object and the most recent events (up to st->cfg.event_retention) into st, which must
 * be freshly initialised, except finished GPRs that finished before st->aged_before (core/aging.h:
 * counted, not kept; those a node or a CR link names are read back by key).  Objects are added with
 * egs_state_add_* (so queued GPRs enter the queue).
 * st->next_event_id is set past the largest stored event id, and the planner's holds are rebuilt
 * (egs_held_restore). */
enum egs_err egs_store_load(struct egs_store *s, struct egs_state *st);

/* ---- finished GPRs that left memory (core/aging.h: egsd --finished-retention) ---- */
/* What egs_store_gprs_find matches: rows of gprs in a finished state (Complete, Cancelled, Rejected,
 * Error) that match every field set here.  Strings are borrowed. */
struct egs_gpr_find {
	const char *id;        /* this gprId only; NULL for any */
	const char *workspace; /* NULL for any */
	const char *state;     /* one finished state's name; NULL for any finished one */
	const char *after_id;  /* gprId greater than this (paging); NULL from the first */
	int64_t ended_since;   /* completion_ts >= this; 0 for no bound */
	size_t limit;          /* at most this many rows; 0 for all */
};
/* Receives one row as a fresh GPR and takes ownership of it. */
typedef void (*egs_store_gpr_fn)(void *ctx, struct egs_gpr *g);
/* Calls each(ctx, g) for every row f matches, in gprId order.  The query goes by the primary key
 * (id), or by one of two partial indexes over finished rows only, gprs_finished_ws (workspace, id)
 * and gprs_finished_at (completion_ts), so it reads the rows it returns and few more (a `state`
 * filter without a workspace walks finished rows in id order).  Fails with EGS_ERR_STORE (printed
 * on stderr) when the query or a row does; rows given before that stay given. */
enum egs_err egs_store_gprs_find(struct egs_store *s, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx);

/* Writes st's pending changes and new events in one transaction and commits it (durable: above).  On
 * failure the transaction is rolled back and the error returned (EGS_ERR_STORAGE_FULL when the
 * disk is full, else EGS_ERR_STORE); st is not modified either way (the caller clears the changes
 * after success).  A no-op when there are no changes.  For tests, while the file named by the
 * environment variable EGS_STORE_FAIL_IF_EXISTS (read at open) exists, every commit fails as on a
 * full disk, after writing its rows and before COMMIT. */
enum egs_err egs_store_commit_changes(struct egs_store *s, struct egs_state *st);

/* The commit turn's call (server.c): like egs_store_commit_changes, but it may return before the
 * turn's outcome is known.  PostgreSQL sends the turn and returns EGS_OK; the turn's write number
 * (below) then counts durable once its COMMIT answered, and a failure after the send is told once,
 * as the error of egs_store_sync_done or egs_store_sync_wait (EGS_ERR_STORE, or
 * EGS_ERR_STORAGE_FULL), when every write so far counts durable again: what waited for the failed
 * turn must be refused by the caller (none of it may be acknowledged).  An error returned here
 * means the turn failed (nothing of it stored), or that the turn sent before failed and was not told
 * yet.  SQLite: egs_store_commit_changes. */
enum egs_err egs_store_commit_send(struct egs_store *s, struct egs_state *st);

/* ---- durability (docs/internals/store.md, "Durability apart from the commit") ----
 * Every write transaction that committed (a commit of changes, a meta set, a prune) gets the next
 * write number.  PostgreSQL's are durable when their COMMIT answered: at once, but for a turn sent by
 * egs_store_commit_send, whose answer the loop reads when the descriptor of egs_store_sync_fd is
 * readable (egs_store_sync_done).  SQLite commits with synchronous=NORMAL
 * (in the WAL, not yet fsynced) and a thread of the store fdatasyncs the WAL apart from the commit:
 * egs_store_sync asks for it, the descriptor of egs_store_sync_fd becomes readable when it is done,
 * and egs_store_sync_done then moves egs_store_durable.  Loop thread only. */
/* Write transactions committed so far; the highest write number known to be on disk. */
uint64_t egs_store_written(const struct egs_store *s);
uint64_t egs_store_durable(const struct egs_store *s);
/* Asks for every write so far to be made durable; returns at once (a no-op when it was asked). */
void egs_store_sync(struct egs_store *s);
/* A descriptor that is readable once a requested sync ended, or -1 (writes durable at once). */
int egs_store_sync_fd(struct egs_store *s);
/* Takes the news of that descriptor without waiting: egs_store_durable moves.  EGS_ERR_IO when an
 * fdatasync failed: nothing after the last durable write can be claimed on disk, now or later (the
 * caller exits).  EGS_ERR_STORE or EGS_ERR_STORAGE_FULL: a turn sent by egs_store_commit_send failed
 * (above). */
enum egs_err egs_store_sync_done(struct egs_store *s);
/* Blocks until every write so far is durable (start-up, shutdown); errors as above. */
enum egs_err egs_store_sync_wait(struct egs_store *s);
/* Whether the next commit should wait although every write is durable: SQLite copies a long WAL out
 * (a catch-up, docs/internals/store.md) so that the next commit writes it again from its start; the
 * descriptor of egs_store_sync_fd becomes readable when it ended.  A commit made meanwhile is safe
 * (the WAL then grows on).  Always false for PostgreSQL. */
bool egs_store_commit_held(struct egs_store *s);

/* ---- the store's own timings (/metrics; docs/internals/store.md, "What /metrics shows") ----
 * How long the durability thread's fdatasyncs, the checkpoints and the catch-ups took, so that a reply's
 * wait can be told apart from the loop's: SQLite only. */
#define EGS_STORE_TIME_BUCKETS 7 /* upper bounds 1, 2, 5, 10, 20, 50, 100 ms, then +Inf */
struct egs_store_timing {
	uint64_t count;
	uint64_t buckets[EGS_STORE_TIME_BUCKETS + 1]; /* not cumulative; the last is +Inf */
	int64_t sum_us, max_us;
};
struct egs_store_stats {
	struct egs_store_timing fsync;      /* fdatasyncs of the WAL: each acknowledged write waits for one */
	struct egs_store_timing checkpoint; /* checkpoints: the WAL's pages copied into the database file */
	struct egs_store_timing catch_up;   /* catch-ups of a long WAL: each held the next commit */
	uint64_t wal_restarts;              /* commits that wrote the WAL again from its start */
};
/* Upper bounds of the buckets above, in microseconds. */
extern const int64_t egs_store_time_le_us[EGS_STORE_TIME_BUCKETS];
/* Copies the store's timings into *out and returns true; false (and *out zeroed) for a store that
 * has none (PostgreSQL: its COMMIT answers when durable).  Loop thread. */
bool egs_store_stats(struct egs_store *s, struct egs_store_stats *out);
/* Adds one duration to a timing (the store's threads, under their lock). */
void egs_store_timing_add(struct egs_store_timing *t, int64_t us);

/* Small key/value settings that must survive restarts (e.g. the token-signing secret). */
enum egs_err egs_store_meta_get(struct egs_store *s, const char *key, char **value /* caller frees; NULL if absent */);
enum egs_err egs_store_meta_set(struct egs_store *s, const char *key, const char *value); /* own transaction */

/* Deletes events older than `before` (UNIX seconds); returns how many in *deleted (may be NULL). */
enum egs_err egs_store_prune_events(struct egs_store *s, int64_t before, int64_t *deleted);
/* Same, and also deletes events with an id below below_id (retention by count; 0 = none). */
enum egs_err egs_store_prune_events_below(struct egs_store *s, int64_t before, int64_t below_id, int64_t *deleted);

/* ---- the audit log (table audit; server/audit.h) ---- */
/* Entries written by egs_store_commit_changes from st->new_audit; these read and prune them. */
struct egs_audit_filter {
	int64_t since, until; /* time >= since and time < until (0: no bound) */
	const char *actor;    /* a key id or key name, NULL for all (borrowed) */
	int64_t after_id;     /* id > after_id: the paging cursor */
	size_t limit;         /* at most this many */
};
/* Fills out (empty on entry) with the matching entries, oldest first (by id): struct egs_audit*,
 * the caller frees each with free(). */
enum egs_err egs_store_audit_list(struct egs_store *s, const struct egs_audit_filter *f, struct egs_vec *out);
/* Deletes the entries older than before (UNIX seconds); *deleted (may be NULL) gets how many. */
enum egs_err egs_store_audit_prune(struct egs_store *s, int64_t before, int64_t *deleted);
/* The largest stored audit id (0 when none) into *out: egsd continues after it. */
enum egs_err egs_store_audit_last_id(struct egs_store *s, int64_t *out);

#endif
