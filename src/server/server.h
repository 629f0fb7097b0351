/*
 * server.h: egsd's shared pieces: the server object owned by the loop thread, the per-request
 * context, replies in the public envelope, input validation helpers and access checks.
 *
 * Threading: everything here runs on the one libevent loop thread that owns struct egs_state.
 * Durability: a reply is "held" while the current loop turn has uncommitted changes; the commit
 * event (lowest priority, so it runs after every other ready event of the turn) writes the turn's
 * changes in one transaction, and the held replies then wait until the store's fsync covering that
 * commit returned (durable.c), while the loop goes on with the next turn.  A reply of a turn without
 * changes waits too while any committed write is not yet durable.  No client ever sees state that
 * is not on disk.
 */
#ifndef EGS_SERVER_H
#define EGS_SERVER_H

#include "core/state.h"
#include "store/store.h"

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <sodium.h>

#define EGS_MAX_BODY (1024 * 1024)
#define EGS_MAX_HEADERS (16 * 1024)

struct egs_principal {
	enum egs_role role;
	const struct egs_apikey *key; /* borrowed; NULL for the bootstrap file key? never: always a key */
	char key_id[EGS_ID_MAX];
	char project[EGS_NAME_MAX];   /* "" = every project */
	char workspace[EGS_NAME_MAX]; /* "" = every workspace of the project */
	char cluster[EGS_NAME_MAX];   /* agents */
};

struct egs_hreq; /* the front's request (conn.h) */

struct egs_req {
	struct egs_server *srv;
	struct egs_hreq *hq; /* the front's request; NULL once answered (or taken by a handler) */
	enum evhttp_cmd_type method;
	char path[512];
	struct evkeyvalq query;
	json_t *body; /* parsed JSON object or NULL */
	struct egs_principal who;
	bool authed;
	int64_t t0_us;
	int status; /* the HTTP status of the reply once one was sent or held; 0 before */
};

struct egs_poll; /* a held agent long poll */
struct egs_policy; /* core/policy.h */
struct egs_portal; /* portal.h */

#define EGS_SLICE_BUCKETS 6 /* slice_hist's bounds: 1, 2, 5, 10, 20, 50 ms */
#define EGS_SLOW_KINDS 32   /* kinds of slow_steps kept */
#define EGS_SHOWN_MARKS 8   /* commits not yet durable kept for the shown clock (durable.c) */

