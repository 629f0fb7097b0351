/*
 * manifest.h: YAML manifests (kubectl style) turned into EGS API requests, for `egsctl apply -f`
 * and any other libegs user that drives EGS from files.
 *
 * A manifest file holds one or more YAML documents ("---" between them), each one object:
 *
 *     apiVersion: egs.avesha.io/v1
 *     kind: GPUProvisioningRequest        # or SliceWorkspace, Cluster, WorkspacePolicy, GPRTemplate,
 *                                         # GPRTemplateBinding
 *     metadata: {name: train-llm}
 *     spec: {sliceName: team-a, numberOfGPUNodes: 1, exitDuration: 6h, ...}
 *
 * Spec fields carry the names of ../shared/reference/egs-api.md.  Parsing is strict: an unknown field,
 * a value of the wrong type, a duplicate key or object, or a missing required field is an error that
 * names the source and the line ("ws.yaml:12: spec.priorty: unknown field (did you mean priority?)").
 * Each object keeps the line of every field it sends, so that a server's 422 naming a field can be
 * pointed back at the manifest.
 *
 * Ownership: a struct egs_manifest owns its objects and everything in them.
 */
#ifndef EGS_CLIENT_MANIFEST_H
#define EGS_CLIENT_MANIFEST_H

#include <egs/egs.h>
#include <stddef.h>

/* In apply order: what an object needs exists before it (a workspace names clusters, a GPR a workspace). */
enum egs_manifest_kind {
	EGS_MANIFEST_CLUSTER,
	EGS_MANIFEST_WORKSPACE,
	EGS_MANIFEST_POLICY,
	EGS_MANIFEST_TEMPLATE, /* GPRTemplate: names a cluster */
	EGS_MANIFEST_BINDING,  /* GPRTemplateBinding: names a workspace and templates */
	EGS_MANIFEST_GPR,      /* may name a template */
};

struct egs_manifest_obj {
	enum egs_manifest_kind kind;
	char *name;    /* the object's key: clusterName, workspaceName, gprName, or the policy's workspaceName */
	char *source;  /* the file it came from ("<stdin>" for -) */
	int line;      /* 1-based line where the document's object starts */
	json_t *body;  /* the create request with wire field names (sliceName, numberOfGPUs, ...) */
	json_t *lines; /* wire field name -> 1-based line of that field in source */
};

struct egs_manifest {
	struct egs_manifest_obj *objs;
	size_t n, cap;
};

/* A zero-initialised struct egs_manifest is empty too; _init exists for symmetry. */
void egs_manifest_init(struct egs_manifest *m);
/* Frees every object; m is empty (and reusable) afterwards. */
void egs_manifest_cleanup(struct egs_manifest *m);

/*
 * Parses text (len bytes, one or more YAML documents; JSON is YAML too) named source and appends its
 * objects to m.  Empty documents are skipped.  On failure appends nothing and writes one line per
 * problem ("source:line: message", at most errsz bytes, documents after a bad one are still checked)
 * into err; returns EGS_ERR_INVALID.  Borrowed: text and source.
 */
enum egs_err egs_manifest_parse(struct egs_manifest *m, const char *text, size_t len, const char *source, char *err,
				size_t errsz);

/*
 * Loads path into m: a file, every *.yaml, *.yml and *.json of a directory (sorted by name, not
 * recursive), or "-" for standard input.  Returns EGS_ERR_IO (err says which file and why) when a
 * file cannot be read or is larger than 16 MiB, EGS_ERR_INVALID for bad content (as egs_manifest_parse).
 */
enum egs_err egs_manifest_load(struct egs_manifest *m, const char *path, char *err, size_t errsz);

/*
 * Checks the objects of m together: the same object (kind and name; for GPRs workspace and name)
 * defined twice is an error naming both places.  Then sorts m into apply order (by kind, stable).
 * Returns EGS_ERR_INVALID with the lines in err, or EGS_OK.
 */
enum egs_err egs_manifest_finish(struct egs_manifest *m, char *err, size_t errsz);

/* The line of wire field `field` in o (for "a.b", of a when o has no line for a.b), or o->line when o
 * does not set it (field may be NULL). */
int egs_manifest_line(const struct egs_manifest_obj *o, const char *field);

/* "GPUProvisioningRequest", "SliceWorkspace", "Cluster", "WorkspacePolicy", "GPRTemplate",
 * "GPRTemplateBinding"; and short names for messages ("gpr", "workspace", "cluster",
 * "workspacepolicy", "gprtemplate", "gprtemplatebinding"). */
const char *egs_manifest_kind_name(enum egs_manifest_kind k);
const char *egs_manifest_kind_short(enum egs_manifest_kind k);

/*
 * Loads one YAML document (a config file, say) as JSON: mappings become objects, sequences arrays,
 * plain scalars integers, reals, booleans or null when they look like one, everything else strings.
 * *out is a new reference (caller frees), JSON null for an empty text.  On failure writes
 * "source:line: message" into err and returns EGS_ERR_INVALID.
 */
enum egs_err egs_yaml_load(const char *text, size_t len, const char *source, json_t **out, char *err, size_t errsz);

/* ---- what apply changes (manifest_diff.c) ---- */

/*
 * The PUT /api/v1/gpr fields of GPR manifest o that differ from current (a GET /api/v1/gpr answer),
 * compared by meaning (exitDuration "6h" equals "6h0m0s"; memoryPerGpu 80 equals 81920).  Fields the
 * manifest leaves out are not compared; earlyRelease is not a change (apply handles it).  Returns a
 * new object (caller frees), empty when nothing differs.
 */
json_t *egs_manifest_gpr_changes(const struct egs_manifest_obj *o, json_t *current);

/*
 * The PUT /api/v1/slice-workspace body turning current (a GET ?workspaceName= answer) into workspace
 * manifest o: {workspaceName, addClusters, removeClusters, addNamespaces, removeNamespaces, addUsers,
 * description} with only what differs; namespaces and users are compared only when o gives them.
 * Sets *changed.  Returns NULL (and a message in why) when o asks for what an update cannot do
 * (another projectName).  Caller frees.
 */
json_t *egs_manifest_ws_changes(const struct egs_manifest_obj *o, json_t *current, bool *changed, char *why,
				size_t whysz);

/*
 * Whether the policy that workspace policy manifest o describes differs from current (a GET
 * /api/v1/slice-workspace/policy answer).  Apply PUTs the whole policy, so every limit counts: one
 * the manifest leaves out but current sets differs.  Compared by meaning: durations as seconds
 * ("6h" equals "6h0m0s"), gpuShapes as a set, null as absent, an empty softLimits or gpuShapes as
 * none.
 */
bool egs_manifest_policy_differs(const struct egs_manifest_obj *o, json_t *current);

/*
 * Whether GPR template manifest o (or template binding manifest o) differs from current (a GET answer
 * of its kind).  A template is compared field by field by meaning (durations as seconds, memory as
 * MiB, a field the manifest leaves out as the server's default); a binding by its clusters (each
 * {clusterName, defaultTemplateName, templates}) and enableAutoGPR.
 */
bool egs_manifest_template_differs(const struct egs_manifest_obj *o, json_t *current);
bool egs_manifest_binding_differs(const struct egs_manifest_obj *o, json_t *current);

/*
 * The PUT /api/v1/clusters body for cluster manifest o against current (one item of GET
 * /api/v1/clusters), or NULL when nothing that the server shows differs.  *why is set and NULL
 * returned for a projectName change (not possible).  Caller frees.
 */
json_t *egs_manifest_cluster_changes(const struct egs_manifest_obj *o, json_t *current, char *why, size_t whysz);

#endif
