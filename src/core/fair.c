/*
 * fair.c: decayed per-workspace GPU usage as a queue-ordering key; see fair.h.
 */
#include "core/fair.h"

#include "core/gpr.h"

#include <math.h>

/* The map's value: it holds its own key (the map borrows keys). */
struct ws_use {
	char workspace[EGS_NAME_MAX];
	double key;
};

static bool fair_on(const struct egs_state *st)
{
	return st->cfg.fair_half_life_s > 0;
}

double egs_fair_key(const struct egs_state *st, const char *ws)
{
	const struct ws_use *u = fair_on(st) ? egs_map_get(&st->fair, ws) : NULL;
	return u ? u->key : -INFINITY;
}

double egs_fair_decayed(const struct egs_state *st, double key, int64_t now)
{
	if (key == -INFINITY || !fair_on(st))
		return 0;
	return exp2(key - (double)now / (double)st->cfg.fair_half_life_s);
}

/* key := log2(2^key + gpu_hours * 2^(end / h)), computed without leaving the log domain. */
void egs_fair_charge(struct egs_state *st, const struct egs_gpr *g, int64_t end)
{
	if (!fair_on(st) || !g->start_ts || end <= g->start_ts)
		return;
	double gpu_hours = egs_gpr_gpus(g) * (double)(end - g->start_ts) / 3600.0;
	if (!(gpu_hours > 0))
		return;
	egs_fair_add_key(st, g->workspace, log2(gpu_hours) + (double)end / (double)st->cfg.fair_half_life_s);
}

void egs_fair_add_key(struct egs_state *st, const char *ws, double x)
{
	if (!fair_on(st) || !isfinite(x))
		return;
	struct ws_use *u = egs_map_get(&st->fair, ws);
	if (!u) {
		u = egs_malloc(sizeof(*u));
		egs_strlcpy(u->workspace, ws, sizeof(u->workspace));
		u->key = x;
		egs_map_put(&st->fair, u->workspace, u);
		return;
	}
	double hi = u->key > x ? u->key : x, lo = u->key > x ? x : u->key;
	u->key = hi + log2(1.0 + exp2(lo - hi));
}

void egs_fair_note_loaded(struct egs_state *st, const struct egs_gpr *g)
{
	egs_fair_charge(st, g, g->completion_ts ? g->completion_ts : g->exit_at);
}
