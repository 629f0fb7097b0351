/*
 * policy.c: workspace policies and the global limits; see policy.h.  Pure: no I/O, time comes in as
 * `now`.
 *
 * Invariant: a limit's bit in egs_limits.set says whether its value means anything; values of unset
 * limits are never read.  Messages name the limit by its wire name and show the value in the wire's
 * units (durations as 6h0m0s, memory in GB), so what a user reads is what an admin wrote.
 */
#include "core/policy.h"

#include "core/gpr.h"
#include "core/sched.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name, *field;
	int64_t min, max;
} limit_defs[EGS_LIMIT_N] = {
	[EGS_LIMIT_MAX_GPRS] = {"maxGPRs", "sliceName", 0, 1000000},
	[EGS_LIMIT_EXIT_DURATION] = {"maxExitDurationPerGPR", "exitDuration", 1, EGS_MAX_DURATION_S},
	[EGS_LIMIT_PRIORITY] = {"priorityRange", "priority", 1, 1000},
	[EGS_LIMIT_GPU_SHAPES] = {"gpuShapes", "gpuShape", 1, 64},
	[EGS_LIMIT_GPUS] = {"maxGPUPerGpr", "numberOfGPUs", 1, 65536},
	[EGS_LIMIT_MEMORY] = {"maxMemoryPerGpr", "memoryPerGpu", 1, 10000000},
	[EGS_LIMIT_QUOTA] = {"concurrentGpuQuota", "numberOfGPUs", 0, 1000000},
	[EGS_LIMIT_NODES] = {"maxNodesPerGpr", "numberOfGPUNodes", 1, 1024},
};

const char *egs_limit_name(enum egs_limit l)
{
	EGS_ASSERT((unsigned)l < EGS_LIMIT_N);
	return limit_defs[l].name;
}

const char *egs_limit_field(enum egs_limit l)
{
	EGS_ASSERT((unsigned)l < EGS_LIMIT_N);
	return limit_defs[l].field;
}

int64_t egs_limit_min(enum egs_limit l)
{
	EGS_ASSERT((unsigned)l < EGS_LIMIT_N);
	return limit_defs[l].min;
}

int64_t egs_limit_max(enum egs_limit l)
{
	EGS_ASSERT((unsigned)l < EGS_LIMIT_N);
	return limit_defs[l].max;
}

/* ---- lifecycle ---- */

void egs_policy_init(struct egs_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->auto_eviction = -1;
	p->requeue = -1;
}

void egs_policy_cleanup(struct egs_policy *p)
{
	egs_strlist_cleanup(&p->hard.shapes);
	egs_strlist_cleanup(&p->soft.shapes);
	egs_policy_init(p);
}

struct egs_policy *egs_policy_new(void)
{
	struct egs_policy *p = egs_malloc(sizeof(*p));
	egs_policy_init(p);
	return p;
}

void egs_policy_free(struct egs_policy *p)
{
	if (!p)
		return;
	egs_policy_cleanup(p);
	free(p);
}

static void limits_copy(struct egs_limits *dst, const struct egs_limits *src)
{
	struct egs_strlist shapes = dst->shapes;
	*dst = *src;
	dst->shapes = shapes;
	egs_strlist_copy(&dst->shapes, &src->shapes);
}

void egs_policy_copy(struct egs_policy *dst, const struct egs_policy *src)
{
	egs_policy_cleanup(dst);
	limits_copy(&dst->hard, &src->hard);
	limits_copy(&dst->soft, &src->soft);
	dst->auto_eviction = src->auto_eviction;
	dst->requeue = src->requeue;
}

bool egs_policy_empty(const struct egs_policy *p)
{
	return !p->hard.set && !p->soft.set && p->auto_eviction < 0 && p->requeue < 0;
}

uint32_t egs_policy_limits_set(const struct egs_policy *p)
{
	return p->hard.set | p->soft.set;
}

/* ---- values as the wire shows them ---- */

/* "6h0m0s", "1-200", "80GB", "[A, B]" or a plain number: the value of limit l at one level. */
static void limit_text(const struct egs_limits *lv, enum egs_limit l, char *buf, size_t n)
{
	size_t used = 0;
	switch (l) {
	case EGS_LIMIT_EXIT_DURATION: egs_duration_format(lv->max[l], buf, n); break;
	case EGS_LIMIT_PRIORITY: snprintf(buf, n, "%d-%d", lv->prio_min, lv->prio_max); break;
	case EGS_LIMIT_MEMORY: snprintf(buf, n, "%lldGB", (long long)lv->max[l]); break;
	case EGS_LIMIT_GPU_SHAPES:
		buf[0] = '\0';
		for (size_t i = 0; i < lv->shapes.n && used < n; i++)
			used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "[", lv->shapes.v[i]);
		if (used < n)
			snprintf(buf + used, n - used, "]");
		break;
	default: snprintf(buf, n, "%lld", (long long)lv->max[l]); break;
	}
}

