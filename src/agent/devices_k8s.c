/*
 * devices_k8s.c: the device view of the kubernetes backend (egs_backend_k8s_devices()): the managed GPU
 * nodes in the node cache when the view is made (a fixed list, as devices.h requires; the agent makes
 * a new view and registers again when the set changes, see egs_backend_k8s_signature()), with each
 * sample's health read from the node object of that moment.
 *
 * A node that left the cluster is Unschedulable (the agent leaves it out of heartbeats) until the
 * next view drops it.  GPU metrics come from dcgm-exporter (k8s_dcgm.c) by GPU index, and the workloads
 * from the pod cache (k8s_pods.c); a node without a fresh scrape is sampled with no metrics (health only).
 */
#include "agent/k8s_internal.h"

#include <stdio.h>
#include <string.h>

struct view {
	struct egs_k8s *k; /* borrowed */
};

static void read_node(void *arg, json_t *obj)
{
	struct egs_k8s_node *n = arg;
	if (!egs_k8s_node_read(obj, n))
		n->name[0] = '\0';
}

static enum egs_health k8s_sample(struct egs_devices *d, size_t i, int64_t now, struct egs_gpu_sample *out,
				  char *why, size_t whysz)
{
	struct view *v = d->impl;
	struct egs_k8s_node n;

	(void)now;
	/* Read in place under the cache's lock: this runs for every node every sample interval. */
	if (!egs_kube_reflector_read(v->k->nodes, d->nodes[i].name, read_node, &n) || !n.name[0]) {
		snprintf(why, whysz, "node %s left the cluster", d->nodes[i].name);
		return EGS_HEALTH_UNSCHEDULABLE;
	}
	egs_strlcpy(why, n.why, whysz);
	egs_k8s_dcgm_sample(v->k->dcgm, d->nodes[i].name, d->nodes[i].gpu_count, out);
	return n.health;
}

static void k8s_workloads(struct egs_devices *d, int64_t now, json_t **nodes, json_t **pending)
{
	struct view *v = d->impl;
	(void)now;
	egs_k8s_workloads(v->k, d, nodes, pending);
}

static void view_free(struct egs_devices *d)
{
	egs_free(d->impl);
}

static const struct egs_devices_ops k8s_devices_ops = {
	.name = "kubernetes",
	.sample = k8s_sample,
	.processes = NULL,
	.workloads = k8s_workloads,
	.free_impl = view_free,
};

struct collect {
	struct egs_vec managed;   /* struct egs_k8s_node * */
	struct egs_vec unmanaged; /* struct egs_k8s_node * */
	uint64_t sig;
};

static void collect_node(void *arg, const char *key, json_t *obj)
{
	struct collect *c = arg;
	struct egs_k8s_node n;
	(void)key;
	if (!egs_k8s_node_read(obj, &n) || !n.gpu || !n.name[0])
		return;
	struct egs_k8s_node *copy = egs_malloc(sizeof(*copy));
	*copy = n;
	egs_vec_push(n.managed ? &c->managed : &c->unmanaged, copy);
}

static int cmp_name(const void *a, const void *b)
{
	const struct egs_k8s_node *x = *(const struct egs_k8s_node *const *)a, *y = *(const struct egs_k8s_node *const *)b;
	return strcmp(x->name, y->name);
}

void egs_backend_k8s_devices(struct egs_backend *b, struct egs_devices **out, struct egs_k8s_node **unmanaged,
			     size_t *n_unmanaged)
{
	struct egs_k8s *k = (struct egs_k8s *)b;
	struct egs_devices *d = egs__devices_new(&k8s_devices_ops);
	struct collect c = {0};
	struct view *v = egs_calloc(1, sizeof(*v));

	v->k = k;
	d->impl = v;
	egs_kube_reflector_foreach(k->nodes, collect_node, &c);
	if (c.managed.len > 1) /* an empty vector's items is NULL, which qsort must not get */
		qsort(c.managed.items, c.managed.len, sizeof(void *), cmp_name);
	if (c.unmanaged.len > 1)
		qsort(c.unmanaged.items, c.unmanaged.len, sizeof(void *), cmp_name);
	d->nodes = egs_calloc(c.managed.len + 1, sizeof(*d->nodes));
	d->n_nodes = c.managed.len;
	for (size_t i = 0; i < c.managed.len; i++) {
		egs_k8s_dev_node(c.managed.items[i], k->cluster, &d->nodes[i]);
		egs_free(c.managed.items[i]);
	}
	*unmanaged = egs_calloc(c.unmanaged.len + 1, sizeof(**unmanaged));
	*n_unmanaged = c.unmanaged.len;
	for (size_t i = 0; i < c.unmanaged.len; i++) {
		(*unmanaged)[i] = *(struct egs_k8s_node *)c.unmanaged.items[i];
		egs_free(c.unmanaged.items[i]);
	}
	egs_vec_cleanup(&c.managed);
	egs_vec_cleanup(&c.unmanaged);
	*out = d;
}

/* FNV-1a over s, continuing from h. */
static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h * 1099511628211ull; /* a separator */
}

static void sign_node(void *arg, const char *key, json_t *obj)
{
	uint64_t *sig = arg, h = 14695981039346656037ull;
	struct egs_k8s_node n;
	char num[64];
	(void)key;
	if (!egs_k8s_node_read(obj, &n) || !n.gpu || !n.name[0])
		return;
	snprintf(num, sizeof(num), "%d/%lld/%d", n.gpu_count, (long long)n.memory_mib, n.managed);
	h = fnv(fnv(fnv(fnv(fnv(fnv(fnv(h, n.name), n.model), n.instance_type), n.region), n.zone), n.cloud_provider), num);
	*sig += h * 0x9E3779B97F4A7C15ull; /* order-independent: the cache is a hash map */
}

uint64_t egs_backend_k8s_signature(struct egs_backend *b)
{
	uint64_t sig = 0;
	egs_kube_reflector_foreach(((struct egs_k8s *)b)->nodes, sign_node, &sig);
	return sig;
}
