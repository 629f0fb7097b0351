/*
 * model.h: the domain objects of EGS: projects, clusters, nodes with their GPUs, slice workspaces,
 * GPU provision requests (GPRs), API keys and events.
 *
 * Names are bounded, fixed-size strings (at most EGS_NAME_MAX - 1 bytes), which keeps a queued GPR
 * in one allocation and well under 1 KiB.  Lists of names are struct egs_strlist (heap, owned).
 * Every persistent object carries `dirty`: a mutation sets it through egs_state_touch_*() and the
 * server's commit step writes dirty objects in one transaction (group commit), then clears it.
 */
#ifndef EGS_MODEL_H
#define EGS_MODEL_H

#include "core/common.h"

#define EGS_NAME_MAX 64 /* names: 1..63 bytes */
#define EGS_ID_MAX 24   /* ids like gpr-1bb22a0b-9388 */
#define EGS_KEY_MAX (2 * EGS_NAME_MAX + 2)

/* An owned list of owned strings. */
struct egs_strlist {
	char **v;
	size_t n;
};
void egs_strlist_add(struct egs_strlist *l, const char *s); /* copies s */
bool egs_strlist_has(const struct egs_strlist *l, const char *s);
bool egs_strlist_equal(const struct egs_strlist *a, const struct egs_strlist *b); /* same strings, same order */
bool egs_strlist_remove(struct egs_strlist *l, const char *s); /* keeps order */
void egs_strlist_copy(struct egs_strlist *dst, const struct egs_strlist *src); /* dst is cleared first */
void egs_strlist_cleanup(struct egs_strlist *l);

/* Editor is the public SDK's name for a writer limited to one workspace: a key with that role acts as
 * an Owner scoped to its workspace (server/auth.c), and keeps the name it was created with. */
enum egs_role { EGS_ROLE_ADMIN = 0, EGS_ROLE_OWNER, EGS_ROLE_VIEWER, EGS_ROLE_AGENT, EGS_ROLE_EDITOR };
const char *egs_role_name(enum egs_role r); /* "Admin", "Owner", "Viewer", "Agent", "Editor" */
bool egs_role_parse(const char *s, enum egs_role *out); /* case-insensitive */

enum egs_health { EGS_HEALTH_HEALTHY = 0, EGS_HEALTH_UNHEALTHY, EGS_HEALTH_UNSCHEDULABLE };
const char *egs_health_name(enum egs_health h); /* "Healthy", ... */
bool egs_health_parse(const char *s, enum egs_health *out);

enum egs_gpr_state {
	EGS_GPR_PENDING = 0, /* waits for an admin's approval */
	EGS_GPR_QUEUED,
	EGS_GPR_PROVISIONING, /* nodes chosen; agents attach them */
	EGS_GPR_PROVISIONED,  /* the window runs: start_ts .. exit_at */
	EGS_GPR_RELEASING,    /* agents drain and detach */
	EGS_GPR_COMPLETE,
	EGS_GPR_CANCELLED,
	EGS_GPR_REJECTED,
	EGS_GPR_ERROR,
	EGS_GPR_NSTATES
};
const char *egs_gpr_state_name(enum egs_gpr_state s); /* the wire provisioningStatus */
bool egs_gpr_state_parse(const char *s, enum egs_gpr_state *out);
/* Terminal states never change again. */
bool egs_gpr_state_terminal(enum egs_gpr_state s);
/* Pending, Queued, Provisioning or Provisioned: what a workspace's maxGPRs counts. */
bool egs_gpr_state_unfinished(enum egs_gpr_state s);

struct egs_project {
	char name[EGS_NAME_MAX];
	int64_t created_at;
	bool dirty;
};

struct egs_cluster {
	char name[EGS_NAME_MAX];
	char project[EGS_NAME_MAX];
	char *api_server; /* Kubernetes API server URL, may be NULL */
	char *ca_data;    /* base64 PEM of the API server CA, may be NULL */
	char agent_key_id[EGS_ID_MAX]; /* the API key (role agent) issued at registration */
	int64_t created_at;
	/* runtime only */
	int64_t last_seen; /* last agent call, 0 = never since start */
	bool slice_access; /* its agent registered the "sliceAccess" feature (mints slice tokens) */
	bool dirty;
};