/* MiB as GB, one decimal when it is not whole (15360 -> "15GB", 1536 -> "1.5GB"). */
static void gb_text(int64_t mib, char *buf, size_t n)
{
	if (mib % 1024 == 0)
		snprintf(buf, n, "%lldGB", (long long)(mib / 1024));
	else
		snprintf(buf, n, "%.1fGB", (double)mib / 1024.0);
}

/* ---- validation ---- */

static bool shapes_subset(const struct egs_strlist *a, const struct egs_strlist *b, const char **missing)
{
	for (size_t i = 0; i < a->n; i++)
		if (!egs_strlist_has(b, a->v[i])) {
			*missing = a->v[i];
			return false;
		}
	return true;
}

bool egs_policy_validate(const struct egs_policy *p, const char **field, char *why, size_t whysz)
{
	static const char *const soft_field[EGS_LIMIT_N] = {
		"softLimits.maxGPRs",      "softLimits.maxExitDurationPerGPR", "softLimits.priorityRange",
		"softLimits.gpuShapes",    "softLimits.maxGPUPerGpr",          "softLimits.maxMemoryPerGpr",
		"softLimits.concurrentGpuQuota", "softLimits.maxNodesPerGpr",
	};
	const struct egs_limits *h = &p->hard, *s = &p->soft;
	char hv[200], sv[200];
	for (int l = 0; l < EGS_LIMIT_N; l++) {
		uint32_t bit = 1u << l;
		if (!(h->set & bit) || !(s->set & bit))
			continue;
		const char *missing = NULL;
		bool ok;
		switch (l) {
		case EGS_LIMIT_PRIORITY: ok = s->prio_min >= h->prio_min && s->prio_max <= h->prio_max; break;
		case EGS_LIMIT_GPU_SHAPES: ok = shapes_subset(&s->shapes, &h->shapes, &missing); break;
		default: ok = s->max[l] <= h->max[l]; break;
		}
		if (ok)
			continue;
		*field = soft_field[l];
		limit_text(h, l, hv, sizeof(hv));
		limit_text(s, l, sv, sizeof(sv));
		if (missing)
			snprintf(why, whysz, "%s: %s is not among the hard gpuShapes %s; a soft limit must lie within the hard one",
				 *field, missing, hv);
		else
			snprintf(why, whysz, "%s %s is beyond the hard %s %s; a soft limit must lie within the hard one",
				 *field, sv, limit_defs[l].name, hv);
		egs_utf8_sanitize(why);
		return false;
	}
	return true;
}

/* ---- measuring a request ---- */

static bool holding(enum egs_gpr_state s)
{
	return s == EGS_GPR_PROVISIONING || s == EGS_GPR_PROVISIONED;
}

void egs_policy_measure(const struct egs_state *st, const struct egs_gpr *g, const struct egs_workspace *ws,
			const struct egs_gpr *self, uint32_t need, struct egs_policy_ask *a)
{
	void *v;
	memset(a, 0, sizeof(*a));
	egs_strlcpy(a->workspace, g->workspace, sizeof(a->workspace));
	a->priority = g->priority;
	a->exit_duration_s = g->exit_duration_s;
	a->gpus = (int64_t)g->gpus_per_node * g->node_count;
	a->nodes = g->node_count;
	a->any_shape = !g->gpu_shape[0];
	if (need & (1u << EGS_LIMIT_MAX_GPRS)) /* the workspace's count, with g once */
		a->unfinished = (ws ? ws->unfinished : 0) + !(self && egs_gpr_state_unfinished(self->state));
	if (need & (1u << EGS_LIMIT_QUOTA)) {
		for (size_t i = 0; i < st->active.len; i++) {
			const struct egs_gpr *o = st->active.items[i];
			if (o != self && holding(o->state) && !strcmp(o->workspace, g->workspace))
				a->held_gpus += (int64_t)o->gpus_per_node * o->node_count;
		}
		a->held_gpus += a->gpus;
	}
	if (need & (1u << EGS_LIMIT_GPU_SHAPES | 1u << EGS_LIMIT_MEMORY)) {
		for (size_t i = 0; egs_map_next(&st->nodes, &i, NULL, &v);) {
			const struct egs_node *n = v;
			if (!egs_node_matches(g, ws, n))
				continue;
			if (n->memory_mib > a->gpu_mem_mib)
				a->gpu_mem_mib = n->memory_mib;
			if (!egs_strlist_has(&a->shapes, n->gpu_shape))
				egs_strlist_add(&a->shapes, n->gpu_shape);
		}
		if (g->gpu_shape[0] && !a->shapes.n)
			egs_strlist_add(&a->shapes, g->gpu_shape);
		if (a->gpu_mem_mib < g->memory_mib)
			a->gpu_mem_mib = g->memory_mib;
		a->memory_mib = a->gpu_mem_mib * a->gpus;
	}
}

