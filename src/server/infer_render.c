/*
 * infer_render.c: the Kubernetes objects of an inference endpoint (inference.h), rendered by egsd when
 * the endpoint is created, so that what the agent applies is decided, validated and stored in one place.
 *
 * Pinning follows how the agent attaches nodes (docs/kubernetes.md, "Labels, taints, annotations"): a
 * GPR's nodes carry the label kubeslice.io/gpr=<GPR id> and the taint kubeslice.io/egs=dedicated-node:
 * NoSchedule, so every pod template gets that nodeSelector and the toleration.  Nothing here does I/O.
 */
#include "server/inference.h"

#include "client/manifest.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ARGS_MAX 64
#define TEXT_MAX 2048 /* an arg, a storageURI */
#define SERVER_PORT 8080

/* The model server image of each modelName (a KServe-style runtime; docs/kubernetes.md). */
static const struct {
	const char *model, *image;
} runtimes[] = {
	{ "huggingface", "kserve/huggingfaceserver:v0.14.1" },
	{ "vllm", "vllm/vllm-openai:v0.6.4" },
	{ "triton", "nvcr.io/nvidia/tritonserver:24.08-py3" },
	{ "pytorch", "pytorch/torchserve-kfs:0.9.0-gpu" },
	{ "tensorflow", "tensorflow/serving:2.14.1-gpu" },
	{ "sklearn", "kserve/sklearnserver:v0.14.1" },
	{ "xgboost", "kserve/xgbserver:v0.14.1" },
	{ "lightgbm", "kserve/lgbserver:v0.14.1" },
};

/* The kinds a rawModelSpec may hold: namespaced ones a slice user may create (the egs-slice-user role),
 * and that the agent's ClusterRole lets it create.  No bare Pods: the agent may not create pods. */
static const struct {
	const char *api_version, *kind;
	bool pod_template; /* spec.template.spec is a pod spec */
} kinds[] = {
	{ "apps/v1", "Deployment", true }, { "apps/v1", "StatefulSet", true },
	{ "v1", "Service", false },        { "v1", "ConfigMap", false },
};

/* A Kubernetes quantity: digits, an optional fraction, an optional suffix ("500m", "2", "16Gi", "1.5"). */
static bool quantity_valid(const char *s)
{
	static const char *const suffixes[] = { "", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti" };
	size_t i = 0, digits = 0;

	while (s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (s[i] == '.') {
		i++;
		while (s[i] >= '0' && s[i] <= '9')
			i++, digits++;
	}
	if (!digits || i > 20)
		return false;
	for (size_t k = 0; k < EGS_ARRAY_LEN(suffixes); k++)
		if (!strcmp(s + i, suffixes[k]))
			return true;
	return false;
}

static void url_of(const char *svc, const char *ns, char *url, size_t urlsz)
{
	snprintf(url, urlsz, "http://%s.%s.svc.cluster.local", svc, ns);
}

/* Pins pod spec ps (borrowed) to the GPR's nodes: its nodeSelector and the toleration of the EGS taint. */
static void pin(json_t *ps, const char *gpr_id)
{
	json_t *sel = json_object_get(ps, "nodeSelector"), *tol = json_object_get(ps, "tolerations");

	if (!*gpr_id)
		return;
	if (!json_is_object(sel)) {
		sel = json_object();
		json_object_set_new(ps, "nodeSelector", sel);
	}
	json_object_set_new(sel, "kubeslice.io/gpr", json_string(gpr_id));
	if (!json_is_array(tol)) {
		tol = json_array();
		json_object_set_new(ps, "tolerations", tol);
	}
	json_array_append_new(tol, json_pack("{s:s, s:s, s:s, s:s}", "key", "kubeslice.io/egs", "operator", "Equal",
					     "value", "dedicated-node", "effect", "NoSchedule"));
}

/* metadata of an object named name in t's namespace, labelled for t. */
static json_t *meta(const struct egs_infer_target *t, const char *name)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "name", name, "namespace", t->namespace, "labels",
			 EGS_INFER_LABEL, t->name, "app.kubernetes.io/name", t->name, "egs.kubeslice.io/created-by",
			 "egs-agent");
}

