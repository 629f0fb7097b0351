/*
 * policy_wire.c: the JSON form of a policy; see policy_wire.h.
 *
 * Parsing is strict because a policy is an admin's rule: a typo must not quietly leave a workspace
 * unlimited.  Each failure names the member by its wire path, the way the server's 422s do.
 */
#include "server/policy_wire.h"

#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define BOOL_EVICTION "enableAutoEviction"
#define BOOL_REQUEUE "requeueOnFailure"
#define SOFT "softLimits"

/* ---- writing ---- */

static json_t *limits_json(const struct egs_limits *lv)
{
	json_t *o = json_object();
	char d[48];
	for (int l = 0; l < EGS_LIMIT_N; l++) {
		if (!(lv->set & (1u << l)))
			continue;
		json_t *v;
		switch (l) {
		case EGS_LIMIT_EXIT_DURATION:
			egs_duration_format(lv->max[l], d, sizeof(d));
			v = json_string(d);
			break;
		case EGS_LIMIT_PRIORITY: v = json_pack("{s:i, s:i}", "min", lv->prio_min, "max", lv->prio_max); break;
		case EGS_LIMIT_GPU_SHAPES:
			v = json_array();
			for (size_t i = 0; i < lv->shapes.n; i++)
				json_array_append_new(v, json_string(lv->shapes.v[i]));
			break;
		default: v = json_integer(lv->max[l]); break;
		}
		EGS_ASSERT(v);
		json_object_set_new(o, egs_limit_name(l), v);
	}
	return o;
}

json_t *egs_policy_json(const struct egs_policy *p)
{
	json_t *o = limits_json(&p->hard);
	if (p->auto_eviction >= 0)
		json_object_set_new(o, BOOL_EVICTION, json_boolean(p->auto_eviction));
	if (p->requeue >= 0)
		json_object_set_new(o, BOOL_REQUEUE, json_boolean(p->requeue));
	if (p->soft.set)
		json_object_set_new(o, SOFT, limits_json(&p->soft));
	return o;
}

/* ---- reading ---- */

/* Where a failure goes: the path of the member at fault and why. */
struct perr {
	char *field, *why;
	size_t fieldsz, whysz;
};

