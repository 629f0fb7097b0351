/*
 * kubeslice.h: the slice namespaces as the clusters' agents report them, and what egsd derives from
 * that (kubeslice.c; docs/internals/agent-protocol.md section 5).  An agent that sets up slice access
 * (the "sliceAccess" feature) reports the namespaces it set up for slices, with the pods running in
 * each, in POST /api/v1/agent/slice-namespaces.  egsd keeps the last report per cluster in memory only
 * (every agent repeats it after registering) and:
 *   - sends a `sliceRelease` action for each reported namespace that its workspace no longer wants on
 *     that cluster (the workspace was deleted, or the namespace or the cluster left it): the agent
 *     removes what it made there;
 *   - refuses (409 NAMESPACE_HAS_PODS) a workspace update or delete that would take away a namespace
 *     still running pods, unless the request says force: true;
 *   - shows the report in the workspace's detail (sliceNamespaces).
 */
#ifndef EGS_KUBESLICE_H
#define EGS_KUBESLICE_H

#include "server/server.h"

/* Appends the `sliceRelease` actions of cluster c's agent (only when it registered "sliceAccess") to
 * out (borrowed). */
void egs_kubeslice_append_actions(struct egs_server *srv, const struct egs_cluster *c, json_t *out);

/*
 * Before a workspace update or delete: true when nothing it takes away runs pods, or force.  Taken
 * away: every namespace of w when all, else the namespaces in rm_ns (on every cluster) and every
 * namespace on the clusters in rm_cl.  Otherwise replies 409 NAMESPACE_HAS_PODS naming field and the
 * namespace, and returns false.  rm_ns and rm_cl may be NULL (empty).
 */
bool egs_kubeslice_may_remove(struct egs_req *r, const struct egs_workspace *w, const struct egs_strlist *rm_ns,
			      const struct egs_strlist *rm_cl, bool all, bool force, const char *field);

/* The reported slice namespaces of workspace ws: [{"clusterName", "namespace", "createdByAgent",
 * "runningPods"}] (a new array, sorted by cluster then namespace as reported). */
json_t *egs_kubeslice_of_workspace(struct egs_server *srv, const char *ws);

/* Drops what egsd knows of the reports (at shutdown). */
void egs_kubeslice_cleanup(struct egs_server *srv);

extern const struct egs_route egs_routes_kubeslice[];

#endif
