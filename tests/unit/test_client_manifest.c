/*
 * test_client_manifest.c: libegs's YAML manifests (src/client/manifest*.c): every kind into its API
 * request with wire names and field lines, multi-document files, strictness (unknown fields with a
 * suggestion, wrong types, duplicates, missing fields) with the right file:line in every error,
 * directories and duplicate objects across files, the apply order, the generic YAML loader, and the
 * differences apply computes against the server's objects.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/manifest.h"

static char err[4096];

static enum egs_err parse(struct egs_manifest *m, const char *text)
{
	return egs_manifest_parse(m, text, strlen(text), "t.yaml", err, sizeof(err));
}

/* Parses text that must fail and checks that the error contains want. */
static void assert_fails(const char *text, const char *want)
{
	struct egs_manifest m = {0};

	assert_int_equal(parse(&m, text), EGS_ERR_INVALID);
	if (!strstr(err, want))
		fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err, want);
	assert_non_null(strstr(err, want));
	assert_int_equal(m.n, 0);
	egs_manifest_cleanup(&m);
}

static const char gpr_doc[] = "apiVersion: egs.avesha.io/v1\n"      /* 1 */
			      "kind: GPUProvisioningRequest\n"      /* 2 */
			      "metadata:\n"                         /* 3 */
			      "  name: train-llm\n"                 /* 4 */
			      "spec:\n"                             /* 5 */
			      "  sliceName: team-a\n"               /* 6 */
			      "  numberOfGPUNodes: 2\n"             /* 7 */
			      "  numberOfGPUs: 8\n"                 /* 8 */
			      "  memoryPerGpu: 80\n"                /* 9 */
			      "  exitDuration: 6h\n"                /* 10 */
			      "  priority: 201\n"                   /* 11 */
			      "  enableEviction: true\n"            /* 12 */
			      "  preferredClusters: [worker-1]\n"   /* 13 */
			      "  gpuShape: NVIDIA-H100-80GB-HBM3\n"; /* 14 */

static void test_gpr_to_request(void **state)
{
	struct egs_manifest m = {0};
	struct egs_manifest_obj *o;

	(void)state;
	assert_int_equal(parse(&m, gpr_doc), EGS_OK);
	assert_int_equal(m.n, 1);
	o = &m.objs[0];
	assert_int_equal(o->kind, EGS_MANIFEST_GPR);
	assert_string_equal(o->name, "train-llm");
	assert_string_equal(o->source, "t.yaml");
	assert_int_equal(o->line, 1);
	/* metadata.name becomes gprName; types are JSON types; durations stay as written. */
	assert_string_equal(json_string_value(json_object_get(o->body, "gprName")), "train-llm");
	assert_string_equal(json_string_value(json_object_get(o->body, "sliceName")), "team-a");
	assert_int_equal(json_integer_value(json_object_get(o->body, "numberOfGPUNodes")), 2);
	assert_int_equal(json_integer_value(json_object_get(o->body, "memoryPerGpu")), 80);
	assert_string_equal(json_string_value(json_object_get(o->body, "exitDuration")), "6h");
	assert_true(json_is_true(json_object_get(o->body, "enableEviction")));
	assert_int_equal(json_array_size(json_object_get(o->body, "preferredClusters")), 1);
	/* The line of each wire field, for pointing a server's 422 back at the file. */
	assert_int_equal(egs_manifest_line(o, "priority"), 11);
	assert_int_equal(egs_manifest_line(o, "gprName"), 4);
	assert_int_equal(egs_manifest_line(o, "exitDuration"), 10);
	assert_int_equal(egs_manifest_line(o, "noSuchField"), 1);
	assert_int_equal(egs_manifest_line(o, NULL), 1);
	egs_manifest_cleanup(&m);
	egs_manifest_cleanup(&m); /* cleanup leaves an empty, reusable manifest */
}

