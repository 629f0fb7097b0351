/*
 * report.h: the JSON that egs-agent sends (docs/internals/agent-protocol.md): the node objects of a
 * registration and of a heartbeat, GPU samples, workloads from GPU processes, and action results.
 * Pure functions of their inputs, so the wire format is unit-tested without a server.
 *
 * Fields egsd does not know yet (see docs/internals/agent.md, "Wire additions") are only ever added
 * where egsd ignores unknown fields (node and GPU objects), or, for action results whose unknown
 * fields egsd refuses, only when egsd advertised the feature at registration.
 */
#ifndef EGS_AGENT_REPORT_H
#define EGS_AGENT_REPORT_H

#include "agent/checks.h"
#include "agent/devices.h"
#include "core/common.h"
#include "core/model.h"

#include <jansson.h>

#define EGS_REPORT_MSG_MAX 300 /* result messages are cut here (egsd takes up to 399 bytes) */

/* A registration's node object; address ("host:port" of the check port) is left out when "". */
json_t *egs_report_register_node(const struct egs_dev_node *n, const char *attached_gpr, const char *address);

/* GPU sharing: adds "attachedShared" (the shared GPRs attached to the node, ids borrowed) to a
 * registration's or a heartbeat's node object o, and, at registration, "features": ["sharing"]
 * (this agent takes shared attaches; egsd ignores both where it predates sharing). */
void egs_report_add_sharing(json_t *o, const struct egs_strlist *attached_shared, bool registration);

/* One GPU of a heartbeat: uuid, index, the metrics s holds (valid bits) and "lost": true when lost. */
json_t *egs_report_gpu(const struct egs_dev_gpu *g, const struct egs_gpu_sample *s);

/* The workloads of a node from its GPU processes: one {"name","namespace":"","pid","gpus":[uuid],
 * "memUsedMiB"} per process (np entries of p, each with .gpu < n->gpu_count). */
json_t *egs_report_workloads(const struct egs_dev_node *n, const struct egs_gpu_proc *p, size_t np);

/* A heartbeat's node object.  why (may be NULL or "") becomes "healthReason"; s has gpu_count
 * samples, or is NULL when the node could not be sampled (then "gpus" is empty). */
json_t *egs_report_heartbeat_node(const struct egs_dev_node *n, enum egs_health health, const char *why,
				  const char *attached_gpr, const struct egs_gpu_sample *s,
				  const struct egs_gpu_proc *p, size_t np);

/* One line of `egs-agent --probe`: GPU g of node n as egs_report_gpu() gives it, plus node, gpuModel,
 * memoryMiB, the node's health (and healthReason) and the GPU's processes (those of p on GPU g). */
json_t *egs_report_probe_gpu(const struct egs_dev_node *n, int g, enum egs_health health, const char *why,
			     const struct egs_gpu_sample *s, const struct egs_gpu_proc *p, size_t np);

/*
 * An action result: actionId, type, gprId, node, ok, message (cleaned to valid UTF-8 and cut to
 * EGS_REPORT_MSG_MAX bytes), and "checks" from rep when rep is not NULL.  Returns NULL when an id is
 * not valid UTF-8 (the result cannot be sent).  Caller owns the result.
 */
json_t *egs_report_result(const char *action_id, const char *type, const char *gpr_id, const char *node, bool ok,
			  const char *message, const struct egs_check_report *rep);

/* Copies msg into out (outsz bytes) as valid UTF-8, cut at a character boundary; invalid bytes become
 * '?'.  A hook or check command may print anything, and JSON strings must be UTF-8. */
void egs_report_clean(const char *msg, char *out, size_t outsz);

#endif
