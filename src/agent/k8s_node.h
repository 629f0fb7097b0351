/*
 * k8s_node.h: what egs-agent's kubernetes backend reads from and writes to Kubernetes objects, as
 * pure functions of JSON (unit-tested without a server): which nodes are GPU nodes and which of them
 * EGS manages, their model, memory and count, their health, the attachment a node's labels record,
 * and the patches, evictions and events the backend sends.
 *
 * The names (docs/kubernetes.md): a managed GPU node carries the taint
 * kubeslice.io/egs=dedicated-node:NoSchedule; an attached one the labels kubeslice.io/slice=<workspace>
 * and kubeslice.io/gpr=<GPR id>, and annotations egs.kubeslice.io/{namespaces,start-time,exit-time,
 * attached-at}; egs.kubeslice.io/cordoned=true says the agent (not someone else) cordoned it.
 */
#ifndef EGS_AGENT_K8S_NODE_H
#define EGS_AGENT_K8S_NODE_H

#include "agent/backend.h"
#include "agent/devices.h"
#include "core/model.h"

#include <jansson.h>

#define EGS_K8S_LABEL_SLICE "kubeslice.io/slice"
#define EGS_K8S_LABEL_GPR "kubeslice.io/gpr"
#define EGS_K8S_LABEL_MANAGED "kubeslice.io/managed-by-egs"
#define EGS_K8S_TAINT_KEY "kubeslice.io/egs"
#define EGS_K8S_TAINT_VALUE "dedicated-node"
#define EGS_K8S_ANN_NAMESPACES "egs.kubeslice.io/namespaces"
#define EGS_K8S_ANN_START "egs.kubeslice.io/start-time"
#define EGS_K8S_ANN_EXIT "egs.kubeslice.io/exit-time"
#define EGS_K8S_ANN_ATTACHED "egs.kubeslice.io/attached-at"
#define EGS_K8S_ANN_CORDONED "egs.kubeslice.io/cordoned"
#define EGS_K8S_GPU "nvidia.com/gpu"
/* Slice access (k8s_slice.c): what the agent made is marked so that it removes that and nothing else. */
#define EGS_K8S_LABEL_CREATED_BY "egs.kubeslice.io/created-by" /* = EGS_K8S_AGENT: the agent created it */
#define EGS_K8S_LABEL_ADOPTED_BY "egs.kubeslice.io/adopted-by" /* = EGS_K8S_AGENT: it existed, the agent labelled it */
#define EGS_K8S_AGENT "egs-agent"
#define EGS_K8S_ANN_GENERATION "egs.kubeslice.io/generation" /* on a slice ServiceAccount */

/* What the backend knows of one node from its JSON.  Strings are "" when absent. */
struct egs_k8s_node {
	char name[EGS_NAME_MAX]; /* "" when the node's name is longer than egsd takes (63 bytes) */
	bool gpu;                /* nvidia.com/gpu capacity or the label nvidia.com/gpu.product */
	bool managed;            /* a GPU node without kubeslice.io/managed-by-egs=false, with 1-64 GPUs
				  * and nvidia.com/gpu.memory (egsd needs both) */
	char model[EGS_NAME_MAX];
	char instance_type[EGS_NAME_MAX];
	char cloud_provider[EGS_NAME_MAX];
	char region[EGS_NAME_MAX];
	char zone[EGS_NAME_MAX];
	int gpu_count;        /* capacity (else the label nvidia.com/gpu.count) */
	int gpu_allocatable;  /* allocatable */
	int64_t memory_mib;   /* per GPU */
	enum egs_health health;
	char why[EGS_DEV_WHY_MAX];
	bool tainted;         /* carries the EGS taint */
	bool unschedulable;   /* cordoned */
	bool our_cordon;      /* cordoned by the agent */
	char slice[EGS_NAME_MAX];
	char gpr[EGS_ID_MAX];
};

