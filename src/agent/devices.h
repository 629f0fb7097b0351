/*
 * devices.h: the device backend interface of egs-agent: which nodes this agent serves, their GPUs,
 * and samples of those GPUs (power, temperature, utilization, memory used) plus node health.
 *
 * A backend is opened once; its node list is fixed from then on (the agent registers exactly that
 * list), so callers may keep pointers into it for the backend's lifetime.  Backends:
 *   - mock (devices_mock.c): nodes from a YAML file, deterministic samples; no GPU needed;
 *   - nvml (later): the local GPUs through NVML loaded with dlopen.
 * Sampling may be called from any one thread at a time per backend.
 */
#ifndef EGS_AGENT_DEVICES_H
#define EGS_AGENT_DEVICES_H

#include "core/common.h"
#include "core/model.h"

#define EGS_DEV_UUID_MAX 64 /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" is 40 */

struct egs_dev_gpu {
	char uuid[EGS_DEV_UUID_MAX];
	int index; /* 0 .. gpu_count-1, its position on the node */
};

/* One node as the agent registers it.  Strings are owned by the backend; optional ones are "". */
struct egs_dev_node {
	char *name;
	char *instance_type;
	char *gpu_model;
	char *cloud_provider;
	char *region;
	int gpu_count;
	int64_t memory_mib;      /* per GPU */
	struct egs_dev_gpu *gpus; /* gpu_count entries */
};

/* One sample of one GPU. */
struct egs_gpu_sample {
	double power_w;
	double temp_c;
	double util_pct;
	int64_t mem_used_mib;
};

struct egs_devices;

struct egs_devices_ops {
	const char *name;
	/* See egs_devices_sample(). */
	enum egs_err (*sample)(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
			       struct egs_gpu_sample *out);
	/* Frees what the backend added beyond struct egs_devices (may be NULL). */
	void (*free_impl)(struct egs_devices *d);
};

/* The common part of every device backend; nodes and n_nodes are read-only for callers. */
struct egs_devices {
	const struct egs_devices_ops *ops;
	struct egs_dev_node *nodes; /* n_nodes entries, owned */
	size_t n_nodes;
	void *impl; /* the backend's own state */
};

/*
 * Samples node number `node` (< d->n_nodes) at UNIX time now: stores its health in *health and one
 * sample per GPU in out[0 .. gpu_count-1] (caller's storage).  Returns EGS_ERR_IO when the device
 * could not be read; *health is then EGS_HEALTH_UNHEALTHY.
 */
enum egs_err egs_devices_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				struct egs_gpu_sample *out);

/* Returns the node named name, or NULL (borrowed; lives as long as d). */
const struct egs_dev_node *egs_devices_find(const struct egs_devices *d, const char *name);

/* Frees d and all its nodes.  egs_devices_free(NULL) is a no-op. */
void egs_devices_free(struct egs_devices *d);

/*
 * The mock backend.  Reads the devices YAML file at path (format: docs/internals/agent-protocol.md
 * and DESIGN.md Contracts).  GPUs without a uuid get egs_devices_mock_uuid(cluster, node, index).
 * On success stores a new backend in *out (caller frees with egs_devices_free()).  On failure returns
 * EGS_ERR_IO (unreadable file) or EGS_ERR_INVALID (bad YAML or content) and writes
 * "<path>:<line>: <what is wrong>" into err (errsz bytes).
 */
enum egs_err egs_devices_mock_load(const char *path, const char *cluster, struct egs_devices **out,
				   char *err, size_t errsz);

/* Like egs_devices_mock_load() but parses the len bytes of text; source names it in errors. */
enum egs_err egs_devices_mock_parse(const char *text, size_t len, const char *source, const char *cluster,
				    struct egs_devices **out, char *err, size_t errsz);

/*
 * Writes the generated UUID of GPU index of node in cluster into buf (at least 41 bytes):
 * "GPU-" and 32 hex digits grouped 8-4-4-4-12 like NVIDIA's.  It depends only on the three inputs,
 * so it is the same on every run and every machine.
 */
void egs_devices_mock_uuid(const char *cluster, const char *node, int index, char *buf, size_t n);

#endif
