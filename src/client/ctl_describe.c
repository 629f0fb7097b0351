/*
 * ctl_describe.c: `egsctl describe gpr ID` and `egsctl describe workspace NAME`: one object in
 * full, for a person (kubectl's describe): aligned "Field: value" lines, then its recent events,
 * oldest first.  -o json|yaml prints the object as `get` would.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/ctl.h"

#include <stdarg.h>
#include <string.h>
#include <strings.h>

static const char describe_help[] =
	"usage: egsctl describe gpr ID\n"
	"       egsctl describe workspace NAME\n"
	"       egsctl describe gprtemplate NAME | gprtemplatebinding WORKSPACE\n"
	"\n"
	"Shows one GPR (request, state, queue position, estimate, window, nodes, failure reason) or\n"
	"one workspace (clusters, namespaces, users, live GPRs), with its recent events; or one GPR\n"
	"template, or the template binding of a workspace.\n";

static void field(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void field(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%-17s ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static const char *dash(const char *s)
{
	return s && *s ? s : "-";
}

static const char *band(long long p)
{
	return p <= 100 ? "low" : p <= 200 ? "medium" : "high";
}

/* The boolean options that are on, as "enableEviction, requeueOnFailure". */
static void options(json_t *g, char *buf, size_t n)
{
	static const char *const flags[] = {"enableEviction", "requeueOnFailure", "enforceIdleTimeOut", "earlyRelease",
					    "enableAutoClusterSelection", "enableAutoGpuSelection", "enableRDMA",
					    "enableSecondaryNetwork"};
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < EGS_ARRAY_LEN(flags); i++)
		if (json_is_true(json_object_get(g, flags[i])) && used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", flags[i]);
}

/* Recent events of one object (gprId or workspace), oldest first. */
static void print_events(struct ctl *c, const char *gpr, const char *workspace)
{
	struct egs_client_event_filter f = {workspace, gpr, NULL, NULL, 20};
	json_t *items = NULL, *e;
	size_t i;

	printf("Events:\n");
	if (egs_client_events(c->client, &f, &items) != EGS_OK || json_array_size(items) == 0) {
		printf("  <none>\n");
		json_decref(items);
		return;
	}
	for (i = json_array_size(items); i-- > 0;) {
		e = json_array_get(items, i);
		printf("  %s  %-7s  %-20s  %s\n", ctl_str(e, "lastTimestamp"), ctl_str(e, "type"), ctl_str(e, "reason"),
		       ctl_str(e, "message"));
	}
	json_decref(items);
}

static void print_request(json_t *g)
{
	char pref[300], opts[300];

	char gpus[32];
	ctl_num_text(g, "numberOfGPUs", gpus, sizeof(gpus));
	field("Request:", "%lld node(s) x %s GPU(s)%s", ctl_int_of(g, "numberOfGPUNodes"), gpus,
	      !strcmp(ctl_str(g, "gpuSharingMode"), "Shared") ? ", shared" : "");
	field("  GPU shape:", "%s", *ctl_str(g, "gpuShape") ? ctl_str(g, "gpuShape") : "any");
	field("  Instance type:", "%s", *ctl_str(g, "instanceType") ? ctl_str(g, "instanceType") : "any");
	ctl_joined(json_object_get(g, "preferredClusters"), pref, sizeof(pref));
	field("  Cluster:", "%s%s%s%s", *ctl_str(g, "clusterName") ? ctl_str(g, "clusterName") : "any", *pref ? " (preferred: " : "",
	      pref, *pref ? ")" : "");
	if (ctl_int_of(g, "memoryPerGpu"))
		field("  Memory per GPU:", ">= %lld MiB", ctl_int_of(g, "memoryPerGpu"));
	field("Duration:", "%s", ctl_str(g, "exitDuration"));
	options(g, opts, sizeof(opts));
	field("Options:", "%s%s%s", dash(opts), *ctl_str(g, "idleTimeOutDuration") ? "; idle timeout " : "",
	      ctl_str(g, "idleTimeOutDuration"));
}

static void print_gpr(struct ctl *c, json_t *g)
{
	json_t *st = json_object_get(g, "status");
	const char *state = ctl_str(st, "provisioningStatus");
	char nodes[600];
	int pos = 0, of = 0;

	field("Name:", "%s", ctl_str(g, "gprName"));
	field("ID:", "%s", ctl_str(g, "gprId"));
	field("Workspace:", "%s", ctl_str(g, "sliceName"));
	field("Status:", "%s", state);
	if (!strcmp(state, "Queued") && (pos = ctl_queue_position(c, ctl_str(g, "gprId"), &of)) > 0)
		field("Queue position:", "%d of %d", pos, of);
	if (*ctl_str(st, "pendingReason"))
		field("Pending reason:", "%s", ctl_str(st, "pendingReason"));
	field("Priority:", "%lld (%s)", ctl_int_of(g, "priority"), band(ctl_int_of(g, "priority")));
	print_request(g);
	field("Estimated start:", "%s%s%s%s", dash(ctl_str(g, "estimatedStartTime")),
	      *ctl_str(g, "estimatedWaitTime") ? " (wait " : "", ctl_str(g, "estimatedWaitTime"),
	      *ctl_str(g, "estimatedWaitTime") ? ")" : "");
	field("Started:", "%s", dash(ctl_str(st, "startTimestamp")));
	field("Exit at:", "%s", dash(ctl_str(st, "exitTimestamp")));
	field("Completed:", "%s", dash(ctl_str(st, "completionTimestamp")));
	ctl_joined(json_object_get(st, "nodes"), nodes, sizeof(nodes));
	field("Nodes:", "%s", dash(nodes));
	field("GPUs allocated:", "%lld", ctl_int_of(st, "numGpusAllocated"));
	field("Retries:", "%lld (delayed %lld)", ctl_int_of(st, "retryCount"), ctl_int_of(st, "delayedCount"));
	field("Failure reason:", "%s", dash(ctl_str(st, "failureReason")));
	field("Created:", "%s", dash(ctl_str(st, "createdTimestamp")));
	print_events(c, ctl_str(g, "gprId"), NULL);
}