/* ---- the standard model server ---- */

struct model {
	const char *image, *storage_uri, *secret;
	json_t *args, *requests; /* new references */
};

static bool bad(struct egs_req *r, const char *field, const char *why)
{
	egs_reply_invalid(r, field, "%s %s", field, why);
	return false;
}

static bool parse_model(struct egs_req *r, json_t *ms, struct model *m)
{
	const char *model = json_string_value(json_object_get(ms, "modelName"));
	json_t *args = json_object_get(ms, "args"), *res = json_object_get(ms, "resources"), *v;
	json_t *secret = json_object_get(ms, "secret");
	size_t i;

	if (!model || !*model)
		return bad(r, "modelSpec.modelName", "is required (the model format: huggingface, vllm, triton, ...)");
	for (i = 0; i < EGS_ARRAY_LEN(runtimes) && strcmp(runtimes[i].model, model) != 0; i++)
		;
	if (i == EGS_ARRAY_LEN(runtimes))
		return bad(r, "modelSpec.modelName", "is not a known model format (huggingface, vllm, triton, pytorch, "
						     "tensorflow, sklearn, xgboost, lightgbm)");
	m->image = runtimes[i].image;
	m->storage_uri = json_string_value(json_object_get(ms, "storageURI"));
	if (!m->storage_uri || !*m->storage_uri || strlen(m->storage_uri) > TEXT_MAX)
		return bad(r, "modelSpec.storageURI", "is required (where the model is: s3://, gs://, hf://, pvc://, ...)");
	if (!egs_check_text(r, "modelSpec.storageURI", m->storage_uri))
		return false;
	m->args = json_array();
	if (args && !json_is_null(args)) {
		if (!json_is_array(args) || json_array_size(args) > ARGS_MAX)
			return bad(r, "modelSpec.args", "must be a list of at most 64 strings");
		json_array_foreach(args, i, v) {
			if (!json_is_string(v) || json_string_length(v) > TEXT_MAX)
				return bad(r, "modelSpec.args", "must be a list of strings of at most 2048 bytes");
			if (!egs_check_text(r, "modelSpec.args", json_string_value(v)))
				return false;
			json_array_append(m->args, v);
		}
	}
	m->secret = NULL;
	if (secret && !json_is_null(secret)) {
		const char *name = json_string_value(json_object_get(secret, "name"));
		if (!json_is_object(secret) || json_object_size(secret) != 1 || !name || !egs_dns_subdomain_valid(name))
			return bad(r, "modelSpec.secret", "must be {\"name\": <a Secret in the slice's namespace>} "
							  "(egsd does not store secret values)");
		m->secret = name;
	}
	m->requests = json_object();
	if (res && !json_is_null(res)) {
		const char *key;
		if (!json_is_object(res))
			return bad(r, "modelSpec.resources", "must be {\"cpu\", \"memory\"}");
		json_object_foreach(res, key, v) {
			if (strcmp(key, "cpu") != 0 && strcmp(key, "memory") != 0)
				return bad(r, "modelSpec.resources", "may hold only cpu and memory");
			if (json_is_null(v))
				continue;
			if (!json_is_string(v) || !quantity_valid(json_string_value(v)))
				return bad(r, !strcmp(key, "cpu") ? "modelSpec.resources.cpu" : "modelSpec.resources.memory",
					   "must be a Kubernetes quantity (\"2\", \"500m\", \"16Gi\")");
			json_object_set(m->requests, key, v);
		}
	}
	return true;
}

