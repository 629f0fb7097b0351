/*
 * devices_mock.c: the mock device backend: nodes and GPUs from a YAML file, deterministic samples.
 *
 * The file is loaded with libyaml's document API, so every node keeps its source mark and every
 * error names file:line.  Unknown keys are ignored (the Contracts say more keys may be added), but
 * a known key with the wrong type, a missing required key, a duplicate key, a duplicate node name or
 * GPU UUID is an error.  Samples depend only on the GPU's UUID: an idle GPU (about 70 W, 35 C,
 * 0 % utilization, no memory used) that is the same at every call; scripted timelines come later.
 */
#include "agent/devices.h"

#include "core/map.h"
#include "core/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define GPU_COUNT_MAX 64
#define MEMORY_MIB_MAX (1024LL * 1024) /* 1 TiB per GPU */

/* The keys of one node entry; the first N_REQUIRED are required. */
enum node_key { K_NAME, K_INSTANCE_TYPE, K_GPU_MODEL, K_GPU_COUNT, K_MEMORY, K_CLOUD, K_REGION, K_GPUS, K_N };
#define N_REQUIRED 5
static const char *const node_keys[K_N] = {
	"name", "instanceType", "gpuModel", "gpuCount", "memoryMiB", "cloudProvider", "region", "gpus",
};

struct parse {
	const char *src;
	const char *cluster;
	yaml_document_t *doc;
	char *err;
	size_t errsz;
	char what[96];        /* the entry being parsed, e.g. "node 'h100-node-1'" */
	struct egs_map names; /* node name -> node, to refuse duplicates */
	struct egs_map uuids; /* GPU uuid -> gpu, to refuse duplicates */
};

