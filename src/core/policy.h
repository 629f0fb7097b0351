/*
 * policy.h: workspace policies and the global limits: what a GPR may ask for, and what happens when
 * it asks for more.
 *
 * A policy holds two levels of the same limits.  A GPR over a hard limit is refused (the server
 * answers 422 POLICY_LIMIT_EXCEEDED naming the limit and its value); over a soft limit, but within
 * every hard one, it is created Pending with a reason naming each soft limit it exceeds and waits
 * for an admin's approval.  Every limit is optional; a policy with nothing set limits nothing.
 *
 * Two policies apply to a GPR: its workspace's (if any) and the global one (every workspace); a
 * limit of either is enforced, so the stricter wins.  The global policy's hard maxNodesPerGpr always
 * exists (egsd's --max-nodes-per-gpr unless an admin sets one).
 *
 * The limits read what a GPR asks for, measured against the state by egs_policy_measure():
 *   maxGPRs                GPRs of the workspace not yet finished (Pending, Queued, Provisioning,
 *                          Provisioned), the new one included
 *   maxExitDurationPerGPR  exitDuration
 *   priorityRange          priority within [min, max]
 *   gpuShapes              every GPU shape the GPR may land on (its gpuShape, or, when it names
 *                          none, the shapes of every node that could hold it) is in the list
 *   maxGPUPerGpr           numberOfGPUs x numberOfGPUNodes
 *   maxMemoryPerGpr        GiB of GPU memory the GPR may end up holding: its GPUs times the largest
 *                          per-GPU memory of a node that could hold it (memoryPerGpu is a minimum)
 *   concurrentGpuQuota     GPUs the workspace holds at once: those of its Provisioning and
 *                          Provisioned GPRs plus the new GPR's
 *   maxNodesPerGpr         numberOfGPUNodes
 *
 * Pure: no I/O, no clock; the wire form (JSON) lives in src/server/policy_wire.c.
 */
#ifndef EGS_POLICY_H
#define EGS_POLICY_H

#include "core/state.h"

enum egs_limit {
	EGS_LIMIT_MAX_GPRS = 0,
	EGS_LIMIT_EXIT_DURATION,
	EGS_LIMIT_PRIORITY,
	EGS_LIMIT_GPU_SHAPES,
	EGS_LIMIT_GPUS,
	EGS_LIMIT_MEMORY,
	EGS_LIMIT_QUOTA,
	EGS_LIMIT_NODES,
	EGS_LIMIT_N
};
#define EGS_LIMIT_ALL ((1u << EGS_LIMIT_N) - 1)

/* The wire name of a limit ("maxGPRs", ...), and the GPR request field it reads ("sliceName" for
 * maxGPRs, "exitDuration", "priority", "gpuShape", "numberOfGPUs", "memoryPerGpu",
 * "numberOfGPUs", "numberOfGPUNodes"). */
const char *egs_limit_name(enum egs_limit l);
const char *egs_limit_field(enum egs_limit l);

/* Bounds of the numeric limits: a value outside [min, max] is refused (by the wire parser). */
int64_t egs_limit_min(enum egs_limit l);
int64_t egs_limit_max(enum egs_limit l);

/* One level of limits.  A limit applies when its bit (1u << EGS_LIMIT_*) is in `set`. */
struct egs_limits {
	uint32_t set;
	int64_t max[EGS_LIMIT_N];  /* numeric limits: EXIT_DURATION in seconds, MEMORY in GiB */
	int prio_min, prio_max;    /* PRIORITY */
	struct egs_strlist shapes; /* GPU_SHAPES: the allowed shapes (owned, never empty when set) */
};

struct egs_policy {
	struct egs_limits hard, soft;
	int auto_eviction; /* enableAutoEviction: the default of a new GPR's enableEviction; -1 = none */
	int requeue;       /* requeueOnFailure: the default of a new GPR's requeueOnFailure; -1 = none */
};