struct egs_server {
	struct event_base *base;
	struct egs_store *store;
	struct egs_state st;
	char *data_dir;
	const char *admin_key_file; /* borrowed: --admin-key-file, the bootstrap admin key to adopt, or NULL */
	const char *store_url; /* --store-url: NULL means SQLite at data_dir/egs.db (borrowed) */
	bool dev_clock;
	int64_t dev_clock_base; /* the dev clock's time at start (it stands still) */
	int64_t clock_offset;   /* seconds the dev clock was advanced */
	int64_t token_ttl_s;
	struct egs_state_config state_cfg; /* scheduler settings from the command line (0 = default) */
	unsigned char token_secret[crypto_auth_KEYBYTES];
	struct event *commit_ev; /* lowest priority: commit then flush */
	struct event *plan_ev;   /* timer: run the scheduler */
	struct event *tick_ev;   /* 1 s housekeeping */
	struct event *sig_ev[3]; /* SIGTERM, SIGINT, SIGHUP (reload the TLS certificate) */
	struct egs_vec held;     /* struct held_reply*, waiting for the turn's commit */
	struct egs_vec waiting;  /* struct held_reply*, committed, waiting for the fsync (durable.c) */
	struct event *durable_ev; /* the store's sync descriptor is readable: an fsync ended (durable.c) */
	bool turn_deferred;       /* a commit turn waits for the fsync in flight to end (server.c, durable.c) */
	/* Status views that show only durable changes go out at once (durable.c, "Shown"): the change
	 * clock (state.h view_clock) at each commit not yet durable, with the commit's write number,
	 * oldest first, and the clock up to which every change is durable. */
	struct {
		struct {
			uint64_t clock, write;
		} mark[EGS_SHOWN_MARKS];
		size_t len;
		uint64_t upto;
		uint64_t prices; /* the change clock of the last price change (api_usage.c); 0 after a reset */
	} shown;
	struct egs_vec polls;    /* struct egs_poll*, agents' long polls */
	struct egs_plan *plan;   /* the last walk, for cheap appends */
	struct egs_gpr *aged_read; /* the finished GPR last read back from the store (server/aged.h), owned */
	unsigned aged_sweeps;      /* sweeps of finished GPRs so far (server/aged.c) */
	int64_t next_wake;       /* scheduler's next due time */
	uint64_t planned_gen;    /* st.generation at the last plan */
	struct event *slice_ev;  /* timer: the next slice of a scheduler run in progress (server.c) */
	size_t slice_gprs;       /* GPRs the next slice walks */
	int64_t slice_max_us;    /* the longest slice (or run set-up) so far, wall microseconds */
	int64_t slice_max_cpu_us; /* ... and the most CPU time one took */
	/* Slices by length (server.c note_slice; /metrics): [0] wall, [1] CPU, in buckets up to 1, 2,
	 * 5, 10, 20, 50 ms and above: a bench tells the stalls of a window from the counts' growth. */
	uint64_t slice_hist[2][EGS_SLICE_BUCKETS + 1];
	int64_t slice_sum_us[2]; /* their sums */
	/* Steps of runs that took over 5 ms of CPU, by what they did (egs_sched_piece's static names;
	 * /metrics egs_scheduler_slow_steps_total): a bench sees which pieces still stall. */
	struct {
		const char *what;
		uint64_t n;
	} slow_steps[EGS_SLOW_KINDS];
	int64_t step_max_cpu_us;  /* the most CPU time one step of a run took (or its set-up) */
	const char *step_max_what; /* what that step did (egs_sched_piece; static), NULL before any */
	/* Totals of the scheduler runs (server.c plan driver; /metrics): the loop's CPU spent in them,
	 * runs ended (resumed: from the kept plan's snapshot; stale: requests changed the state on the
	 * way, so the plan is due again), and their wall time from begin to end (how old an estimate
	 * can be when its run ends). */
	int64_t plan_cpu_us, run_wall_us, run_wall_max_us, run_begun_us;
	int64_t commit_cpu_us; /* the loop's CPU in the commit turns' store commits (/metrics) */
	uint64_t runs, runs_resumed, runs_stale;
	FILE *log;
	bool log_requests;
	bool stopping;
	uint64_t requests;
	struct egs_views *views; /* kept status replies (gpr_view.c), owned */
	uint64_t view_epoch;     /* moved by egs_views_changed: kept views older than it are dropped */
	struct egs_obs *obs; /* observability runtime (observe.h), owned */
	struct egs_policy *policy_global; /* the global limits (api_policy.c), owned */
	int max_nodes_per_gpr;            /* egsd --max-nodes-per-gpr: the global one unless an admin set it */
	struct egs_portal *portal;        /* the web portal at / (portal.h), borrowed from main; NULL = none */
	struct egs_conns *conns;          /* the connection front (conn.h), owned */
	long max_connections;             /* egsd --max-connections; 0 = from the descriptor limit */
	bool allow_private_webhooks;      /* egsd --allow-private-webhooks */
	int64_t audit_retention_days;     /* egsd --audit-retention: audit entries kept this long (0 = forever) */
	const char *tls_cert, *tls_key;   /* egsd --tls-cert/--tls-key (borrowed from argv); NULL = plain HTTP */
	struct ssl_ctx_st *tls;           /* OpenSSL's SSL_CTX made from them (tls.h), owned; NULL = plain */
	json_t *unmanaged; /* cluster name -> [unmanaged node object]: GPU nodes their agent reported as
			    * opted out of EGS (runtime only, replaced by each registration; never scheduled) */
	uint64_t store_failures;          /* failed commits since the last log line (reload.c) */
	int64_t store_fail_logged;        /* monotonic second of that line */
	unsigned char kubecred_key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES]; /* seals slice tokens (kubecred.c) */
	/* Several egsd over one PostgreSQL database (replica.c, docs/ha.md). */
	const char *advertise;     /* egsd --advertise HOST:PORT (borrowed), or NULL: from --listen */
	char advertised[256];      /* where this egsd serves, as published when it leads */
	bool follower;             /* another egsd leads: serve reads, forward writes, follow the store */
	bool stepped_down;         /* this egsd led and lost it: exiting (status 70) */
	struct egs_store_leader leader; /* the leadership as last read from the store */
	int64_t synced_us;         /* monotonic: the follower's last successful look at the store */
	bool resync;               /* the follower's model may differ from the store: load it again */
	uint64_t follow_loads;     /* a follower's full loads since its start (/healthz fullLoads) */
	uint64_t follow_applies;   /* its catch-ups from the change log (/healthz appliedCatchUps; follow.c) */
	int64_t pinged_us;         /* monotonic: a follower's last keep-alive on its event streams */
	struct event *follow_ev;   /* a follower's timer: look at the store, take over when the lock is free */
	struct egs_full_load *full_load; /* a follower's full load running off the loop (replica_load.c) */
	struct ssl_ctx_st *fwd_tls; /* under TLS: the client context of forwarded requests (forward.c), owned */
	int64_t slice_token_ttl_s; /* egsd --slice-token-ttl: the slice token lifetime asked of agents (0: 7 days) */
	json_t *slice_ns; /* cluster name -> [slice namespace]: what its agent last reported (kubeslice.c;
			   * runtime only) */
};

