/*
 * fake_nvml.c: a small stand-in for libnvidia-ml.so, so that egs-agent's NVML backend can be tested on
 * machines without a GPU.  It exports the few NVML entry points the agent looks up, with NVIDIA's
 * names, argument types and return codes, and answers from a state file that tests rewrite while the
 * agent runs.  It is NOT NVML: no driver is touched, and only what the agent reads is modelled.
 *
 * Built twice by the Makefile: build/lib/libnvidia-ml-fake.so (every entry point the agent may use,
 * versioned and not) and, with -DFAKE_NVML_MINIMAL, build/lib/libnvidia-ml-fake-min.so, which exports
 * only the unversioned calls the agent cannot do without plus temperature, so tests can check that
 * missing symbols degrade their metrics and nothing else.
 *
 * The state file is named by $EGS_FAKE_NVML_STATE and is read again whenever its inode, modification
 * time or size changes: write it to a temporary file and rename that over it, since two writes in
 * the same clock tick may leave time and size alike.  Without it there are 2 idle H100s.  One setting per line, '#' starts a comment:
 *   gpus N                          number of GPUs (1..64; default 2)
 *   init_error CODE                 nvmlInit returns CODE (e.g. 9, driver not loaded)
 *   gpu I|all KEY VALUE...          per GPU; KEY is one of
 *       name TEXT...                marketing name (default "NVIDIA H100 80GB HBM3")
 *       uuid TEXT                   default GPU-fa4e0000-0000-0000-0000-0000000000II
 *       mem_total_mib N | mem_used_mib N | power_mw N | power_limit_mw N | temp_c N | util N
 *       ecc_uncorrected N           volatile uncorrected ECC errors
 *       lost 0|1                    every call on the GPU returns NVML_ERROR_GPU_IS_LOST
 *       notsup METRIC               METRIC (power, power_limit, temp, util, ecc, memory, procs)
 *                                   returns NVML_ERROR_NOT_SUPPORTED
 *       xid CODE SEQ                a critical XID event; delivered once per distinct SEQ
 *       proc PID MIB                a compute process using MIB MiB (MIB -1: not available)
 * The file is re-read as a whole, so a test writes the full state each time; XID events already
 * delivered (by SEQ) are not delivered again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_GPUS 64
#define MAX_PROCS 128
#define MAX_XIDS 16
#define MIB (1024ULL * 1024ULL)

/* NVML's return codes and constants that the agent uses (values as in nvml.h). */
typedef int nvmlReturn_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_GPU_IS_LOST = 15,
};
#define XID_EVENT 0x0000000000000008ULL
#define VALUE_NOT_AVAILABLE (~0ULL)

enum metric { M_POWER, M_POWER_LIMIT, M_TEMP, M_UTIL, M_ECC, M_MEMORY, M_PROCS, M_N };
static const char *const metric_names[M_N] = {"power", "power_limit", "temp", "util", "ecc", "memory", "procs"};

struct fake_proc {
	unsigned pid;
	long long mib;
};

struct fake_xid {
	unsigned long long code, seq;
};

struct fake_gpu {
	char name[96], uuid[96];
	unsigned long long mem_total_mib, mem_used_mib, ecc;
	unsigned power_mw, power_limit_mw, temp_c, util;
	int lost;
	unsigned notsup; /* 1 << enum metric */
	struct fake_proc procs[MAX_PROCS];
	int n_procs;
	struct fake_xid xids[MAX_XIDS];
	int n_xids;
	unsigned long long delivered_seq; /* the highest XID seq handed out; survives re-reads */
	int registered;                   /* XID events were asked for */
};

typedef struct fake_gpu *nvmlDevice_t;
typedef struct fake_event_set *nvmlEventSet_t;
struct fake_event_set {
	int unused;
};

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

static struct fake_gpu gpus[MAX_GPUS];
static int n_gpus;
static int init_error;
static int initialised;
static struct timespec loaded_mtime;
static ino_t loaded_ino;
static long long loaded_size = -1;

static void set_defaults(void)
{
	n_gpus = 2;
	init_error = 0;
	for (int i = 0; i < MAX_GPUS; i++) {
		struct fake_gpu *g = &gpus[i];
		unsigned long long seq = g->delivered_seq;
		int reg = g->registered;
		memset(g, 0, sizeof(*g));
		g->delivered_seq = seq;
		g->registered = reg;
		snprintf(g->name, sizeof(g->name), "NVIDIA H100 80GB HBM3");
		snprintf(g->uuid, sizeof(g->uuid), "GPU-fa4e0000-0000-0000-0000-0000000000%02d", i);
		g->mem_total_mib = 81559;
		g->power_mw = 70000;
		g->power_limit_mw = 700000;
		g->temp_c = 35;
	}
}