static void test_aliases_of_api_names(void **state)
{
	struct egs_manifest m = {0};

	(void)state;
	/* requestName (the CRD's) and memoryPerGPU (the older API's) map to the wire names. */
	assert_int_equal(parse(&m, "apiVersion: gpr.kubeslice.io/v1alpha1\nkind: GPUProvisioningRequest\n"
				   "spec: {requestName: job-1, sliceName: ws, numberOfGPUNodes: 1, exitDuration: 1h,"
				   " memoryPerGPU: 16}\n"),
			 EGS_OK);
	assert_string_equal(m.objs[0].name, "job-1");
	assert_int_equal(json_integer_value(json_object_get(m.objs[0].body, "memoryPerGpu")), 16);
	assert_null(json_object_get(m.objs[0].body, "memoryPerGPU"));
	egs_manifest_cleanup(&m);
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: a}\n"
		     "spec: {requestName: b, sliceName: ws, numberOfGPUNodes: 1, exitDuration: 1h}\n",
		     "t.yaml:3: metadata.name 'a' differs from the spec's gprName 'b'");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: a}\nspec:\n"
		     "  memoryPerGpu: 1\n  memoryPerGPU: 2\n  sliceName: ws\n  numberOfGPUNodes: 1\n  exitDuration: 1h\n",
		     "t.yaml:6: spec.memoryPerGPU: memoryPerGpu is already given under another name");
}

static void test_multi_document(void **state)
{
	struct egs_manifest m = {0};
	const char *text = "# a cluster, a workspace and a GPR in one file\n"
			   "apiVersion: egs.avesha.io/v1\n"                                       /* 2 */
			   "kind: GPUProvisioningRequest\n"
			   "metadata: {name: job}\n"
			   "spec: {sliceName: team-a, numberOfGPUNodes: 1, exitDuration: 1h}\n"
			   "---\n"                                                                /* 6 */
			   "---\n"                                                                /* empty */
			   "apiVersion: egs.avesha.io/v1\n"                                       /* 8 */
			   "kind: SliceWorkspace\n"
			   "metadata:\n  name: team-a\n"
			   "spec:\n  clusters: [worker-1]\n  namespaces: [team-a-dev]\n  username: ann\n"
			   "  email: ann@example.com\n"
			   "---\n"
			   "apiVersion: egs.avesha.io/v1\n"                                       /* 18 */
			   "kind: Cluster\n"
			   "metadata: {name: worker-1}\n"
			   "spec: {apiServer: 'https://10.0.0.1:6443'}\n";

	(void)state;
	assert_int_equal(parse(&m, text), EGS_OK);
	assert_int_equal(m.n, 3);
	assert_int_equal(m.objs[0].line, 2);
	assert_int_equal(m.objs[1].kind, EGS_MANIFEST_WORKSPACE);
	assert_int_equal(m.objs[1].line, 8);
	assert_string_equal(json_string_value(json_object_get(m.objs[1].body, "workspaceName")), "team-a");
	assert_int_equal(m.objs[2].line, 18);
	assert_string_equal(json_string_value(json_object_get(m.objs[2].body, "clusterName")), "worker-1");
	/* finish sorts into apply order: clusters, workspaces, then GPRs; stable within a kind. */
	assert_int_equal(egs_manifest_finish(&m, err, sizeof(err)), EGS_OK);
	assert_int_equal(m.objs[0].kind, EGS_MANIFEST_CLUSTER);
	assert_int_equal(m.objs[1].kind, EGS_MANIFEST_WORKSPACE);
	assert_int_equal(m.objs[2].kind, EGS_MANIFEST_GPR);
	assert_int_equal(m.objs[2].line, 2);
	egs_manifest_cleanup(&m);
}