/* Wall-clock now in seconds (shifted by the dev clock), and a monotonic microsecond clock. */
int64_t egs_now(const struct egs_server *srv);
int64_t egs_mono_us(void);

/* Copies s into out (outsz >= 5) for a log line: bytes that are not printable ASCII, spaces, quotes
 * and backslashes become \xNN, so client input can neither forge a line nor send terminal escapes.
 * Cut at a whole escape when out is full.  Returns out. */
const char *egs_log_escape(const char *s, char *out, size_t outsz);

/* ---- replies (each handler sends exactly one) ---- */
/* 200 with data (stolen; NULL means JSON null). */
void egs_reply_ok(struct egs_req *r, json_t *data);
/* egs_reply_ok with data {key: value}, the same bytes, without building JSON for it (a create's
 * reply: jansson's pack and dump were ~7,000 instructions).  key is "gprId" or "keyId" and value
 * plain printable ASCII that JSON does not escape (an id); the audit names value as the target, as
 * it does for such a reply built as JSON. */
void egs_reply_ok_str(struct egs_req *r, const char *key, const char *value);
/* An error reply: status and errorKey come from err (or key, when not NULL); message printf-style.
 * field (may be NULL) goes into error.data.field. */
void egs_reply_err(struct egs_req *r, enum egs_err err, const char *key, const char *field, const char *fmt,
		   ...) __attribute__((format(printf, 5, 6)));
/* A 422 naming the field. */
#define egs_reply_invalid(r, field, ...) egs_reply_err((r), EGS_ERR_INVALID, NULL, (field), __VA_ARGS__)
/* Sends body (borrowed; its bytes are moved out) with status at once, not in the envelope: for
 * answers that read no state (the portal's files).  Set headers first. */
struct evbuffer;
void egs_reply_raw(struct egs_req *r, int status, struct evbuffer *body);
/* 200 with json, a whole envelope already serialized (the kept views of gpr_view.c), sent without a
 * copy: json[0..len) must stay as it is until release(json, len, arg) is called, once, when the reply
 * no longer needs it (sent, or dropped with its connection).  Only for reads: a write's reply goes
 * through egs_reply_ok, which audits it. */
void egs_reply_json_ref(struct egs_req *r, const char *json, size_t len,
			void (*release)(const void *json, size_t len, void *arg), void *arg);
/* egs_reply_json_ref for a reply that shows no change made after change clock shows (state.h
 * view_clock; a kept status view, gpr_view.c): it goes out at once when every change up to shows is
 * durable (egs_durable_shown), even while other changes wait for their commit or fsync; otherwise it
 * waits as any reply does. */
void egs_reply_view_ref(struct egs_req *r, const char *json, size_t len, uint64_t shows,
			void (*release)(const void *json, size_t len, void *arg), void *arg);
/* Adds a response header (before replying). */
void egs_reply_header(struct egs_req *r, const char *name, const char *value);
/* The request's first header field named name (case-insensitive), or NULL.  Borrowed until the
 * reply. */
const char *egs_req_header(const struct egs_req *r, const char *name);
/* The dispatcher (http.c): the front (conn.h) calls it for every request. */
void egs__http_on_request(struct egs_hreq *hq, void *arg);

/* Replaces every held reply of the turn by the error envelope of err (key, message): the turn's
 * commit failed, so none of what they answered is saved. */
void egs_server_fail_held(struct egs_server *srv, enum egs_err err, const char *key, const char *msg);
/* The same for every reply in srv->waiting that waits for a write after write number after: a turn
 * sent to the store failed after it was sent (egs_store_commit_send); they go out with the next
 * egs_server_send_durable. */
void egs_server_fail_waiting(struct egs_server *srv, uint64_t after, enum egs_err err, const char *key, const char *msg);
/* After a failed commit (reload.c): answers the turn's held replies 507/503 and logs at most once a
 * second. */
void egs_server_store_failed(struct egs_server *srv, enum egs_err err);
/* A turn's commit failed (reload.c), when it was sent (err from egs_store_commit_send) or later (err
 * from egs_store_sync_done or egs_store_sync_wait; PostgreSQL): every reply held for the turn, and
 * every waiting reply whose writes come after write number after (the durable one before the store
 * told the failure), is answered 507/503; then a deposed leader steps down, and any other rebuilds
 * the model from the store (egs_server_reload), exiting 70 when it cannot. */
