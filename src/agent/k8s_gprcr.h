/*
 * k8s_gprcr.h: the GPUProvisioningRequest controller of egs-agent --backend kubernetes (docs/kubernetes.md,
 * "GPR custom resources").  It watches the CRs (egs.kubeslice.io/v1, deploy/kubernetes/worker's CRD) in
 * every namespace and, for those in slice namespaces (labelled kubeslice.io/slice), keeps egsd's GPR in
 * step with the CR through the agent routes /api/v1/agent/gprs:
 *
 *   - a CR gets the finalizer egs.kubeslice.io/gpr before its GPR exists, then its GPR is created (or
 *     updated when metadata.generation moved) and the annotation egs.kubeslice.io/gpr-id names it;
 *   - the GPR's state, estimate, nodes and newest events go to the CR's status subresource, written only
 *     when they differ from what the CR shows; a spec egsd refused shows its reason (with the field);
 *   - a deleted CR cancels its waiting GPR or releases its running one, then loses the finalizer;
 *   - a GPR whose CR is gone from the cluster (its finalizer removed by hand) is ended the same way.
 *
 * Idempotent by construction: egsd links a GPR to the CR's uid, so an agent restart or a re-list never
 * creates a second one, and every write is the difference between egsd's view and the CR.  CRs outside
 * slice namespaces are ignored (no finalizer, no status).  One thread; rounds after each change of the
 * CR cache and at least every interval.
 */
#ifndef EGS_AGENT_K8S_GPRCR_H
#define EGS_AGENT_K8S_GPRCR_H

#include "agent/backend.h"

#define EGS_GPRCR_FINALIZER "egs.kubeslice.io/gpr"
#define EGS_GPRCR_ANNOTATION "egs.kubeslice.io/gpr-id"

struct egs_gprcr_config {
	struct egs_backend *backend; /* the kubernetes backend (borrowed; outlives the controller) */
	const char *server_url;      /* egsd (copied) */
	const char *token;           /* the cluster's agent token (copied; never logged) */
	const char *ca_file;         /* https: the CA file that verifies egsd (NULL: the system store) */
	int interval_ms;             /* the longest gap between rounds; 0 picks 1000 */
};

struct egs_gprcr;

/* Starts the controller's reflector and thread.  EGS_ERR_INVALID when the URL, token or CA file is unusable,
 * EGS_ERR_IO when a thread cannot start (err says why).  Caller frees *out with egs_gprcr_free(). */
enum egs_err egs_gprcr_start(const struct egs_gprcr_config *cfg, struct egs_gprcr **out, char *err, size_t errsz);

/* Stops the thread (within about a second) and frees the controller.  egs_gprcr_free(NULL) is a no-op. */
void egs_gprcr_free(struct egs_gprcr *c);

#endif