/* Applies KEY VALUE... (rest) to GPU g. */
static void apply(struct fake_gpu *g, const char *key, const char *rest)
{
	char *end;
	unsigned long long v = strtoull(rest, &end, 10);

	if (strcmp(key, "name") == 0)
		snprintf(g->name, sizeof(g->name), "%s", rest);
	else if (strcmp(key, "uuid") == 0)
		snprintf(g->uuid, sizeof(g->uuid), "%s", rest);
	else if (strcmp(key, "mem_total_mib") == 0)
		g->mem_total_mib = v;
	else if (strcmp(key, "mem_used_mib") == 0)
		g->mem_used_mib = v;
	else if (strcmp(key, "power_mw") == 0)
		g->power_mw = (unsigned)v;
	else if (strcmp(key, "power_limit_mw") == 0)
		g->power_limit_mw = (unsigned)v;
	else if (strcmp(key, "temp_c") == 0)
		g->temp_c = (unsigned)v;
	else if (strcmp(key, "util") == 0)
		g->util = (unsigned)v;
	else if (strcmp(key, "ecc_uncorrected") == 0)
		g->ecc = v;
	else if (strcmp(key, "lost") == 0)
		g->lost = v != 0;
	else if (strcmp(key, "notsup") == 0) {
		for (int m = 0; m < M_N; m++)
			if (strcmp(rest, metric_names[m]) == 0)
				g->notsup |= 1u << m;
	} else if (strcmp(key, "xid") == 0 && g->n_xids < MAX_XIDS) {
		g->xids[g->n_xids].code = v;
		g->xids[g->n_xids].seq = strtoull(end, NULL, 10);
		g->n_xids++;
	} else if (strcmp(key, "proc") == 0 && g->n_procs < MAX_PROCS) {
		g->procs[g->n_procs].pid = (unsigned)v;
		g->procs[g->n_procs].mib = strtoll(end, NULL, 10);
		g->n_procs++;
	}
}

/* Parses one line of the state file. */
static void parse_line(char *line)
{
	char *hash = strchr(line, '#'), *p, *key, *rest;
	size_t n;

	if (hash)
		*hash = '\0';
	n = strlen(line);
	while (n > 0 && strchr(" \t\r\n", line[n - 1]))
		line[--n] = '\0';
	p = line + strspn(line, " \t");
	if (strncmp(p, "gpus ", 5) == 0) {
		int v = (int)strtol(p + 5, NULL, 10);
		n_gpus = v < 0 ? 0 : v > MAX_GPUS ? MAX_GPUS : v;
	} else if (strncmp(p, "init_error ", 11) == 0) {
		init_error = (int)strtol(p + 11, NULL, 10);
	} else if (strncmp(p, "gpu ", 4) == 0) {
		char *sel = p + 4, *sp = strchr(sel, ' ');
		if (!sp)
			return;
		*sp = '\0';
		key = sp + 1 + strspn(sp + 1, " ");
		sp = strchr(key, ' ');
		if (!sp)
			return;
		*sp = '\0';
		rest = sp + 1 + strspn(sp + 1, " ");
		for (int i = 0; i < MAX_GPUS; i++) {
			if (strcmp(sel, "all") == 0 || strtol(sel, NULL, 10) == i)
				apply(&gpus[i], key, rest);
		}
	}
}

/* Reads the state file again when it changed. */
static void reload(void)
{
	const char *path = getenv("EGS_FAKE_NVML_STATE");
	struct stat st;
	char line[512];
	FILE *f;

	if (!path || stat(path, &st) != 0) {
		if (loaded_size != -2) {
			set_defaults();
			loaded_size = -2;
		}
		return;
	}
	if (st.st_size == loaded_size && st.st_ino == loaded_ino && st.st_mtim.tv_sec == loaded_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == loaded_mtime.tv_nsec)
		return;
	f = fopen(path, "r");
	if (!f)
		return;
	set_defaults();
	while (fgets(line, sizeof(line), f))
		parse_line(line);
	fclose(f);
	loaded_size = st.st_size;
	loaded_ino = st.st_ino;
	loaded_mtime = st.st_mtim;
}