static bool fail(struct perr *e, const char *prefix, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static bool fail(struct perr *e, const char *prefix, const char *name, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	snprintf(e->field, e->fieldsz, "%s%s", prefix, name);
	egs_utf8_sanitize(e->field);
	for (char *c = e->field; *c; c++) /* a hostile key must not carry control characters into a reply */
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(e->why, e->whysz, "%s %s", e->field, msg);
	egs_utf8_sanitize(e->why);
	return false;
}

static bool limit_of(const char *name, enum egs_limit *out)
{
	for (int l = 0; l < EGS_LIMIT_N; l++)
		if (!strcmp(egs_limit_name(l), name)) {
			*out = l;
			return true;
		}
	return false;
}

static bool get_bound(json_t *v, const char *prefix, const char *name, int64_t min, int64_t max, int64_t *out,
		      struct perr *e)
{
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return fail(e, prefix, name, "must be an integer between %lld and %lld", (long long)min, (long long)max);
	*out = json_integer_value(v);
	return true;
}

static bool get_range(json_t *v, const char *prefix, struct egs_limits *lv, struct perr *e)
{
	char sub[64];
	const char *k;
	json_t *x;
	int64_t lo, hi;
	int64_t min = egs_limit_min(EGS_LIMIT_PRIORITY), max = egs_limit_max(EGS_LIMIT_PRIORITY);
	if (!json_is_object(v))
		return fail(e, prefix, "priorityRange", "must be an object {\"min\": 1, \"max\": 200}");
	snprintf(sub, sizeof(sub), "%spriorityRange.", prefix);
	json_object_foreach(v, k, x)
		if (strcmp(k, "min") != 0 && strcmp(k, "max") != 0)
			return fail(e, sub, k, "is not a member of priorityRange (only min and max)");
	if (!get_bound(json_object_get(v, "min"), sub, "min", min, max, &lo, e) ||
	    !get_bound(json_object_get(v, "max"), sub, "max", min, max, &hi, e))
		return false;
	if (lo > hi)
		return fail(e, prefix, "priorityRange", "has min %lld above max %lld", (long long)lo, (long long)hi);
	lv->prio_min = (int)lo;
	lv->prio_max = (int)hi;
	return true;
}

/* gpuShapes: a list of GPU shape names; an empty list allows every shape (the limit is not set). */
static bool get_shapes(json_t *v, const char *prefix, struct egs_limits *lv, struct perr *e)
{
	size_t i;
	json_t *x;
	const char *why;
	int64_t max = egs_limit_max(EGS_LIMIT_GPU_SHAPES);
	if (!json_is_array(v))
		return fail(e, prefix, "gpuShapes", "must be a list of GPU shape names");
	if ((int64_t)json_array_size(v) > max)
		return fail(e, prefix, "gpuShapes", "may list at most %lld shapes", (long long)max);
	json_array_foreach(v, i, x) {
		if (!json_is_string(x) || strlen(json_string_value(x)) != json_string_length(x))
			return fail(e, prefix, "gpuShapes", "element %zu must be a string", i);
		if (!egs_label_valid(json_string_value(x), &why))
			return fail(e, prefix, "gpuShapes", "element %zu %s", i, why);
		if (!egs_strlist_has(&lv->shapes, json_string_value(x)))
			egs_strlist_add(&lv->shapes, json_string_value(x));
	}
	return true;
}

/* One limit member (name, v) of a level; null leaves it unset. */
static bool get_limit(enum egs_limit l, json_t *v, const char *prefix, struct egs_limits *lv, struct perr *e)
{
	const char *name = egs_limit_name(l), *why;
	int64_t secs;
	if (json_is_null(v))
		return true;
	switch (l) {
	case EGS_LIMIT_EXIT_DURATION:
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return fail(e, prefix, name, "must be a duration such as 6h, 90m or 0d6h0m");
		if (!egs_duration_parse(json_string_value(v), &secs, &why))
			return fail(e, prefix, name, "%s", why);
		lv->max[l] = secs;
		break;
	case EGS_LIMIT_PRIORITY:
		if (!get_range(v, prefix, lv, e))
			return false;
		break;
	case EGS_LIMIT_GPU_SHAPES:
		if (!get_shapes(v, prefix, lv, e))
			return false;
		if (!lv->shapes.n)
			return true;
		break;
	default:
		if (!get_bound(v, prefix, name, egs_limit_min(l), egs_limit_max(l), &lv->max[l], e))
			return false;
	}
	lv->set |= 1u << l;
	return true;
}

static bool get_flag(json_t *v, const char *name, int *out, struct perr *e)
{
	if (json_is_null(v))
		return true;
	if (!json_is_boolean(v))
		return fail(e, "", name, "must be true or false");
	*out = json_is_true(v);
	return true;
}

static bool get_soft(json_t *v, struct egs_limits *lv, struct perr *e)
{
	const char *k;
	json_t *x;
	enum egs_limit l;
	if (json_is_null(v))
		return true;
	if (!json_is_object(v))
		return fail(e, "", SOFT, "must be an object of limits, e.g. {\"maxExitDurationPerGPR\": \"6h\"}");
	json_object_foreach(v, k, x) {
		if (!limit_of(k, &l))
			return fail(e, SOFT ".", k, "is not a limit (soft limits take the limit names only)");
		if (!get_limit(l, x, SOFT ".", lv, e))
			return false;
	}
	return true;
}

static bool skipped(const char *k, const char *const *skip)
{
	for (; skip && *skip; skip++)
		if (!strcmp(*skip, k))
			return true;
	return false;
}

bool egs_policy_parse(json_t *o, const char *const *skip, struct egs_policy *p, char *field, size_t fieldsz, char *why,
		      size_t whysz)
{
	struct perr e = {field, why, fieldsz, whysz};
	const char *k, *bad;
	json_t *v;
	enum egs_limit l;
	field[0] = why[0] = '\0';
	if (!json_is_object(o))
		return fail(&e, "", "policy", "must be a JSON object");
	json_object_foreach(o, k, v) {
		bool ok;
		if (skipped(k, skip))
			continue;
		if (limit_of(k, &l))
			ok = get_limit(l, v, "", &p->hard, &e);
		else if (!strcmp(k, BOOL_EVICTION))
			ok = get_flag(v, k, &p->auto_eviction, &e);
		else if (!strcmp(k, BOOL_REQUEUE))
			ok = get_flag(v, k, &p->requeue, &e);
		else if (!strcmp(k, SOFT))
			ok = get_soft(v, &p->soft, &e);
		else
			ok = fail(&e, "", k, "unknown field");
		if (!ok)
			return false;
	}
	if (!egs_policy_validate(p, &bad, why, whysz)) {
		snprintf(field, fieldsz, "%s", bad);
		return false;
	}
	return true;
}
