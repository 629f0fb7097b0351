/*
 * agent.h: the egs-agent protocol loop (docs/internals/agent-protocol.md): register, heartbeat,
 * long-poll actions, carry them out through the cluster backend, report each result.
 *
 * Two threads, each with its own libegs client:
 *   - the heartbeat thread registers (retrying with backoff until egsd answers), samples the GPUs every
 *     sample interval and sends a heartbeat every heartbeatIntervalSeconds, at once when a node's health
 *     changed or an action changed the attachments (those at most every 250 ms); it registers again
 *     when a heartbeat is answered
 *     401 or 404, or after egsd could not be reached (egsd may have restarted and forgotten the agent);
 *   - the action thread long-polls GET /api/v1/agent/actions?wait=25 while registered and runs each
 *     action, with the pre-checks before an attach and the post-exit checks after a detach; a node
 *     that fails a check is reported Unhealthy for the quarantine time.  A failed poll sends the agent
 *     back to registering.
 * egs_agent_stop() interrupts both within about a second, in-flight HTTP calls and hooks included.
 */
#ifndef EGS_AGENT_AGENT_H
#define EGS_AGENT_AGENT_H

#include "agent/backend.h"
#include "agent/checks.h"
#include "agent/devices.h"
#include "core/common.h"

#include <jansson.h>

#define EGS_AGENT_VERSION "0.2.0"

struct egs_agent_config {
	const char *server_url; /* e.g. "http://127.0.0.1:8080" */
	const char *ca_file;    /* https: the CA file that verifies egsd (copied; NULL: the system store) */
	const char *cluster;
	const char *token;            /* the cluster's agent token; never logged */
	struct egs_devices *devices; /* borrowed; must outlive the agent */
	struct egs_backend *backend; /* borrowed; must outlive the agent */
	int poll_wait_s;             /* the long poll's wait (0..60); 0 picks 25 */
	int max_backoff_s;           /* longest pause between registration attempts; 0 picks 10 */
	/* Checks before an attach and after a detach (borrowed; NULL: node-health before attach only). */
	const struct egs_checks_config *checks;
	const char *checks_dir; /* where each GPR's check log is appended (copied; NULL: not kept) */
	int quarantine_s;       /* a node that failed a check is reported Unhealthy this long; 0 picks 300 */
	int sample_interval_s;  /* how often GPUs are sampled between heartbeats; 0 picks 1 */
	const char *address;    /* "host:port" of this agent's check port, registered with nodes without
				 * an address of their own (copied; NULL: none) */
	json_t *unmanaged;      /* registration's "unmanagedNodes" (GPU nodes that opted out of EGS; a
				 * reference is taken; NULL: none sent) */
	bool no_sharing;        /* the backend does not share GPUs: "sharing" is not advertised */
};

struct egs_agent;

/*
 * Returns a new, not yet running agent (caller frees with egs_agent_free()), or NULL when
 * cfg->server_url is not an http(s) URL, the token holds control characters or cfg->ca_file cannot
 * be read.  cfg's strings are
 * copied.  Installs the agent's stop check into cfg->backend.
 */
struct egs_agent *egs_agent_new(const struct egs_agent_config *cfg);

/* Starts the two threads.  Returns EGS_ERR_IO when a thread cannot be created (nothing runs then). */
enum egs_err egs_agent_start(struct egs_agent *a);

/* Asks the threads to finish; returns at once.  Safe to call from any thread, more than once; not
 * from a signal handler (use sigwait() in a normal thread, as main.c does). */
void egs_agent_stop(struct egs_agent *a);

/* True once egs_agent_stop() was called. */
bool egs_agent_stopping(const struct egs_agent *a);

/* Stops the agent if running, waits for its threads and frees it.  egs_agent_free(NULL) is a no-op. */
void egs_agent_free(struct egs_agent *a);

#endif
