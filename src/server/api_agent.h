/*
 * api_agent.h: what the agent protocol's files share (api_agent.c: heartbeats, actions, results;
 * api_agent_register.c: registration).
 */
#ifndef EGS_SERVER_API_AGENT_H
#define EGS_SERVER_API_AGENT_H

#include "server/server.h"

#define MAX_NODES_PER_AGENT 10000
#define MAX_GPUS 64
#define MAX_SHARED_PER_NODE 256 /* attachedShared: shared GPRs attached to one node */

/* The calling agent's cluster in *out (its last_seen now), after checking the role and that a body's
 * clusterName, if any, is the token's; false after replying 403/404. */
bool egs_agent_cluster(struct egs_req *r, struct egs_cluster **out);
/* attachedShared (a list of at most MAX_SHARED_PER_NODE GPR ids) into *out; false (out left empty)
 * when v is anything else. */
bool egs_agent_gpr_ids(json_t *v, struct egs_strlist *out);

#endif
