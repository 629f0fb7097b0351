/*
 * k8s_events.h: egsd's GPR transitions mirrored into the cluster as core/v1 Events (docs/kubernetes.md,
 * "Events"): a thread polls egsd's GET /api/v1/agent/events every few seconds and writes each event into
 * every namespace of the GPR's slice on this cluster, reason GPR<reason> (GPRProvisioned, GPRWindow25,
 * GPRWindow50, GPRWindow75, GPRExitWarning, GPREarlyRelease, GPRExit, GPRReleased, GPRNodeReplaced,
 * GPRNodeFailed, GPRCheckFailed, GPRProvisioningFailed, GPRDetachFailed, GPRIdleWarning, GPRIdleTimeout).
 *
 * One Event object per GPR, reason and namespace (named <gpr id>.<reason in lower case>): a repeat raises
 * its count and moves its lastTimestamp, as Kubernetes' own event correlator does, instead of adding
 * objects.  The agent starts at egsd's newest event, so what happened while it was down is not mirrored
 * (it stays in egsd's GET /api/v1/events).
 */
#ifndef EGS_AGENT_K8S_EVENTS_H
#define EGS_AGENT_K8S_EVENTS_H

#include "agent/backend.h"

struct egs_k8s_gpr_events;

/*
 * Starts mirroring for the kubernetes backend b (borrowed; must outlive the mirror) from egsd at
 * server_url with the agent's token (copied; ca_file NULL: the system store), polling every poll_s
 * seconds (0 picks 2).  Returns NULL when the client or the thread cannot be made.  Free with
 * egs_k8s_gpr_events_free().
 */
struct egs_k8s_gpr_events *egs_k8s_gpr_events_new(struct egs_backend *b, const char *server_url, const char *token,
						  const char *ca_file, int poll_s);

/* Stops the thread and frees the mirror.  egs_k8s_gpr_events_free(NULL) is a no-op. */
void egs_k8s_gpr_events_free(struct egs_k8s_gpr_events *e);

/* The Kubernetes reason for egsd's GPR event reason, or NULL when it is not mirrored. */
const char *egs_k8s_gpr_reason(const char *egs_reason);

#endif
