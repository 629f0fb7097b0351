/*
 * devices.c: the backend-independent part of the device interface: dispatch under the backend's
 * lock, the health rules every backend shares, and the node list.
 *
 * The health rules live here, not in each backend, so that the mock and NVML agree on what makes a
 * node Unhealthy: fewer GPUs than expected, a lost GPU, a fatal XID, or uncorrectable ECC errors.  Temperature and power are not
 * health: egsd turns them into alerts with its own thresholds.
 */
#include "agent/devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* XIDs after which the GPU needs a reset or repair: 48 double-bit ECC, 62 micro-controller halt, 64
 * ECC row-remapper failure, 74 NVLink error, 79 fell off the bus, 92 high single-bit ECC rate, 95
 * uncontained ECC, 119/120 GSP timeout/error, 140 unrecovered ECC. */
static const int fatal_xids[] = {48, 62, 64, 74, 79, 92, 95, 119, 120, 140};

bool egs_xid_fatal(int xid)
{
	for (size_t i = 0; i < EGS_ARRAY_LEN(fatal_xids); i++)
		if (fatal_xids[i] == xid)
			return true;
	return false;
}

struct egs_devices *egs__devices_new(const struct egs_devices_ops *ops)
{
	struct egs_devices *d = egs_calloc(1, sizeof(*d));

	d->ops = ops;
	pthread_mutex_init(&d->mu, NULL);
	return d;
}

/* Applies the GPU rules to a node that answered; returns its health and writes the first reason. */
static enum egs_health gpu_rules(const struct egs_dev_node *n, const struct egs_gpu_sample *s, char *why,
				 size_t whysz)
{
	if (n->expected_gpus > n->gpu_count) {
		snprintf(why, whysz, "only %d of the %d expected GPUs were found", n->gpu_count, n->expected_gpus);
		return EGS_HEALTH_UNHEALTHY;
	}
	for (int i = 0; i < n->gpu_count; i++) {
		const char *uuid = n->gpus[i].uuid;
		int index = n->gpus[i].index; /* the number nvidia-smi shows */
		if (s[i].lost) {
			snprintf(why, whysz, "GPU %d (%s) fell off the bus", index, uuid);
			return EGS_HEALTH_UNHEALTHY;
		}
		if ((s[i].valid & EGS_GPU_XID) && s[i].fatal_xid) {
			snprintf(why, whysz, "GPU %d (%s) reported XID %d", index, uuid, s[i].fatal_xid);
			return EGS_HEALTH_UNHEALTHY;
		}
		if ((s[i].valid & EGS_GPU_ECC) && s[i].ecc_uncorrected > 0) {
			snprintf(why, whysz, "GPU %d (%s) has %lld uncorrectable ECC errors", index, uuid,
				 (long long)s[i].ecc_uncorrected);
			return EGS_HEALTH_UNHEALTHY;
		}
	}
	return EGS_HEALTH_HEALTHY;
}

enum egs_err egs_devices_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				char *why, size_t whysz, struct egs_gpu_sample *out)
{
	const struct egs_dev_node *n;
	char tmp[EGS_DEV_WHY_MAX];
	enum egs_health h;

	EGS_ASSERT(node < d->n_nodes);
	n = &d->nodes[node];
	if (!why) {
		why = tmp;
		whysz = sizeof(tmp);
	}
	why[0] = '\0';
	memset(out, 0, (size_t)n->gpu_count * sizeof(*out));
	pthread_mutex_lock(&d->mu);
	h = d->ops->sample(d, node, now, out, why, whysz);
	pthread_mutex_unlock(&d->mu);
	if (h != EGS_HEALTH_HEALTHY) {
		if (!why[0])
			snprintf(why, whysz, "node %s cannot be read", n->name);
		*health = h;
		return EGS_ERR_IO;
	}
	*health = gpu_rules(n, out, why, whysz);
	return EGS_OK;
}

enum egs_err egs_devices_processes(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_proc *out,
				   size_t max, size_t *n)
{
	enum egs_err rc;

	EGS_ASSERT(node < d->n_nodes);
	*n = 0;
	if (!d->ops->processes)
		return EGS_ERR_NOT_FOUND;
	pthread_mutex_lock(&d->mu);
	rc = d->ops->processes(d, node, now, out, max, n);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

bool egs_devices_workloads(struct egs_devices *d, int64_t now, json_t **nodes, json_t **pending)
{
	if (!d->ops->workloads)
		return false;
	pthread_mutex_lock(&d->mu);
	d->ops->workloads(d, now, nodes, pending);
	pthread_mutex_unlock(&d->mu);
	return true;
}

const struct egs_dev_node *egs_devices_find(const struct egs_devices *d, const char *name)
{
	for (size_t i = 0; i < d->n_nodes; i++)
		if (strcmp(d->nodes[i].name, name) == 0)
			return &d->nodes[i];
	return NULL;
}

void egs_devices_free(struct egs_devices *d)
{
	if (!d)
		return;
	if (d->ops && d->ops->free_impl)
		d->ops->free_impl(d);
	for (size_t i = 0; i < d->n_nodes; i++) {
		struct egs_dev_node *n = &d->nodes[i];
		egs_free(n->name);
		egs_free(n->instance_type);
		egs_free(n->gpu_model);
		egs_free(n->cloud_provider);
		egs_free(n->region);
		egs_free(n->zone);
		egs_free(n->address);
		egs_free(n->gpus);
	}
	egs_free(d->nodes);
	pthread_mutex_destroy(&d->mu);
	egs_free(d);
}
