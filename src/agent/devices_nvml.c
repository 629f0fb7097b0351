/*
 * devices_nvml.c: the NVML device backend: this host's NVIDIA GPUs as one node, read through
 * libnvidia-ml.so.1 loaded with dlopen, so that building and starting egs-agent need no CUDA and no
 * NVIDIA header.  The few NVML types and constants used are declared here with NVML's layouts.
 *
 * Every symbol is looked up once when the backend opens.  Only the calls that registration cannot do
 * without are required (init, shutdown, count, handle, UUID, memory); any other missing symbol only
 * loses its metric, and so does NVML_ERROR_NOT_SUPPORTED at run time.  Versioned entry points (_v2,
 * _v3) are preferred and the unversioned ones used when a driver predates them.
 *
 * XID errors arrive as NVML events: an event set is created at open with every GPU registered for
 * critical XID events, and each sample drains it without waiting, so a sample never blocks.  The
 * counts are kept here (under the backend lock that devices.c takes around every call).
 *
 * Tested against tests/fake-nvml (a stand-in library), since the project's machines have no GPU;
 * tests/nvml-real.sh prints what this backend reads on a real GPU machine.
 */
#include "agent/devices.h"

#include "core/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the NVML declarations we use (nvml.h's names and layouts) ---- */

typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_event_set_st *nvml_event_set;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_GPU_IS_LOST = 15,
};
#define NVML_TEMPERATURE_GPU 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_BUFFER_SIZE 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE */

struct nvml_memory {
	unsigned long long total, free, used; /* bytes */
};

struct nvml_utilization {
	unsigned int gpu, memory; /* percent */
};

struct nvml_proc_v1 { /* nvmlProcessInfo_v1_t: the unversioned call */
	unsigned int pid;
	unsigned long long used_bytes;
};

struct nvml_proc_v2 { /* nvmlProcessInfo_v2_t: the _v2 and _v3 calls */
	unsigned int pid;
	unsigned long long used_bytes;
	unsigned int gpu_instance, compute_instance;
};

struct nvml_event_data { /* nvmlEventData_t; the v1 wait writes only the first three fields */
	nvml_device device;
	unsigned long long type, data;
	unsigned int gpu_instance, compute_instance;
};

#define PROCS_STACK 64 /* processes per GPU read without allocating */
#define PROCS_MAX 4096
#define EVENTS_PER_SAMPLE 1024 /* bound on one drain, should the library misbehave */

struct nvml_api {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	const char *(*error_string)(nvml_return);
	nvml_return (*get_count)(unsigned int *);
	nvml_return (*get_handle)(unsigned int, nvml_device *);
	nvml_return (*get_name)(nvml_device, char *, unsigned int);
	nvml_return (*get_uuid)(nvml_device, char *, unsigned int);
	nvml_return (*get_memory)(nvml_device, struct nvml_memory *);
	nvml_return (*get_power)(nvml_device, unsigned int *);
	nvml_return (*get_power_limit)(nvml_device, unsigned int *);
	nvml_return (*get_temperature)(nvml_device, int, unsigned int *);
	nvml_return (*get_utilization)(nvml_device, struct nvml_utilization *);
	nvml_return (*get_ecc)(nvml_device, int, int, unsigned long long *);
	nvml_return (*event_set_create)(nvml_event_set *);
	nvml_return (*register_events)(nvml_device, unsigned long long, nvml_event_set);
	nvml_return (*event_set_wait)(nvml_event_set, struct nvml_event_data *, unsigned int);
	nvml_return (*event_set_free)(nvml_event_set);
	nvml_return (*get_procs)(nvml_device, unsigned int *, void *);
	size_t proc_size; /* sizeof the process struct get_procs fills */
};

struct xid_state {
	int64_t count;
	int last, fatal;
};

struct nvml {
	struct nvml_api api;
	bool initialised;
	nvml_device *dev;      /* gpu_count handles */
	nvml_event_set events; /* NULL when XID events are not available */
	struct xid_state *xid; /* gpu_count entries */
};

/* ---- loading ---- */

/* Looks up the first of the names the library has; stores it in *fn (NULL when none). */
static void lookup(void *lib, void *fn, const char *const *names)
{
	void *p = NULL;

	for (; *names && !p; names++)
		p = dlsym(lib, *names);
	memcpy(fn, &p, sizeof(p)); /* a data pointer to a function pointer, as POSIX allows for dlsym */
}

