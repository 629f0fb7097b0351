/*
 * ctl_gpr.c: the GPR commands that take flags instead of manifests: `create gpr`, `waittime`,
 * `release gpr`, `delete gpr` (and the dispatch of `delete -f` to ctl_apply.c).  Flags have
 * kubectl-style names; the request they build uses the API's wire names.
 */
#include "core/common.h"
#include "core/share.h"
#include "core/util.h"

#include "client/ctl.h"

#include <string.h>
#include <strings.h>

static const char create_help[] =
	"usage: egsctl create gpr NAME -w WORKSPACE --duration DURATION [options]\n"
	"\n"
	"Requests GPUs: NAME's nodes join WORKSPACE for DURATION once the queue reaches it.  Prints\n"
	"gpr/ID and where it stands; -o name prints only gpr/ID, -o json|yaml the GPR.\n"
	"\n"
	"request options (the API field in brackets):\n"
	"  -w, --workspace NAME       the slice workspace [sliceName] (required)\n"
	"  --duration DURATION        how long the GPUs are held, e.g. 6h or 0d6h0m [exitDuration] (required)\n"
	"  --nodes N                  GPU nodes [numberOfGPUNodes] (default 1)\n"
	"  --gpus N                   GPUs per node [numberOfGPUs] (default 1); with --shared a share\n"
	"                             of one node's GPUs, two decimals at most: 0.2, 1.5\n"
	"  --shared                   GPUs, or fractions of one, shared with other workspaces\n"
	"                             [gpuSharingMode: Shared; one node]\n"
	"  --priority P               1-1000: low 1-100, medium 101-200, high 201-300+ [priority] (default 101)\n"
	"  --cluster NAME             a cluster of the workspace [clusterName]\n"
	"  --gpu-shape SHAPE          e.g. NVIDIA-H100-80GB-HBM3 [gpuShape]\n"
	"  --instance-type TYPE       e.g. p5.48xlarge [instanceType]\n"
	"  --memory N                 minimum memory per GPU: GB below 1024, MiB from 1024 [memoryPerGpu]\n"
	"  --idle-timeout DURATION    release when idle this long [idleTimeOutDuration, enforceIdleTimeOut]\n"
	"  --preferred-cluster NAME   repeatable [preferredClusters]\n"
	"  --enable-eviction          may be evicted by a higher priority GPR [enableEviction]\n"
	"  --requeue-on-failure       queue again when provisioning fails [requeueOnFailure]\n"
	"  --wait                     then wait until it is Provisioned, showing progress\n"
	"  --timeout DURATION         bound of --wait (default 30m)\n"
	"\n"
	"example:\n"
	"  egsctl create gpr train-llm -w team-a --nodes 2 --gpus 8 --duration 6h --priority 201 --wait\n";

static const char waittime_help[] =
	"usage: egsctl waittime -w WORKSPACE --duration DURATION [request options of `create gpr`]\n"
	"\n"
	"Asks when a request would start, without creating it: one line per cluster, GPU shape and\n"
	"instance type that could hold it, earliest first.\n"
	"\n"
	"example:\n"
	"  egsctl waittime -w team-a --nodes 1 --gpus 8 --duration 6h --priority 201\n";

/* The flags of a request, as given. */
struct req_flags {
	const char *workspace, *duration, *nodes, *gpus, *priority, *cluster, *shape, *itype, *memory, *idle;
	const char *timeout;
	struct ctl_list preferred;
	bool eviction, requeue, wait, shared;
};

static void req_opts(struct req_flags *f, struct ctl_opt *o)
{
	const struct ctl_opt opts[] = {
		{"workspace", 'w', &f->workspace, NULL, NULL},  {"duration", 0, &f->duration, NULL, NULL},
		{"nodes", 0, &f->nodes, NULL, NULL},             {"gpus", 0, &f->gpus, NULL, NULL},
		{"priority", 0, &f->priority, NULL, NULL},       {"cluster", 0, &f->cluster, NULL, NULL},
		{"gpu-shape", 0, &f->shape, NULL, NULL},         {"instance-type", 0, &f->itype, NULL, NULL},
		{"memory", 0, &f->memory, NULL, NULL},           {"idle-timeout", 0, &f->idle, NULL, NULL},
		{"preferred-cluster", 0, NULL, NULL, &f->preferred}, {"enable-eviction", 0, NULL, &f->eviction, NULL},
		{"requeue-on-failure", 0, NULL, &f->requeue, NULL}, {"wait", 0, NULL, &f->wait, NULL},
		{"timeout", 0, &f->timeout, NULL, NULL},         {"shared", 0, NULL, &f->shared, NULL},
		{NULL, 0, NULL, NULL, NULL},
	};
	memcpy(o, opts, sizeof(opts));
}
#define REQ_OPTS 17