static bool failf(struct parse *p, const yaml_node_t *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Writes "<src>:<line>: [<what>: ]<message>" into p->err and returns false. */
static bool failf(struct parse *p, const yaml_node_t *at, const char *fmt, ...)
{
	size_t line = at ? at->start_mark.line + 1 : 1;
	int n = snprintf(p->err, p->errsz, "%s:%zu: %s%s", p->src, line, p->what, p->what[0] ? ": " : "");
	va_list ap;

	if (n < 0 || (size_t)n >= p->errsz)
		return false;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errsz - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

static yaml_node_t *node_at(struct parse *p, int id)
{
	return yaml_document_get_node(p->doc, id);
}

/* Returns the scalar's text, or NULL when n is not a scalar or holds a NUL byte. */
static const char *scalar(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

/*
 * Looks up the n keys of the mapping m into vals[] (NULL when absent).  Unknown keys are skipped;
 * a non-scalar or duplicate key fails.
 */
static bool collect(struct parse *p, yaml_node_t *m, const char *const *keys, size_t n, yaml_node_t **vals)
{
	memset(vals, 0, n * sizeof(*vals));
	for (yaml_node_pair_t *pair = m->data.mapping.pairs.start; pair < m->data.mapping.pairs.top; pair++) {
		yaml_node_t *k = node_at(p, pair->key);
		const char *key = scalar(k);
		if (!key)
			return failf(p, k, "keys must be plain strings");
		for (size_t i = 0; i < n; i++) {
			if (strcmp(key, keys[i]) != 0)
				continue;
			if (vals[i])
				return failf(p, k, "duplicate key '%s'", key);
			vals[i] = node_at(p, pair->value);
		}
	}
	return true;
}

/* Copies a string field into *out (owned).  label: also require egs_label_valid(). */
static bool get_string(struct parse *p, yaml_node_t *v, const char *key, bool label, char **out)
{
	const char *s = scalar(v), *why = NULL;

	if (!s || v->data.scalar.length == 0)
		return failf(p, v, "%s: expected a non-empty string", key);
	if (v->data.scalar.length >= EGS_NAME_MAX)
		return failf(p, v, "%s: must be at most %d characters", key, EGS_NAME_MAX - 1);
	if (label && !egs_label_valid(s, &why))
		return failf(p, v, "%s: '%s' %s", key, s, why);
	*out = egs_strdup(s);
	return true;
}

/* Parses a plain (unquoted) integer scalar within [min, max]. */
static bool get_int(struct parse *p, yaml_node_t *v, const char *key, long long min, long long max,
		    long long *out)
{
	const char *s = scalar(v);
	char *end = NULL;
	long long x;

	if (!s)
		return failf(p, v, "%s: expected an integer", key);
	errno = 0;
	x = strtoll(s, &end, 10);
	if (v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || end == s || *end != '\0' || errno == ERANGE)
		return failf(p, v, "%s: expected an integer, got '%s'", key, s);
	if (x < min || x > max)
		return failf(p, v, "%s: %lld is out of range %lld..%lld", key, x, min, max);
	*out = x;
	return true;
}

/* Fills n->gpus from the optional `gpus:` list v (may be NULL: every UUID generated). */
static bool parse_gpus(struct parse *p, yaml_node_t *v, struct egs_dev_node *n)
{
	static const char *const gpu_keys[] = {"uuid"};
	yaml_node_t *item_vals[1];
	long len = 0;

	n->gpus = egs_calloc((size_t)n->gpu_count, sizeof(*n->gpus));
	if (v) {
		if (v->type != YAML_SEQUENCE_NODE)
			return failf(p, v, "gpus: expected a list of {uuid: ...}");
		len = v->data.sequence.items.top - v->data.sequence.items.start;
		if (len != n->gpu_count)
			return failf(p, v, "gpus: lists %ld GPUs but gpuCount is %d", len, n->gpu_count);
	}
	for (int i = 0; i < n->gpu_count; i++) {
		struct egs_dev_gpu *g = &n->gpus[i];
		const char *uuid = NULL;
		g->index = i;
		if (v) {
			yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
			if (item->type != YAML_MAPPING_NODE)
				return failf(p, item, "gpus[%d]: expected a mapping {uuid: ...}", i);
			if (!collect(p, item, gpu_keys, 1, item_vals))
				return false;
			if (item_vals[0]) {
				const char *why = NULL;
				uuid = scalar(item_vals[0]);
				if (!uuid || !egs_label_valid(uuid, &why))
					return failf(p, item_vals[0], "gpus[%d].uuid: %s", i,
						     uuid ? why : "expected a string");
			}
		}
		if (uuid)
			egs_strlcpy(g->uuid, uuid, sizeof(g->uuid));
		else
			egs_devices_mock_uuid(p->cluster, n->name, i, g->uuid, sizeof(g->uuid));
		if (egs_map_get(&p->uuids, g->uuid))
			return failf(p, v ? node_at(p, v->data.sequence.items.start[i]) : v,
				     "GPU uuid '%s' appears twice in the file", g->uuid);
		egs_map_put(&p->uuids, g->uuid, g);
	}
	return true;
}

static bool parse_node(struct parse *p, yaml_node_t *m, int pos, struct egs_dev_node *n)
{
	yaml_node_t *v[K_N];
	long long count = 0, mem = 0;

	snprintf(p->what, sizeof(p->what), "nodes[%d]", pos);
	if (m->type != YAML_MAPPING_NODE)
		return failf(p, m, "expected a mapping with name, instanceType, gpuModel, gpuCount, memoryMiB");
	if (!collect(p, m, node_keys, K_N, v))
		return false;
	if (v[K_NAME]) {
		if (!get_string(p, v[K_NAME], "name", true, &n->name))
			return false;
		snprintf(p->what, sizeof(p->what), "node '%s'", n->name);
	}
	if (n->name && egs_map_get(&p->names, n->name))
		return failf(p, v[K_NAME], "a node with this name is listed twice");
	if ((v[K_INSTANCE_TYPE] && !get_string(p, v[K_INSTANCE_TYPE], "instanceType", true, &n->instance_type)) ||
	    (v[K_GPU_MODEL] && !get_string(p, v[K_GPU_MODEL], "gpuModel", true, &n->gpu_model)) ||
	    (v[K_GPU_COUNT] && !get_int(p, v[K_GPU_COUNT], "gpuCount", 1, GPU_COUNT_MAX, &count)) ||
	    (v[K_MEMORY] && !get_int(p, v[K_MEMORY], "memoryMiB", 1, MEMORY_MIB_MAX, &mem)))
		return false;
	for (int k = 0; k < N_REQUIRED; k++)
		if (!v[k])
			return failf(p, m, "missing key '%s'", node_keys[k]);
	n->gpu_count = (int)count;
	n->memory_mib = mem;
	if (v[K_CLOUD] && !get_string(p, v[K_CLOUD], "cloudProvider", true, &n->cloud_provider))
		return false;
	if (v[K_REGION] && !get_string(p, v[K_REGION], "region", true, &n->region))
		return false;
	if (!n->cloud_provider)
		n->cloud_provider = egs_strdup("");
	if (!n->region)
		n->region = egs_strdup("");
	egs_map_put(&p->names, n->name, n);
	return parse_gpus(p, v[K_GPUS], n);
}

static bool parse_document(struct parse *p, struct egs_devices *d)
{
	static const char *const top_keys[] = {"nodes"};
	yaml_node_t *root = yaml_document_get_root_node(p->doc), *nodes;
	long len;

	if (!root)
		return failf(p, NULL, "the file is empty; expected a 'nodes:' list");
	if (root->type != YAML_MAPPING_NODE)
		return failf(p, root, "expected a mapping with a 'nodes:' list");
	if (!collect(p, root, top_keys, 1, &nodes))
		return false;
	if (!nodes)
		return failf(p, root, "missing key 'nodes'");
	if (nodes->type != YAML_SEQUENCE_NODE)
		return failf(p, nodes, "nodes: expected a list");
	len = nodes->data.sequence.items.top - nodes->data.sequence.items.start;
	d->nodes = egs_calloc((size_t)len, sizeof(*d->nodes));
	for (long i = 0; i < len; i++) {
		d->n_nodes = (size_t)i + 1; /* so that egs_devices_free() frees a half-parsed node too */
		if (!parse_node(p, node_at(p, nodes->data.sequence.items.start[i]), (int)i, &d->nodes[i]))
			return false;
	}
	return true;
}

static enum egs_err mock_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				struct egs_gpu_sample *out);

static const struct egs_devices_ops mock_ops = {
	.name = "mock",
	.sample = mock_sample,
	.free_impl = NULL,
};

/* Parses with an already set-up parser; shared by the file and the string entry points. */
static enum egs_err load(yaml_parser_t *parser, const char *source, const char *cluster,
			 struct egs_devices **out, char *err, size_t errsz)
{
	enum egs_err rc = EGS_ERR_INVALID;
	struct parse p = {.src = source, .cluster = cluster, .err = err, .errsz = errsz};
	struct egs_devices *d = NULL;
	yaml_document_t doc;
	bool have_doc = false;

	*out = NULL;
	egs_map_init(&p.names);
	egs_map_init(&p.uuids);
	if (!yaml_parser_load(parser, &doc)) {
		snprintf(err, errsz, "%s:%zu: %s%s%s", source, parser->problem_mark.line + 1,
			 parser->problem ? parser->problem : "unreadable YAML", parser->context ? " " : "",
			 parser->context ? parser->context : "");
		goto out;
	}
	have_doc = true;
	p.doc = &doc;
	d = egs_calloc(1, sizeof(*d));
	d->ops = &mock_ops;
	if (!parse_document(&p, d))
		goto out;
	*out = d;
	d = NULL;
	rc = EGS_OK;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	egs_map_cleanup(&p.names);
	egs_map_cleanup(&p.uuids);
	egs_devices_free(d);
	return rc;
}

enum egs_err egs_devices_mock_parse(const char *text, size_t len, const char *source, const char *cluster,
				    struct egs_devices **out, char *err, size_t errsz)
{
	yaml_parser_t parser;
	enum egs_err rc;

	EGS_ASSERT(yaml_parser_initialize(&parser)); /* fails only on out of memory */
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	rc = load(&parser, source, cluster, out, err, errsz);
	yaml_parser_delete(&parser);
	return rc;
}

enum egs_err egs_devices_mock_load(const char *path, const char *cluster, struct egs_devices **out,
				   char *err, size_t errsz)
{
	yaml_parser_t parser;
	enum egs_err rc;
	FILE *f = fopen(path, "rb");

	*out = NULL;
	if (!f) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return EGS_ERR_IO;
	}
	EGS_ASSERT(yaml_parser_initialize(&parser));
	yaml_parser_set_input_file(&parser, f);
	rc = load(&parser, path, cluster, out, err, errsz);
	yaml_parser_delete(&parser);
	fclose(f);
	return rc;
}

/* FNV-1a over n bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *s = data;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The splitmix64 finalizer: spreads FNV's weak low bits over the whole word. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void egs_devices_mock_uuid(const char *cluster, const char *node, int index, char *buf, size_t n)
{
	char idx[16];
	uint64_t h = 0xcbf29ce484222325ULL, a, b;

	snprintf(idx, sizeof(idx), "%d", index);
	h = fnv1a(h, cluster, strlen(cluster) + 1); /* the NULs separate the fields */
	h = fnv1a(h, node, strlen(node) + 1);
	h = fnv1a(h, idx, strlen(idx));
	a = mix64(h);
	b = mix64(h ^ 0x9e3779b97f4a7c15ULL);
	snprintf(buf, n, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)((a >> 16) & 0xffff),
		 (unsigned)(a & 0xffff), (unsigned)(b >> 48), (unsigned long long)(b & 0xffffffffffffULL));
}

static enum egs_err mock_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				struct egs_gpu_sample *out)
{
	const struct egs_dev_node *n = &d->nodes[node];

	(void)now; /* constant for now; scripted timelines will use it */
	*health = EGS_HEALTH_HEALTHY;
	for (int i = 0; i < n->gpu_count; i++) {
		uint64_t h = mix64(fnv1a(0xcbf29ce484222325ULL, n->gpus[i].uuid, strlen(n->gpus[i].uuid)));
		out[i].power_w = 68.0 + (double)(h % 41) / 10.0;        /* 68.0 .. 72.0 W */
		out[i].temp_c = 33.0 + (double)((h >> 16) % 41) / 10.0; /* 33.0 .. 37.0 C */
		out[i].util_pct = 0.0;
		out[i].mem_used_mib = 0;
	}
	return EGS_OK;
}
