/*
 * series.h: short per-GPU time series in fixed ring buffers.  Pure: no I/O, no clock; the caller
 * hands in each sample's time.
 *
 * A series holds at most `cap` points, one per `step` seconds.  A sample whose step is the newest
 * point's step is averaged into that point; a sample of a later step starts a new point (over the
 * oldest one once the ring is full); a sample of an earlier step is dropped, so points stay in time
 * order even if a clock jumps back.  Gaps (steps without samples) simply have no point.
 *
 * A set maps GPU UUIDs to series.  Its memory bound is fixed at init: at most max_series series of
 * cap points each, sizeof(struct egs_point) (32) bytes a point plus about 100 bytes a series, with
 * each ring allocated at its GPU's first sample.  Example: 120 points of 60 s (two hours) is
 * 3.8 KiB a GPU, 3.7 MiB for 1,000 GPUs.
 */
#ifndef EGS_SERIES_H
#define EGS_SERIES_H

#include "core/common.h"
#include "core/map.h"

#define EGS_SERIES_UUID_MAX 64

/* One step of one GPU: the means of the samples that fell into it. */
struct egs_point {
	int64_t t; /* start of the step: a multiple of the set's step */
	float power_w, temp_c, util_pct, mem_used_mib;
	uint32_t n; /* samples averaged into this point */
};

/* One sample as heartbeats carry it. */
struct egs_sample {
	double power_w, temp_c, util_pct, mem_used_mib;
};

struct egs_series {
	char uuid[EGS_SERIES_UUID_MAX]; /* the set's map key */
	struct egs_point *pts;          /* cap entries, owned */
	uint32_t head, len;             /* oldest point, number of points */
};

/* Mean and maximum of each metric over a range of points. */
struct egs_series_summary {
	size_t points;
	int64_t first, last; /* times of the first and last point */
	double power_mean, power_max, temp_mean, temp_max, util_mean, util_max, mem_mean, mem_max;
};

struct egs_series_set {
	struct egs_map by_uuid; /* uuid -> struct egs_series (owned) */
	uint32_t cap;
	int64_t step;
	size_t max_series;
};

/* Initialises an empty set of series of cap points (>= 1) of step seconds (>= 1), holding at most
 * max_series GPUs.  Allocates nothing until the first sample. */
void egs_series_set_init(struct egs_series_set *set, uint32_t cap, int64_t step, size_t max_series);
/* Frees every series; the set may be initialised again. */
void egs_series_set_cleanup(struct egs_series_set *set);

/* Records one sample of GPU uuid at time t.  Returns false when it was dropped: uuid empty or too
 * long, the set already full of other GPUs, or t earlier than the newest point's step. */
bool egs_series_set_add(struct egs_series_set *set, const char *uuid, int64_t t, const struct egs_sample *s);
/* The series of uuid (borrowed, valid until the set changes) or NULL. */
const struct egs_series *egs_series_set_get(const struct egs_series_set *set, const char *uuid);
/* Forgets uuid's series; returns false when there was none. */
bool egs_series_set_remove(struct egs_series_set *set, const char *uuid);
/* Bytes allocated for series and points (the figure of the memory bound above). */
size_t egs_series_set_bytes(const struct egs_series_set *set);

/* Copies the points of s with from <= t < to into out, oldest first, at most max of them (the newest
 * max when more match).  Returns how many were copied. */
size_t egs_series_range(const struct egs_series_set *set, const struct egs_series *s, int64_t from, int64_t to,
			struct egs_point *out, size_t max);
/* Summarises the points of s with from <= t < to (weighting each point by its samples).  Returns
 * false, leaving *out zeroed, when no point falls in the range. */
bool egs_series_summarize(const struct egs_series_set *set, const struct egs_series *s, int64_t from, int64_t to,
			  struct egs_series_summary *out);

#endif