/* Adds an integer flag to req under field; false after a usage error. */
static bool put_int(struct ctl *c, json_t *req, const char *flag, const char *v, const char *field, long min, long max)
{
	long n;

	if (!v)
		return true;
	if (!ctl_int(c, flag, v, min, max, &n))
		return false;
	json_object_set_new(req, field, json_integer(n));
	return true;
}

/* --gpus of a shared request: 0.01 to 64 with at most two decimals, sent as a number. */
static bool put_share(struct ctl *c, json_t *req, const char *v)
{
	int centi;
	if (!egs_share_parse(v, 64 * EGS_SHARE_WHOLE, &centi)) {
		ctl_usage(c, "--gpus %s: with --shared, a number from 0.01 to 64 with at most two decimals", v);
		return false;
	}
	json_object_set_new(req, "numberOfGPUs", centi % EGS_SHARE_WHOLE ? json_real((double)centi / EGS_SHARE_WHOLE)
									 : json_integer(centi / EGS_SHARE_WHOLE));
	json_object_set_new(req, "gpuSharingMode", json_string("Shared"));
	return true;
}

static void put_str(json_t *req, const char *field, const char *v)
{
	if (v)
		json_object_set_new(req, field, json_string(v));
}

/* Builds the POST /api/v1/gpr body; NULL after a usage error. */
static json_t *build_request(struct ctl *c, const struct req_flags *f, const char *name)
{
	json_t *req = json_object();
	int64_t secs;

	if (!f->workspace || !f->duration) {
		ctl_usage(c, "-w WORKSPACE and --duration DURATION are required (see --help)");
		goto fail;
	}
	if (!ctl_duration(c, "--duration", f->duration, &secs) || (f->idle && !ctl_duration(c, "--idle-timeout", f->idle, &secs)))
		goto fail;
	put_str(req, "gprName", name);
	put_str(req, "sliceName", f->workspace);
	put_str(req, "exitDuration", f->duration);
	if (!put_int(c, req, "--nodes", f->nodes, "numberOfGPUNodes", 1, 1024) ||
	    (f->shared ? !put_share(c, req, f->gpus ? f->gpus : "1")
		       : !put_int(c, req, "--gpus", f->gpus, "numberOfGPUs", 1, 64)) ||
	    !put_int(c, req, "--priority", f->priority, "priority", 1, 1000) ||
	    !put_int(c, req, "--memory", f->memory, "memoryPerGpu", 0, 1L << 30))
		goto fail;
	if (!f->nodes)
		json_object_set_new(req, "numberOfGPUNodes", json_integer(1));
	put_str(req, "clusterName", f->cluster);
	put_str(req, "gpuShape", f->shape);
	put_str(req, "instanceType", f->itype);
	if (f->idle) {
		put_str(req, "idleTimeOutDuration", f->idle);
		json_object_set_new(req, "enforceIdleTimeOut", json_true());
	}
	if (f->preferred.n) {
		json_t *a = json_array();
		for (int i = 0; i < f->preferred.n; i++)
			json_array_append_new(a, json_string(f->preferred.v[i]));
		json_object_set_new(req, "preferredClusters", a);
	}
	if (f->eviction)
		json_object_set_new(req, "enableEviction", json_true());
	if (f->requeue)
		json_object_set_new(req, "requeueOnFailure", json_true());
	return req;
fail:
	json_decref(req);
	return NULL;
}

/* After a create: "gpr/ID created (NAME: Queued, estimated start ...)" or the GPR as asked. */
static int show_created(struct ctl *c, const char *id)
{
	json_t *g = NULL;
	enum egs_err err = egs_client_gpr_status(c->client, id, &g);
	json_t *st = json_object_get(g, "status");

	if (c->format == CTL_OUT_NAME || err != EGS_OK) {
		printf(c->format == CTL_OUT_NAME ? "gpr/%s\n" : "gpr/%s created\n", id);
	} else if (!ctl_print_data(c, g)) {
		const char *est = ctl_str(g, "estimatedStartTime");
		printf("gpr/%s created (%s: %s%s%s)\n", id, ctl_str(g, "gprName"), ctl_str(st, "provisioningStatus"),
		       *est ? ", estimated start " : "", est);
	}
	json_decref(g);
	return CTL_OK;
}