struct egs_gpu {
	char uuid[EGS_NAME_MAX];
	int index;
	/* runtime samples from heartbeats (not persisted) */
	double power_w, temp_c, util_pct;
	int64_t mem_used_mib;
	int64_t sampled_at;
};

/* GPU sharing (core/share_gpr.h): a shared GPR's share of one device of its node, in hundredths. */
struct egs_gpu_share {
	char uuid[EGS_NAME_MAX];
	int centi; /* 1..100 */
};

struct egs_node {
	char key[EGS_KEY_MAX]; /* "cluster/name": the map key */
	char name[EGS_NAME_MAX];
	char cluster[EGS_NAME_MAX];
	char instance_type[EGS_NAME_MAX];
	char gpu_shape[EGS_NAME_MAX]; /* GPU model name, e.g. NVIDIA-H100-80GB-HBM3 */
	char cloud_provider[EGS_NAME_MAX];
	char region[EGS_NAME_MAX];
	char zone[EGS_NAME_MAX]; /* "" when the agent does not say (topology.kubernetes.io/zone) */
	int gpu_count;
	int64_t memory_mib; /* per GPU */
	double temp_threshold, power_threshold;
	enum egs_health health;
	char gpr_id[EGS_ID_MAX];      /* GPR the control plane assigned it to, "" = free */
	char attached_gpr[EGS_ID_MAX]; /* GPR the agent last reported attached, "" = none */
	int64_t allocated_at;
	struct egs_gpu *gpus; /* gpu_count entries, owned (may be NULL before the agent reports) */
	int n_gpus;
	/* runtime only */
	int64_t last_heartbeat;
	int64_t free_since; /* when it last became free (no holder, nothing attached) */
	int64_t quarantine_until; /* a failed check keeps it Unhealthy at least until then */
	int64_t failure_noted;    /* when a NodeFailed warning was written for the current failure */
	int64_t held_until;       /* the planner holds it for an early release or a cancel until then (core/held.h) */
	uint32_t name_rank;       /* its place in name order among all nodes, under st->name_rank_gen (core/sched_fresh.c) */
	char address[128];        /* "host:port" of the agent's check port from registration, "" = none */
	/* GPU sharing (core/share_gpr.h), runtime only */
	bool sharing;                       /* its agent registered the "sharing" feature */
	struct egs_strlist attached_shared; /* shared GPRs its agent reported attached */
	struct egs_vec shared;              /* struct egs_gpr *: shared GPRs holding shares of its GPUs */
	bool dirty;
};

struct egs_ws_namespace {
	char name[EGS_NAME_MAX];
	struct egs_strlist clusters;
};

struct egs_policy; /* core/policy.h */

struct egs_ws_user {
	char username[EGS_NAME_MAX * 2];
	char email[EGS_NAME_MAX * 2];
};

struct egs_workspace {
	char name[EGS_NAME_MAX];
	char project[EGS_NAME_MAX];
	char *description;
	struct egs_strlist clusters;
	struct egs_ws_namespace *namespaces; /* owned array */
	size_t n_namespaces;
	struct egs_ws_user *users; /* owned array */
	size_t n_users;
	int64_t created_at;
	char *webhook_url; /* Slack-compatible incoming webhook for its events, owned, NULL = none */
	/* runtime only: its GPRs in an unfinished state, kept by the state at every transition */
	int64_t unfinished;
	char *policy_json;         /* its policy as stored (canonical JSON), owned, NULL = none */
	struct egs_policy *policy; /* the same, parsed (core/policy.h), owned, NULL = none */
	bool dirty;
};

/* GPR boolean options, as bits of egs_gpr.flags. */
enum {
	EGS_GPRF_ENFORCE_IDLE = 1u << 0,
	EGS_GPRF_EVICTION = 1u << 1,
	EGS_GPRF_REQUEUE = 1u << 2,
	EGS_GPRF_AUTO_CLUSTER = 1u << 3,
	EGS_GPRF_AUTO_GPU = 1u << 4,
	EGS_GPRF_EARLY_RELEASE = 1u << 5,
	EGS_GPRF_MULTI_NODE = 1u << 6,
	EGS_GPRF_DEDICATED = 1u << 7,
	EGS_GPRF_RDMA = 1u << 8,
	EGS_GPRF_SECONDARY_NET = 1u << 9,
};

