/*
 * k8s_pods.c: the pods the kubernetes backend reports (k8s_obs.h): the pod cache's trim, and from that
 * cache and dcgm-exporter's pod labels the workloads of each managed node and the slice's GPU pods that
 * wait for nodes.  Reads caches only; no API calls.
 *
 * A GPU pod of a slice namespace that the scheduler cannot place yet is Pending without a node: it is
 * what a user sees as "waiting for its GPR" (the admission webhook gave it an affinity to its slice's
 * nodes, which exist only once a GPR is provisioned).  egsd shows those in its workloads view.
 */
#include "agent/k8s_internal.h"

#include "core/map.h"

#include <string.h>

static json_t *get2(json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

static bool kept_label(const char *k)
{
	return !strncmp(k, "egs.io/", 7) || !strcmp(k, "model") || !strcmp(k, "app") || !strcmp(k, "app.kubernetes.io/name");
}

bool egs_k8s_pod_is_dcgm(json_t *pod)
{
	json_t *labels = get2(pod, "metadata", "labels");
	const char *a = json_string_value(json_object_get(labels, "app.kubernetes.io/name"));
	const char *b = json_string_value(json_object_get(labels, "app"));
	return (a && !strcmp(a, "dcgm-exporter")) || (b && !strcmp(b, "nvidia-dcgm-exporter"));
}

/* The port of the container port named "metrics", or 0. */
static json_int_t metrics_port(json_t *pod)
{
	json_t *c, *p;
	size_t i, j;
	json_array_foreach(get2(pod, "spec", "containers"), i, c) {
		json_array_foreach(json_object_get(c, "ports"), j, p) {
			const char *name = json_string_value(json_object_get(p, "name"));
			if (name && !strcmp(name, "metrics") && json_is_integer(json_object_get(p, "containerPort")))
				return json_integer_value(json_object_get(p, "containerPort"));
		}
	}
	return 0;
}

/* The PodScheduled condition's reason and message into o (when False). */
static void sched_condition(json_t *pod, json_t *o)
{
	json_t *c;
	size_t i;
	json_array_foreach(get2(pod, "status", "conditions"), i, c) {
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));
		if (!t || strcmp(t, "PodScheduled") || !s || strcmp(s, "False"))
			continue;
		json_t *r = json_object_get(c, "reason"), *m = json_object_get(c, "message");
		if (json_is_string(r))
			json_object_set(o, "reason", r);
		if (json_is_string(m))
			json_object_set_new(o, "message", json_stringn(json_string_value(m),
								     json_string_length(m) < 256 ? json_string_length(m) : 256));
	}
}

json_t *egs_k8s_pod_trim(json_t *pod)
{
	json_t *md = json_object_get(pod, "metadata");
	json_t *out = json_pack("{s:{s:O?, s:O?, s:O?}}", "metadata", "name", json_object_get(md, "name"), "namespace",
				json_object_get(md, "namespace"), "resourceVersion", json_object_get(md, "resourceVersion"));
	int gpus = egs_k8s_pod_gpus(pod);
	bool dcgm = egs_k8s_pod_is_dcgm(pod);

	EGS_ASSERT(out);
	if (!gpus && !dcgm) {
		/* Only the phase: slice access counts the pods still running per namespace (k8s_slice.c). */
		if (json_is_string(get2(pod, "status", "phase")))
			json_object_set_new(out, "status", json_pack("{s:O}", "phase", get2(pod, "status", "phase")));
		return out;
	}
	json_t *labels = json_object(), *v, *st = json_object_get(pod, "status");
	const char *k;
	json_object_foreach(json_object_get(md, "labels"), k, v)
		if (kept_label(k) && json_is_string(v))
			json_object_set(labels, k, v);
	json_object_set_new(json_object_get(out, "metadata"), "labels", labels);
	if (json_is_string(json_object_get(md, "creationTimestamp")))
		json_object_set(json_object_get(out, "metadata"), "creationTimestamp", json_object_get(md, "creationTimestamp"));
	json_object_set_new(out, "spec", json_object());
	if (json_is_string(get2(pod, "spec", "nodeName")))
		json_object_set(json_object_get(out, "spec"), "nodeName", get2(pod, "spec", "nodeName"));
	json_t *ost = json_object();
	if (json_is_string(json_object_get(st, "phase")))
		json_object_set(ost, "phase", json_object_get(st, "phase"));
	if (json_is_string(json_object_get(st, "podIP")))
		json_object_set(ost, "podIP", json_object_get(st, "podIP"));
	sched_condition(pod, ost);
	json_object_set_new(out, "status", ost);
	json_object_set_new(out, "egsGpus", json_integer(gpus));
	if (dcgm && metrics_port(pod))
		json_object_set_new(out, "egsMetricsPort", json_integer(metrics_port(pod)));
	return out;
}

/* ---- workloads ---- */

