/*
 * report.c: what a replay measured, as text or JSON; see sim.h.
 *
 * Utilization is GPU-hours used over GPU-hours available between the first submission and the last
 * completion.  "Used" counts the GPUs a job asked for (numberOfGPUNodes x numberOfGPUs) from its
 * start to its release; "held" counts whole nodes, because a node belongs to one GPR at a time, so a
 * 1-GPU job keeps 7 GPUs idle.  A GPR is late when it started after the estimate it was given at
 * submission.  Its reasons, in this order: an arrival that ranks ahead of it (higher priority, or equal
 * priority and ranked ahead by the queue) that started before it; a node failed at some time between
 * its submission and its start; an arrival that ranks ahead of it during its wait but had not started
 * before it (its reservation displaced it); other, when none applies.  Each late GPR is counted under
 * the first reason that applies and, separately, under every one that does: reasons overlap (with fair
 * share and a high band, most long waits see both kinds of arrival ahead).
 */
#include "sim.h"

#include "core/queue.h"
#include "core/state.h"
#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const late_names[SIM_LATE_NREASONS] = {
	"none", "higher_priority_arrival", "equal_priority_ranked_ahead", "node_failure", "reservation_of_arrival_ahead",
	"other",
};

const char *sim_late_name(enum sim_late r)
{
	return (size_t)r < EGS_ARRAY_LEN(late_names) ? late_names[r] : "unknown";
}

struct stats {
	size_t started, at_once;
	double wait_mean;
	int64_t wait_p95, wait_max;
	double used_gpu_h, held_gpu_h, avail_gpu_h, span_h;
	size_t est_known, est_unknown, exact, earlier, later;
	double mae;
	size_t late[SIM_LATE_NREASONS];     /* by the first reason that applies: they add up to `later` */
	size_t late_any[SIM_LATE_NREASONS]; /* by every reason that applies */
};

/* The reasons among arrivals that apply to the late job j: an h that ranks ahead of it (higher
 * priority, or equal and ranked ahead by the queue) submitted after it, which started before it or
 * did not (then only its reservation can have displaced j).  Only jobs submitted after j and before
 * its start can be such an h. */
static unsigned arrival_reasons(const struct sim_trace *t, size_t i)
{
	const struct sim_job *j = &t->jobs[i];
	unsigned bits = 0;
	for (size_t k = i + 1; k < t->n && t->jobs[k].submit < j->start; k++) {
		const struct sim_job *h = &t->jobs[k];
		if (h->skipped || !h->g || h->submit <= j->submit || !egs_queue_before(h->g, j->g))
			continue;
		if (!h->start || h->start >= j->start)
			bits |= 1u << SIM_LATE_RESERVED;
		else if (h->priority > j->priority)
			bits |= 1u << SIM_LATE_PRIORITY;
		else
			bits |= 1u << SIM_LATE_RANKED;
	}
	return bits;
}

/* Was some node failed at a time in (from, to)?  Failure k keeps its node Unhealthy over
 * [fail_times[k], fail_times[k] + fail_for): a node failed before from can still cost j its place
 * when the core swaps it out of a running GPR later, taking a node j was promised. */
static bool failure_between(const struct sim_result *r, int64_t fail_for, int64_t from, int64_t to)
{
	size_t lo = 0, hi = r->failures; /* the first failure still in effect after from */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->fail_times[mid] + fail_for <= from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->failures && r->fail_times[lo] < to;
}

