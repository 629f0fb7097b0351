/*
 * store_pg.h: what the PostgreSQL store's files share (store_pg.c: connection, leadership, group
 * commit, load; store_pg_batch.c: a turn's rows as one statement per table, through the binder of
 * store_rows.c; store_pg_rows.c: the row source store_rows_read.c reads loaded rows through;
 * store_schema.c: the migrations, shared with SQLite).
 * Internal to src/store.
 *
 * A turn's rows travel as binary-format array parameters, one per column (store_pg_batch.c: numbers
 * as big-endian bytes, JSON as text, the API key hash as bytea); results are read in text format.  The
 * column lists of egs_rows_kinds (store_rows_read.c, shared with SQLite) are the single source of
 * the bind order and of the load's column order.
 */
#ifndef EGS_STORE_PG_H
#define EGS_STORE_PG_H

#include "core/buf.h"
#include "core/state.h"
#include "store/store_impl.h"
#include "store/store_rows.h"

#include <libpq-fe.h>

#define EGS_PG_MAX_COLS 40
/* The leader's lease (store_pg_lead.c): its expiry is EGS_PG_LEASE_MS after the database ran the
 * write, by the database clock; the leader acknowledges for EGS_PG_LEASE_MS - EGS_PG_MARGIN_MS after
 * it sent that write, by its own monotonic clock. */
#define EGS_PG_LEASE_MS 6000
#define EGS_PG_MARGIN_MS 2000
#define EGS_PG_DB_NOW_MS "floor(extract(epoch from clock_timestamp()) * 1000)::bigint"
#define EGS_PG_STR_(x) #x
#define EGS_PG_STR(x) EGS_PG_STR_(x)

/* One statement of a turn, kept with copies of its parameters until the turn's COMMIT answers, so
 * that a retry sends it again (store_pg_commit.c). */
struct egs_pg_stmt {
	char name[16];            /* the prepared statement; "" for sql */
	const char *sql;          /* when name is "": "BEGIN", "COMMIT" or "ROLLBACK" (static) */
	int n;                    /* parameters, at most EGS_PG_MAX_COLS */
	size_t off;               /* in the turn's arena: n value offsets (SIZE_MAX: SQL NULL), n lengths, n formats, the bytes */
	const char *verb, *table; /* what it writes, for its error line (static strings; table may be NULL) */
	int rows;
};

/* The turn being committed (store_pg_commit.c). */
struct egs_pg_turn {
	struct egs_pg_stmt *stmts;
	int n, cap;
	char *arena; /* the statements' parameters, kept from turn to turn (no allocation per turn) */
	size_t used, size;
	int next;          /* the statement whose answer is read next */
	bool in_result;    /* its result was read; the NULL that ends it is next */
	int outcome;       /* what its answers said so far (store_pg_commit.c's enum turn) */
	bool again;        /* this try sends every plain INSERT as its upsert */
	bool inflight;     /* sent by egs_store_commit_send; its answers not all read */
	bool inject;       /* the tests' failure (EGS_STORE_FAIL_IF_EXISTS): ROLLBACK instead of COMMIT */
	int64_t t0;        /* monotonic: when this try was sent (the lease its UPDATE wrote) */
	uint64_t next_seq; /* st->next_seq when it was built: seq_floor once it committed */
	uint64_t wno;      /* its write number (store.c's written) while in flight */
};