struct walk {
	struct egs_map index; /* node name -> its position + 1 (as a pointer) */
	json_t **nodes;
	struct egs_vec pending; /* json_t * (owned), waiting pods before the slice check */
};

static const char *str(json_t *o, const char *a, const char *b)
{
	return json_string_value(b ? get2(o, a, b) : json_object_get(o, a));
}

static void walk_pod(void *arg, const char *key, json_t *pod)
{
	struct walk *w = arg;
	json_int_t gpus = json_integer_value(json_object_get(pod, "egsGpus"));
	const char *phase = str(pod, "status", "phase"), *node = str(pod, "spec", "nodeName");
	const char *name = str(pod, "metadata", "name"), *ns = str(pod, "metadata", "namespace");

	(void)key;
	if (gpus <= 0 || !phase || !name || !ns || (strcmp(phase, "Pending") && strcmp(phase, "Running")))
		return;
	if (node && *node) {
		uintptr_t at = (uintptr_t)egs_map_get(&w->index, node);
		if (!at || json_array_size(w->nodes[at - 1]) >= 256)
			return;
		json_array_append_new(w->nodes[at - 1],
				      json_pack("{s:s, s:s, s:O, s:s, s:I, s:[]}", "name", name, "namespace", ns, "labels",
						get2(pod, "metadata", "labels"), "phase", phase, "gpuRequest", gpus, "gpus"));
		return;
	}
	if (strcmp(phase, "Pending") || w->pending.len >= 4 * EGS_K8S_PENDING_MAX)
		return;
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s}", "name", name, "namespace", ns, "phase", phase, "gpuRequest",
			      gpus, "since", str(pod, "metadata", "creationTimestamp") ? str(pod, "metadata", "creationTimestamp") : "");
	json_t *st = json_object_get(pod, "status");
	if (json_object_get(st, "reason"))
		json_object_set(o, "reason", json_object_get(st, "reason"));
	if (json_object_get(st, "message"))
		json_object_set(o, "message", json_object_get(st, "message"));
	egs_vec_push(&w->pending, o);
}

struct dcgm_pods {
	json_t *list;
	const struct egs_dev_node *node;
};

/* Adds GPU gpu's UUID to the workload ns/pod of the node's list (a new entry when the cache lacks it). */
static void add_dcgm_pod(void *arg, const char *ns, const char *pod, int gpu)
{
	struct dcgm_pods *dp = arg;
	json_t *wl, *match = NULL;
	size_t i;

	if (gpu >= dp->node->gpu_count)
		return;
	json_array_foreach(dp->list, i, wl) {
		if (!strcmp(str(wl, "name", NULL), pod) && !strcmp(str(wl, "namespace", NULL), ns))
			match = wl;
	}
	if (!match) {
		if (json_array_size(dp->list) >= 256)
			return;
		match = json_pack("{s:s, s:s, s:[]}", "name", pod, "namespace", ns, "gpus");
		json_array_append_new(dp->list, match);
	}
	json_array_append_new(json_object_get(match, "gpus"), json_string(dp->node->gpus[gpu].uuid));
}

static int by_since(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	int c = strcmp(str(x, "since", NULL), str(y, "since", NULL));
	return c ? c : strcmp(str(x, "name", NULL), str(y, "name", NULL));
}

void egs_k8s_workloads(struct egs_k8s *k, const struct egs_devices *d, json_t **nodes, json_t **pending)
{
	struct walk w = { .nodes = nodes };

	egs_map_init(&w.index);
	for (size_t i = 0; i < d->n_nodes; i++) {
		nodes[i] = json_array();
		egs_map_put(&w.index, d->nodes[i].name, (void *)(uintptr_t)(i + 1));
	}
	egs_kube_reflector_foreach(k->pods, walk_pod, &w);
	for (size_t i = 0; k->dcgm && i < d->n_nodes; i++) {
		struct dcgm_pods dp = { nodes[i], &d->nodes[i] };
		egs_k8s_dcgm_pods(k->dcgm, d->nodes[i].name, add_dcgm_pod, &dp);
	}
	if (w.pending.len > 1)
		qsort(w.pending.items, w.pending.len, sizeof(void *), by_since);
	*pending = json_array();
	for (size_t i = 0; i < w.pending.len; i++) {
		json_t *o = w.pending.items[i];
		char ws[EGS_NAME_MAX];
		/* After the walk: the namespace cache has its own lock, never taken inside the pod cache's. */
		if (json_array_size(*pending) < EGS_K8S_PENDING_MAX &&
		    egs_backend_k8s_slice_of(&k->base, str(o, "namespace", NULL), ws, sizeof(ws))) {
			json_object_set_new(o, "workspace", json_string(ws));
			json_array_append(*pending, o);
		}
		json_decref(o);
	}
	egs_vec_cleanup(&w.pending);
	egs_map_cleanup(&w.index);
}
