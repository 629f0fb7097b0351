/*
 * devices.h: the device backend interface of egs-agent: which nodes this agent serves, their GPUs,
 * samples of those GPUs (power, temperature, utilization, memory, ECC and XID errors), the compute
 * processes on them, and node health derived from all that by one set of rules (devices.c).
 *
 * A backend is opened once; its node list is fixed from then on (the agent registers exactly that
 * list), so callers may keep pointers into it for the backend's lifetime.  Backends:
 *   - mock (devices_mock.c): nodes from a YAML file; idle samples, or scripted timelines per GPU and
 *     per node (a temperature ramp, a GPU that falls off the bus, a node that stops answering);
 *   - nvml (devices_nvml.c): the local GPUs through NVML loaded with dlopen, one node (this host).
 * The egs_devices_* calls take the backend's lock, so they may be called from any thread.
 */
#ifndef EGS_AGENT_DEVICES_H
#define EGS_AGENT_DEVICES_H

#include "core/common.h"
#include "core/model.h"

#include <jansson.h>
#include <pthread.h>

#define EGS_DEV_UUID_MAX 64    /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" is 40 */
#define EGS_DEV_ADDRESS_MAX 128 /* "host:port" */
#define EGS_DEV_PROC_NAME_MAX 32
#define EGS_DEV_WHY_MAX 160     /* room for a health reason */

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
	char *zone;               /* the kubernetes backend's topology.kubernetes.io/zone; NULL or "": none */
	char *address;            /* "host:port" where this node's agent answers peers, or "" */
	int gpu_count;
	int expected_gpus;        /* GPUs the host should have (nvml --expect-gpus); 0: gpu_count */
	int64_t memory_mib;       /* per GPU */
	struct egs_dev_gpu *gpus; /* gpu_count entries */
};

/* Bits of egs_gpu_sample.valid: which readings a backend could take.  A metric the device or the
 * library cannot give (a missing NVML symbol, NVML_ERROR_NOT_SUPPORTED) keeps its bit clear and its
 * field 0, and is left out of heartbeats; it never fails the sample. */
enum egs_gpu_metric {
	EGS_GPU_POWER = 1u << 0,
	EGS_GPU_POWER_LIMIT = 1u << 1,
	EGS_GPU_TEMP = 1u << 2,
	EGS_GPU_UTIL = 1u << 3,
	EGS_GPU_MEM_USED = 1u << 4,
	EGS_GPU_MEM_TOTAL = 1u << 5,
	EGS_GPU_ECC = 1u << 6,
	EGS_GPU_XID = 1u << 7,
};

/* One sample of one GPU. */
struct egs_gpu_sample {
	unsigned valid; /* EGS_GPU_* bits */
	bool lost;      /* the GPU does not answer any more (fell off the bus); nothing else is valid */
	double power_w;
	double power_limit_w; /* the enforced limit */
	double temp_c;
	double util_pct;
	int64_t mem_used_mib;
	int64_t mem_total_mib;
	int64_t ecc_uncorrected; /* volatile uncorrected ECC errors (since the driver loaded) */
	int64_t xid_count;       /* critical XID events seen since the backend opened */
	int last_xid;            /* the latest of them; 0 when none */
	int fatal_xid;           /* the latest one that egs_xid_fatal() calls fatal; 0 when none */
};

/* One compute process on a GPU. */
struct egs_gpu_proc {
	int gpu; /* index on the node */
	int pid;
	int64_t mem_used_mib; /* -1 when the driver does not say */
	char name[EGS_DEV_PROC_NAME_MAX]; /* "?" when unknown */
};

struct egs_devices;

struct egs_devices_ops {
	const char *name;
	/*
	 * Reads node `node` at UNIX time now into out[0 .. gpu_count-1] (zeroed by the caller).  Returns
	 * EGS_HEALTH_HEALTHY when the node answered (GPU rules are applied afterwards by devices.c),
	 * EGS_HEALTH_UNHEALTHY when the device could not be read, EGS_HEALTH_UNSCHEDULABLE when the node
	 * does not answer at all; in the last two cases it writes why into why (whysz bytes).
	 */
	enum egs_health (*sample)(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_sample *out,
				  char *why, size_t whysz);
	/* See egs_devices_processes().  NULL when the backend cannot list processes. */
	enum egs_err (*processes)(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_proc *out,
				  size_t max, size_t *n);
	/* See egs_devices_workloads().  NULL when the backend's workloads are its GPU processes. */
	void (*workloads)(struct egs_devices *d, int64_t now, json_t **nodes, json_t **pending);
	/* Frees what the backend added beyond struct egs_devices (may be NULL). */
	void (*free_impl)(struct egs_devices *d);
};

/* The common part of every device backend; nodes and n_nodes are read-only for callers. */
struct egs_devices {
	const struct egs_devices_ops *ops;
	struct egs_dev_node *nodes; /* n_nodes entries, owned */
	size_t n_nodes;
	void *impl;         /* the backend's own state */
	pthread_mutex_t mu; /* serialises ops->sample and ops->processes */
};