static json_t *standard_container(const struct egs_infer_target *t, const struct model *m)
{
	json_t *limits = json_deep_copy(m->requests);
	json_t *c;

	if (t->gpus > 0)
		json_object_set_new(limits, "nvidia.com/gpu", json_integer(t->gpus));
	c = json_pack("{s:s, s:s, s:O, s:[{s:s, s:s}, {s:s, s:s}], s:[{s:s, s:i, s:s}], s:{s:O, s:o}}", "name",
		      "kserve-container", "image", m->image, "args", m->args, "env", "name", "STORAGE_URI", "value",
		      m->storage_uri, "name", "MODEL_NAME", "value", t->name, "ports", "name", "http", "containerPort",
		      SERVER_PORT, "protocol", "TCP", "resources", "requests", m->requests, "limits", limits);
	EGS_ASSERT(c);
	if (m->secret)
		json_object_set_new(c, "envFrom", json_pack("[{s:{s:s}}]", "secretRef", "name", m->secret));
	return c;
}

json_t *egs_infer_render_standard(struct egs_req *r, const struct egs_infer_target *t, json_t *model_spec,
				  char *url, size_t urlsz)
{
	struct model m = { 0 };
	json_t *out = NULL, *dep, *svc, *ps;

	if (!json_is_object(model_spec)) {
		bad(r, "modelSpec", "must be an object");
		goto out;
	}
	if (!parse_model(r, model_spec, &m))
		goto out;
	ps = json_pack("{s:[o]}", "containers", standard_container(t, &m));
	pin(ps, t->gpr_id);
	dep = json_pack("{s:s, s:s, s:o, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s, s:s}}, s:o}}}", "apiVersion", "apps/v1",
			"kind", "Deployment", "metadata", meta(t, t->name), "spec", "replicas", t->replicas > 0 ? t->replicas : 1,
			"selector", "matchLabels", EGS_INFER_LABEL, t->name, "template", "metadata", "labels",
			EGS_INFER_LABEL, t->name, "app.kubernetes.io/name", t->name, "spec", ps);
	svc = json_pack("{s:s, s:s, s:o, s:{s:{s:s}, s:[{s:s, s:i, s:i, s:s}]}}", "apiVersion", "v1", "kind", "Service",
			"metadata", meta(t, t->name), "spec", "selector", EGS_INFER_LABEL, t->name, "ports", "name", "http",
			"port", 80, "targetPort", SERVER_PORT, "protocol", "TCP");
	EGS_ASSERT(dep && svc);
	out = json_pack("[o, o]", dep, svc);
	url_of(t->name, t->namespace, url, urlsz);
out:
	json_decref(m.args);
	json_decref(m.requests);
	return out;
}

/* ---- the user's manifests ---- */

