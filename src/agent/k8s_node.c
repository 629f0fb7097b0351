/*
 * k8s_node.c: reading nodes and pods, and building patches, evictions and events (k8s_node.h).
 * Pure functions of JSON: no I/O, no clock.
 *
 * Quantities: GPU counts are integers in Kubernetes ("8"); a malformed one counts as 0, which makes
 * the node either not a GPU node or, for allocatable, Unhealthy ("0 of 8 GPUs allocatable").
 */
#include "agent/k8s_node.h"

#include "core/util.h"

#include <stdio.h>
#include <string.h>

static json_t *path2(json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

static const char *label(json_t *node, const char *key)
{
	return json_string_value(json_object_get(path2(node, "metadata", "labels"), key));
}

static const char *annotation(json_t *node, const char *key)
{
	return json_string_value(json_object_get(path2(node, "metadata", "annotations"), key));
}

static void copy(char *dst, size_t n, const char *src)
{
	if (!egs_strlcpy(dst, src ? src : "", n))
		dst[0] = '\0'; /* a value too long for egsd is no value */
}

/* An integer quantity ("8"), or 0 when absent or malformed. */
static int64_t quantity(json_t *v)
{
	int64_t out = 0;
	const char *s = json_string_value(v);
	if (json_is_integer(v))
		return json_integer_value(v);
	if (!s || !egs_int_parse(s, 0, 1 << 20, &out))
		return 0;
	return out;
}

/* The cloud provider from spec.providerID ("aws:///us-east-1a/i-0abc" -> "aws"). */
static void provider(json_t *node, char *out, size_t n)
{
	const char *id = json_string_value(path2(node, "spec", "providerID"));
	const char *colon = id ? strchr(id, ':') : NULL;
	out[0] = '\0';
	if (colon && (size_t)(colon - id) < n) {
		memcpy(out, id, (size_t)(colon - id));
		out[colon - id] = '\0';
	}
}

/* Health from the conditions, taints, cordon and allocatable GPUs. */
static void health(json_t *node, struct egs_k8s_node *n)
{
	json_t *conds = path2(node, "status", "conditions"), *taints = path2(node, "spec", "taints"), *c;
	const char *ready = NULL, *reason = "";
	size_t i;

	n->health = EGS_HEALTH_HEALTHY;
	n->why[0] = '\0';
	json_array_foreach(conds, i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		if (t && strcmp(t, "Ready") == 0) {
			ready = json_string_value(json_object_get(c, "status"));
			reason = json_string_value(json_object_get(c, "reason")) ? json_string_value(json_object_get(c, "reason")) : "";
		}
	}
	json_array_foreach(taints, i, c) {
		const char *k = json_string_value(json_object_get(c, "key"));
		if (k && (strcmp(k, "node.kubernetes.io/not-ready") == 0 || strcmp(k, "node.kubernetes.io/unreachable") == 0)) {
			n->health = EGS_HEALTH_UNHEALTHY;
			snprintf(n->why, sizeof(n->why), "the node carries the taint %s", k);
		}
	}
	if (!ready || strcmp(ready, "True") != 0) {
		n->health = EGS_HEALTH_UNHEALTHY;
		snprintf(n->why, sizeof(n->why), "the node is NotReady (Ready=%s%s%s)", ready ? ready : "missing",
			 *reason ? ": " : "", reason);
	} else if (n->unschedulable && !n->our_cordon) {
		n->health = EGS_HEALTH_UNHEALTHY;
		snprintf(n->why, sizeof(n->why), "the node was cordoned outside EGS");
	} else if (n->health == EGS_HEALTH_HEALTHY && n->gpu_allocatable < n->gpu_count) {
		n->health = EGS_HEALTH_UNHEALTHY;
		snprintf(n->why, sizeof(n->why), "only %d of %d GPUs are allocatable", n->gpu_allocatable,
			 n->gpu_count);
	}
}

bool egs_k8s_node_read(json_t *node, struct egs_k8s_node *n)
{
	const char *name = json_string_value(path2(node, "metadata", "name"));
	const char *product = label(node, "nvidia.com/gpu.product"), *managed = label(node, EGS_K8S_LABEL_MANAGED);
	json_t *cap = path2(node, "status", "capacity"), *alloc = path2(node, "status", "allocatable"), *t;
	size_t i;

	memset(n, 0, sizeof(*n));
	if (!json_is_object(node) || !name || !*name)
		return false;
	copy(n->name, sizeof(n->name), name);
	n->gpu_count = (int)quantity(json_object_get(cap, EGS_K8S_GPU));
	if (n->gpu_count == 0 && label(node, "nvidia.com/gpu.count"))
		n->gpu_count = (int)quantity(json_object_get(path2(node, "metadata", "labels"), "nvidia.com/gpu.count"));
	n->gpu_allocatable = json_object_get(alloc, EGS_K8S_GPU) ? (int)quantity(json_object_get(alloc, EGS_K8S_GPU)) :
								   n->gpu_count;
	n->gpu = n->gpu_count > 0 || (product && *product);
	copy(n->model, sizeof(n->model), product && *product ? product : "nvidia-gpu");
	n->memory_mib = quantity(json_object_get(path2(node, "metadata", "labels"), "nvidia.com/gpu.memory"));
	/* egsd needs a count (1-64) and the memory per GPU; a node without them is listed, not managed. */
	n->managed = n->gpu && !(managed && strcmp(managed, "false") == 0) && n->gpu_count >= 1 && n->gpu_count <= 64 &&
		     n->memory_mib >= 1;
	copy(n->instance_type, sizeof(n->instance_type), label(node, "node.kubernetes.io/instance-type"));
	if (!n->instance_type[0])
		copy(n->instance_type, sizeof(n->instance_type), "unknown");
	copy(n->region, sizeof(n->region), label(node, "topology.kubernetes.io/region"));
	copy(n->zone, sizeof(n->zone), label(node, "topology.kubernetes.io/zone"));
	provider(node, n->cloud_provider, sizeof(n->cloud_provider));
	n->unschedulable = json_is_true(path2(node, "spec", "unschedulable"));
	n->our_cordon = annotation(node, EGS_K8S_ANN_CORDONED) && strcmp(annotation(node, EGS_K8S_ANN_CORDONED), "true") == 0;
	json_array_foreach(path2(node, "spec", "taints"), i, t) {
		const char *k = json_string_value(json_object_get(t, "key"));
		const char *e = json_string_value(json_object_get(t, "effect"));
		if (k && e && strcmp(k, EGS_K8S_TAINT_KEY) == 0 && strcmp(e, "NoSchedule") == 0)
			n->tainted = true;
	}
	copy(n->slice, sizeof(n->slice), label(node, EGS_K8S_LABEL_SLICE));
	copy(n->gpr, sizeof(n->gpr), label(node, EGS_K8S_LABEL_GPR));
	health(node, n);
	return true;
}

/* Is a node label one the backend reads? */
static bool label_read(const char *key)
{
	static const char *const prefixes[] = {"nvidia.com/gpu.", "kubeslice.io/", "topology.kubernetes.io/",
					       "node.kubernetes.io/instance-type"};
	for (size_t i = 0; i < EGS_ARRAY_LEN(prefixes); i++)
		if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* Copies key of from into to when present. */
static void keep(json_t *to, json_t *from, const char *key)
{
	json_t *v = json_object_get(from, key);
	if (v)
		json_object_set(to, key, v);
}

json_t *egs_k8s_node_trim(json_t *node)
{
	json_t *md = json_object_get(node, "metadata"), *spec = json_object_get(node, "spec");
	json_t *st = json_object_get(node, "status"), *c, *ann = json_object(), *conds = json_array();
	json_t *out = json_pack("{s:{}, s:{}, s:{s:{}, s:{}, s:o}}", "metadata", "spec", "status", "capacity",
				"allocatable", "conditions", conds);
	json_t *omd = json_object_get(out, "metadata"), *ost = json_object_get(out, "status"), *v;
	const char *key;
	size_t i;

	keep(omd, md, "name");
	keep(omd, md, "resourceVersion");
	keep(omd, md, "deletionTimestamp");
	json_t *labels = json_object();
	json_object_foreach(json_object_get(md, "labels"), key, v)
		if (label_read(key))
			json_object_set(labels, key, v);
	json_object_set_new(omd, "labels", labels);
	json_object_foreach(json_object_get(md, "annotations"), key, v)
		if (strncmp(key, "egs.kubeslice.io/", 17) == 0)
			json_object_set(ann, key, v);
	json_object_set_new(omd, "annotations", ann);
	keep(json_object_get(out, "spec"), spec, "taints");
	keep(json_object_get(out, "spec"), spec, "unschedulable");
	keep(json_object_get(out, "spec"), spec, "providerID");
	keep(json_object_get(ost, "capacity"), json_object_get(st, "capacity"), EGS_K8S_GPU);
	keep(json_object_get(ost, "allocatable"), json_object_get(st, "allocatable"), EGS_K8S_GPU);
	json_array_foreach(json_object_get(st, "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		if (!t || strcmp(t, "Ready") != 0)
			continue;
		json_t *r = json_object();
		keep(r, c, "type");
		keep(r, c, "status");
		keep(r, c, "reason");
		json_array_append_new(conds, r);
	}
	return out;
}

json_t *egs_k8s_namespace_trim(json_t *ns)
{
	json_t *md = json_object_get(ns, "metadata"), *out = json_pack("{s:{}}", "metadata");
	keep(json_object_get(out, "metadata"), md, "name");
	keep(json_object_get(out, "metadata"), md, "resourceVersion");
	keep(json_object_get(out, "metadata"), md, "labels");
	keep(json_object_get(out, "metadata"), md, "deletionTimestamp");
	return out;
}

void egs_k8s_dev_node(const struct egs_k8s_node *n, const char *cluster, struct egs_dev_node *out)
{
	memset(out, 0, sizeof(*out));
	out->name = egs_strdup(n->name);
	out->instance_type = egs_strdup(n->instance_type);
	out->gpu_model = egs_strdup(n->model);
	out->cloud_provider = egs_strdup(n->cloud_provider);
	out->region = egs_strdup(n->region);
	out->zone = egs_strdup(n->zone);
	out->address = egs_strdup("");
	out->gpu_count = n->gpu_count;
	out->memory_mib = n->memory_mib;
	out->gpus = egs_calloc((size_t)n->gpu_count + 1, sizeof(*out->gpus));
	for (int g = 0; g < n->gpu_count; g++) {
		out->gpus[g].index = g;
		egs_devices_mock_uuid(cluster, n->name, g, out->gpus[g].uuid, sizeof(out->gpus[g].uuid));
	}
}

bool egs_k8s_node_attachment(json_t *node, struct egs_attachment *out)
{
	const char *gpr = label(node, EGS_K8S_LABEL_GPR), *ws = label(node, EGS_K8S_LABEL_SLICE);
	const char *ns = annotation(node, EGS_K8S_ANN_NAMESPACES), *name = json_string_value(path2(node, "metadata", "name"));

	memset(out, 0, sizeof(*out));
	if (!gpr || !*gpr || !name)
		return false;
	out->node = egs_strdup(name);
	out->gpr_id = egs_strdup(gpr);
	out->workspace = egs_strdup(ws ? ws : "");
	out->start_time = egs_strdup(annotation(node, EGS_K8S_ANN_START) ? annotation(node, EGS_K8S_ANN_START) : "");
	out->exit_time = egs_strdup(annotation(node, EGS_K8S_ANN_EXIT) ? annotation(node, EGS_K8S_ANN_EXIT) : "");
	out->attached_at = egs_strdup(annotation(node, EGS_K8S_ANN_ATTACHED) ? annotation(node, EGS_K8S_ANN_ATTACHED) : "");
	for (const char *p = ns ? ns : ""; *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len > 0) {
			char *one = egs_strndup(p, len);
			egs_strlist_add(&out->namespaces, one);
			egs_free(one);
		}
		p += len + (comma ? 1 : 0);
	}
	return true;
}

json_t *egs_k8s_patch_attach(const struct egs_attach_req *req, const char *now)
{
	size_t n = 1;
	for (size_t i = 0; i < req->namespaces->n; i++)
		n += strlen(req->namespaces->v[i]) + 1;
	char *ns = egs_calloc(n, 1);
	for (size_t i = 0, o = 0; i < req->namespaces->n; i++) {
		size_t k = strlen(req->namespaces->v[i]);
		if (i)
			ns[o++] = ',';
		memcpy(ns + o, req->namespaces->v[i], k);
		o += k;
	}
	json_t *p = json_pack("{s:{s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s}}}", "metadata", "labels", EGS_K8S_LABEL_SLICE,
			      req->workspace, EGS_K8S_LABEL_GPR, req->gpr_id, "annotations", EGS_K8S_ANN_NAMESPACES, ns,
			      EGS_K8S_ANN_START, req->start_time ? req->start_time : "", EGS_K8S_ANN_EXIT,
			      req->exit_time ? req->exit_time : "", EGS_K8S_ANN_ATTACHED, now);
	egs_free(ns);
	EGS_ASSERT(p);
	return p;
}

json_t *egs_k8s_patch_detach(bool uncordon)
{
	json_t *p = json_pack("{s:{s:{s:n, s:n}, s:{s:n, s:n, s:n, s:n}}}", "metadata", "labels", EGS_K8S_LABEL_SLICE,
			      EGS_K8S_LABEL_GPR, "annotations", EGS_K8S_ANN_NAMESPACES, EGS_K8S_ANN_START,
			      EGS_K8S_ANN_EXIT, EGS_K8S_ANN_ATTACHED);
	EGS_ASSERT(p);
	if (uncordon) {
		json_object_set_new(json_object_get(json_object_get(p, "metadata"), "annotations"), EGS_K8S_ANN_CORDONED,
				    json_null());
		json_object_set_new(p, "spec", json_pack("{s:n}", "unschedulable"));
	}
	return p;
}

json_t *egs_k8s_patch_cordon(void)
{
	json_t *p = json_pack("{s:{s:{s:s}}, s:{s:b}}", "metadata", "annotations", EGS_K8S_ANN_CORDONED, "true", "spec",
			      "unschedulable", 1);
	EGS_ASSERT(p);
	return p;
}

json_t *egs_k8s_patch_taint(json_t *node, bool want)
{
	json_t *taints = json_array(), *t;
	const char *rv = json_string_value(path2(node, "metadata", "resourceVersion"));
	bool has = false;
	size_t i;

	json_array_foreach(path2(node, "spec", "taints"), i, t) {
		const char *k = json_string_value(json_object_get(t, "key"));
		if (k && strcmp(k, EGS_K8S_TAINT_KEY) == 0) {
			const char *v = json_string_value(json_object_get(t, "value"));
			const char *e = json_string_value(json_object_get(t, "effect"));
			if (!(want && v && e && !strcmp(v, EGS_K8S_TAINT_VALUE) && !strcmp(e, "NoSchedule")) || has)
				continue; /* a stale EGS taint is replaced */
			has = true;
		}
		json_array_append(taints, t);
	}
	if (want == has && (want || json_array_size(taints) == json_array_size(path2(node, "spec", "taints")))) {
		json_decref(taints);
		return NULL;
	}
	if (want)
		json_array_append_new(taints, json_pack("{s:s, s:s, s:s}", "key", EGS_K8S_TAINT_KEY, "value",
							EGS_K8S_TAINT_VALUE, "effect", "NoSchedule"));
	return json_pack("{s:{s:s}, s:{s:o}}", "metadata", "resourceVersion", rv ? rv : "", "spec", "taints", taints);
}

json_t *egs_k8s_patch_namespace(const char *workspace)
{
	return json_pack("{s:{s:{s:s}}}", "metadata", "labels", EGS_K8S_LABEL_SLICE, workspace);
}

json_t *egs_k8s_namespace(const char *name, const char *workspace)
{
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}}", "apiVersion", "v1", "kind", "Namespace", "metadata", "name",
			 name, "labels", EGS_K8S_LABEL_SLICE, workspace, EGS_K8S_LABEL_CREATED_BY, EGS_K8S_AGENT);
}