/* Reads node (a core/v1 Node, borrowed) into *out.  Returns false when it is not an object with a
 * name.  Health: Unhealthy when the Ready condition is not True, when it carries a not-ready or
 * unreachable taint, when someone other than the agent cordoned it, or when fewer GPUs are allocatable
 * than its capacity; why says which. */
bool egs_k8s_node_read(json_t *node, struct egs_k8s_node *out);

/*
 * What the node cache keeps of a Node (borrowed): metadata name, resourceVersion, the labels the
 * backend reads (those under nvidia.com/gpu., kubeslice.io/, topology.kubernetes.io/, and the instance
 * type) and the egs.kubeslice.io annotations; spec taints, unschedulable and providerID; status capacity and
 * allocatable of nvidia.com/gpu and the Ready condition's type, status and reason.  Everything the
 * backend reads, and a fraction of a real node (images, managed fields, addresses, node info go).
 * Returns a new reference.
 */
json_t *egs_k8s_node_trim(json_t *node);

/* What the namespace cache keeps of a Namespace: metadata name, resourceVersion, labels and
 * deletionTimestamp. */
json_t *egs_k8s_namespace_trim(json_t *ns);

/* The node's registration attributes as a device node (strings owned by out; free them with the
 * devices' rules).  GPU UUIDs are generated per egs_devices_mock_uuid(cluster, node, index) until
 * dcgm-exporter names the real ones. */
void egs_k8s_dev_node(const struct egs_k8s_node *n, const char *cluster, struct egs_dev_node *out);

/* Fills *out (zeroed first; strings owned: free with egs_attachments_free) with the attachment node's
 * labels and annotations record, and returns true; false when the node is not attached.  Dedicated
 * only: the kubernetes backend does not share GPUs. */
bool egs_k8s_node_attachment(json_t *node, struct egs_attachment *out);

/* JSON merge patch that records req on a node (labels and annotations); now is RFC 3339. */
json_t *egs_k8s_patch_attach(const struct egs_attach_req *req, const char *now);

/* JSON merge patch that removes what egs_k8s_patch_attach() wrote and, when uncordon, the agent's
 * cordon (spec.unschedulable and its annotation). */
json_t *egs_k8s_patch_detach(bool uncordon);

/* JSON merge patch that cordons a node and records that the agent did. */
json_t *egs_k8s_patch_cordon(void);

/*
 * JSON merge patch that adds (want) or removes (!want) the EGS taint on node, keeping every other
 * taint, with the node's resourceVersion so that a concurrent change of the taints gets 409 instead
 * of being overwritten.  NULL when nothing needs to change.  Caller decrefs.
 */
json_t *egs_k8s_patch_taint(json_t *node, bool want);

/* JSON merge patch labelling a namespace kubeslice.io/slice=<workspace>. */
json_t *egs_k8s_patch_namespace(const char *workspace);

/* A new Namespace object called name, labelled for workspace and as created by the agent. */
json_t *egs_k8s_namespace(const char *name, const char *workspace);

/* A policy/v1 Eviction of pod ns/name with a grace period of grace_s seconds. */
json_t *egs_k8s_eviction(const char *ns, const char *name, int grace_s);

/* True when pod (borrowed) belongs to a DaemonSet (ownerReferences), which a drain leaves alone. */
bool egs_k8s_pod_daemonset(json_t *pod);

/* True when pod's tolerations name the EGS taint's key (such a pod may run on managed nodes). */
bool egs_k8s_pod_tolerates_egs(json_t *pod);

/* The nvidia.com/gpu the pod's containers request (limits, else requests), summed. */
int egs_k8s_pod_gpus(json_t *pod);

/*
 * A core/v1 Event in namespace ns about the GPR (involvedObject: the namespace itself, since the GPR is
 * not a Kubernetes object): reason, message, type "Normal" or "Warning", now RFC 3339, and a name made
 * unique by seq.  Caller decrefs.
 */
json_t *egs_k8s_event(const char *ns, const char *gpr_id, const char *reason, const char *message,
		      const char *type, const char *now, unsigned seq);

#endif
