/*
 * alerts.h: threshold alerts on GPUs and nodes, raised once and resolved with hysteresis.
 *
 * Rules (an alert is keyed by kind, node and GPU, so one GPU can be hot and power-hungry at once):
 *   GPUTemperatureHigh  temperature above the node's gpuTempThreshold;
 *                       resolved at or below threshold - temp_hysteresis.
 *   GPUPowerHigh        power above the node's gpuPowerThreshold;
 *                       resolved at or below threshold - power_hysteresis.
 *   GPUUtilizationHigh  utilization at or above util_threshold (0 turns the rule off);
 *                       resolved below util_threshold - util_hysteresis.
 *   NodeUnhealthy       the agent reports the node not Healthy; resolved when Healthy again.
 *   NodeNotReporting    no heartbeat for the heartbeat timeout; resolved by the next heartbeat.
 * Raising writes one Warning event with the alert's reason, resolving one Normal event with the
 * matching *Normal / NodeHealthy / NodeReporting reason; both name the Node as involved object and
 * are scoped to the workspace whose GPR held the node when the alert was raised, so that
 * workspace's users see the pair.  Repeats within ten minutes aggregate into one event (count).
 *
 * Active alerts survive a restart: each is mirrored by a struct egs_doc of kind EGS_KIND_ALERT in
 * the state (written with the turn that raised it, rewritten when its peak rises, deleted with the
 * turn that resolves it), and egs_alerts_restore rebuilds them after a load.  So an alert raised
 * before a restart is resolved (one event, one notification) by the first sample after it, and a
 * condition that still holds is not raised twice.  Pure apart from the state it records events and
 * documents in: time comes in as `now`.
 */
#ifndef EGS_ALERTS_H
#define EGS_ALERTS_H

#include "core/state.h"

#include <jansson.h>
#include <stdio.h>

enum egs_alert_kind {
	EGS_ALERT_GPU_TEMP = 0,
	EGS_ALERT_GPU_POWER,
	EGS_ALERT_GPU_UTIL,
	EGS_ALERT_NODE_UNHEALTHY,
	EGS_ALERT_NODE_SILENT,
	EGS_ALERT_NKINDS
};

struct egs_alert_rules {
	double util_threshold;   /* percent; 0 = no utilization alerts (default 95) */
	double temp_hysteresis;  /* degrees C (default 5) */
	double power_hysteresis; /* watts (default 50) */
	double util_hysteresis;  /* percentage points (default 10) */
};

struct egs_alert {
	char key[EGS_KEY_MAX + EGS_NAME_MAX + 8]; /* "<kind>|<node>|<gpu>": the map key */
	enum egs_alert_kind kind;
	char node[EGS_KEY_MAX];       /* "cluster/name" */
	char gpu[EGS_NAME_MAX];       /* GPU UUID, "" for node alerts */
	int gpu_index;
	char workspace[EGS_NAME_MAX]; /* holder when raised, "" for a free node */
	char gpr[EGS_ID_MAX];
	double value, peak, threshold; /* latest value, worst value, threshold when raised */
	int64_t since, updated;
	char doc[EGS_NAME_MAX]; /* its struct egs_doc in the state: "alert-" and a hash of key */
};

struct egs_alerts {
	struct egs_map active;                 /* key -> struct egs_alert (owned) */
	uint64_t raised[EGS_ALERT_NKINDS];     /* since start, for /metrics */
};

void egs_alerts_init(struct egs_alerts *a);
void egs_alerts_cleanup(struct egs_alerts *a);

/* The raise reason of a kind ("GPUTemperatureHigh", ...) and its resolve reason. */
const char *egs_alert_reason(enum egs_alert_kind k);
const char *egs_alert_resolved_reason(enum egs_alert_kind k);
/* True when reason is the raise or resolve reason of some alert kind. */
bool egs_alert_is_alert_reason(const char *reason);
/* Parses a kind by its raise reason; false when unknown. */
bool egs_alert_kind_parse(const char *s, enum egs_alert_kind *out);

/* Checks one sampled GPU of node n against the rules, raising or resolving its alerts.  ws and gpr
 * name the node's holder ("" / NULL when free). */
void egs_alerts_check_gpu(struct egs_alerts *a, struct egs_state *st, const struct egs_alert_rules *rules,
			  const struct egs_node *n, const struct egs_gpu *g, const char *ws, const char *gpr,
			  int64_t now);
/* Checks node-level conditions: reported health (why: the agent's healthReason, NULL or "" when none;
 * named in the raising event) and silence. */
void egs_alerts_check_node(struct egs_alerts *a, struct egs_state *st, const struct egs_node *n, bool silent,
			   const char *why, const char *ws, const char *gpr, int64_t now);

/* Replaces a's active alerts by those stored in st->alerts (after egs_store_load, at start and after
 * a reload).  A document that does not parse is dropped from the state (logged on log, which may be
 * NULL) rather than stopping egsd: an alert is raised again by the next sample. */
void egs_alerts_restore(struct egs_alerts *a, struct egs_state *st, FILE *log);

/* Number of active alerts (of kind k, or of every kind when k is EGS_ALERT_NKINDS). */
size_t egs_alerts_count(const struct egs_alerts *a, enum egs_alert_kind k);
/* The active alerts, newest first, into out (borrowed pointers; out is cleared first). */
void egs_alerts_list(const struct egs_alerts *a, struct egs_vec *out);
/* The wire view of an alert (caller owns the result). */
json_t *egs_json_alert(const struct egs_alert *al);

#endif