#define LOOKUP(api, field, ...) lookup((api)->lib, &(api)->field, (const char *const[]){__VA_ARGS__, NULL})

static void load_symbols(struct nvml_api *api)
{
	LOOKUP(api, init, "nvmlInit_v2", "nvmlInit");
	LOOKUP(api, shutdown, "nvmlShutdown");
	LOOKUP(api, error_string, "nvmlErrorString");
	LOOKUP(api, get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
	LOOKUP(api, get_handle, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
	LOOKUP(api, get_name, "nvmlDeviceGetName");
	LOOKUP(api, get_uuid, "nvmlDeviceGetUUID");
	LOOKUP(api, get_memory, "nvmlDeviceGetMemoryInfo");
	LOOKUP(api, get_power, "nvmlDeviceGetPowerUsage");
	LOOKUP(api, get_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
	LOOKUP(api, get_temperature, "nvmlDeviceGetTemperature");
	LOOKUP(api, get_utilization, "nvmlDeviceGetUtilizationRates");
	LOOKUP(api, get_ecc, "nvmlDeviceGetTotalEccErrors");
	LOOKUP(api, event_set_create, "nvmlEventSetCreate");
	LOOKUP(api, register_events, "nvmlDeviceRegisterEvents");
	LOOKUP(api, event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
	LOOKUP(api, event_set_free, "nvmlEventSetFree");
	LOOKUP(api, get_procs, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
	api->proc_size = sizeof(struct nvml_proc_v2);
	if (!api->get_procs) {
		LOOKUP(api, get_procs, "nvmlDeviceGetComputeRunningProcesses");
		api->proc_size = sizeof(struct nvml_proc_v1);
	}
}

static const char *nvml_error(const struct nvml_api *api, nvml_return rc)
{
	const char *s = api->error_string ? api->error_string(rc) : NULL;
	return s ? s : "NVML error";
}

/* Copies in into out as an egsd label ([A-Za-z0-9._-], alphanumeric first, at most 63): other
 * characters become '-', runs of '-' collapse.  "unknown" when nothing is left. */
static void to_label(const char *in, char *out, size_t outsz)
{
	size_t k = 0, max = outsz - 1 < 63 ? outsz - 1 : 63;

	for (const char *s = in; *s && k < max; s++) {
		char c = *s;
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && c != '.' && c != '_')
			c = '-';
		if (k == 0 && !alnum)
			continue;
		if (c == '-' && out[k - 1] == '-')
			continue;
		out[k++] = c;
	}
	while (k > 0 && out[k - 1] == '-')
		k--;
	out[k] = '\0';
	if (k == 0)
		egs_strlcpy(out, "unknown", outsz);
}

/* The first line of a small file (e.g. /sys/devices/virtual/dmi/id/product_name), or "". */
static void read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, (int)n, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
}

static char *label_or(const char *given, const char *fallback)
{
	char buf[EGS_NAME_MAX];

	to_label(given && *given ? given : fallback, buf, sizeof(buf));
	return egs_strdup(buf);
}

/* Fills the node's identity: name, instance type, cloud, region, address. */
static void node_identity(const struct egs_devices_nvml_config *cfg, struct egs_dev_node *n)
{
	char host[256] = "", product[128];

	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	if (!cfg->node_name && strlen(host) > 63)
		host[strcspn(host, ".")] = '\0'; /* a long FQDN: its first label */
	read_line("/sys/devices/virtual/dmi/id/product_name", product, sizeof(product));
	n->name = label_or(cfg->node_name, host);
	n->instance_type = label_or(cfg->instance_type, product[0] ? product : "unknown");
	n->cloud_provider = egs_strdup(cfg->cloud_provider ? cfg->cloud_provider : "");
	n->region = egs_strdup(cfg->region ? cfg->region : "");
	n->address = egs_strdup(cfg->address ? cfg->address : "");
}

/* Reads every GPU's handle, UUID, name and memory into the node. */
static enum egs_err discover(struct nvml *nv, struct egs_dev_node *n, char *err, size_t errsz)
{
	struct nvml_api *api = &nv->api;
	unsigned count = 0;
	nvml_return rc;
	char name[NVML_BUFFER_SIZE], model[EGS_NAME_MAX] = "";

	if ((rc = api->get_count(&count)) != NVML_SUCCESS) {
		snprintf(err, errsz, "nvmlDeviceGetCount: %s", nvml_error(api, rc));
		return EGS_ERR_IO;
	}
	if (count == 0 || count > 64) {
		snprintf(err, errsz, "NVML lists %u GPUs; the agent serves 1 to 64", count);
		return EGS_ERR_INVALID;
	}
	nv->dev = egs_calloc(count, sizeof(*nv->dev));
	nv->xid = egs_calloc(count, sizeof(*nv->xid));
	n->gpus = egs_calloc(count, sizeof(*n->gpus));
	for (unsigned i = 0; i < count; i++) {
		struct egs_dev_gpu *g = &n->gpus[n->gpu_count];
		nvml_device *dev = &nv->dev[n->gpu_count];
		struct nvml_memory mem;
		char uuid[NVML_BUFFER_SIZE];
		const char *why = NULL;

		if ((rc = api->get_handle(i, dev)) != NVML_SUCCESS ||
		    (rc = api->get_uuid(*dev, uuid, sizeof(uuid))) != NVML_SUCCESS ||
		    (rc = api->get_memory(*dev, &mem)) != NVML_SUCCESS) {
			if (rc == NVML_ERROR_GPU_IS_LOST)
				continue; /* registered without it; with --expect-gpus the node is Unhealthy */
			snprintf(err, errsz, "GPU %u: %s", i, nvml_error(api, rc));
			return EGS_ERR_IO;
		}
		if (!egs_label_valid(uuid, &why)) {
			snprintf(err, errsz, "GPU %u: UUID '%.40s' is not usable: %s", i, uuid, why);
			return EGS_ERR_INVALID;
		}
		egs_strlcpy(g->uuid, uuid, sizeof(g->uuid));
		g->index = (int)i; /* NVML's index, which nvidia-smi shows */
		if (n->gpu_count == 0 || (int64_t)(mem.total >> 20) < n->memory_mib)
			n->memory_mib = (int64_t)(mem.total >> 20); /* the smallest GPU's, so none is oversold */
		if (!model[0] && api->get_name && api->get_name(*dev, name, sizeof(name)) == NVML_SUCCESS)
			to_label(name, model, sizeof(model));
		n->gpu_count++;
	}
	if (n->gpu_count == 0) {
		snprintf(err, errsz, "all %u GPUs NVML lists are lost", count);
		return EGS_ERR_IO;
	}
	n->gpu_model = egs_strdup(model[0] ? model : "NVIDIA-GPU");
	if (n->memory_mib < 1) {
		snprintf(err, errsz, "GPU memory reads as 0 MiB");
		return EGS_ERR_INVALID;
	}
	return EGS_OK;
}

/* Creates the XID event set; without it XID counts are simply not reported. */
static void open_events(struct nvml *nv, int gpu_count)
{
	struct nvml_api *api = &nv->api;
	bool any = false;

	if (!api->event_set_create || !api->register_events || !api->event_set_wait ||
	    api->event_set_create(&nv->events) != NVML_SUCCESS) {
		nv->events = NULL;
		return;
	}
	for (int i = 0; i < gpu_count; i++)
		any |= api->register_events(nv->dev[i], NVML_EVENT_TYPE_XID_CRITICAL_ERROR, nv->events) ==
		       NVML_SUCCESS;
	if (!any) {
		if (api->event_set_free)
			api->event_set_free(nv->events);
		nv->events = NULL;
	}
}

/* ---- sampling ---- */

/* Takes the XID events that arrived since the last call, without waiting. */
static void drain_events(struct nvml *nv, int gpu_count)
{
	struct nvml_event_data ev;

	if (!nv->events)
		return;
	for (int k = 0; k < EVENTS_PER_SAMPLE; k++) {
		memset(&ev, 0, sizeof(ev));
		if (nv->api.event_set_wait(nv->events, &ev, 0) != NVML_SUCCESS)
			break;
		if (!(ev.type & NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
			continue;
		for (int i = 0; i < gpu_count; i++) {
			if (nv->dev[i] != ev.device)
				continue;
			nv->xid[i].count++;
			nv->xid[i].last = (int)ev.data;
			if (egs_xid_fatal((int)ev.data))
				nv->xid[i].fatal = (int)ev.data;
		}
	}
}

/* Records the outcome of one call: its metric bit on success, the GPU lost, or the last real error. */
static void note(nvml_return rc, unsigned bit, struct egs_gpu_sample *s, nvml_return *last_err)
{
	if (rc == NVML_SUCCESS)
		s->valid |= bit;
	else if (rc == NVML_ERROR_GPU_IS_LOST)
		s->lost = true;
	else if (rc != NVML_ERROR_NOT_SUPPORTED)
		*last_err = rc;
}

static void sample_gpu(struct nvml *nv, int i, struct egs_gpu_sample *s, nvml_return *last_err)
{
	const struct nvml_api *api = &nv->api;
	nvml_device d = nv->dev[i];
	struct nvml_memory mem;
	struct nvml_utilization util;
	unsigned int u = 0;
	unsigned long long ecc = 0;

	note(api->get_memory(d, &mem), EGS_GPU_MEM_USED | EGS_GPU_MEM_TOTAL, s, last_err);
	if (s->valid & EGS_GPU_MEM_USED) {
		s->mem_used_mib = (int64_t)(mem.used >> 20);
		s->mem_total_mib = (int64_t)(mem.total >> 20);
	}
	if (api->get_power && !s->lost) {
		note(api->get_power(d, &u), EGS_GPU_POWER, s, last_err);
		s->power_w = (s->valid & EGS_GPU_POWER) ? u / 1000.0 : 0;
	}
	if (api->get_power_limit && !s->lost) {
		note(api->get_power_limit(d, &u), EGS_GPU_POWER_LIMIT, s, last_err);
		s->power_limit_w = (s->valid & EGS_GPU_POWER_LIMIT) ? u / 1000.0 : 0;
	}
	if (api->get_temperature && !s->lost) {
		note(api->get_temperature(d, NVML_TEMPERATURE_GPU, &u), EGS_GPU_TEMP, s, last_err);
		s->temp_c = (s->valid & EGS_GPU_TEMP) ? (double)u : 0;
	}
	if (api->get_utilization && !s->lost) {
		note(api->get_utilization(d, &util), EGS_GPU_UTIL, s, last_err);
		s->util_pct = (s->valid & EGS_GPU_UTIL) ? (double)util.gpu : 0;
	}
	if (api->get_ecc && !s->lost) {
		note(api->get_ecc(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc), EGS_GPU_ECC, s,
		     last_err);
		s->ecc_uncorrected = (s->valid & EGS_GPU_ECC) ? (int64_t)ecc : 0;
	}
	if (nv->events) {
		s->valid |= EGS_GPU_XID;
		s->xid_count = nv->xid[i].count;
		s->last_xid = nv->xid[i].last;
		s->fatal_xid = nv->xid[i].fatal;
	}
	if (s->lost) { /* whatever was read before the GPU went away is not worth reporting */
		memset(s, 0, sizeof(*s));
		s->lost = true;
	}
}

static enum egs_health nvml_sample(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_sample *out,
				   char *why, size_t whysz)
{
	struct nvml *nv = d->impl;
	int count = d->nodes[node].gpu_count;
	nvml_return last_err = NVML_SUCCESS;
	bool any = false;

	(void)now;
	drain_events(nv, count);
	for (int i = 0; i < count; i++) {
		sample_gpu(nv, i, &out[i], &last_err);
		any |= out[i].valid != 0 || out[i].lost;
	}
	if (!any && last_err != NVML_SUCCESS) {
		snprintf(why, whysz, "NVML cannot read the GPUs: %s", nvml_error(&nv->api, last_err));
		return EGS_HEALTH_UNHEALTHY;
	}
	return EGS_HEALTH_HEALTHY;
}

/* The command name of pid from /proc, or "?" (another PID namespace, or gone). */
static void proc_name(int pid, char *buf, size_t n)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	read_line(path, buf, n);
	if (!buf[0])
		egs_strlcpy(buf, "?", n);
}

/* Reads the processes of GPU i into a buffer (*buf, stack or heap); stores their number in *count. */
static nvml_return gpu_procs(struct nvml *nv, int i, unsigned char *stack, unsigned char **buf, unsigned *count)
{
	nvml_return rc;

	*buf = stack;
	*count = PROCS_STACK;
	rc = nv->api.get_procs(nv->dev[i], count, *buf);
	if (rc == NVML_ERROR_INSUFFICIENT_SIZE && *count <= PROCS_MAX) {
		*count += 16; /* room for processes started in between */
		*buf = egs_malloc(*count * nv->api.proc_size);
		rc = nv->api.get_procs(nv->dev[i], count, *buf);
	}
	return rc;
}

static enum egs_err nvml_processes(struct egs_devices *d, size_t node, int64_t now, struct egs_gpu_proc *out,
				   size_t max, size_t *n)
{
	struct nvml *nv = d->impl;
	unsigned char stack[PROCS_STACK * sizeof(struct nvml_proc_v2)], *buf = NULL;
	enum egs_err rc = EGS_OK;

	(void)now;
	if (!nv->api.get_procs)
		return EGS_ERR_NOT_FOUND;
	for (int i = 0; i < d->nodes[node].gpu_count && rc == EGS_OK; i++) {
		unsigned count = 0;
		nvml_return r = gpu_procs(nv, i, stack, &buf, &count);

		if (r == NVML_ERROR_GPU_IS_LOST) /* reported by the samples; its processes are gone anyway */
			continue;
		if (r != NVML_SUCCESS)
			rc = r == NVML_ERROR_NOT_SUPPORTED ? EGS_ERR_NOT_FOUND : EGS_ERR_IO;
		for (unsigned k = 0; r == NVML_SUCCESS && k < count; k++, (*n)++) {
			struct nvml_proc_v1 p; /* the v2 struct starts with the v1 fields, at the same offsets */
			struct egs_gpu_proc *o = &out[*n];

			memcpy(&p, buf + k * nv->api.proc_size, sizeof(p));
			if (*n >= max)
				continue;
			o->gpu = i;
			o->pid = (int)p.pid;
			o->mem_used_mib = p.used_bytes == NVML_VALUE_NOT_AVAILABLE ? -1 : (int64_t)(p.used_bytes >> 20);
			proc_name(o->pid, o->name, sizeof(o->name));
		}
		if (buf != stack)
			egs_free(buf);
	}
	return rc;
}

static void nvml_free(struct egs_devices *d)
{
	struct nvml *nv = d->impl;

	if (!nv)
		return;
	if (nv->events && nv->api.event_set_free)
		nv->api.event_set_free(nv->events);
	if (nv->initialised)
		nv->api.shutdown();
	if (nv->api.lib)
		dlclose(nv->api.lib);
	egs_free(nv->dev);
	egs_free(nv->xid);
	egs_free(nv);
}

static const struct egs_devices_ops nvml_ops = {
	.name = "nvml",
	.sample = nvml_sample,
	.processes = nvml_processes,
	.free_impl = nvml_free,
};

/* Opens the library and checks that the calls registration needs are there. */
static enum egs_err open_library(const struct egs_devices_nvml_config *cfg, struct nvml_api *api, char *err,
				 size_t errsz)
{
	const char *path = cfg->library ? cfg->library : getenv("EGS_NVML_LIBRARY");
	const char *dl;
	nvml_return rc;

	if (!path || !*path)
		path = "libnvidia-ml.so.1";
	api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!api->lib) {
		dl = dlerror();
		snprintf(err, errsz, "cannot load %s: %s (is the NVIDIA driver installed?)", path, dl ? dl : "?");
		return EGS_ERR_IO;
	}
	load_symbols(api);
	if (!api->init || !api->shutdown || !api->get_count || !api->get_handle || !api->get_uuid ||
	    !api->get_memory) {
		snprintf(err, errsz, "%s lacks a call the agent needs (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, "
				     "nvmlDeviceGetHandleByIndex, nvmlDeviceGetUUID or nvmlDeviceGetMemoryInfo)",
			 path);
		return EGS_ERR_INVALID;
	}
	if ((rc = api->init()) != NVML_SUCCESS) {
		snprintf(err, errsz, "nvmlInit: %s", nvml_error(api, rc));
		return EGS_ERR_IO;
	}
	return EGS_OK;
}

enum egs_err egs_devices_nvml_open(const struct egs_devices_nvml_config *cfg, struct egs_devices **out,
				   char *err, size_t errsz)
{
	struct egs_devices *d = egs__devices_new(&nvml_ops);
	struct nvml *nv = egs_calloc(1, sizeof(*nv));
	enum egs_err rc;

	*out = NULL;
	d->impl = nv;
	d->nodes = egs_calloc(1, sizeof(*d->nodes));
	d->n_nodes = 1;
	node_identity(cfg, &d->nodes[0]);
	rc = open_library(cfg, &nv->api, err, errsz);
	if (rc != EGS_OK)
		goto out;
	nv->initialised = true;
	rc = discover(nv, &d->nodes[0], err, errsz);
	if (rc != EGS_OK)
		goto out;
	d->nodes[0].expected_gpus = cfg->expected_gpus;
	open_events(nv, d->nodes[0].gpu_count);
	*out = d;
	d = NULL;
out:
	egs_devices_free(d);
	return rc;
}