void egs_policy_ask_cleanup(struct egs_policy_ask *a)
{
	egs_strlist_cleanup(&a->shapes);
}

/* ---- checking ---- */

/* The first shape of a outside the allowed list, or NULL when every one is allowed. */
static const char *shape_outside(const struct egs_policy_ask *a, const struct egs_strlist *allowed)
{
	for (size_t i = 0; i < a->shapes.n; i++)
		if (!egs_strlist_has(allowed, a->shapes.v[i]))
			return a->shapes.v[i];
	return NULL;
}

/* Whether a exceeds limit l of level lv.  Only the test: the text saying so (ask_text) is made for
 * a limit that is exceeded, not for every create under a policy (~600 instructions a limit). */
static bool exceeds(const struct egs_limits *lv, enum egs_limit l, const struct egs_policy_ask *a)
{
	switch (l) {
	case EGS_LIMIT_MAX_GPRS: return a->unfinished > lv->max[l];
	case EGS_LIMIT_EXIT_DURATION: return a->exit_duration_s > lv->max[l];
	case EGS_LIMIT_PRIORITY: return a->priority < lv->prio_min || a->priority > lv->prio_max;
	case EGS_LIMIT_GPU_SHAPES: return shape_outside(a, &lv->shapes) != NULL;
	case EGS_LIMIT_GPUS: return a->gpus > lv->max[l];
	case EGS_LIMIT_MEMORY: return a->memory_mib > lv->max[l] * 1024;
	case EGS_LIMIT_QUOTA: return a->held_gpus > lv->max[l];
	case EGS_LIMIT_NODES: return a->nodes > lv->max[l];
	default: EGS_ASSERT(!"unknown limit"); return false;
	}
}

/* What a asks for of limit l ("exitDuration 8h0m0s", ...), into what; lv is the level whose
 * allowed shapes name the shape outside them. */
static void ask_text(const struct egs_limits *lv, enum egs_limit l, const struct egs_policy_ask *a, char *what,
		     size_t n)
{
	char t[64];
	const char *outside;
	switch (l) {
	case EGS_LIMIT_MAX_GPRS:
		snprintf(what, n, "workspace %s would have %lld unfinished GPRs", a->workspace, (long long)a->unfinished);
		break;
	case EGS_LIMIT_EXIT_DURATION:
		egs_duration_format(a->exit_duration_s, t, sizeof(t));
		snprintf(what, n, "exitDuration %s", t);
		break;
	case EGS_LIMIT_PRIORITY: snprintf(what, n, "priority %d", a->priority); break;
	case EGS_LIMIT_GPU_SHAPES:
		outside = shape_outside(a, &lv->shapes);
		snprintf(what, n, a->any_shape ? "gpuShape %s (none was given, and it may land on that)" : "gpuShape %s",
			 outside ? outside : "");
		break;
	case EGS_LIMIT_GPUS:
		snprintf(what, n, "%lld GPUs (numberOfGPUs x numberOfGPUNodes)", (long long)a->gpus);
		break;
	case EGS_LIMIT_MEMORY:
		gb_text(a->memory_mib, what, n);
		gb_text(a->gpu_mem_mib, t, sizeof(t));
		snprintf(what + strlen(what), n - strlen(what), " of GPU memory (%lld GPUs of up to %s)", (long long)a->gpus, t);
		break;
	case EGS_LIMIT_QUOTA:
		snprintf(what, n, "workspace %s would hold %lld GPUs at once (%lld held, %lld asked)", a->workspace,
			 (long long)a->held_gpus, (long long)(a->held_gpus - a->gpus), (long long)a->gpus);
		break;
	case EGS_LIMIT_NODES: snprintf(what, n, "numberOfGPUNodes %d", a->nodes); break;
	default: EGS_ASSERT(!"unknown limit");
	}
}

