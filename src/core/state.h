/*
 * state.h: the whole in-memory model of the control plane, owned by egsd's loop thread.
 *
 * egs_state holds every object in maps keyed by name or id, the queue of waiting GPRs, and the
 * change log of the current loop turn: objects marked dirty and objects deleted since the last
 * commit, plus events not yet written.  The server drains that log into one store transaction
 * (egs_state_take_changes) before any reply of the turn goes out.
 *
 * Ownership: the state owns every object added to it; egs_state_del_* unlinks an object and keeps it
 * alive until egs_state_clear_changes() so the commit can still read its key.
 */
#ifndef EGS_STATE_H
#define EGS_STATE_H

#include "core/map.h"
#include "core/model.h"
#include "core/queue.h"

enum egs_kind { EGS_KIND_PROJECT, EGS_KIND_CLUSTER, EGS_KIND_NODE, EGS_KIND_WORKSPACE, EGS_KIND_GPR,
		EGS_KIND_APIKEY, EGS_KIND_TEMPLATE, EGS_KIND_BINDING, EGS_KIND_KUBECRED, EGS_KIND_ALERT,
		EGS_KIND_OUTBOX,
		EGS_KIND_GPRLINK, EGS_KIND_ENDPOINT /* the last seven: struct egs_doc */ };

struct egs_change {
	enum egs_kind kind;
	void *obj;    /* the object (borrowed from the state, or pending free when deleted) */
	bool deleted; /* true: remove the row with this object's key */
};

struct egs_state_config {
	int retry_limit;              /* failed provisioning attempts before Error (default 3) */
	int64_t provision_timeout_s;  /* attach must finish within this (default 300) */
	int64_t heartbeat_timeout_s;  /* node without heartbeat is Unschedulable after this (default 15) */
	size_t event_retention;       /* events kept in memory for listing (default 10000) */
	int64_t fair_half_life_s;     /* half-life of the usage that orders equal priorities (default
				       * 86400); negative turns fairness off */
	int64_t preempt_min_runtime_s; /* a GPR runs this long before it may be preempted (default
					* 600); negative: at once */
	int backfill;                 /* conservative backfill in the plan (core/sched.h): positive on,
				       * 0 or negative off (a zeroed config; egsd and egs-sim set it on) */
	size_t plan_snap_every;       /* GPRs between the kept plan's snapshots (0: 2,048; tests take
				       * fewer, to resume walks from many places in a short queue) */
	size_t plan_order_piece;      /* queued GPRs one step of a sliced run takes into its order (0:
				       * 4,096; tests take fewer, to change the queue while it is taken) */
	size_t plan_slots_piece;      /* nodes one piece of a sliced first state's slots sees (0:
				       * 2,048; tests take fewer) */
	size_t plan_sort_piece;       /* node moves one piece of a first state's name sort makes (0:
				       * 16,384; tests take fewer, to end pieces anywhere in a merge) */
	bool plan_no_adopt;           /* tests: a run after held releases walks even when its trial's
				       * walk could be the plan (core/sched_held.c trial_adopt) */
	int64_t finished_retention_s; /* finished GPRs older than this leave memory (core/aging.h);
				       * 0 keeps every GPR in memory */
};