static void test_unknown_fields(void **state)
{
	(void)state;
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: j}\nspec:\n"
		     "  sliceName: ws\n  numberOfGPUNodes: 1\n  exitDuration: 1h\n  priorty: 5\n",
		     "t.yaml:8: spec.priorty: unknown field (did you mean priority?)");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c}\nspce: {}\n",
		     "t.yaml:4: spce: unknown field (did you mean spec?)");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c, labelz: {}}\n",
		     "t.yaml:3: metadata.labelz: unknown field (did you mean labels?)");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c}\nspec: {colour: red}\n",
		     "t.yaml:4: spec.colour: unknown field");
	assert_string_equal(err, "t.yaml:4: spec.colour: unknown field"); /* nothing close: no suggestion */
}

static void test_wrong_types_and_missing(void **state)
{
	const char *head = "apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: j}\nspec:\n";
	char text[512];

	(void)state;
	snprintf(text, sizeof(text), "%s  sliceName: ws\n  numberOfGPUNodes: \"2\"\n  exitDuration: 1h\n", head);
	assert_fails(text, "t.yaml:6: spec.numberOfGPUNodes: expected an integer, got the string \"2\"");
	snprintf(text, sizeof(text), "%s  sliceName: ws\n  numberOfGPUNodes: 1\n  exitDuration: 6 hours\n", head);
	assert_fails(text, "t.yaml:7: spec.exitDuration: expected a duration such as 6h");
	snprintf(text, sizeof(text), "%s  sliceName: ws\n  numberOfGPUNodes: 1\n  exitDuration: 1h\n  enableRDMA: yes\n",
		 head);
	assert_fails(text, "t.yaml:8: spec.enableRDMA: expected true or false, got yes");
	snprintf(text, sizeof(text), "%s  sliceName: ws\n  exitDuration: 1h\n", head);
	assert_fails(text, "t.yaml:5: spec.numberOfGPUNodes is required for a GPUProvisioningRequest");
	snprintf(text, sizeof(text), "%s  sliceName: ws\n  numberOfGPUNodes: 1\n  exitDuration: 1h\n  sliceName: x\n",
		 head);
	assert_fails(text, "t.yaml:8: spec.sliceName: duplicate key");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: SliceWorkspace\nmetadata: {name: w}\nspec:\n  clusters: c1\n",
		     "t.yaml:5: spec.clusters: expected a list of names");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: SliceWorkspace\nspec: {clusters: [a]}\n",
		     "t.yaml:1: metadata.name is required");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: SliceWorkspace\nmetadata: {name: w}\n",
		     "t.yaml:1: spec is required for a SliceWorkspace");
	assert_fails("kind: Cluster\nmetadata: {name: c}\n", "t.yaml:1: apiVersion is required");
	assert_fails("apiVersion: v1\nkind: Cluster\nmetadata: {name: c}\n", "t.yaml:1: apiVersion: 'v1' is not an EGS");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: Pod\nmetadata: {name: c}\n", "t.yaml:2: kind: 'Pod' is not one of");
	assert_fails("- just\n- a list\n", "t.yaml:1: a manifest document must be a mapping");
}