json_t *egs_k8s_eviction(const char *ns, const char *name, int grace_s)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i}}", "apiVersion", "policy/v1", "kind", "Eviction", "metadata",
			 "name", name, "namespace", ns, "deleteOptions", "gracePeriodSeconds", grace_s);
}

bool egs_k8s_pod_daemonset(json_t *pod)
{
	json_t *o;
	size_t i;
	json_array_foreach(path2(pod, "metadata", "ownerReferences"), i, o) {
		const char *kind = json_string_value(json_object_get(o, "kind"));
		if (kind && strcmp(kind, "DaemonSet") == 0)
			return true;
	}
	return false;
}

bool egs_k8s_pod_tolerates_egs(json_t *pod)
{
	json_t *t;
	size_t i;
	json_array_foreach(path2(pod, "spec", "tolerations"), i, t) {
		const char *k = json_string_value(json_object_get(t, "key"));
		if (k && strcmp(k, EGS_K8S_TAINT_KEY) == 0)
			return true;
	}
	return false;
}

int egs_k8s_pod_gpus(json_t *pod)
{
	json_t *c;
	size_t i;
	int64_t sum = 0;
	json_array_foreach(path2(pod, "spec", "containers"), i, c) {
		json_t *res = json_object_get(c, "resources");
		json_t *v = json_object_get(json_object_get(res, "limits"), EGS_K8S_GPU);
		if (!v)
			v = json_object_get(json_object_get(res, "requests"), EGS_K8S_GPU);
		sum += quantity(v);
	}
	return sum > 1 << 20 ? 1 << 20 : (int)sum;
}

json_t *egs_k8s_event(const char *ns, const char *gpr_id, const char *reason, const char *message,
		      const char *type, const char *now, unsigned seq)
{
	char name[EGS_NAME_MAX * 2 + 32];
	snprintf(name, sizeof(name), "%s.%s.%x", gpr_id, now, seq);
	for (char *p = name; *p; p++)
		if (*p == ':' || *p == 'T' || *p == 'Z')
			*p = *p == ':' ? '-' : (char)(*p - 'A' + 'a'); /* names are lower-case RFC 1123 */
	json_t *e = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s},"
			      " s:s, s:s, s:i}",
			      "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", ns,
			      "labels", EGS_K8S_LABEL_GPR, gpr_id, "involvedObject", "apiVersion", "v1", "kind",
			      "Namespace", "name", ns, "namespace", ns, "reason", reason, "message", message, "type",
			      type, "source", "component", "egs-agent", "firstTimestamp", now, "lastTimestamp", now,
			      "count", 1);
	EGS_ASSERT(e);
	return e;
}
