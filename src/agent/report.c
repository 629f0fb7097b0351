/*
 * report.c: the JSON bodies egs-agent sends (see report.h).  Metrics a backend could not read are left
 * out rather than sent as 0, so that a dashboard never shows a GPU at 0 W that was simply not read.
 */
#include "agent/report.h"

#include <string.h>

json_t *egs_report_register_node(const struct egs_dev_node *n, const char *attached_gpr, const char *address)
{
	json_t *gpus = json_array(), *o;

	for (int g = 0; g < n->gpu_count; g++)
		json_array_append_new(gpus, json_pack("{s:s, s:i}", "uuid", n->gpus[g].uuid, "index", n->gpus[g].index));
	o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:o, s:s}", "name", n->name, "instanceType", n->instance_type,
		      "gpuModel", n->gpu_model, "gpuCount", n->gpu_count, "memoryMiB", (json_int_t)n->memory_mib,
		      "gpus", gpus, "attachedGpr", attached_gpr);
	EGS_ASSERT(o);
	if (n->cloud_provider[0])
		json_object_set_new(o, "cloudProvider", json_string(n->cloud_provider));
	if (n->region[0])
		json_object_set_new(o, "region", json_string(n->region));
	if (n->zone && n->zone[0])
		json_object_set_new(o, "zone", json_string(n->zone));
	if (address && address[0])
		json_object_set_new(o, "address", json_string(address));
	return o;
}

void egs_report_add_sharing(json_t *o, const struct egs_strlist *attached_shared, bool registration)
{
	json_t *ids = json_array();

	for (size_t i = 0; i < attached_shared->n; i++)
		json_array_append_new(ids, json_string(attached_shared->v[i]));
	json_object_set_new(o, "attachedShared", ids);
	if (registration)
		json_object_set_new(o, "features", json_pack("[s]", "sharing"));
}

json_t *egs_report_gpu(const struct egs_dev_gpu *g, const struct egs_gpu_sample *s)
{
	json_t *o = json_pack("{s:s, s:i}", "uuid", g->uuid, "index", g->index);

	if (s->lost) {
		json_object_set_new(o, "lost", json_true());
		return o;
	}
	if (s->valid & EGS_GPU_POWER)
		json_object_set_new(o, "powerW", json_real(s->power_w));
	if (s->valid & EGS_GPU_POWER_LIMIT)
		json_object_set_new(o, "powerLimitW", json_real(s->power_limit_w));
	if (s->valid & EGS_GPU_TEMP)
		json_object_set_new(o, "tempC", json_real(s->temp_c));
	if (s->valid & EGS_GPU_UTIL)
		json_object_set_new(o, "utilPct", json_real(s->util_pct));
	if (s->valid & EGS_GPU_MEM_USED)
		json_object_set_new(o, "memUsedMiB", json_integer(s->mem_used_mib));
	if (s->valid & EGS_GPU_MEM_TOTAL)
		json_object_set_new(o, "memTotalMiB", json_integer(s->mem_total_mib));
	if (s->valid & EGS_GPU_ECC)
		json_object_set_new(o, "eccUncorrected", json_integer(s->ecc_uncorrected));
	if (s->valid & EGS_GPU_XID) {
		json_object_set_new(o, "xidCount", json_integer(s->xid_count));
		if (s->last_xid)
			json_object_set_new(o, "lastXid", json_integer(s->last_xid));
	}
	return o;
}

/* A process name as a JSON string; names from /proc may hold any byte. */
static json_t *name_string(const char *name)
{
	char clean[EGS_DEV_PROC_NAME_MAX];

	egs_report_clean(name, clean, sizeof(clean));
	return json_string(clean);
}

