/*
 * k8s_infer.h: the inference endpoint controller of the kubernetes backend (docs/kubernetes.md,
 * "Inference endpoints"; egsd's side is src/server/api_agent_infer.c).
 *
 * Every round it reads the cluster's endpoints from egsd (GET /api/v1/agent/inference-endpoints), and for
 * each: when egsd wants it present, creates the objects egsd rendered that do not exist yet and reads the
 * readiness of its workloads; when egsd wants it absent, deletes them.  What it observed goes back to
 * egsd (POST, only when it differs from what egsd holds).  An object is touched only when it carries the
 * label egs.kubeslice.io/inference-endpoint=<endpoint>: one of the same name that is not the endpoint's is
 * reported as a failure, never changed or deleted.  Every round compares and acts on the difference, so
 * a restart of the agent, egsd or the API server changes nothing.  One thread; a round every interval.
 */
#ifndef EGS_AGENT_K8S_INFER_H
#define EGS_AGENT_K8S_INFER_H

#include "agent/backend.h"

struct egs_infer_config {
	struct egs_backend *backend; /* the kubernetes backend (borrowed; outlives the controller) */
	const char *server_url;      /* egsd (copied) */
	const char *token;           /* the cluster's agent token (copied; never logged) */
	const char *ca_file;         /* https: the CA file that verifies egsd (NULL: the system store) */
	int interval_ms;             /* between rounds; 0 picks 1000 */
};

struct egs_infer;

/* Starts the controller's thread.  EGS_ERR_INVALID when the URL, token or CA file is unusable, EGS_ERR_IO
 * when the thread cannot start (err says why).  Caller frees *out with egs_infer_free(). */
enum egs_err egs_infer_start(const struct egs_infer_config *cfg, struct egs_infer **out, char *err, size_t errsz);

/* Stops the thread (within about a second) and frees the controller.  egs_infer_free(NULL) is a no-op. */
void egs_infer_free(struct egs_infer *c);

#endif