static void attribute(struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r)
{
	for (size_t i = 0; i < t->n; i++) {
		struct sim_job *j = &t->jobs[i];
		j->late = SIM_LATE_NONE;
		j->late_all = 0;
		if (j->skipped || !j->est_known || !j->start || j->start <= j->est)
			continue;
		j->late_all = arrival_reasons(t, i);
		if (failure_between(r, o->fail_for_s, j->submit, j->start))
			j->late_all |= 1u << SIM_LATE_FAILURE;
		if (!j->late_all)
			j->late_all = 1u << SIM_LATE_OTHER;
		j->late = (enum sim_late)__builtin_ctz(j->late_all);
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void compute(const struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r,
		    struct stats *s)
{
	memset(s, 0, sizeof(*s));
	int64_t *waits = egs_calloc(t->n + 1, sizeof(*waits));
	double wait_sum = 0, err_sum = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct sim_job *j = &t->jobs[i];
		if (j->skipped || !j->start)
			continue;
		waits[s->started++] = j->start - j->submit;
		s->at_once += j->start == j->submit;
		wait_sum += (double)(j->start - j->submit);
		double held_s = (double)((j->end ? j->end : r->last_end) - j->start);
		s->used_gpu_h += j->node_count * j->gpus_per_node * held_s / 3600.0;
		s->held_gpu_h += j->node_count * SIM_GPUS_PER_NODE * held_s / 3600.0;
		if (!j->est_known) {
			s->est_unknown++;
			continue;
		}
		s->est_known++;
		err_sum += fabs((double)(j->start - j->est));
		if (j->start == j->est)
			s->exact++;
		else if (j->start < j->est)
			s->earlier++;
		else
			s->later++;
		s->late[j->late]++;
		for (int k = 0; k < SIM_LATE_NREASONS; k++)
			s->late_any[k] += (j->late_all >> k) & 1u;
	}
	if (s->started) {
		qsort(waits, s->started, sizeof(*waits), cmp_i64);
		s->wait_mean = wait_sum / (double)s->started;
		s->wait_p95 = waits[(size_t)ceil(0.95 * (double)s->started) - 1]; /* nearest rank */
		s->wait_max = waits[s->started - 1];
	}
	if (s->est_known)
		s->mae = err_sum / (double)s->est_known;
	s->span_h = (double)(r->last_end - r->first_submit) / 3600.0;
	s->avail_gpu_h = (double)o->nodes * SIM_GPUS_PER_NODE * s->span_h;
	free(waits);
}

static double pct(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

static const char *dur(int64_t secs, char *buf, size_t n)
{
	egs_duration_format(secs, buf, n);
	return buf;
}

/* The workload and the inventory: how the trace was mapped. */
static void print_header(FILE *out, const struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r)
{
	fprintf(out, "egs-sim: %s (%zu jobs, %zu malformed lines skipped)\n", o->trace, t->n, t->malformed);
	fprintf(out, "mapping: numberOfGPUNodes = ceil(num_gpu/8), numberOfGPUs = min(num_gpu,8); window = duration "
		     "rounded up to %llds; %s\n",
		(long long)o->round_s, o->hold_window ? "no early release (nodes held for the whole window)"
						      : "early release at the real duration");
	fprintf(out, "         workspace = hash(job_id) mod %ld; priority %d for %.1f%% of jobs by hash, else %d; "
		     "seed %llu\n",
		o->workspaces, SIM_PRIO_HIGH, 100.0 * o->high_share, SIM_PRIO_NORMAL, (unsigned long long)o->seed);
	if (r->st->cfg.fair_half_life_s > 0)
		fprintf(out, "         equal priorities: fair share, usage half-life %llds (--fair-half-life 0: first come, "
			     "first served)\n",
			(long long)r->st->cfg.fair_half_life_s);
	else
		fprintf(out, "         equal priorities: first come, first served (fair share off)\n");
	fprintf(out, "inventory: %ld nodes x %d GPUs (%ld GPUs), one cluster, one shape%s\n", o->nodes, SIM_GPUS_PER_NODE,
		o->nodes * SIM_GPUS_PER_NODE,
		o->nodes_derived ? " (the 95th percentile over time of the nodes the jobs would hold if each started on "
				   "arrival)"
				 : "");
	if (o->fail_every_s > 0)
		fprintf(out, "failures: a node every %llds, Unhealthy for %llds\n", (long long)o->fail_every_s,
			(long long)o->fail_for_s);
	else
		fprintf(out, "failures: none\n");
}

static void print_text(FILE *out, const struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r,
		       const struct stats *s)
{
	char b1[32], b2[32], b3[32], b4[32];
	print_header(out, t, o, r);
	fprintf(out, "\njobs: %zu replayed, %zu skipped (need more than %ld nodes)%s\n", r->replayed, r->skipped,
		o->nodes, r->stuck ? "; STUCK: GPRs still waited with no event left" : "");
	fprintf(out, "simulated span: %.1f h (%.1f days)\n", s->span_h, s->span_h / 24);
	fprintf(out, "utilization: %.1f%% (GPU-hours used %.0f / available %.0f); whole nodes held: %.1f%%\n",
		pct(s->used_gpu_h, s->avail_gpu_h), s->used_gpu_h, s->avail_gpu_h, pct(s->held_gpu_h, s->avail_gpu_h));
	fprintf(out, "wait: mean %s, p95 %s, max %s; %.1f%% started on arrival\n",
		dur((int64_t)llround(s->wait_mean), b1, sizeof(b1)), dur(s->wait_p95, b2, sizeof(b2)),
		dur(s->wait_max, b3, sizeof(b3)), pct((double)s->at_once, (double)s->started));
	fprintf(out, "estimates at submission: %zu known, %zu unknown; mean absolute error %s; exact %.1f%%, "
		     "earlier %.1f%%, later %.1f%%\n",
		s->est_known, s->est_unknown, dur((int64_t)llround(s->mae), b4, sizeof(b4)), pct((double)s->exact, (double)s->est_known),
		pct((double)s->earlier, (double)s->est_known), pct((double)s->later, (double)s->est_known));
	fprintf(out, "late starts: %zu (%.1f%%): higher-priority arrival %zu, equal-priority arrival ranked ahead %zu, "
		     "node failure %zu, reservation of an arrival ahead %zu, other %zu\n",
		s->later, pct((double)s->later, (double)s->est_known), s->late[SIM_LATE_PRIORITY],
		s->late[SIM_LATE_RANKED], s->late[SIM_LATE_FAILURE], s->late[SIM_LATE_RESERVED], s->late[SIM_LATE_OTHER]);
	fprintf(out, "  every reason that applies (a late start may have several): higher-priority arrival %zu, "
		     "equal-priority ranked ahead %zu, node failure %zu, reservation of an arrival ahead %zu\n",
		s->late_any[SIM_LATE_PRIORITY], s->late_any[SIM_LATE_RANKED], s->late_any[SIM_LATE_FAILURE],
		s->late_any[SIM_LATE_RESERVED]);
	fprintf(out, "node failures: %zu injected, %zu NodeReplaced, %zu NodeFailed\n", r->failures, r->replaced,
		r->node_failed);
	fprintf(out, "replay: %.3f s wall, %.0f GPRs/s (%zu steps, %zu scheduler runs)\n", r->wall_s,
		r->wall_s > 0 ? (double)r->replayed / r->wall_s : 0.0, r->steps, r->sched_runs);
}

static void print_json(FILE *out, const struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r,
		       const struct stats *s)
{
	fprintf(out, "{\"trace\":{\"jobs\":%zu,\"malformed\":%zu},", t->n, t->malformed);
	fprintf(out, "\"mapping\":{\"nodes\":%ld,\"nodesDerived\":%s,\"gpusPerNode\":%d,\"workspaces\":%ld,\"roundSeconds\":%lld,"
		     "\"earlyRelease\":%s,\"highShare\":%g,\"highPriority\":%d,\"normalPriority\":%d,\"seed\":%llu,"
		     "\"failEverySeconds\":%lld,\"failForSeconds\":%lld,\"fairHalfLifeSeconds\":%lld},",
		o->nodes, o->nodes_derived ? "true" : "false", SIM_GPUS_PER_NODE, o->workspaces, (long long)o->round_s, o->hold_window ? "false" : "true",
		o->high_share, SIM_PRIO_HIGH, SIM_PRIO_NORMAL, (unsigned long long)o->seed, (long long)o->fail_every_s,
		(long long)o->fail_for_s, (long long)(r->st->cfg.fair_half_life_s > 0 ? r->st->cfg.fair_half_life_s : 0));
	fprintf(out, "\"replayed\":%zu,\"skipped\":%zu,\"stuck\":%s,\"spanHours\":%.3f,", r->replayed, r->skipped,
		r->stuck ? "true" : "false", s->span_h);
	fprintf(out, "\"utilization\":%.6f,\"nodeUtilization\":%.6f,\"gpuHoursUsed\":%.3f,\"gpuHoursAvailable\":%.3f,",
		s->avail_gpu_h > 0 ? s->used_gpu_h / s->avail_gpu_h : 0.0,
		s->avail_gpu_h > 0 ? s->held_gpu_h / s->avail_gpu_h : 0.0, s->used_gpu_h, s->avail_gpu_h);
	fprintf(out, "\"waitSeconds\":{\"mean\":%.3f,\"p95\":%lld,\"max\":%lld,\"startedOnArrival\":%zu},",
		s->wait_mean, (long long)s->wait_p95, (long long)s->wait_max, s->at_once);
	fprintf(out, "\"estimates\":{\"known\":%zu,\"unknown\":%zu,\"maeSeconds\":%.3f,\"exact\":%zu,\"earlier\":%zu,"
		     "\"later\":%zu,\"lateShare\":%.6f,\"lateBy\":{",
		s->est_known, s->est_unknown, s->mae, s->exact, s->earlier, s->later,
		s->est_known ? (double)s->later / (double)s->est_known : 0.0);
	for (int k = SIM_LATE_PRIORITY; k < SIM_LATE_NREASONS; k++)
		fprintf(out, "%s\"%s\":%zu", k == SIM_LATE_PRIORITY ? "" : ",", sim_late_name((enum sim_late)k), s->late[k]);
	fprintf(out, "},\"lateAnyReason\":{");
	for (int k = SIM_LATE_PRIORITY; k < SIM_LATE_NREASONS; k++)
		fprintf(out, "%s\"%s\":%zu", k == SIM_LATE_PRIORITY ? "" : ",", sim_late_name((enum sim_late)k),
			s->late_any[k]);
	fprintf(out, "}},\"failures\":{\"injected\":%zu,\"nodeReplaced\":%zu,\"nodeFailed\":%zu},", r->failures,
		r->replaced, r->node_failed);
	fprintf(out, "\"replay\":{\"wallSeconds\":%.6f,\"gprsPerSecond\":%.1f,\"steps\":%zu,\"schedulerRuns\":%zu}}\n",
		r->wall_s, r->wall_s > 0 ? (double)r->replayed / r->wall_s : 0.0, r->steps, r->sched_runs);
}

/* Times relative to the trace's second 0; -1 where there is none. */
static long long rel(int64_t v)
{
	return v ? (long long)(v - SIM_T0) : -1;
}

static bool write_jobs(const struct sim_trace *t, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return false;
	}
	fprintf(f, "job_id,skipped,workspace,priority,num_gpu,nodes,gpus_per_node,submit,duration,window,estimate,"
		   "start,end,late\n");
	for (size_t i = 0; i < t->n; i++) {
		const struct sim_job *j = &t->jobs[i];
		fprintf(f, "%s,%d,ws-%ld,%d,%d,%d,%d,%lld,%lld,%lld,%lld,%lld,%lld,%s\n", j->name, j->skipped,
			j->workspace, j->priority, j->gpus, j->node_count, j->gpus_per_node, rel(j->submit),
			(long long)j->duration, (long long)j->window, j->est_known ? rel(j->est) : -1, rel(j->start),
			rel(j->end), sim_late_name(j->late));
	}
	return fclose(f) == 0;
}

bool sim_report(struct sim_trace *t, const struct sim_opts *o, const struct sim_result *r, FILE *out)
{
	struct stats s;
	attribute(t, o, r);
	compute(t, o, r, &s);
	if (o->json)
		print_json(out, t, o, r, &s);
	else
		print_text(out, t, o, r, &s);
	return !o->jobs_out || write_jobs(t, o->jobs_out);
}