/* The handle (store_pg.c opens it; store_pg_lead.c elects, renews and follows with it). */
struct pg_store {
	struct egs_store base; /* first: the handle store.c dispatches through */
	PGconn *conn;
	char *url;
	bool timed_out; /* the server did not answer in time: the session is unusable (dropped at the next call) */
	bool leader;    /* egs_store_lead() took the leader lock: every session must hold it */
	bool deposed;   /* the lock, the epoch or the lease was lost: never commit again */
	int64_t epoch;  /* the fencing number this process leads under (meta leader.epoch) */
	int64_t lease_until_us; /* monotonic: a leader acknowledges nothing after this (store_pg_lead.c) */
	int64_t renewed_us;     /* monotonic: when the last lease write that succeeded was sent */
	int64_t grace_until_us; /* monotonic: a lease write in progress may wait until then (0: none) */
	int64_t loaded_turn;    /* meta leader.turn in the snapshot of the last load */
	bool loaded;            /* a load ran on this handle: it leads only from a current one */
	bool loading;           /* a load is running: a non-leader's queries may take LOAD_TIMEOUT_S */
	bool full;       /* the last failed turn failed for lack of disk (SQLSTATE 53100) */
	char *fail_path; /* EGS_STORE_FAIL_IF_EXISTS (store.h): commits fail as on a full disk meanwhile */
	struct egs_pg_batch *batch; /* the turn's statement being filled (store_pg_batch.c) */
	/* Per table (a kind's, EGS_PG_EVENTS, EGS_PG_AUDIT): its columns' types in the kind's column
	 * order, from the catalog when the statements were prepared (the arrays' element types). */
	uint32_t (*types)[EGS_PG_MAX_COLS];
	/* Rows known new go in as plain INSERTs (store_pg_batch.c, egs__pg_fresh): GPRs whose seq is at
	 * least seq_floor (st->next_seq at the last commit that succeeded; 0: not known, after a start,
	 * a load or a failure), events not yet listed, audit entries.  A try after the first sends every
	 * row as an upsert (a retry, or the turn again after a plain INSERT met an existing key). */
	uint64_t seq_floor;
	int64_t resent; /* turns sent again as upserts after a conflict (the tests read it) */
	int64_t retried; /* turns sent again after their session broke (the tests read it) */
	struct egs_pg_turn turn; /* the turn being committed, kept until its COMMIT answers */
	int epfd;        /* egs_store_sync_fd: an epoll set holding the session's socket while a turn is in flight */
	int ep_sock;     /* the socket in it (-1: none) */
	int news_fd;     /* an eventfd in it, written when a turn ended outside sync_poll (egs__pg_settle) */
	bool news;       /* news_fd was written and not read since */
	enum egs_err failed; /* the turn in flight failed; told once by sync_poll or sync_wait (EGS_OK: none) */
};

/* ---- store_pg.c: the session ---- */
/* The session's last error message (never empty). */
const char *egs__pg_errmsg(struct pg_store *s);
/* Collects the results of the query just sent on the session (sent: whether sending it worked),
 * waiting at most until egs__pg_deadline(s); returns the last result when its status is want (caller
 * PQclears), else NULL after printing "store: <what>: <error>" (a timeout included). */
PGresult *egs__pg_result(struct pg_store *s, bool sent, const char *what, ExecStatusType want);
/* Runs one or more statements with no parameters and expects no rows back (or rows, when
 * want_rows); prints "store: <sql>: <error>" and returns NULL on failure (a timeout included).
 * Caller PQclears. */
PGresult *egs__pg_run(struct pg_store *s, const char *sql, bool want_rows);
bool egs__pg_exec(struct pg_store *s, const char *sql);
/* Prepares sql as statement name on the session; false (reported) on failure. */
bool egs__pg_prepare(struct pg_store *s, const char *name, const char *sql);
/* The session is unusable: never connected, broken, or it timed out. */
bool egs__pg_broken(struct pg_store *s);
/* The session is usable, reconnecting first when it is not (a leader takes the lock again);
 * false when it cannot be, or this process was deposed. */
bool egs__pg_ready(struct pg_store *s);

/* ---- store_pg_commit.c: the group commit, the turn in flight ---- */
/* The ops of store_impl.h: commit_changes (sent and waited for), commit_send (sent; the answer read
 * later), acked, sync_request, sync_fd, sync_poll, sync_wait. */
enum egs_err egs__pg_commit(struct egs_store *b, struct egs_state *st);
enum egs_err egs__pg_commit_send(struct egs_store *b, struct egs_state *st);
uint64_t egs__pg_acked(struct egs_store *b);
void egs__pg_sync_request(struct egs_store *b, uint64_t upto);
int egs__pg_sync_fd(struct egs_store *b);
enum egs_err egs__pg_sync_poll(struct egs_store *b, uint64_t *durable);
enum egs_err egs__pg_sync_wait(struct egs_store *b, uint64_t upto, uint64_t *durable);
/* Reads the turn in flight to its end, waiting (a retry included): before anything else is sent on
 * the session (egs__pg_ready).  Its outcome is kept for sync_poll. */
