/*
 * ctl_apply.c: `egsctl apply -f` and `egsctl delete -f`: make the server match YAML manifests.
 *
 * Every file is read and checked before anything is sent, so a typo in the last document changes
 * nothing.  Objects are then applied in dependency order (clusters, workspaces, policies, GPRs) and
 * deleted in the reverse order.  apply is idempotent: an object that already matches is reported
 * "unchanged" and nothing is sent for it.  A failure of one object is reported with the file and
 * line of the field at fault, and the others are still applied (like kubectl); the exit code is that
 * of the first failure.
 *
 * How each kind maps to the API:
 *   Cluster          POST /api/v1/clusters (the agent token is shown once: on stderr, or written to
 *                    --token-dir/NAME.token), PUT when apiServer (or caData) differs.
 *   SliceWorkspace   POST /api/v1/slice-workspace, or PUT with addClusters/removeClusters/addNamespaces/
 *                    removeNamespaces/addUsers/description computed from the current state.
 *   GPUProvisioningRequest  matched on gprName within sliceName among the live GPRs (Pending, Queued,
 *                    Provisioning, Provisioned, Releasing): created when none is live, else the fields
 *                    that differ are PUT while it waits; a provisioned one is left alone with a message.
 *                    earlyRelease: true releases a provisioned one.
 *   WorkspacePolicy  PUT /api/v1/slice-workspace/policy with the whole policy when it differs (by
 *                    meaning) from GET's answer; the PUT replaces the policy, so limits the manifest
 *                    leaves out are cleared.  delete -f sends DELETE.
 *   GPRTemplate, GPRTemplateBinding  POST when GET finds none, else PUT of the whole object when it
 *                    differs by meaning (docs/templates.md); delete -f sends DELETE.  Applied after
 *                    workspaces and before GPRs, which may name a template (spec.templateName).
 */
#include "core/common.h"

#include "client/ctl.h"
#include "client/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

static const char apply_help[] =
	"usage: egsctl apply -f FILE|DIR|- [-f ...] [--wait [--timeout DURATION]] [--token-dir DIR] [--force]\n"
	"\n"
	"Creates or updates what YAML manifests describe (GPUProvisioningRequest, SliceWorkspace,\n"
	"Cluster, WorkspacePolicy, GPRTemplate, GPRTemplateBinding; several documents per file separated\n"
	"by ---).  Applying the same files\n"
	"again changes nothing and reports each object \"unchanged\".  Errors name the file and line.\n"
	"\n"
	"options:\n"
	"  -f, --filename PATH   a manifest file, a directory (*.yaml, *.yml, *.json) or - for stdin\n"
	"  --wait                then wait until every GPR of the manifests is Provisioned, showing progress\n"
	"  --timeout DURATION    bound of --wait for all GPRs together (default 30m)\n"
	"  --token-dir DIR       write a new cluster's agent token to DIR/NAME.token (mode 0600) instead of\n"
	"                        printing it on stderr\n"
	"  --force               remove a workspace's namespaces or clusters even while pods run there (else 409)\n"
	"  -o json|yaml|name     what was done, for scripts ({\"items\": [{kind, name, action, gprId}]})\n"
	"\n"
	"example manifest (docs/egsctl.md has one of each kind):\n"
	"  apiVersion: egs.avesha.io/v1\n"
	"  kind: GPUProvisioningRequest\n"
	"  metadata:\n"
	"    name: train-llm\n"
	"  spec:\n"
	"    sliceName: team-a\n"
	"    numberOfGPUNodes: 1\n"
	"    numberOfGPUs: 8\n"
	"    exitDuration: 6h\n"
	"    priority: 201\n";

/* How long delete -f waits for GPRs it released to leave their workspace before deleting it. */
#define RELEASE_GRACE_S 30.0

/* One run of apply or delete -f. */
struct run {
	struct ctl *c;
	const char *token_dir;
	bool deleting, release, ignore_missing;
	bool force;       /* --force: remove slice namespaces even while pods run in them */
	json_t *results;  /* [{kind, name, action, gprId?, message?}] */
	json_t *clusters; /* GET /api/v1/clusters, fetched once */
	struct egs_vec wait_ids; /* char* (owned): GPRs to wait for */
	bool released;    /* delete -f --release released a GPR: its workspace may need a moment */
	int rc;           /* the first failure */
};

