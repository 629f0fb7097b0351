/*
 * backend_k8s.h: the kubernetes cluster backend (docs/kubernetes.md): nodes of a real cluster are
 * attached to slice workspaces by labels, isolated by a taint and the admission webhook, and drained
 * through the Eviction API at detach.  It implements backend.h, and also gives the agent its device
 * view (the cluster's GPU nodes) because on Kubernetes the node list comes from the API server.
 *
 * Where the truth lives: in the cluster.  A node is attached when it carries the label
 * kubeslice.io/gpr=<id>; that survives agent restarts and is what attached_gpr() and list() read
 * (from the node cache, which the agent's own writes update at once).  Every write is a patch of the
 * difference, and the attach patch carries the node's resourceVersion, so two writers cannot both
 * attach one node (one gets 409 and sees the other's label on its next read).
 *
 * Threads: a reflector each for nodes, namespaces and pods, the dcgm-exporter scraper, and a reconciler that keeps the EGS taint on
 * exactly the managed GPU nodes.  attach/detach are serialised by the backend.
 */
#ifndef EGS_AGENT_BACKEND_K8S_H
#define EGS_AGENT_BACKEND_K8S_H

#include "agent/backend.h"
#include "agent/devices.h"
#include "agent/k8s_node.h"

struct egs_backend_k8s_config {
	const char *kubeconfig; /* NULL: the in-cluster service account */
	const char *sa_dir;     /* in-cluster: where the token and CA are (NULL: the standard place) */
	const char *cluster;
	int evict_grace_s;      /* the evicted pods' grace period; 0 picks 30 */
	int drain_timeout_s;    /* how long evictions refused by a PodDisruptionBudget are retried before
				 * the pod is deleted; 0 picks 300 */
	int api_timeout_s;      /* one API call; 0 picks 10 */
	const char *dcgm_url;   /* scrape this dcgm-exporter; NULL: its pods, found by label (k8s_obs.h) */
	int scrape_interval_s;  /* how often dcgm-exporter is scraped; 0 picks 5 */
};

/*
 * Opens the backend: reads the configuration, starts the reflectors and the taint reconciler.  Does not
 * wait for the API server (see egs_backend_k8s_wait_synced()).  Stores the backend in *out (caller
 * frees with egs_backend_free()).  Fails with EGS_ERR_INVALID or EGS_ERR_IO (the configuration), or
 * EGS_ERR_NOT_FOUND (no --kubeconfig and not in a cluster), writing why into err.
 */
enum egs_err egs_backend_k8s_new(const struct egs_backend_k8s_config *cfg, struct egs_backend **out, char *err,
				 size_t errsz);

/* Waits up to timeout_ms until the node cache holds a complete list; false when it does not yet. */
bool egs_backend_k8s_wait_synced(struct egs_backend *b, int timeout_ms);

/*
 * A device view of the managed GPU nodes now in the cache (a fixed list, as devices.h wants): health
 * from the node objects at each sample.  The GPU nodes that opted out (unmanaged) go to *unmanaged
 * (caller frees the array; *n_unmanaged entries).  b must outlive the devices.  Caller frees *out
 * with egs_devices_free().
 */
void egs_backend_k8s_devices(struct egs_backend *b, struct egs_devices **out, struct egs_k8s_node **unmanaged,
			     size_t *n_unmanaged);

/* A number that changes when the set of GPU nodes or what they register (managed or not, model,
 * count, memory, instance type, region) changes: the agent registers again when it does. */
uint64_t egs_backend_k8s_signature(struct egs_backend *b);

/* Writes the workspace of slice namespace ns (from the namespace cache) into ws; false when ns is not a
 * slice namespace.  The admission webhook's lookup (egs_webhook_slice_fn). */
bool egs_backend_k8s_slice_of(struct egs_backend *b, const char *ns, char *ws, size_t wssz);

/* Creates or replaces the MutatingWebhookConfiguration and ValidatingWebhookConfiguration "egs-agent"
 * pointing at url_base with ca_pem (webhook.h).  The egs_kube_call() codes, why in err. */
enum egs_err egs_backend_k8s_register_webhooks(struct egs_backend *b, const char *url_base, const char *ca_pem,
					       char *err, size_t errsz);

#endif
