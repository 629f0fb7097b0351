/*
 * checks.h: the pre-provisioning and post-exit checks of egs-agent, as small plugins.
 *
 * A check is a name, the phases it may run in and one function that looks at a node and says passed,
 * failed or skipped, with one line of output.  Before an attach the agent runs the enabled pre-checks
 * on the node; after a detach (the on-detach hook drains the node) it runs the post-exit checks.  The
 * built-in checks (checks_builtin.c), in the order they run:
 *   node-health    pre, post  the device backend calls the node Healthy (no lost GPU, fatal XID, ECC)
 *   gpu-inventory  pre        every advertised GPU answers, with at least the advertised memory
 *   gpu-processes  pre, post  no compute process on any of the node's GPUs
 *   storage        pre, post  the --check-storage directory exists and is usable
 *   connectivity   pre        the agents of the GPR's other nodes answer on their check port
 *   nccl           pre        the --check-nccl command passes (multi-node GPRs only; costly)
 * A costly check is skipped once an earlier one failed.  A check without what it needs (no storage
 * path, a single-node GPR, ...) is skipped, which counts as passing.
 *
 * Reports are plain values (fixed-size, no allocation), so a report can be built on the stack of the
 * action thread and summarised into a result message, turned into JSON, or appended to the per-GPR
 * log under the state directory.
 */
#ifndef EGS_AGENT_CHECKS_H
#define EGS_AGENT_CHECKS_H

#include "agent/devices.h"
#include "agent/hook.h"
#include "core/common.h"

#include <jansson.h>

#define EGS_CHECK_OUTPUT_MAX 256
#define EGS_CHECKS_MAX 16

enum egs_check_phase { EGS_CHECK_PRE = 1, EGS_CHECK_POST = 2 };
enum egs_check_status { EGS_CHECK_PASSED, EGS_CHECK_FAILED, EGS_CHECK_SKIPPED };

/* What the operator configured.  Strings are borrowed and must outlive every run. */
struct egs_checks_config {
	unsigned pre, post;       /* bit i: builtin check i is enabled in that phase */
	const char *storage_path; /* "{node}" is replaced by the node's name; NULL: storage skipped */
	const char *nccl_command; /* /bin/sh command; NULL: nccl skipped */
	int nccl_timeout_s;       /* 0: 600 */
	int connect_timeout_ms;   /* per peer; 0: 3000 */
};

/* Another node of the GPR being checked. */
struct egs_check_peer {
	char node[EGS_NAME_MAX];
	char address[EGS_DEV_ADDRESS_MAX]; /* "host:port" of its agent's check port, or "" when unknown */
};

/* What one run looks at.  Everything is borrowed. */
struct egs_check_ctx {
	const struct egs_checks_config *cfg;
	struct egs_devices *dev;
	size_t node; /* index into dev->nodes */
	const char *cluster;
	const char *gpr_id;
	enum egs_check_phase phase;
	const struct egs_check_peer *peers; /* the GPR's other nodes */
	size_t n_peers;
	int64_t now; /* UNIX time, for the device backend */
	egs_hook_stop_fn stop; /* interrupts the nccl command (may be NULL) */
	void *stop_arg;
};

struct egs_check_result {
	const char *name; /* static */
	enum egs_check_status status;
	char output[EGS_CHECK_OUTPUT_MAX];
	int64_t duration_ms;
};

struct egs_check_report {
	enum egs_check_phase phase;
	size_t n;
	struct egs_check_result results[EGS_CHECKS_MAX];
	int failed; /* index of the first failed result, or -1 */
};

/* One check plugin: run() writes one line (outsz bytes) and returns the status. */
struct egs_check {
	const char *name;
	unsigned phases; /* EGS_CHECK_PRE | EGS_CHECK_POST */
	bool costly;     /* skipped once an earlier check failed */
	enum egs_check_status (*run)(const struct egs_check_ctx *ctx, char *out, size_t outsz);
};

/* The built-in checks in run order; *n gets their number (at most EGS_CHECKS_MAX).  Static. */
const struct egs_check *egs_checks_builtin(size_t *n);

/* The set of every built-in check of phase (the default of --pre-checks / --post-checks). */
unsigned egs_checks_all(enum egs_check_phase phase);

/*
 * Parses a comma-separated list of check names for phase ("" or "none": no check) into *set.
 * Returns EGS_ERR_INVALID with why in err (errsz bytes) for an unknown name or a check that does not
 * run in that phase.
 */
enum egs_err egs_checks_parse_list(const char *list, enum egs_check_phase phase, unsigned *set, char *err,
				   size_t errsz);

/* Runs the checks ctx->cfg enables for ctx->phase, in order, into *rep.  Never fails: a check that
 * cannot do its work fails (or is skipped) with a message. */
void egs_checks_run(const struct egs_check_ctx *ctx, struct egs_check_report *rep);

/* True when no check of rep failed. */
bool egs_checks_ok(const struct egs_check_report *rep);

/*
 * Writes a one-line summary of rep into buf (n bytes), the failure first, e.g.
 * "pre-check gpu-processes failed: GPU 1 runs pid 4242 (python, 2048 MiB)" or
 * "pre-checks passed: node-health, gpu-inventory, gpu-processes; skipped: storage, connectivity, nccl".
 */
void egs_checks_summary(const struct egs_check_report *rep, char *buf, size_t n);

/* Returns rep as a JSON array of {"name","phase","status","output","durationMs"} (caller owns it). */
json_t *egs_checks_json(const struct egs_check_report *rep);

/* "pre" or "post". */
const char *egs_check_phase_name(enum egs_check_phase phase);

/*
 * Appends one JSON line {"time","cluster","gprId","node","phase","ok","checks":[...]} for rep to
 * <dir>/<gpr_id>.jsonl (dir created, mode 0700), so that every run's full output stays with its GPR on
 * the agent's host.  Returns EGS_ERR_IO when the file cannot be written (why in err), EGS_ERR_INVALID
 * when gpr_id could not be a file name.
 */
enum egs_err egs_checks_log_append(const char *dir, const char *cluster, const char *gpr_id, const char *node,
				   int64_t now, const struct egs_check_report *rep, char *err, size_t errsz);

/* Removes the per-GPR logs in dir last written more than max_age_s seconds before now; returns how
 * many it removed. */
size_t egs_checks_log_prune(const char *dir, int64_t now, int64_t max_age_s);

#endif