static void test_every_bad_document_reported(void **state)
{
	struct egs_manifest m = {0};
	const char *text = "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: a}\nspec: {bogus: 1}\n"
			   "---\n"
			   "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: ok}\n"
			   "---\n"
			   "apiVersion: egs.avesha.io/v1\nkind: Clustr\nmetadata: {name: b}\n";

	(void)state;
	assert_int_equal(parse(&m, text), EGS_ERR_INVALID);
	assert_non_null(strstr(err, "t.yaml:4: spec.bogus: unknown field"));
	assert_non_null(strstr(err, "t.yaml:11: kind: 'Clustr'"));
	assert_int_equal(m.n, 0); /* all of a file or nothing: the good document is not kept either */
	/* Syntax errors carry the line too. */
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: [unclosed\n", "t.yaml:");
	assert_fails("a: b\n  c: d\n", "invalid YAML");
	egs_manifest_cleanup(&m);
}

static void test_policy_and_null_fields(void **state)
{
	struct egs_manifest m = {0};

	(void)state;
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: WorkspacePolicy\nmetadata: {name: team-a}\n"
				   "spec:\n  maxGPRs: 4\n  maxExitDurationPerGPR: 2d\n  priorityRange: {min: 1, max: 200}\n"
				   "  gpuShapes: [NVIDIA-H100-80GB-HBM3]\n  enableAutoEviction: ~\n"),
			 EGS_OK);
	assert_int_equal(m.objs[0].kind, EGS_MANIFEST_POLICY);
	assert_string_equal(json_string_value(json_object_get(m.objs[0].body, "workspaceName")), "team-a");
	assert_string_equal(m.objs[0].name, "team-a");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(m.objs[0].body, "priorityRange"), "max")),
			 200);
	assert_null(json_object_get(m.objs[0].body, "enableAutoEviction")); /* null = not set */
	assert_string_equal(egs_manifest_kind_name(m.objs[0].kind), "WorkspacePolicy");
	assert_string_equal(egs_manifest_kind_short(EGS_MANIFEST_GPR), "gpr");
	egs_manifest_cleanup(&m);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_directory_and_duplicates(void **state)
{
	char dir[] = "/tmp/egs-manifest-XXXXXX", path[256];
	struct egs_manifest m = {0};

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/b.yaml", dir);
	write_file(path, "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c1}\n");
	snprintf(path, sizeof(path), "%s/a.yml", dir);
	write_file(path, "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c0}\n");
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	write_file(path, "not a manifest");
	assert_int_equal(egs_manifest_load(&m, dir, err, sizeof(err)), EGS_OK);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.objs[0].name, "c0"); /* files in name order */
	assert_non_null(strstr(m.objs[1].source, "/b.yaml"));
	/* The same object twice is refused with both places. */
	snprintf(path, sizeof(path), "%s/c.json", dir);
	write_file(path, "{\"apiVersion\": \"egs.avesha.io/v1\", \"kind\": \"Cluster\",\n \"metadata\": {\"name\": \"c1\"}}\n");
	egs_manifest_cleanup(&m);
	assert_int_equal(egs_manifest_load(&m, dir, err, sizeof(err)), EGS_OK);
	assert_int_equal(egs_manifest_finish(&m, err, sizeof(err)), EGS_ERR_INVALID);
	assert_non_null(strstr(err, "c.json:1: Cluster c1 is defined twice (first at "));
	assert_non_null(strstr(err, "b.yaml:1)"));
	egs_manifest_cleanup(&m);
	assert_int_equal(egs_manifest_load(&m, "/nonexistent/x.yaml", err, sizeof(err)), EGS_ERR_IO);
	assert_non_null(strstr(err, "/nonexistent/x.yaml: No such file"));
	for (const char *n = "b.yaml\0a.yml\0notes.txt\0c.json\0"; *n; n += strlen(n) + 1) {
		snprintf(path, sizeof(path), "%s/%s", dir, n);
		unlink(path);
	}
	rmdir(dir);
}

static void test_yaml_load(void **state)
{
	json_t *j = NULL;

	(void)state;
	assert_int_equal(egs_yaml_load("a: 1\nb: [true, ~, '7', 2.5, x]\nc: {d: e}\n", 40, "cfg", &j, err, sizeof(err)),
			 EGS_OK);
	assert_int_equal(json_integer_value(json_object_get(j, "a")), 1);
	assert_true(json_is_true(json_array_get(json_object_get(j, "b"), 0)));
	assert_true(json_is_null(json_array_get(json_object_get(j, "b"), 1)));
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "b"), 2)), "7");
	assert_true(json_is_real(json_array_get(json_object_get(j, "b"), 3)));
	json_decref(j);
	assert_int_equal(egs_yaml_load("", 0, "cfg", &j, err, sizeof(err)), EGS_OK);
	assert_true(json_is_null(j));
	assert_int_equal(egs_yaml_load("a: 1\na: 2\n", 10, "cfg", &j, err, sizeof(err)), EGS_ERR_INVALID);
	assert_null(j);
	assert_string_equal(err, "cfg:2: duplicate key 'a'");
	/* An alias bomb is cut off by the node budget instead of eating memory. */
	const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
			   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
			   "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
	assert_int_equal(egs_yaml_load(bomb, strlen(bomb), "cfg", &j, err, sizeof(err)), EGS_ERR_INVALID);
	assert_non_null(strstr(err, "expands too much"));
}