void egs_server_turn_failed(struct egs_server *srv, enum egs_err err, uint64_t after);
/* Replaces srv->st by a fresh load of the store, keeping runtime-only fields by key; resets the
 * planner's cache.  Returns the load's error (the old model then stays).  A leader on PostgreSQL
 * loads through egs_full_load_wait, keeping its lease. */
enum egs_err egs_server_reload(struct egs_server *srv);
/* The second half of egs_server_reload: puts fresh (a loaded model, taken and freed) in place of
 * srv->st, with the runtime-only fields carried over (the GPRs' only unless gprs_carried: the
 * caller carried them with egs_carry_gprs).  Returns the policies' parse error. */
enum egs_err egs_server_swap_model(struct egs_server *srv, struct egs_state *fresh, bool gprs_carried);
/* Carries the runtime-only fields of at most max of fresh's GPRs from old's GPRs of the same id,
 * from *pos (a cursor over fresh's GPRs, 0 at first) on; true once every GPR is carried. */
bool egs_carry_gprs(const struct egs_state *old, struct egs_state *fresh, size_t *pos, size_t max, int64_t now);
/* A follower's full load on a thread of its own (replica_load.c), so that its loop goes on serving
 * reads from the old model meanwhile.  _start begins one from srv's store URL and clock (an error:
 * none could start); _finish, when the one running has ended, swaps its model in (its handle's
 * snapshot becomes srv->store's loaded turn), sets *err to the load's error (the old model stays
 * on error) and returns true; false while it runs or when none was started.  _abandon, at exit,
 * leaves a running load to free itself. */
enum egs_err egs_full_load_start(struct egs_server *srv);
bool egs_full_load_finish(struct egs_server *srv, enum egs_err *err);
/* Whether the load that runs has ended and waits for egs_full_load_finish's next call to carry
 * more of its GPRs' runtime fields on the loop (call it again soon). */
bool egs_full_load_carrying(const struct egs_server *srv);
void egs_full_load_abandon(struct egs_server *srv);
/* A leader's reload on PostgreSQL: the same load on its thread, waited for while the lease is
 * renewed on srv->store's session (the loop answers nothing meanwhile).  The load's error, or
 * EGS_ERR_UNAVAILABLE when the lease could not be renewed (the store stepped down; the load is
 * abandoned). */
enum egs_err egs_full_load_wait(struct egs_server *srv);
/* Frees a model nothing points into any more (taken) on a thread of its own, or at once when no
 * thread can start. */
void egs_state_free_later(struct egs_state *old);
/* A follower applies what the leader committed since its last load or catch-up, from the store's
 * change log (follow.c); *rows (may be NULL) gets how many rows and events it applied.  An error
 * (EGS_ERR_NOT_FOUND: the log lacks turns; others: the store failed or a row could not be applied,
 * the model may hold part of it): load in full (egs_server_reload). */
enum egs_err egs_follow_apply(struct egs_server *srv, size_t *rows);
/* After a commit (or a failed one, whose replies fail_held rewrote): the turn's held replies join
 * srv->waiting, each waiting for every write committed so far; asks the store to sync them and
 * sends what is durable already. */
void egs_server_flush(struct egs_server *srv);
/* At exit: drops the held and waiting replies unsent (their requests are freed). */
void egs_server_drop_replies(struct egs_server *srv);
/* Sends every waiting reply whose writes are durable (egs_store_durable), keeping the others. */
void egs_server_send_durable(struct egs_server *srv);
/* ---- durability apart from the commit (durable.c; docs/internals/http.md) ---- */
/* Watches the store's sync descriptor (SQLite: the fsync thread's; PostgreSQL: the session's socket
 * while a turn is in flight). */
void egs_durable_start(struct egs_server *srv);
/* Takes the store's news without waiting: sends the replies whose writes are durable now, handles a
 * turn that failed after it was sent (egs_server_turn_failed), and commits a deferred turn once
 * nothing is in flight. */
void egs_durable_poll(struct egs_server *srv);
/* Blocks until every committed write is durable, then sends the waiting replies (shutdown).  An
 * fsync failure exits (egs_durable_failed); a turn that failed after it was sent is handled
 * (egs_server_turn_failed). */
void egs_durable_wait(struct egs_server *srv);
/* The same for the turn just sent (whose events leave egsd by other ways than replies: event
 * streams, webhooks), before they are sent: returns the turn's failure instead of handling it (the
 * caller does, its held replies included), EGS_OK when every write is durable. */
