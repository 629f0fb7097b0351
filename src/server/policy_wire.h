/*
 * policy_wire.h: the JSON form of a policy (core/policy.h), on the wire and in the store.
 *
 *   {"maxGPRs": 4, "maxExitDurationPerGPR": "6h0m0s", "priorityRange": {"min": 1, "max": 200},
 *    "gpuShapes": ["NVIDIA-H100-80GB-HBM3"], "maxGPUPerGpr": 16, "maxMemoryPerGpr": 640,
 *    "concurrentGpuQuota": 16, "maxNodesPerGpr": 4, "enableAutoEviction": false,
 *    "requeueOnFailure": true, "softLimits": {"maxExitDurationPerGPR": "2h", "priorityRange": {...}}}
 *
 * Every member is optional and JSON null means "not set"; the top-level limits are hard, softLimits
 * holds the same limit names (and nothing else) as soft thresholds.  maxMemoryPerGpr is in GiB.  The
 * JSON written back is canonical (durations as 6h0m0s, only what is set), so the store keeps exactly
 * what GET shows.
 */
#ifndef EGS_POLICY_WIRE_H
#define EGS_POLICY_WIRE_H

#include "core/policy.h"

#include <jansson.h>

/* The canonical JSON of p: a new object (caller frees) holding only what p sets. */
json_t *egs_policy_json(const struct egs_policy *p);

/*
 * Parses the policy members of object o (borrowed) into p (an empty policy, caller-owned).  Keys
 * listed in skip (NULL-terminated, may be NULL) are ignored; any other unknown key, a value of the
 * wrong type or out of range, or a soft limit beyond its hard one is refused: returns false with the
 * wire path of the member at fault in field ("maxGPRs", "softLimits.priorityRange.min") and a
 * sentence naming it in why.  p may hold part of the input then: clean it up and drop it.
 */
bool egs_policy_parse(json_t *o, const char *const *skip, struct egs_policy *p, char *field, size_t fieldsz, char *why,
		      size_t whysz);

#endif
