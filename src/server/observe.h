/*
 * observe.h: egsd's observability runtime, shared by observe.c (settings, hooks), alerts.c,
 * api_events.c (listing and server-sent events), api_observe.c (GPU and workload views),
 * api_usage.c (prices, usage, insights), metrics.c (/metrics) and notify.c (webhooks).
 *
 * Everything here belongs to the loop thread, like struct egs_state; only notify.c's worker runs
 * elsewhere, and it never sees this struct.  Runtime data (series, workloads, alerts, watchers,
 * counters) is not persisted; settings and prices are, in the store's meta table, and active alerts
 * and undelivered webhook messages as documents of the state (alerts.h, outbox.h).
 */
#ifndef EGS_OBSERVE_H
#define EGS_OBSERVE_H

#include "core/series.h"
#include "server/alerts.h"
#include "server/server.h"

/* Admin-tunable settings (GET/PUT /api/v1/settings/observability), stored as JSON in meta. */
struct egs_obs_settings {
	int64_t exit_warning_s;     /* warn this long before a GPR's exit; 0 = never (default 600) */
	size_t event_retention;     /* events kept for listing and in the store (default 10000) */
	int64_t event_ttl_s;        /* events older than this are pruned (default 30 days) */
	double temp_threshold;      /* gpuTempThreshold of newly registered nodes (default 85) */
	double power_threshold;     /* gpuPowerThreshold of newly registered nodes (default 700) */
	struct egs_alert_rules rules; /* utilization threshold and hystereses */
	int64_t series_step_s;      /* one point per step (default 60) */
	uint32_t series_points;     /* points per GPU (default 120) */
};

/* The latest workloads an agent reported for one node (runtime only). */
struct egs_node_workloads {
	char node[EGS_KEY_MAX]; /* map key */
	json_t *items;          /* cleaned array of {name, namespace, gpus, labels}, owned */
	int64_t at;
};

/* Request metrics: a latency histogram per route and method, counts per status class. */
#define EGS_LAT_BUCKETS 12
struct egs_route_stats {
	char method[8];
	const char *route; /* the route's path pattern (static) or "other" */
	uint64_t buckets[EGS_LAT_BUCKETS + 1]; /* the last is +Inf */
	uint64_t codes[6];                     /* 1xx..5xx by class, [0] unused */
	double sum_s;
	uint64_t count;
};

/* Start-estimate error (actual start - first estimate) histogram. */
#define EGS_EST_BUCKETS 9
struct egs_est_stats {
	uint64_t buckets[EGS_EST_BUCKETS + 1];
	double sum_s;
	uint64_t count;
};

struct egs_notify;

struct egs_obs {
	struct egs_obs_settings cfg;
	struct egs_vec scrapes; /* GET /metrics answers in pieces (metrics.c struct scrape, owned) */
	struct egs_series_set series;
	struct egs_map workloads; /* node key -> struct egs_node_workloads (owned) */
	struct egs_map pending;   /* cluster -> its waiting pods (observe_pods.c, owned) */
	struct egs_alerts alerts;
	struct egs_vec watchers;  /* struct egs_watcher* (api_events.c) */
	struct event *ping_ev;    /* keeps event streams alive */
	struct egs_notify *notify;
	struct egs_map first_est; /* GPR id -> its first estimated start (observe.c, owned) */
	json_t *prices;           /* {"<gpu shape>": [{"from": t, "price": p}, ...]} oldest first */
	struct egs_route_stats *routes;
	size_t n_routes;
	struct egs_est_stats est;
	uint64_t events_total[2];       /* Normal, Warning: committed since start */
	uint64_t webhooks[4];           /* delivered, failed, dropped, retried (enum egs_notify_outcome) */
	struct egs_vec outbox_new;      /* char* keys of this turn's stored webhook messages (outbox.c) */
	struct egs_map webhook_ws;      /* workspace -> struct egs_ws_delivery (owned) */
	int64_t next_prune, next_ping;  /* monotonic seconds of the next retention pass, ping */
	bool started;
};

/* Per-workspace webhook delivery state (api_observe.c shows it). */
struct egs_ws_delivery {
	char workspace[EGS_NAME_MAX];
	uint64_t delivered, failed;
	int64_t last_ok, last_fail;
	char last_error[160];
};

/* ---- observe.c ---- */
/* Reads the settings JSON object s into cfg (absent fields keep their value); on a bad field
 * writes its name into *field and a reason into why and returns false. */
bool egs_obs_settings_parse(json_t *s, struct egs_obs_settings *cfg, const char **field, char *why, size_t whylen);
json_t *egs_obs_settings_json(const struct egs_obs_settings *cfg);
/* The workspace holding node n through a provisioned-or-provisioning GPR ("" when none), and
 * that GPR (NULL when none). */
const struct egs_gpr *egs_obs_node_gpr(const struct egs_server *srv, const struct egs_node *n);
/* Is a node (or what it holds) visible to the caller: admins of its project, or users of the
 * workspace that holds it. */
bool egs_obs_node_visible(const struct egs_req *r, const struct egs_node *n);
/* May the caller read events of workspace ws ("" = not workspace-scoped: admins only)? */
bool egs_obs_ws_visible(const struct egs_req *r, const char *ws);

/* ---- api_events.c ---- */
/* Sends the committed event e to every event stream whose filters match it. */
void egs_events_broadcast(struct egs_server *srv, const struct egs_event *e);
/* Ends every event stream cleanly (shutdown). */
void egs_events_close_all(struct egs_server *srv);
/* Writes a keep-alive comment to every stream and drops streams whose client stopped reading. */
void egs_events_ping(struct egs_server *srv);


/* ---- api_usage.c ---- */
/* Price per GPU-hour of shape at time t (0 when none was set). */
double egs_price_at(const struct egs_server *srv, const char *shape, int64_t t);
/* Cost of gpus GPUs of shape held over [from, to), following price changes. */
double egs_price_cost(const struct egs_server *srv, const char *shape, double gpus, int64_t from, int64_t to);
/* The GPU shape g runs on (its request's, or its first node's), "" when unknown. */
const char *egs_gpr_shape(const struct egs_server *srv, const struct egs_gpr *g);
/* The interval [*from, *to) during which g held GPUs at now; false when it never did. */
bool egs_gpr_held(const struct egs_gpr *g, int64_t now, int64_t *from, int64_t *to);

/* ---- metrics.c ---- */
/* The route pattern path matches (static string) or "other". */
const char *egs_metrics_route(const char *path);
/* Answers every scrape still in pieces (metrics.c) at once: egsd is stopping. */
void egs_metrics_finish_all(struct egs_server *srv);

#endif