enum egs_err egs_durable_settle(struct egs_server *srv);
/* Whether the turn about to be committed has events that leave egsd other than in replies (to an
 * event stream, as a webhook message): those cannot wait in srv->waiting, so that turn waits for
 * its commit and fsync (egs_durable_settle) before they are sent. */
bool egs_durable_turn_leaves(const struct egs_server *srv);
/* An fsync failed: nothing since the last durable write may be on disk.  Logs fatal and exits 70
 * without sending the waiting replies; the restart loads what the disk holds. */
void egs_durable_failed(struct egs_server *srv) __attribute__((noreturn));
void egs_durable_stop(struct egs_server *srv);
/* After a turn's commit (sent, with PostgreSQL): pairs the change clock with the commit's write
 * number, so that once that write is durable every change made so far counts durable. */
void egs_durable_mark(struct egs_server *srv);
/* A turn sent to the store failed: forgets the marks of writes after write number after (the store
 * counts them ended, but they are lost). */
void egs_durable_forget(struct egs_server *srv, uint64_t after);
/* The model was replaced or changed in bulk without touches (a reload, a follower's load or sync, a
 * takeover): nothing of it counts durable until every write made so far is. */
void egs_durable_shown_reset(struct egs_server *srv);
/* The change clock up to which every change of the model is durable: the clock of the last mark
 * whose write is durable, or the clock now when nothing waits for a commit or an fsync.  0 on a
 * follower or after stepping down (their replies keep the rule of finish_buf, http.c). */
uint64_t egs_durable_shown(struct egs_server *srv);
/* Notes that the turn made changes: arms the commit event. */
void egs_server_changed(struct egs_server *srv);
/* Makes sure the scheduler runs again at t (UNIX seconds) at the latest. */
void egs_server_wake_at(struct egs_server *srv, int64_t t);
/* Runs the scheduler now and arms the commit. */
void egs_server_plan_now(struct egs_server *srv);

/* ---- replicas (replica.c, forward.c; docs/ha.md) ---- */
/* Writes the first objects of an empty store (default project, admin key, token secret); the leader
 * runs it at start or when it takes over (server.c). */
enum egs_err egs_server_bootstrap(struct egs_server *srv);
/* The leader lost the store (deposed, or its lease ran out): answers what is held, then leaves the
 * loop; main exits 70 so that a supervisor restarts this egsd as a follower. */
void egs_server_step_down(struct egs_server *srv);
/* At start, once the loop exists: notes the leadership; a follower reads the token secret (when
 * the leader wrote it already) and starts following the store.  Returns a store error. */
enum egs_err egs_replica_start(struct egs_server *srv);
/* A follower's turn: it writes nothing; what a request changed locally is refused (503) and the
 * model loaded again at the next look. */
void egs_replica_turn(struct egs_server *srv);
/* Once a second: a leader renews its lease (steps down when it cannot), a follower pings its
 * event streams. */
void egs_replica_tick(struct egs_server *srv);
/* /healthz's data: status, store, role (leader or follower), epoch; a follower adds the leader's
 * address, how many of its turns the model lacks (behindTurns) and how long ago it last looked
 * (syncedAgoMs). */
json_t *egs_replica_health(struct egs_server *srv);
/* On a follower: whether this request goes to the leader (writes, agents' calls). */
bool egs_forward_wanted(enum evhttp_cmd_type method, const char *path);
/* Sends r to the leader and relays its answer; takes the request (r->ev becomes NULL).  503
 * LEADER_UNAVAILABLE when no leader is known or it cannot be reached. */
void egs_forward(struct egs_req *r);
/* On the leader: when r came through a follower that proved the client's address (forward.c), writes
 * "<client> via <follower>" to out and returns true; false for any other request. */
bool egs_forward_client(const struct egs_req *r, char *out, size_t n);

/* ---- input ---- */
/* The request schema of a route in openapi.c's notation ("name:s ~count:i? @Other"), by method (any
 * case) and route pattern: NULL when the route takes no JSON body.  Borrowed, static. */
const char *egs_openapi_body(const char *method, const char *path);
/* The properties of the named schema (name need not be NUL-terminated), or NULL. */
const char *egs_openapi_schema(const char *name, size_t len);
/* Checks r->body against the route's request schema before its handler runs (body_check.c): each
 * key must be a property (else 422 "<field>: unknown field") and each value of its JSON type, in
 * nested objects and lists too (422 naming "nodes[0].gpuCount").  null stands for "not given" where
 * the field is optional or nullable, and is a 422 where it is required.  Values (ranges, enums,
 * names) are left to the handler.  false = replied.  method and route are static strings (the
 * schema lookup is remembered by their addresses). */