/* Whose policy a message names: the workspace's (ws_level) or the global one. */
static void whose_text(bool ws_level, const struct egs_policy_ask *a, char *buf, size_t n)
{
	if (ws_level)
		snprintf(buf, n, "workspace %s's policy", a->workspace);
	else
		egs_strlcpy(buf, "the global policy", n);
}

/* "exceeds" for numbers, "is outside" for the range, "is not among" for shapes. */
static const char *verb(enum egs_limit l)
{
	return l == EGS_LIMIT_PRIORITY ? "is outside" : l == EGS_LIMIT_GPU_SHAPES ? "is not among" : "exceeds";
}

/* Appends to res->message at *used (what is written so far), cut at its size. */
static void message_add(struct egs_policy_result *res, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void message_add(struct egs_policy_result *res, size_t *used, const char *fmt, ...)
{
	va_list ap;
	if (*used >= sizeof(res->message))
		return;
	va_start(ap, fmt);
	int n = vsnprintf(res->message + *used, sizeof(res->message) - *used, fmt, ap);
	va_end(ap);
	if (n > 0)
		*used += (size_t)n;
}

static bool check_hard(const struct egs_policy *p, bool ws_level, const struct egs_policy_ask *a, uint32_t mask,
		       struct egs_policy_result *res)
{
	char what[300], value[200], whose[EGS_NAME_MAX + 40];
	for (int l = 0; p && l < EGS_LIMIT_N; l++) {
		if (!(mask & p->hard.set & (1u << l)) || !exceeds(&p->hard, l, a))
			continue;
		ask_text(&p->hard, l, a, what, sizeof(what));
		limit_text(&p->hard, l, value, sizeof(value));
		whose_text(ws_level, a, whose, sizeof(whose));
		res->verdict = EGS_POLICY_HARD;
		res->limit = l;
		res->field = limit_defs[l].field;
		size_t used = 0;
		message_add(res, &used, "%s %s the limit %s %s of %s", what, verb(l), limit_defs[l].name, value, whose);
		egs_utf8_sanitize(res->message);
		return true;
	}
	return false;
}

static void check_soft(const struct egs_policy *p, bool ws_level, const struct egs_policy_ask *a, uint32_t mask,
		       struct egs_policy_result *res, size_t *used)
{
	char what[300], value[200], whose[EGS_NAME_MAX + 40];
	for (int l = 0; p && l < EGS_LIMIT_N; l++) {
		if (!(mask & p->soft.set & (1u << l)) || !exceeds(&p->soft, l, a))
			continue;
		ask_text(&p->soft, l, a, what, sizeof(what));
		limit_text(&p->soft, l, value, sizeof(value));
		whose_text(ws_level, a, whose, sizeof(whose));
		res->verdict = EGS_POLICY_SOFT;
		message_add(res, used, "%s%s %s the soft limit %s %s of %s", *used ? "; " : "", what, verb(l),
			    limit_defs[l].name, value, whose);
	}
}

enum egs_policy_verdict egs_policy_check(const struct egs_policy *ws, const struct egs_policy *global,
					 const struct egs_policy_ask *a, uint32_t mask, struct egs_policy_result *res)
{
	size_t used = 0;
	res->verdict = EGS_POLICY_OK;
	res->limit = 0;
	res->field = NULL;
	res->message[0] = '\0';
	if (check_hard(ws, true, a, mask, res) || check_hard(global, false, a, mask, res))
		return res->verdict;
	check_soft(ws, true, a, mask, res, &used);
	check_soft(global, false, a, mask, res, &used);
	if (res->verdict == EGS_POLICY_SOFT)
		message_add(res, &used, ": waits for an admin's approval");
	egs_utf8_sanitize(res->message);
	return res->verdict;
}

/* ---- holding a GPR for approval ---- */

void egs_policy_hold(struct egs_state *st, struct egs_gpr *g, const char *reason, int64_t now)
{
	EGS_ASSERT(g->state == EGS_GPR_PENDING || g->state == EGS_GPR_QUEUED);
	free(g->pending_reason);
	g->pending_reason = egs_strdup(reason);
	egs_utf8_sanitize(g->pending_reason);
	if (g->state == EGS_GPR_QUEUED) {
		egs_gpr_set_state(st, g, EGS_GPR_PENDING, now, "PendingApproval", "GPR %s changed and back to Pending: %s",
				  g->name, g->pending_reason);
		return;
	}
	egs_state_touch(st, EGS_KIND_GPR, g);
	egs_state_event(st, now, "Normal", "PendingApproval", "GPR", g->id, g->workspace,
			"GPR %s changed and still Pending: %s", g->name, g->pending_reason);
}
