/*
 * checks_builtin.c: the built-in check plugins (the seeds' pre-provisioning checklist; see checks.h
 * for the list and its order).  Each plugin reads what it needs through the device backend, the file
 * system, the network or a command, and writes one line that an operator can act on.
 */
#include "agent/checks.h"

#include "agent/peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define PROCS_MAX 64
#define DEFAULT_NCCL_TIMEOUT_S 600
#define DEFAULT_CONNECT_TIMEOUT_MS 3000

static const struct egs_dev_node *node_of(const struct egs_check_ctx *ctx)
{
	return &ctx->dev->nodes[ctx->node];
}

/* ---- node-health ---- */

static enum egs_check_status check_node_health(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	const struct egs_dev_node *n = node_of(ctx);
	struct egs_gpu_sample *s = egs_calloc((size_t)n->gpu_count, sizeof(*s));
	enum egs_health health = EGS_HEALTH_UNHEALTHY;
	char why[EGS_DEV_WHY_MAX];
	double hottest = -1e9;

	egs_devices_sample(ctx->dev, ctx->node, ctx->now, &health, why, sizeof(why), s);
	for (int i = 0; i < n->gpu_count; i++)
		if ((s[i].valid & EGS_GPU_TEMP) && s[i].temp_c > hottest)
			hottest = s[i].temp_c;
	egs_free(s);
	if (health != EGS_HEALTH_HEALTHY) {
		snprintf(out, outsz, "%s", why);
		return EGS_CHECK_FAILED;
	}
	if (hottest > -1e9)
		snprintf(out, outsz, "%d GPUs healthy, hottest %.0f C", n->gpu_count, hottest);
	else
		snprintf(out, outsz, "%d GPUs healthy", n->gpu_count);
	return EGS_CHECK_PASSED;
}

/* ---- gpu-inventory ---- */

static enum egs_check_status check_gpu_inventory(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	const struct egs_dev_node *n = node_of(ctx);
	struct egs_gpu_sample *s = egs_calloc((size_t)n->gpu_count, sizeof(*s));
	enum egs_health health;
	enum egs_check_status st = EGS_CHECK_PASSED;
	int answering = 0, first_lost = -1, small = -1;

	if (egs_devices_sample(ctx->dev, ctx->node, ctx->now, &health, NULL, 0, s) != EGS_OK) {
		snprintf(out, outsz, "node %s does not answer", n->name);
		st = EGS_CHECK_FAILED;
		goto out;
	}
	for (int i = 0; i < n->gpu_count; i++) {
		if (s[i].lost) {
			if (first_lost < 0)
				first_lost = i;
			continue;
		}
		answering++;
		if (small < 0 && (s[i].valid & EGS_GPU_MEM_TOTAL) && s[i].mem_total_mib < n->memory_mib)
			small = i;
	}
	if (n->expected_gpus > n->gpu_count) {
		snprintf(out, outsz, "%d of %d expected GPUs found", answering, n->expected_gpus);
		st = EGS_CHECK_FAILED;
	} else if (answering < n->gpu_count) {
		snprintf(out, outsz, "%d of %d advertised GPUs answer (GPU %d, %s, does not)", answering, n->gpu_count,
			 n->gpus[first_lost].index, n->gpus[first_lost].uuid);
		st = EGS_CHECK_FAILED;
	} else if (small >= 0) {
		snprintf(out, outsz, "GPU %d (%s) has %lld MiB, %lld MiB advertised", n->gpus[small].index, n->gpus[small].uuid,
			 (long long)s[small].mem_total_mib, (long long)n->memory_mib);
		st = EGS_CHECK_FAILED;
	} else {
		snprintf(out, outsz, "%d GPUs of %s with at least %lld MiB each", n->gpu_count, n->gpu_model,
			 (long long)n->memory_mib);
	}
out:
	egs_free(s);
	return st;
}

/* ---- gpu-processes ---- */

static void describe_proc(const struct egs_gpu_proc *p, char *buf, size_t n)
{
	if (p->mem_used_mib >= 0)
		snprintf(buf, n, "pid %d (%s, %lld MiB)", p->pid, p->name, (long long)p->mem_used_mib);
	else
		snprintf(buf, n, "pid %d (%s)", p->pid, p->name);
}