struct egs_state {
	struct egs_state_config cfg;
	struct egs_map projects, clusters, nodes, workspaces, gprs, apikeys;
	struct egs_map templates, bindings; /* struct egs_doc by name; a binding's name is its workspace's */
	struct egs_map kubecreds; /* struct egs_doc named after its workspace: sealed ServiceAccount tokens */
	struct egs_map alerts;    /* struct egs_doc: active alerts as server/alerts.c stores them */
	struct egs_map outbox;    /* struct egs_doc named by idempotency key: undelivered webhook messages */
	struct egs_map gprlinks;  /* struct egs_doc named after a GPUProvisioningRequest CR's uid: its GPR */
	struct egs_map endpoints; /* struct egs_doc named by id: inference endpoints (server/inference.h) */
	struct egs_map apikeys_by_hash; /* hex of the key hash -> egs_apikey */
	struct egs_map fair;            /* workspace name -> its usage key (core/fair.h) */
	/* The workspace egs_state_workspace found last: a lookup cache, not state (a create looks its
	 * workspace up five times, by five modules; each was a SipHash and a probe).  NULL or a live
	 * member of workspaces: egs_state_del clears it.  One thread per state, as everything here. */
	struct egs_workspace *ws_last;
	struct egs_queue queue;         /* GPRs in EGS_GPR_QUEUED */
	struct egs_vec active;          /* GPRs in Provisioning, Provisioned or Releasing */
	struct egs_vec held;            /* GPRs released early whose capacity is held (core/held.h) */
	struct egs_vec changes;         /* struct egs_change*, this turn's mutations */
	struct egs_vec new_events;      /* struct egs_event*, this turn's events (owned) */
	struct egs_vec new_audit;       /* struct egs_audit*, this turn's audit entries (owned) */
	int64_t audit_last_id;          /* the largest audit id given out (or stored, after a start) */
	struct egs_event **events;      /* ring of recent committed events (owned) */
	size_t events_head, events_len;
	uint64_t next_seq;
	int64_t next_event_id;
	uint64_t generation; /* bumped on every change that can move the plan */
	/* The model's change clock: moved by every egs_state_touch and egs_state_del (of any kind), every
	 * egs_state_restamp (the last value is the last view stamp given out) and egs_state_shown_change.
	 * A change made at clock c is in every commit made once the clock is c or more: server/durable.c
	 * pairs the clock at each commit with the commit's write number, so a status view whose inputs
	 * all changed at or before a durable commit's clock goes out without waiting for an fsync. */
	uint64_t view_clock;
	/* Queued creates since the planner last took them (egs_gpr_submit notes them): the generation
	 * bumps they made, and the queue key of the one that goes first.  When they are the only
	 * changes since its kept plan, the planner walks from that GPR's place (core/sched_kept.c).
	 * hold_bumps: the bumps made by early releases and cancels that left a hold (core/held.h):
	 * when they are the only changes, the kept plan's estimates are the walk with the holds. */
	struct {
		uint64_t bumps, hold_bumps;
		bool any;
		int priority;
		double fair;
		uint64_t seq;
	} arrivals;
	uint64_t held_gen;   /* generation when the planner last tried the held releases */
	int64_t held_settle; /* after a restart: until then, or every node reports, the planner only expires
			      * holds (core/held.h); 0 once over */
	uint64_t pool_layout;   /* serial of the planner's pools as pool_layout_keys lists them (owned) */
	char *pool_layout_keys;
	void *plan_pools; /* the pools of the planner's last first state made afresh (core/sched_fresh.c;
			   * one block, owned) */
	/* Bumped when a node, cluster or workspace is added or deleted, a cluster or workspace is
	 * touched, and by whoever changes a node's name, cluster, GPU shape, instance type, GPU count
	 * or memory (node registration): what the planner keeps about the inventory holds under it. */
	uint64_t inventory_gen;
	uint64_t name_rank_gen;  /* inventory_gen when the nodes' name_rank were set (core/sched_fresh.c) */
	struct egs_map capacity; /* egs_sched_capacity's answers (core/sched.c; owned values) ... */
	uint64_t capacity_gen;   /* ... for the inventory of this inventory_gen */
	/* Finished GPRs leaving memory by age (core/aging.h; only when cfg.finished_retention_s > 0) */
	struct egs_vec finished;   /* finished GPRs in memory, oldest completion first from finished_head */
	struct egs_vec finished_kept; /* old enough to leave but still referred to when last looked at */
	size_t finished_head;      /* entries before it are taken */
	bool finished_unsorted;    /* a load added some out of completion order */
	int64_t aged_before;       /* a load leaves out GPRs finished before this (0: loads them all) */
	size_t aged[EGS_GPR_NSTATES]; /* GPRs in the store but not in memory, by state */
};

void egs_state_init(struct egs_state *st, const struct egs_state_config *cfg /* NULL = defaults */);
/* Adds delta to the unfinished count of g's workspace when g's state is unfinished (the state calls
 * it when g is added or deleted, egs_gpr_set_state around every transition). */
void egs_state_count_gpr(struct egs_state *st, const struct egs_gpr *g, int delta);
void egs_state_cleanup(struct egs_state *st);

/* Adders take ownership and do not mark anything dirty (the store's loader uses them as is);
 * callers creating new objects call egs_state_touch() afterwards.  Returns EGS_ERR_EXISTS when the
 * key is taken (the object is then not taken). */
enum egs_err egs_state_add_project(struct egs_state *st, struct egs_project *p);
enum egs_err egs_state_add_cluster(struct egs_state *st, struct egs_cluster *c);
enum egs_err egs_state_add_node(struct egs_state *st, struct egs_node *n);
enum egs_err egs_state_add_workspace(struct egs_state *st, struct egs_workspace *w);
/* A GPR in EGS_GPR_QUEUED is pushed to the queue, an active one (Provisioning, Provisioned,
 * Releasing) joins st->active; seq >= next_seq advances next_seq. */
enum egs_err egs_state_add_gpr(struct egs_state *st, struct egs_gpr *g);
enum egs_err egs_state_add_apikey(struct egs_state *st, struct egs_apikey *k);
/* kind is one of the struct egs_doc kinds (EGS_KIND_TEMPLATE and after). */
enum egs_err egs_state_add_doc(struct egs_state *st, enum egs_kind kind, struct egs_doc *d);
/* Adds a committed event to the listing ring (takes ownership; the loader uses it). */
void egs_state_add_event(struct egs_state *st, struct egs_event *ev);

