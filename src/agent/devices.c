/*
 * devices.c: the backend-independent part of the device interface: dispatch and the node list.
 */
#include "agent/devices.h"

#include <stdlib.h>
#include <string.h>

enum egs_err egs_devices_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				struct egs_gpu_sample *out)
{
	EGS_ASSERT(node < d->n_nodes);
	return d->ops->sample(d, node, now, health, out);
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
		egs_free(n->gpus);
	}
	egs_free(d->nodes);
	egs_free(d);
}
