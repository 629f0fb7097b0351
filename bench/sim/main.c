/*
 * main.c: egs-sim's command line.  Usage: egs-sim [options] [TRACE.csv]; see usage() and README.md.
 */
#include "sim.h"

#include "core/util.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Relative to the repository root, where `make sim` runs it: the shared folder sits beside the checkout. */
#define DEFAULT_TRACE "../shared/traces/itp_cluster04.csv"

static void usage(FILE *f)
{
	fprintf(f, "usage: egs-sim [options] [TRACE.csv]   (default trace: %s)\n"
		   "  --nodes N            nodes of 8 GPUs (default: the 95th percentile of the trace's node demand)\n"
		   "  --workspaces W       jobs are hashed into W workspaces (default 2000)\n"
		   "  --round S            window = real duration rounded up to S seconds (default 1800)\n"
		   "  --no-early-release   keep the nodes for the whole window instead of releasing at the real duration\n"
		   "  --high-share F       share of jobs (by hash) at priority %d, the rest at %d (default 0.1)\n"
		   "  --fail-every S       a node (chosen by hash) fails every S seconds (default: never)\n"
		   "  --fail-rate R        or: R failures per node per day\n"
		   "  --fail-for S         a failed node stays Unhealthy S seconds (default 3600)\n"
		   "  --fair-half-life S   half-life of the usage that orders equal priorities (default: the core's, 1 day);\n"
		   "                       0 turns fair share off (first come, first served)\n"
		   "  --no-backfill        turn off conservative backfill in the planner (on by default, as in egsd)\n"
		   "  --seed N             salt of every hash (default 1)\n"
		   "  --limit N            replay only the first N jobs\n"
		   "  --jobs FILE          write one CSV line per job (estimate, start, end, late reason)\n"
		   "  --json               one JSON object instead of text\n",
		DEFAULT_TRACE, SIM_PRIO_HIGH, SIM_PRIO_NORMAL);
}


static bool real(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return false;
	*out = v;
	return true;
}

/* Parses argv into o; returns 0 to run, 1 after --help, 2 on a bad option (message printed). */
static int parse(int argc, char **argv, struct sim_opts *o, double *fail_rate)
{
	static const struct option longs[] = {
		{ "nodes", required_argument, NULL, 'n' },      { "workspaces", required_argument, NULL, 'w' },
		{ "round", required_argument, NULL, 'r' },      { "no-early-release", no_argument, NULL, 'E' },
		{ "high-share", required_argument, NULL, 'p' }, { "fail-every", required_argument, NULL, 'f' },
		{ "fail-rate", required_argument, NULL, 'R' },  { "fail-for", required_argument, NULL, 'F' },
		{ "seed", required_argument, NULL, 's' },       { "limit", required_argument, NULL, 'l' },
		{ "fair-half-life", required_argument, NULL, 'H' }, { "backfill", no_argument, NULL, 'B' },
		{ "no-backfill", no_argument, NULL, 'b' },
		{ "jobs", required_argument, NULL, 'j' },       { "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },             { NULL, 0, NULL, 0 },
	};
	int c;
	int64_t v;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 'n': ok = egs_int_parse(optarg, 1, 1000000, &v), o->nodes = (long)v; break;
		case 'w': ok = egs_int_parse(optarg, 1, 100000000, &v), o->workspaces = (long)v; break;
		case 'r': ok = egs_int_parse(optarg, 1, 86400, &v), o->round_s = v; break;
		case 'E': o->hold_window = true; break;
		case 'B': o->backfill = true; break;
		case 'b': o->backfill = false; break;
		case 'p': ok = real(optarg, 0, 1, &o->high_share); break;
		case 'f': ok = egs_int_parse(optarg, 1, 1LL << 40, &v), o->fail_every_s = v; break;
		case 'R': ok = real(optarg, 1e-9, 1e6, fail_rate); break;
		case 'F': ok = egs_int_parse(optarg, 1, 1LL << 40, &v), o->fail_for_s = v; break;
		case 's': ok = egs_int_parse(optarg, 0, INT64_MAX, &v), o->seed = (uint64_t)v; break;
		case 'H': ok = egs_int_parse(optarg, 0, 100LL * 365 * 86400, &v), o->fair_half_life_s = v ? v : -1; break;
		case 'l': ok = egs_int_parse(optarg, 1, INT64_MAX, &v), o->limit = (long)v; break;
		case 'j': o->jobs_out = optarg; break;
		case 'J': o->json = true; break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return 2;
		}
		if (!ok) {
			const struct option *l = longs;
			while (l->name && l->val != c)
				l++;
			fprintf(stderr, "egs-sim: bad value for --%s: %s\n", l->name, optarg);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		o->trace = argv[optind++];
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sim_opts o = { .trace = DEFAULT_TRACE, .workspaces = 2000, .round_s = 1800, .high_share = 0.1,
			      .fail_for_s = 3600, .seed = 1, .backfill = true };
	double fail_rate = 0;
	int rc = parse(argc, argv, &o, &fail_rate);
	if (rc)
		return rc == 1 ? 0 : 2;
	struct sim_trace t;
	if (!sim_trace_load(&t, &o))
		return 1;
	if (!o.nodes) {
		o.nodes = sim_default_nodes(&t);
		o.nodes_derived = true;
	}
	if (fail_rate > 0 && !o.fail_every_s) {
		double every = 86400.0 / (fail_rate * (double)o.nodes);
		o.fail_every_s = every < 1 ? 1 : (int64_t)llround(every);
	}
	struct sim_result r;
	bool ok = sim_replay(&t, &o, &r);
	if (!sim_report(&t, &o, &r, stdout))
		ok = false;
	sim_result_cleanup(&r, &t);
	sim_trace_cleanup(&t);
	return ok ? 0 : 1;
}