bool egs_body_check(struct egs_req *r, const char *method, const char *route);
/* Rejects (422 naming it) any key of r->body not in allowed (NULL-terminated).  false = replied. */
bool egs_body_only(struct egs_req *r, const char *const *allowed);
/* Requires a JSON object body; false = replied 400. */
bool egs_body_required(struct egs_req *r);
/* Reads an optional string field into out (bounded); JSON null or absent leaves out as "" and
 * returns true.  Wrong type, NUL bytes or over-long: replies 422 and returns false.  When
 * required, absence and "" reply 422 too. */
bool egs_get_str(struct egs_req *r, json_t *obj, const char *field, bool required, char *out, size_t outsz);
/* Same for an integer in [min, max]; *present tells whether it was given (may be NULL). */
bool egs_get_int(struct egs_req *r, json_t *obj, const char *field, bool required, int64_t min, int64_t max,
		 int64_t *out, bool *present);
/* Optional boolean (null/absent = false). */
bool egs_get_bool(struct egs_req *r, json_t *obj, const char *field, bool *out, bool *present);
/* Optional list of names validated with egs_dns_label_valid; null/absent = empty. */
bool egs_get_names(struct egs_req *r, json_t *obj, const char *field, size_t max, struct egs_strlist *out);
/* Validates a name with the given validator; replies 422 naming the field on failure. */
bool egs_check_name(struct egs_req *r, const char *field, const char *value, bool dns_label);
/* Free text (descriptions, user names, emails): refuses control characters with a 422. */
bool egs_check_text(struct egs_req *r, const char *field, const char *value);
/* Query parameter (NULL when absent). */
const char *egs_query(struct egs_req *r, const char *name);
/* Optional time bound `name`: RFC 3339, or a duration back from `now` ("1h" = an hour ago); 0 when
 * absent.  Replies 422 naming the parameter and returns false when it is neither. */
bool egs_query_time(struct egs_req *r, const char *name, int64_t now, int64_t *out);

/* ---- access ---- */
/* The caller's role is one of `roles` (bit mask of 1u << EGS_ROLE_*); else replies 403. */
bool egs_require_role(struct egs_req *r, unsigned roles);
#define EGS_R(x) (1u << EGS_ROLE_##x)
/* May the caller read / manage objects of this workspace (and its project)?  Replies 403/404 when not:
 * a workspace outside the caller's scope answers 404 for reads so its existence does not leak. */
bool egs_can_read_ws(struct egs_req *r, const struct egs_workspace *ws);
bool egs_can_write_ws(struct egs_req *r, const struct egs_workspace *ws);
/* May the caller see / manage objects of this project? */
bool egs_in_project(const struct egs_req *r, const char *project);
/* The workspace `name` in the caller's project scope (api_workspace.c); else replies 404
 * WORKSPACE_NOT_FOUND naming workspaceName (agents never see workspaces) and returns false. */
bool egs_find_ws(struct egs_req *r, const char *name, struct egs_workspace **out);

/* ---- auth ---- */
/* Generates a new API key (UUID text, 37 bytes with NUL) and its hash. */
void egs_auth_new_key(char key[37], unsigned char hash[32]);
void egs_auth_hash(const char *key, unsigned char hash[32]);
bool egs_auth_key_wellformed(const char *key);
/* Requests authenticated from the credential cache (hits) and by checking the credential (misses:
 * every other request that presented one), since egsd started (auth.c). */
void egs_auth_cache_counts(uint64_t *hits, uint64_t *misses);
/* Mints a bearer token for key valid until exp. */
void egs_auth_mint(struct egs_server *srv, const struct egs_apikey *key, int64_t exp, char *out, size_t outsz);
/* Authenticates the Authorization header of r; on failure replies (401/400) and returns false. */
bool egs_authenticate(struct egs_req *r);

/* ---- ids ---- */
/* Writes a fresh random id "<prefix>-xxxxxxxx-xxxx" into out (EGS_ID_MAX). */
void egs_new_id(const char *prefix, char out[EGS_ID_MAX]);

/* ---- JSON views of objects ---- */
json_t *egs_json_gpr(struct egs_server *srv, const struct egs_gpr *g);
/* The part of g's view a queue entry shows (GET /api/v1/queue): gprId, gprName, sliceName,
 * clusterName, gpuShape, instanceType, numberOfGPUNodes, numberOfGPUs, priority,
 * estimatedStartTime, estimatedWaitTime and status.provisioningStatus as provisioningStatus, the
 * values egs_json_gpr gives them, without building the whole view.  Returns a new reference. */
json_t *egs_json_gpr_queued(const struct egs_gpr *g, int64_t now);
json_t *egs_json_node(struct egs_server *srv, const struct egs_node *n);
json_t *egs_json_workspace(const struct egs_workspace *w);
json_t *egs_json_apikey(const struct egs_apikey *k);
json_t *egs_json_event(const struct egs_event *e);