/* Lookups return borrowed pointers or NULL. */
struct egs_project *egs_state_project(const struct egs_state *st, const char *name);
struct egs_cluster *egs_state_cluster(const struct egs_state *st, const char *name);
struct egs_node *egs_state_node(const struct egs_state *st, const char *cluster, const char *name);
struct egs_workspace *egs_state_workspace(const struct egs_state *st, const char *name);
struct egs_gpr *egs_state_gpr(const struct egs_state *st, const char *id);
struct egs_apikey *egs_state_apikey(const struct egs_state *st, const char *id);
struct egs_apikey *egs_state_apikey_by_hash(const struct egs_state *st, const unsigned char hash[32]);
struct egs_doc *egs_state_doc(const struct egs_state *st, enum egs_kind kind, const char *name);

/* Marks obj (of kind) changed in this turn; idempotent within a turn.  Bumps generation and the
 * change clock, and restamps a GPR on every call (not only the turn's first). */
void egs_state_touch(struct egs_state *st, enum egs_kind kind, void *obj);
/* Gives g a view stamp never given out before by st: server/gpr_view.c serves a GPR's kept status
 * view only while its stamp is the one the view was built at.  egs_state_touch and
 * egs_state_add_gpr call it; call it too wherever something the view shows changes without a touch
 * (the planner's estimates, an agent's check run). */
static inline void egs_state_restamp(struct egs_state *st, struct egs_gpr *g)
{
	g->view_stamp = ++st->view_clock;
}
/* Something a view shows changed outside the model (the prices of server/api_usage.c): moves the
 * change clock, so that views built from now on count as showing it (server/durable.c). */
static inline void egs_state_shown_change(struct egs_state *st)
{
	st->view_clock++;
}
/* Unlinks obj and records its deletion; it is freed by egs_state_clear_changes(). */
void egs_state_del(struct egs_state *st, enum egs_kind kind, void *obj);

/* Records an event (message built printf-style, cut to EGS_EVENT_MESSAGE_MAX - 1 bytes and made
 * valid UTF-8) for this turn. */
#define EGS_EVENT_MESSAGE_MAX 512
void egs_state_event(struct egs_state *st, int64_t now, const char *type, const char *reason,
		     const char *object_kind, const char *object_name, const char *workspace,
		     const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* egs_state_event with the message written already (borrowed; cut and made valid the same way), for
 * a hot path that builds it without printf (a GPR's creation: core/gpr.c). */
void egs_state_event_msg(struct egs_state *st, int64_t now, const char *type, const char *reason,
			 const char *object_kind, const char *object_name, const char *workspace, const char *message);

/* Like egs_state_event, but aggregated as Kubernetes does: when one of the most recent events (this
 * turn's, or the last 64 committed) has the same type, reason, object and workspace and was last
 * seen at most window seconds ago, that event's count goes up, its last time becomes now and its
 * message the new one, and the commit writes it again under its id; otherwise a new event is
 * recorded. */
void egs_state_event_repeat(struct egs_state *st, int64_t now, int64_t window, const char *type,
			    const char *reason, const char *object_kind, const char *object_name,
			    const char *workspace, const char *fmt, ...) __attribute__((format(printf, 9, 10)));
/* Resizes the listing ring to keep the newest `retention` (>= 128) committed events, freeing older
 * ones.  Call it between turns or from a handler; never from inside a commit. */
void egs_state_set_event_retention(struct egs_state *st, size_t retention);

/* Adds an audit entry to this turn's commit (takes ownership) and gives it the next id. */
void egs_state_audit(struct egs_state *st, struct egs_audit *a);

/* True when this turn has changes, events or audit entries waiting for a commit. */
bool egs_state_has_changes(const struct egs_state *st);
/* After a successful commit: clears dirty flags, frees deleted objects and audit entries, moves new
 * events into the listing ring (dropping the oldest beyond cfg.event_retention). */
void egs_state_clear_changes(struct egs_state *st);

/* Frees helpers for objects not (or no longer) owned by a state. */
void egs_project_free(struct egs_project *p);
void egs_cluster_free(struct egs_cluster *c);
void egs_node_free(struct egs_node *n);
/* Gives n's GPUs the last samples (power, temperature, utilisation, memory used, when) that old's
 * GPUs of the same UUID had: the store keeps no samples, so a node read back from it (a reload, a
 * follower's catch-up) would otherwise forget them until the next heartbeat. */
void egs_node_keep_samples(struct egs_node *n, const struct egs_node *old);
void egs_workspace_free(struct egs_workspace *w);
void egs_gpr_free(struct egs_gpr *g);
void egs_apikey_free(struct egs_apikey *k);
void egs_doc_free(struct egs_doc *d);
void egs_event_free(struct egs_event *e);
/* Allocates a zeroed GPR with heap_idx = SIZE_MAX. */
struct egs_gpr *egs_gpr_new(void);

/* Writes the hex of a 32-byte hash (65 bytes with NUL). */
void egs_hash_hex(const unsigned char hash[32], char out[65]);

#endif
