/*
 * kubecred.h: slice access credentials inside egsd (kubecred.c).  A workspace's kubeconfig on a cluster
 * carries the token of the slice's ServiceAccount there, which that cluster's agent mints (TokenRequest)
 * and reports.  egsd keeps each token sealed (XChaCha20-Poly1305 under DIR/kubecreds.key, bound to its
 * workspace, cluster and generation) in a struct egs_doc of kind EGS_KIND_KUBECRED named after the
 * workspace, and asks the agent for a new one through `sliceAccess` actions: when none was reported,
 * when an admin or owner regenerates (the generation goes up, the old token is dropped at once and the
 * agent recreates the ServiceAccount, which invalidates every token it had), when the workspace's
 * namespaces on that cluster change, and before the token expires.  docs/internals/agent-protocol.md.
 */
#ifndef EGS_KUBECRED_H
#define EGS_KUBECRED_H

#include "server/server.h"

/* Loads DIR/kubecreds.key, creating it (32 random bytes, mode 0600) at the first start.  EGS_ERR_IO
 * with a message on stderr when it cannot be read or written, or has the wrong size. */
enum egs_err egs_kubecred_start(struct egs_server *srv);
/* Wipes the key from memory. */
void egs_kubecred_stop(struct egs_server *srv);

/* Reads the optional top-level "features" of an agent's registration (at most 16 names, unknown ones
 * ignored) into *slice_access ("sliceAccess": the agent mints slice tokens).  false after replying 422
 * naming `features` when malformed. */
bool egs_kubecred_agent_features(struct egs_req *r, bool *slice_access);

/* Appends the `sliceAccess` actions cluster's agent owes (only when that agent registered the
 * "sliceAccess" feature) to out (borrowed). */
void egs_kubecred_append_actions(struct egs_server *srv, const struct egs_cluster *c, json_t *out);

/* Drops the credentials of workspace ws (its workspace is being deleted); the agent removes the
 * ServiceAccount with the slice's namespaces. */
void egs_kubecred_forget_workspace(struct egs_server *srv, const char *ws);

/* Drops workspace ws's credential on cluster (the cluster leaves the workspace), if any. */
void egs_kubecred_forget_cluster(struct egs_server *srv, const char *ws, const char *cluster);

extern const struct egs_route egs_routes_kubecred[];

#endif
