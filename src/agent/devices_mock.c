/*
 * devices_mock.c: the mock device backend: nodes and GPUs from a YAML file, deterministic samples,
 * optionally driven by scripted timelines so that tests can raise alerts and failures.
 *
 * The file is loaded with libyaml's document API, so every node keeps its source mark and every
 * error names file:line.  Unknown keys are ignored (the Contracts say more keys may be added), but
 * a known key with the wrong type, a missing required key, a duplicate key, a duplicate node name or
 * GPU UUID is an error.
 *
 * Samples depend only on the GPU's UUID (an idle GPU: about 70 W, 35 C, 0 % utilization, no memory
 * used) unless a timeline says otherwise.  A timeline is a list of points `{at: <seconds or
 * duration since start>, <key>: <value>, ...}` in time order.  Power, temperature, utilization and
 * memory used move linearly between the points that set them (a ramp); every other key is a step
 * that holds until the next point setting it; before the first point setting a key the idle value
 * holds.  Each point with `xid` is one XID event at that time.  A node timeline has one key,
 * `silent`: the node stops (or starts again) answering.  Time 0 is when the file was loaded.
 */
#include "agent/devices.h"

#include "core/map.h"
#include "core/util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yaml.h>

#define GPU_COUNT_MAX 64
#define MEMORY_MIB_MAX (1024LL * 1024) /* 1 TiB per GPU */
#define TIMELINE_MAX 10000             /* points per timeline */
#define PROCS_MAX 256                  /* processes per point */
#define PID_MAX 4194304

/* The keys of one node entry; the first N_REQUIRED are required. */
enum node_key {
	K_NAME, K_INSTANCE_TYPE, K_GPU_MODEL, K_GPU_COUNT, K_MEMORY, K_CLOUD, K_REGION, K_GPUS, K_ADDRESS,
	K_TIMELINE, K_N
};
#define N_REQUIRED 5
static const char *const node_keys[K_N] = {
	"name", "instanceType", "gpuModel", "gpuCount", "memoryMiB", "cloudProvider", "region", "gpus",
	"address", "timeline",
};

/* The keys of a timeline point.  The first N_LINEAR are numbers that move linearly between points,
 * up to T_POWER_LIMIT numbers that step. */
enum tl_key {
	T_POWER, T_TEMP, T_UTIL, T_MEM_USED, T_MEM_TOTAL, T_POWER_LIMIT, T_ECC, T_XID, T_LOST, T_PROCS,
	T_SILENT, T_AT, T_KEYS
};
#define N_LINEAR 4
#define N_NUMBERS 6
static const char *const tl_keys[T_KEYS] = {
	"powerW", "tempC", "utilPct", "memUsedMiB", "memTotalMiB", "powerLimitW", "eccErrors", "xid", "lost",
	"processes", "silent", "at",
};
/* Ranges of the number keys, T_POWER .. T_POWER_LIMIT. */
static const double tl_min[N_NUMBERS] = {0, -50, 0, 0, 0, 0};
static const double tl_max[N_NUMBERS] = {10000, 200, 100, MEMORY_MIB_MAX, MEMORY_MIB_MAX, 10000};

struct tl_point {
	int64_t at;       /* seconds since the start */
	unsigned set;     /* 1u << enum tl_key of each key the point sets */
	double num[N_NUMBERS];
	int64_t ecc;
	int xid;
	bool lost, silent;
	struct egs_gpu_proc *procs; /* n_procs entries, owned; .gpu is filled in when sampled */
	size_t n_procs;
};

struct timeline {
	struct tl_point *p; /* n entries in time order, owned */
	size_t n;
};

struct mock_node {
	struct timeline tl;   /* node-level: silent */
	struct timeline *gpu; /* gpu_count entries */
};