/* "Policy:" and one line per limit set ("  maxGPRs: 4", "  softLimits.maxGPRs: 3"), or "none". */
static void print_policy(struct ctl *c, const char *ws)
{
	json_t *p = NULL, *v, *x;
	const char *k, *sk;
	char *text;

	if (egs_client_policy_get(c->client, ws, &p) != EGS_OK) {
		printf("Policy:         (not readable with this key)\n");
		return;
	}
	printf("Policy:%s\n", json_object_size(p) > 1 ? "" : "         none");
	json_object_foreach(p, k, v) {
		if (!strcmp(k, "workspaceName"))
			continue;
		if (strcmp(k, "softLimits") != 0) {
			text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			printf("  %s: %s\n", k, text ? text : "?");
			free(text);
			continue;
		}
		json_object_foreach(v, sk, x) {
			text = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
			printf("  softLimits.%s: %s\n", sk, text ? text : "?");
			free(text);
		}
	}
	json_decref(p);
}

static void print_workspace(struct ctl *c, json_t *w)
{
	json_t *x, *gprs = NULL;
	char buf[600];
	size_t i;

	field("Name:", "%s", ctl_str(w, "name"));
	field("Project:", "%s", dash(ctl_str(w, "projectName")));
	field("Description:", "%s", dash(ctl_str(w, "sliceDescription")));
	ctl_joined(json_object_get(w, "clusters"), buf, sizeof(buf));
	field("Clusters:", "%s", dash(buf));
	printf("Namespaces:\n");
	json_array_foreach(json_object_get(w, "namespaces"), i, x) {
		ctl_joined(json_object_get(x, "clusters"), buf, sizeof(buf));
		printf("  %s (on %s)\n", ctl_str(x, "namespace"), dash(buf));
	}
	printf("Users:\n");
	json_array_foreach(json_object_get(w, "users"), i, x)
		printf("  %s%s%s%s\n", ctl_str(x, "username"), *ctl_str(x, "email") ? " <" : "", ctl_str(x, "email"),
		       *ctl_str(x, "email") ? ">" : "");
	print_policy(c, ctl_str(w, "name"));
	printf("Live GPRs:\n");
	if (egs_client_gpr_list(c->client, ctl_str(w, "name"), NULL, &gprs) == EGS_OK)
		json_array_foreach(gprs, i, x) {
			const char *st = ctl_str(json_object_get(x, "status"), "provisioningStatus");
			if (strcmp(st, "Complete") && strcmp(st, "Cancelled") && strcmp(st, "Rejected") && strcmp(st, "Error"))
				printf("  %s  %-12s  %s\n", ctl_str(x, "gprId"), st, ctl_str(x, "gprName"));
		}
	json_decref(gprs);
	print_events(c, NULL, ctl_str(w, "name"));
}

int ctl_cmd_describe(struct ctl *c, int argc, char **argv)
{
	const struct ctl_opt opts[] = {{NULL, 0, NULL, NULL, NULL}};
	const char *pos[2], *kind, *name;
	json_t *obj = NULL;
	enum egs_err err;
	char what[200];
	int npos, rc;
	bool help, gpr;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 2, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, describe_help);
	}
	if (npos == 1 && !strncasecmp(pos[0], "gpr/", 4)) /* describe gpr/ID */
		kind = "gpr", name = pos[0] + 4;
	else if (npos == 2)
		kind = pos[0], name = pos[1];
	else
		return ctl_usage(c, "usage: egsctl describe gpr ID | egsctl describe workspace NAME");
	if (!strcasecmp(kind, "gprtemplate") || !strcasecmp(kind, "template") || !strcasecmp(kind, "gprtemplatebinding") ||
	    !strcasecmp(kind, "templatebinding")) {
		if ((rc = ctl_check_format(c, 1u << CTL_OUT_TABLE | 1u << CTL_OUT_JSON | 1u << CTL_OUT_YAML)) != CTL_OK ||
		    !ctl_client(c, &rc))
			return rc;
		return ctl_describe_template(c, strcasestr(kind, "binding") != NULL, name);
	}
	gpr = !strcasecmp(kind, "gpr") || !strcasecmp(kind, "gprs");
	if (!gpr && strcasecmp(kind, "workspace") && strcasecmp(kind, "ws") && strcasecmp(kind, "workspaces"))
		return ctl_usage(c, "describe knows gpr, workspace, gprtemplate and gprtemplatebinding, not %s", kind);
	if ((rc = ctl_check_format(c, 1u << CTL_OUT_TABLE | 1u << CTL_OUT_JSON | 1u << CTL_OUT_YAML)) != CTL_OK ||
	    !ctl_client(c, &rc))
		return rc;
	err = gpr ? egs_client_gpr_status(c->client, name, &obj) : egs_client_workspace_get(c->client, name, &obj);
	if (err) {
		snprintf(what, sizeof(what), "%s %s", gpr ? "gpr" : "workspace", name);
		return ctl_fail(c, err, what);
	}
	if (!ctl_print_data(c, obj)) {
		if (gpr)
			print_gpr(c, obj);
		else
			print_workspace(c, obj);
	}
	json_decref(obj);
	return CTL_OK;
}