/* ---- differences ---- */

static void test_gpr_changes(void **state)
{
	struct egs_manifest m = {0};
	json_t *cur, *ch;

	(void)state;
	assert_int_equal(parse(&m, gpr_doc), EGS_OK);
	/* The server's view of the same request: other spellings, same meaning. */
	cur = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:i, s:b, s:[s], s:s, s:b, s:b}", "gprName", "train-llm",
			"sliceName", "team-a", "numberOfGPUNodes", 2, "numberOfGPUs", 8, "memoryPerGpu", 81920,
			"exitDuration", "6h0m0s", "priority", 201, "enableEviction", 1, "preferredClusters", "worker-1",
			"gpuShape", "NVIDIA-H100-80GB-HBM3", "multiNode", 1, "earlyRelease", 0);
	ch = egs_manifest_gpr_changes(&m.objs[0], cur);
	assert_int_equal(json_object_size(ch), 0);
	json_decref(ch);
	json_object_set_new(cur, "priority", json_integer(101));
	json_object_set_new(cur, "exitDuration", json_string("5h0m0s"));
	json_object_set_new(cur, "memoryPerGpu", json_integer(40960));
	ch = egs_manifest_gpr_changes(&m.objs[0], cur);
	assert_int_equal(json_object_size(ch), 3);
	assert_int_equal(json_integer_value(json_object_get(ch, "priority")), 201);
	assert_string_equal(json_string_value(json_object_get(ch, "exitDuration")), "6h");
	assert_int_equal(json_integer_value(json_object_get(ch, "memoryPerGpu")), 80);
	json_decref(ch);
	json_decref(cur);
	egs_manifest_cleanup(&m);
}

static void test_workspace_changes(void **state)
{
	struct egs_manifest m = {0};
	json_t *cur, *ch;
	bool changed;
	char why[200];

	(void)state;
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: SliceWorkspace\nmetadata: {name: w}\nspec:\n"
				   "  clusters: [c1, c2]\n  namespaces: [n1]\n  username: ann\n  email: a@x.io\n"),
			 EGS_OK);
	cur = json_pack("{s:s, s:[s, s], s:[{s:s}, {s:s}], s:[{s:s}], s:s, s:s}", "name", "w", "clusters", "c1", "c3",
			"namespaces", "namespace", "n1", "namespace", "n2", "users", "username", "bob", "projectName",
			"default", "sliceDescription", "");
	ch = egs_manifest_ws_changes(&m.objs[0], cur, &changed, why, sizeof(why));
	assert_true(changed);
	assert_string_equal(json_string_value(json_array_get(json_object_get(ch, "addClusters"), 0)), "c2");
	assert_string_equal(json_string_value(json_array_get(json_object_get(ch, "removeClusters"), 0)), "c3");
	assert_string_equal(json_string_value(json_array_get(json_object_get(ch, "removeNamespaces"), 0)), "n2");
	assert_null(json_object_get(ch, "addNamespaces"));
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(ch, "addUsers"), 0), "email")),
			    "a@x.io");
	json_decref(ch);
	json_decref(cur);
	/* The state the update leads to is no change. */
	cur = json_pack("{s:s, s:[s, s], s:[{s:s}], s:[{s:s}], s:s}", "name", "w", "clusters", "c2", "c1", "namespaces",
			"namespace", "n1", "users", "username", "ann", "projectName", "default");
	ch = egs_manifest_ws_changes(&m.objs[0], cur, &changed, why, sizeof(why));
	assert_false(changed);
	assert_int_equal(json_object_size(ch), 1); /* workspaceName alone */
	json_decref(ch);
	json_decref(cur);
	egs_manifest_cleanup(&m);
}

