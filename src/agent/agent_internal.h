/*
 * agent_internal.h: what agent.c (the loop: registration, sampling, heartbeats, polling) and
 * agent_actions.c (carrying out one action with its checks) share.  Not for other modules.
 *
 * Locking: mu guards every field marked "under mu" and is never held across I/O (HTTP, hooks, device
 * reads); cv (CLOCK_MONOTONIC) is broadcast on every change and on stop.
 */
#ifndef EGS_AGENT_INTERNAL_H
#define EGS_AGENT_INTERNAL_H

#include "agent/agent.h"
#include "agent/report.h"

#include <egs/egs.h>

#include <pthread.h>
#include <stdatomic.h>

#define EGS__AGENT_MSG_MAX 512

/* What the agent knows of one node between samples. */
struct egs__node_state {
	bool sampled;                  /* under mu: the fields below hold a sample */
	enum egs_health health;        /* under mu: the device backend's verdict */
	char why[EGS_DEV_WHY_MAX];     /* under mu */
	struct egs_gpu_sample *gpus;   /* under mu: gpu_count entries */
	int64_t mark_until;            /* under mu: UNIX time until which a failed check keeps it Unhealthy */
	char mark_why[EGS_REPORT_MSG_MAX]; /* under mu */
	enum egs_health reported;      /* under mu: the health the last heartbeat carried */
	bool reported_once;            /* under mu */
};

struct egs_agent {
	char *url, *cluster, *checks_dir, *address;
	json_t *unmanaged; /* registration's unmanagedNodes, or NULL */
	bool no_sharing;
	struct egs_devices *dev;
	struct egs_backend *be;
	const struct egs_checks_config *checks;
	int poll_wait_s, max_backoff_s, quarantine_s, sample_interval_s;
	struct egs_client *hb_client, *act_client;
	atomic_bool stop;
	atomic_bool server_checks; /* egsd takes "checks" in action results (advertised at registration) */
	atomic_bool server_pods;   /* egsd takes "pendingPods" in heartbeats (advertised at registration) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool registered;  /* under mu */
	uint64_t reg_gen; /* under mu: bumped by each successful registration */
	int interval_s;   /* under mu */
	bool hb_kick;     /* under mu: send a heartbeat now */
	struct egs__node_state *nodes; /* dev->n_nodes entries */
	pthread_t hb_thread, act_thread;
	bool started;
	/* Slice access (agent_slice.c), when the backend has it: */
	struct egs_client *slice_client; /* the report thread's; NULL without slice access */
	pthread_t slice_thread;
	bool slice_started;
	pthread_mutex_t slice_mu; /* guards the three below */
	char *slice_last;         /* the last report egsd took (JSON), or NULL */
	int64_t slice_at_ms;      /* when (monotonic ms) */
	uint64_t slice_gen;       /* under which registration */
};

/* Carries out one action of the list batch (borrowed; the action is one of its entries) and reports
 * its result.  Runs in the action thread. */
void egs__agent_run_action(struct egs_agent *a, json_t *act, json_t *batch);

/* Carries out act when it is a slice action (sliceAccess, sliceRelease) and returns true; false for
 * any other action.  Runs in the action thread (agent_slice.c). */
bool egs__agent_slice_action(struct egs_agent *a, json_t *act);

/* Slice access lifecycle (agent_slice.c): init from egs_agent_new() (the report client, when the
 * backend has slice access; server_url, token and ca_file (may be NULL) borrowed), start from egs_agent_start() (the report
 * thread), cleanup from egs_agent_free() after the stop (joins the thread, frees). */
void egs__agent_slice_init(struct egs_agent *a, const char *server_url, const char *token, const char *ca_file);
enum egs_err egs__agent_slice_start(struct egs_agent *a);
void egs__agent_slice_cleanup(struct egs_agent *a);

/* Marks node i Unhealthy for the quarantine time because of why (a failed check). */
void egs__agent_mark(struct egs_agent *a, size_t i, const char *why);

/* Sleeps ms milliseconds unless the agent stops meanwhile. */
void egs__agent_pause(struct egs_agent *a, int64_t ms);

/* Asks the heartbeat thread for a heartbeat now. */
void egs__agent_kick(struct egs_agent *a);

#endif