static enum egs_check_status check_gpu_processes(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	struct egs_gpu_proc procs[PROCS_MAX];
	char first[96];
	size_t n = 0;
	int gpu;
	enum egs_err rc = egs_devices_processes(ctx->dev, ctx->node, ctx->now, procs, PROCS_MAX, &n);

	if (rc == EGS_ERR_NOT_FOUND) {
		snprintf(out, outsz, "the %s device backend cannot list GPU processes", ctx->dev->ops->name);
		return EGS_CHECK_SKIPPED;
	}
	if (rc != EGS_OK) {
		snprintf(out, outsz, "cannot list the processes on the GPUs of %s", node_of(ctx)->name);
		return EGS_CHECK_FAILED;
	}
	if (n == 0) {
		snprintf(out, outsz, "no compute process on the GPUs");
		return EGS_CHECK_PASSED;
	}
	describe_proc(&procs[0], first, sizeof(first));
	gpu = node_of(ctx)->gpus[procs[0].gpu].index;
	if (n == 1)
		snprintf(out, outsz, "GPU %d runs %s", gpu, first);
	else
		snprintf(out, outsz, "GPU %d runs %s, and %zu more processes use the GPUs", gpu, first, n - 1);
	return EGS_CHECK_FAILED;
}

/* ---- storage ---- */

/* Writes pattern into buf with each "{node}" replaced by node; false when it does not fit. */
static bool expand_node(const char *pattern, const char *node, char *buf, size_t n)
{
	size_t k = 0;

	for (const char *p = pattern; *p;) {
		const char *piece = p;
		size_t len = 1;
		if (strncmp(p, "{node}", 6) == 0) {
			piece = node;
			len = strlen(node);
			p += 6;
		} else {
			p++;
		}
		if (k + len >= n)
			return false;
		memcpy(buf + k, piece, len);
		k += len;
	}
	buf[k] = '\0';
	return true;
}