/* ---- kept status replies (gpr_view.c) ---- */
struct egs_views;
struct egs_views *egs_views_new(void);
void egs_views_free(struct egs_views *v); /* NULL is a no-op */
/* Drops every kept view: call it wherever GPRs are replaced or changed in bulk without
 * egs_state_touch or egs_state_restamp (a model swap, a follower's sync; gpr_view.c). */
void egs_views_changed(struct egs_server *srv);
/* Replies 200 with g's view (GET /api/v1/gpr): the kept bytes when nothing they show changed since
 * they were built, else built now and kept.  The caller has checked access to g. */
void egs_gpr_view_reply(struct egs_req *r, const struct egs_gpr *g);
/* Replies 200 with {"items": [the views of gprs[0..n)]} and, when paged, "continue": next (NULL:
 * null) after them: GET /api/v1/gpr/list, written by gpr_render.c.  The caller has checked access. */
void egs_gpr_list_reply(struct egs_req *r, const struct egs_gpr *const *gprs, size_t n, bool paged,
			const char *next);
/* Kept views served and built since start (for /metrics). */
void egs_views_counts(const struct egs_views *v, uint64_t *hits, uint64_t *misses);

/* ---- routes ---- */
/* True when path matches a route pattern, where "{}" or "{name}" matches one non-empty segment
 * without '/'. */
bool egs_path_match(const char *pattern, const char *path);
/* The pattern of the first route whose path matches (borrowed, static), or NULL (route.c). */
const char *egs_route_pattern(const char *path);

typedef void (*egs_handler)(struct egs_req *r);
struct egs_route {
	enum evhttp_cmd_type method;
	const char *path;
	egs_handler fn;
	bool public; /* no authentication */
};
/* The route of method m and path (route.c): the first of the tables, in order, whose pattern
 * matches path and whose method is m, or NULL; *path_known tells whether some route matches path
 * under any method (405 rather than 404). */
const struct egs_route *egs_route_find(enum evhttp_cmd_type m, const char *path, bool *path_known);
/* http.c's list of the route tables below, in lookup order (*n of them; static). */
const struct egs_route *const *egs__route_tables(size_t *n);
/* Route tables of each api_*.c, each terminated by a NULL fn. */
extern const struct egs_route egs_routes_auth[];
extern const struct egs_route egs_routes_workspace[];
extern const struct egs_route egs_routes_inventory[];
extern const struct egs_route egs_routes_gpr[];
extern const struct egs_route egs_routes_agent[];
extern const struct egs_route egs_routes_agent_register[]; /* api_agent_register.c */
extern const struct egs_route egs_routes_agent_events[]; /* api_agent_events.c: GPR events for agents */
extern const struct egs_route egs_routes_admin[];
extern const struct egs_route egs_routes_queue[];   /* api_queue.c */
extern const struct egs_route egs_routes_events[];  /* api_events.c */
extern const struct egs_route egs_routes_observe[]; /* api_observe.c */
extern const struct egs_route egs_routes_usage[];   /* api_usage.c */
extern const struct egs_route egs_routes_metrics[]; /* metrics.c */
extern const struct egs_route egs_routes_openapi[]; /* openapi.c */
extern const struct egs_route egs_routes_policy[];  /* api_policy.c */
extern const struct egs_route egs_routes_template[];         /* api_template.c */
extern const struct egs_route egs_routes_template_binding[]; /* api_template_binding.c */
extern const struct egs_route egs_routes_inference[]; /* api_inference.c: the public SDK's inference endpoints */
extern const struct egs_route egs_routes_agent_infer[]; /* api_agent_infer.c: inference endpoints for agents */
extern const struct egs_route egs_routes_kubecred[]; /* kubecred.c: kubeconfigs, slice tokens */
extern const struct egs_route egs_routes_kubeslice[]; /* kubeslice.c: the agents' slice namespaces */
extern const struct egs_route egs_routes_portal[];  /* api_portal.c: whoami, schedule */
extern const struct egs_route egs_routes_agent_gpr[]; /* api_agent_gpr.c: GPRs of GPUProvisioningRequest CRs */

/* The user API's GPR create (POST /api/v1/gpr) and update (PUT) on r as it stands (api_gpr.c): r->who
 * and r->body decide; each replies once.  create returns the new GPR (borrowed from the state) or NULL
 * after an error reply.  api_agent_gpr.c calls them with the agent acting for a workspace. */
struct egs_gpr *egs_gpr_api_create(struct egs_req *r);
void egs_gpr_api_update(struct egs_req *r);
/* egs_gpr_api_create() without the success reply: the caller (api_inference.c) replies once it has stored
 * what the GPR belongs to.  Refusals are replied as by create. */