/* The latest check run an agent reported for one node of a GPR in one phase (pre: attach, post:
 * detach).  `checks` is the validated JSON array text of the run's checks, owned. */
struct egs_check_run {
	char node[EGS_KEY_MAX]; /* node key "cluster/name" */
	bool post;
	bool ok;
	int64_t time;
	char *checks;
};
#define EGS_CHECK_RUNS_MAX 64 /* per GPR: the oldest run goes first */
struct egs_gpr;
/* Keeps run (node_key, post) of g as the latest for that node and phase, replacing an older one;
 * copies checks_json (borrowed). */
void egs_gpr_note_check_run(struct egs_gpr *g, const char *node_key, bool post, bool ok, const char *checks_json,
			    int64_t now);
/* Frees g's check runs (the state calls it when it frees g). */
void egs_gpr_clear_check_runs(struct egs_gpr *g);

/* Further bits of egs_gpr.marks_sent. */
enum { EGS_MARK_IDLE_WARNED = 1u << 4, EGS_MARK_EXIT_WARNED = 1u << 5 };

struct egs_gpr {
	/* First, together, up to `id`: what the planner's walk reads and writes of every queued GPR
	 * (core/sched_place.c, sched.c walk_step; view_stamp moves with a new estimate).  Spread over
	 * the struct they cost five cache lines a GPR, and at 100,000 queued the walk waits on memory
	 * more than it computes (issue 16); the walk prefetches this block a few GPRs ahead
	 * (egs__gpr_prefetch in core/sched_int.h: at most 128 bytes). */
	enum egs_gpr_state state;
	int node_count;
	int64_t exit_duration_s;
	int64_t est_start;   /* planner's estimate, 0 = unknown (runtime only) */
	int delayed_count;
	int share_centi;     /* GPU sharing: hundredths of GPUs on one node, 0 = whole nodes (below) */
	uint32_t plan_ws;     /* the planner's cache: its workspace's index in the plans of serial... */
	bool ghost;           /* cancelled while queued: still placed by the planner (core/held.h) */
	uint64_t plan_serial; /* ...plan_serial (a workspace layout, core/sched_place.c) */
	uint64_t match_mask;   /* the planner's cache: the pools it matches in pool layout... */
	uint64_t match_layout; /* ...match_layout (core/sched_place.c); 0 = none: reset it when its shape changes */
	struct egs_strlist preferred_clusters;
	uint64_t view_stamp;  /* moved with anything its wire view shows (egs_state_restamp); 0: never
			       * in the state */

	char id[EGS_ID_MAX];
	char name[EGS_NAME_MAX];
	char workspace[EGS_NAME_MAX];
	char cluster[EGS_NAME_MAX];       /* "" = any cluster of the workspace */
	char instance_type[EGS_NAME_MAX]; /* "" = any */
	char gpu_shape[EGS_NAME_MAX];     /* "" = any */
	char created_by[EGS_ID_MAX];      /* API key id */
	char evicted_by[EGS_ID_MAX];      /* the GPR that preempted it last ("" = none) */
	int gpus_per_node;
	int64_t memory_mib; /* minimum per GPU, MiB */
	int64_t idle_timeout_s;
	int priority;
	uint32_t flags; /* EGS_GPRF_* */

	char *failure_reason; /* owned, may be NULL */
	char *pending_reason; /* owned, may be NULL: why it waits for approval */
	int64_t created_at;
	int64_t start_ts;      /* 0 until provisioned */
	int64_t exit_at;       /* start_ts + exit_duration_s once provisioned */
	int64_t completion_ts; /* 0 until complete */
	int retry_count;
	uint64_t seq; /* enqueue order: ties of priority go to the smaller seq */
	struct egs_strlist nodes; /* node keys "cluster/name" */
	unsigned marks_sent; /* bits 1-3: the 25/50/75% events written; EGS_MARK_* */

