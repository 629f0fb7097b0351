/*
 * k8s_obs.h: what the kubernetes backend observes in the cluster beyond nodes (docs/kubernetes.md, "GPU
 * metrics and workloads"):
 *   - k8s_dcgm.c: GPU metrics scraped from dcgm-exporter (its pods found in the pod cache by label, or
 *     one URL given with --dcgm-exporter), parsed with prom.h, kept per node and GPU index, and the pods
 *     dcgm-exporter says use each GPU;
 *   - k8s_pods.c: the pod cache's trim, and the workloads of each managed node (its GPU pods) and the
 *     slice's GPU pods that wait for nodes (Pending, not bound), for heartbeats.
 * Internal to the backend (k8s_internal.h includes it).
 */
#ifndef EGS_AGENT_K8S_OBS_H
#define EGS_AGENT_K8S_OBS_H

#include "agent/devices.h"

#include <jansson.h>

#define EGS_K8S_DCGM_PORT 9400 /* dcgm-exporter's default; a container port named "metrics" wins */
#define EGS_K8S_PENDING_MAX 500 /* pending pods reported per heartbeat */

struct egs_k8s;
struct egs_k8s_dcgm;

/*
 * Starts the scraper thread of backend k (borrowed; must outlive it): every interval_s seconds it
 * scrapes url (NULL: every Running dcgm-exporter pod of the pod cache, labelled
 * app.kubernetes.io/name=dcgm-exporter or app=nvidia-dcgm-exporter, at its pod IP and metrics port) and
 * replaces the table.  Samples are given to the node named by the pod's spec.nodeName, or with url by
 * the label Hostname.  Returns NULL when the thread cannot start.  Free with egs_k8s_dcgm_free().
 */
struct egs_k8s_dcgm *egs_k8s_dcgm_new(struct egs_k8s *k, const char *url, int interval_s);

/* Stops the thread and frees the table.  egs_k8s_dcgm_free(NULL) is a no-op. */
void egs_k8s_dcgm_free(struct egs_k8s_dcgm *d);

/*
 * Fills out[0 .. n-1] (zeroed by the caller) with the latest metrics of node's GPUs by index (valid
 * bits as devices.h; XID: last_xid is DCGM_FI_DEV_XID_ERRORS, the last XID the GPU reported, and
 * xid_count how often it changed to a non-zero value while the agent watched).  Returns false, leaving
 * out alone, when the node has no fresh scrape (none in the last three intervals plus 5 s).
 */
bool egs_k8s_dcgm_sample(struct egs_k8s_dcgm *d, const char *node, int n, struct egs_gpu_sample *out);

/* Calls fn(arg, namespace, pod, gpu index) for each pod the fresh scrape of node says uses a GPU
 * (strings borrowed for the call; fn must not call back into d). */
void egs_k8s_dcgm_pods(struct egs_k8s_dcgm *d, const char *node,
		       void (*fn)(void *arg, const char *ns, const char *pod, int gpu), void *arg);

/* How many scrapes failed since the start (for logs and tests). */
unsigned egs_k8s_dcgm_failures(struct egs_k8s_dcgm *d);

/*
 * What the pod cache keeps of a Pod (borrowed): metadata name, namespace, resourceVersion,
 * creationTimestamp and the labels the views read (those under egs.io/, model, app, app.kubernetes.io/name);
 * spec.nodeName; "egsGpus": the nvidia.com/gpu it requests; status phase, podIP and the PodScheduled
 * condition's reason and message; "egsMetricsPort" for dcgm-exporter pods.  Pods that request no GPU
 * and are no exporter keep only their name, namespace and resourceVersion.  A new reference.
 */
json_t *egs_k8s_pod_trim(json_t *pod);

/* True when the trimmed pod is a dcgm-exporter pod (by its labels). */
bool egs_k8s_pod_is_dcgm(json_t *pod);

/*
 * The workloads of the view's nodes and the slice's waiting pods, from the pod cache and dcgm: nodes[i]
 * (caller's array of d->n_nodes, filled with new arrays) gets node i's GPU pods (Running or bound
 * Pending) as heartbeat workloads {"name", "namespace", "labels", "phase", "gpuRequest", "gpus": [uuid
 * by dcgm]}, plus pods dcgm names that the cache lacks; *pending gets the GPU pods of slice namespaces
 * that no node holds yet, {"name", "namespace", "workspace", "gpuRequest", "phase", "reason",
 * "message", "since"} (at most EGS_K8S_PENDING_MAX, oldest first).
 */
void egs_k8s_workloads(struct egs_k8s *k, const struct egs_devices *d, json_t **nodes, json_t **pending);

#endif