static void test_policy_differs(void **state)
{
	struct egs_manifest m = {0};
	json_t *cur;

	(void)state;
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: WorkspacePolicy\nmetadata: {name: w}\nspec:\n"
				   "  maxGPRs: 4\n  maxExitDurationPerGPR: 2d\n  gpuShapes: [B, A, B]\n  requeueOnFailure: ~\n"
				   "  softLimits: {maxExitDurationPerGPR: 90m, gpuShapes: []}\n"),
			 EGS_OK);
	/* The server's canonical answer for the same policy. */
	cur = json_pack("{s:s, s:i, s:s, s:[s, s], s:{s:s}}", "workspaceName", "w", "maxGPRs", 4, "maxExitDurationPerGPR",
			"48h0m0s", "gpuShapes", "A", "B", "softLimits", "maxExitDurationPerGPR", "1h30m0s");
	assert_false(egs_manifest_policy_differs(&m.objs[0], cur));
	/* A limit the server has and the manifest leaves out differs: apply replaces the whole policy. */
	json_object_set_new(cur, "concurrentGpuQuota", json_integer(8));
	assert_true(egs_manifest_policy_differs(&m.objs[0], cur));
	json_object_del(cur, "concurrentGpuQuota");
	json_object_set_new(json_object_get(cur, "softLimits"), "maxExitDurationPerGPR", json_string("2h0m0s"));
	assert_true(egs_manifest_policy_differs(&m.objs[0], cur));
	json_decref(cur);
	/* No policy at all: {workspaceName} alone. */
	cur = json_pack("{s:s}", "workspaceName", "w");
	assert_true(egs_manifest_policy_differs(&m.objs[0], cur));
	json_decref(cur);
	egs_manifest_cleanup(&m);
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: WorkspacePolicy\nmetadata: {name: w}\nspec: {}\n"),
			 EGS_OK);
	cur = json_pack("{s:s}", "workspaceName", "w");
	assert_false(egs_manifest_policy_differs(&m.objs[0], cur));
	assert_int_equal(egs_manifest_line(&m.objs[0], "softLimits.maxGPRs"), 1);
	json_decref(cur);
	egs_manifest_cleanup(&m);
}

