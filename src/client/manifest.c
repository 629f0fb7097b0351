/*
 * manifest.c: YAML manifests into EGS API requests (see manifest.h), over libyaml's document API.
 *
 * Each kind has a table of its spec fields (manifest key, wire name, type).  A document is checked
 * against it key by key, so every error has the line of the key or value at fault; the request body
 * is built as we go, along with the line of every wire field.  A bad document adds nothing to the
 * manifest, and parsing goes on with the next document so one run reports every bad document.
 *
 * Bounds: 64 levels of nesting, 100,000 converted nodes per
 * document (aliases can multiply a small text into a huge tree), 32 reported errors.
 */
#include "core/common.h"
#include "core/util.h"

#include "client/manifest.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_NODES 100000
#define MAX_ERRORS 32

enum ftype { T_STR, T_INT, T_BOOL, T_LIST, T_DUR, T_ANY };

struct field {
	const char *key;  /* in the manifest's spec */
	const char *wire; /* in the API request */
	enum ftype type;
	unsigned flags; /* F_* */
};

enum {
	F_REQUIRED = 1u << 0, /* in its kind's spec */
	F_TMPL = 1u << 1,     /* gpr_fields only: in a GPRTemplate's spec too... */
	F_TMPL_REQ = 1u << 2, /* ...and required there */
};

struct kind_def {
	const char *kind;
	const char *short_name;
	const char *name_wire; /* the wire field that metadata.name fills */
	bool spec_required;
	const struct field *fields;
	bool tmpl; /* its fields are the rows of fields with F_TMPL (a template is a GPR's shape) */
};

/* A GPR's spec; the rows with F_TMPL are a GPR template's too (docs/templates.md; the server checks
 * a binding's clusters), in the same order, so a template that lacks several required fields is told
 * of the first of clusterName, numberOfGPUs, numberOfGPUNodes, exitDuration. */
static const struct field gpr_fields[] = {
	{"requestName", "gprName", T_STR, 0},
	{"gprName", "gprName", T_STR, 0},
	{"sliceName", "sliceName", T_STR, F_REQUIRED},
	{"clusterName", "clusterName", T_STR, F_TMPL | F_TMPL_REQ},
	{"numberOfGPUs", "numberOfGPUs", T_INT, F_TMPL | F_TMPL_REQ},
	{"numberOfGPUNodes", "numberOfGPUNodes", T_INT, F_REQUIRED | F_TMPL | F_TMPL_REQ},
	{"instanceType", "instanceType", T_STR, F_TMPL},
	{"gpuShape", "gpuShape", T_STR, F_TMPL},
	{"memoryPerGpu", "memoryPerGpu", T_INT, F_TMPL},
	{"memoryPerGPU", "memoryPerGpu", T_INT, F_TMPL},
	{"exitDuration", "exitDuration", T_DUR, F_REQUIRED | F_TMPL | F_TMPL_REQ},
	{"priority", "priority", T_INT, F_TMPL},
	{"earlyRelease", "earlyRelease", T_BOOL, 0},
	{"idleTimeOutDuration", "idleTimeOutDuration", T_DUR, F_TMPL},
	{"enforceIdleTimeOut", "enforceIdleTimeOut", T_BOOL, F_TMPL},
	{"enableEviction", "enableEviction", T_BOOL, F_TMPL},
	{"requeueOnFailure", "requeueOnFailure", T_BOOL, F_TMPL},
	{"preferredClusters", "preferredClusters", T_LIST, 0},
	{"enableAutoClusterSelection", "enableAutoClusterSelection", T_BOOL, 0},
	{"enableAutoGpuSelection", "enableAutoGpuSelection", T_BOOL, 0},
	{"multiNode", "multiNode", T_BOOL, 0},
	{"dedicatedNodes", "dedicatedNodes", T_BOOL, 0},
	{"enableRDMA", "enableRDMA", T_BOOL, 0},
	{"enableSecondaryNetwork", "enableSecondaryNetwork", T_BOOL, 0},
	{"gpuSharingMode", "gpuSharingMode", T_STR, 0},
	{"templateName", "templateName", T_STR, 0},
	{NULL, NULL, T_ANY, 0},
};

