/*
 * sim.h: egs-sim, a trace simulator that replays a GPU job trace through the real core (egs_state,
 * egs_gpr_submit, egs_sched_run and the agent reports) on a virtual clock.
 *
 * Three parts share this header: the trace (trace.c: reads the CSV and maps each job to a GPR
 * request deterministically), the replay (replay.c: the event loop that plays users, agents and
 * failing nodes against the core) and the report (report.c: waits, utilization and how good the
 * estimates given at submission were).  Times inside the simulator are virtual UNIX times:
 * SIM_T0 plus the trace's seconds, because 0 means "unset" in many core fields.
 */
#ifndef EGS_SIM_H
#define EGS_SIM_H

#include "core/model.h"

#include <stdio.h>

#define SIM_T0 1800000000LL /* virtual time of the trace's second 0 */
#define SIM_GPUS_PER_NODE 8
#define SIM_PRIO_NORMAL 150 /* medium band */
#define SIM_PRIO_HIGH 250   /* high band */

struct sim_opts {
	const char *trace;      /* CSV path (borrowed) */
	long nodes;             /* 0 = derive from the trace (sim_default_nodes) */
	bool nodes_derived;     /* nodes came from sim_default_nodes (said in the report's header) */
	long workspaces;        /* jobs are hashed into this many workspaces */
	int64_t round_s;        /* the requested window is the duration rounded up to this */
	bool hold_window;       /* true: no early release, a job keeps its nodes for its whole window */
	bool backfill;          /* conservative backfill in the planner (egs_state_config.backfill) */
	double high_share;      /* share of jobs (by hash) in the high priority band */
	int64_t fail_every_s;   /* a node fails every this many seconds, 0 = never */
	int64_t fail_for_s;     /* a failed node stays Unhealthy this long */
	int64_t fair_half_life_s; /* the core's fair-share half-life; 0 = the core's default, < 0 = off */
	uint64_t seed;          /* salts every hash: same seed, same workload */
	long limit;             /* replay only the first limit jobs, 0 = all */
	bool json;
	const char *jobs_out;   /* per-job CSV path, NULL = none (borrowed) */
};

/* Why a GPR started later than the estimate it got at submission (the first that applies). */
enum sim_late {
	SIM_LATE_NONE = 0,
	SIM_LATE_PRIORITY, /* a higher-priority GPR submitted after it started before it */
	SIM_LATE_RANKED,   /* an equal-priority GPR submitted after it, ranked ahead (fair share), started before it */
	SIM_LATE_FAILURE,  /* a node was failed at some time between its submission and its start */
	SIM_LATE_RESERVED, /* a GPR that ranks ahead of it arrived while it waited and had not started before it:
			    * that GPR's reservation (nodes held for it until its own start) displaced it */
	SIM_LATE_OTHER,
	SIM_LATE_NREASONS
};
const char *sim_late_name(enum sim_late r);

struct sim_job {
	char name[EGS_NAME_MAX]; /* the trace's job_id, cut to fit */
	int64_t submit;          /* virtual time */
	int64_t duration;        /* what it really ran: released early after this */
	int gpus;                /* num_gpu of the trace */
	int node_count, gpus_per_node;
	int64_t window;          /* the requested duration (exitDuration) */
	int priority;
	long workspace;
	bool skipped;            /* needs more nodes than the inventory has */
	struct egs_gpr *g;       /* borrowed from sim_result.st: valid until sim_result_cleanup */
	/* filled by the replay */
	bool est_known;
	int64_t est;             /* estimated start right after submit + plan */
	int64_t start, end;      /* provisioned and complete (virtual), 0 = never */
	enum sim_late late;      /* the first reason that applies */
	unsigned late_all;       /* every reason that applies: bit (1u << reason) */
};

struct sim_trace {
	struct sim_job *jobs; /* sorted by submission time, then by line */
	size_t n;
	size_t malformed;     /* lines that could not be read */
};

/* Reads the CSV at opts->trace (columns job_id, submission_time, duration, num_gpu in any order;
 * optional columns priority and workspace override the hashed ones) and maps each job to a request
 * as README.md describes.  Returns false with a message on stderr when the file cannot be read or lacks a
 * column.  The caller frees with sim_trace_cleanup. */
bool sim_trace_load(struct sim_trace *t, const struct sim_opts *opts);
void sim_trace_cleanup(struct sim_trace *t);

/* The default inventory: the 95th percentile over time of the nodes the trace's jobs would hold if
 * every job started the moment it was submitted and ran its real duration (at least the largest job's
 * node count, so no job is skipped). */
long sim_default_nodes(const struct sim_trace *t);

struct egs_state;

struct sim_result {
	struct egs_state *st; /* owned: the state after the replay, every GPR still in it */
	size_t replayed, skipped;
	int64_t first_submit, last_end;
	size_t steps, sched_runs;
	size_t failures, replaced, node_failed; /* node failures injected; NodeReplaced / NodeFailed events */
	int64_t *fail_times; /* owned, sorted: when each failure was injected */
	double wall_s;
	bool stuck; /* the loop ran out of events with GPRs still waiting */
};

/* Replays t (jobs not skipped) through a fresh egs_state with opts->nodes nodes; fills every job's
 * est/start/end and r, and keeps the state in r->st (every job's GPR stays readable through job->g
 * until sim_result_cleanup).  Returns false when the replay got stuck: GPRs still waited when no
 * event was left. */
bool sim_replay(struct sim_trace *t, const struct sim_opts *opts, struct sim_result *r);
void sim_result_cleanup(struct sim_result *r, struct sim_trace *t); /* also clears t's job->g */

/* Attributes late starts (job->late) and prints the report, text or JSON, to out; writes the
 * per-job CSV when opts->jobs_out is set.  Returns false when that file cannot be written. */
bool sim_report(struct sim_trace *t, const struct sim_opts *opts, const struct sim_result *r, FILE *out);

/* A 64-bit hash of (seed, salt, s): FNV-1a, then a splitmix64 finish.  Deterministic everywhere. */
uint64_t sim_hash(uint64_t seed, const char *salt, const char *s);

#endif
