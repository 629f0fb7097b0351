/*
 * inference.h: inference endpoints (docs/kubernetes.md, "Inference endpoints").
 *
 * An endpoint is a GPR plus the Kubernetes objects of a model server in its workspace's namespace on one
 * cluster.  egsd renders the objects when the endpoint is created (infer_render.c): either the standard
 * model server of a modelSpec (a Deployment and a Service) or the user's own manifests (rawModelSpec),
 * each pinned to the GPR's nodes.  The cluster's agent applies them once the GPR is Provisioned, reports
 * their readiness, and removes them when the GPR ends or the endpoint is deleted (api_agent_infer.c).
 *
 * Stored as a struct egs_doc of kind EGS_KIND_ENDPOINT named by its id ("iep-..."), whose spec is
 *   {"workspace", "cluster", "namespace", "endpointName", "modelName", "gprId" ("" without a GPR),
 *    "gpuSpec" (object or null), "custom" (bool), "objects" [...], "url" ("" without a Service),
 *    "deleting" (bool), "offered" (the agent was told to apply them and has not confirmed their removal
 *    since), "observed" {"present", "ready", "readyReplicas", "replicas", "message"}}
 */
#ifndef EGS_SERVER_INFERENCE_H
#define EGS_SERVER_INFERENCE_H

#include "server/server.h"

#define EGS_INFER_LABEL "egs.kubeslice.io/inference-endpoint" /* on every object rendered, = endpointName */
#define EGS_INFER_MAX_OBJECTS 16  /* objects in a rawModelSpec */
#define EGS_INFER_RAW_MAX 65536   /* bytes of a rawModelSpec */

/* What the objects are rendered for. */
struct egs_infer_target {
	const char *name;      /* endpointName (an RFC 1035 label) */
	const char *namespace; /* the workspace's namespace on the cluster */
	const char *gpr_id;    /* "" when the endpoint has no GPR: nothing is pinned */
	int gpus;              /* GPUs per pod of the standard server (numberOfGPUs) */
	int replicas;          /* pods of the standard server (numberOfGPUNodes) */
};

/*
 * The standard model server of model_spec (borrowed): a Deployment and a Service named after the
 * endpoint.  Returns a new array (caller frees) and sets *url, or replies 422 naming the field
 * ("modelSpec.<field>") and returns NULL.
 */
json_t *egs_infer_render_standard(struct egs_req *r, const struct egs_infer_target *t, json_t *model_spec,
				  char *url, size_t urlsz);

/*
 * The user's manifests of raw (YAML or JSON; documents separated by "---"; a List's items count one
 * each): only namespaced kinds a slice user may create, put into t->namespace, labelled, and pod
 * templates pinned to the GPR's nodes.  Returns a new array (caller frees) and sets *url (the first
 * Service's, or ""), or replies 422 naming rawModelSpec and returns NULL.
 */
json_t *egs_infer_render_raw(struct egs_req *r, const struct egs_infer_target *t, const char *raw, char *url,
			     size_t urlsz);

/* The endpoint's status as the SDK shows it: Queued, Provisioning, Ready, Failed, Released, Deleting.
 * spec is the endpoint's (borrowed); st reads its GPR and its cluster's agent.  A deleted endpoint is
 * Deleting while its agent may still remove the objects; once its GPR has ended and the agent has been
 * silent past the heartbeat timeout (at now), Released (the agent, should it return, still removes them). */
const char *egs_infer_status(const struct egs_state *st, json_t *spec, int64_t now);

/* Whether the agent should have the objects applied now: not deleting, and the GPR (if any) Provisioned. */
bool egs_infer_wanted(const struct egs_state *st, json_t *spec);

/* A deleted workspace's endpoints: those whose objects the agent may have created are marked deleting (it
 * removes them, then they go), the others are forgotten at once. */
void egs_infer_forget_workspace(struct egs_server *srv, const char *ws);

/* A cluster leaves workspace ws: its endpoints there are forgotten at once, offered or not (their objects
 * are in the slice's namespaces there, which that cluster's agent removes). */
void egs_infer_forget_cluster(struct egs_server *srv, const char *ws, const char *cluster);

#endif