static const struct field ws_fields[] = {
	{"clusters", "clusters", T_LIST, F_REQUIRED},
	{"namespaces", "namespaces", T_LIST, 0},
	{"username", "username", T_STR, 0},
	{"email", "email", T_STR, 0},
	{"description", "description", T_STR, 0},
	{"projectName", "projectName", T_STR, 0},
	{NULL, NULL, T_ANY, 0},
};

static const struct field cluster_fields[] = {
	{"apiServer", "apiServer", T_STR, 0},
	{"caData", "caData", T_STR, 0},
	{"projectName", "projectName", T_STR, 0},
	{NULL, NULL, T_ANY, 0},
};

/* The fields of ../shared/reference/egs-api.md's workspace policy object, and egsd's additions
 * (concurrentGpuQuota, maxNodesPerGpr, softLimits: docs/policies.md).  priorityRange and softLimits
 * are objects the server checks member by member. */
static const struct field policy_fields[] = {
	{"workspaceName", "workspaceName", T_STR, 0},
	{"sliceName", "workspaceName", T_STR, 0},
	{"maxGPRs", "maxGPRs", T_INT, 0},
	{"maxExitDurationPerGPR", "maxExitDurationPerGPR", T_DUR, 0},
	{"priorityRange", "priorityRange", T_ANY, 0},
	{"enableAutoEviction", "enableAutoEviction", T_BOOL, 0},
	{"requeueOnFailure", "requeueOnFailure", T_BOOL, 0},
	{"gpuShapes", "gpuShapes", T_LIST, 0},
	{"maxGPUPerGpr", "maxGPUPerGpr", T_INT, 0},
	{"maxMemoryPerGpr", "maxMemoryPerGpr", T_INT, 0},
	{"concurrentGpuQuota", "concurrentGpuQuota", T_INT, 0},
	{"maxNodesPerGpr", "maxNodesPerGpr", T_INT, 0},
	{"softLimits", "softLimits", T_ANY, 0},
	{NULL, NULL, T_ANY, 0},
};

static const struct field binding_fields[] = {
	{"clusters", "clusters", T_ANY, F_REQUIRED},
	{"enableAutoGPR", "enableAutoGPR", T_BOOL, 0},
	{NULL, NULL, T_ANY, 0},
};

/* Indexed by enum egs_manifest_kind. */
static const struct kind_def kinds[] = {
	[EGS_MANIFEST_CLUSTER] = {"Cluster", "cluster", "clusterName", false, cluster_fields, false},
	[EGS_MANIFEST_WORKSPACE] = {"SliceWorkspace", "workspace", "workspaceName", true, ws_fields, false},
	[EGS_MANIFEST_POLICY] = {"WorkspacePolicy", "workspacepolicy", "workspaceName", true, policy_fields, false},
	[EGS_MANIFEST_TEMPLATE] = {"GPRTemplate", "gprtemplate", "name", true, gpr_fields, true},
	[EGS_MANIFEST_BINDING] = {"GPRTemplateBinding", "gprtemplatebinding", "workspaceName", true, binding_fields, false},
	[EGS_MANIFEST_GPR] = {"GPUProvisioningRequest", "gpr", "gprName", true, gpr_fields, false},
};

/* Accumulated error lines. */
struct errs {
	char *buf;
	size_t sz, len;
	int count;
};

struct parse {
	const char *src;
	yaml_document_t *doc;
	struct errs *errs;
	long budget; /* nodes left to convert */
};

const char *egs_manifest_kind_name(enum egs_manifest_kind k)
{
	return (size_t)k < EGS_ARRAY_LEN(kinds) ? kinds[k].kind : "?";
}

const char *egs_manifest_kind_short(enum egs_manifest_kind k)
{
	return (size_t)k < EGS_ARRAY_LEN(kinds) ? kinds[k].short_name : "?";
}