/* Records and prints what happened to o: "gpr/train-llm created (gpr-...)". */
static void report(struct run *r, const struct egs_manifest_obj *o, const char *action, const char *id,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void report(struct run *r, const struct egs_manifest_obj *o, const char *action, const char *id,
		   const char *fmt, ...)
{
	char detail[400] = "";
	va_list ap;
	json_t *item;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	item = json_pack("{s:s, s:s, s:s}", "kind", egs_manifest_kind_name(o->kind), "name", o->name, "action", action);
	if (id)
		json_object_set_new(item, "gprId", json_string(id));
	if (detail[0])
		json_object_set_new(item, "message", json_string(detail));
	json_array_append_new(r->results, item);
	if (r->c->format == CTL_OUT_NAME)
		printf("%s/%s\n", egs_manifest_kind_short(o->kind), o->name);
	else if (r->c->format != CTL_OUT_JSON && r->c->format != CTL_OUT_YAML)
		printf("%s/%s %s%s%s%s\n", egs_manifest_kind_short(o->kind), o->name, action, detail[0] ? " (" : "", detail,
		       detail[0] ? ")" : "");
	fflush(stdout);
}

/* Reports a failure of o at the line of field (the server's error field when it named one). */
static int failed(struct run *r, const struct egs_manifest_obj *o, int code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int failed(struct run *r, const struct egs_manifest_obj *o, int code, const char *field, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_errorf(r->c, code, "%s:%d: %s/%s: %s", o->source, egs_manifest_line(o, field), egs_manifest_kind_short(o->kind),
		   o->name, msg);
	r->rc = r->rc ? r->rc : code;
	return code;
}

/* A failed call for o: transport and credential problems as ctl_fail says them, the rest at a line. */
static int call_failed(struct run *r, const struct egs_manifest_obj *o, enum egs_err err, const char *doing)
{
	struct egs_client *cl = r->c->client;
	int code;

	if ((err == EGS_ERR_IO && egs_client_status(cl) == 0) || err == EGS_ERR_UNAUTHENTICATED || err == EGS_ERR_EXPIRED) {
		code = ctl_fail(r->c, err, doing);
		r->rc = r->rc ? r->rc : code;
		return code;
	}
	return failed(r, o, ctl_exit_of(err), *egs_client_errfield(cl) ? egs_client_errfield(cl) : NULL, "%s: %s%s", doing,
		      egs_client_errmsg(cl),
		      !strcmp(egs_client_errkey(cl), "NAMESPACE_HAS_PODS") ? " (egsctl: add --force)" : "");
}

/* ---- clusters ---- */

/* Writes a new cluster's agent token to DIR/NAME.token (0600); false with errno on failure. */
static bool write_token(const char *dir, const char *name, const char *token, char *path, size_t pathsz)
{
	int fd;
	size_t len = strlen(token);
	bool ok;

	snprintf(path, pathsz, "%s/%s.token", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	ok = write(fd, token, len) == (ssize_t)len && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
	return close(fd) == 0 && ok;
}

static int create_cluster(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *ans = NULL;
	enum egs_err err = egs_client_cluster_register(r->c->client, o->body, &ans);
	const char *token = ctl_str(ans, "agentToken");
	char path[1024];

	if (err)
		return call_failed(r, o, err, "register");
	if (r->token_dir && write_token(r->token_dir, o->name, token, path, sizeof(path))) {
		report(r, o, "created", NULL, "agent token written to %s", path);
	} else {
		if (r->token_dir)
			failed(r, o, CTL_FAILED, NULL, "cannot write the agent token into %s: %s", r->token_dir, strerror(errno));
		report(r, o, "created", NULL, NULL);
		fprintf(stderr, "cluster/%s agent token (shown only now; its egs-agent needs it): %s\n", o->name, token);
	}
	json_decref(ans);
	return CTL_OK;
}

static int apply_cluster(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *cur = NULL, *x, *body;
	enum egs_err err;
	char why[300];
	size_t i;

	if (!r->clusters && (err = egs_client_clusters(r->c->client, &r->clusters)) != EGS_OK)
		return call_failed(r, o, err, "list clusters");
	json_array_foreach(r->clusters, i, x)
		if (!strcmp(ctl_str(x, "clusterName"), o->name))
			cur = x;
	if (!cur)
		return create_cluster(r, o);
	body = egs_manifest_cluster_changes(o, cur, why, sizeof(why));
	if (why[0])
		return failed(r, o, CTL_CONFLICT, "projectName", "%s", why);
	if (!body) {
		report(r, o, "unchanged", NULL, NULL);
		return CTL_OK;
	}
	err = egs_client_cluster_update(r->c->client, body);
	json_decref(body);
	if (err)
		return call_failed(r, o, err, "update");
	report(r, o, "configured", NULL, NULL);
	return CTL_OK;
}

static int missing(struct run *r, const struct egs_manifest_obj *o);
static int deleted(struct run *r, const struct egs_manifest_obj *o, enum egs_err err);

/* ---- workspaces and policies ---- */

/* "addClusters, description" of the changed fields of a PUT body, for the report. */
static void list_keys(json_t *body, const char *skip, char *buf, size_t n)
{
	const char *k;
	json_t *v;
	size_t used = 0;

	buf[0] = '\0';
	json_object_foreach(body, k, v)
		if (strcmp(k, skip) != 0 && used < n)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", k);
}

static int apply_workspace(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *cur = NULL, *body;
	enum egs_err err = egs_client_workspace_get(r->c->client, o->name, &cur);
	char why[300], keys[300];
	bool changed;

	if (err == EGS_ERR_NOT_FOUND) {
		err = egs_client_workspace_create(r->c->client, o->body);
		if (err)
			return call_failed(r, o, err, "create");
		report(r, o, "created", NULL, NULL);
		return CTL_OK;
	}
	if (err)
		return call_failed(r, o, err, "get");
	body = egs_manifest_ws_changes(o, cur, &changed, why, sizeof(why));
	json_decref(cur);
	if (!body)
		return failed(r, o, CTL_CONFLICT, "projectName", "%s", why);
	if (changed && r->force)
		json_object_set_new(body, "force", json_true());
	if (changed && (err = egs_client_workspace_update(r->c->client, body, NULL)) != EGS_OK) {
		json_decref(body);
		return call_failed(r, o, err, "update");
	}
	list_keys(body, "workspaceName", keys, sizeof(keys));
	report(r, o, changed ? "configured" : "unchanged", NULL, changed ? "%s" : NULL, keys);
	json_decref(body);
	return CTL_OK;
}

/* DELETE /api/v1/slice-workspace, with force when --force was given (namespaces with running pods go too). */
static enum egs_err delete_workspace(struct run *r, const char *name)
{
	json_t *body, *data = NULL;
	enum egs_err err;

	if (!r->force)
		return egs_client_workspace_delete(r->c->client, name);
	body = json_pack("{s:s, s:b}", "workspaceName", name, "force", 1);
	err = egs_client_call(r->c->client, "DELETE", "/api/v1/slice-workspace", body, r->c->request_timeout_s, NULL,
			      &data);
	json_decref(body);
	json_decref(data);
	return err;
}

static int apply_policy(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *cur = NULL;
	enum egs_err err = egs_client_policy_get(r->c->client, o->name, &cur);
	bool had;

	if (err == EGS_ERR_NOT_FOUND)
		return failed(r, o, CTL_NOT_FOUND, "workspaceName", "workspace %s does not exist (apply its SliceWorkspace first)",
			      o->name);
	if (err)
		return call_failed(r, o, err, "get");
	had = json_object_size(cur) > 1; /* more than workspaceName: it has a policy */
	if (!egs_manifest_policy_differs(o, cur)) {
		json_decref(cur);
		report(r, o, "unchanged", NULL, NULL);
		return CTL_OK;
	}
	json_decref(cur);
	if ((err = egs_client_policy_set(r->c->client, o->body, NULL)) != EGS_OK)
		return call_failed(r, o, err, "set");
	report(r, o, had ? "configured" : "created", NULL, NULL);
	return CTL_OK;
}

static int delete_policy(struct run *r, const struct egs_manifest_obj *o)
{
	enum egs_err err = egs_client_policy_delete(r->c->client, o->name);

	return deleted(r, o, err); /* not found: no policy, or no workspace at all */
}

/* ---- GPR templates and template bindings ---- */

static int apply_template(struct run *r, const struct egs_manifest_obj *o)
{
	bool binding = o->kind == EGS_MANIFEST_BINDING;
	json_t *cur = NULL;
	enum egs_err err = egs_client_template_get(r->c->client, binding, o->name, &cur);
	bool differs;

	if (err == EGS_ERR_NOT_FOUND) {
		if ((err = egs_client_template_put(r->c->client, binding, true, o->body, NULL)) != EGS_OK)
			return call_failed(r, o, err, "create");
		report(r, o, "created", NULL, NULL);
		return CTL_OK;
	}
	if (err)
		return call_failed(r, o, err, "get");
	differs = binding ? egs_manifest_binding_differs(o, cur) : egs_manifest_template_differs(o, cur);
	json_decref(cur);
	if (differs && (err = egs_client_template_put(r->c->client, binding, false, o->body, NULL)) != EGS_OK)
		return call_failed(r, o, err, "update");
	report(r, o, differs ? "configured" : "unchanged", NULL, NULL);
	return CTL_OK;
}

static int delete_template(struct run *r, const struct egs_manifest_obj *o)
{
	enum egs_err err = egs_client_template_delete(r->c->client, o->kind == EGS_MANIFEST_BINDING, o->name);

	return deleted(r, o, err);
}

/* ---- GPRs ---- */

static bool live_state(const char *s)
{
	return !strcmp(s, "Pending") || !strcmp(s, "Queued") || !strcmp(s, "Provisioning") || !strcmp(s, "Provisioned") ||
	       !strcmp(s, "Releasing");
}

static const char *state_of(json_t *g)
{
	return ctl_str(json_object_get(g, "status"), "provisioningStatus");
}

/* The live GPRs named like o in its workspace (a new array), or NULL after reporting a failure. */
static json_t *live_gprs(struct run *r, const struct egs_manifest_obj *o)
{
	const char *ws = json_string_value(json_object_get(o->body, "sliceName"));
	json_t *items = NULL, *g, *live;
	enum egs_err err = egs_client_gpr_list(r->c->client, ws, NULL, &items);
	size_t i;

	if (err == EGS_ERR_NOT_FOUND && r->deleting)
		return json_array(); /* no workspace, no GPR: delete -f reports it not found */
	if (err == EGS_ERR_NOT_FOUND) {
		failed(r, o, CTL_NOT_FOUND, "sliceName", "workspace %s does not exist (apply its SliceWorkspace first)", ws);
		return NULL;
	}
	if (err) {
		call_failed(r, o, err, "list the GPRs of its workspace");
		return NULL;
	}
	live = json_array();
	json_array_foreach(items, i, g)
		if (!strcmp(ctl_str(g, "gprName"), o->name) && live_state(state_of(g)))
			json_array_append(live, g);
	json_decref(items);
	return live;
}

static void want_wait(struct run *r, const char *id)
{
	egs_vec_push(&r->wait_ids, egs_strdup(id));
}

static int create_gpr(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *body = json_deep_copy(o->body);
	char id[EGS_CLIENT_ID_MAX];
	enum egs_err err;

	if (json_is_true(json_object_get(o->body, "earlyRelease"))) {
		json_decref(body);
		report(r, o, "unchanged", NULL, "earlyRelease: no live GPR of this name to release");
		return CTL_OK;
	}
	json_object_del(body, "earlyRelease");
	err = egs_client_gpr_create(r->c->client, body, id);
	json_decref(body);
	if (err)
		return call_failed(r, o, err, "create");
	report(r, o, "created", id, "%s", id);
	want_wait(r, id);
	return CTL_OK;
}

/* earlyRelease: true on a live GPR: release it once it is provisioned. */
static int release_gpr(struct run *r, const struct egs_manifest_obj *o, json_t *g)
{
	const char *id = ctl_str(g, "gprId"), *st = state_of(g);
	enum egs_err err;

	if (strcmp(st, "Provisioning") != 0 && strcmp(st, "Provisioned") != 0) {
		report(r, o, "unchanged", id, "%s is %s: earlyRelease applies once it is provisioned", id, st);
		return CTL_OK;
	}
	err = egs_client_gpr_release(r->c->client, id);
	if (err)
		return call_failed(r, o, err, "release");
	report(r, o, "released", id, "%s", id);
	return CTL_OK;
}

/* Updates the fields of g that differ from o while g waits; leaves a provisioned one alone. */
static int update_gpr(struct run *r, const struct egs_manifest_obj *o, json_t *g)
{
	const char *id = ctl_str(g, "gprId"), *st = state_of(g);
	json_t *changes = egs_manifest_gpr_changes(o, g);
	bool waiting = !strcmp(st, "Queued") || !strcmp(st, "Pending");
	char keys[300];
	enum egs_err err;

	list_keys(changes, "", keys, sizeof(keys));
	if (json_object_size(changes) == 0)
		report(r, o, "unchanged", id, "%s, %s", id, st);
	else if (!waiting)
		report(r, o, "unchanged", id, "%s is %s: %s not changed; a GPR changes only while it waits", id, st, keys);
	else if ((err = egs_client_gpr_update(r->c->client, id, changes)) != EGS_OK)
		call_failed(r, o, err, "update");
	else
		report(r, o, "configured", id, "%s: %s", id, keys);
	json_decref(changes);
	if (strcmp(st, "Releasing") != 0)
		want_wait(r, id);
	return CTL_OK;
}

static int apply_gpr(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *live = live_gprs(r, o), *g;
	int rc;

	if (!live)
		return r->rc;
	if (json_array_size(live) > 1) {
		rc = failed(r, o, CTL_CONFLICT, "gprName", "%zu live GPRs are named %s in workspace %s (%s, %s, ...); delete the "
			    "extra ones by id first", json_array_size(live), o->name, ctl_str(json_array_get(live, 0), "sliceName"),
			    ctl_str(json_array_get(live, 0), "gprId"), ctl_str(json_array_get(live, 1), "gprId"));
	} else if (json_array_size(live) == 0) {
		rc = create_gpr(r, o);
	} else {
		g = json_array_get(live, 0);
		rc = json_is_true(json_object_get(o->body, "earlyRelease")) ? release_gpr(r, o, g) : update_gpr(r, o, g);
	}
	json_decref(live);
	return rc;
}

/* ---- delete -f ---- */

static int missing(struct run *r, const struct egs_manifest_obj *o)
{
	if (r->ignore_missing) {
		report(r, o, "not found", NULL, NULL);
		return CTL_OK;
	}
	return failed(r, o, CTL_NOT_FOUND, NULL, "not found");
}

/* The outcome of the delete of o that returned err: reported deleted, missing or failed. */
static int deleted(struct run *r, const struct egs_manifest_obj *o, enum egs_err err)
{
	if (err == EGS_ERR_NOT_FOUND)
		return missing(r, o);
	if (err)
		return call_failed(r, o, err, "delete");
	report(r, o, "deleted", NULL, NULL);
	return CTL_OK;
}

static int delete_gpr(struct run *r, const struct egs_manifest_obj *o)
{
	json_t *live = live_gprs(r, o), *g;
	enum egs_err err;
	size_t i;

	if (!live)
		return r->rc;
	if (json_array_size(live) == 0)
		missing(r, o);
	json_array_foreach(live, i, g) {
		const char *id = ctl_str(g, "gprId"), *st = state_of(g);
		bool waiting = !strcmp(st, "Queued") || !strcmp(st, "Pending");
		if (!strcmp(st, "Releasing")) {
			report(r, o, "unchanged", id, "%s is already releasing", id);
			continue;
		}
		if (!waiting && !r->release) {
			failed(r, o, CTL_CONFLICT, NULL, "%s is %s; add --release to give its GPUs back early", id, st);
			continue;
		}
		err = waiting ? egs_client_gpr_cancel(r->c->client, id) : egs_client_gpr_release(r->c->client, id);
		if (err)
			call_failed(r, o, err, waiting ? "cancel" : "release");
		else
			report(r, o, waiting ? "cancelled" : "released", id, "%s", id);
		r->released = r->released || (!err && !waiting);
	}
	json_decref(live);
	return CTL_OK;
}

static int delete_one(struct run *r, const struct egs_manifest_obj *o)
{
	enum egs_err err;

	switch (o->kind) {
	case EGS_MANIFEST_GPR:
		return delete_gpr(r, o);
	case EGS_MANIFEST_POLICY:
		return delete_policy(r, o);
	case EGS_MANIFEST_TEMPLATE:
	case EGS_MANIFEST_BINDING:
		return delete_template(r, o);
	case EGS_MANIFEST_CLUSTER:
		report(r, o, "kept", NULL, "this server has no route to delete a cluster");
		return CTL_OK;
	default:
		err = delete_workspace(r, o->name);
		/* A GPR released just now holds the workspace until its agent has detached the nodes. */
		for (double until = ctl_mono() + RELEASE_GRACE_S; err == EGS_ERR_BUSY && r->released && ctl_mono() < until;) {
			usleep(250 * 1000);
			err = delete_workspace(r, o->name);
		}
		return deleted(r, o, err);
	}
}

static int apply_one(struct run *r, const struct egs_manifest_obj *o)
{
	switch (o->kind) {
	case EGS_MANIFEST_CLUSTER:
		return apply_cluster(r, o);
	case EGS_MANIFEST_WORKSPACE:
		return apply_workspace(r, o);
	case EGS_MANIFEST_POLICY:
		return apply_policy(r, o);
	case EGS_MANIFEST_TEMPLATE:
	case EGS_MANIFEST_BINDING:
		return apply_template(r, o);
	default:
		return apply_gpr(r, o);
	}
}

/* ---- the runs ---- */

/* Reads and checks every file; prints every problem.  CTL_OK or CTL_USAGE. */
static int load_all(struct ctl *c, const char *const *files, struct egs_manifest *m)
{
	char err[8192];
	int rc = CTL_OK;

	for (size_t i = 0; files[i]; i++)
		if (egs_manifest_load(m, files[i], err, sizeof(err)) != EGS_OK)
			rc = ctl_usage(c, "%s", err);
	if (rc == CTL_OK && egs_manifest_finish(m, err, sizeof(err)) != EGS_OK)
		rc = ctl_usage(c, "%s", err);
	if (rc == CTL_OK && m->n == 0)
		rc = ctl_usage(c, "no objects in the given manifests");
	if (rc != CTL_OK)
		fprintf(stderr, "egsctl %s: nothing was changed\n", c->cmd);
	return rc;
}

static void run_cleanup(struct run *r)
{
	json_decref(r->results);
	json_decref(r->clusters);
	for (size_t i = 0; i < r->wait_ids.len; i++)
		egs_free(r->wait_ids.items[i]);
	egs_vec_cleanup(&r->wait_ids);
}

/* Runs apply (or delete) over the files; then --wait; returns the first failure's code. */
static int run_files(struct run *r, const char *const *files, const char *timeout)
{
	struct egs_manifest m = {0};
	int64_t secs = 1800;
	double deadline;
	int rc = load_all(r->c, files, &m);

	if (rc == CTL_OK && timeout && !ctl_duration(r->c, "--timeout", timeout, &secs))
		rc = CTL_USAGE;
	if (rc == CTL_OK && !ctl_client(r->c, &rc))
		goto out;
	for (size_t i = 0; rc == CTL_OK && i < m.n; i++) {
		if (r->deleting)
			delete_one(r, &m.objs[m.n - 1 - i]);
		else
			apply_one(r, &m.objs[i]);
	}
	if (rc == CTL_OK && r->results) {
		json_t *wrap = json_pack("{s:O}", "items", r->results);
		ctl_print_data(r->c, wrap);
		json_decref(wrap);
	}
	rc = rc ? rc : r->rc;
	deadline = ctl_mono() + (double)secs;
	for (size_t i = 0; rc == CTL_OK && timeout != NULL && i < r->wait_ids.len; i++)
		rc = ctl_wait_gpr(r->c, r->wait_ids.items[i], "Provisioned", secs, deadline);
out:
	egs_manifest_cleanup(&m);
	return rc;
}

int ctl_cmd_apply(struct ctl *c, int argc, char **argv)
{
	struct ctl_list files = {0};
	struct run r = {.c = c};
	const char *timeout = NULL, *pos[1];
	bool wait = false, help;
	const struct ctl_opt opts[] = {{"filename", 'f', NULL, NULL, &files}, {"wait", 0, NULL, &wait, NULL},
				       {"timeout", 0, &timeout, NULL, NULL}, {"token-dir", 0, &r.token_dir, NULL, NULL},
				       {"force", 0, NULL, &r.force, NULL}, {NULL, 0, NULL, NULL, NULL}};
	int npos, rc;

	rc = ctl_args(c, argc, argv, 1, opts, pos, 0, &npos, &help);
	if (rc || help) {
		return ctl_help(rc, help, apply_help);
	}
	if (files.n == 0)
		return ctl_usage(c, "-f FILE|DIR|- is required (see --help)");
	rc = ctl_check_format(c, 1u << CTL_OUT_TABLE | 1u << CTL_OUT_NAME | 1u << CTL_OUT_JSON | 1u << CTL_OUT_YAML);
	if (rc)
		return rc;
	if (timeout && !wait)
		return ctl_usage(c, "--timeout bounds --wait; add --wait");
	files.v[files.n] = NULL;
	r.results = json_array();
	rc = run_files(&r, files.v, wait ? (timeout ? timeout : "30m") : NULL);
	run_cleanup(&r);
	return rc;
}

int ctl_delete_files(struct ctl *c, const char *const *files, bool release, bool ignore_missing, bool force)
{
	struct run r = {.c = c, .deleting = true, .release = release, .ignore_missing = ignore_missing, .force = force,
			.results = json_array()};
	int rc = run_files(&r, files, NULL);

	run_cleanup(&r);
	return rc;
}