/* GPR templates and bindings: parsed in apply order, compared by meaning against the server's answers. */
static void test_template_and_binding_differs(void **state)
{
	struct egs_manifest m = {0};
	json_t *cur;

	(void)state;
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: GPRTemplateBinding\nmetadata: {name: ws}\n"
				   "spec:\n  clusters:\n    - {clusterName: c1, templates: [t]}\n"
				   "---\napiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata: {name: t}\nspec:\n"
				   "  clusterName: c1\n  numberOfGPUs: 2\n  numberOfGPUNodes: 1\n  memoryPerGpu: 40\n"
				   "  exitDuration: 90m\n"),
			 EGS_OK);
	assert_int_equal(egs_manifest_finish(&m, err, sizeof(err)), EGS_OK);
	assert_int_equal(m.objs[0].kind, EGS_MANIFEST_TEMPLATE); /* templates go before the bindings naming them */
	assert_string_equal(m.objs[1].name, "ws");
	/* The server's answer for the same template: canonical duration, MiB, defaults filled in. */
	cur = json_pack("{s:s, s:s, s:i, s:i, s:i, s:s, s:s, s:s, s:i, s:b, s:b, s:b, s:s}", "name", "t", "clusterName",
			"c1", "numberOfGPUs", 2, "numberOfGPUNodes", 1, "memoryPerGpu", 40960, "gpuShape", "",
			"instanceType", "", "exitDuration", "1h30m0s", "priority", 101, "enforceIdleTimeOut", 0,
			"enableEviction", 0, "requeueOnFailure", 0, "idleTimeOutDuration", "");
	assert_false(egs_manifest_template_differs(&m.objs[0], cur));
	json_object_set_new(cur, "priority", json_integer(150));
	assert_true(egs_manifest_template_differs(&m.objs[0], cur));
	json_decref(cur);
	cur = json_pack("{s:s, s:[{s:s, s:s, s:[s], s:s, s:{}}], s:b}", "name", "ws", "clusters", "clusterName", "c1",
			"defaultTemplateName", "", "templates", "t", "defaultTemplateStatus", "", "templateStatus",
			"enableAutoGPR", 0);
	assert_false(egs_manifest_binding_differs(&m.objs[1], cur));
	json_object_set_new(cur, "enableAutoGPR", json_true());
	assert_true(egs_manifest_binding_differs(&m.objs[1], cur));
	json_decref(cur);
	egs_manifest_cleanup(&m);
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata: {name: t}\nspec:\n  clusterName: c1\n"
		     "  numberOfGPUs: 1\n  numberOfGPUNodes: 1\n",
		     "spec.exitDuration is required for a GPRTemplate");
	/* a template's fields are a GPR's shape: its required ones in order, no GPR-only field */
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata: {name: t}\nspec:\n  clusterName: c1\n"
		     "  exitDuration: 1h\n",
		     "spec.numberOfGPUs is required for a GPRTemplate");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata: {name: t}\nspec:\n  earlyRelease: true\n",
		     "spec.earlyRelease: unknown field");
	assert_fails("apiVersion: egs.avesha.io/v1\nkind: GPRTemplate\nmetadata: {name: t}\nspec:\n  sliceName: ws\n",
		     "spec.sliceName: unknown field");
	/* a GPR from a template needs only its workspace */
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: GPUProvisioningRequest\nmetadata: {name: g}\n"
				   "spec: {sliceName: ws, templateName: t}\n"),
			 EGS_OK);
	egs_manifest_cleanup(&m);
}

static void test_cluster_changes(void **state)
{
	struct egs_manifest m = {0};
	json_t *cur, *ch;
	char why[200];

	(void)state;
	assert_int_equal(parse(&m, "apiVersion: egs.avesha.io/v1\nkind: Cluster\nmetadata: {name: c}\n"
				   "spec: {apiServer: 'https://a:6443', projectName: p1}\n"),
			 EGS_OK);
	cur = json_pack("{s:s, s:s, s:s}", "clusterName", "c", "apiServer", "https://a:6443", "projectName", "p1");
	assert_null(egs_manifest_cluster_changes(&m.objs[0], cur, why, sizeof(why)));
	assert_string_equal(why, "");
	json_object_set_new(cur, "apiServer", json_string("https://old:6443"));
	ch = egs_manifest_cluster_changes(&m.objs[0], cur, why, sizeof(why));
	assert_string_equal(json_string_value(json_object_get(ch, "apiServer")), "https://a:6443");
	json_decref(ch);
	json_object_set_new(cur, "projectName", json_string("p2"));
	assert_null(egs_manifest_cluster_changes(&m.objs[0], cur, why, sizeof(why)));
	assert_non_null(strstr(why, "cannot move to project p1"));
	json_decref(cur);
	egs_manifest_cleanup(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpr_to_request),
		cmocka_unit_test(test_aliases_of_api_names),
		cmocka_unit_test(test_multi_document),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_wrong_types_and_missing),
		cmocka_unit_test(test_every_bad_document_reported),
		cmocka_unit_test(test_policy_and_null_fields),
		cmocka_unit_test(test_directory_and_duplicates),
		cmocka_unit_test(test_yaml_load),
		cmocka_unit_test(test_gpr_changes),
		cmocka_unit_test(test_workspace_changes),
		cmocka_unit_test(test_cluster_changes),
		cmocka_unit_test(test_policy_differs),
		cmocka_unit_test(test_template_and_binding_differs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