static void errs_vadd(struct errs *e, const char *src, size_t line, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

static void errs_vadd(struct errs *e, const char *src, size_t line, const char *fmt, va_list ap)
{
	int n;

	if (++e->count > MAX_ERRORS || e->len + 1 >= e->sz)
		return;
	n = snprintf(e->buf + e->len, e->sz - e->len, "%s:%zu: ", src, line);
	if (n < 0 || (size_t)n >= e->sz - e->len) {
		e->len = e->sz - 1;
		return;
	}
	e->len += (size_t)n;
	n = vsnprintf(e->buf + e->len, e->sz - e->len, fmt, ap);
	e->len = n < 0 || (size_t)n >= e->sz - e->len ? e->sz - 1 : e->len + (size_t)n;
	if (e->len + 1 < e->sz) {
		e->buf[e->len++] = '\n';
		e->buf[e->len] = '\0';
	}
}

static void errs_add(struct errs *e, const char *src, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void errs_add(struct errs *e, const char *src, size_t line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errs_vadd(e, src, line, fmt, ap);
	va_end(ap);
}

/* Removes the final newline, so a single error reads as one line. */
static void errs_finish(struct errs *e)
{
	if (e->len > 0 && e->buf[e->len - 1] == '\n')
		e->buf[--e->len] = '\0';
	if (e->count > MAX_ERRORS && e->len + 1 < e->sz)
		snprintf(e->buf + e->len, e->sz - e->len, "\n(%d more errors not shown)", e->count - MAX_ERRORS);
}

static bool failf(struct parse *p, const yaml_node_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds "src:line: message" for the node at and returns false. */
static bool failf(struct parse *p, const yaml_node_t *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errs_vadd(p->errs, p->src, at ? at->start_mark.line + 1 : 1, fmt, ap);
	va_end(ap);
	return false;
}

static int line_of(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static yaml_node_t *node_at(struct parse *p, int id)
{
	return yaml_document_get_node(p->doc, id);
}

/* ---- scalars ---- */

/* The scalar's text, or NULL when n is not a scalar or holds a NUL byte. */
static const char *scalar(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

static bool plain(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static bool is_null(const yaml_node_t *n)
{
	const char *s = scalar(n);
	return s && plain(n) && (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"));
}

static bool bool_of(const char *s, bool *out)
{
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return *out = true, true;
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return *out = false, true;
	return false;
}

static bool int_of(const char *s, long long *out)
{
	char *end;
	long long v;

	if (!*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end || errno == ERANGE)
		return false;
	*out = v;
	return true;
}

static bool real_of(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || isspace((unsigned char)*s) || strpbrk(s, "xXnNiI")) /* no hex, nan or inf spellings */
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno == ERANGE)
		return false;
	*out = v;
	return true;
}

/* A plain scalar as the YAML 1.2 core schema reads it; quoted scalars are always strings. */
static json_t *scalar_json(const yaml_node_t *n)
{
	const char *s = scalar(n);
	long long i;
	double d;
	bool b;

	if (!s)
		return NULL;
	if (plain(n)) {
		if (is_null(n))
			return json_null();
		if (bool_of(s, &b))
			return json_boolean(b);
		if (int_of(s, &i))
			return json_integer(i);
		if (real_of(s, &d))
			return json_real(d);
	}
	return json_stringn(s, n->data.scalar.length); /* NULL for invalid UTF-8 */
}

/* ---- generic YAML to JSON ---- */

static json_t *to_json(struct parse *p, yaml_node_t *n, int depth);

static json_t *mapping_json(struct parse *p, yaml_node_t *n, int depth)
{
	json_t *o = json_object();

	for (yaml_node_pair_t *pair = n->data.mapping.pairs.start; pair < n->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = node_at(p, pair->key);
		const char *key = scalar(k);
		json_t *v;

		if (!key) {
			failf(p, k, "mapping keys must be plain strings");
			goto fail;
		}
		if (json_object_get(o, key)) {
			failf(p, k, "duplicate key '%s'", key);
			goto fail;
		}
		v = to_json(p, node_at(p, pair->value), depth + 1);
		if (!v)
			goto fail;
		json_object_set_new(o, key, v);
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

static json_t *to_json(struct parse *p, yaml_node_t *n, int depth)
{
	json_t *a, *v;

	if (depth > MAX_DEPTH || --p->budget < 0) {
		failf(p, n, "the document is nested too deeply or expands too much (aliases)");
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		v = scalar_json(n);
		if (!v)
			failf(p, n, "text must be valid UTF-8 without NUL bytes");
		return v;
	case YAML_SEQUENCE_NODE:
		a = json_array();
		for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
			v = to_json(p, node_at(p, *it), depth + 1);
			if (!v) {
				json_decref(a);
				return NULL;
			}
			json_array_append_new(a, v);
		}
		return a;
	case YAML_MAPPING_NODE:
		return mapping_json(p, n, depth);
	default:
		failf(p, n, "unsupported YAML node");
		return NULL;
	}
}

/* ---- typed spec fields ---- */

static bool get_str(struct parse *p, const char *what, yaml_node_t *v, json_t **out)
{
	const char *s = scalar(v);

	if (!s || v->data.scalar.length == 0)
		return failf(p, v, "%s: expected a non-empty string", what);
	*out = json_stringn(s, v->data.scalar.length);
	return *out ? true : failf(p, v, "%s: must be valid UTF-8", what);
}

static bool get_int(struct parse *p, const char *what, yaml_node_t *v, json_t **out)
{
	const char *s = scalar(v);
	long long x;

	if (!s || !plain(v) || !int_of(s, &x))
		return failf(p, v, "%s: expected an integer, got %s%s%s", what, s && !plain(v) ? "the string \"" : "",
			     s ? s : "a list or mapping", s && !plain(v) ? "\"" : "");
	*out = json_integer(x);
	return true;
}

static bool get_bool(struct parse *p, const char *what, yaml_node_t *v, json_t **out)
{
	const char *s = scalar(v);
	bool b;

	if (!s || !plain(v) || !bool_of(s, &b))
		return failf(p, v, "%s: expected true or false, got %s", what, s ? s : "a list or mapping");
	*out = json_boolean(b);
	return true;
}

static bool get_duration(struct parse *p, const char *what, yaml_node_t *v, json_t **out)
{
	const char *s = scalar(v), *why = NULL;
	int64_t secs;

	if (!s || !egs_duration_parse(s, &secs, &why))
		return failf(p, v, "%s: expected a duration such as 6h, 90m or 0d6h0m%s%s", what, why ? ": " : "",
			     why ? why : "");
	*out = json_string(s);
	return true;
}

static bool get_list(struct parse *p, const char *what, yaml_node_t *v, json_t **out)
{
	json_t *a;

	if (v->type != YAML_SEQUENCE_NODE)
		return failf(p, v, "%s: expected a list of names", what);
	a = json_array();
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *e = node_at(p, *it);
		json_t *s;
		if (!get_str(p, what, e, &s)) {
			json_decref(a);
			return false;
		}
		json_array_append_new(a, s);
	}
	*out = a;
	return true;
}

/* Converts v as field f wants; "spec.<key>" names it in messages. */
static bool get_field(struct parse *p, const struct field *f, yaml_node_t *v, json_t **out)
{
	char what[96];

	snprintf(what, sizeof(what), "spec.%s", f->key);
	switch (f->type) {
	case T_STR:
		return get_str(p, what, v, out);
	case T_INT:
		return get_int(p, what, v, out);
	case T_BOOL:
		return get_bool(p, what, v, out);
	case T_DUR:
		return get_duration(p, what, v, out);
	case T_LIST:
		return get_list(p, what, v, out);
	default:
		*out = to_json(p, v, 2);
		return *out != NULL;
	}
}

/* Edit distance of a and b (short keys only), for "did you mean" suggestions. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			tmp = row[j];
			size_t sub = prev + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			size_t best = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
			row[j] = sub < best ? sub : best;
			prev = tmp;
		}
	}
	return row[lb];
}

/* The closest known key to key, or NULL when none is close. */
static const char *suggest(const char *key, const char *const *known, size_t n)
{
	const char *best = NULL;
	size_t bd = 3;

	for (size_t i = 0; i < n; i++) {
		size_t d = distance(key, known[i]);
		if (d < bd) {
			bd = d;
			best = known[i];
		}
	}
	return best;
}

static bool unknown_key(struct parse *p, yaml_node_t *k, const char *prefix, const char *key,
			const char *const *known, size_t n)
{
	const char *s = suggest(key, known, n);

	if (s)
		return failf(p, k, "%s%s: unknown field (did you mean %s?)", prefix, key, s);
	return failf(p, k, "%s%s: unknown field", prefix, key);
}

/* ---- documents ---- */

/* An object being built from one document. */
struct doc {
	const struct kind_def *def;
	enum egs_manifest_kind kind;
	json_t *body, *lines;
	yaml_node_t *name_node;  /* metadata.name's value */
	yaml_node_t *spec_node;  /* spec's value */
	yaml_node_t *root;
};

/* Whether field f (a row of def->fields) is one of def's. */
static bool has_field(const struct kind_def *def, const struct field *f)
{
	return !def->tmpl || (f->flags & F_TMPL);
}

static bool field_required(const struct kind_def *def, const struct field *f)
{
	return (f->flags & (def->tmpl ? F_TMPL_REQ : F_REQUIRED)) != 0;
}

static const struct field *find_field(const struct kind_def *def, const char *key)
{
	for (const struct field *f = def->fields; f->key; f++)
		if (has_field(def, f) && !strcmp(f->key, key))
			return f;
	return NULL;
}

/* Suggests among the keys of def's fields. */
static bool unknown_spec_key(struct parse *p, yaml_node_t *k, const char *key, const struct kind_def *def)
{
	const char *known[40];
	size_t n = 0;

	for (const struct field *f = def->fields; f->key; f++) {
		EGS_ASSERT(n < EGS_ARRAY_LEN(known));
		if (has_field(def, f))
			known[n++] = f->key;
	}
	return unknown_key(p, k, "spec.", key, known, n);
}

/* One key of spec: checked, converted and stored under its wire name with its line. */
static bool spec_pair(struct parse *p, struct doc *d, yaml_node_t *k, yaml_node_t *v, json_t *seen)
{
	const char *key = scalar(k);
	const struct field *f;
	json_t *val = NULL;

	if (!key)
		return failf(p, k, "spec: keys must be plain strings");
	f = find_field(d->def, key);
	if (!f)
		return unknown_spec_key(p, k, key, d->def);
	if (json_object_get(seen, key))
		return failf(p, k, "spec.%s: duplicate key", key);
	json_object_set_new(seen, key, json_true());
	if (json_object_get(d->body, f->wire))
		return failf(p, k, "spec.%s: %s is already given under another name", key, f->wire);
	if (is_null(v))
		return true; /* an explicit null leaves the field unset */
	if (!get_field(p, f, v, &val))
		return false;
	json_object_set_new(d->body, f->wire, val);
	json_object_set_new(d->lines, f->wire, json_integer(line_of(k)));
	return true;
}

static bool parse_spec(struct parse *p, struct doc *d)
{
	yaml_node_t *s = d->spec_node;
	json_t *seen;
	bool ok = true;

	if (!s || is_null(s)) {
		if (d->def->spec_required)
			return failf(p, d->root, "spec is required for a %s", d->def->kind);
		return true;
	}
	if (s->type != YAML_MAPPING_NODE)
		return failf(p, s, "spec must be a mapping of fields");
	seen = json_object();
	for (yaml_node_pair_t *pair = s->data.mapping.pairs.start; ok && pair < s->data.mapping.pairs.top; pair++)
		ok = spec_pair(p, d, node_at(p, pair->key), node_at(p, pair->value), seen);
	json_decref(seen);
	/* A GPR from a template takes its shape from there: only sliceName stays required. */
	bool templated = d->kind == EGS_MANIFEST_GPR && json_object_get(d->body, "templateName");
	for (const struct field *f = d->def->fields; ok && f->key; f++)
		if (field_required(d->def, f) && !json_object_get(d->body, f->wire) && (!templated || !strcmp(f->wire, "sliceName")))
			ok = failf(p, s, "spec.%s is required for a %s", f->key, d->def->kind);
	return ok;
}

/* metadata: name (required unless spec names the object), namespace, labels, annotations. */
static bool parse_metadata(struct parse *p, struct doc *d, yaml_node_t *m)
{
	static const char *const known[] = {"name", "namespace", "labels", "annotations"};

	if (!m || is_null(m))
		return true;
	if (m->type != YAML_MAPPING_NODE)
		return failf(p, m, "metadata must be a mapping");
	for (yaml_node_pair_t *pair = m->data.mapping.pairs.start; pair < m->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = node_at(p, pair->key), *v = node_at(p, pair->value);
		const char *key = scalar(k);
		size_t i;

		for (i = 0; key && i < EGS_ARRAY_LEN(known); i++)
			if (!strcmp(key, known[i]))
				break;
		if (!key || i == EGS_ARRAY_LEN(known))
			return unknown_key(p, k, "metadata.", key ? key : "?", known, EGS_ARRAY_LEN(known));
		if (i == 0) {
			if (d->name_node)
				return failf(p, k, "metadata.name: duplicate key");
			if (!scalar(v) || !*scalar(v))
				return failf(p, v, "metadata.name: expected a non-empty string");
			d->name_node = v;
		}
	}
	return true;
}

/* The object's name: from spec (gprName via requestName, a policy's workspaceName or sliceName) or
 * metadata.name. */
static bool settle_name(struct parse *p, struct doc *d)
{
	const char *wire = d->def->name_wire;
	json_t *given = json_object_get(d->body, wire);
	const char *meta = d->name_node ? scalar(d->name_node) : NULL;

	if (given && meta && strcmp(json_string_value(given), meta) != 0)
		return failf(p, d->name_node, "metadata.name '%s' differs from the spec's %s '%s'", meta, wire,
			     json_string_value(given));
	if (given)
		return true;
	if (!meta)
		return failf(p, d->root, "metadata.name is required");
	json_object_set_new(d->body, wire, json_string(meta));
	json_object_set_new(d->lines, wire, json_integer(line_of(d->name_node)));
	return true;
}

/* apiVersion: ours (egs.avesha.io/...) or the EGS operator's CRD groups (*.kubeslice.io/...). */
static bool check_api_version(struct parse *p, yaml_node_t *v)
{
	const char *s = scalar(v), *slash = s ? strchr(s, '/') : NULL;

	if (!s || !*s)
		return failf(p, v, "apiVersion: expected a string such as egs.avesha.io/v1");
	if (slash && slash[1] &&
	    ((slash - s == 13 && !strncmp(s, "egs.avesha.io", 13)) ||
	     (slash - s > 13 && !strncmp(slash - 13, ".kubeslice.io", 13))))
		return true;
	return failf(p, v, "apiVersion: '%s' is not an EGS API version (use egs.avesha.io/v1)", s);
}

static bool find_kind(struct parse *p, struct doc *d, yaml_node_t *v)
{
	const char *s = scalar(v);

	for (size_t i = 0; s && i < EGS_ARRAY_LEN(kinds); i++)
		if (!strcmp(s, kinds[i].kind)) {
			d->def = &kinds[i];
			d->kind = (enum egs_manifest_kind)i;
			return true;
		}
	return failf(p, v, "kind: '%s' is not one of GPUProvisioningRequest, SliceWorkspace, Cluster, WorkspacePolicy, "
			   "GPRTemplate, GPRTemplateBinding",
		     s ? s : "(not a string)");
}

/* The top level: apiVersion, kind, metadata, spec (status is accepted and ignored). */
static bool parse_top(struct parse *p, struct doc *d, yaml_node_t **meta)
{
	static const char *const known[] = {"apiVersion", "kind", "metadata", "spec", "status"};
	yaml_node_t *vals[EGS_ARRAY_LEN(known)] = {0};
	yaml_node_t *r = d->root;

	if (r->type != YAML_MAPPING_NODE)
		return failf(p, r, "a manifest document must be a mapping with apiVersion, kind, metadata and spec");
	for (yaml_node_pair_t *pair = r->data.mapping.pairs.start; pair < r->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = node_at(p, pair->key);
		const char *key = scalar(k);
		size_t i;
		for (i = 0; key && i < EGS_ARRAY_LEN(known); i++)
			if (!strcmp(key, known[i]))
				break;
		if (!key || i == EGS_ARRAY_LEN(known))
			return unknown_key(p, k, "", key ? key : "?", known, EGS_ARRAY_LEN(known));
		if (vals[i])
			return failf(p, k, "%s: duplicate key", key);
		vals[i] = node_at(p, pair->value);
	}
	if (!vals[0])
		return failf(p, r, "apiVersion is required (egs.avesha.io/v1)");
	if (!vals[1])
		return failf(p, r, "kind is required");
	*meta = vals[2];
	d->spec_node = vals[3];
	return check_api_version(p, vals[0]) && find_kind(p, d, vals[1]);
}

/* Appends the object of one document to m; false (with the errors added) when it is bad. */
static bool parse_doc(struct parse *p, struct egs_manifest *m, yaml_node_t *root)
{
	struct doc d = {.root = root, .body = json_object(), .lines = json_object()};
	yaml_node_t *meta = NULL;
	struct egs_manifest_obj *o;

	if (!parse_top(p, &d, &meta) || !parse_metadata(p, &d, meta) || !parse_spec(p, &d) || !settle_name(p, &d)) {
		json_decref(d.body);
		json_decref(d.lines);
		return false;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 8;
		m->objs = egs_realloc(m->objs, m->cap * sizeof(*m->objs));
	}
	o = &m->objs[m->n++];
	o->kind = d.kind;
	o->name = egs_strdup(json_string_value(json_object_get(d.body, d.def->name_wire)));
	o->source = egs_strdup(p->src);
	o->line = line_of(root);
	o->body = d.body;
	o->lines = d.lines;
	return true;
}

void egs_manifest_init(struct egs_manifest *m)
{
	memset(m, 0, sizeof(*m));
}

static void obj_cleanup(struct egs_manifest_obj *o)
{
	egs_free(o->name);
	egs_free(o->source);
	json_decref(o->body);
	json_decref(o->lines);
}

void egs_manifest_cleanup(struct egs_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		obj_cleanup(&m->objs[i]);
	egs_free(m->objs);
	egs_manifest_init(m);
}

/* The error of a document libyaml could not read. */
static void parser_error(struct errs *e, const char *src, const yaml_parser_t *parser)
{
	errs_add(e, src, parser->problem_mark.line + 1, "invalid YAML: %s%s%s", parser->problem ? parser->problem : "unreadable",
		 parser->context ? " " : "", parser->context ? parser->context : "");
}

enum egs_err egs_manifest_parse(struct egs_manifest *m, const char *text, size_t len, const char *source, char *err,
				size_t errsz)
{
	struct errs e = {.buf = err, .sz = errsz};
	struct parse p = {.src = source, .errs = &e};
	size_t first = m->n;
	yaml_parser_t parser;
	yaml_document_t doc;

	EGS_ASSERT(errsz > 0);
	err[0] = '\0';
	EGS_ASSERT(yaml_parser_initialize(&parser)); /* fails only on out of memory */
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (;;) {
		yaml_node_t *root;
		if (!yaml_parser_load(&parser, &doc)) {
			parser_error(&e, source, &parser);
			break; /* the stream cannot be resynchronised after a syntax error */
		}
		root = yaml_document_get_root_node(&doc);
		if (!root) { /* the end of the stream */
			yaml_document_delete(&doc);
			break;
		}
		p.doc = &doc;
		p.budget = MAX_NODES;
		if (!is_null(root))
			parse_doc(&p, m, root);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);
	if (e.count == 0)
		return EGS_OK;
	while (m->n > first) /* all of the text or none of it */
		obj_cleanup(&m->objs[--m->n]);
	errs_finish(&e);
	return EGS_ERR_INVALID;
}

int egs_manifest_line(const struct egs_manifest_obj *o, const char *field)
{
	json_t *l = field ? json_object_get(o->lines, field) : NULL;
	char top[96];

	if (!l && field && strchr(field, '.')) { /* "softLimits.maxGPRs": the line of softLimits */
		snprintf(top, sizeof(top), "%.*s", (int)strcspn(field, "."), field);
		l = json_object_get(o->lines, top);
	}
	return json_is_integer(l) ? (int)json_integer_value(l) : o->line;
}

enum egs_err egs_yaml_load(const char *text, size_t len, const char *source, json_t **out, char *err, size_t errsz)
{
	struct errs e = {.buf = err, .sz = errsz};
	struct parse p = {.src = source, .errs = &e, .budget = MAX_NODES};
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;

	*out = NULL;
	err[0] = '\0';
	EGS_ASSERT(yaml_parser_initialize(&parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		parser_error(&e, source, &parser);
		goto out;
	}
	p.doc = &doc;
	root = yaml_document_get_root_node(&doc);
	*out = root ? to_json(&p, root, 0) : json_null();
	yaml_document_delete(&doc);
out:
	yaml_parser_delete(&parser);
	errs_finish(&e);
	return *out ? EGS_OK : EGS_ERR_INVALID;
}
