/*
 * series.c: per-GPU ring buffers of averaged samples; see series.h.
 * Invariant: the points of a series are in strictly increasing step order, the oldest at
 * pts[head], the newest at pts[(head + len - 1) % cap].
 */
#include "core/series.h"

#include <string.h>

static int64_t step_of(int64_t t, int64_t step)
{
	int64_t r = t % step;
	return r < 0 ? t - r - step : t - r;
}

void egs_series_set_init(struct egs_series_set *set, uint32_t cap, int64_t step, size_t max_series)
{
	EGS_ASSERT(cap >= 1 && step >= 1);
	memset(set, 0, sizeof(*set));
	egs_map_init(&set->by_uuid);
	set->cap = cap;
	set->step = step;
	set->max_series = max_series;
}

static void series_free(struct egs_series *s)
{
	if (!s)
		return;
	free(s->pts);
	free(s);
}

void egs_series_set_cleanup(struct egs_series_set *set)
{
	void *v;
	for (size_t i = 0; egs_map_next(&set->by_uuid, &i, NULL, &v);)
		series_free(v);
	egs_map_cleanup(&set->by_uuid);
	memset(set, 0, sizeof(*set));
}

static struct egs_point *newest(const struct egs_series_set *set, const struct egs_series *s)
{
	return s->len ? &s->pts[(s->head + s->len - 1) % set->cap] : NULL;
}

/* Folds one sample into a running mean: m + (x - m) / n keeps precision for long steps. */
static float fold(float mean, double x, uint32_t n)
{
	return (float)(mean + (x - mean) / n);
}

bool egs_series_set_add(struct egs_series_set *set, const char *uuid, int64_t t, const struct egs_sample *x)
{
	size_t len = strlen(uuid);
	if (len == 0 || len >= EGS_SERIES_UUID_MAX)
		return false;
	struct egs_series *s = egs_map_get(&set->by_uuid, uuid);
	if (!s) {
		if (set->by_uuid.len >= set->max_series)
			return false;
		s = egs_calloc(1, sizeof(*s));
		memcpy(s->uuid, uuid, len + 1);
		s->pts = egs_calloc(set->cap, sizeof(*s->pts));
		egs_map_put(&set->by_uuid, s->uuid, s);
	}
	int64_t at = step_of(t, set->step);
	struct egs_point *p = newest(set, s);
	if (p && at < p->t)
		return false;
	if (!p || at > p->t) {
		if (s->len == set->cap) {
			s->head = (s->head + 1) % set->cap;
			s->len--;
		}
		p = &s->pts[(s->head + s->len) % set->cap];
		s->len++;
		memset(p, 0, sizeof(*p));
		p->t = at;
	}
	p->n++;
	p->power_w = fold(p->power_w, x->power_w, p->n);
	p->temp_c = fold(p->temp_c, x->temp_c, p->n);
	p->util_pct = fold(p->util_pct, x->util_pct, p->n);
	p->mem_used_mib = fold(p->mem_used_mib, x->mem_used_mib, p->n);
	return true;
}

const struct egs_series *egs_series_set_get(const struct egs_series_set *set, const char *uuid)
{
	return egs_map_get(&set->by_uuid, uuid);
}

bool egs_series_set_remove(struct egs_series_set *set, const char *uuid)
{
	struct egs_series *s = egs_map_del(&set->by_uuid, uuid);
	series_free(s);
	return s != NULL;
}

size_t egs_series_set_bytes(const struct egs_series_set *set)
{
	return set->by_uuid.len * (sizeof(struct egs_series) + (size_t)set->cap * sizeof(struct egs_point));
}

size_t egs_series_range(const struct egs_series_set *set, const struct egs_series *s, int64_t from, int64_t to,
			struct egs_point *out, size_t max)
{
	/* Walk back from the newest point so that "the newest max" falls out naturally. */
	size_t n = 0;
	for (uint32_t i = s->len; i-- > 0 && n < max;) {
		const struct egs_point *p = &s->pts[(s->head + i) % set->cap];
		if (p->t >= to)
			continue;
		if (p->t < from)
			break;
		out[n++] = *p;
	}
	for (size_t i = 0; i < n / 2; i++) {
		struct egs_point tmp = out[i];
		out[i] = out[n - 1 - i];
		out[n - 1 - i] = tmp;
	}
	return n;
}

static void take_max(double *m, double v, bool first)
{
	if (first || v > *m)
		*m = v;
}

bool egs_series_summarize(const struct egs_series_set *set, const struct egs_series *s, int64_t from, int64_t to,
			  struct egs_series_summary *out)
{
	memset(out, 0, sizeof(*out));
	double w = 0;
	for (uint32_t i = 0; i < s->len; i++) {
		const struct egs_point *p = &s->pts[(s->head + i) % set->cap];
		if (p->t < from || p->t >= to)
			continue;
		bool first = out->points == 0;
		if (first)
			out->first = p->t;
		out->last = p->t;
		out->points++;
		w += p->n;
		out->power_mean += (double)p->power_w * p->n;
		out->temp_mean += (double)p->temp_c * p->n;
		out->util_mean += (double)p->util_pct * p->n;
		out->mem_mean += (double)p->mem_used_mib * p->n;
		take_max(&out->power_max, p->power_w, first);
		take_max(&out->temp_max, p->temp_c, first);
		take_max(&out->util_max, p->util_pct, first);
		take_max(&out->mem_max, p->mem_used_mib, first);
	}
	if (!out->points)
		return false;
	out->power_mean /= w;
	out->temp_mean /= w;
	out->util_mean /= w;
	out->mem_mean /= w;
	return true;
}