void egs__pg_settle(struct pg_store *s);
/* Frees the kept statements. */
void egs__pg_turn_cleanup(struct egs_pg_turn *tn);
/* Drops the session: the server rolls back whatever it had open, and the next call reconnects. */
void egs__pg_drop(struct pg_store *s);

/* ---- store_pg_find.c: egs_store_gprs_find (store.h) ---- */
enum egs_err egs__pg_gprs_find(struct egs_store *b, const struct egs_gpr_find *f, egs_store_gpr_fn each, void *ctx);

/* ---- store_pg_lead.c: leadership, the lease, the follower's view ---- */
/* Monotonic microseconds. */
int64_t egs__pg_mono_us(void);
/* Until when a query may take: a leader's lease end, else OP_TIMEOUT_S from now (LOAD_TIMEOUT_S
 * during a load: a large store's scans take longer, and nothing waits on a follower's load). */
int64_t egs__pg_deadline(struct pg_store *s);
/* PQgetResult once the result is there, waiting at most until deadline_us: then s->timed_out is
 * set (and a leader steps down: deposed) and NULL returned. */
PGresult *egs__pg_wait(struct pg_store *s, int64_t deadline_us);
/* A lease write (or a turn carrying one) sent at monotonic t0 succeeded. */
void egs__pg_lease_sent(struct pg_store *s, int64_t t0);
/* A leader's lease was last written a second ago or more. */
bool egs__pg_lease_due(struct pg_store *s);
/* Writes the lease now (may wait past the old lease's end); false on failure (a timeout steps down). */
bool egs__pg_renew_now(struct pg_store *s);
/* A leader may still acknowledge (true for a store that does not lead). */
bool egs__pg_within_lease(struct pg_store *s);
/* Before a leader's reconnect: its queries may wait OP_TIMEOUT_S (nothing is acknowledged before
 * egs__pg_relead wrote the lease again). */
void egs__pg_reconnecting(struct pg_store *s);
/* On a new session of a leader: lock, epoch and lease again, or deposed for good. */
bool egs__pg_relead(struct pg_store *s);
/* Reads meta's leader.turn (0 when absent) on the current session; false on error. */
bool egs__pg_read_turn(struct pg_store *s, int64_t *out);
/* The ops of store_impl.h. */
enum egs_err egs__pg_lead(struct egs_store *b);
enum egs_err egs__pg_try_lead(struct egs_store *b, const char *addr, bool *led);
enum egs_err egs__pg_leader(struct egs_store *b, struct egs_store_leader *out);
enum egs_err egs__pg_renew(struct egs_store *b);
bool egs__pg_deposed(struct egs_store *b);

/* The rows (store_rows.h): the PostgreSQL files know its table of kinds by these names. */
#define egs_pg_kind egs_row_kind
#define egs__pg_kinds egs_rows_kinds
#define egs__pg_nkinds EGS_ROWS_NKINDS
#define EGS_PG_EVENT_COLS EGS_ROWS_EVENT_COLS

/* s->types has two more tables after the kinds: */
#define EGS_PG_EVENTS egs__pg_nkinds
#define EGS_PG_AUDIT (egs__pg_nkinds + 1)

/* The columns of one row of a PGresult for store_rows_read.c (a reader's res is the PGresult, its
 * row the row; store_pg_rows.c). */
extern const struct egs_row_source egs__pg_row_source;

/* The schema (store_schema.c, from store_schema.inc): egs__pg_nmigrations SQL scripts, entry i from version i to i + 1. */
extern const char *const egs__pg_migrations[];
extern const int egs__pg_nmigrations;

/* ---- store_pg_batch.c: a turn's rows of one table in one statement ---- */
#define EGS_PG_BATCH_ROWS 1024 /* rows per statement at most (a larger turn sends several) */