/* Caller-owned storage: _init makes an empty policy (nothing set), _cleanup frees its lists. */
void egs_policy_init(struct egs_policy *p);
void egs_policy_cleanup(struct egs_policy *p);
/* Heap policies: a new empty one (never NULL); _free(NULL) is a no-op. */
struct egs_policy *egs_policy_new(void);
void egs_policy_free(struct egs_policy *p);
/* Makes dst a deep copy of src (dst is cleaned up first). */
void egs_policy_copy(struct egs_policy *dst, const struct egs_policy *src);
/* True when p sets no limit and no default. */
bool egs_policy_empty(const struct egs_policy *p);

/*
 * Checks that the soft level of p lies within its hard level: a numeric soft limit is at most the
 * hard one, a soft priorityRange inside the hard one, soft gpuShapes a subset of the hard ones.
 * Returns true, or false with the offending wire field in *field ("softLimits.maxGPRs", static) and
 * a sentence in why.
 */
bool egs_policy_validate(const struct egs_policy *p, const char **field, char *why, size_t whysz);

/* What one GPR asks for, as the limits read it (see the top of this file). */
struct egs_policy_ask {
	char workspace[EGS_NAME_MAX];
	int priority;
	int64_t exit_duration_s;
	int64_t gpus;         /* numberOfGPUs x numberOfGPUNodes */
	int nodes;
	int64_t memory_mib;   /* the most GPU memory it may hold, MiB */
	int64_t gpu_mem_mib;  /* per GPU, for the message: the largest of a node that could hold it */
	int64_t unfinished;   /* the workspace's unfinished GPRs, this one included */
	int64_t held_gpus;    /* GPUs of its Provisioning/Provisioned GPRs, plus this one's */
	struct egs_strlist shapes; /* the GPU shapes it may land on (owned) */
	bool any_shape;       /* it names no gpuShape */
};

/*
 * Measures g (borrowed; a new GPR or the edited copy of a waiting one) in workspace ws for the
 * limits in `need` (bits of enum egs_limit; what is not needed is left zero, so that a workspace
 * without a policy costs nothing).  `self` (may be NULL) is a GPR of the state that g stands for
 * (an update): it is not counted twice.  Counting maxGPRs walks every GPR of the state; the others
 * walk the nodes or the active GPRs.  a is caller-owned: release it with egs_policy_ask_cleanup().
 */
void egs_policy_measure(const struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
			const struct egs_gpr *self, uint32_t need, struct egs_policy_ask *a);
void egs_policy_ask_cleanup(struct egs_policy_ask *a);

/* The limits of p that are set at either level (a bit mask). */
uint32_t egs_policy_limits_set(const struct egs_policy *p);

enum egs_policy_verdict { EGS_POLICY_OK = 0, EGS_POLICY_SOFT, EGS_POLICY_HARD };

struct egs_policy_result {
	enum egs_policy_verdict verdict;
	enum egs_limit limit; /* HARD: the first hard limit broken */
	const char *field;    /* HARD: the request field at fault (static) */
	char message[600];    /* HARD: the limit and its value; SOFT: every soft limit exceeded, joined with
			       * "; " and ending "waits for an admin's approval" */
};

/*
 * Checks a against the hard and then the soft limits of the workspace policy ws and of the global
 * policy global (either may be NULL), only for the limits in mask.  The first hard limit broken
 * decides (workspace before global, in enum order); with none broken, every soft limit exceeded is
 * listed.  Fills *res and returns its verdict.
 */
enum egs_policy_verdict egs_policy_check(const struct egs_policy *ws, const struct egs_policy *global,
					 const struct egs_policy_ask *a, uint32_t mask, struct egs_policy_result *res);

/*
 * Puts waiting GPR g on hold for an admin with reason (borrowed, copied): a Queued GPR becomes
 * Pending (it keeps its enqueue sequence, so approval gives it back its place), a Pending one gets
 * the new reason.  Writes a PendingApproval event either way.  g must be Pending or Queued.
 */
void egs_policy_hold(struct egs_state *st, struct egs_gpr *g, const char *reason, int64_t now);

#endif