static int create_gpr(struct ctl *c, const struct req_flags *f, const char *name)
{
	char id[EGS_CLIENT_ID_MAX], what[160];
	json_t *req = build_request(c, f, name);
	int64_t timeout = 1800;
	enum egs_err err;
	int rc;

	if (!req)
		return CTL_USAGE;
	if (f->timeout && !ctl_duration(c, "--timeout", f->timeout, &timeout)) {
		json_decref(req);
		return CTL_USAGE;
	}
	if (!ctl_client(c, &rc)) {
		json_decref(req);
		return rc;
	}
	err = egs_client_gpr_create(c->client, req, id);
	json_decref(req);
	if (err) {
		snprintf(what, sizeof(what), "create gpr %s", name);
		return ctl_fail(c, err, what);
	}
	rc = show_created(c, id);
	if (f->wait)
		rc = ctl_wait_gpr(c, id, "Provisioned", timeout, 0);
	return rc;
}

int ctl_cmd_create(struct ctl *c, int argc, char **argv)
{
	struct req_flags f = {0};
	struct ctl_opt opts[REQ_OPTS];
	const char *pos[2];
	int npos, rc;
	bool help;

	req_opts(&f, opts);
	rc = ctl_args(c, argc, argv, 1, opts, pos, 2, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, create_help);
	}
	if (npos != 2 || (strcasecmp(pos[0], "gpr") && strcasecmp(pos[0], "gprs")))
		return ctl_usage(c, "usage: egsctl create gpr NAME -w WORKSPACE --duration DURATION [options] "
				    "(workspaces and clusters come from manifests: egsctl apply -f)");
	rc = ctl_check_format(c, 1u << CTL_OUT_TABLE | 1u << CTL_OUT_NAME | 1u << CTL_OUT_JSON | 1u << CTL_OUT_YAML);
	return rc ? rc : create_gpr(c, &f, pos[1]);
}

static void print_waittime(struct ctl *c, json_t *ans)
{
	static const char *const headers[] = {"CLUSTER", "SHAPE", "INSTANCE", "FREE/TOTAL", "ESTIMATED START", "WAIT"};
	struct ctl_table *t;
	size_t i;
	json_t *o;

	if (ctl_print_data(c, ans))
		return;
	if (json_array_size(json_object_get(ans, "items")) == 0) {
		fprintf(stderr, "No cluster and GPU shape of the workspace can hold this request.\n");
		return;
	}
	t = ctl_table_new(headers, 6);
	json_array_foreach(json_object_get(ans, "items"), i, o) {
		char nodes[32], wait[32];
		int64_t secs;
		const char *why;
		snprintf(nodes, sizeof(nodes), "%lld/%lld", ctl_int_of(o, "freeNodes"), ctl_int_of(o, "totalNodes"));
		if (egs_duration_parse(ctl_str(o, "estimatedWaitTime"), &secs, &why))
			ctl_duration_text(secs, wait, sizeof(wait));
		else
			egs_strlcpy(wait, json_is_true(json_object_get(o, "available")) ? "0s" : "never", sizeof(wait));
		ctl_table_add(t, ctl_str(o, "clusterName"), ctl_str(o, "gpuShape"), ctl_str(o, "instanceType"), nodes,
			      *ctl_str(o, "estimatedStartTime") ? ctl_str(o, "estimatedStartTime") : "-", wait);
	}
	ctl_table_print(t, stdout);
	ctl_table_free(t);
}

int ctl_cmd_waittime(struct ctl *c, int argc, char **argv)
{
	struct req_flags f = {0};
	struct ctl_opt opts[REQ_OPTS];
	const char *pos[1];
	json_t *req, *ans = NULL;
	enum egs_err err;
	int npos, rc;
	bool help;

	req_opts(&f, opts);
	rc = ctl_args(c, argc, argv, 1, opts, pos, 1, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, waittime_help);
	}
	req = build_request(c, &f, npos ? pos[0] : "waittime"); /* the server wants a name even for a question */
	if (!req)
		return CTL_USAGE;
	if (!ctl_client(c, &rc)) {
		json_decref(req);
		return rc;
	}
	err = egs_client_gpr_waittime(c->client, req, &ans);
	json_decref(req);
	if (err)
		return ctl_fail(c, err, "waittime");
	print_waittime(c, ans);
	json_decref(ans);
	return CTL_OK;
}

/* ---- release and delete by id ---- */