/* The rows of one statement, as one binary-format array per column (store_pg_batch.c). */
struct egs_pg_batch {
	int ncols, nrows;
	int col; /* the next column of the row being bound */
	struct egs_buf cols[EGS_PG_MAX_COLS];
	const uint32_t *types;         /* as given to egs__pg_batch_start (borrowed) */
	uint32_t oid[EGS_PG_MAX_COLS]; /* each column's element type */
	bool nulls[EGS_PG_MAX_COLS];   /* the column holds an SQL NULL */
	/* egs__pg_batch_finish's result: PQsendQueryPrepared's values, lengths and formats */
	const char *params[EGS_PG_MAX_COLS];
	int lengths[EGS_PG_MAX_COLS], formats[EGS_PG_MAX_COLS];
	const char *why; /* the first failure of ours (e.g. unencodable JSON), or NULL */
};

/* Empties b for rows of ncols columns of types[0..ncols) (element type OIDs, s->types[table]; NULL:
 * each column takes the type its values are bound as, text when all are NULL).  A value bound as
 * another type than its column's fails the row (b->why).  The buffers are kept for the next statement. */
void egs__pg_batch_start(struct egs_pg_batch *b, int ncols, const uint32_t *types);
/* Around the binds of one row: bind every column through egs__pg_batch_binder(b) between them.
 * row_end returns false when the row could not be encoded (b->why says why). */
void egs__pg_batch_row_begin(struct egs_pg_batch *b);
bool egs__pg_batch_row_end(struct egs_pg_batch *b);
/* The binder that appends store_rows.c's column values to the row being bound (ctx is b). */
struct egs_row_binder egs__pg_batch_binder(struct egs_pg_batch *b);
/* A one-column row: a key to delete. */
void egs__pg_batch_key(struct egs_pg_batch *b, const char *key);
/* Closes the arrays (at least one row); returns b->ncols binary parameters, borrowed from b until its
 * next start, their lengths and formats in b->lengths and b->formats. */
const char *const *egs__pg_batch_finish(struct egs_pg_batch *b);
/* Frees the buffers (b may be started again). */
void egs__pg_batch_cleanup(struct egs_pg_batch *b);
/* Columns in a comma-separated column list. */
int egs__pg_ncols(const char *cols);
/* Prepares put<kind>, ins<kind>, del<kind>, ev, evi, au and aui: the batch upsert, plain insert
 * and delete of every table. */
bool egs__pg_prepare_batches(struct pg_store *s);
/* Whether change c (not a deletion) writes a row known not to be in the store yet, so that a plain
 * INSERT may write it: a GPR submitted since the last commit that succeeded.  A wrong guess costs a
 * retry, not a lost row: the INSERT fails on the key and the turn is sent again as upserts. */
bool egs__pg_fresh(const struct pg_store *s, const struct egs_change *c);

/* One change of a turn that the commit writes: the last one of its object in the turn. */
struct egs_pg_ref {
	int kind;
	const char *key; /* borrowed from the object */
	size_t pos;      /* in st->changes */
	const struct egs_change *c;
};
/* Fills out (st->changes.len entries) with the turn's changes ordered by kind and key, one per
 * object: the last.  Returns how many. */
size_t egs__pg_turn_rows(const struct egs_state *st, struct egs_pg_ref *out);

/* ---- store_pg_follow.c: the followers' change log (table changes, migration 16) ---- */
#define EGS_PG_CHANGE_EVENT 100 /* the kind of an event in the log (its key is the event id) */
/* Prepares "chg": the turn's log row ($1 kinds, $2 keys: text array literals), written after "turn". */
bool egs__pg_prepare_follow(struct pg_store *s);
/* The two text parameters of "chg" for the turn st is committing. */
struct egs_pg_changes {
	struct egs_buf kinds, keys;
	const char *params[2];
};
void egs__pg_changes_build(struct egs_pg_changes *c, const struct egs_state *st);
void egs__pg_changes_free(struct egs_pg_changes *c);
/* egs_store_follow (store.h). */
enum egs_err egs__pg_follow(struct egs_store *b, egs_store_row_fn row, egs_store_event_fn event, void *ctx);
void egs__pg_adopt_load(struct egs_store *b, const struct egs_store *from);

#endif