	/* runtime only (derived, not persisted) */
	int64_t phase_since; /* when it entered its current state (provisioning timeout) */
	int64_t idle_since;  /* since when every GPU it holds stayed under 1% utilisation, 0 = busy */
	double fair;         /* its workspace's usage key when it was queued (core/fair.h), -inf =
			      * none; persisted */
	size_t heap_idx;   /* position in the queue heap, SIZE_MAX when not queued */
	uint64_t queue_stamp; /* the queue's stamp of its last push or priority change (core/queue.h) */
	int64_t held_until; /* released early: the planner holds its capacity until then (core/held.h) */
	bool held_lifted;   /* its hold is lifted for a trial walk */
	bool aging_listed;  /* finished and in st->finished, the list the age sweep walks (core/aging.h) */
	struct egs_strlist held_nodes; /* the nodes its hold keeps (core/held.h) */
	/* Owned by the state, not by this struct: freed by egs_gpr_clear_check_runs() when the GPR leaves
	 * the state, so that a shallow copy of a GPR (PATCH edits one) never frees them. */
	struct egs_check_run *check_runs;
	size_t n_check_runs;
	/* GPU sharing (core/share_gpr.h): share_centi (above) > 0 makes a shared GPR asking for that many
	 * hundredths of GPUs on one node (gpus_per_node is then their whole GPUs rounded up); shares
	 * are its part of that node's devices once started (owned, n_shares entries, persisted). */
	struct egs_gpu_share *shares;
	int n_shares;
	struct egs_node *share_node; /* runtime: the node whose `shared` lists it, NULL when none */
	bool dirty;
};

/* A named document an admin defines and egsd stores as canonical JSON that only the server reads:
 * a GPR template (the request shape it stands for) or a template binding (which templates a
 * workspace may use per cluster; named after its workspace).  server/api_template.c owns the
 * JSON's meaning; the core only keeps and persists it. */
struct egs_doc {
	char name[EGS_NAME_MAX];
	char project[EGS_NAME_MAX];
	char *spec; /* canonical JSON object text, owned, never NULL once added */
	int64_t created_at;
	int64_t updated_at;
	bool dirty;
};

struct egs_apikey {
	char id[EGS_ID_MAX];
	char name[EGS_NAME_MAX];
	char user_name[EGS_NAME_MAX * 2];
	char *description;
	enum egs_role role;
	char project[EGS_NAME_MAX];   /* "" = all projects (admin keys only) */
	char workspace[EGS_NAME_MAX]; /* "" = all workspaces of the project */
	char cluster[EGS_NAME_MAX];   /* agent keys: the one cluster */
	unsigned char hash[32];       /* BLAKE2b-256 of the key text */
	int64_t created_at;
	int64_t expires_at; /* 0 = never */
	bool dirty;
};

struct egs_event {
	int64_t id;
	int64_t time;       /* last time */
	int64_t first_time;
	int count;
	char type[8];       /* Normal | Warning */
	char reason[EGS_NAME_MAX];
	char object_kind[16]; /* GPR, Node, Workspace, Cluster */
	char object_name[EGS_KEY_MAX];
	char workspace[EGS_NAME_MAX]; /* "" when not workspace-scoped */
	char *message; /* owned */
	bool listed;   /* runtime: already in the state's listing ring (a repeat is written again) */
};

/* One audited write of the user-facing API (server/audit.h): who, what, when, from where.  Never a
 * key or a request body. */
struct egs_audit {
	int64_t id;   /* assigned by egs_state_audit, increasing */
	int64_t time; /* when it was answered (UNIX seconds) */
	char key_id[EGS_ID_MAX];
	char key_name[EGS_NAME_MAX];
	char role[16];   /* Admin | Owner | Viewer */
	char method[8];  /* POST | PUT | PATCH | DELETE */
	char route[128]; /* the route's path */
	char target[128]; /* the object it named (an id or a name), "" when none */
	int status;      /* the HTTP status of the answer */
	char error_key[48]; /* the errorKey of an error answer, "" on success */
	char peer[160];  /* the client's address; "<client> via <follower>" for a forwarded write */
};

#endif