json_t *egs_report_workloads(const struct egs_dev_node *n, const struct egs_gpu_proc *p, size_t np)
{
	json_t *a = json_array();

	for (size_t i = 0; i < np; i++) {
		json_t *o;
		EGS_ASSERT(p[i].gpu >= 0 && p[i].gpu < n->gpu_count);
		o = json_pack("{s:o, s:s, s:i, s:[s]}", "name", name_string(p[i].name), "namespace", "", "pid",
			      p[i].pid, "gpus", n->gpus[p[i].gpu].uuid);
		if (p[i].mem_used_mib >= 0)
			json_object_set_new(o, "memUsedMiB", json_integer(p[i].mem_used_mib));
		json_array_append_new(a, o);
	}
	return a;
}

json_t *egs_report_heartbeat_node(const struct egs_dev_node *n, enum egs_health health, const char *why,
				  const char *attached_gpr, const struct egs_gpu_sample *s,
				  const struct egs_gpu_proc *p, size_t np)
{
	json_t *gpus = json_array(), *o;

	/* A GPU with nothing read (the kubernetes backend before dcgm-exporter answers) is left out: egsd
	 * takes a GPU in a heartbeat as sampled, and one at 0 % would count as idle. */
	for (int g = 0; s && g < n->gpu_count; g++)
		if (s[g].valid || s[g].lost)
			json_array_append_new(gpus, egs_report_gpu(&n->gpus[g], &s[g]));
	o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", n->name, "health", egs_health_name(health), "attachedGpr",
		      attached_gpr, "gpus", gpus, "workloads", egs_report_workloads(n, p, np));
	EGS_ASSERT(o);
	if (why && why[0] && health != EGS_HEALTH_HEALTHY) {
		char clean[EGS_REPORT_MSG_MAX];
		egs_report_clean(why, clean, sizeof(clean));
		json_object_set_new(o, "healthReason", json_string(clean));
	}
	return o;
}

json_t *egs_report_probe_gpu(const struct egs_dev_node *n, int g, enum egs_health health, const char *why,
			     const struct egs_gpu_sample *s, const struct egs_gpu_proc *p, size_t np)
{
	json_t *o = egs_report_gpu(&n->gpus[g], s), *procs = json_array();

	json_object_set_new(o, "node", json_string(n->name));
	json_object_set_new(o, "gpuModel", json_string(n->gpu_model));
	json_object_set_new(o, "memoryMiB", json_integer(n->memory_mib));
	json_object_set_new(o, "health", json_string(egs_health_name(health)));
	if (why && why[0]) {
		char clean[EGS_REPORT_MSG_MAX];
		egs_report_clean(why, clean, sizeof(clean));
		json_object_set_new(o, "healthReason", json_string(clean));
	}
	for (size_t i = 0; i < np; i++) {
		json_t *x;
		if (p[i].gpu != g)
			continue;
		x = json_pack("{s:i, s:o}", "pid", p[i].pid, "name", name_string(p[i].name));
		if (p[i].mem_used_mib >= 0)
			json_object_set_new(x, "memUsedMiB", json_integer(p[i].mem_used_mib));
		json_array_append_new(procs, x);
	}
	json_object_set_new(o, "processes", procs);
	return o;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when s does not start one. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
		   s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;

	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) ||
	    (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))))
		return 0; /* overlong, surrogate or beyond U+10FFFF */
	return n;
}

void egs_report_clean(const char *msg, char *out, size_t outsz)
{
	const unsigned char *s = (const unsigned char *)msg;
	size_t k = 0;

	while (*s) {
		size_t n = utf8_seq(s);
		if (k + (n ? n : 1) >= outsz)
			break;
		if (n) {
			memcpy(out + k, s, n);
			k += n;
			s += n;
		} else {
			out[k++] = '?';
			s++;
		}
	}
	out[k] = '\0';
}

json_t *egs_report_result(const char *action_id, const char *type, const char *gpr_id, const char *node, bool ok,
			  const char *message, const struct egs_check_report *rep)
{
	char clean[EGS_REPORT_MSG_MAX];
	json_t *body;

	egs_report_clean(message, clean, sizeof(clean));
	body = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "actionId", action_id, "type", type, "gprId", gpr_id,
			 "node", node, "ok", ok, "message", clean);
	if (body && rep)
		json_object_set_new(body, "checks", egs_checks_json(rep));
	return body;
}