struct egs_gpr *egs_gpr_api_submit(struct egs_req *r);
extern const struct egs_route egs_routes_audit[];   /* audit.c: GET /api/v1/audit */

/* Agent long polls: wakes the polls of clusters that now have actions (after a commit). */
void egs_agent_wake_polls(struct egs_server *srv, bool timeouts_only);
void egs_agent_drop_polls(struct egs_server *srv);

/* ---- observability hooks (observe.c; docs/observability.md) ---- */
#define EGS_WEBHOOK_URL_MAX 513
/* Creates srv->obs after the store is loaded: settings and prices from meta, the notify worker. */
enum egs_err egs_obs_start(struct egs_server *srv);
/* Ends event streams and stops the notify worker (idempotent); egs_obs_free then frees srv->obs. */
void egs_obs_stop(struct egs_server *srv);
void egs_obs_free(struct egs_server *srv);
/* Heartbeat: node n's fresh GPU samples and its heartbeat object o (borrowed; its `workloads`). */
void egs_observe_node(struct egs_server *srv, struct egs_node *n, json_t *o, int64_t now);
/* Heartbeat's pendingPods (observe_pods.c): checks list (NULL: absent) whole, replying 422 naming the
 * field; then keeps it as cluster's waiting pods (NULL: keeps what it had). */
bool egs_observe_pending_check(struct egs_req *r, json_t *list);
void egs_observe_pending(struct egs_server *srv, const char *cluster, json_t *list, int64_t now);
/* Appends the waiting pods r may see (of workspace ws; NULL: all) to out, each with the GPR it waits for. */
void egs_observe_pending_view(struct egs_req *r, const char *ws, json_t *out);
/* Frees the kept lists (from egs_obs_free). */
void egs_observe_pending_free(struct egs_server *srv);
/* After each scheduler run and before each commit: records the exit warnings that are due (with
 * the scheduler's own transitions, so a reply held for those is held for these too). */
void egs_obs_due(struct egs_server *srv, int64_t now);
/* Commit turn, before the commit: thresholds of newly registered nodes, start-estimate tracking. */
void egs_obs_before_commit(struct egs_server *srv, int64_t now);
/* Commit turn, after a successful commit and before the changes are cleared: streams and
 * notifies the turn's committed events. */
void egs_obs_committed(struct egs_server *srv);
/* Once a second: silent-node alerts, due exit warnings, event retention. */
void egs_obs_tick(struct egs_server *srv, int64_t now);
/* Every answered request, for the latency histograms of /metrics. */
void egs_obs_request(struct egs_server *srv, const char *method, const char *path, int status, int64_t t0_us);
/* The cost of g so far (status.cost): GPU-hours held times the admin's price for its shape. */
double egs_gpr_cost(const struct egs_server *srv, const struct egs_gpr *g, int64_t now);
/* Reads an optional webhook URL field ("" or null clears); replies 422 naming field when bad. */
bool egs_get_webhook_url(struct egs_req *r, const char *field, char *out, size_t outsz);

/* ---- policies (api_policy.c; docs/policies.md) ---- */
/* After the store is loaded: parses the global policy and every workspace's; a stored policy that
 * does not parse is EGS_ERR_STORE (egsd does not start on a store it cannot read). */
enum egs_err egs_policy_start(struct egs_server *srv);
/* Parses the stored policy of every workspace that has none parsed yet (after a reload). */
enum egs_err egs_policy_load_workspaces(struct egs_server *srv);
/* Applies the workspace's and the global policy to g: a new GPR (old NULL; enableEviction and
 * requeueOnFailure left unset take the policy's defaults) or the edited copy of waiting GPR old (only
 * the limits reading the changed fields).  Over a hard limit: replies 422 POLICY_LIMIT_EXCEEDED
 * naming the field and returns false.  Over a soft limit: sets g->pending_reason (owned by g). */
bool egs_policy_admit(struct egs_req *r, struct egs_gpr *g, const struct egs_gpr *old);
/* Before an admin approves Pending GPR g: true when g is within every hard limit of the policies
 * as they are now (they may have changed since g was created); otherwise replies 422
 * POLICY_LIMIT_EXCEEDED naming the limit and returns false.  Soft limits are what approval is for. */
bool egs_policy_approvable(struct egs_req *r, struct egs_gpr *g);

/* Starts/stops the server: see main.c. */
enum egs_err egs_server_start(struct egs_server *srv, const char *listen, const char *data_dir, bool dev_clock);
void egs_server_stop(struct egs_server *srv);

#endif
