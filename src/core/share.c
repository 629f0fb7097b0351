/*
 * share.c: the arithmetic of GPU sharing; see share.h.  Pure: integers in, integers out.
 */
#include "core/share.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The one device with the least room that still takes request whole; -1 when none does. */
static int best_single(const int *room, int ndev, int request)
{
	int best = -1;
	for (int i = 0; i < ndev; i++)
		if (room[i] >= request && (best < 0 || room[i] < room[best]))
			best = i;
	return best;
}

/* Device indices by room, most first; ties keep the lower index first (insertion sort: stable). */
static void by_room(const int *room, int ndev, int *ord)
{
	for (int i = 0; i < ndev; i++) {
		int j = i;
		while (j > 0 && room[ord[j - 1]] < room[i]) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = i;
	}
}

bool egs_share_fit(const int *room, int ndev, int request, int *take)
{
	EGS_ASSERT(ndev >= 0 && ndev <= EGS_SHARE_DEV_MAX);
	memset(take, 0, (size_t)ndev * sizeof(*take));
	if (request <= 0 || ndev == 0)
		return false;
	if (request <= EGS_SHARE_WHOLE) {
		int one = best_single(room, ndev, request);
		if (one >= 0) {
			take[one] = request;
			return true;
		}
	}
	int ord[EGS_SHARE_DEV_MAX];
	by_room(room, ndev, ord);
	/* k devices take request / k each and the first request % k of them one hundredth more; k may
	 * not exceed request, since every device it touches takes at least 0.01. */
	for (int k = 2; k <= ndev && k <= request; k++) {
		int base = request / k, rem = request % k;
		bool fits = true;
		for (int j = 0; j < k && fits; j++)
			fits = room[ord[j]] >= base + (j < rem);
		if (!fits)
			continue;
		for (int j = 0; j < k; j++)
			take[ord[j]] = base + (j < rem);
		return true;
	}
	return false;
}

bool egs_share_from_number(double v, int max_centi, int *centi)
{
	if (!isfinite(v) || v <= 0 || v > (double)max_centi / EGS_SHARE_WHOLE)
		return false;
	double h = v * EGS_SHARE_WHOLE, r = round(h);
	/* 0.29 * 100 is 28.999999999999996: a decimal of two places lands within a rounding error of an
	 * integer, anything finer (0.001, 0.125) does not. */
	if (fabs(h - r) > 1e-6 * (r > 1 ? r : 1) || r < 1)
		return false;
	*centi = (int)r;
	return true;
}

void egs_share_format(int centi, char *buf, size_t n)
{
	EGS_ASSERT(centi >= 0);
	snprintf(buf, n, "%d.%02d", centi / EGS_SHARE_WHOLE, centi % EGS_SHARE_WHOLE);
}

bool egs_share_parse(const char *s, int max_centi, int *centi)
{
	long whole = 0, frac = 0;
	int digits = 0, decimals = 0;
	const char *p = s;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		whole = whole * 10 + (*p - '0');
		if (whole > max_centi)
			return false;
	}
	if (!digits)
		return false;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, decimals++)
			if (decimals < 2)
				frac = frac * 10 + (*p - '0');
			else
				return false;
		if (!decimals)
			return false;
	}
	if (*p)
		return false;
	if (decimals == 1)
		frac *= 10;
	long v = whole * EGS_SHARE_WHOLE + frac;
	if (v < 1 || v > max_centi)
		return false;
	*centi = (int)v;
	return true;
}

void egs_share_timeline_init(struct egs_share_timeline *tl, int ndev)
{
	EGS_ASSERT(ndev >= 0 && ndev <= EGS_SHARE_DEV_MAX);
	memset(tl, 0, sizeof(*tl));
	tl->ndev = ndev;
	tl->last_start = INT64_MIN;
}

void egs_share_timeline_cleanup(struct egs_share_timeline *tl)
{
	free(tl->v);
	memset(tl, 0, sizeof(*tl));
}

void egs_share_timeline_add(struct egs_share_timeline *tl, int64_t start, int64_t end, const int *take)
{
	if (tl->n == tl->cap) {
		tl->cap = tl->cap ? 2 * tl->cap : 4;
		tl->v = egs_realloc(tl->v, tl->cap * sizeof(*tl->v));
	}
	struct egs_share_alloc *a = &tl->v[tl->n++];
	memset(a, 0, sizeof(*a));
	a->end = end;
	memcpy(a->take, take, (size_t)tl->ndev * sizeof(*take));
	if (start > tl->last_start)
		tl->last_start = start;
}

int64_t egs_share_timeline_end(const struct egs_share_timeline *tl)
{
	int64_t end = INT64_MIN;
	for (size_t i = 0; tl && i < tl->n; i++)
		if (tl->v[i].end > end)
			end = tl->v[i].end;
	return end;
}

/* The room of each device at t: whole minus what the allocations still running after t take. */
static void room_at(const struct egs_share_timeline *tl, int ndev, int64_t t, int *room)
{
	for (int d = 0; d < ndev; d++)
		room[d] = EGS_SHARE_WHOLE;
	for (size_t i = 0; tl && i < tl->n; i++)
		if (tl->v[i].end > t)
			for (int d = 0; d < ndev; d++)
				room[d] -= tl->v[i].take[d];
}

int64_t egs_share_timeline_earliest(const struct egs_share_timeline *tl, int ndev, int64_t floor, int request,
				    int *take)
{
	int room[EGS_SHARE_DEV_MAX];
	if (tl && tl->last_start > floor)
		floor = tl->last_start;
	int64_t t = floor;
	for (;;) {
		room_at(tl, ndev, t, room);
		if (egs_share_fit(room, ndev, request, take))
			return t;
		/* The next candidate: the earliest end after t, where some room comes back. */
		int64_t next = INT64_MAX;
		for (size_t i = 0; tl && i < tl->n; i++)
			if (tl->v[i].end > t && tl->v[i].end < next)
				next = tl->v[i].end;
		if (next == INT64_MAX)
			return INT64_MAX;
		t = next;
	}
}