static bool raw_bad(struct egs_req *r, size_t i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool raw_bad(struct egs_req *r, size_t i, const char *fmt, ...)
{
	char why[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	egs_reply_invalid(r, "rawModelSpec", "rawModelSpec: object %zu: %s", i + 1, why);
	return false;
}

/* Refuses what a pod spec may not do here: the host's namespaces and paths. */
static bool pod_spec_ok(struct egs_req *r, size_t i, json_t *ps)
{
	static const char *const host[] = { "hostNetwork", "hostPID", "hostIPC" };
	json_t *v;
	size_t k;

	if (!json_is_object(ps) || !json_is_array(json_object_get(ps, "containers")) ||
	    !json_array_size(json_object_get(ps, "containers")))
		return raw_bad(r, i, "%s", "a pod spec needs containers");
	for (k = 0; k < EGS_ARRAY_LEN(host); k++)
		if (json_is_true(json_object_get(ps, host[k])))
			return raw_bad(r, i, "%s may not be set", host[k]);
	json_array_foreach(json_object_get(ps, "volumes"), k, v)
		if (json_object_get(v, "hostPath"))
			return raw_bad(r, i, "%s", "hostPath volumes are not allowed");
	return true;
}

/* Checks and shapes object i (borrowed) for t; false after replying 422. */
static bool raw_object(struct egs_req *r, const struct egs_infer_target *t, size_t i, json_t *o, char *url,
		       size_t urlsz)
{
	const char *av = json_string_value(json_object_get(o, "apiVersion"));
	const char *kind = json_string_value(json_object_get(o, "kind"));
	json_t *md = json_object_get(o, "metadata"), *labels, *ps = NULL;
	const char *name = json_string_value(json_object_get(md, "name"));
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	size_t k;

	if (!json_is_object(o) || !av || !kind)
		return raw_bad(r, i, "%s", "every object needs apiVersion and kind");
	for (k = 0; k < EGS_ARRAY_LEN(kinds) && (strcmp(kinds[k].api_version, av) || strcmp(kinds[k].kind, kind)); k++)
		;
	if (k == EGS_ARRAY_LEN(kinds))
		return raw_bad(r, i, "kind %s is not one an endpoint may hold (apps/v1 Deployment, StatefulSet; v1 "
				     "Service, ConfigMap)", kind);
	if (!name || !egs_dns_subdomain_valid(name))
		return raw_bad(r, i, "%s", "metadata.name must be a Kubernetes object name (RFC 1123 subdomain)");
	if (!strcmp(kind, "Service") && !egs_dns_label_valid(name, &(const char *){ NULL }))
		return raw_bad(r, i, "Service %s: a Service's name must be an RFC 1035 label", name);
	if (ns && strcmp(ns, t->namespace) != 0)
		return raw_bad(r, i, "metadata.namespace must be the slice's namespace (%s) or left out", t->namespace);
	json_object_set_new(md, "namespace", json_string(t->namespace));
	json_object_del(md, "generateName");
	json_object_del(md, "ownerReferences");
	labels = json_object_get(md, "labels");
	if (!json_is_object(labels)) {
		labels = json_object();
		json_object_set_new(md, "labels", labels);
	}
	json_object_set_new(labels, EGS_INFER_LABEL, json_string(t->name));
	json_object_set_new(labels, "egs.kubeslice.io/created-by", json_string("egs-agent"));
	if (kinds[k].pod_template)
		ps = json_object_get(json_object_get(json_object_get(o, "spec"), "template"), "spec");
	if (kinds[k].pod_template && !pod_spec_ok(r, i, ps))
		return false;
	if (ps)
		pin(ps, t->gpr_id);
	if (!strcmp(kind, "Service") && !*url)
		url_of(name, t->namespace, url, urlsz);
	return true;
}

/* Appends the objects of one YAML document (an object, a List, or nothing) to all; false on a parse error. */
static bool raw_document(struct egs_req *r, const char *text, size_t len, json_t *all)
{
	char err[300];
	json_t *doc = NULL, *it;
	size_t i;

	if (egs_yaml_load(text, len, "rawModelSpec", &doc, err, sizeof(err)) != EGS_OK) {
		egs_reply_invalid(r, "rawModelSpec", "rawModelSpec is not valid YAML or JSON: %s", err);
		return false;
	}
	if (json_is_object(doc) && json_is_array(json_object_get(doc, "items")) &&
	    !strcmp(json_string_value(json_object_get(doc, "kind")) ? json_string_value(json_object_get(doc, "kind")) : "",
		    "List")) {
		json_array_foreach(json_object_get(doc, "items"), i, it)
			json_array_append(all, it);
	} else if (!json_is_null(doc)) {
		json_array_append(all, doc);
	}
	json_decref(doc);
	return true;
}

/* The start of the next line after p (or end). */
static const char *next_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl + 1 : end;
}

/* Whether the line at p is a document separator ("---" and blanks). */
static bool separator(const char *p, const char *end)
{
	if (end - p < 3 || memcmp(p, "---", 3) != 0)
		return false;
	for (p += 3; p < end && *p != '\n'; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r')
			return false;
	return true;
}

json_t *egs_infer_render_raw(struct egs_req *r, const struct egs_infer_target *t, const char *raw, char *url,
			     size_t urlsz)
{
	const char *end = raw + strlen(raw), *doc = raw, *p = raw;
	json_t *all = json_array(), *o;
	size_t i;

	*url = '\0';
	if ((size_t)(end - raw) > EGS_INFER_RAW_MAX) {
		egs_reply_invalid(r, "rawModelSpec", "rawModelSpec may be at most %d bytes", EGS_INFER_RAW_MAX);
		goto fail;
	}
	for (;;) { /* documents separated by "---" lines */
		bool last = p >= end;
		if (last || separator(p, end)) {
			if (!raw_document(r, doc, (size_t)(p - doc), all))
				goto fail;
			if (last)
				break;
			p = doc = next_line(p, end);
			continue;
		}
		p = next_line(p, end);
	}
	if (!json_array_size(all) || json_array_size(all) > EGS_INFER_MAX_OBJECTS) {
		egs_reply_invalid(r, "rawModelSpec", "rawModelSpec must hold 1 to %d Kubernetes objects (it holds %zu)",
				  EGS_INFER_MAX_OBJECTS, json_array_size(all));
		goto fail;
	}
	json_array_foreach(all, i, o) {
		if (!raw_object(r, t, i, o, url, urlsz))
			goto fail;
		for (size_t j = 0; j < i; j++) {
			json_t *q = json_array_get(all, j);
			if (json_equal(json_object_get(q, "kind"), json_object_get(o, "kind")) &&
			    json_equal(json_object_get(json_object_get(q, "metadata"), "name"),
				       json_object_get(json_object_get(o, "metadata"), "name"))) {
				raw_bad(r, i, "%s", "the same kind and name twice");
				goto fail;
			}
		}
	}
	return all;
fail:
	json_decref(all);
	return NULL;
}

/* ---- status ---- */

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

bool egs_infer_wanted(const struct egs_state *st, json_t *spec)
{
	const char *gid = str_at(spec, "gprId");
	const struct egs_gpr *g = *gid ? egs_state_gpr(st, gid) : NULL;

	if (json_is_true(json_object_get(spec, "deleting")))
		return false;
	return !*gid || (g && g->state == EGS_GPR_PROVISIONED);
}

/* The cluster's agent has not called for longer than the heartbeat timeout.  One that has not called
 * since egsd started counts from the start (held_settle is the start plus that timeout). */
static bool agent_gone(const struct egs_state *st, const char *cluster, int64_t now)
{
	const struct egs_cluster *c = egs_state_cluster(st, cluster);

	if (!c)
		return true;
	if (c->last_seen)
		return now - c->last_seen > st->cfg.heartbeat_timeout_s;
	return now > st->held_settle;
}

/* The GPR no longer holds or waits for nodes (or there is none). */
static bool gpr_ended(const struct egs_gpr *g)
{
	return !g || (g->state != EGS_GPR_PENDING && g->state != EGS_GPR_QUEUED && g->state != EGS_GPR_PROVISIONING &&
		      g->state != EGS_GPR_PROVISIONED);
}

const char *egs_infer_status(const struct egs_state *st, json_t *spec, int64_t now)
{
	json_t *obs = json_object_get(spec, "observed");
	const char *gid = str_at(spec, "gprId");
	const struct egs_gpr *g = *gid ? egs_state_gpr(st, gid) : NULL;
	bool ready = json_is_true(json_object_get(obs, "ready"));

	if (json_is_true(json_object_get(spec, "deleting")))
		return gpr_ended(g) && agent_gone(st, str_at(spec, "cluster"), now) ? "Released" : "Deleting";
	if (*gid && !g)
		return "Released"; /* finished and gone from memory */
	if (g) {
		switch (g->state) {
		case EGS_GPR_PENDING:
		case EGS_GPR_QUEUED: return "Queued";
		case EGS_GPR_PROVISIONING: return "Provisioning";
		case EGS_GPR_PROVISIONED: break;
		case EGS_GPR_REJECTED:
		case EGS_GPR_ERROR: return "Failed";
		default: return "Released";
		}
	}
	if (*str_at(obs, "message"))
		return "Failed";
	return ready && json_is_true(json_object_get(obs, "present")) ? "Ready" : "Provisioning";
}