/*
 * Samples node number `node` (< d->n_nodes) at UNIX time now: one sample per GPU into out[0 ..
 * gpu_count-1] (caller's storage) and the node's health into *health, with the reason it is not
 * Healthy in why (whysz bytes; "" when Healthy; why may be NULL).  The node is Unhealthy when a GPU
 * is lost, shows a fatal XID or uncorrectable ECC errors, or the device cannot be read; Unschedulable
 * when the node does not answer at all (the agent then leaves it out of heartbeats, as if its host had
 * died).  Returns EGS_OK when the node answered (even with a bad GPU), else EGS_ERR_IO.
 */
enum egs_err egs_devices_sample(struct egs_devices *d, size_t node, int64_t now, enum egs_health *health,
				char *why, size_t whysz, struct egs_gpu_sample *out);

/*
 * Lists the compute processes on the GPUs of node number `node` at UNIX time now into out (max
 * entries, caller's storage); stores how many there are in *n (may exceed max: the rest were not
 * stored).  Returns EGS_OK, EGS_ERR_NOT_FOUND when the backend cannot list processes at all (e.g. the
 * NVML library lacks the call), or EGS_ERR_IO when the device could not be read.
 */
enum egs_err egs_devices_processes(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_proc *out,
				   size_t max, size_t *n);

/*
 * The workloads of a backend that knows them beyond GPU processes (the kubernetes backend: pods):
 * nodes[i] (caller's array of d->n_nodes) gets node i's heartbeat workloads and *pending the cluster's
 * GPU workloads that wait for a node (see agent-protocol.md, "pendingPods"); caller decrefs all.
 * Returns false, touching nothing, when the backend has no such view (use egs_devices_processes()).
 */
bool egs_devices_workloads(struct egs_devices *d, int64_t now, json_t **nodes, json_t **pending);

/* Returns the node named name, or NULL (borrowed; lives as long as d). */
const struct egs_dev_node *egs_devices_find(const struct egs_devices *d, const char *name);

/* True when XID code xid means the GPU needs a reset or repair (e.g. 48 double-bit ECC, 79 fell off the
 * bus), as opposed to an application fault (13, 31, 43, ...).  The list is in docs/internals/agent.md. */
bool egs_xid_fatal(int xid);

/* Returns a new backend with ops and no nodes yet, lock initialised (for backends' constructors). */
struct egs_devices *egs__devices_new(const struct egs_devices_ops *ops);

/* Frees d and all its nodes.  egs_devices_free(NULL) is a no-op. */
void egs_devices_free(struct egs_devices *d);

/*
 * The mock backend.  Reads the devices YAML file at path (format: docs/internals/agent.md, "The mock
 * devices file").  GPUs without a uuid get egs_devices_mock_uuid(cluster, node, index).  Timelines are
 * relative to the time the file is loaded (see egs_devices_mock_set_start()).  On success stores a new
 * backend in *out (caller frees with egs_devices_free()).  On failure returns EGS_ERR_IO (unreadable
 * file) or EGS_ERR_INVALID (bad YAML or content) and writes "<path>:<line>: <what is wrong>" into err
 * (errsz bytes).
 */
enum egs_err egs_devices_mock_load(const char *path, const char *cluster, struct egs_devices **out,
				   char *err, size_t errsz);

/* Like egs_devices_mock_load() but parses the len bytes of text; source names it in errors. */
enum egs_err egs_devices_mock_parse(const char *text, size_t len, const char *source, const char *cluster,
				    struct egs_devices **out, char *err, size_t errsz);

/* Sets the UNIX time at which the mock's timelines start (their `at: 0`); d must be a mock backend. */
void egs_devices_mock_set_start(struct egs_devices *d, int64_t start);

/*
 * Writes the generated UUID of GPU index of node in cluster into buf (at least 41 bytes):
 * "GPU-" and 32 hex digits grouped 8-4-4-4-12 like NVIDIA's.  It depends only on the three inputs,
 * so it is the same on every run and every machine.
 */
void egs_devices_mock_uuid(const char *cluster, const char *node, int index, char *buf, size_t n);

/* The NVML backend's settings.  Every field may be NULL. */
struct egs_devices_nvml_config {
	const char *library;        /* NULL: $EGS_NVML_LIBRARY when set, else "libnvidia-ml.so.1" */
	const char *node_name;      /* NULL: this host's name */
	const char *instance_type;  /* NULL: the DMI product name (the instance type on AWS), else "unknown" */
	const char *cloud_provider;
	const char *region;
	const char *address;        /* "host:port" peers reach this agent at, or NULL */
	int expected_gpus;          /* GPUs the host should have; fewer found makes it Unhealthy; 0: any */
};

/*
 * Opens the NVML backend: dlopens the library, initialises NVML and builds one node (this host) from
 * the GPUs it lists (a GPU already lost is left out; with cfg->expected_gpus the node is then
 * Unhealthy); every later call to NVML goes through symbols looked up once here, and a missing symbol
 * only loses its metric.  On success stores the backend in *out (caller frees with
 * egs_devices_free(), which shuts NVML down).  Fails with EGS_ERR_IO (library missing, nvmlInit
 * failed) or EGS_ERR_INVALID (no GPU, a required symbol missing, a GPU without a usable UUID),
 * writing why into err (errsz bytes).
 */
enum egs_err egs_devices_nvml_open(const struct egs_devices_nvml_config *cfg, struct egs_devices **out,
				   char *err, size_t errsz);

#endif