struct mock {
	int64_t start;
	struct mock_node *nodes; /* one per node of struct egs_devices */
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

static long seq_len(const yaml_node_t *n)
{
	return n->data.sequence.items.top - n->data.sequence.items.start;
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

/* Parses a plain number scalar within [min, max]. */
static bool get_number(struct parse *p, yaml_node_t *v, const char *key, double min, double max, double *out)
{
	const char *s = scalar(v);
	char *end = NULL;
	double x;

	if (!s)
		return failf(p, v, "%s: expected a number", key);
	errno = 0;
	x = strtod(s, &end);
	if (v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || end == s || *end != '\0' || errno == ERANGE ||
	    !isfinite(x))
		return failf(p, v, "%s: expected a number, got '%s'", key, s);
	if (x < min || x > max)
		return failf(p, v, "%s: %g is out of range %g..%g", key, x, min, max);
	*out = x;
	return true;
}

static bool get_bool(struct parse *p, yaml_node_t *v, const char *key, bool *out)
{
	const char *s = scalar(v);

	if (s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(s, "true") == 0)
		*out = true;
	else if (s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(s, "false") == 0)
		*out = false;
	else
		return failf(p, v, "%s: expected true or false", key);
	return true;
}

/* `at`: a plain number of seconds, or a duration such as "90s", "2m" or "1h30m". */
static bool get_at(struct parse *p, yaml_node_t *v, int64_t *out)
{
	const char *s = scalar(v), *why = NULL;
	long long secs;

	if (s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && s[0] >= '0' && s[0] <= '9' &&
	    strspn(s, "0123456789") == strlen(s)) {
		if (!get_int(p, v, "at", 0, EGS_MAX_DURATION_S, &secs))
			return false;
		*out = secs;
		return true;
	}
	if (!s || !egs_duration_parse(s, out, &why))
		return failf(p, v, "at: expected seconds or a duration like 90s or 2m, got '%s'", s ? s : "?");
	return true;
}

/* Parses a `processes:` list of {pid, name, memUsedMiB} into pt. */
static bool parse_procs(struct parse *p, yaml_node_t *v, struct tl_point *pt)
{
	static const char *const keys[] = {"pid", "name", "memUsedMiB"};
	yaml_node_t *vals[3];
	long len;

	if (v->type != YAML_SEQUENCE_NODE)
		return failf(p, v, "processes: expected a list of {pid, name, memUsedMiB}");
	len = seq_len(v);
	if (len > PROCS_MAX)
		return failf(p, v, "processes: at most %d per point", PROCS_MAX);
	pt->procs = egs_calloc((size_t)len + 1, sizeof(*pt->procs));
	for (long i = 0; i < len; i++) {
		yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
		struct egs_gpu_proc *pr = &pt->procs[i];
		long long pid = 0, mem = -1;
		const char *name;

		if (item->type != YAML_MAPPING_NODE)
			return failf(p, item, "processes[%ld]: expected a mapping {pid, name, memUsedMiB}", i);
		if (!collect(p, item, keys, 3, vals))
			return false;
		if (!vals[0])
			return failf(p, item, "processes[%ld]: missing key 'pid'", i);
		if (!get_int(p, vals[0], "pid", 1, PID_MAX, &pid) ||
		    (vals[2] && !get_int(p, vals[2], "memUsedMiB", 0, MEMORY_MIB_MAX, &mem)))
			return false;
		name = vals[1] ? scalar(vals[1]) : "?";
		if (!name || !*name)
			return failf(p, vals[1], "processes[%ld].name: expected a string", i);
		pr->pid = (int)pid;
		pr->mem_used_mib = mem;
		egs_strlcpy(pr->name, name, sizeof(pr->name));
		pt->n_procs++;
	}
	return true;
}

/* Parses one point's keys other than `at` into pt; gpu: a GPU timeline (else a node timeline). */
static bool parse_point_keys(struct parse *p, yaml_node_t **v, bool gpu, struct tl_point *pt)
{
	long long x;

	for (int k = 0; k < T_AT; k++) {
		if (!v[k])
			continue;
		if (gpu == (k == T_SILENT))
			return failf(p, v[k], "%s: not a key of a %s timeline", tl_keys[k], gpu ? "GPU" : "node");
		pt->set |= 1u << k;
		if (k < N_NUMBERS) {
			if (!get_number(p, v[k], tl_keys[k], tl_min[k], tl_max[k], &pt->num[k]))
				return false;
		} else if (k == T_ECC) {
			if (!get_int(p, v[k], "eccErrors", 0, 1LL << 40, &x))
				return false;
			pt->ecc = x;
		} else if (k == T_XID) {
			if (!get_int(p, v[k], "xid", 1, 999, &x))
				return false;
			pt->xid = (int)x;
		} else if (k == T_LOST) {
			if (!get_bool(p, v[k], "lost", &pt->lost))
				return false;
		} else if (k == T_SILENT) {
			if (!get_bool(p, v[k], "silent", &pt->silent))
				return false;
		} else if (k == T_PROCS) {
			if (!parse_procs(p, v[k], pt))
				return false;
		}
	}
	return true;
}

/* Parses a `timeline:` list into tl; gpu: a GPU timeline (else a node timeline). */
static bool parse_timeline(struct parse *p, yaml_node_t *v, bool gpu, struct timeline *tl)
{
	yaml_node_t *vals[T_KEYS];
	long len;

	if (v->type != YAML_SEQUENCE_NODE)
		return failf(p, v, "timeline: expected a list of {at: ..., ...}");
	len = seq_len(v);
	if (len > TIMELINE_MAX)
		return failf(p, v, "timeline: at most %d points", TIMELINE_MAX);
	tl->p = egs_calloc((size_t)len + 1, sizeof(*tl->p));
	for (long i = 0; i < len; i++) {
		yaml_node_t *item = node_at(p, v->data.sequence.items.start[i]);
		struct tl_point *pt = &tl->p[i];

		if (item->type != YAML_MAPPING_NODE)
			return failf(p, item, "timeline[%ld]: expected a mapping {at: ..., ...}", i);
		tl->n = (size_t)i + 1; /* so that a half-parsed point is freed too */
		if (!collect(p, item, tl_keys, T_KEYS, vals))
			return false;
		if (!vals[T_AT])
			return failf(p, item, "timeline[%ld]: missing key 'at'", i);
		if (!get_at(p, vals[T_AT], &pt->at) || !parse_point_keys(p, vals, gpu, pt))
			return false;
		if (i > 0 && pt->at < tl->p[i - 1].at)
			return failf(p, vals[T_AT], "timeline[%ld]: at %llds comes before the previous point's %llds",
				     i, (long long)pt->at, (long long)tl->p[i - 1].at);
	}
	return true;
}

/* Fills n->gpus and m->gpu from the optional `gpus:` list v (may be NULL: every UUID generated). */
static bool parse_gpus(struct parse *p, yaml_node_t *v, struct egs_dev_node *n, struct mock_node *m)
{
	static const char *const gpu_keys[] = {"uuid", "timeline"};
	yaml_node_t *item_vals[2];
	long len = 0;

	n->gpus = egs_calloc((size_t)n->gpu_count, sizeof(*n->gpus));
	m->gpu = egs_calloc((size_t)n->gpu_count, sizeof(*m->gpu));
	if (v) {
		if (v->type != YAML_SEQUENCE_NODE)
			return failf(p, v, "gpus: expected a list of {uuid: ...}");
		len = seq_len(v);
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
			if (!collect(p, item, gpu_keys, 2, item_vals))
				return false;
			if (item_vals[0]) {
				const char *why = NULL;
				uuid = scalar(item_vals[0]);
				if (!uuid || !egs_label_valid(uuid, &why))
					return failf(p, item_vals[0], "gpus[%d].uuid: %s", i,
						     uuid ? why : "expected a string");
			}
			if (item_vals[1] && !parse_timeline(p, item_vals[1], true, &m->gpu[i]))
				return false;
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

/* `address: host:port` as peers would dial it. */
static bool get_address(struct parse *p, yaml_node_t *v, char **out)
{
	const char *s = scalar(v), *colon = s ? strrchr(s, ':') : NULL;
	char *end = NULL;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;

	if (!s || !colon || colon == s || !*(colon + 1) || *end || port < 1 || port > 65535 ||
	    strlen(s) >= EGS_DEV_ADDRESS_MAX || strpbrk(s, " \t/"))
		return failf(p, v, "address: expected host:port, got '%s'", s ? s : "?");
	*out = egs_strdup(s);
	return true;
}

static bool parse_node(struct parse *p, yaml_node_t *m, int pos, struct egs_dev_node *n, struct mock_node *mn)
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
	if ((v[K_CLOUD] && !get_string(p, v[K_CLOUD], "cloudProvider", true, &n->cloud_provider)) ||
	    (v[K_REGION] && !get_string(p, v[K_REGION], "region", true, &n->region)) ||
	    (v[K_ADDRESS] && !get_address(p, v[K_ADDRESS], &n->address)))
		return false;
	if (!n->cloud_provider)
		n->cloud_provider = egs_strdup("");
	if (!n->region)
		n->region = egs_strdup("");
	if (!n->address)
		n->address = egs_strdup("");
	egs_map_put(&p->names, n->name, n);
	if (v[K_TIMELINE] && !parse_timeline(p, v[K_TIMELINE], false, &mn->tl))
		return false;
	return parse_gpus(p, v[K_GPUS], n, mn);
}

static bool parse_document(struct parse *p, struct egs_devices *d)
{
	static const char *const top_keys[] = {"nodes"};
	yaml_node_t *root = yaml_document_get_root_node(p->doc), *nodes;
	struct mock *mk = d->impl;
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
	len = seq_len(nodes);
	d->nodes = egs_calloc((size_t)len + 1, sizeof(*d->nodes));
	mk->nodes = egs_calloc((size_t)len + 1, sizeof(*mk->nodes));
	for (long i = 0; i < len; i++) {
		d->n_nodes = (size_t)i + 1; /* so that egs_devices_free() frees a half-parsed node too */
		if (!parse_node(p, node_at(p, nodes->data.sequence.items.start[i]), (int)i, &d->nodes[i],
				&mk->nodes[i]))
			return false;
	}
	return true;
}

/* ---- sampling ---- */

/* Returns the last point at or before t that sets key, or NULL. */
static const struct tl_point *last_set(const struct timeline *tl, enum tl_key key, int64_t t)
{
	const struct tl_point *found = NULL;

	for (size_t i = 0; i < tl->n && tl->p[i].at <= t; i++)
		if (tl->p[i].set & (1u << key))
			found = &tl->p[i];
	return found;
}

/* The value of number key at t: linear between points for the first N_LINEAR keys, else a step.
 * Leaves *v alone before the first point that sets key. */
static void tl_number(const struct timeline *tl, enum tl_key key, int64_t t, double *v)
{
	const struct tl_point *prev = last_set(tl, key, t), *next = NULL;

	if (!prev)
		return;
	*v = prev->num[key];
	if (key >= N_LINEAR)
		return;
	for (const struct tl_point *q = prev + 1; q < tl->p + tl->n; q++) {
		if (q->set & (1u << key)) {
			next = q;
			break;
		}
	}
	if (next && next->at > prev->at)
		*v = prev->num[key] + (next->num[key] - prev->num[key]) * (double)(t - prev->at) /
					      (double)(next->at - prev->at);
}

/* The splitmix64 finalizer: spreads FNV's weak low bits over the whole word. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The idle sample of a GPU: depends only on its UUID. */
static void idle_sample(const struct egs_dev_node *n, int i, struct egs_gpu_sample *s)
{
	uint64_t h = mix64(egs_fnv1a_str(EGS_FNV_OFFSET, n->gpus[i].uuid));

	s->valid = EGS_GPU_POWER | EGS_GPU_POWER_LIMIT | EGS_GPU_TEMP | EGS_GPU_UTIL | EGS_GPU_MEM_USED |
		   EGS_GPU_MEM_TOTAL | EGS_GPU_ECC | EGS_GPU_XID;
	s->power_w = 68.0 + (double)(h % 41) / 10.0;        /* 68.0 .. 72.0 W */
	s->temp_c = 33.0 + (double)((h >> 16) % 41) / 10.0; /* 33.0 .. 37.0 C */
	s->power_limit_w = 700.0;
	s->mem_total_mib = n->memory_mib;
}

static void gpu_sample(const struct egs_dev_node *n, int i, const struct timeline *tl, int64_t t,
		       struct egs_gpu_sample *s)
{
	double num[N_NUMBERS];
	const struct tl_point *pt;

	idle_sample(n, i, s);
	num[T_POWER] = s->power_w;
	num[T_TEMP] = s->temp_c;
	num[T_UTIL] = 0;
	num[T_MEM_USED] = 0;
	num[T_MEM_TOTAL] = (double)s->mem_total_mib;
	num[T_POWER_LIMIT] = s->power_limit_w;
	for (int k = 0; k < N_NUMBERS; k++)
		tl_number(tl, (enum tl_key)k, t, &num[k]);
	s->power_w = num[T_POWER];
	s->temp_c = num[T_TEMP];
	s->util_pct = num[T_UTIL];
	s->mem_used_mib = (int64_t)num[T_MEM_USED];
	s->mem_total_mib = (int64_t)num[T_MEM_TOTAL];
	s->power_limit_w = num[T_POWER_LIMIT];
	if ((pt = last_set(tl, T_ECC, t)))
		s->ecc_uncorrected = pt->ecc;
	for (size_t k = 0; k < tl->n && tl->p[k].at <= t; k++) {
		if (!(tl->p[k].set & (1u << T_XID)))
			continue;
		s->xid_count++;
		s->last_xid = tl->p[k].xid;
		if (egs_xid_fatal(tl->p[k].xid))
			s->fatal_xid = tl->p[k].xid;
	}
	pt = last_set(tl, T_LOST, t);
	if (pt && pt->lost) {
		memset(s, 0, sizeof(*s));
		s->lost = true;
	}
}

static bool node_silent(const struct mock_node *m, int64_t t)
{
	const struct tl_point *pt = last_set(&m->tl, T_SILENT, t);
	return pt && pt->silent;
}

static enum egs_health mock_sample(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_sample *out,
				   char *why, size_t whysz)
{
	const struct mock *mk = d->impl;
	const struct mock_node *m = &mk->nodes[node];
	const struct egs_dev_node *n = &d->nodes[node];
	int64_t t = now - mk->start;

	if (node_silent(m, t)) {
		snprintf(why, whysz, "node %s does not answer", n->name);
		return EGS_HEALTH_UNSCHEDULABLE;
	}
	for (int i = 0; i < n->gpu_count; i++)
		gpu_sample(n, i, &m->gpu[i], t, &out[i]);
	return EGS_HEALTH_HEALTHY;
}

static enum egs_err mock_processes(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_proc *out,
				   size_t max, size_t *n)
{
	const struct mock *mk = d->impl;
	const struct mock_node *m = &mk->nodes[node];
	int64_t t = now - mk->start;

	if (node_silent(m, t))
		return EGS_ERR_IO;
	for (int i = 0; i < d->nodes[node].gpu_count; i++) {
		const struct tl_point *lost = last_set(&m->gpu[i], T_LOST, t);
		const struct tl_point *pt = last_set(&m->gpu[i], T_PROCS, t);
		if ((lost && lost->lost) || !pt)
			continue;
		for (size_t k = 0; k < pt->n_procs; k++, (*n)++) {
			if (*n < max) {
				out[*n] = pt->procs[k];
				out[*n].gpu = i;
			}
		}
	}
	return EGS_OK;
}

static void timeline_free(struct timeline *tl)
{
	for (size_t i = 0; i < tl->n; i++)
		egs_free(tl->p[i].procs);
	egs_free(tl->p);
}

static void mock_free(struct egs_devices *d)
{
	struct mock *mk = d->impl;

	if (!mk)
		return;
	for (size_t i = 0; mk->nodes && i < d->n_nodes; i++) {
		timeline_free(&mk->nodes[i].tl);
		for (int g = 0; mk->nodes[i].gpu && g < d->nodes[i].gpu_count; g++)
			timeline_free(&mk->nodes[i].gpu[g]);
		egs_free(mk->nodes[i].gpu);
	}
	egs_free(mk->nodes);
	egs_free(mk);
}

static const struct egs_devices_ops mock_ops = {
	.name = "mock",
	.sample = mock_sample,
	.processes = mock_processes,
	.free_impl = mock_free,
};

void egs_devices_mock_set_start(struct egs_devices *d, int64_t start)
{
	struct mock *mk = d->impl;

	EGS_ASSERT(d->ops == &mock_ops);
	mk->start = start;
}

/* ---- loading ---- */

/* Parses with an already set-up parser; shared by the file and the string entry points. */
static enum egs_err load(yaml_parser_t *parser, const char *source, const char *cluster,
			 struct egs_devices **out, char *err, size_t errsz)
{
	enum egs_err rc = EGS_ERR_INVALID;
	struct parse p = {.src = source, .cluster = cluster, .err = err, .errsz = errsz};
	struct egs_devices *d = NULL;
	struct mock *mk;
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
	d = egs__devices_new(&mock_ops);
	d->impl = mk = egs_calloc(1, sizeof(*mk));
	mk->start = (int64_t)time(NULL);
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

void egs_devices_mock_uuid(const char *cluster, const char *node, int index, char *buf, size_t n)
{
	char idx[16];
	uint64_t h = EGS_FNV_OFFSET, a, b;

	snprintf(idx, sizeof(idx), "%d", index);
	h = egs_fnv1a(h, cluster, strlen(cluster) + 1); /* the NULs separate the fields */
	h = egs_fnv1a(h, node, strlen(node) + 1);
	h = egs_fnv1a_str(h, idx);
	a = mix64(h);
	b = mix64(h ^ 0x9e3779b97f4a7c15ULL);
	snprintf(buf, n, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)((a >> 16) & 0xffff),
		 (unsigned)(a & 0xffff), (unsigned)(b >> 48), (unsigned long long)(b & 0xffffffffffffULL));
}