/* Runs op on each id; reports each; returns the first failure's code. */
static int each_gpr(struct ctl *c, const char *const *ids, int n, bool release)
{
	char what[160];
	int rc = CTL_OK, r;

	if (!ctl_client(c, &r))
		return r;
	for (int i = 0; i < n; i++) {
		enum egs_err err = release ? egs_client_gpr_release(c->client, ids[i]) : egs_client_gpr_cancel(c->client, ids[i]);
		if (err == EGS_OK) {
			printf("gpr/%s %s\n", ids[i], release ? "released" : "cancelled");
			continue;
		}
		snprintf(what, sizeof(what), "%s gpr %s", release ? "release" : "delete", ids[i]);
		r = ctl_fail(c, err, what);
		if (err == EGS_ERR_GPR_PROVISIONED && !release)
			fprintf(stderr, "  (to give its GPUs back before the exit time: egsctl release gpr %s)\n", ids[i]);
		if (err == EGS_ERR_GPR_NOT_PROVISIONED && release)
			fprintf(stderr, "  (it still waits; to cancel it: egsctl delete gpr %s)\n", ids[i]);
		rc = rc ? rc : r;
	}
	return rc;
}

/* Collects "gpr ID..." or "gpr/ID..." into ids; false after a usage error. */
static bool gpr_ids(struct ctl *c, const char **pos, int npos, const char **ids, int *n, const char *usage)
{
	*n = 0;
	for (int i = 0; i < npos; i++)
		if (!strncasecmp(pos[i], "gpr/", 4))
			ids[(*n)++] = pos[i] + 4;
		else if (i > 0)
			ids[(*n)++] = pos[i];
		else if (strcasecmp(pos[i], "gpr") && strcasecmp(pos[i], "gprs"))
			break;
	if (*n == 0)
		ctl_usage(c, "%s", usage);
	return *n > 0;
}

int ctl_cmd_release(struct ctl *c, int argc, char **argv)
{
	static const char help_text[] = "usage: egsctl release gpr ID...\n"
					"\n"
					"Releases provisioned GPRs before their exit time: their nodes are drained and\n"
					"detached, and the next GPRs of the queue can start.  A GPR that still waits is\n"
					"cancelled with `egsctl delete gpr ID` instead.\n";
	const struct ctl_opt opts[] = {{NULL, 0, NULL, NULL, NULL}};
	const char *pos[33], *ids[33];
	int npos, n, rc;
	bool help;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 33, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, help_text);
	}
	if (!gpr_ids(c, pos, npos, ids, &n, "usage: egsctl release gpr ID..."))
		return CTL_USAGE;
	return each_gpr(c, ids, n, true);
}

int ctl_cmd_delete(struct ctl *c, int argc, char **argv)
{
	static const char help_text[] =
		"usage: egsctl delete gpr ID...\n"
		"       egsctl delete -f FILE|DIR|- [--release] [--ignore-not-found] [--force]\n"
		"\n"
		"The first form cancels waiting GPRs (Pending or Queued).  The second deletes what the manifests\n"
		"describe, in reverse apply order: GPRs of that name in their workspace are cancelled (with\n"
		"--release, provisioned ones are released early too), workspaces are deleted.  Clusters stay\n"
		"(this server has no route to delete one).\n"
		"\n"
		"options:\n"
		"  -f, --filename PATH   a manifest file, a directory of them, or - (repeatable)\n"
		"  --release             release provisioned GPRs early instead of refusing\n"
		"  --ignore-not-found    an object that does not exist is not an error\n"
		"  --force               delete workspaces even while pods run in their namespaces (else 409)\n";
	struct ctl_list files = {0};
	bool release = false, ignore = false, force = false, help;
	const struct ctl_opt opts[] = {{"filename", 'f', NULL, NULL, &files}, {"release", 0, NULL, &release, NULL},
				       {"ignore-not-found", 0, NULL, &ignore, NULL}, {"force", 0, NULL, &force, NULL},
				       {NULL, 0, NULL, NULL, NULL}};
	const char *pos[33], *ids[33];
	int npos, n, rc;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 33, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, help_text);
	}
	if (files.n > 0) {
		if (npos > 0)
			return ctl_usage(c, "give either -f FILE or gpr ID..., not both");
		files.v[files.n] = NULL;
		return ctl_delete_files(c, files.v, release, ignore, force);
	}
	if (!gpr_ids(c, pos, npos, ids, &n, "usage: egsctl delete gpr ID... | egsctl delete -f FILE"))
		return CTL_USAGE;
	return each_gpr(c, ids, n, false);
}
