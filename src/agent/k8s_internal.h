/*
 * k8s_internal.h: what the kubernetes backend's files share (backend_k8s.c: opening, attach, queries;
 * k8s_drain.c: detach and events; devices_k8s.c: the device view; k8s_dcgm.c, k8s_pods.c: GPU metrics
 * and workloads; k8s_slice.c: slice access).  Not for other modules.
 */
#ifndef EGS_AGENT_K8S_INTERNAL_H
#define EGS_AGENT_K8S_INTERNAL_H

#include "agent/backend_k8s.h"
#include "agent/kube.h"
#include "agent/k8s_obs.h"
#include "agent/kube_reflector.h"

#include <pthread.h>
#include <stdatomic.h>

struct egs_k8s {
	struct egs_backend base; /* first: struct egs_backend * converts to struct egs_k8s * */
	char *cluster;
	int evict_grace_s, drain_timeout_s, api_timeout_s;
	struct egs_kube *kube;
	struct egs_kube_reflector *nodes;      /* every node */
	struct egs_kube_reflector *namespaces; /* namespaces labelled kubeslice.io/slice */
	struct egs_kube_reflector *pods;       /* every pod, trimmed (k8s_pods.c) */
	struct egs_k8s_dcgm *dcgm;             /* the dcgm-exporter scraper (k8s_dcgm.c) */
	pthread_mutex_t op_mu;                 /* serialises attach and detach */
	atomic_bool closing;
	atomic_uint event_seq;
	pthread_t reconciler;
	bool reconciler_started;
	pthread_mutex_t rmu; /* guards dirty */
	pthread_cond_t rcv;
	bool dirty;          /* the node cache changed since the reconciler last looked */
};

/* True when the backend closes or the agent stops (slow operations give up). */
bool egs__k8s_stopping(struct egs_k8s *k);

/* The backend's answer for rc: EGS_ERR_IO (egs_kube_call(): no answer or 5xx) becomes EGS_ERR_BUSY
 * ("cannot act now", backend.h) with msg saying so, unless the agent stops.  Other codes are kept. */
enum egs_err egs__k8s_later(struct egs_k8s *k, enum egs_err rc, char *msg, size_t msgsz);

/* GETs node name from the API server into *node (caller decrefs).  The egs_kube_call() codes. */
enum egs_err egs__k8s_node_get(struct egs_k8s *k, const char *name, json_t **node, char *msg, size_t msgsz);

/* Merge-patches node name and puts the answer into the node cache.  The egs_kube_call() codes. */
enum egs_err egs__k8s_node_patch(struct egs_k8s *k, const char *name, json_t *patch, char *msg, size_t msgsz);

/* The detach operation of the backend (k8s_drain.c). */
enum egs_err egs__k8s_detach(struct egs_backend *b, const char *node, const char *gpr_id, char *msg, size_t msgsz);

/* The slice operations of the backend (k8s_slice.c; backend.h's egs_backend_slice_*()). */
enum egs_err egs__k8s_slice_access(struct egs_backend *b, const struct egs_slice_req *req,
				   struct egs_slice_token *tok, char *msg, size_t msgsz);
enum egs_err egs__k8s_slice_release(struct egs_backend *b, const char *ws, const char *ns, const char *sa,
				    char *msg, size_t msgsz);
json_t *egs__k8s_slice_state(struct egs_backend *b);

/* Writes a core/v1 Event about gpr_id into each namespace of nss; failures are logged, never returned. */
void egs__k8s_events(struct egs_k8s *k, const struct egs_strlist *nss, const char *gpr_id, const char *reason,
		     const char *type, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif
