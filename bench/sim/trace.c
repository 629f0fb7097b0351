/*
 * trace.c: reads a job trace (CSV) and maps each job to a GPR request; see sim.h and README.md.
 *
 * The mapping is a pure function of the row and the seed, so a trace replays the same way on every
 * machine: GPUs to nodes of 8, the window is the real duration rounded up, and workspace and priority
 * come from hashes of the job id (or from optional columns, which tests use to build exact cases).
 */
#include "sim.h"

#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { COL_ID, COL_SUBMIT, COL_DURATION, COL_GPUS, COL_PRIORITY, COL_WORKSPACE, NCOLS };
static const char *const col_names[NCOLS] = { "job_id", "submission_time", "duration", "num_gpu", "priority",
					      "workspace" };

uint64_t sim_hash(uint64_t seed, const char *salt, const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;
	for (const char *p = salt; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h = (h ^ 0x1f) * 0x100000001b3ULL; /* separator: ("ab","c") and ("a","bc") differ */
	for (const char *p = s; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h += 0x9e3779b97f4a7c15ULL;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

/* Splits line in place at commas (no quoting: trace fields never hold commas); returns the count. */
static size_t split(char *line, char **f, size_t max)
{
	size_t n = 0;
	line[strcspn(line, "\r\n")] = '\0';
	for (char *p = line; n < max;) {
		f[n++] = p;
		char *c = strchr(p, ',');
		if (!c)
			break;
		*c = '\0';
		p = c + 1;
	}
	return n;
}

/* The request a job becomes; prio/ws < 0 mean "not given: hash them". */
static void map_job(struct sim_job *j, const struct sim_opts *o, int64_t prio, int64_t ws)
{
	j->node_count = (j->gpus + SIM_GPUS_PER_NODE - 1) / SIM_GPUS_PER_NODE;
	j->gpus_per_node = j->gpus < SIM_GPUS_PER_NODE ? j->gpus : SIM_GPUS_PER_NODE;
	j->window = (j->duration + o->round_s - 1) / o->round_s * o->round_s;
	if (prio >= 0) {
		j->priority = (int)prio;
	} else {
		uint64_t h = sim_hash(o->seed, "priority", j->name);
		j->priority = (double)(h % 1000000) < o->high_share * 1e6 ? SIM_PRIO_HIGH : SIM_PRIO_NORMAL;
	}
	j->workspace = ws >= 0 ? (long)ws : (long)(sim_hash(o->seed, "workspace", j->name) % (uint64_t)o->workspaces);
}

/* Reads one data row into j; false when a field is missing or out of range. */
static bool read_row(char *line, const int *col, struct sim_job *j, const struct sim_opts *o)
{
	char *f[32];
	size_t nf = split(line, f, EGS_ARRAY_LEN(f));
	int64_t v[NCOLS] = { 0 };
	for (int c = COL_SUBMIT; c < NCOLS; c++) {
		v[c] = -1;
		if (col[c] < 0)
			continue;
		if ((size_t)col[c] >= nf)
			return false;
		int64_t hi = c == COL_GPUS ? 1 << 20 : c == COL_PRIORITY ? 1000 : EGS_MAX_DURATION_S * 100;
		if (!egs_int_parse(f[col[c]], c == COL_PRIORITY ? 1 : 0, hi, &v[c]))
			return false;
	}
	if ((size_t)col[COL_ID] >= nf || !f[col[COL_ID]][0] || v[COL_GPUS] < 1 || v[COL_DURATION] < 1 ||
	    v[COL_DURATION] > EGS_MAX_DURATION_S)
		return false;
	memset(j, 0, sizeof(*j));
	egs_strlcpy(j->name, f[col[COL_ID]], sizeof(j->name));
	j->submit = SIM_T0 + v[COL_SUBMIT];
	j->duration = v[COL_DURATION];
	j->gpus = (int)v[COL_GPUS];
	map_job(j, o, v[COL_PRIORITY], v[COL_WORKSPACE]);
	return true;
}

static bool read_header(char *line, int *col, const char *path)
{
	char *f[32];
	size_t nf = split(line, f, EGS_ARRAY_LEN(f));
	for (int c = 0; c < NCOLS; c++) {
		col[c] = -1;
		for (size_t i = 0; i < nf; i++)
			if (strcmp(f[i], col_names[c]) == 0)
				col[c] = (int)i;
		if (col[c] < 0 && c <= COL_GPUS) {
			fprintf(stderr, "egs-sim: %s: no column %s in the header\n", path, col_names[c]);
			return false;
		}
	}
	return true;
}

static int cmp_submit(const void *a, const void *b)
{
	const struct sim_job *x = a, *y = b;
	return (x->submit > y->submit) - (x->submit < y->submit);
}

bool sim_trace_load(struct sim_trace *t, const struct sim_opts *o)
{
	memset(t, 0, sizeof(*t));
	FILE *f = fopen(o->trace, "r");
	if (!f) {
		fprintf(stderr, "egs-sim: %s: %s\n", o->trace, strerror(errno));
		return false;
	}
	bool ok = false;
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	int col[NCOLS];
	if (getline(&line, &cap, f) < 0 || !read_header(line, col, o->trace))
		goto out;
	while (getline(&line, &cap, f) >= 0) {
		if (line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (t->n == alloc) {
			alloc = alloc ? 2 * alloc : 1024;
			t->jobs = egs_realloc(t->jobs, alloc * sizeof(*t->jobs));
		}
		if (read_row(line, col, &t->jobs[t->n], o))
			t->n++;
		else
			t->malformed++;
	}
	/* qsort is not stable: the trace is sorted already, so this only matters for odd inputs, where
	 * equal submission times keep no particular order (all of them are submitted in one step). */
	if (t->n)
		qsort(t->jobs, t->n, sizeof(*t->jobs), cmp_submit);
	if (o->limit > 0 && (size_t)o->limit < t->n)
		t->n = (size_t)o->limit;
	ok = true;
out:
	free(line);
	fclose(f);
	return ok;
}

void sim_trace_cleanup(struct sim_trace *t)
{
	free(t->jobs);
	memset(t, 0, sizeof(*t));
}

struct demand_ev {
	int64_t t;
	int delta; /* nodes taken (+) or given back (-) */
};

static int cmp_demand(const void *a, const void *b)
{
	const struct demand_ev *x = a, *y = b;
	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return x->delta - y->delta; /* releases first */
}

long sim_default_nodes(const struct sim_trace *t)
{
	if (!t->n)
		return 1;
	struct demand_ev *ev = egs_calloc(2 * t->n, sizeof(*ev));
	long biggest = 1, level = 0, top = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct sim_job *j = &t->jobs[i];
		ev[2 * i] = (struct demand_ev){ j->submit, j->node_count };
		ev[2 * i + 1] = (struct demand_ev){ j->submit + j->duration, -j->node_count };
		if (j->node_count > biggest)
			biggest = j->node_count;
	}
	qsort(ev, 2 * t->n, sizeof(*ev), cmp_demand);
	/* time spent at each demand level, then the level below which 95% of the time is spent */
	for (size_t i = 0; i < 2 * t->n; i++) {
		level += ev[i].delta;
		if (level > top)
			top = level;
	}
	int64_t *at = egs_calloc((size_t)top + 1, sizeof(*at));
	int64_t total = ev[2 * t->n - 1].t - ev[0].t;
	level = 0;
	for (size_t i = 0; i + 1 < 2 * t->n; i++) {
		level += ev[i].delta;
		at[level] += ev[i + 1].t - ev[i].t;
	}
	long p95 = top;
	int64_t acc = 0;
	for (long l = 0; l <= top; l++) {
		acc += at[l];
		if ((double)acc >= 0.95 * (double)total) {
			p95 = l;
			break;
		}
	}
	free(at);
	free(ev);
	return p95 > biggest ? p95 : biggest;
}