static void format_bytes(unsigned long long b, char *buf, size_t n)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)b;
	size_t u = 0;

	while (v >= 1024 && u + 1 < EGS_ARRAY_LEN(units)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static enum egs_check_status check_storage(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	char path[1024], free_s[32];
	struct stat st;
	struct statvfs vfs;

	if (!ctx->cfg->storage_path) {
		snprintf(out, outsz, "no --check-storage path configured");
		return EGS_CHECK_SKIPPED;
	}
	if (!expand_node(ctx->cfg->storage_path, node_of(ctx)->name, path, sizeof(path))) {
		snprintf(out, outsz, "the storage path is too long");
		return EGS_CHECK_FAILED;
	}
	if (stat(path, &st) != 0) {
		snprintf(out, outsz, "%s: %s", path, strerror(errno));
		return EGS_CHECK_FAILED;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(out, outsz, "%s is not a directory", path);
		return EGS_CHECK_FAILED;
	}
	if (access(path, R_OK | W_OK | X_OK) != 0) {
		snprintf(out, outsz, "%s is not readable and writable by the agent: %s", path, strerror(errno));
		return EGS_CHECK_FAILED;
	}
	if (statvfs(path, &vfs) == 0) {
		format_bytes((unsigned long long)vfs.f_bavail * vfs.f_frsize, free_s, sizeof(free_s));
		snprintf(out, outsz, "%s is present, %s free", path, free_s);
	} else {
		snprintf(out, outsz, "%s is present", path);
	}
	return EGS_CHECK_PASSED;
}

/* ---- connectivity ---- */

static enum egs_check_status check_connectivity(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	int timeout = ctx->cfg->connect_timeout_ms > 0 ? ctx->cfg->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	size_t probed = 0, unknown = 0;
	int64_t slowest = 0;

	if (ctx->n_peers == 0) {
		snprintf(out, outsz, "single-node GPR");
		return EGS_CHECK_SKIPPED;
	}
	for (size_t i = 0; i < ctx->n_peers; i++) {
		const struct egs_check_peer *p = &ctx->peers[i];
		char banner[128], why[160];
		int64_t ms = 0;
		if (!p->address[0]) {
			unknown++;
			continue;
		}
		if (egs_peer_probe(p->address, timeout, banner, sizeof(banner), why, sizeof(why), &ms) != EGS_OK) {
			snprintf(out, outsz, "cannot reach the agent of %s at %s: %s", p->node, p->address, why);
			return EGS_CHECK_FAILED;
		}
		probed++;
		if (ms > slowest)
			slowest = ms;
	}
	if (probed == 0) {
		snprintf(out, outsz, "no address known for the %zu other node(s)", unknown);
		return EGS_CHECK_SKIPPED;
	}
	snprintf(out, outsz, "reached %zu peer agent(s) in at most %lld ms%s", probed, (long long)slowest,
		 unknown ? "; some peers have no known address" : "");
	return EGS_CHECK_PASSED;
}

/* ---- nccl ---- */

/* Joins the node names (self first) or the peers' addresses with commas into a new string. */
static char *join_peers(const struct egs_check_ctx *ctx, bool addresses)
{
	size_t n = strlen(node_of(ctx)->name) + 1;
	char *s;

	for (size_t i = 0; i < ctx->n_peers; i++)
		n += strlen(addresses ? ctx->peers[i].address : ctx->peers[i].node) + 1;
	s = egs_malloc(n);
	s[0] = '\0';
	if (!addresses)
		egs_strlcpy(s, node_of(ctx)->name, n);
	for (size_t i = 0; i < ctx->n_peers; i++) {
		const char *v = addresses ? ctx->peers[i].address : ctx->peers[i].node;
		size_t k = strlen(s);
		snprintf(s + k, n - k, "%s%s", k ? "," : "", v);
	}
	return s;
}

static enum egs_check_status check_nccl(const struct egs_check_ctx *ctx, char *out, size_t outsz)
{
	int timeout = ctx->cfg->nccl_timeout_s > 0 ? ctx->cfg->nccl_timeout_s : DEFAULT_NCCL_TIMEOUT_S;
	char *nodes, *addrs, *env[8], count[16];
	enum egs_err rc;

	if (!ctx->cfg->nccl_command) {
		snprintf(out, outsz, "no --check-nccl command configured");
		return EGS_CHECK_SKIPPED;
	}
	if (ctx->n_peers == 0) {
		snprintf(out, outsz, "single-node GPR");
		return EGS_CHECK_SKIPPED;
	}
	nodes = join_peers(ctx, false);
	addrs = join_peers(ctx, true);
	env[0] = egs_hook_env("EGS_CHECK", "nccl");
	env[1] = egs_hook_env("EGS_NODE", node_of(ctx)->name);
	env[2] = egs_hook_env("EGS_CLUSTER", ctx->cluster);
	env[3] = egs_hook_env("EGS_GPR_ID", ctx->gpr_id);
	env[4] = egs_hook_env("EGS_NODES", nodes);
	env[5] = egs_hook_env("EGS_PEER_ADDRESSES", addrs);
	snprintf(count, sizeof(count), "%d", node_of(ctx)->gpu_count);
	env[6] = egs_hook_env("EGS_GPU_COUNT", count);
	env[7] = NULL;
	rc = egs_hook_run(ctx->cfg->nccl_command, env, timeout, ctx->stop, ctx->stop_arg, out, outsz);
	if (rc == EGS_OK && !out[0])
		snprintf(out, outsz, "the NCCL test command passed");
	for (int i = 0; env[i]; i++)
		egs_free(env[i]);
	egs_free(nodes);
	egs_free(addrs);
	return rc == EGS_OK ? EGS_CHECK_PASSED : EGS_CHECK_FAILED;
}

/* ---- the table ---- */

static const struct egs_check builtin[] = {
	{"node-health", EGS_CHECK_PRE | EGS_CHECK_POST, false, check_node_health},
	{"gpu-inventory", EGS_CHECK_PRE, false, check_gpu_inventory},
	{"gpu-processes", EGS_CHECK_PRE | EGS_CHECK_POST, false, check_gpu_processes},
	{"storage", EGS_CHECK_PRE | EGS_CHECK_POST, false, check_storage},
	{"connectivity", EGS_CHECK_PRE, false, check_connectivity},
	{"nccl", EGS_CHECK_PRE, true, check_nccl},
};

const struct egs_check *egs_checks_builtin(size_t *n)
{
	*n = EGS_ARRAY_LEN(builtin);
	return builtin;
}