/* Checks a handle and the GPU's state before a call; returns the code the call should fail with. */
static nvmlReturn_t check(nvmlDevice_t d, enum metric m)
{
	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	reload();
	if (!d || d < gpus || d >= gpus + n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (d->lost)
		return NVML_ERROR_GPU_IS_LOST;
	if ((int)m < M_N && (d->notsup & (1u << m)))
		return NVML_ERROR_NOT_SUPPORTED;
	return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char *s, char *buf, unsigned int len)
{
	if (!buf || strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
	reload();
	if (init_error)
		return init_error;
	initialised = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	initialised = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	reload();
	*count = (unsigned)n_gpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	reload();
	if ((int)index >= n_gpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	nvmlReturn_t rc = check(d, M_N);
	return rc ? rc : copy_string(d->name, name, len);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	nvmlReturn_t rc = check(d, M_N);
	return rc ? rc : copy_string(d->uuid, uuid, len);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *mem)
{
	nvmlReturn_t rc = check(d, M_MEMORY);
	if (rc)
		return rc;
	mem->total = d->mem_total_mib * MIB;
	mem->used = d->mem_used_mib * MIB;
	mem->free = mem->total - mem->used;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp)
{
	nvmlReturn_t rc = check(d, M_TEMP);
	if (rc)
		return rc;
	if (sensor != 0) /* NVML_TEMPERATURE_GPU */
		return NVML_ERROR_INVALID_ARGUMENT;
	*temp = d->temp_c;
	return NVML_SUCCESS;
}

#ifndef FAKE_NVML_MINIMAL
static struct fake_event_set the_set;

nvmlReturn_t nvmlInit_v2(void)
{
	return nvmlInit();
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	return nvmlDeviceGetCount(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex(index, device);
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
	switch (rc) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case 9: return "Driver Not Loaded";
	case NVML_ERROR_TIMEOUT: return "Timeout";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	nvmlReturn_t rc = check(d, M_POWER);
	if (!rc)
		*mw = d->power_mw;
	return rc;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
	nvmlReturn_t rc = check(d, M_POWER_LIMIT);
	if (!rc)
		*mw = d->power_limit_mw;
	return rc;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	nvmlReturn_t rc = check(d, M_UTIL);
	if (!rc) {
		u->gpu = d->util;
		u->memory = 0;
	}
	return rc;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type, int counter_type,
					 unsigned long long *count)
{
	nvmlReturn_t rc = check(d, M_ECC);
	if (rc)
		return rc;
	if (error_type != 1 || counter_type != 0) /* uncorrected, volatile: all the fake knows */
		return NVML_ERROR_NOT_SUPPORTED;
	*count = d->ecc;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	*set = &the_set;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set)
{
	nvmlReturn_t rc = check(d, M_N);
	if (rc)
		return rc;
	if (set != &the_set || !(types & XID_EVENT))
		return NVML_ERROR_INVALID_ARGUMENT;
	d->registered = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms)
{
	(void)timeout_ms; /* never waits: the agent polls with 0 */
	if (!initialised)
		return NVML_ERROR_UNINITIALIZED;
	if (set != &the_set)
		return NVML_ERROR_INVALID_ARGUMENT;
	reload();
	for (int i = 0; i < n_gpus; i++) {
		struct fake_gpu *g = &gpus[i];
		for (int k = 0; g->registered && k < g->n_xids; k++) {
			if (g->xids[k].seq <= g->delivered_seq)
				continue;
			g->delivered_seq = g->xids[k].seq;
			memset(data, 0, sizeof(*data));
			data->device = g;
			data->eventType = XID_EVENT;
			data->eventData = g->xids[k].code;
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms)
{
	return nvmlEventSetWait_v2(set, data, timeout_ms);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	return set == &the_set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

/* Fills infos (entries of size sz) with the processes of d. */
static nvmlReturn_t procs(nvmlDevice_t d, unsigned int *count, void *infos, size_t sz)
{
	nvmlReturn_t rc = check(d, M_PROCS);
	if (rc)
		return rc;
	if (*count < (unsigned)d->n_procs || (d->n_procs && !infos)) {
		*count = (unsigned)d->n_procs;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (int i = 0; i < d->n_procs; i++) {
		nvmlProcessInfo_v2_t p = {
			.pid = d->procs[i].pid,
			.usedGpuMemory = d->procs[i].mib < 0 ? VALUE_NOT_AVAILABLE : (unsigned long long)d->procs[i].mib * MIB,
		};
		memcpy((char *)infos + (size_t)i * sz, &p, sz);
	}
	*count = (unsigned)d->n_procs;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_v2_t *infos)
{
	return procs(d, count, infos, sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
						     nvmlProcessInfo_v2_t *infos)
{
	return procs(d, count, infos, sizeof(nvmlProcessInfo_v2_t));
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_v1_t *infos)
{
	return procs(d, count, infos, sizeof(nvmlProcessInfo_v1_t));
}
#endif
